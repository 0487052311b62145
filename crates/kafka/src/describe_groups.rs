//! DescribeGroups (key 15): state, protocol and members of groups.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, DescribeGroupsRequest, DescribeGroupsResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use model::TopicId;

use super::error::response_error;
use super::Versions;
use crate::authz::{Access, OPERATIONS_NOT_REQUESTED};
use broker::group::consumer::Assignment;
use broker::group::coordinator::GroupView;
use broker::security::acl::{Operation, ResourceType};
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 6);

/// Answers DescribeGroups; each group needs Describe
/// (GROUP_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let ops = |id: &str| {
        if req.include_authorized_operations && version >= 3 {
            access.operations(ResourceType::Group, id)
        } else {
            OPERATIONS_NOT_REQUESTED
        }
    };
    let groups = req
        .groups
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
                .with_authorized_operations(ops(id.as_str()));
            let coordinator = match broker.coordinator(id.as_str()) {
                Ok(c) => c,
                Err(e) => return base.with_error_code(response_error(&e).code()),
            };
            let described = coordinator.groups().describe(id.as_str()).map(|g| match g {
                GroupView::Classic(d) => base
                    .clone()
                    .with_group_state(StrBytes::from_string(d.state.to_string()))
                    .with_protocol_type(StrBytes::from_string(d.protocol_type.unwrap_or_default()))
                    .with_protocol_data(StrBytes::from_string(d.protocol_name.unwrap_or_default()))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(StrBytes::from_string(m.member_id))
                                    .with_group_instance_id(if version >= 4 {
                                        m.group_instance_id.map(StrBytes::from_string)
                                    } else {
                                        None
                                    })
                                    .with_client_id(StrBytes::from_string(m.client_id))
                                    .with_client_host(StrBytes::from_string(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
                GroupView::Consumer(g) => base
                    .clone()
                    .with_group_state(StrBytes::from_static_str(g.state))
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocol_data(StrBytes::from_static_str(g.assignor))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(StrBytes::from_string(m.member_id))
                                    .with_group_instance_id(if version >= 4 {
                                        m.instance_id.map(StrBytes::from_string)
                                    } else {
                                        None
                                    })
                                    .with_client_id(StrBytes::from_string(m.client_id))
                                    .with_client_host(StrBytes::from_string(m.client_host))
                                    .with_member_assignment(encode_assignment(
                                        broker,
                                        &m.assignment,
                                    ))
                            })
                            .collect(),
                    ),
            });
            match described {
                Some(d) => d,
                // Known only by its committed offsets: an Empty group, as in Kafka.
                None if coordinator.groups().has_offsets(id.as_str()) => {
                    base.with_group_state(StrBytes::from_static_str("Empty"))
                }
                None if version >= 6 => base
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "group {} does not exist",
                        id.as_str()
                    ))))
                    .with_group_state(StrBytes::from_static_str("Dead")),
                // Before v6 Kafka describes an unknown group as Dead, without an error.
                None => base.with_group_state(StrBytes::from_static_str("Dead")),
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

/// A consumer-protocol assignment in the classic ConsumerProtocolAssignment
/// encoding (version prefix + v0 body), with topic names.
fn encode_assignment(broker: &Broker, a: &Assignment) -> bytes::Bytes {
    let partitions = a
        .iter()
        .filter_map(|(id, ps)| {
            let topic = broker.topic_by_id(TopicId(id.0))?;
            Some(
                AssignedPartitions::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.name.to_string())))
                    .with_partitions(ps.iter().copied().collect()),
            )
        })
        .collect();
    let body = ConsumerProtocolAssignment::default().with_assigned_partitions(partitions);
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    if body.encode(&mut buf, 0).is_err() {
        return bytes::Bytes::new();
    }
    buf.freeze()
}
