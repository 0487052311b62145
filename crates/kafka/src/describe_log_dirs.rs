//! DescribeLogDirs (key 35): the one log directory (the data directory),
//! its partitions' sizes and, from v4, the file system's total and usable
//! bytes.

use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use model::PartitionId;

use super::error::response_error;
use super::Versions;
use broker::{Broker, Topic};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(1, 4);

/// Answers DescribeLogDirs. `topics` null describes every partition; a
/// list describes the partitions named that exist here (others are left
/// out, as Kafka does). Runs on the blocking pool (`statvfs`).
///
/// Needs Describe on the cluster: otherwise nothing is described, with
/// CLUSTER_AUTHORIZATION_FAILED from v3 (where the field exists).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &crate::authz::Access,
    version: i16,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    if !access.cluster(broker::security::acl::Operation::Describe) {
        let resp = DescribeLogDirsResponse::default();
        return if version >= 3 {
            resp.with_error_code(
                kafka_protocol::error::ResponseError::ClusterAuthorizationFailed.code(),
            )
        } else {
            resp
        };
    }
    let describe = |topic: &Topic, partitions: &mut dyn Iterator<Item = i32>| {
        let partitions: Vec<DescribeLogDirsPartition> = partitions
            .filter_map(|p| topic.hosted_partition(PartitionId(p)))
            .map(|p| {
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.tp.partition.0)
                    .with_partition_size(p.log().size_bytes() as i64)
                    // Kafka's lag of a current (not future) log: its high
                    // watermark past its own log end, so 0 unless the log
                    // was cut back below it.
                    .with_offset_lag(
                        (p.log().high_watermark().0 - p.log().log_end_offset().0).max(0),
                    )
                    .with_is_future_key(false)
            })
            .collect();
        (!partitions.is_empty()).then(|| {
            DescribeLogDirsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.name.to_string())))
                .with_partitions(partitions)
        })
    };
    let topics: Vec<DescribeLogDirsTopic> = match req.topics {
        None => broker
            .topics()
            .iter()
            .filter_map(|t| describe(t, &mut t.partitions.iter().map(|p| p.tp.partition.0)))
            .collect(),
        Some(wanted) => wanted
            .iter()
            .filter_map(|w| {
                let t = broker.topic(w.topic.as_str())?;
                describe(&t, &mut w.partitions.iter().copied())
            })
            .collect(),
    };
    let mut dir = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(
            broker.log_dir().display().to_string(),
        ))
        .with_topics(topics);
    if version >= 4 {
        match broker.log_dir_space() {
            Ok((total, usable)) => {
                dir = dir
                    .with_total_bytes(total as i64)
                    .with_usable_bytes(usable as i64);
            }
            Err(e) => dir = dir.with_error_code(response_error(&e).code()),
        }
    }
    DescribeLogDirsResponse::default().with_results(vec![dir])
}
