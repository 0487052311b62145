//! Fetch (key 1): whole batches straight from the segment files, with
//! long-polling that honours `max_wait_ms` / `min_bytes` and wakes on append.
//!
//! The response is encoded around file regions (`fetch_response`): the
//! stored batches go to the socket straight from their files
//! (`sendfile`), never gathered in the heap. Finding them walks a few batch
//! headers in the page cache.
//!
//! Fetch sessions (KIP-227) are answered sessionless (session id 0), which
//! tells clients to keep sending full requests. From v13 topics are named by
//! id; an unknown id (never existed, or deleted and recreated under the same
//! name) is UNKNOWN_TOPIC_ID and never returns another topic's data.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchRequest;
use model::{Offset, PartitionId, TopicId};
use tokio::time::Instant;

use super::error::response_error;
use super::fetch_response::{self, FetchAnswer, PartitionAnswer, TopicAnswer};
use super::response::ResponseFrame;
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::{Broker, Error, Partition, Topic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(4, 16);

/// Waits longer than this are cut short, so a shutting-down broker is not
/// held by a client that asked to wait for an hour.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

struct Target {
    topic: Result<Arc<Topic>, ResponseError>,
    topic_index: usize,
    partition: i32,
    fetch_offset: i64,
    max_bytes: usize,
    current_leader_epoch: i32,
    /// Resolved once, up front.
    log: Option<Arc<Partition>>,
}

/// What the request asked for, shared with the blocking reads.
struct Plan {
    targets: Vec<Target>,
    response_max: usize,
    read_committed: bool,
}

/// Answers Fetch, waiting for data if the request asks to. With an
/// authorizer each topic needs Read (TOPIC_AUTHORIZATION_FAILED).
pub(crate) async fn handle(
    broker: &Arc<Broker>,
    access: &Access<'_>,
    correlation_id: i32,
    version: i16,
    req: FetchRequest,
    quota_cap: Option<usize>,
) -> ResponseFrame {
    if let Some(replica) = super::fetch_replica::replica_of(version, &req) {
        return super::fetch_replica::handle(broker, access, correlation_id, version, replica, req)
            .await;
    }
    // An incremental fetch against a session we never created.
    if version >= 7 && req.session_id != 0 {
        return fetch_response::refusal(
            ResponseError::FetchSessionIdNotFound,
            correlation_id,
            version,
        );
    }
    let mut topics_out = Vec::with_capacity(req.topics.len());
    let mut targets = Vec::new();
    for (ti, ft) in req.topics.iter().enumerate() {
        // By name the check comes first, so the answer does not tell
        // whether a topic the principal may not read exists; by id an
        // unknown id is UNKNOWN_TOPIC_ID either way.
        let topic = if version >= 13 {
            broker.resolve_topic_id(TopicId(ft.topic_id))
        } else if !access.topic(Operation::Read, ft.topic.as_str()) {
            Err(Error::Denied {
                kind: broker::security::acl::ResourceType::Topic,
                name: ft.topic.to_string(),
                operation: Operation::Read,
            })
        } else {
            broker.resolve_topic_name(ft.topic.as_str())
        }
        .map_err(|e| response_error(&e))
        .and_then(|t| {
            if access.topic(Operation::Read, t.name.as_str()) {
                Ok(t)
            } else {
                Err(ResponseError::TopicAuthorizationFailed)
            }
        });
        for fp in &ft.partitions {
            let log = topic
                .as_ref()
                .ok()
                .and_then(|t| t.partition(PartitionId(fp.partition)).ok().cloned());
            targets.push(Target {
                topic: topic.clone(),
                topic_index: ti,
                partition: fp.partition,
                fetch_offset: fp.fetch_offset,
                max_bytes: fp.partition_max_bytes.max(0) as usize,
                current_leader_epoch: fp.current_leader_epoch,
                log,
            });
        }
        topics_out.push(TopicAnswer {
            name: ft.topic.to_string(),
            id: ft.topic_id,
            partitions: Vec::new(),
        });
    }

    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    let min_bytes = req.min_bytes.max(0) as usize;
    // The broker's fetch.max.bytes caps what a request may ask for (KIP-541).
    let cap = broker
        .config()
        .fetch_max_bytes()
        .min(quota_cap.unwrap_or(usize::MAX));
    let plan = Arc::new(Plan {
        targets,
        response_max: if req.max_bytes <= 0 {
            cap
        } else {
            (req.max_bytes as usize).min(cap)
        },
        read_committed: req.isolation_level == 1,
    });

    // Held while the request waits for data (a gauge and the wait's
    // duration); dropped with the answer, or with the request if the
    // connection goes away.
    let mut waited = None;
    loop {
        let (results, covered, bytes, errors) = read_all(&plan);
        let waiting = plan.targets.iter().any(|t| t.log.is_some());
        let done = bytes >= min_bytes || errors || !waiting || Instant::now() >= deadline;
        if done {
            drop(waited);
            count_delivered(&plan.targets, &results, &covered);
            return fetch_response::encode(
                &assemble(topics_out, &plan.targets, results),
                correlation_id,
                version,
            );
        }
        waited.get_or_insert_with(|| broker.metrics().fetch_wait_started());
        // Wait for any partition to grow past what this read saw (an append
        // since the read ends the wait at once).
        let waits = plan.targets.iter().zip(&results).filter_map(|(t, r)| {
            let p = t.log.as_ref()?;
            Some(Box::pin(p.wait_for(Offset(r.high_watermark), deadline)))
        });
        futures::future::select_all(waits).await;
    }
}

/// Counts what the answer delivers in each partition's traffic: the
/// region's bytes, and as records the offsets it covers from the fetch
/// offset (found from batch headers, without reading records).
fn count_delivered(targets: &[Target], results: &[PartitionAnswer], covered: &[u64]) {
    for ((t, r), records) in targets.iter().zip(results).zip(covered) {
        if let (Some(p), Some(region)) = (&t.log, &r.records) {
            p.traffic().record_out(*records, region.len() as u64);
        }
    }
}

/// Locates every target's batches once. Returns per-target answers, the
/// offsets each answer covers from its fetch offset, total bytes, and
/// whether any partition had an error (which ends the wait, as in Kafka).
fn read_all(plan: &Plan) -> (Vec<PartitionAnswer>, Vec<u64>, usize, bool) {
    let mut total = 0usize;
    let mut errors = false;
    let mut out = Vec::with_capacity(plan.targets.len());
    let mut covered = Vec::with_capacity(plan.targets.len());
    for t in &plan.targets {
        let answer = match (&t.topic, &t.log) {
            (Err(code), _) => Err(*code),
            // Not a partition of the topic, or one another broker leads.
            (Ok(topic), None) => Err(match topic.partition(PartitionId(t.partition)) {
                Err(e) => response_error(&e),
                Ok(_) => response_error(&Error::UnknownPartition {
                    topic: topic.name.to_string(),
                    partition: PartitionId(t.partition),
                }),
            }),
            (Ok(_), Some(p)) => read_one(
                t,
                p,
                plan.response_max.saturating_sub(total),
                total == 0,
                plan.read_committed,
            ),
        };
        match answer {
            Ok((a, records)) => {
                errors |= a.error_code != 0;
                total += a.records.as_ref().map_or(0, |r| r.len());
                out.push(a);
                covered.push(records);
            }
            Err(code) => {
                errors = true;
                covered.push(0);
                out.push(PartitionAnswer {
                    index: t.partition,
                    error_code: code.code(),
                    high_watermark: -1,
                    last_stable_offset: -1,
                    log_start_offset: -1,
                    aborted: None,
                    records: None,
                    diverging: None,
                });
            }
        }
    }
    (out, covered, total, errors)
}

fn read_one(
    t: &Target,
    p: &Partition,
    remaining: usize,
    first: bool,
    read_committed: bool,
) -> Result<(PartitionAnswer, u64), ResponseError> {
    let epoch = p.leader_epoch().0;
    if t.current_leader_epoch >= 0 && t.current_leader_epoch != epoch {
        return Err(if t.current_leader_epoch > epoch {
            ResponseError::UnknownLeaderEpoch
        } else {
            ResponseError::FencedLeaderEpoch
        });
    }
    let log = p.log();
    let max = t.max_bytes.min(remaining);
    let answer = |hw: i64, start: i64| PartitionAnswer {
        index: t.partition,
        error_code: 0,
        high_watermark: hw,
        last_stable_offset: hw,
        log_start_offset: start,
        aborted: read_committed.then(Vec::new),
        records: None,
        diverging: None,
    };
    match p.read_region_isolated(Offset(t.fetch_offset), max, first, read_committed) {
        Ok(r) => {
            let covered = u64::try_from(r.next_offset.0 - t.fetch_offset).unwrap_or(0);
            // The aborted transactions with records among those returned,
            // for the consumer to drop (Kafka's FetchResponse contract).
            let aborted = match (&r.region, read_committed) {
                (Some(_), true) => Some(
                    log.aborted_transactions(Offset(t.fetch_offset), r.next_offset)
                        .iter()
                        .map(|a| (a.producer_id.0, a.first_offset.0))
                        .collect(),
                ),
                (None, true) => Some(Vec::new()),
                (_, false) => None,
            };
            let a = PartitionAnswer {
                records: r.region,
                last_stable_offset: r.last_stable_offset.0,
                aborted,
                ..answer(r.high_watermark.0, r.log_start_offset.0)
            };
            Ok((a, covered))
        }
        Err(
            e @ Error::Storage {
                source: storage::Error::OffsetOutOfRange { .. },
                ..
            },
        ) => {
            let a = PartitionAnswer {
                error_code: response_error(&e).code(),
                aborted: None,
                ..answer(log.high_watermark().0, log.log_start_offset().0)
            };
            Ok((a, 0))
        }
        Err(
            e @ Error::Storage {
                source: storage::Error::LogDeleted | storage::Error::LogClosed,
                ..
            },
        ) => {
            // The topic was deleted (or the broker is stopping) while the
            // fetch waited: the client learns it from its next metadata.
            tracing::debug!("fetch from {} ended: {e}", p.tp);
            Err(response_error(&e))
        }
        Err(e) => {
            tracing::warn!("fetch from {} failed: {e}", p.tp);
            Err(response_error(&e))
        }
    }
}

fn assemble(
    mut topics: Vec<TopicAnswer>,
    targets: &[Target],
    results: Vec<PartitionAnswer>,
) -> FetchAnswer {
    for (t, r) in targets.iter().zip(results) {
        topics[t.topic_index].partitions.push(r);
    }
    FetchAnswer {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        topics,
    }
}
