//! Fetch (key 1): whole batches straight from the segment files, with
//! long-polling that honours `max_wait_ms` / `min_bytes` and wakes on append.
//!
//! Fetch sessions (KIP-227) are answered sessionless (session id 0), which
//! tells clients to keep sending full requests. From v13 topics are named by
//! id; an unknown id (never existed, or deleted and recreated under the same
//! name) is UNKNOWN_TOPIC_ID and never returns another topic's data.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use model::{Offset, PartitionId, TopicId};
use tokio::time::Instant;

use super::error::response_error;
use super::Versions;
use crate::{Broker, Error, Partition, Topic};

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
}

/// Answers Fetch, waiting for data if the request asks to.
pub async fn handle(broker: &Arc<Broker>, version: i16, req: FetchRequest) -> FetchResponse {
    // An incremental fetch against a session we never created.
    if version >= 7 && req.session_id != 0 {
        return FetchResponse::default()
            .with_error_code(ResponseError::FetchSessionIdNotFound.code())
            .with_session_id(0);
    }
    let mut topics_out = Vec::with_capacity(req.topics.len());
    let mut targets = Vec::new();
    for (ti, ft) in req.topics.iter().enumerate() {
        let topic = if version >= 13 {
            let id = TopicId(ft.topic_id);
            broker.topic_by_id(id).ok_or(Error::UnknownTopicId(id))
        } else {
            model::TopicName::new(ft.topic.as_str())
                .map_err(Error::from)
                .and_then(|n| {
                    broker
                        .topic(n.as_str())
                        .ok_or_else(|| Error::UnknownTopic(n.to_string()))
                })
        }
        .map_err(|e| response_error(&e));
        for fp in &ft.partitions {
            targets.push(Target {
                topic: topic.clone(),
                topic_index: ti,
                partition: fp.partition,
                fetch_offset: fp.fetch_offset,
                max_bytes: fp.partition_max_bytes.max(0) as usize,

                current_leader_epoch: fp.current_leader_epoch,
            });
        }
        topics_out.push(
            FetchableTopicResponse::default()
                .with_topic(ft.topic.clone())
                .with_topic_id(ft.topic_id),
        );
    }
    let partitions: Vec<Option<Arc<Partition>>> = targets
        .iter()
        .map(|t| {
            t.topic
                .as_ref()
                .ok()
                .and_then(|topic| topic.partition(PartitionId(t.partition)).ok().cloned())
        })
        .collect();

    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = Instant::now() + wait;
    let min_bytes = req.min_bytes.max(0) as usize;
    // The broker's fetch.max.bytes caps what a request may ask for (KIP-541).
    let cap = broker.config().fetch_max_bytes();
    let response_max = if req.max_bytes <= 0 {
        cap
    } else {
        (req.max_bytes as usize).min(cap)
    };
    let read_committed = req.isolation_level == 1;

    loop {
        // Register for wake-ups before reading, so an append that lands
        // between the read and the wait is not missed.
        let mut waiters: Vec<Pin<Box<tokio::sync::futures::Notified<'_>>>> = partitions
            .iter()
            .flatten()
            .map(|p| {
                let mut n = Box::pin(p.appended());
                n.as_mut().enable();
                n
            })
            .collect();
        let (results, bytes, errors) =
            read_all(&targets, &partitions, response_max, read_committed);
        let done = bytes >= min_bytes || errors || waiters.is_empty() || Instant::now() >= deadline;
        if done {
            return assemble(topics_out, targets, results);
        }
        let any_append = futures::future::select_all(waiters.iter_mut().map(|w| w.as_mut()));
        tokio::select! {
            _ = any_append => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Reads every target once. Returns per-target data, total bytes, and
/// whether any partition had an error (which ends the wait, as in Kafka).
fn read_all(
    targets: &[Target],
    partitions: &[Option<Arc<Partition>>],
    response_max: usize,
    read_committed: bool,
) -> (Vec<PartitionData>, usize, bool) {
    let mut total = 0usize;
    let mut errors = false;
    let mut out = Vec::with_capacity(targets.len());
    for (t, p) in targets.iter().zip(partitions) {
        let base = PartitionData::default()
            .with_partition_index(t.partition)
            .with_preferred_read_replica(kafka_protocol::messages::BrokerId(-1));
        let data = match (&t.topic, p) {
            (Err(code), _) => Err(*code),
            (Ok(topic), None) => Err(response_error(&Error::UnknownPartition {
                topic: topic.name.to_string(),
                partition: PartitionId(t.partition),
            })),
            (Ok(_), Some(p)) => read_one(
                t,
                p,
                response_max.saturating_sub(total),
                total == 0,
                read_committed,
            ),
        };
        match data {
            Ok(d) => {
                errors |= d.error_code != 0;
                total += d.records.as_ref().map_or(0, Bytes::len);
                out.push(
                    d.with_partition_index(t.partition)
                        .with_preferred_read_replica(base.preferred_read_replica),
                );
            }
            Err(code) => {
                errors = true;
                out.push(
                    base.with_error_code(code.code())
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1)
                        .with_records(Some(Bytes::new())),
                );
            }
        }
    }
    (out, total, errors)
}

fn read_one(
    t: &Target,
    p: &Partition,
    remaining: usize,
    first: bool,
    read_committed: bool,
) -> Result<PartitionData, ResponseError> {
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
    let result = p.read(Offset(t.fetch_offset), max, first);
    let (records, hw, start) = match result {
        Ok(r) => (r.records, r.high_watermark, r.log_start_offset),
        Err(
            e @ Error::Storage {
                source: storage::Error::OffsetOutOfRange { .. },
                ..
            },
        ) => {
            let code = response_error(&e);
            return Ok(PartitionData::default()
                .with_error_code(code.code())
                .with_high_watermark(log.high_watermark().0)
                .with_last_stable_offset(log.high_watermark().0)
                .with_log_start_offset(log.log_start_offset().0)
                .with_records(Some(Bytes::new())));
        }
        Err(e) => {
            tracing::warn!("fetch from {} failed: {e}", p.tp);
            return Err(response_error(&e));
        }
    };
    Ok(PartitionData::default()
        .with_high_watermark(hw.0)
        .with_last_stable_offset(hw.0)
        .with_log_start_offset(start.0)
        .with_aborted_transactions(read_committed.then(Vec::new))
        .with_records(Some(records)))
}

fn assemble(
    mut topics: Vec<FetchableTopicResponse>,
    targets: Vec<Target>,
    results: Vec<PartitionData>,
) -> FetchResponse {
    for (t, r) in targets.into_iter().zip(results) {
        topics[t.topic_index].partitions.push(r);
    }
    FetchResponse::default()
        .with_session_id(0)
        .with_responses(topics)
}
