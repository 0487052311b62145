//! DescribeProducers (key 61): the idempotent producers each partition's
//! log knows (the producer state the log keeps for deduplication), as
//! Kafka's `ReplicaManager.activeProducerState` reports them.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;
use model::PartitionId;

use super::Versions;
use broker::{Broker, Error, Topic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Answers DescribeProducers. A partition that does not exist gets
/// UNKNOWN_TOPIC_OR_PARTITION. `coordinator_epoch` is that of the last marker (-1: none) and
/// `current_txn_start_offset` the first offset of its open transaction (-1: none).
///
/// Each topic needs Read (TOPIC_AUTHORIZATION_FAILED), as in Kafka.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = access
                .require_topic(broker::security::acl::Operation::Read, t.name.as_str())
                .and_then(|()| super::find_topic(broker, t.name.as_str()));
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| partition(topic.as_deref(), p))
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn partition(topic: Result<&Topic, &Error>, index: i32) -> PartitionResponse {
    let out = PartitionResponse::default()
        .with_partition_index(index)
        .with_error_message(None);
    if let Err(e @ Error::Denied { .. }) = topic {
        return out
            .with_error_code(crate::error::response_error(e).code())
            .with_error_message(Some(StrBytes::from_string(e.to_string())));
    }
    let found = topic.map_err(|e| e.to_string()).and_then(|t| {
        t.partition(PartitionId(index))
            .map_err(|e| e.to_string())
            .cloned()
    });
    let partition = match found {
        Ok(p) => p,
        // Any partition this broker does not have, as Kafka answers.
        Err(message) => {
            return out
                .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                .with_error_message(Some(StrBytes::from_string(message)));
        }
    };
    let producers = partition
        .log()
        .producer_states()
        .into_iter()
        .map(|(id, e)| {
            ProducerState::default()
                .with_producer_id(ProducerId(id.0))
                .with_producer_epoch(i32::from(e.epoch.0))
                .with_last_sequence(e.last_sequence().unwrap_or(-1))
                .with_last_timestamp(e.last_timestamp.0)
                .with_coordinator_epoch(e.coordinator_epoch)
                .with_current_txn_start_offset(e.txn_first_offset.map_or(-1, |o| o.0))
        })
        .collect();
    out.with_active_producers(producers)
}
