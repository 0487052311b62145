//! TxnOffsetCommit (key 28): offsets committed inside a transaction; they
//! become the group's committed offsets when the transaction commits and
//! are dropped if it aborts.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::error::{coordinator_error, fenced_as_epoch, response_error};
use super::Versions;
use crate::authz::Access;
use broker::group::store::CommittedOffset;
use broker::security::acl::Operation;
use broker::{now_ms, Broker};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 4);

/// Answers TxnOffsetCommit. Blocking: it persists. From v3 the request
/// carries the consumer's group metadata (KIP-447), checked against the
/// group: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or FENCED_INSTANCE_ID for a
/// producer whose consumer is no longer that member of that generation. With an authorizer the
/// transactional id needs Write and the group Read (their errors for every
/// partition), and each topic Read (TOPIC_AUTHORIZATION_FAILED for its
/// partitions, which are not committed).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let now = now_ms().0;
    let topic_ok = |t: &str| access.topic(Operation::Read, t);
    let request_denied =
        if !access.transactional_id(Operation::Write, req.transactional_id.as_str()) {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        } else if !access.group(Operation::Read, req.group_id.as_str()) {
            Some(ResponseError::GroupAuthorizationFailed)
        } else {
            None
        };
    let offsets: Vec<(String, i32, CommittedOffset)> = req
        .topics
        .iter()
        .filter(|t| topic_ok(t.name.as_str()))
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    CommittedOffset {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                        commit_timestamp: now,
                    },
                )
            })
        })
        .collect();
    let coordinator = broker.coordinator(req.group_id.as_str());
    let code = if let Some(e) = request_denied {
        e.code()
    } else if let Err(e) = &coordinator {
        response_error(e).code()
    } else if offsets.is_empty() {
        0
    } else if let Err(e) = broker.check_txn_producer(
        req.transactional_id.as_str(),
        req.group_id.as_str(),
        req.producer_id.0,
        req.producer_epoch,
    ) {
        // The producer first, as Kafka: a fenced zombie is told so.
        fenced_as_epoch(response_error(&e), version < 3).code()
    } else if let Err(e) = coordinator.as_ref().map_or(Ok(()), |c| {
        c.groups().validate_txn_offset_commit(
            req.group_id.as_str(),
            req.member_id.as_str(),
            req.group_instance_id.as_ref().map(|i| i.as_str()),
            req.generation_id,
        )
    }) {
        txn_group_error(coordinator_error(&e)).code()
    } else {
        broker
            .txn_offset_commit(
                req.transactional_id.as_str(),
                req.group_id.as_str(),
                req.producer_id.0,
                req.producer_epoch,
                offsets,
            )
            .map_or_else(
                |e| fenced_as_epoch(response_error(&e), version < 3).code(),
                |_| 0,
            )
    };
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let code = if request_denied.is_none() && !topic_ok(t.name.as_str()) {
                ResponseError::TopicAuthorizationFailed.code()
            } else {
                code
            };
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// A consumer-protocol member's stale epoch as the errors TxnOffsetCommit
/// clients handle (librdkafka aborts the transaction on ILLEGAL_GENERATION).
fn txn_group_error(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::StaleMemberEpoch | ResponseError::FencedMemberEpoch => {
            ResponseError::IllegalGeneration
        }
        other => other,
    }
}
