//! ListOffsets (key 2): earliest, latest, by timestamp, max timestamp.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use model::{PartitionId, Timestamp};

use super::error::response_error;
use super::Versions;
use crate::authz::Access;
use broker::security::acl::Operation;
use broker::{Broker, Error, Partition};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(1, 10);

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Answers ListOffsets; each topic needs Describe.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    // read_committed (v2+): the latest offset is the last stable offset.
    let committed = version >= 2 && req.isolation_level == 1;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = access
                .require_topic(Operation::Describe, t.name.as_str())
                .and_then(|()| model::TopicName::new(t.name.as_str()).map_err(Error::from))
                .and_then(|n| {
                    broker
                        .topic(n.as_str())
                        .ok_or_else(|| Error::UnknownTopic(n.to_string()))
                });
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let resp = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let result = topic
                        .as_ref()
                        .map_err(response_error)
                        .and_then(|topic| {
                            topic
                                .partition(PartitionId(p.partition_index))
                                .map_err(|e| response_error(&e))
                        })
                        .and_then(|part| {
                            lookup(
                                part,
                                version,
                                p.timestamp,
                                p.current_leader_epoch,
                                committed,
                            )
                        });
                    match result {
                        Ok((offset, ts, epoch)) => resp
                            .with_offset(offset)
                            .with_timestamp(ts)
                            // The field only exists from v4.
                            .with_leader_epoch(if version >= 4 { epoch } else { -1 }),
                        Err(code) => resp
                            .with_error_code(code.code())
                            .with_offset(-1)
                            .with_timestamp(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

fn lookup(
    p: &Partition,
    version: i16,
    timestamp: i64,
    current_epoch: i32,
    committed: bool,
) -> Result<(i64, i64, i32), ResponseError> {
    let epoch = p.leader_epoch().0;
    if current_epoch >= 0 && current_epoch != epoch {
        return Err(if current_epoch > epoch {
            ResponseError::UnknownLeaderEpoch
        } else {
            ResponseError::FencedLeaderEpoch
        });
    }
    let log = p.log();
    let storage_err = |e| response_error(&p.storage_error(e));
    match timestamp {
        LATEST if committed => Ok((log.last_stable_offset().0, -1, epoch)),
        LATEST => Ok((log.high_watermark().0, -1, epoch)),
        EARLIEST => Ok((log.log_start_offset().0, -1, epoch)),
        EARLIEST_LOCAL if version >= 8 => Ok((log.log_start_offset().0, -1, epoch)),
        LATEST_TIERED if version >= 9 => Ok((log.high_watermark().0, -1, epoch)),
        MAX_TIMESTAMP if version >= 7 => {
            match log.offset_of_max_timestamp().map_err(storage_err)? {
                Some((o, ts)) => Ok((o.0, ts.0, epoch)),
                None => Ok((-1, -1, -1)),
            }
        }
        ts if ts >= 0 => match log
            .offset_for_timestamp(Timestamp(ts))
            .map_err(storage_err)?
        {
            Some((o, ts)) => Ok((o.0, ts.0, epoch)),
            None => Ok((-1, -1, -1)),
        },
        _ => Err(ResponseError::InvalidRequest),
    }
}
