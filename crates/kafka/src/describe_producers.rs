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

use super::error::response_error;
use super::Versions;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 0);

/// Answers DescribeProducers. A partition that does not exist gets
/// UNKNOWN_TOPIC_OR_PARTITION. Producers are not transactional here, so
/// `coordinator_epoch` and `current_txn_start_offset` are -1.
pub fn handle(broker: &Arc<Broker>, req: DescribeProducersRequest) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = super::find_topic(broker, t.name.as_str());
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let out = PartitionResponse::default()
                        .with_partition_index(p)
                        .with_error_message(None);
                    match topic.as_ref().map_err(|e| response_error(e)).and_then(|t| {
                        t.partition(PartitionId(p))
                            .map_err(|e| response_error(&e))
                    }) {
                        Ok(partition) => out.with_active_producers(
                            partition
                                .log()
                                .producer_states()
                                .into_iter()
                                .map(|(id, e)| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(id.0))
                                        .with_producer_epoch(i32::from(e.epoch.0))
                                        .with_last_sequence(e.last_sequence().unwrap_or(-1))
                                        .with_last_timestamp(e.last_timestamp.0)
                                        .with_coordinator_epoch(-1)
                                        .with_current_txn_start_offset(-1)
                                })
                                .collect(),
                        ),
                        Err(code) => out.with_error_code(code.code()).with_error_message(Some(
                            StrBytes::from_string(match code {
                                ResponseError::UnknownTopicOrPartition => format!(
                                    "{}-{p} does not exist",
                                    t.name.as_str()
                                ),
                                other => other.to_string(),
                            }),
                        )),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
