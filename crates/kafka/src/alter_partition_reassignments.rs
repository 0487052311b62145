//! AlterPartitionReassignments (key 45), answered as Kafka's controller
//! does (`ReplicationControlManager.alterPartitionReassignments`) for a
//! target that is the partition's current replica set: the reassignment
//! completes at once; a cancellation finds none in progress. Moving a
//! partition to other brokers needs its data copied there (replication,
//! not there yet), so such a target is refused with
//! INVALID_REPLICA_ASSIGNMENT and says so rather than reported done.

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
use broker::{Broker, Error, Topic};

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
    let responses = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = broker.topic(t.name.as_str());
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let out = ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_message(None);
                    match reassign(
                        broker,
                        topic.as_deref(),
                        t.name.as_str(),
                        p,
                        allow_rf_change,
                    ) {
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

fn reassign(
    broker: &Broker,
    topic: Option<&Topic>,
    name: &str,
    p: &ReassignablePartition,
    allow_rf_change: bool,
) -> Result<(), (ResponseError, String)> {
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
        return Err((
            ResponseError::NoReassignmentInProgress,
            "No partition reassignment is in progress.".into(),
        ));
    };
    replica_assignment::validate(broker, replicas, None).map_err(|e| {
        let code = response_error(&e);
        (code, e.to_string())
    })?;
    let current = topic
        .placements
        .get(p.partition_index as usize)
        .map(|s| s.replicas.clone())
        .unwrap_or_default();
    if !allow_rf_change && replicas.len() != current.len() {
        let e = Error::InvalidReplicationFactor(format!(
            "The replication factor is changed from {} to {}",
            current.len(),
            replicas.len()
        ));
        return Err((response_error(&e), e.to_string()));
    }
    // In order: the first replica is the preferred leader.
    let target: Vec<i32> = replicas.iter().map(|b| b.0).collect();
    if target != current {
        let e = Error::InvalidReplicaAssignment(format!(
            "{name}-{} cannot move from broker(s) {current:?} to {target:?}: moving a partition's data between brokers needs replication, which is not implemented yet.",
            p.partition_index
        ));
        return Err((response_error(&e), e.to_string()));
    }
    Ok(())
}
