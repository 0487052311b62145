//! Metadata (key 3): brokers and topics, with the auto-creation policy.
//!
//! A topic that does not exist is reported as UNKNOWN_TOPIC_OR_PARTITION,
//! never as a topic with zero partitions. It is created only when the request
//! allows auto-creation *and* the broker's `auto.create.topics.enable` is on.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, MetadataRequest, MetadataResponse, TopicName as WireTopicName,
};
use kafka_protocol::protocol::StrBytes;
use model::TopicId;

use super::error::response_error;
use super::Versions;
use broker::{Broker, Error, Topic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 13);

/// Authorized-operations bitfields (no ACLs: everything is allowed); the
/// topic one is shared with DescribeTopicPartitions.
pub(crate) const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);
const NOT_REQUESTED: i32 = i32::MIN;

/// Answers Metadata.
pub fn handle(
    broker: &Arc<Broker>,
    listener: &str,
    version: i16,
    req: MetadataRequest,
) -> MetadataResponse {
    tracing::trace!(?req, "metadata");
    // Before v4 the request has no flag and Kafka treats it as "allowed".
    let allow_auto_create = version < 4 || req.allow_auto_topic_creation;
    let topic_ops = |asked: bool| {
        if asked && version >= 8 {
            TOPIC_OPERATIONS
        } else {
            NOT_REQUESTED
        }
    };
    let include_topic_ops = req.include_topic_authorized_operations;

    let requested = match req.topics {
        None => None,
        Some(t) if version == 0 && t.is_empty() => None,
        Some(t) => Some(t),
    };
    let topics = match requested {
        None => broker
            .topics()
            .iter()
            .map(|t| describe(broker, t, topic_ops(include_topic_ops)))
            .collect(),
        Some(list) => list
            .into_iter()
            .map(|t| {
                let id = TopicId(t.topic_id);
                match t.name {
                    Some(name) => by_name(
                        broker,
                        &name,
                        allow_auto_create,
                        topic_ops(include_topic_ops),
                    ),
                    None if !id.is_zero() => match broker.topic_by_id(id) {
                        Some(topic) => describe(broker, &topic, topic_ops(include_topic_ops)),
                        None => MetadataResponseTopic::default()
                            .with_name(None)
                            .with_topic_id(t.topic_id)
                            .with_error_code(ResponseError::UnknownTopicId.code()),
                    },
                    None => MetadataResponseTopic::default()
                        .with_name(None)
                        .with_error_code(ResponseError::InvalidRequest.code()),
                }
            })
            .collect(),
    };

    MetadataResponse::default()
        .with_brokers(
            broker
                .live_brokers(listener)
                .into_iter()
                .map(|(node, e)| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(node))
                        .with_host(StrBytes::from_string(e.host))
                        .with_port(e.port as i32)
                })
                .collect(),
        )
        .with_cluster_id(Some(StrBytes::from_string(broker.cluster_id().to_string())))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_cluster_authorized_operations(
            if req.include_cluster_authorized_operations && (8..=10).contains(&version) {
                CLUSTER_OPERATIONS
            } else {
                NOT_REQUESTED
            },
        )
        .with_topics(topics)
}

fn by_name(
    broker: &Arc<Broker>,
    name: &WireTopicName,
    allow: bool,
    ops: i32,
) -> MetadataResponseTopic {
    let result = model::TopicName::new(name.as_str())
        .map_err(Error::from)
        .and_then(|n| broker.lookup_topic(&n, allow));
    match result {
        Ok(topic) => describe(broker, &topic, ops),
        Err(e) => MetadataResponseTopic::default()
            .with_name(Some(name.clone()))
            .with_error_code(response_error(&e).code()),
    }
}

fn describe(broker: &Broker, topic: &Topic, ops: i32) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(WireTopicName(StrBytes::from_string(
            topic.name.to_string(),
        ))))
        .with_topic_id(topic.id.0)
        .with_is_internal(topic.name.is_internal())
        .with_topic_authorized_operations(ops)
        .with_partitions(
            topic
                .placements
                .iter()
                .enumerate()
                .map(|(index, state)| {
                    let nodes = |ids: &[i32]| ids.iter().map(|&n| BrokerId(n)).collect();
                    let leader = broker.live_leader(state);
                    // A partition whose leader is fenced is offline.
                    let error = if leader < 0 {
                        ResponseError::LeaderNotAvailable.code()
                    } else {
                        0
                    };
                    MetadataResponsePartition::default()
                        .with_partition_index(index as i32)
                        .with_error_code(error)
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(state.leader_epoch)
                        .with_replica_nodes(nodes(&state.replicas))
                        .with_isr_nodes(nodes(&state.isr))
                })
                .collect(),
        )
}
