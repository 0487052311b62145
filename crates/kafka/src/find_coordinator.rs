//! FindCoordinator (key 10): which broker coordinates a group or a
//! transactional id. From v4 one request carries many keys (KIP-699) and each
//! gets its own entry and error code: the broker of the key's coordinator
//! slot (on a standalone node, itself), COORDINATOR_NOT_AVAILABLE while
//! that broker is fenced.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use crate::authz::Access;
use broker::security::acl::{Operation, ResourceType};
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 6);

const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;

/// Answers FindCoordinator. With an authorizer a group key needs Describe
/// on the group, a transactional id Describe on it.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    listener: &str,
    version: i16,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let key_type = if version >= 1 {
        req.key_type
    } else {
        KEY_GROUP
    };
    let check = |key: &str| -> Result<(BrokerId, StrBytes, i32), (ResponseError, String)> {
        match key_type {
            KEY_GROUP | KEY_TRANSACTION if key.is_empty() => Err((
                ResponseError::InvalidRequest,
                "the coordinator key is empty".into(),
            )),
            KEY_GROUP if !access.group(Operation::Describe, key) => Err((
                ResponseError::GroupAuthorizationFailed,
                format!("not authorized to describe group {key}"),
            )),
            KEY_TRANSACTION
                if !access.may(Operation::Describe, ResourceType::TransactionalId, key) =>
            {
                Err((
                    ResponseError::TransactionalIdAuthorizationFailed,
                    format!("not authorized to describe transactional id {key}"),
                ))
            }
            KEY_GROUP | KEY_TRANSACTION => broker
                .coordinator_of(key, listener)
                .map(|(node, e)| (BrokerId(node), StrBytes::from_string(e.host), e.port as i32))
                .map_err(|e| (ResponseError::CoordinatorNotAvailable, e.to_string())),
            other => Err((
                ResponseError::InvalidRequest,
                format!("unsupported key type {other}"),
            )),
        }
    };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let entry = Coordinator::default().with_key(key.clone());
                match check(key.as_str()) {
                    Ok((node, host, port)) => {
                        entry.with_node_id(node).with_host(host).with_port(port)
                    }
                    Err((code, msg)) => entry
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(msg))),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match check(req.key.as_str()) {
        Ok((node, host, port)) => FindCoordinatorResponse::default()
            .with_node_id(node)
            .with_host(host)
            .with_port(port),
        Err((code, msg)) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(-1))
            .with_port(-1)
            .with_error_code(code.code())
            .with_error_message((version >= 1).then(|| StrBytes::from_string(msg))),
    }
}
