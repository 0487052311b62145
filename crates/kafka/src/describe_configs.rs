//! DescribeConfigs (key 32): topic and broker configuration, with sources,
//! synonyms, types and documentation.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::error::response_error;
use super::Versions;
use broker::config::{broker_keys, ConfigKey, ConfigSource, ValueKind, TOPIC_KEYS};
use broker::{Broker, BrokerScope};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(1, 4);

/// Kafka's resource type codes.
pub const RESOURCE_TOPIC: i8 = 2;
/// Kafka's resource type code for a broker.
pub const RESOURCE_BROKER: i8 = 4;
/// Kafka's BROKER_LOGGER resource type.
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Kafka's DescribeConfigs source code for a [`ConfigSource`]. A Pulsar
/// namespace's policy, a default shared by the namespace's topics and set
/// at runtime, is reported as DYNAMIC_DEFAULT_BROKER_CONFIG (3), Kafka's
/// nearest: not a topic override (deleting the topic's key does not
/// remove it) and not a default either.
pub fn source_code(s: ConfigSource) -> i8 {
    match s {
        ConfigSource::Topic => 1,
        ConfigSource::Dynamic => 2,
        ConfigSource::DynamicDefault | ConfigSource::Namespace => 3,
        ConfigSource::Static => 4,
        ConfigSource::Default => 5,
    }
}

/// The dynamic layer a broker resource name addresses on this broker: ""
/// the cluster-wide defaults, this broker's id its own keys; another id
/// is not here.
pub fn broker_scope(broker: &Broker, name: &str) -> Option<BrokerScope> {
    if name.is_empty() {
        Some(BrokerScope::ClusterDefault)
    } else if name == broker.node_id().to_string() {
        Some(BrokerScope::ThisBroker)
    } else {
        None
    }
}

/// A configurable resource named by a config request.
pub enum Resource<'a> {
    /// A topic, by name.
    Topic(&'a str),
    /// A layer of broker keys.
    Broker(BrokerScope),
}

/// Whether the principal may `operation` (DescribeConfigs or AlterConfigs)
/// the configs of the resource: a topic's on the topic, a broker's on the
/// cluster.
pub(crate) fn config_access(
    access: &crate::authz::Access,
    resource_type: i8,
    name: &str,
    operation: broker::security::acl::Operation,
) -> Result<(), broker::Error> {
    match resource_type {
        RESOURCE_TOPIC => access.require_topic(operation, name),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => access.require_cluster(operation),
        // Refused as unsupported by the caller.
        _ => Ok(()),
    }
}

/// [`resource`] for AlterConfigs and IncrementalAlterConfigs, once the
/// principal may alter its configs.
pub(crate) fn alterable_resource<'a>(
    broker: &Broker,
    access: &crate::authz::Access,
    resource_type: i8,
    name: &'a str,
) -> Result<Resource<'a>, broker::Error> {
    config_access(
        access,
        resource_type,
        name,
        broker::security::acl::Operation::AlterConfigs,
    )?;
    resource(broker, resource_type, name)
}

/// Resolves a request's resource type and name, or the error Kafka gives.
pub fn resource<'a>(
    broker: &Broker,
    resource_type: i8,
    name: &'a str,
) -> Result<Resource<'a>, broker::Error> {
    match resource_type {
        RESOURCE_TOPIC => Ok(Resource::Topic(name)),
        RESOURCE_BROKER => match broker_scope(broker, name) {
            Some(scope) => Ok(Resource::Broker(scope)),
            None => Err(broker::Error::InvalidRequest(format!(
                "this is broker {}, not {name}",
                broker.node_id()
            ))),
        },
        other => Err(broker::Error::InvalidRequest(format!(
            "unsupported resource type {other}"
        ))),
    }
}

/// Answers DescribeConfigs; a topic's configs need DescribeConfigs on it,
/// a broker's DescribeConfigs on the cluster.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    version: i16,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let broker_config = broker.config();
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let wanted = |name: &str| {
                r.configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
            };
            let out = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            if let Err(e) = config_access(
                access,
                r.resource_type,
                r.resource_name.as_str(),
                broker::security::acl::Operation::DescribeConfigs,
            ) {
                return out
                    .with_error_code(super::error::response_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string())));
            }
            let entry = |spec: &ConfigKey,
                         value: &str,
                         source: ConfigSource,
                         mut synonyms: Vec<DescribeConfigsSynonym>| {
                // Secrets are never sent back, as Kafka hides them.
                let sensitive = matches!(spec.kind, ValueKind::Password);
                if sensitive {
                    for s in &mut synonyms {
                        s.value = None;
                    }
                }
                let mut e = DescribeConfigsResourceResult::default()
                    .with_name(StrBytes::from_static_str(spec.name))
                    .with_value((!sensitive).then(|| StrBytes::from_string(value.to_string())))
                    .with_is_sensitive(sensitive)
                    .with_read_only(!spec.dynamic)
                    .with_config_source(source_code(source))
                    .with_synonyms(if req.include_synonyms {
                        synonyms
                    } else {
                        Vec::new()
                    });
                if version >= 3 {
                    e = e.with_config_type(config_type(spec)).with_documentation(
                        req.include_documentation
                            .then(|| StrBytes::from_static_str(spec.doc)),
                    );
                }
                e
            };
            match r.resource_type {
                RESOURCE_TOPIC => match super::find_topic(broker, r.resource_name.as_str()) {
                    Ok(topic) => {
                        let configs = broker
                            .effective_topic_config(&topic.name, &topic.config)
                            .into_iter()
                            .zip(TOPIC_KEYS)
                            .filter(|(e, _)| wanted(e.name))
                            .map(|(e, spec)| {
                                let mut syn = Vec::new();
                                if matches!(e.source, ConfigSource::Topic | ConfigSource::Namespace)
                                {
                                    syn.push(synonym(spec.name, &e.value, e.source));
                                }
                                if let Some((v, s)) =
                                    spec.broker_default.and_then(|b| broker_config.get(b))
                                {
                                    if s != ConfigSource::Default {
                                        syn.push(synonym(
                                            spec.broker_default.unwrap_or(spec.name),
                                            v,
                                            s,
                                        ));
                                    }
                                }
                                syn.push(synonym(
                                    spec.broker_default.unwrap_or(spec.name),
                                    spec.default,
                                    ConfigSource::Default,
                                ));
                                entry(spec, &e.value, e.source, syn)
                            })
                            .collect();
                        out.with_configs(configs)
                    }
                    Err(e) => out
                        .with_error_code(response_error(&e).code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                },
                RESOURCE_BROKER => match broker_scope(broker, r.resource_name.as_str()) {
                    // The cluster-wide defaults alone, as Kafka describes
                    // the default resource.
                    Some(BrokerScope::ClusterDefault) => {
                        let defaults = broker.dynamic_broker_configs(BrokerScope::ClusterDefault);
                        let configs = broker_keys()
                            .filter(|k| wanted(k.name))
                            .filter_map(|spec| {
                                let v = defaults.get(spec.name)?;
                                let s = ConfigSource::DynamicDefault;
                                Some(entry(spec, v, s, vec![synonym(spec.name, v, s)]))
                            })
                            .collect();
                        out.with_configs(configs)
                    }
                    Some(BrokerScope::ThisBroker) => {
                        let configs = broker_keys()
                            .filter(|k| wanted(k.name))
                            .filter_map(|spec| {
                                let (v, s) = broker_config.get(spec.name)?;
                                let syn = broker
                                    .broker_config_synonyms(spec.name)
                                    .into_iter()
                                    .map(|(v, s)| synonym(spec.name, &v, s))
                                    .collect();
                                Some(entry(spec, v, s, syn))
                            })
                            .collect();
                        out.with_configs(configs)
                    }
                    None => out
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "this is broker {}, not {}",
                            broker.node_id(),
                            r.resource_name.as_str()
                        )))),
                },
                other => out
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "unsupported resource type {other}"
                    )))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn synonym(name: &str, value: &str, source: ConfigSource) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(Some(StrBytes::from_string(value.to_string())))
        .with_source(source_code(source))
}

/// Kafka's DescribeConfigs type code for a declared key (BOOLEAN 1,
/// STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7), from its declared kind.
fn config_type(spec: &ConfigKey) -> i8 {
    spec.kind.kafka_type() as i8
}
