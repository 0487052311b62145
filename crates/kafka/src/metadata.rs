//! Metadata (key 3): brokers and topics, with the auto-creation policy.
//!
//! A topic that does not exist is reported as UNKNOWN_TOPIC_OR_PARTITION,
//! never as a topic with zero partitions. It is created only when the request
//! allows auto-creation *and* the broker's `auto.create.topics.enable` is on
//! *and* the principal may create it.
//!
//! With an authorizer, a request for every topic lists only the topics the
//! principal may Describe; one naming a topic it may not Describe gets
//! TOPIC_AUTHORIZATION_FAILED for it, whether the topic exists or not, so
//! the answer discloses nothing. A missing topic the principal may not
//! create (Create on the cluster or the topic) gets the same.

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
use crate::authz::{Access, OPERATIONS_NOT_REQUESTED as NOT_REQUESTED};
use broker::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use broker::{Broker, Error, Topic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 13);

/// Answers Metadata.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    listener: &str,
    version: i16,
    req: MetadataRequest,
) -> MetadataResponse {
    tracing::trace!(?req, "metadata");
    // Before v4 the request has no flag and Kafka treats it as "allowed".
    let allow_auto_create = version < 4 || req.allow_auto_topic_creation;
    let asked_ops = req.include_topic_authorized_operations && version >= 8;
    let topic_ops = |name: &str| {
        if asked_ops {
            access.operations(ResourceType::Topic, name)
        } else {
            NOT_REQUESTED
        }
    };
    let denied = |name: Option<WireTopicName>, id: uuid::Uuid| {
        MetadataResponseTopic::default()
            .with_name(name)
            .with_topic_id(id)
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
    };

    let requested = match req.topics {
        None => None,
        Some(t) if version == 0 && t.is_empty() => None,
        Some(t) => Some(t),
    };
    let topics = match requested {
        None => broker
            .topics()
            .iter()
            .filter(|t| access.topic(Operation::Describe, t.name.as_str()))
            .map(|t| describe(broker, t, topic_ops(t.name.as_str())))
            .collect(),
        Some(list) => list
            .into_iter()
            .map(|t| {
                let id = TopicId(t.topic_id);
                match t.name {
                    Some(name) if !access.topic(Operation::Describe, name.as_str()) => {
                        denied(Some(name), uuid::Uuid::nil())
                    }
                    Some(name) => by_name(broker, access, &name, allow_auto_create, topic_ops),
                    None if !id.is_zero() => match broker.topic_by_id(id) {
                        Some(topic) if !access.topic(Operation::Describe, topic.name.as_str()) => {
                            denied(None, t.topic_id)
                        }
                        Some(topic) => describe(broker, &topic, topic_ops(topic.name.as_str())),
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
            if !(req.include_cluster_authorized_operations && (8..=10).contains(&version)) {
                NOT_REQUESTED
            } else if access.cluster(Operation::Describe) {
                access.operations(ResourceType::Cluster, CLUSTER_NAME)
            } else {
                0
            },
        )
        .with_topics(topics)
}

fn by_name(
    broker: &Arc<Broker>,
    access: &Access,
    name: &WireTopicName,
    allow: bool,
    ops: impl Fn(&str) -> i32,
) -> MetadataResponseTopic {
    let may_create = allow && access.may_create_topic(name.as_str());
    let result = model::TopicName::new(name.as_str())
        .map_err(Error::from)
        .and_then(|n| broker.lookup_topic(&n, may_create));
    let error = match result {
        Ok(topic) => return describe(broker, &topic, ops(topic.name.as_str())),
        // Kafka's answer when the topic would have been created but for
        // the ACLs.
        Err(Error::UnknownTopic(_))
            if allow && !may_create && broker.config().auto_create_topics_enable() =>
        {
            ResponseError::TopicAuthorizationFailed
        }
        Err(e) => response_error(&e),
    };
    MetadataResponseTopic::default()
        .with_name(Some(name.clone()))
        .with_error_code(error.code())
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
                        .with_offline_replicas(nodes(&broker.offline_replicas(state)))
                })
                .collect(),
        )
}
