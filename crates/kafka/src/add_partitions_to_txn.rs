//! AddPartitionsToTxn (key 24, v0-3, the producer's form): partitions join
//! the producer's transaction before it writes to them.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::error::{fenced_as_epoch, response_error};
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::Broker;
use kafka_protocol::error::ResponseError;

/// Implemented versions (v4+ is the brokers' batched verification form).
pub const VERSIONS: Versions = Versions::new(0, 3);

/// Answers AddPartitionsToTxn. Blocking: it persists. With an authorizer
/// the transactional id needs Write (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
/// for every partition) and each topic Write: if one is denied, its
/// partitions get TOPIC_AUTHORIZATION_FAILED and the others
/// OPERATION_NOT_ATTEMPTED, and none is added.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let wanted: Vec<(String, i32)> = req
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.to_string(), *p)))
        .collect();
    let id_denied =
        !access.transactional_id(Operation::Write, req.v3_and_below_transactional_id.as_str());
    let topic_denied = |t: &str| !access.topic(Operation::Write, t);
    let any_topic_denied = wanted.iter().any(|(t, _)| topic_denied(t));
    let results = if id_denied || any_topic_denied {
        None
    } else {
        Some(broker.add_partitions_to_txn(
            req.v3_and_below_transactional_id.as_str(),
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            &wanted,
        ))
    };
    // Per partition: its own code, or the whole request's refusal.
    let code_of = |tp: &(String, i32)| -> i16 {
        let Some(results) = &results else {
            return if id_denied {
                ResponseError::TransactionalIdAuthorizationFailed
            } else if topic_denied(&tp.0) {
                ResponseError::TopicAuthorizationFailed
            } else {
                ResponseError::OperationNotAttempted
            }
            .code();
        };
        match results {
            Err(e) => fenced_as_epoch(response_error(e), version < 2).code(),
            Ok(list) => list.iter().find(|(p, _)| p == tp).map_or(0, |(_, r)| {
                r.as_ref().map_or_else(
                    |e| fenced_as_epoch(response_error(e), version < 2).code(),
                    |_| 0,
                )
            }),
        }
    };
    let topics = req
        .v3_and_below_topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code_of(&(t.name.to_string(), *p)))
                        })
                        .collect(),
                )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
}
