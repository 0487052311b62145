//! DescribeCluster (key 60): this broker and the cluster id.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use crate::authz::{Access, OPERATIONS_NOT_REQUESTED};
use broker::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// Endpoint type "brokers" (KIP-919); "controllers" (2) is not served here.
const ENDPOINT_BROKERS: i8 = 1;

/// Answers DescribeCluster. As in Kafka anyone may ask; the cluster's
/// authorized operations are reported (when asked for) only to a principal
/// with Describe on the cluster, 0 to others.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    listener: &str,
    version: i16,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let resp = DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(broker.cluster_id().to_string()))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_endpoint_type(if version >= 1 {
            req.endpoint_type
        } else {
            ENDPOINT_BROKERS
        })
        .with_cluster_authorized_operations(if !req.include_cluster_authorized_operations {
            OPERATIONS_NOT_REQUESTED
        } else if access.cluster(Operation::Describe) {
            access.operations(ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        });
    if version >= 1 && req.endpoint_type != ENDPOINT_BROKERS {
        return resp
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "only broker endpoints are served",
            )));
    }
    resp.with_brokers(
        broker
            .live_brokers(listener)
            .into_iter()
            .map(|(node, e)| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(node))
                    .with_host(StrBytes::from_string(e.host))
                    .with_port(e.port as i32)
            })
            .collect(),
    )
}
