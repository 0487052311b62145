//! InitProducerId (key 22): ids for idempotent and transactional producers.
//!
//! Without a transactional id every call gets a fresh producer id at epoch
//! 0, as Kafka does for idempotent producers. With one, the transaction
//! coordinator answers that id's producer id and its next epoch, fencing
//! the earlier producers of the id and aborting their open transaction.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::error::{fenced_as_epoch, response_error};
use super::Versions;
use crate::authz::Access;
use broker::security::acl::{Operation, ResourceType};
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 5);

/// Answers InitProducerId. Blocking: it may persist and write markers.
/// With an authorizer a transactional id needs Write on it
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
/// IdempotentWrite on the cluster or Write on some topic (KIP-679;
/// CLUSTER_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let transactional_id = req.transactional_id.as_ref().map(|t| t.as_str());
    match transactional_id {
        Some(id) if !id.is_empty() && !access.transactional_id(Operation::Write, id) => {
            return resp.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
        }
        None if !access.cluster(Operation::IdempotentWrite)
            && !access.any_of_type(Operation::Write, ResourceType::Topic) =>
        {
            return resp.with_error_code(ResponseError::ClusterAuthorizationFailed.code())
        }
        _ => {}
    }
    let result = match transactional_id {
        None => broker.next_producer_id().map(|id| (id.0, 0)),
        // As Kafka: an empty transactional id is a malformed request.
        Some("") => return resp.with_error_code(ResponseError::InvalidRequest.code()),
        // v3+ (KIP-360): the producer id and epoch the caller had, if any.
        Some(id) => broker
            .init_transactional_producer(
                id,
                req.transaction_timeout_ms,
                (version >= 3).then_some((req.producer_id.0, req.producer_epoch)),
            )
            .map(|(p, e)| (p.0, e.0)),
    };
    match result {
        Ok((id, epoch)) => resp
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        // PRODUCER_FENCED exists for InitProducerId from v4.
        Err(e) => resp.with_error_code(fenced_as_epoch(response_error(&e), version < 4).code()),
    }
}
