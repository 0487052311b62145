//! ConsumerGroupHeartbeat (key 68): the consumer group protocol (KIP-848),
//! with server-side assignment and server-side regex subscriptions.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use model::TopicId;

use super::error::{coordinator_error, response_error};
use super::{RequestContext, Versions};
use broker::group::consumer::{Assignment, Heartbeat};
use broker::groups::topic_infos;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 1);

/// Answers ConsumerGroupHeartbeat. With an authorizer the group needs Read
/// (GROUP_AUTHORIZATION_FAILED) and every subscribed topic name Describe
/// (TOPIC_AUTHORIZATION_FAILED, naming them); a regex matches only topics
/// the member may Describe (with members of different principals in one
/// group, each heartbeat resolves the regex with its own member's rights).
pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let invalid = |msg: &str| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_string(msg.to_string())))
    };
    let access = crate::authz::Access::of(broker, ctx);
    let read = broker::security::acl::Operation::Read;
    if !access.group(read, req.group_id.as_str()) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let denied: Vec<&str> = req
        .subscribed_topic_names
        .iter()
        .flatten()
        .map(|t| t.as_str())
        .filter(|t| !access.topic(broker::security::acl::Operation::Describe, t))
        .collect();
    if !denied.is_empty() {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "not authorized to describe topics: {}",
                denied.join(", ")
            ))));
    }
    if req.group_id.is_empty() {
        return invalid("the group id is empty");
    }
    let coordinator = match broker.coordinator(req.group_id.as_str()) {
        Ok(c) => c,
        Err(e) => {
            return ConsumerGroupHeartbeatResponse::default()
                .with_error_code(response_error(&e).code())
        }
    };
    if ctx.api_version >= 1 && req.member_id.is_empty() {
        return invalid("the member id is empty (ConsumerGroupHeartbeat v1 clients choose it)");
    }
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned: req.topic_partitions.as_ref().map(|tps| {
            let mut a = Assignment::new();
            for tp in tps {
                a.entry(TopicId(tp.topic_id))
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
            a
        }),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host.clone(),
    };
    // A regex subscription matches only topics the member may Describe
    // (as Kafka 4, KAFKA-18813): an assignment must not disclose others.
    let mut topics = topic_infos(broker);
    topics.retain(|t| access.topic(broker::security::acl::Operation::Describe, &t.name));
    tracing::trace!(?req, "consumer group heartbeat");
    let before = coordinator.log_end();
    let beat = coordinator
        .groups()
        .consumer_heartbeat(req.group_id.as_str(), hb, &topics);
    if beat.is_ok() {
        if let Err(e) = coordinator.committed_blocking_since(before) {
            return ConsumerGroupHeartbeatResponse::default()
                .with_error_code(response_error(&e).code());
        }
    }
    match beat {
        Ok(r) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(r.member_id)))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
            .with_assignment(r.assignment.map(|a| {
                WireAssignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(id.0)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(e) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(coordinator_error(&e).code())
            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
    }
}
