//! Fetch (key 1) from a follower replica (`replica_id` ≥ 0 before v15,
//! `ReplicaState.replica_id` from v15): the leader answers from its log up
//! to the log end (not the high watermark), records the follower's
//! progress (its fetch offset is its log end: the high watermark and the
//! ISR move with it), and tells a follower whose log diverged where to
//! truncate (v12+ `diverging_epoch`). Needs ClusterAction on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED), as Kafka's replica fetches do.

use std::sync::Arc;
use std::time::Duration;

use broker::replica::{FetchRequest, ServedFetch, ThrottleSide};
use broker::security::acl::Operation;
use broker::{Broker, Partition};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchRequest as WireFetch;
use model::{LeaderEpoch, NodeId, Offset, PartitionId, TopicId};
use tokio::time::Instant;

use super::error::response_error;
use super::fetch_response::{self, FetchAnswer, PartitionAnswer, TopicAnswer};
use super::response::ResponseFrame;
use crate::authz::Access;

/// The longest a follower's fetch waits for new records.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

struct Target {
    topic_index: usize,
    partition: i32,
    /// The partition, or why not.
    hosted: Result<Arc<Partition>, ResponseError>,
    request: FetchRequest,
    max_bytes: usize,
}

/// The replica a Fetch comes from, if from one.
pub(crate) fn replica_of(version: i16, req: &WireFetch) -> Option<i32> {
    let id = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    (id >= 0).then_some(id)
}

/// Answers a follower's Fetch.
pub(crate) async fn handle(
    broker: &Arc<Broker>,
    access: &Access<'_>,
    correlation_id: i32,
    version: i16,
    replica: i32,
    req: WireFetch,
) -> ResponseFrame {
    if !access.cluster(Operation::ClusterAction) {
        return fetch_response::refusal(
            ResponseError::ClusterAuthorizationFailed,
            correlation_id,
            version,
        );
    }
    let mut topics = Vec::with_capacity(req.topics.len());
    let mut targets = Vec::new();
    for (ti, ft) in req.topics.iter().enumerate() {
        let topic = if version >= 13 {
            broker.resolve_topic_id(TopicId(ft.topic_id))
        } else {
            broker.resolve_topic_name(ft.topic.as_str())
        }
        .map_err(|e| response_error(&e));
        for fp in &ft.partitions {
            let hosted = topic.as_ref().map_err(|e| *e).and_then(|t| {
                t.hosted_partition(PartitionId(fp.partition))
                    .cloned()
                    .ok_or(ResponseError::NotLeaderOrFollower)
            });
            targets.push(Target {
                topic_index: ti,
                partition: fp.partition,
                hosted,
                request: FetchRequest {
                    replica: NodeId(replica),
                    leader_epoch: LeaderEpoch(fp.current_leader_epoch),
                    fetch_id: 0,
                    fetch_offset: Offset(fp.fetch_offset),
                    last_fetched_epoch: (version >= 12 && fp.last_fetched_epoch >= 0)
                        .then_some(LeaderEpoch(fp.last_fetched_epoch)),
                },
                max_bytes: fp.partition_max_bytes.max(0) as usize,
            });
        }
        topics.push(TopicAnswer {
            name: ft.topic.to_string(),
            id: ft.topic_id,
            partitions: Vec::new(),
        });
    }
    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    let response_max = if req.max_bytes <= 0 {
        usize::MAX
    } else {
        req.max_bytes as usize
    };
    loop {
        let (answers, bytes) = serve_all(broker, &targets, response_max);
        // A refusal or a diverged log is answered at once.
        let urgent = answers
            .iter()
            .any(|a| a.error_code != 0 || a.diverging.is_some());
        if bytes > 0 || urgent || Instant::now() >= deadline {
            for (t, a) in targets.iter().zip(answers) {
                topics[t.topic_index].partitions.push(a);
            }
            let answer = FetchAnswer {
                topics,
                ..FetchAnswer::default()
            };
            return fetch_response::encode(&answer, correlation_id, version);
        }
        // Nothing new: wait for a record past any follower's fetch offset.
        // A partition with records past it that got none was held back by
        // the leader's throttle: its wait is the throttle's (waiting on
        // its log end would end at once, and the request would spin).
        let held_back = (Instant::now()
            + broker
                .replication_throttle_delay(ThrottleSide::Leader)
                .max(Duration::from_millis(1)))
        .min(deadline);
        let waits = targets.iter().filter_map(|t| {
            let p = t.hosted.as_ref().ok()?;
            let wait: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
                if p.log().log_end_offset() > t.request.fetch_offset {
                    Box::pin(tokio::time::sleep_until(held_back))
                } else {
                    Box::pin(async move {
                        p.wait_for_log_end(t.request.fetch_offset, deadline).await;
                    })
                };
            Some(wait)
        });
        futures::future::select_all(waits).await;
    }
}

/// Serves every target once: its answers and their total bytes.
fn serve_all(
    broker: &Broker,
    targets: &[Target],
    response_max: usize,
) -> (Vec<PartitionAnswer>, usize) {
    let mut total = 0usize;
    let mut out = Vec::with_capacity(targets.len());
    for t in targets {
        let error = |code: ResponseError| PartitionAnswer {
            index: t.partition,
            error_code: code.code(),
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted: None,
            records: None,
            diverging: None,
        };
        let p = match &t.hosted {
            Ok(p) => p,
            Err(code) => {
                out.push(error(*code));
                continue;
            }
        };
        // At least one whole batch (KIP-74); none only for a throttled
        // replica over its rate (the broker's decision).
        let max = t.max_bytes.min(response_max.saturating_sub(total)).max(1);
        let answer = match broker.serve_replica_fetch(p, &t.request, max) {
            Ok(ServedFetch::Records {
                region,
                high_watermark,
                log_start_offset,
            }) => {
                total += region.as_ref().map_or(0, |r| r.len());
                PartitionAnswer {
                    index: t.partition,
                    error_code: 0,
                    high_watermark: high_watermark.0,
                    last_stable_offset: p.log().last_stable_offset().0,
                    log_start_offset: log_start_offset.0,
                    aborted: None,
                    records: region,
                    diverging: None,
                }
            }
            Ok(ServedFetch::OutOfRange { log_start_offset }) => PartitionAnswer {
                log_start_offset: log_start_offset.0,
                high_watermark: p.log().high_watermark().0,
                last_stable_offset: p.log().last_stable_offset().0,
                ..error(ResponseError::OffsetOutOfRange)
            },
            Ok(ServedFetch::Diverging {
                epoch,
                end_offset,
                high_watermark,
            }) => PartitionAnswer {
                index: t.partition,
                error_code: 0,
                high_watermark: high_watermark.0,
                last_stable_offset: p.log().last_stable_offset().0,
                log_start_offset: p.log().log_start_offset().0,
                aborted: None,
                records: None,
                diverging: Some((epoch.0, end_offset.0)),
            },
            // With the log's bounds, so a follower past the leader's log
            // end (or before its start) learns where the log is.
            Err(e) => PartitionAnswer {
                log_start_offset: p.log().log_start_offset().0,
                high_watermark: p.log().high_watermark().0,
                ..error(response_error(&e))
            },
        };
        out.push(answer);
    }
    (out, total)
}
