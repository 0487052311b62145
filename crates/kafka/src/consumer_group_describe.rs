//! ConsumerGroupDescribe (key 69): consumer-protocol groups with each
//! member's current and target assignment.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::error::response_error;
use super::Versions;
use crate::authz::{Access, OPERATIONS_NOT_REQUESTED};
use broker::group::consumer::Assignment;
use broker::group::coordinator::GroupView;
use broker::security::acl::{Operation, ResourceType};
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 1);

/// Answers ConsumerGroupDescribe. With an authorizer the group needs
/// Describe (GROUP_AUTHORIZATION_FAILED), and a group whose members name or
/// are assigned a topic the principal may not Describe is answered
/// TOPIC_AUTHORIZATION_FAILED without members, as Kafka 4 does.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let groups = req
        .group_ids
        .into_iter()
        .map(|id| {
            if !access.group(Operation::Describe, id.as_str()) {
                return DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code())
                    .with_authorized_operations(OPERATIONS_NOT_REQUESTED);
            }
            let base = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(if req.include_authorized_operations {
                    access.operations(ResourceType::Group, id.as_str())
                } else {
                    OPERATIONS_NOT_REQUESTED
                });
            let view = match broker.coordinator(id.as_str()) {
                Ok(c) => c.groups().describe(id.as_str()),
                Err(e) => return base.with_error_code(response_error(&e).code()),
            };
            if let Some(GroupView::Consumer(g)) = &view {
                let by_id = |a: &Assignment| {
                    a.keys()
                        .filter_map(|t| broker.topic_by_id(*t).map(|t| t.name.to_string()))
                        .collect::<Vec<_>>()
                };
                let hidden = g.members.iter().any(|m| {
                    m.subscribed_topic_names
                        .iter()
                        .cloned()
                        .chain(by_id(&m.assignment))
                        .chain(by_id(&m.target_assignment))
                        .any(|t| !access.topic(Operation::Describe, &t))
                });
                if hidden {
                    return base
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                        .with_error_message(Some(StrBytes::from_static_str(
                            "the group uses topics the principal may not describe",
                        )));
                }
            }
            let described = view.map(|g| match g {
                GroupView::Consumer(g) => Ok(base
                    .clone()
                    .with_group_state(StrBytes::from_static_str(g.state))
                    .with_group_epoch(g.epoch)
                    .with_assignment_epoch(g.assignment_epoch)
                    .with_assignor_name(StrBytes::from_static_str(g.assignor))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|m| {
                                let mut member = Member::default()
                                    .with_member_id(StrBytes::from_string(m.member_id))
                                    .with_instance_id(m.instance_id.map(StrBytes::from_string))
                                    .with_rack_id(m.rack_id.map(StrBytes::from_string))
                                    .with_member_epoch(m.member_epoch)
                                    .with_client_id(StrBytes::from_string(m.client_id))
                                    .with_client_host(StrBytes::from_string(m.client_host))
                                    .with_subscribed_topic_names(
                                        m.subscribed_topic_names
                                            .into_iter()
                                            .map(|n| TopicName(StrBytes::from_string(n)))
                                            .collect(),
                                    )
                                    .with_subscribed_topic_regex(
                                        m.subscribed_topic_regex.map(StrBytes::from_string),
                                    )
                                    .with_assignment(wire(broker, &m.assignment))
                                    .with_target_assignment(wire(broker, &m.target_assignment));
                                if version >= 1 {
                                    member = member.with_member_type(1);
                                }
                                member
                            })
                            .collect(),
                    )),
                GroupView::Classic(_) => {
                    Err(format!("group {} is not a consumer group", id.as_str()))
                }
            });
            match described {
                Some(Ok(d)) => d,
                Some(Err(msg)) => base
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(msg))),
                None => base
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "group {} does not exist",
                        id.as_str()
                    )))),
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

fn wire(broker: &Broker, a: &Assignment) -> WireAssignment {
    WireAssignment::default().with_topic_partitions(
        a.iter()
            .map(|(id, ps)| {
                let name = broker
                    .topic_by_id(*id)
                    .map(|t| t.name.to_string())
                    .unwrap_or_default();
                TopicPartitions::default()
                    .with_topic_id(id.0)
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}
