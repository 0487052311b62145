//! Produce (key 0): append producer batches, stored as sent unless the
//! topic's `compression.type` or `message.timestamp.type` asks otherwise
//! (see [`storage::Log::append`]).
//!
//! Produce never creates a topic. Each partition is appended on its own, so
//! one bad partition (corrupt batch, disk error) fails only itself.
//!
//! Appends are buffered writes into the page cache and run where the
//! request is handled; what waits on the disk (the fsync after a segment
//! roll, a `flush.messages` flush) runs on the blocking pool: in the
//! background for a roll, awaited before the answer for a flush policy.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use model::{LeaderEpoch, Offset, PartitionId, TopicId};
use storage::{AppendOutcome, SyncWork};
use tracing::warn;

use super::error::{record_errors, records_refused_message, response_error};
use super::{Outcome, Versions};
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::{now_ms, Broker, Error, Partition, Topic};

/// Implemented versions (v13 addresses topics by id).
pub const VERSIONS: Versions = Versions::new(3, 13);

/// Answers Produce. With acks=0 there is no response; if a partition
/// failed the connection is closed instead, as Kafka does, so the producer
/// notices and refreshes its metadata rather than writing into the void.
/// With an authorizer, every partition of a transactional request needs
/// Write on its transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
/// and each topic needs Write (TOPIC_AUTHORIZATION_FAILED).
pub(crate) async fn handle(
    broker: &Arc<Broker>,
    access: &Access<'_>,
    version: i16,
    req: ProduceRequest,
) -> Outcome {
    let acks = req.acks;
    let timeout = std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut disk_work = Vec::new();
    // acks=all appends to replicated partitions, answered once committed:
    // (topic index, partition index in it, partition, offset to reach).
    let mut commits: Vec<(usize, usize, Arc<Partition>, Offset, LeaderEpoch)> = Vec::new();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    let transactional_id = req
        .transactional_id
        .as_ref()
        .map(|t| t.to_string())
        .filter(|t| !t.is_empty());
    let request_error = if !matches!(acks, -1..=1) {
        Some(ResponseError::InvalidRequiredAcks)
    } else if transactional_id
        .as_deref()
        .is_some_and(|t| !access.transactional_id(Operation::Write, t))
    {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else {
        None
    };
    // Partitions whose transaction's coordinator (another broker) said no.
    let mut refused = match (&request_error, &transactional_id) {
        (None, Some(id)) if !broker.coordinates(id) => {
            verify_elsewhere(broker, access, id, version, &req).await
        }
        _ => std::collections::HashMap::new(),
    };
    for topic_data in req.topic_data {
        let topic = if version >= 13 {
            broker.resolve_topic_id(TopicId(topic_data.topic_id))
        } else {
            broker.resolve_topic_name(topic_data.name.as_str())
        };
        let denied = if version >= 13 {
            topic
                .as_ref()
                .is_ok_and(|t| !access.topic(Operation::Write, t.name.as_str()))
        } else {
            !access.topic(Operation::Write, topic_data.name.as_str())
        };
        let request_error = match request_error {
            None if denied => Some(ResponseError::TopicAuthorizationFailed),
            e => e,
        };
        let topic_index = responses.len();
        let partition_responses = topic_data
            .partition_data
            .into_iter()
            .enumerate()
            .map(|(partition_index, pd)| {
                let index = pd.index;
                let refusal = topic
                    .as_ref()
                    .ok()
                    .and_then(|t| refused.remove(&(t.name.to_string(), index)));
                let result = match (request_error, &topic) {
                    (Some(e), _) => Err((e, None, Vec::new())),
                    (None, Ok(_)) if refusal.is_some() => {
                        let e = refusal.unwrap_or_else(|| Error::InvalidRequest(String::new()));
                        Err((verification_error(&e), Some(e.to_string()), Vec::new()))
                    }
                    (None, Err(e)) => Err((response_error(e), Some(e.to_string()), Vec::new())),
                    (None, Ok(t)) => {
                        append(
                            broker,
                            t,
                            pd,
                            acks,
                            transactional_id.as_deref(),
                            &mut disk_work,
                        )
                        .map(|(response, commit)| {
                            if let Some((p, next, epoch)) = commit {
                                commits.push((topic_index, partition_index, p, next, epoch));
                            }
                            response
                        })
                    }
                    .map_err(|e| {
                        let records = record_errors(&e, t.name.as_str(), index);
                        let message =
                            records_refused_message(&records, &e).unwrap_or_else(|| e.to_string());
                        (response_error(&e), Some(message), records)
                    }),
                };
                match result {
                    Ok(r) => r.with_index(index),
                    Err((code, msg, records)) => PartitionProduceResponse::default()
                        .with_index(index)
                        .with_error_code(code.code())
                        .with_base_offset(-1)
                        .with_error_message(msg.map(StrBytes::from_string))
                        // Per-record errors exist from v8.
                        .with_record_errors(if version >= 8 { records } else { Vec::new() }),
                }
            })
            .collect();
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic_data.name)
                .with_topic_id(topic_data.topic_id)
                .with_partition_responses(partition_responses),
        );
    }
    if let Some(waited) = broker::complete_disk_work(disk_work).await {
        // Next to the fsync it measures, the series lookup costs nothing.
        broker.metrics().produce_flush_wait("kafka").observe(waited);
    }
    if !commits.is_empty() {
        await_commits(&mut responses, commits, timeout, version).await;
    }
    if acks != 0 {
        return Outcome::Reply(ResponseKind::Produce(
            ProduceResponse::default().with_responses(responses),
        ));
    }
    let failed = responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(move |p| (t, p)))
        .find(|(_, p)| p.error_code != 0);
    match failed {
        Some((t, p)) => Outcome::Close(format!(
            "acks=0 produce to {}-{} failed with error {}",
            t.name.as_str(),
            p.index,
            p.error_code
        )),
        None => Outcome::NoReply,
    }
}

/// Waits for each acks=all append to be committed (all at once, until the
/// request's `timeout_ms`); one not committed gets its error instead
/// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER,
/// REQUEST_TIMED_OUT), as Kafka's delayed produce answers.
async fn await_commits(
    responses: &mut [TopicProduceResponse],
    commits: Vec<(usize, usize, Arc<Partition>, Offset, LeaderEpoch)>,
    timeout: std::time::Duration,
    version: i16,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    let waits = commits
        .iter()
        .map(|(_, _, p, next, epoch)| p.wait_committed(*next, *epoch, deadline));
    let results = futures::future::join_all(waits).await;
    for ((ti, pi, _, _, _), result) in commits.into_iter().zip(results) {
        if let Err(e) = result {
            let r = &mut responses[ti].partition_responses[pi];
            r.error_code = response_error(&e).code();
            r.base_offset = -1;
            if version >= 8 {
                r.error_message = Some(StrBytes::from_string(e.to_string()));
            }
        }
    }
}

/// Appends one partition's batches; for acks=all on a replicated
/// partition, also the partition and the offset its high watermark must
/// reach before the producer is answered.
type Appended = (
    PartitionProduceResponse,
    Option<(Arc<Partition>, Offset, LeaderEpoch)>,
);

fn append(
    broker: &Broker,
    topic: &Topic,
    pd: PartitionProduceData,
    acks: i16,
    transactional_id: Option<&str>,
    disk_work: &mut Vec<(Arc<Partition>, SyncWork)>,
) -> Result<Appended, Error> {
    topic.ensure_client_writable()?;
    let partition = topic.partition(PartitionId(pd.index))?;
    if acks == -1 {
        partition.check_min_insync()?;
    }
    let records = pd
        .records
        .ok_or_else(|| Error::InvalidRequest("produce request without records".into()))?;
    // The batches are written from the request's own buffer: the log
    // stamps offsets into the bytes it writes, not into these.
    let appended = match transactional_id {
        None => partition.append_deferred(&records, now_ms()),
        // Every batch's producer must have added this partition to its
        // open transaction (AddPartitionsToTxn), with its current epoch.
        Some(id) => {
            broker.append_transactional(id, topic.name.as_str(), partition, &records, now_ms())
        }
    };
    let info = match appended {
        Ok((AppendOutcome::Appended(i) | AppendOutcome::Duplicate(i), work)) => {
            if !work.is_empty() {
                disk_work.push((Arc::clone(partition), work));
            }
            i
        }
        Err(e) => {
            if matches!(
                e,
                Error::Storage {
                    source: storage::Error::Io { .. } | storage::Error::TooManyOpenFiles { .. },
                    ..
                }
            ) {
                warn!("produce to {} failed: {e}", partition.tp);
            }
            return Err(e);
        }
    };
    let commit = (acks == -1 && partition.replica().is_some()).then(|| {
        (
            partition.clone(),
            Offset(info.last_offset.0 + 1),
            info.leader_epoch,
        )
    });
    let response = PartitionProduceResponse::default()
        .with_base_offset(info.base_offset.0)
        .with_log_append_time_ms(info.log_append_time.map_or(-1, |t| t.0))
        .with_log_start_offset(info.log_start_offset.0);
    Ok((response, commit))
}

/// A transactional Produce whose transaction another broker coordinates:
/// each partition the producer has no transaction open on yet is checked
/// with that coordinator first (KIP-890), all in one request. The
/// partitions refused, by (topic, partition).
async fn verify_elsewhere(
    broker: &Arc<Broker>,
    access: &Access<'_>,
    id: &str,
    version: i16,
    req: &ProduceRequest,
) -> std::collections::HashMap<(String, i32), Error> {
    let mut pending = Vec::new();
    for topic_data in &req.topic_data {
        let topic = if version >= 13 {
            broker.resolve_topic_id(TopicId(topic_data.topic_id))
        } else {
            broker.resolve_topic_name(topic_data.name.as_str())
        };
        // A topic the client may not write to is refused without a check.
        let Ok(topic) = topic else { continue };
        if !access.topic(Operation::Write, topic.name.as_str()) {
            continue;
        }
        for pd in &topic_data.partition_data {
            let (Ok(partition), Some(records)) =
                (topic.partition(PartitionId(pd.index)), pd.records.as_ref())
            else {
                continue;
            };
            // A batch that does not parse is refused by the append.
            let Ok((producer_id, producer_epoch)) =
                broker::txn::transactional_producer(partition, records)
            else {
                continue;
            };
            if broker.needs_txn_verification(id, partition, producer_id, producer_epoch) {
                pending.push(broker::txn::PendingAppend {
                    partition: partition.clone(),
                    producer_id,
                    producer_epoch,
                });
            }
        }
    }
    let verdicts = broker.verify_transactional_appends(id, &pending).await;
    pending
        .into_iter()
        .zip(verdicts)
        .filter_map(|(p, r)| {
            let tp = (p.partition.tp.topic.to_string(), p.partition.tp.partition.0);
            r.err().map(|e| (tp, e))
        })
        .collect()
}

/// A verification refusal as Produce answers it, as Kafka does: the
/// coordinator being away or busy is NOT_ENOUGH_REPLICAS, which every
/// producer retries; a fenced producer hears INVALID_PRODUCER_EPOCH.
fn verification_error(e: &Error) -> ResponseError {
    match response_error(e) {
        ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator
        | ResponseError::ConcurrentTransactions
        | ResponseError::CoordinatorLoadInProgress => ResponseError::NotEnoughReplicas,
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        other => other,
    }
}
