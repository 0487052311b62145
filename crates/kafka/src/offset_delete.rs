//! OffsetDelete (key 47): remove committed offsets of topics a group no
//! longer consumes.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ConsumerProtocolSubscription, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::protocol::Decodable;

use super::error::{coordinator_error, response_error};
use super::Versions;
use broker::group::coordinator::SubscriptionsView;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Topics a group's members subscribe to, read from the classic consumer
/// protocol's member metadata or the consumer protocol's subscriptions.
pub fn subscribed_topics(g: SubscriptionsView) -> Vec<String> {
    match g {
        SubscriptionsView::Classic {
            protocol_type,
            metadata,
        } => {
            if protocol_type.as_deref() != Some("consumer") {
                return Vec::new();
            }
            metadata
                .into_iter()
                .filter_map(|m| {
                    let mut meta = m;
                    if meta.len() < 2 {
                        return None;
                    }
                    let version = i16::from_be_bytes([meta[0], meta[1]]);
                    bytes::Buf::advance(&mut meta, 2);
                    ConsumerProtocolSubscription::decode(&mut meta, version).ok()
                })
                .flat_map(|s| s.topics.into_iter().map(|t| t.to_string()))
                .collect()
        }
        SubscriptionsView::Consumer { topics } => topics,
    }
}

/// Answers OffsetDelete.
///
/// The group needs Delete (GROUP_AUTHORIZATION_FAILED) and each topic Read
/// (TOPIC_AUTHORIZATION_FAILED for its partitions, which are kept).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    if !access.group(
        broker::security::acl::Operation::Delete,
        req.group_id.as_str(),
    ) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let topic_ok = |t: &str| access.topic(broker::security::acl::Operation::Read, t);
    if req.group_id.is_empty() {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code());
    }
    let coordinator = match broker.coordinator(req.group_id.as_str()) {
        Ok(c) => c,
        Err(e) => {
            return OffsetDeleteResponse::default().with_error_code(response_error(&e).code())
        }
    };
    let subscribed = coordinator
        .groups()
        .group_subscriptions(req.group_id.as_str())
        .map(subscribed_topics)
        .unwrap_or_default();
    let wanted: Vec<(String, i32)> = req
        .topics
        .iter()
        .filter(|t| topic_ok(t.name.as_str()))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let deleted = coordinator
        .groups()
        .delete_offsets(req.group_id.as_str(), &wanted, &subscribed);
    if deleted.is_ok() {
        if let Err(e) = coordinator.committed_blocking() {
            return OffsetDeleteResponse::default().with_error_code(response_error(&e).code());
        }
    }
    match deleted {
        Ok(results) => {
            let mut results = results.into_iter();
            let topics = req
                .topics
                .into_iter()
                .map(|t| {
                    let allowed = topic_ok(t.name.as_str());
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            if !allowed {
                                return OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(
                                        ResponseError::TopicAuthorizationFailed.code(),
                                    );
                            }
                            let code = match results.next() {
                                Some(Err(e)) => coordinator_error(&e).code(),
                                _ => 0,
                            };
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect();
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            OffsetDeleteResponse::default().with_topics(topics)
        }
        Err(e) => OffsetDeleteResponse::default().with_error_code(coordinator_error(&e).code()),
    }
}
