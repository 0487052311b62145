//! FindCoordinator (key 10): which broker coordinates a group or a
//! transactional id. From v4 one request carries many keys (KIP-699) and each
//! gets its own entry and error code. On a single node the answer is always
//! this broker; the per-key checks still apply.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 6);

const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;

/// Answers FindCoordinator.
pub fn handle(
    broker: &Arc<Broker>,
    version: i16,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let node = BrokerId(broker.node_id());
    let endpoint = broker.endpoint();
    let host = StrBytes::from_string(endpoint.host.clone());
    let port = endpoint.port as i32;
    let key_type = if version >= 1 {
        req.key_type
    } else {
        KEY_GROUP
    };
    let check = |key: &str| -> Result<(), (ResponseError, String)> {
        match key_type {
            KEY_GROUP | KEY_TRANSACTION if key.is_empty() => Err((
                ResponseError::InvalidRequest,
                "the coordinator key is empty".into(),
            )),
            KEY_GROUP | KEY_TRANSACTION => Ok(()),
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
                    Ok(()) => entry
                        .with_node_id(node)
                        .with_host(host.clone())
                        .with_port(port),
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
        Ok(()) => FindCoordinatorResponse::default()
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
