//! EndTxn (key 26): commit or abort the producer's transaction. Answered
//! once the markers are written to every partition of the transaction
//! (and, on commit, its group offsets committed).

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::error::{fenced_as_epoch, response_error};
use super::Versions;
use broker::Broker;

/// Implemented versions (v5, KIP-890's epoch bump per transaction, is not).
pub const VERSIONS: Versions = Versions::new(0, 4);

/// Answers EndTxn. Blocking: it writes markers.
pub fn handle(broker: &Arc<Broker>, version: i16, req: EndTxnRequest) -> EndTxnResponse {
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
