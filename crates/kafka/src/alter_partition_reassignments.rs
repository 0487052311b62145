//! AlterPartitionReassignments (key 45), answered as a single-node Kafka
//! cluster's controller does (`ReplicationControlManager
//! .alterPartitionReassignments`): the only valid target is this broker,
//! where every replica already is, so a reassignment completes at once; a
//! cancellation finds none in progress.

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
    // Valid replicas here are exactly [this broker]: the current ones.
    if !allow_rf_change && replicas.len() != 1 {
        let e = Error::InvalidReplicationFactor(format!(
            "The replication factor is changed from 1 to {}",
            replicas.len()
        ));
        return Err((response_error(&e), e.to_string()));
    }
    Ok(())
}
