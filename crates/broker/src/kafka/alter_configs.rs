//! AlterConfigs (key 33): the older, whole-set form of config changes that
//! librdkafka's `AlterConfigs` admin call uses. The given keys replace every
//! override of the resource; keys left out fall back to their defaults.

use std::sync::Arc;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::describe_configs::{is_this_broker, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::error::response_error;
use super::Versions;
use crate::config::{TopicConfig, BROKER_KEYS};
use crate::{Broker, Error};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// Answers AlterConfigs.
pub fn handle(broker: &Arc<Broker>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let pairs: Vec<(String, Option<String>)> = r
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect();
            let result = match r.resource_type {
                RESOURCE_TOPIC => {
                    super::find_topic(broker, r.resource_name.as_str()).and_then(|topic| {
                        let config = TopicConfig::from_pairs(
                            pairs.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
                        )?;
                        broker.set_topic_config(topic.name.as_str(), config, req.validate_only)
                    })
                }
                RESOURCE_BROKER if is_this_broker(broker, r.resource_name.as_str()) => {
                    // Whole-set semantics: every dynamic key not given is reset.
                    let mut changes: Vec<(String, Option<String>)> = BROKER_KEYS
                        .iter()
                        .filter(|k| k.dynamic && !pairs.iter().any(|(n, _)| n == k.name))
                        .filter(|k| broker.config().dynamic_values().contains_key(k.name))
                        .map(|k| (k.name.to_string(), None))
                        .collect();
                    changes.extend(pairs.iter().cloned());
                    broker.alter_broker_config(&changes, req.validate_only)
                }
                RESOURCE_BROKER => Err(Error::InvalidRequest(format!(
                    "this is broker {}, not {}",
                    broker.node_id(),
                    r.resource_name.as_str()
                ))),
                other => Err(Error::InvalidRequest(format!(
                    "unsupported resource type {other}"
                ))),
            };
            let out = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name);
            match result {
                Ok(()) => out,
                Err(e) => out
                    .with_error_code(response_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}
