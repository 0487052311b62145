//! Heartbeat (key 12): keeps a classic member's session alive and tells it
//! when to rejoin.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::error::{coordinator_error, response_error};
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 4);

/// Answers Heartbeat; the group needs Read.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    if !access.group(Operation::Read, req.group_id.as_str()) {
        return HeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if req.group_id.is_empty() {
        return HeartbeatResponse::default().with_error_code(ResponseError::InvalidGroupId.code());
    }
    let coordinator = match broker.coordinator(req.group_id.as_str()) {
        Ok(c) => c,
        // As Kafka: a member of a group still loading is answered as if
        // its heartbeat were fine (older clients do not expect the error).
        Err(broker::Error::CoordinatorLoadInProgress(_)) => return HeartbeatResponse::default(),
        Err(e) => return HeartbeatResponse::default().with_error_code(response_error(&e).code()),
    };
    let result = coordinator.groups().heartbeat(
        req.group_id.as_str(),
        req.member_id.as_str(),
        req.group_instance_id.as_ref().map(|s| s.as_str()),
        req.generation_id,
    );
    match result {
        Ok(()) => HeartbeatResponse::default(),
        Err(e) => HeartbeatResponse::default().with_error_code(coordinator_error(&e).code()),
    }
}
