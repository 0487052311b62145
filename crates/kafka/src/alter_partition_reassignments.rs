//! AlterPartitionReassignments (key 45), as Kafka's controller answers
//! it (`ReplicationControlManager.alterPartitionReassignments`): each
//! partition's move is validated, then all are committed in one metadata
//! change ([`Broker::alter_partition_reassignments`]). The replicas a move
//! adds copy the partition's data from its leader and the move completes
//! once they are in sync (see `magnetar_metadata::reassignment`); a
//! target equal to the current replicas completes at once; no target
//! cancels the move under way.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;
use model::PartitionId;

use super::error::response_error;
use super::{replica_assignment, Versions};
use broker::cluster::ReassignRequest;
use broker::reassignment::ReassignError;
use broker::{Broker, Topic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 1);

/// Answers AlterPartitionReassignments.
///
/// Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    version: i16,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    if !access.cluster(broker::security::acl::Operation::Alter) {
        return AlterPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(None);
    }
    let allow_rf_change = version < 1 || req.allow_replication_factor_change;
    // Per partition: its move's index among `moves`, or why it was refused
    // before any was decided.
    let mut moves: Vec<ReassignRequest> = Vec::new();
    let checked: Vec<Vec<Result<usize, Refusal>>> = req
        .topics
        .iter()
        .map(|t| {
            let topic = broker.topic(t.name.as_str());
            t.partitions
                .iter()
                .map(|p| {
                    let target = check(broker, topic.as_deref(), t.name.as_str(), p)?;
                    moves.push((t.name.to_string(), p.partition_index, target));
                    Ok(moves.len() - 1)
                })
                .collect()
        })
        .collect();
    let decided = if moves.is_empty() {
        Ok(Vec::new())
    } else {
        broker.alter_partition_reassignments(&moves, allow_rf_change)
    };
    let responses = req
        .topics
        .into_iter()
        .zip(checked)
        .map(|(t, checked)| {
            let partitions = t
                .partitions
                .iter()
                .zip(checked)
                .map(|(p, c)| {
                    let out = ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_message(None);
                    let outcome = c.and_then(|i| match &decided {
                        Ok(outcomes) => outcomes[i].clone().map_err(|e| refusal(&e)),
                        Err(e) => Err((response_error(e), e.to_string())),
                    });
                    match outcome {
                        Ok(()) => out,
                        Err((code, message)) => out
                            .with_error_code(code.code())
                            .with_error_message(Some(StrBytes::from_string(message))),
                    }
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    let resp = AlterPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_responses(responses);
    if version >= 1 {
        resp.with_allow_replication_factor_change(req.allow_replication_factor_change)
    } else {
        resp
    }
}

/// A partition's error and message.
type Refusal = (ResponseError, String);

/// The Kafka error for a refused move.
fn refusal(e: &ReassignError) -> Refusal {
    let code = match e {
        ReassignError::UnknownPartition { .. } => ResponseError::UnknownTopicOrPartition,
        ReassignError::InvalidAssignment(_) => ResponseError::InvalidReplicaAssignment,
        ReassignError::ReplicationFactorChange { .. } => ResponseError::InvalidReplicationFactor,
        ReassignError::NoneInProgress => ResponseError::NoReassignmentInProgress,
    };
    (code, e.to_string())
}

/// The partition exists and its target (if any) is a valid assignment:
/// the target, in order (the first replica is the preferred leader).
fn check(
    broker: &Broker,
    topic: Option<&Topic>,
    name: &str,
    p: &ReassignablePartition,
) -> Result<Option<Vec<i32>>, Refusal> {
    let Some(topic) = topic else {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("Unable to find a topic named {name}."),
        ));
    };
    if !topic.has_partition(PartitionId(p.partition_index)) {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("Unable to find partition {name}:{}.", p.partition_index),
        ));
    }
    let Some(replicas) = &p.replicas else {
        return Ok(None);
    };
    replica_assignment::validate(broker, replicas, None).map_err(|e| {
        let code = response_error(&e);
        (code, e.to_string())
    })?;
    Ok(Some(replicas.iter().map(|b| b.0).collect()))
}
