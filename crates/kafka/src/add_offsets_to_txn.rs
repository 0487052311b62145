//! AddOffsetsToTxn (key 25): a group's offsets will be committed with the
//! producer's transaction (`send_offsets_to_transaction`).

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::error::{fenced_as_epoch, response_error};
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::Broker;
use kafka_protocol::error::ResponseError;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 4);

/// Answers AddOffsetsToTxn. Blocking: it persists.
///
/// With an authorizer the transactional id needs Write and the group Read.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let denied = if !access.transactional_id(Operation::Write, req.transactional_id.as_str()) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !access.group(Operation::Read, req.group_id.as_str()) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(e) = denied {
        return AddOffsetsToTxnResponse::default().with_error_code(e.code());
    }
    let r = broker.add_offsets_to_txn(
        req.transactional_id.as_str(),
        req.producer_id.0,
        req.producer_epoch,
        req.group_id.as_str(),
    );
    AddOffsetsToTxnResponse::default().with_error_code(r.map_or_else(
        |e| fenced_as_epoch(response_error(&e), version < 2).code(),
        |_| 0,
    ))
}
