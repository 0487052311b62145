//! JoinGroup (key 11): join a classic group and wait for the rebalance.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::error::{coordinator_error, response_error};
use super::{RequestContext, Versions};
use broker::group::classic::{GroupError, JoinRequest, Protocol};
use broker::group::coordinator::CoordinatorError;
use broker::security::acl::Operation;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 9);

/// Answers JoinGroup once the group's rebalance completes.
pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    let version = ctx.api_version;
    let fail = |code: ResponseError, member_id: StrBytes| {
        JoinGroupResponse::default()
            .with_error_code(code.code())
            .with_generation_id(-1)
            .with_member_id(member_id)
    };
    if !crate::authz::Access::of(broker, ctx).group(Operation::Read, req.group_id.as_str()) {
        return fail(ResponseError::GroupAuthorizationFailed, req.member_id);
    }
    if req.group_id.is_empty() {
        return fail(ResponseError::InvalidGroupId, req.member_id);
    }
    let coordinator = match broker.coordinator(req.group_id.as_str()) {
        Ok(c) => c,
        Err(e) => return fail(response_error(&e), req.member_id),
    };
    let join = JoinRequest {
        request: 0,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host.clone(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata.clone(),
            })
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
        reason: req.reason.as_ref().map(|s| s.to_string()),
    };
    let joined = coordinator.groups().join(req.group_id.as_str(), join).await;
    // The group's new state is answered once it is on the group log's
    // in-sync replicas.
    if joined.is_ok() {
        if let Err(e) = coordinator.committed().await {
            return fail(response_error(&e), req.member_id);
        }
    }
    match joined {
        Ok(r) => JoinGroupResponse::default()
            .with_generation_id(r.generation_id)
            .with_protocol_type(if version >= 7 {
                r.protocol_type.map(StrBytes::from_string)
            } else {
                None
            })
            .with_protocol_name(r.protocol_name.map(StrBytes::from_string))
            .with_leader(StrBytes::from_string(r.leader))
            .with_skip_assignment(version >= 9 && r.skip_assignment)
            .with_member_id(StrBytes::from_string(r.member_id))
            .with_members(
                r.members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(StrBytes::from_string(m.member_id))
                            .with_group_instance_id(m.group_instance_id.map(StrBytes::from_string))
                            .with_metadata(m.metadata)
                    })
                    .collect(),
            ),
        Err(CoordinatorError::Classic(GroupError::MemberIdRequired(id))) => {
            fail(ResponseError::MemberIdRequired, StrBytes::from_string(id))
        }
        Err(e) => fail(coordinator_error(&e), req.member_id),
    }
}
