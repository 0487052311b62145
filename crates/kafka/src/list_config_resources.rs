//! ListConfigResources (key 74; KIP-1142, v0 was KIP-1000's
//! ListClientMetricsResources): the resources whose configuration
//! DescribeConfigs can describe.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::StrBytes;

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 1);

const RESOURCE_CLIENT_METRICS: i8 = 16;
const RESOURCE_GROUP: i8 = 32;

/// The types Kafka lists (an empty request list means all of them).
const SUPPORTED: &[i8] = &[
    RESOURCE_TOPIC,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
];

/// Answers ListConfigResources. v0 lists client-metrics subscriptions
/// only: there are none here. v1 lists every topic and this broker for
/// their types; broker loggers, client-metrics subscriptions and group
/// configs do not exist here, so those types list nothing. A type Kafka
/// does not define is refused with UNSUPPORTED_VERSION, as Kafka does.
///
/// With an authorizer it needs DescribeConfigs on the cluster.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    version: i16,
    req: ListConfigResourcesRequest,
) -> ListConfigResourcesResponse {
    if !access.cluster(broker::security::acl::Operation::DescribeConfigs) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    if version == 0 {
        return ListConfigResourcesResponse::default();
    }
    let types: &[i8] = if req.resource_types.is_empty() {
        SUPPORTED
    } else {
        &req.resource_types
    };
    if types.iter().any(|t| !SUPPORTED.contains(t)) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let resource = |name: String, t: i8| {
        ConfigResource::default()
            .with_resource_name(StrBytes::from_string(name))
            .with_resource_type(t)
    };
    let mut out = Vec::new();
    if types.contains(&RESOURCE_BROKER) {
        out.push(resource(broker.node_id().to_string(), RESOURCE_BROKER));
    }
    if types.contains(&RESOURCE_TOPIC) {
        out.extend(
            broker
                .topics()
                .iter()
                .map(|t| resource(t.name.to_string(), RESOURCE_TOPIC)),
        );
    }
    ListConfigResourcesResponse::default().with_config_resources(out)
}
