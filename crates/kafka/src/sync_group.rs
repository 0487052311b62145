//! SyncGroup (key 14): the leader hands out assignments; everyone receives theirs.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::error::{coordinator_error, response_error};
use super::{RequestContext, Versions};
use broker::group::classic::SyncRequest;
use broker::security::acl::Operation;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 5);

/// Answers SyncGroup once the leader's assignment is known.
pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    if !crate::authz::Access::of(broker, ctx).group(Operation::Read, req.group_id.as_str()) {
        return SyncGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if req.group_id.is_empty() {
        return SyncGroupResponse::default().with_error_code(ResponseError::InvalidGroupId.code());
    }
    let coordinator = match broker.coordinator(req.group_id.as_str()) {
        Ok(c) => c,
        // As Kafka: clients do not expect COORDINATOR_LOAD_IN_PROGRESS
        // here; a rebalance in progress sends them to rejoin.
        Err(broker::Error::CoordinatorLoadInProgress(_)) => {
            return SyncGroupResponse::default()
                .with_error_code(ResponseError::RebalanceInProgress.code())
        }
        Err(e) => return SyncGroupResponse::default().with_error_code(response_error(&e).code()),
    };
    let sync = SyncRequest {
        request: 0,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
        protocol_type: req.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: req.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let synced = coordinator.groups().sync(req.group_id.as_str(), sync).await;
    if synced.is_ok() {
        if let Err(e) = coordinator.committed().await {
            return SyncGroupResponse::default().with_error_code(response_error(&e).code());
        }
    }
    match synced {
        Ok(r) => {
            let v5 = ctx.api_version >= 5;
            SyncGroupResponse::default()
                .with_protocol_type(if v5 {
                    r.protocol_type.map(StrBytes::from_string)
                } else {
                    None
                })
                .with_protocol_name(if v5 {
                    r.protocol_name.map(StrBytes::from_string)
                } else {
                    None
                })
                .with_assignment(r.assignment)
        }
        Err(e) => SyncGroupResponse::default().with_error_code(coordinator_error(&e).code()),
    }
}
