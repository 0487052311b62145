//! LeaveGroup (key 13): one member (v0–v2) or a batch (v3+) leaves.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::error::{classic_error, coordinator_error, response_error};
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 5);

/// Answers LeaveGroup.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    if !access.group(Operation::Read, req.group_id.as_str()) {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if req.group_id.is_empty() {
        return LeaveGroupResponse::default().with_error_code(ResponseError::InvalidGroupId.code());
    }
    let coordinator = match broker.coordinator(req.group_id.as_str()) {
        Ok(c) => c,
        Err(e) => return LeaveGroupResponse::default().with_error_code(response_error(&e).code()),
    };
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let left = coordinator.groups().leave(req.group_id.as_str(), &members);
    if left.is_ok() {
        if let Err(e) = coordinator.committed_blocking() {
            return LeaveGroupResponse::default().with_error_code(response_error(&e).code());
        }
    }
    match left {
        Ok(results) if version >= 3 => LeaveGroupResponse::default().with_members(
            members
                .iter()
                .zip(results)
                .map(|((id, instance), r)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(id.clone()))
                        .with_group_instance_id(instance.clone().map(StrBytes::from_string))
                        .with_error_code(r.err().map_or(0, |e| classic_error(&e).code()))
                })
                .collect(),
        ),
        Ok(results) => LeaveGroupResponse::default().with_error_code(
            results
                .into_iter()
                .next()
                .and_then(|r| r.err())
                .map_or(0, |e| classic_error(&e).code()),
        ),
        Err(e) => LeaveGroupResponse::default().with_error_code(coordinator_error(&e).code()),
    }
}
