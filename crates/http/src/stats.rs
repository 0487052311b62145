//! Topic stats as upstream Pulsar's admin REST API reports them:
//!
//! - `GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/stats`: one
//!   non-partitioned topic or one partition (`-partition-N`);
//! - `GET .../{topic}/partitioned-stats?perPartition=true`: a partitioned
//!   topic, summed over its partitions, each partition's own stats under
//!   `partitions` when `perPartition` (the default).
//!
//! Field names and meanings are upstream's `TopicStats`; counters and rates
//! count since the partition (or subscription, producer, consumer) was
//! opened in this process. `subscriptions` holds the Pulsar subscriptions
//! (a connected Reader as a non-durable `reader-…` one) and, under
//! `kafka:<group id>` with type `Kafka`, every Kafka consumer group with a
//! committed offset on the topic: its backlog counts from that offset.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::Json;
use broker::group::coordinator::GroupView;
use broker::subscription::{SubscriptionKey, SubscriptionType};
use broker::Partition;
use model::{Offset, PartitionId};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::state::{blocking, AppState};
use crate::topic::{Addressed, TopicParts};

/// The subscription type of a Kafka group's entry.
const KAFKA_TYPE: &str = "Kafka";

/// One topic's (or partition's) stats (upstream `TopicStats`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicStats {
    msg_rate_in: f64,
    msg_throughput_in: f64,
    msg_rate_out: f64,
    msg_throughput_out: f64,
    bytes_in_counter: u64,
    msg_in_counter: u64,
    bytes_out_counter: u64,
    msg_out_counter: u64,
    average_msg_size: f64,
    msg_chunk_published: bool,
    storage_size: u64,
    backlog_size: u64,
    offloaded_storage_size: u64,
    publishers: Vec<PublisherStats>,
    waiting_publishers: u32,
    subscriptions: BTreeMap<String, SubscriptionStats>,
    replication: BTreeMap<String, serde_json::Value>,
    deduplication_status: String,
}

/// A producer (upstream `PublisherStats`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublisherStats {
    access_mode: String,
    msg_rate_in: f64,
    msg_throughput_in: f64,
    average_msg_size: f64,
    chunked_message_rate: f64,
    producer_id: u64,
    supports_partial_producer: bool,
    producer_name: String,
    address: String,
    connected_since: String,
    client_version: String,
    metadata: BTreeMap<String, String>,
}

/// A subscription (upstream `SubscriptionStats`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStats {
    msg_rate_out: f64,
    msg_throughput_out: f64,
    bytes_out_counter: u64,
    msg_out_counter: u64,
    msg_rate_redeliver: f64,
    chunked_message_rate: f64,
    msg_backlog: u64,
    backlog_size: u64,
    msg_backlog_no_delayed: u64,
    blocked_subscription_on_unacked_msgs: bool,
    msg_delayed: u64,
    unacked_messages: u64,
    #[serde(rename = "type")]
    sub_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    active_consumer_name: Option<String>,
    msg_rate_expired: f64,
    total_msg_expired: u64,
    consumers: Vec<ConsumerStats>,
    is_durable: bool,
    is_replicated: bool,
    allow_out_of_order_delivery: bool,
    non_contiguous_deleted_messages_ranges: u64,
    non_contiguous_deleted_messages_ranges_serialized_size: u64,
    subscription_properties: BTreeMap<String, String>,
}

/// A consumer (upstream `ConsumerStats`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerStats {
    msg_rate_out: f64,
    msg_throughput_out: f64,
    bytes_out_counter: u64,
    msg_out_counter: u64,
    msg_rate_redeliver: f64,
    chunked_message_rate: f64,
    consumer_name: String,
    available_permits: u64,
    unacked_messages: u64,
    blocked_consumer_on_unacked_msgs: bool,
    address: String,
    connected_since: String,
    client_version: String,
    metadata: BTreeMap<String, String>,
}

impl TopicStats {
    /// Adds a partition's stats into a partitioned topic's (upstream's
    /// `PartitionedTopicStatsImpl.add`): sums, publishers side by side,
    /// subscriptions merged by name.
    fn add(&mut self, p: &TopicStats) {
        self.msg_rate_in += p.msg_rate_in;
        self.msg_throughput_in += p.msg_throughput_in;
        self.msg_rate_out += p.msg_rate_out;
        self.msg_throughput_out += p.msg_throughput_out;
        self.bytes_in_counter += p.bytes_in_counter;
        self.msg_in_counter += p.msg_in_counter;
        self.bytes_out_counter += p.bytes_out_counter;
        self.msg_out_counter += p.msg_out_counter;
        self.storage_size += p.storage_size;
        self.backlog_size += p.backlog_size;
        self.waiting_publishers += p.waiting_publishers;
        self.publishers.extend(p.publishers.iter().cloned());
        self.average_msg_size = average(self.msg_throughput_in, self.msg_rate_in);
        self.deduplication_status = p.deduplication_status.clone();
        for (name, s) in &p.subscriptions {
            match self.subscriptions.get_mut(name) {
                Some(mine) => mine.add(s),
                None => {
                    self.subscriptions.insert(name.clone(), s.clone());
                }
            }
        }
    }
}

impl SubscriptionStats {
    fn add(&mut self, s: &SubscriptionStats) {
        self.msg_rate_out += s.msg_rate_out;
        self.msg_throughput_out += s.msg_throughput_out;
        self.bytes_out_counter += s.bytes_out_counter;
        self.msg_out_counter += s.msg_out_counter;
        self.msg_backlog += s.msg_backlog;
        self.backlog_size += s.backlog_size;
        self.msg_backlog_no_delayed += s.msg_backlog_no_delayed;
        self.unacked_messages += s.unacked_messages;
        self.non_contiguous_deleted_messages_ranges += s.non_contiguous_deleted_messages_ranges;
        self.consumers.extend(s.consumers.iter().cloned());
        if self.active_consumer_name.is_none() {
            self.active_consumer_name = s.active_consumer_name.clone();
        }
    }
}

fn average(bytes_per_sec: f64, msgs_per_sec: f64) -> f64 {
    if msgs_per_sec > 0.0 {
        bytes_per_sec / msgs_per_sec
    } else {
        0.0
    }
}

/// RFC 3339 UTC with milliseconds, as upstream's dates read.
fn date(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}

/// The stats of partition `n` of the addressed topic.
fn partition_stats(
    state: &AppState,
    a: &Addressed,
    n: u32,
    now: Instant,
) -> Result<TopicStats, ApiError> {
    let broker = &state.broker;
    let partition: Arc<Partition> = a.topic.partition(PartitionId(n as i32))?.clone();
    let log = partition.log();
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let size_from = |o: Offset| log.size_from(o.max(start)).unwrap_or(0);
    let (counts, traffic) = (partition.traffic().counts(), partition.traffic().rates(now));
    let topic_name = a.topic.name.as_str();
    let front_end = state.config.pulsar.as_ref();

    let publishers = front_end
        .map(|f| f.publishers(&partition.tp))
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let r = p.traffic.rates(now);
            PublisherStats {
                access_mode: format!("{:?}", p.access_mode),
                msg_rate_in: r.records_in,
                msg_throughput_in: r.bytes_in,
                average_msg_size: average(r.bytes_in, r.records_in),
                chunked_message_rate: 0.0,
                producer_id: p.producer_id,
                supports_partial_producer: false,
                producer_name: p.name.clone(),
                address: p.client.address.clone(),
                connected_since: date(p.attached_ms),
                client_version: p.client.client_version.clone(),
                metadata: BTreeMap::new(),
            }
        })
        .collect();

    let mut subscriptions = BTreeMap::new();
    let mut slowest: Option<Offset> = None;
    for s in broker.subscriptions().list(topic_name, n as i32, end) {
        let key = SubscriptionKey::new(topic_name, n as i32, s.name.clone());
        let (sc, sr) = broker
            .subscriptions()
            .traffic(&key, now)
            .unwrap_or_default();
        let views = front_end.map(|f| f.consumers(&key)).unwrap_or_default();
        let consumers = s
            .consumers
            .iter()
            .map(|c| {
                let view = views.iter().find(|v| v.id == c.id);
                let (cc, cr) = view
                    .map(|v| (v.traffic.counts(), v.traffic.rates(now)))
                    .unwrap_or_default();
                ConsumerStats {
                    msg_rate_out: cr.records_out,
                    msg_throughput_out: cr.bytes_out,
                    bytes_out_counter: cc.bytes_out,
                    msg_out_counter: cc.records_out,
                    msg_rate_redeliver: 0.0,
                    chunked_message_rate: 0.0,
                    consumer_name: c.name.clone(),
                    available_permits: c.permits,
                    unacked_messages: c.unacked as u64,
                    blocked_consumer_on_unacked_msgs: false,
                    address: view.map(|v| v.client.address.clone()).unwrap_or_default(),
                    connected_since: view.map(|v| date(v.attached_ms)).unwrap_or_default(),
                    client_version: view
                        .map(|v| v.client.client_version.clone())
                        .unwrap_or_default(),
                    metadata: BTreeMap::new(),
                }
            })
            .collect::<Vec<_>>();
        let active_consumer_name = s
            .sub_type
            .single_active()
            .then(|| {
                s.consumers
                    .iter()
                    .find(|c| c.active)
                    .map(|c| c.name.clone())
            })
            .flatten();
        if s.durable {
            slowest = Some(slowest.map_or(s.mark_delete, |o| o.min(s.mark_delete)));
        }
        subscriptions.insert(
            s.name.clone(),
            SubscriptionStats {
                msg_rate_out: sr.records_out,
                msg_throughput_out: sr.bytes_out,
                bytes_out_counter: sc.bytes_out,
                msg_out_counter: sc.records_out,
                msg_backlog: s.backlog,
                backlog_size: if s.backlog == 0 {
                    0
                } else {
                    size_from(s.mark_delete)
                },
                msg_backlog_no_delayed: s.backlog,
                unacked_messages: s.consumers.iter().map(|c| c.unacked as u64).sum(),
                sub_type: subscription_type_name(s.sub_type),
                active_consumer_name,
                consumers,
                is_durable: s.durable,
                non_contiguous_deleted_messages_ranges: s.acked_ranges as u64,
                ..Default::default()
            },
        );
    }
    let committed_here = broker
        .coordinators_here()
        .iter()
        .flat_map(|c| c.groups().committed_on(topic_name, n as i32))
        .collect::<Vec<_>>();
    for (group, committed) in committed_here {
        let at = Offset(committed.offset).max(start).min(end);
        slowest = Some(slowest.map_or(at, |o| o.min(at)));
        let backlog = (end.0 - at.0).max(0) as u64;
        subscriptions.insert(
            format!("kafka:{group}"),
            SubscriptionStats {
                msg_backlog: backlog,
                backlog_size: if backlog == 0 { 0 } else { size_from(at) },
                msg_backlog_no_delayed: backlog,
                sub_type: KAFKA_TYPE.into(),
                consumers: kafka_members(state, &group, &a.topic, n),
                is_durable: true,
                ..Default::default()
            },
        );
    }
    Ok(TopicStats {
        msg_rate_in: traffic.records_in,
        msg_throughput_in: traffic.bytes_in,
        msg_rate_out: traffic.records_out,
        msg_throughput_out: traffic.bytes_out,
        bytes_in_counter: counts.bytes_in,
        msg_in_counter: counts.records_in,
        bytes_out_counter: counts.bytes_out,
        msg_out_counter: counts.records_out,
        average_msg_size: average(traffic.bytes_in, traffic.records_in),
        storage_size: log.size_bytes(),
        backlog_size: slowest.map_or(0, size_from),
        publishers,
        subscriptions,
        // Named producers' resent sequence ids are always recognised.
        deduplication_status: "Enabled".into(),
        ..Default::default()
    })
}

fn subscription_type_name(t: SubscriptionType) -> String {
    t.to_string()
}

/// The members of Kafka group `group` assigned partition `n` of `topic`,
/// as consumers (name = client id, address = client host).
fn kafka_members(
    state: &AppState,
    group: &str,
    topic: &broker::Topic,
    n: u32,
) -> Vec<ConsumerStats> {
    let member = |client_id: &str, host: &str| ConsumerStats {
        msg_rate_out: 0.0,
        msg_throughput_out: 0.0,
        bytes_out_counter: 0,
        msg_out_counter: 0,
        msg_rate_redeliver: 0.0,
        chunked_message_rate: 0.0,
        consumer_name: client_id.to_string(),
        available_permits: 0,
        unacked_messages: 0,
        blocked_consumer_on_unacked_msgs: false,
        address: host.to_string(),
        connected_since: String::new(),
        client_version: String::new(),
        metadata: BTreeMap::new(),
    };
    let described = state
        .broker
        .coordinator(group)
        .ok()
        .and_then(|c| c.groups().describe(group));
    match described {
        Some(GroupView::Consumer(g)) => g
            .members
            .iter()
            .filter(|m| {
                m.assignment
                    .get(&topic.id)
                    .is_some_and(|p| p.contains(&(n as i32)))
            })
            .map(|m| member(&m.client_id, &m.client_host))
            .collect(),
        Some(GroupView::Classic(g)) => g
            .members
            .iter()
            .filter(|m| {
                crate::kafka_assignment::assigned(&m.assignment).is_some_and(|a| {
                    a.iter()
                        .any(|(t, p)| t == topic.name.as_str() && p.contains(&(n as i32)))
                })
            })
            .map(|m| member(&m.client_id, &m.client_host))
            .collect(),
        None => Vec::new(),
    }
}

/// Query of the partitioned stats.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionedQuery {
    #[serde(default = "yes")]
    pub(crate) per_partition: bool,
}

fn yes() -> bool {
    true
}

/// `GET .../{topic}/stats`.
pub async fn stats(
    State(state): State<Arc<AppState>>,
    path: Result<Path<TopicParts>, PathRejection>,
) -> Result<Json<TopicStats>, ApiError> {
    let parts = TopicParts::from_path(path)?;
    let stats = blocking(move || {
        let a = Addressed::resolve(&state.broker, &parts)?;
        if a.is_partitioned_base() {
            // As upstream: the partitioned topic itself is not a topic;
            // its stats are partitioned-stats.
            return Err(ApiError::not_found("Topic not found"));
        }
        partition_stats(&state, &a, a.partitions()[0], Instant::now())
    })
    .await??;
    Ok(Json(stats))
}

/// A partitioned topic's stats (upstream `PartitionedTopicStats`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionedStats {
    #[serde(flatten)]
    total: TopicStats,
    metadata: serde_json::Value,
    partitions: BTreeMap<String, TopicStats>,
}

/// `GET .../{topic}/partitioned-stats`.
pub async fn partitioned_stats(
    State(state): State<Arc<AppState>>,
    path: Result<Path<TopicParts>, PathRejection>,
    query: Result<Query<PartitionedQuery>, QueryRejection>,
) -> Result<Json<PartitionedStats>, ApiError> {
    let parts = TopicParts::from_path(path)?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let stats = blocking(move || {
        let a = Addressed::resolve(&state.broker, &parts)?;
        if !a.is_partitioned_base() {
            return Err(ApiError::not_found(format!(
                "Partitioned Topic not found: {} is not a partitioned topic",
                parts.full_name()
            )));
        }
        let now = Instant::now();
        let mut each = Vec::new();
        for n in a.partitions() {
            each.push((a.partition_name(n), partition_stats(&state, &a, n, now)?));
        }
        Ok(PartitionedStats::of(each, &query))
    })
    .await??;
    Ok(Json(stats))
}

impl PartitionedStats {
    /// The partitioned topic's stats from each partition's (by name, in
    /// partition order), as the query asks.
    pub(crate) fn of(
        each: Vec<(String, TopicStats)>,
        query: &PartitionedQuery,
    ) -> PartitionedStats {
        let mut total = TopicStats::default();
        let mut partitions = BTreeMap::new();
        let count = each.len();
        for (name, p) in each {
            total.add(&p);
            if query.per_partition {
                partitions.insert(name, p);
            }
        }
        PartitionedStats {
            total,
            metadata: serde_json::json!({ "partitions": count }),
            partitions,
        }
    }
}

impl TopicStats {
    /// Whether producers are attached or a Pulsar subscription (a Reader's
    /// included) has consumers, as [`broker::Broker::topic_in_use`] judges
    /// a partition of this broker: a delete without `force` is refused
    /// then. Kafka groups listed among the subscriptions do not count.
    pub(crate) fn in_use(&self) -> bool {
        !self.publishers.is_empty()
            || self
                .pulsar_subscriptions()
                .any(|(_, s)| !s.consumers.is_empty())
    }

    /// Whether Pulsar subscription `name` is here, and if so whether
    /// consumers are connected to it.
    pub(crate) fn subscription_connected(&self, name: &str) -> Option<bool> {
        self.pulsar_subscriptions()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, s)| !s.consumers.is_empty())
    }

    /// The subscriptions that are Pulsar's (not a Kafka group's entry).
    fn pulsar_subscriptions(&self) -> impl Iterator<Item = (&String, &SubscriptionStats)> {
        self.subscriptions
            .iter()
            .filter(|(_, s)| s.sub_type != KAFKA_TYPE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_utc_with_millis() {
        assert_eq!(date(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(date(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn partitions_add_up_and_subscriptions_merge_by_name() {
        let sub = |backlog, consumers: usize| SubscriptionStats {
            msg_backlog: backlog,
            consumers: vec![
                ConsumerStats {
                    msg_rate_out: 0.0,
                    msg_throughput_out: 0.0,
                    bytes_out_counter: 0,
                    msg_out_counter: 0,
                    msg_rate_redeliver: 0.0,
                    chunked_message_rate: 0.0,
                    consumer_name: "c".into(),
                    available_permits: 0,
                    unacked_messages: 0,
                    blocked_consumer_on_unacked_msgs: false,
                    address: String::new(),
                    connected_since: String::new(),
                    client_version: String::new(),
                    metadata: BTreeMap::new(),
                };
                consumers
            ],
            sub_type: "Shared".into(),
            is_durable: true,
            ..Default::default()
        };
        let p0 = TopicStats {
            msg_in_counter: 3,
            msg_rate_in: 2.0,
            msg_throughput_in: 20.0,
            storage_size: 100,
            subscriptions: [("s".to_string(), sub(4, 1))].into(),
            ..Default::default()
        };
        let p1 = TopicStats {
            msg_in_counter: 5,
            msg_rate_in: 2.0,
            msg_throughput_in: 60.0,
            storage_size: 50,
            subscriptions: [("s".to_string(), sub(1, 2)), ("t".to_string(), sub(7, 0))].into(),
            ..Default::default()
        };
        let mut total = TopicStats::default();
        total.add(&p0);
        total.add(&p1);
        assert_eq!((total.msg_in_counter, total.storage_size), (8, 150));
        assert_eq!(total.average_msg_size, 20.0);
        assert_eq!(total.subscriptions["s"].msg_backlog, 5);
        assert_eq!(total.subscriptions["s"].consumers.len(), 3);
        assert_eq!(total.subscriptions["t"].msg_backlog, 7);
    }
}
