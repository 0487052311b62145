//! AddPartitionsToTxn (key 24): partitions join the producer's
//! transaction before it writes to them (v0-3, the producer's form), and
//! (v4+, KIP-890) the brokers' batched form: several transactions in one
//! request, each either added or, with `verify_only`, checked, as a
//! partition leader asks the coordinator before a transactional append.

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

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 5);

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
    if version >= 4 {
        return batched(broker, access, req);
    }
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

/// The brokers' form (v4+): ClusterAction on the cluster
/// (CLUSTER_AUTHORIZATION_FAILED for the whole request, as Kafka answers),
/// then each transaction on its own: `verify_only` checks its partitions
/// against the open transaction, otherwise they are added.
fn batched(
    broker: &Arc<Broker>,
    access: &Access,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResult;
    if !access.cluster(Operation::ClusterAction) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let results = req
        .transactions
        .into_iter()
        .map(|t| {
            let wanted: Vec<(String, i32)> = t
                .topics
                .iter()
                .flat_map(|tp| tp.partitions.iter().map(|p| (tp.name.to_string(), *p)))
                .collect();
            let id = t.transactional_id.as_str();
            let answered = if t.verify_only {
                broker.verify_txn_partitions(id, t.producer_id.0, t.producer_epoch, &wanted)
            } else {
                broker.add_partitions_to_txn(id, t.producer_id.0, t.producer_epoch, &wanted)
            };
            let codes: std::collections::HashMap<&(String, i32), i16> = match &answered {
                Err(_) => Default::default(),
                Ok(list) => list
                    .iter()
                    .map(|(tp, r)| {
                        (
                            tp,
                            r.as_ref().map_or_else(|e| response_error(e).code(), |_| 0),
                        )
                    })
                    .collect(),
            };
            let code_of = |tp: &(String, i32)| -> i16 {
                match &answered {
                    Err(e) => response_error(e).code(),
                    Ok(_) => codes.get(tp).copied().unwrap_or(0),
                }
            };
            let topic_results = t
                .topics
                .iter()
                .map(|tp| {
                    AddPartitionsToTxnTopicResult::default()
                        .with_name(tp.name.clone())
                        .with_results_by_partition(
                            tp.partitions
                                .iter()
                                .map(|p| {
                                    AddPartitionsToTxnPartitionResult::default()
                                        .with_partition_index(*p)
                                        .with_partition_error_code(code_of(&(
                                            tp.name.to_string(),
                                            *p,
                                        )))
                                })
                                .collect(),
                        )
                })
                .collect();
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id)
                .with_topic_results(topic_results)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}
