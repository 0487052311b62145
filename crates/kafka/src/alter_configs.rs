//! AlterConfigs (key 33): the older, whole-set form of config changes that
//! librdkafka's `AlterConfigs` admin call uses. The given keys replace every
//! override of the resource; keys left out fall back to their defaults.

use std::sync::Arc;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::describe_configs::Resource;
use super::error::code_and_message;
use super::Versions;
use broker::config::TopicConfig;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// Answers AlterConfigs; a topic's configs need AlterConfigs on it, a
/// broker's AlterConfigs on the cluster.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let pairs: Vec<(String, Option<String>)> = r
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect();
            let result = super::describe_configs::alterable_resource(
                broker,
                access,
                r.resource_type,
                r.resource_name.as_str(),
            )
            .and_then(|res| match res {
                Resource::Topic(name) => super::find_topic(broker, name).and_then(|topic| {
                    let config = TopicConfig::from_pairs(
                        pairs.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
                    )?;
                    broker.set_topic_config(topic.name.as_str(), config, req.validate_only)
                }),
                Resource::Broker(scope) => {
                    // Whole-set semantics: every key of the layer not given is reset.
                    broker.replace_broker_config(scope, &pairs, req.validate_only)
                }
            });
            let (code, message) = code_and_message(&result);
            AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name)
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}
