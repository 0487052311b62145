//! DeleteRecords (key 21): advance a partition's log start offset.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use model::{Offset, PartitionId};

use super::error::response_error;
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::{Broker, Error};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 2);

/// Answers DeleteRecords (offset -1 means "up to the high watermark").
/// Each topic needs Delete.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = access
                .require_topic(Operation::Delete, t.name.as_str())
                .and_then(|()| super::find_topic(broker, t.name.as_str()))
                .and_then(|topic| {
                    // As Kafka: deleting records of __consumer_offsets would lose every committed offset.
                    if topic.name.is_internal() {
                        return Err(Error::InvalidTopic(model::Error::InvalidTopicName {
                            name: topic.name.to_string(),
                            reason: "cannot delete records of an internal topic",
                        }));
                    }
                    Ok(topic)
                });
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let result = topic.as_ref().map_err(response_error).and_then(|topic| {
                        let part = topic
                            .partition(PartitionId(p.partition_index))
                            .map_err(|e| response_error(&e))?;
                        let log = part.log();
                        let target = if p.offset == -1 {
                            log.high_watermark()
                        } else {
                            Offset(p.offset)
                        };
                        log.delete_records_before(target)
                            .map_err(|e| response_error(&part.storage_error(e)))
                    });
                    let out = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index);
                    match result {
                        Ok(low) => out.with_low_watermark(low.0),
                        Err(code) => out.with_low_watermark(-1).with_error_code(code.code()),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
