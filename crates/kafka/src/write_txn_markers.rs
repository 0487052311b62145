//! WriteTxnMarkers (key 27): commit or abort markers for a producer's
//! transaction on partitions this broker leads, as a transaction
//! coordinator sends them, and as `kafka-transactions abort` (Kafka's
//! `Admin.abortTransaction`) ends a hanging transaction.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::error::response_error;
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::Broker;

/// Implemented versions (v0 is gone from Kafka 4 too).
pub const VERSIONS: Versions = Versions::new(1, 1);

/// Answers WriteTxnMarkers. Blocking: it writes markers. With an
/// authorizer it needs ClusterAction on the cluster
/// (CLUSTER_AUTHORIZATION_FAILED for every partition), as in Kafka.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let allowed = access.cluster(Operation::ClusterAction);
    let markers = req
        .markers
        .into_iter()
        .map(|m| {
            let partitions: Vec<(String, i32)> = m
                .topics
                .iter()
                .flat_map(|t| {
                    t.partition_indexes
                        .iter()
                        .map(move |p| (t.name.to_string(), *p))
                })
                .collect();
            let codes: Vec<i16> = if allowed {
                broker
                    .write_txn_markers(
                        m.producer_id.0,
                        m.producer_epoch,
                        m.transaction_result,
                        m.coordinator_epoch,
                        &partitions,
                    )
                    .into_iter()
                    .map(|(_, r)| r.map_or_else(|e| response_error(&e).code(), |()| 0))
                    .collect()
            } else {
                vec![ResponseError::ClusterAuthorizationFailed.code(); partitions.len()]
            };
            let mut codes = codes.into_iter();
            let topics = m
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(*p)
                                .with_error_code(codes.next().unwrap_or_default())
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}
