//! Broker state sampled at scrape time: per partition its traffic
//! counters ([`crate::traffic::Traffic`]) and log figures, per consumer
//! group and partition the committed offset and lag, per subscription its
//! backlog and consumers. Collected into plain values first (short lock
//! holds, no I/O), then encoded.

use std::collections::HashMap;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabel, EncodeLabelSet, LabelSetEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::traffic::TrafficCounts;
use crate::Broker;

/// One partition's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSample {
    /// Topic (its Kafka name).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Records and bytes in and out since the partition was opened.
    pub traffic: TrafficCounts,
    /// Bytes over all segments.
    pub size_bytes: u64,
    /// Segments, the active one included.
    pub segments: u64,
    /// First offset that can be read.
    pub log_start_offset: i64,
    /// Offset the next record will get.
    pub log_end_offset: i64,
}

/// A consumer group's position on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffsetSample {
    /// Group id.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The committed offset (the next record to consume).
    pub committed_offset: i64,
    /// Records between it and the log end offset.
    pub lag: u64,
}

/// One subscription (a Pulsar subscription or Reader) on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionSample {
    /// Topic (its Kafka name).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Subscription name.
    pub subscription: String,
    /// `Exclusive`, `Shared`, `Failover` or `Key_Shared`.
    pub sub_type: String,
    /// False for Readers.
    pub durable: bool,
    /// Messages not yet acknowledged.
    pub backlog: u64,
    /// Attached consumers.
    pub consumers: u64,
}

/// Everything sampled in one scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateSample {
    /// Every partition of every topic, by topic name and index.
    pub partitions: Vec<PartitionSample>,
    /// Every committed offset of every group on a live partition.
    pub group_offsets: Vec<GroupOffsetSample>,
    /// Every subscription of every partition.
    pub subscriptions: Vec<SubscriptionSample>,
}

/// Records between a committed offset and the log end (never negative: a
/// commit past the end, which Kafka allows, is no lag).
pub fn lag(committed: i64, log_end: i64) -> u64 {
    u64::try_from(log_end.saturating_sub(committed)).unwrap_or(0)
}

impl StateSample {
    /// Samples `broker` now.
    pub fn collect(broker: &Broker) -> StateSample {
        let mut sample = StateSample::default();
        // Topic → partition index → log end, of the partitions held here.
        let mut ends: HashMap<String, HashMap<i32, i64>> = HashMap::new();
        let subscriptions = broker.subscriptions();
        for topic in broker.topics() {
            let mut topic_ends = HashMap::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let log = p.log();
                let end = log.log_end_offset();
                let partition = p.tp.partition.0;
                sample.partitions.push(PartitionSample {
                    topic: topic.name.to_string(),
                    partition,
                    traffic: p.traffic().counts(),
                    size_bytes: log.size_bytes(),
                    segments: log.segment_count() as u64,
                    log_start_offset: log.log_start_offset().0,
                    log_end_offset: end.0,
                });
                topic_ends.insert(partition, end.0);
            }
            ends.insert(topic.name.to_string(), topic_ends);
        }
        let end_of = |topic: &str, partition: i32| {
            ends.get(topic)?.get(&partition).map(|&e| model::Offset(e))
        };
        for (key, s) in subscriptions.list_all(end_of) {
            sample.subscriptions.push(SubscriptionSample {
                topic: key.topic,
                partition: key.partition,
                subscription: s.name,
                sub_type: s.sub_type.to_string(),
                durable: s.durable,
                backlog: s.backlog,
                consumers: s.consumers.len() as u64,
            });
        }
        for coordinator in broker.coordinators_here() {
            let groups = coordinator.groups();
            for listing in groups.list() {
                for (topic, partition, committed) in groups.fetch_offsets(&listing.group_id, None) {
                    let Some(committed) = committed else { continue };
                    let end = ends.get(topic.as_str()).and_then(|e| e.get(&partition));
                    // Offsets of a partition that no longer exists are not lag.
                    let Some(&end) = end else { continue };
                    sample.group_offsets.push(GroupOffsetSample {
                        group: listing.group_id.clone(),
                        topic,
                        partition,
                        committed_offset: committed.offset,
                        lag: lag(committed.offset, end),
                    });
                }
            }
        }
        sample
    }

    /// Appends the sample in the OpenMetrics text format (names prefixed
    /// `magnetar_`, no `# EOF`).
    pub fn encode_into(self, out: &mut String) -> fmt::Result {
        let mut registry = Registry::with_prefix(super::PREFIX);
        registry.register_collector(Box::new(self));
        prometheus_client::encoding::text::encode_registry(out, &registry)
    }
}

/// `topic`, `partition`.
struct PartitionLabels<'a> {
    topic: &'a str,
    partition: i32,
}

impl EncodeLabelSet for PartitionLabels<'_> {
    fn encode(&self, e: &mut LabelSetEncoder) -> fmt::Result {
        ("topic", self.topic).encode(e.encode_label())?;
        ("partition", self.partition).encode(e.encode_label())
    }
}

fn partition_labels(p: &PartitionSample) -> PartitionLabels<'_> {
    PartitionLabels {
        topic: &p.topic,
        partition: p.partition,
    }
}

/// `group`, `topic`, `partition`.
struct GroupLabels<'a> {
    group: &'a str,
    topic: &'a str,
    partition: i32,
}

impl EncodeLabelSet for GroupLabels<'_> {
    fn encode(&self, e: &mut LabelSetEncoder) -> fmt::Result {
        ("group", self.group).encode(e.encode_label())?;
        ("topic", self.topic).encode(e.encode_label())?;
        ("partition", self.partition).encode(e.encode_label())
    }
}

fn group_labels(g: &GroupOffsetSample) -> GroupLabels<'_> {
    GroupLabels {
        group: &g.group,
        topic: &g.topic,
        partition: g.partition,
    }
}

/// `topic`, `partition`, `subscription`, `type`, `durable`.
struct SubscriptionLabels<'a>(&'a SubscriptionSample);

impl EncodeLabelSet for SubscriptionLabels<'_> {
    fn encode(&self, e: &mut LabelSetEncoder) -> fmt::Result {
        let s = self.0;
        ("topic", s.topic.as_str()).encode(e.encode_label())?;
        ("partition", s.partition).encode(e.encode_label())?;
        ("subscription", s.subscription.as_str()).encode(e.encode_label())?;
        ("type", s.sub_type.as_str()).encode(e.encode_label())?;
        ("durable", s.durable).encode(e.encode_label())
    }
}

/// How a family's values are written.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// One family: its descriptor and a sample per series (nothing at all
/// when there are no series, as `prometheus-client` does for its own
/// families).
fn family<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    (name, help, unit, kind): (&str, &str, Option<&Unit>, Kind),
    series: impl IntoIterator<Item = (L, u64)>,
) -> fmt::Result {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let metric_type = match kind {
        Kind::Counter => MetricType::Counter,
        Kind::Gauge => MetricType::Gauge,
    };
    let mut m = encoder.encode_descriptor(name, help, unit, metric_type)?;
    for (labels, value) in series {
        let mut e = m.encode_family(&labels)?;
        match kind {
            Kind::Counter => e.encode_counter::<NoLabelSet, _, u64>(&value, None)?,
            Kind::Gauge => e.encode_gauge(&value)?,
        }
    }
    Ok(())
}

/// [`family`] over signed values (offsets).
fn signed_gauge<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, i64)>,
) -> fmt::Result {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        m.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

/// Name, help, unit and value of one traffic counter family.
type TrafficFamily<'a> = (&'a str, &'a str, &'a Unit, fn(&TrafficCounts) -> u64);

impl Collector for StateSample {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let records = Unit::Other("records".into());
        let parts = &self.partitions;
        let traffic: [TrafficFamily; 4] = [
            (
                "partition_in",
                "Bytes appended to the partition (record batches as stored) since it was opened",
                &Unit::Bytes,
                |t| t.bytes_in,
            ),
            (
                "partition_out",
                "Bytes delivered from the partition (Kafka Fetch record batches, Pulsar message frames) since it was opened",
                &Unit::Bytes,
                |t| t.bytes_out,
            ),
            (
                "partition_in",
                "Records appended to the partition since it was opened",
                &records,
                |t| t.records_in,
            ),
            (
                "partition_out",
                "Records delivered from the partition (Kafka: offsets a Fetch answer covers from the fetch offset; Pulsar: messages sent) since it was opened",
                &records,
                |t| t.records_out,
            ),
        ];
        for (name, help, unit, value) in traffic {
            family(
                &mut encoder,
                (name, help, Some(unit), Kind::Counter),
                parts
                    .iter()
                    .map(|p| (partition_labels(p), value(&p.traffic))),
            )?;
        }
        family(
            &mut encoder,
            (
                "log_size",
                "Bytes of the partition's log over all its segments",
                Some(&Unit::Bytes),
                Kind::Gauge,
            ),
            parts.iter().map(|p| (partition_labels(p), p.size_bytes)),
        )?;
        family(
            &mut encoder,
            (
                "log_segments",
                "Segments of the partition's log, the active one included",
                None,
                Kind::Gauge,
            ),
            parts.iter().map(|p| (partition_labels(p), p.segments)),
        )?;
        signed_gauge(
            &mut encoder,
            "log_start_offset",
            "The partition's log start offset (first readable offset)",
            parts
                .iter()
                .map(|p| (partition_labels(p), p.log_start_offset)),
        )?;
        signed_gauge(
            &mut encoder,
            "log_end_offset",
            "The partition's log end offset (the next record's offset; the high watermark on one node)",
            parts.iter().map(|p| (partition_labels(p), p.log_end_offset)),
        )?;
        signed_gauge(
            &mut encoder,
            "consumer_group_committed_offset",
            "A Kafka consumer group's committed offset on a partition",
            self.group_offsets
                .iter()
                .map(|g| (group_labels(g), g.committed_offset)),
        )?;
        family(
            &mut encoder,
            (
                "consumer_group_lag",
                "Records between a Kafka consumer group's committed offset and the partition's log end offset",
                None,
                Kind::Gauge,
            ),
            self.group_offsets.iter().map(|g| (group_labels(g), g.lag)),
        )?;
        family(
            &mut encoder,
            (
                "subscription_backlog",
                "Messages of a Pulsar subscription (or Reader) not yet acknowledged",
                None,
                Kind::Gauge,
            ),
            self.subscriptions
                .iter()
                .map(|s| (SubscriptionLabels(s), s.backlog)),
        )?;
        family(
            &mut encoder,
            (
                "subscription_consumers",
                "Consumers attached to a Pulsar subscription (or Reader)",
                None,
                Kind::Gauge,
            ),
            self.subscriptions
                .iter()
                .map(|s| (SubscriptionLabels(s), s.consumers)),
        )?;
        Ok(())
    }
}
