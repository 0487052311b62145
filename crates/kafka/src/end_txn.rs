//! EndTxn (key 26): commit or abort the producer's transaction. Answered
//! once the markers are written to every partition of the transaction
//! (and, on commit, its group offsets committed).

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::error::{fenced_as_epoch, response_error};
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::Broker;
use kafka_protocol::error::ResponseError;

/// Implemented versions (v5, KIP-890's epoch bump per transaction, is not).
pub const VERSIONS: Versions = Versions::new(0, 4);

/// Answers EndTxn. Blocking: it writes markers.
///
/// With an authorizer the transactional id needs Write.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: EndTxnRequest,
) -> EndTxnResponse {
    if !access.transactional_id(Operation::Write, req.transactional_id.as_str()) {
        return EndTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let r = broker.end_txn(
        req.transactional_id.as_str(),
        req.producer_id.0,
        req.producer_epoch,
        req.committed,
    );
    EndTxnResponse::default().with_error_code(r.map_or_else(
        |e| fenced_as_epoch(response_error(&e), version < 2).code(),
        |_| 0,
    ))
}
