//! IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on
//! topic and broker configuration.

use std::sync::Arc;

use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::describe_configs::Resource;
use super::error::code_and_message;
use super::Versions;
use broker::config::{KafkaType, TopicConfig, TOPIC_KEYS};
use broker::{Broker, Error};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 1);

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Answers IncrementalAlterConfigs; authorized as AlterConfigs.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let result = super::describe_configs::alterable_resource(
                broker,
                access,
                r.resource_type,
                r.resource_name.as_str(),
            )
            .and_then(|res| match res {
                Resource::Topic(name) => alter_topic(broker, name, &r.configs, req.validate_only),
                Resource::Broker(scope) => {
                    alter_broker(broker, scope, &r.configs, req.validate_only)
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
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn alter_topic(
    broker: &Arc<Broker>,
    name: &str,
    ops: &[AlterableConfig],
    validate_only: bool,
) -> Result<(), Error> {
    let topic = super::find_topic(broker, name)?;
    let broker_config = broker.config();
    broker.update_topic_config(topic.name.as_str(), validate_only, |current| {
        apply_ops(current.clone(), ops, &broker_config)
    })
}

/// Applies SET/DELETE/APPEND/SUBTRACT operations to a topic's overrides.
fn apply_ops(
    mut config: TopicConfig,
    ops: &[AlterableConfig],
    broker_config: &broker::config::BrokerConfig,
) -> Result<TopicConfig, Error> {
    for op in ops {
        let key = op.name.as_str();
        let value = op.value.as_ref().map(|v| v.as_str());
        match op.config_operation {
            SET => config.set(key, value.ok_or_else(|| missing_value(key))?)?,
            DELETE => config.remove(key)?,
            APPEND | SUBTRACT => {
                let is_list = TOPIC_KEYS
                    .iter()
                    .any(|k| k.name == key && k.kind.kafka_type() == KafkaType::List);
                if !is_list {
                    return Err(Error::InvalidConfig {
                        key: key.to_string(),
                        reason: "APPEND and SUBTRACT apply only to list-valued keys".into(),
                    });
                }
                let current = config
                    .effective(broker_config)
                    .into_iter()
                    .find(|e| e.name == key)
                    .map(|e| e.value)
                    .unwrap_or_default();
                let mut items: Vec<String> = current
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                for v in value
                    .ok_or_else(|| missing_value(key))?
                    .split(',')
                    .map(str::trim)
                {
                    if op.config_operation == APPEND {
                        if !items.iter().any(|i| i == v) {
                            items.push(v.to_string());
                        }
                    } else {
                        items.retain(|i| i != v);
                    }
                }
                config.set(key, &items.join(","))?;
            }
            other => {
                return Err(Error::InvalidRequest(format!(
                    "unknown config operation {other}"
                )))
            }
        }
    }
    Ok(config)
}

fn alter_broker(
    broker: &Arc<Broker>,
    scope: broker::BrokerScope,
    ops: &[AlterableConfig],
    validate_only: bool,
) -> Result<(), Error> {
    let mut changes = Vec::with_capacity(ops.len());
    for op in ops {
        let key = op.name.to_string();
        match op.config_operation {
            SET => {
                let v = op.value.as_ref().ok_or_else(|| missing_value(&key))?;
                changes.push((key, Some(v.to_string())));
            }
            DELETE => changes.push((key, None)),
            _ => {
                return Err(Error::InvalidConfig {
                    key,
                    reason: "only SET and DELETE apply to broker keys".into(),
                })
            }
        }
    }
    broker.alter_broker_config(scope, &changes, validate_only)
}

fn missing_value(key: &str) -> Error {
    Error::InvalidConfig {
        key: key.to_string(),
        reason: "SET needs a value".into(),
    }
}
