//! CreateTopics (key 19): explicit creation with partitions, replication
//! factor, configs and validate-only; reports topic ids from v7.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use super::describe_configs::source_code;
use super::error::response_error;
use super::{replica_assignment, Versions};
use crate::authz::Access;
use broker::config::{TopicConfig, TopicKind};
use broker::security::acl::Operation;
use broker::{Broker, Error, NewTopic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(2, 7);

/// Answers CreateTopics. With an authorizer each topic needs Create on the
/// cluster or on itself (TOPIC_AUTHORIZATION_FAILED); its configs are
/// reported only with DescribeConfigs on it.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    // The request's timeout covers all its topics.
    let deadline = Instant::now() + Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut seen = HashSet::new();
    let duplicates: HashSet<_> = req
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.clone()))
        .map(|t| t.name.clone())
        .collect();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.clone();
            let base = CreatableTopicResult::default()
                .with_name(name.clone())
                .with_num_partitions(-1)
                .with_replication_factor(-1);
            if duplicates.contains(&name) {
                return base
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "topic {} appears more than once in the request",
                        name.as_str()
                    ))));
            }
            if !access.may_create_topic(name.as_str()) {
                return base
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "not authorized to create topic {}",
                        name.as_str()
                    ))));
            }
            match create(broker, t, req.validate_only, deadline) {
                Ok(topic) if !access.topic(Operation::DescribeConfigs, topic.name.as_str()) => base
                    .with_topic_id(topic.id.0)
                    .with_num_partitions(topic.partitions)
                    .with_replication_factor(topic.replication_factor)
                    .with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code()),
                Ok(topic) => {
                    let configs = (version >= 5).then(|| {
                        broker
                            .effective_topic_config(&topic.name, &topic.config)
                            .into_iter()
                            .map(|e| {
                                CreatableTopicConfigs::default()
                                    .with_name(StrBytes::from_static_str(e.name))
                                    .with_value(Some(StrBytes::from_string(e.value)))
                                    .with_config_source(source_code(e.source))
                            })
                            .collect()
                    });
                    base.with_topic_id(topic.id.0)
                        .with_num_partitions(topic.partitions)
                        .with_replication_factor(topic.replication_factor)
                        .with_configs(configs)
                }
                Err(e) => base
                    .with_error_code(response_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

struct Created {
    name: model::TopicName,
    id: model::TopicId,
    partitions: i32,
    replication_factor: i16,
    config: TopicConfig,
}

fn create(
    broker: &Arc<Broker>,
    t: CreatableTopic,
    validate_only: bool,
    deadline: Instant,
) -> Result<Created, Error> {
    let name = model::TopicName::new(t.name.as_str())?;
    let mut partitions = (t.num_partitions != -1).then_some(t.num_partitions);
    let mut replication = (t.replication_factor != -1).then_some(t.replication_factor);
    let mut assignments = Vec::new();
    if !t.assignments.is_empty() {
        // Kafka's controller checks, in its order and words.
        if replication.is_some() {
            return Err(Error::InvalidRequest(
                "A manual partition assignment was specified, but replication factor was not set to -1."
                    .into(),
            ));
        }
        if partitions.is_some() {
            return Err(Error::InvalidRequest(
                "A manual partition assignment was specified, but numPartitions was not set to -1."
                    .into(),
            ));
        }
        let mut seen = HashSet::new();
        let mut replication_factor = None;
        for a in &t.assignments {
            if !seen.insert(a.partition_index) {
                return Err(Error::InvalidReplicaAssignment(format!(
                    "Found multiple manual partition assignments for partition {}",
                    a.partition_index
                )));
            }
            replica_assignment::validate(broker, &a.broker_ids, replication_factor)?;
            replication_factor = Some(a.broker_ids.len());
        }
        if (0..t.assignments.len() as i32).any(|i| !seen.contains(&i)) {
            return Err(Error::InvalidReplicaAssignment(
                "partitions should be a consecutive 0-based integer sequence".into(),
            ));
        }
        partitions = Some(t.assignments.len() as i32);
        replication = Some(t.assignments[0].broker_ids.len() as i16);
        let mut sorted: Vec<_> = t.assignments.iter().collect();
        sorted.sort_by_key(|a| a.partition_index);
        assignments = sorted
            .into_iter()
            .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
            .collect();
    }
    let config = TopicConfig::from_pairs(
        t.configs
            .iter()
            .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()))),
    )?;
    let topic = broker.create_topic_within(
        NewTopic {
            assignments,
            name,
            partitions,
            replication_factor: replication,
            kind: TopicKind::Partitioned,
            config,
        },
        validate_only,
        deadline.saturating_duration_since(Instant::now()),
    )?;
    let partitions = if validate_only {
        partitions.unwrap_or_else(|| broker.config().num_partitions())
    } else {
        topic.partition_count() as i32
    };
    let replication_factor = topic
        .placements
        .first()
        .map(|s| s.replicas.len() as i16)
        .or(replication.filter(|r| *r > 0))
        .unwrap_or(1);
    Ok(Created {
        name: topic.name.clone(),
        id: topic.id,
        partitions,
        replication_factor,
        config: topic.config.clone(),
    })
}
