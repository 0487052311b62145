//! DescribeTopicPartitions (key 75, KIP-966): topics and their partitions,
//! paged by a cursor, as Kafka 4's tools read them. Mirrors Kafka's
//! `DescribeTopicPartitionsRequestHandler` and
//! `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Versions;
use crate::authz::Access;
use broker::security::acl::{Operation, ResourceType};
use broker::{Broker, Topic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Most partitions one response describes, whatever the request asks
/// (Kafka's `max.request.partition.size.limit` default).
pub const MAX_PARTITIONS: i32 = 2000;

/// Answers DescribeTopicPartitions. Topics are described in name order
/// from the cursor's topic (from its partition), at most
/// `min(response_partition_limit, 2000)` partitions in all; when more
/// remain, `next_cursor` says where to go on. An empty topic list means
/// every topic (unknown names are then never reported); a listed topic that
/// does not exist gets UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
/// for an invalid name). With an authorizer, topics the principal may not
/// Describe are left out of "every topic" and answered
/// TOPIC_AUTHORIZATION_FAILED when listed.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    // A bad cursor fails every topic asked for, as Kafka's error response.
    let invalid = |message: String| {
        tracing::debug!("DescribeTopicPartitions refused: {message}");
        DescribeTopicPartitionsResponse::default().with_topics(
            req.topics
                .iter()
                .map(|t| {
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_name(Some(t.name.clone()))
                })
                .collect(),
        )
    };
    let all = req.topics.is_empty();
    let cursor_topic = req
        .cursor
        .as_ref()
        .map_or(String::new(), |c| c.topic_name.to_string());
    let mut names: Vec<String> = if all {
        broker
            .topics()
            .iter()
            .filter(|t| access.topic(Operation::Describe, t.name.as_str()))
            .map(|t| t.name.to_string())
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.retain(|n| *n >= cursor_topic);
    names.sort();
    names.dedup();
    if let Some(c) = &req.cursor {
        if !all && !names.contains(&cursor_topic) {
            return invalid(format!(
                "DescribeTopicPartitionsRequest topic list should contain the cursor topic: {cursor_topic}"
            ));
        }
        if c.partition_index < 0 {
            return invalid(format!(
                "DescribeTopicPartitionsRequest cursor partition must be valid: {}",
                c.partition_index
            ));
        }
    }
    let start = |name: &str| match &req.cursor {
        Some(c) if name == cursor_topic => c.partition_index,
        _ => 0,
    };
    let mut remaining = req.response_partition_limit.clamp(1, MAX_PARTITIONS);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        if remaining == 0 {
            // The previous topics were answered whole: go on at this one.
            next_cursor = Some(cursor(&name, 0));
            break;
        }
        if !all && !access.topic(Operation::Describe, &name) {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_name(Some(wire_name(&name))),
            );
            continue;
        }
        let ops = access.operations(ResourceType::Topic, &name);
        match broker.topic(&name) {
            Some(topic) => {
                let from = start(&name).max(0) as usize;
                let upto = topic.partition_count().min(from + remaining as usize);
                topics.push(describe(broker, &topic, from.min(upto)..upto, ops));
                remaining -= (upto.saturating_sub(from)) as i32;
                if upto < topic.partition_count() {
                    next_cursor = Some(cursor(&name, upto as i32));
                    break;
                }
            }
            None if !all => {
                let code = match model::TopicName::new(&name) {
                    Ok(_) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(code.code())
                        .with_name(Some(wire_name(&name)))
                        .with_is_internal(name.starts_with("__"))
                        .with_topic_authorized_operations(ops),
                );
            }
            None => {}
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

fn wire_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(wire_name(topic))
        .with_partition_index(partition)
}

fn describe(
    broker: &Broker,
    topic: &Topic,
    partitions: std::ops::Range<usize>,
    ops: i32,
) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(wire_name(topic.name.as_str())))
        .with_topic_id(topic.id.0)
        .with_is_internal(topic.name.is_internal())
        .with_topic_authorized_operations(ops)
        .with_partitions(
            topic.placements[partitions.clone()]
                .iter()
                .zip(partitions)
                .map(|(state, index)| {
                    let nodes = |ids: &[i32]| ids.iter().map(|&n| BrokerId(n)).collect();
                    let leader = broker.live_leader(state);
                    let offline = broker.offline_replicas(state);
                    DescribeTopicPartitionsResponsePartition::default()
                        .with_partition_index(index as i32)
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(state.leader_epoch)
                        .with_replica_nodes(nodes(&state.replicas))
                        .with_isr_nodes(nodes(&state.isr))
                        .with_eligible_leader_replicas(Some(Vec::new()))
                        .with_last_known_elr(Some(Vec::new()))
                        .with_offline_replicas(nodes(&offline))
                })
                .collect(),
        )
}
