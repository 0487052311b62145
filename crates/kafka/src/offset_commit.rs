//! OffsetCommit (key 8): durable committed offsets, checked against the
//! committer's group membership (generation or member epoch).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use model::PartitionId;

use super::error::{coordinator_error, response_error};
use super::Versions;
use crate::authz::Access;
use broker::group::coordinator::CoordinatorError;
use broker::group::store::CommittedOffset;
use broker::security::acl::Operation;
use broker::{now_ms, Broker};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(2, 9);

/// Longest metadata string accepted (Kafka's offset.metadata.max.bytes).
const MAX_METADATA: usize = 4096;

/// Answers OffsetCommit. With an authorizer the group needs Read
/// (GROUP_AUTHORIZATION_FAILED for every partition) and each topic Read
/// (TOPIC_AUTHORIZATION_FAILED for its partitions).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let now = now_ms().0;
    // Per partition: Ok(offset to store) or the error for it.
    let mut checked: Vec<(usize, i32, Result<CommittedOffset, ResponseError>)> = Vec::new();
    let coordinator = broker.coordinator(req.group_id.as_str());
    let not_coordinator = coordinator.as_ref().err().map(response_error);
    let group_ok = access.group(Operation::Read, req.group_id.as_str());
    for (ti, t) in req.topics.iter().enumerate() {
        let topic = super::find_topic(broker, t.name.as_str());
        let topic_ok = access.topic(Operation::Read, t.name.as_str());
        for p in &t.partitions {
            let r = match &topic {
                _ if !group_ok => Err(ResponseError::GroupAuthorizationFailed),
                _ if !topic_ok => Err(ResponseError::TopicAuthorizationFailed),
                _ if req.group_id.is_empty() => Err(ResponseError::InvalidGroupId),
                _ if not_coordinator.is_some() => {
                    Err(not_coordinator.unwrap_or(ResponseError::NotCoordinator))
                }
                Err(_) => Err(ResponseError::UnknownTopicOrPartition),
                Ok(topic) if !topic.has_partition(PartitionId(p.partition_index)) => {
                    Err(ResponseError::UnknownTopicOrPartition)
                }
                Ok(_)
                    if p.committed_metadata
                        .as_ref()
                        .is_some_and(|m| m.len() > MAX_METADATA) =>
                {
                    Err(ResponseError::OffsetMetadataTooLarge)
                }
                Ok(_) => Ok(CommittedOffset {
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    commit_timestamp: now,
                }),
            };
            checked.push((ti, p.partition_index, r));
        }
    }
    let to_commit: Vec<(String, i32, CommittedOffset)> = checked
        .iter()
        .filter_map(|(ti, p, r)| {
            r.as_ref()
                .ok()
                .map(|o| (req.topics[*ti].name.to_string(), *p, o.clone()))
        })
        .collect();
    let commit_error = match &coordinator {
        _ if to_commit.is_empty() => None,
        Err(e) => Some(response_error(e)),
        Ok(coordinator) => coordinator
            .groups()
            .commit_offsets(
                req.group_id.as_str(),
                req.member_id.as_str(),
                req.group_instance_id.as_ref().map(|s| s.as_str()),
                req.generation_id_or_member_epoch,
                to_commit,
            )
            .err()
            .map(|e| match e {
                // Kafka answers a commit to a group it does not know with
                // GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
                CoordinatorError::GroupNotFound(_) if version < 9 => {
                    ResponseError::IllegalGeneration
                }
                e => coordinator_error(&e),
            })
            // Answered once the group log's in-sync replicas have it: a
            // new coordinator loads every acknowledged commit.
            .or_else(|| {
                coordinator
                    .committed_blocking()
                    .err()
                    .map(|e| response_error(&e))
            }),
    };
    let mut topics: Vec<OffsetCommitResponseTopic> = req
        .topics
        .iter()
        .map(|t| OffsetCommitResponseTopic::default().with_name(t.name.clone()))
        .collect();
    for (ti, p, r) in checked {
        let code = match r {
            Ok(_) => commit_error.map_or(0, |e| e.code()),
            Err(e) => e.code(),
        };
        topics[ti].partitions.push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(p)
                .with_error_code(code),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}
