//! InitProducerId (key 22): ids for idempotent producers.
//!
//! Every call without a transactional id gets a fresh producer id at epoch
//! 0, as Kafka does for idempotent producers. Transactions are not
//! implemented, so a transactional id is refused.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::error::response_error;
use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 5);

/// Answers InitProducerId.
pub fn handle(broker: &Arc<Broker>, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    match req.transactional_id.as_ref().map(|t| t.is_empty()) {
        None => {}
        // As Kafka: an empty transactional id is a malformed request.
        Some(true) => return resp.with_error_code(ResponseError::InvalidRequest.code()),
        Some(false) => {
            return resp.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
        }
    }
    match broker.next_producer_id() {
        Ok(id) => resp
            .with_producer_id(ProducerId(id.0))
            .with_producer_epoch(0),
        Err(e) => resp.with_error_code(response_error(&e).code()),
    }
}
