//! OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, used by
//! consumers to detect log truncation after a leader change.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use model::{LeaderEpoch, PartitionId};

use super::error::response_error;
use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(2, 4);

/// Answers OffsetForLeaderEpoch.
///
/// Each topic needs Describe (a consumer's check; TOPIC_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = access
                .require_topic(broker::security::acl::Operation::Describe, t.topic.as_str())
                .and_then(|()| super::find_topic(broker, t.topic.as_str()));
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let out = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let part = match topic.as_ref().map_err(response_error).and_then(|topic| {
                        topic
                            .partition(PartitionId(p.partition))
                            .cloned()
                            .map_err(|e| response_error(&e))
                    }) {
                        Ok(part) => part,
                        Err(code) => return out.with_error_code(code.code()),
                    };
                    let epoch = part.leader_epoch().0;
                    if p.current_leader_epoch >= 0 && p.current_leader_epoch != epoch {
                        let code = if p.current_leader_epoch > epoch {
                            ResponseError::UnknownLeaderEpoch
                        } else {
                            ResponseError::FencedLeaderEpoch
                        };
                        return out.with_error_code(code.code());
                    }
                    match part.log().end_offset_for_epoch(LeaderEpoch(p.leader_epoch)) {
                        Some((e, o)) => out.with_leader_epoch(e.0).with_end_offset(o.0),
                        None => out,
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
