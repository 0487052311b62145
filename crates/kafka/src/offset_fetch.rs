//! OffsetFetch (key 9): committed offsets of one group (v1–v7) or of many
//! groups in one request (v8+).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::error::coordinator_error;
use super::Versions;
use broker::group::store::CommittedOffset;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(1, 9);

type Wanted = Option<Vec<(String, i32)>>;

/// Answers OffsetFetch.
pub fn handle(broker: &Arc<Broker>, version: i16, req: OffsetFetchRequest) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let wanted: Wanted = g.topics.map(|ts| {
                    ts.iter()
                        .flat_map(|t| {
                            t.partition_indexes
                                .iter()
                                .map(move |p| (t.name.to_string(), *p))
                        })
                        .collect()
                });
                let validated = broker.groups().validate_fetch_member(
                    g.group_id.as_str(),
                    g.member_id.as_ref().map(|m| m.as_str()),
                    g.member_epoch,
                );
                match (g.group_id.is_empty(), validated) {
                    (true, _) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(ResponseError::InvalidGroupId.code()),
                    (false, _) if !broker.coordinates(g.group_id.as_str()) => {
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id)
                            .with_error_code(ResponseError::NotCoordinator.code())
                    }
                    (false, Err(e)) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(coordinator_error(&e).code()),
                    (false, Ok(())) => {
                        let rows = fetch(broker, &g.group_id, wanted.as_deref());
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id)
                            .with_topics(group_topics(rows))
                    }
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    if req.group_id.is_empty() {
        return OffsetFetchResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code());
    }
    if !broker.coordinates(req.group_id.as_str()) {
        return OffsetFetchResponse::default()
            .with_error_code(ResponseError::NotCoordinator.code());
    }
    let wanted: Wanted = req.topics.map(|ts| {
        ts.iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |p| (t.name.to_string(), *p))
            })
            .collect()
    });
    let rows = fetch(broker, &req.group_id, wanted.as_deref());
    let mut topics: Vec<OffsetFetchResponseTopic> = Vec::new();
    for (t, p, o) in rows {
        if topics.last().is_none_or(|last| last.name.as_str() != t) {
            topics.push(
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.clone()))),
            );
        }
        let (offset, epoch, meta) = split(o);
        if let Some(last) = topics.last_mut() {
            last.partitions.push(
                OffsetFetchResponsePartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(meta),
            );
        }
    }
    OffsetFetchResponse::default().with_topics(topics)
}

fn fetch(
    broker: &Broker,
    group: &GroupId,
    wanted: Option<&[(String, i32)]>,
) -> Vec<(String, i32, Option<CommittedOffset>)> {
    broker.groups().fetch_offsets(group.as_str(), wanted)
}

fn split(o: Option<CommittedOffset>) -> (i64, i32, Option<StrBytes>) {
    match o {
        Some(o) => (
            o.offset,
            o.leader_epoch,
            Some(StrBytes::from_string(o.metadata.unwrap_or_default())),
        ),
        // Kafka answers "no offset" with -1 and empty metadata, not an error.
        None => (-1, -1, Some(StrBytes::new())),
    }
}

fn group_topics(
    rows: Vec<(String, i32, Option<CommittedOffset>)>,
) -> Vec<OffsetFetchResponseTopics> {
    let mut topics: Vec<OffsetFetchResponseTopics> = Vec::new();
    for (t, p, o) in rows {
        if topics.last().is_none_or(|last| last.name.as_str() != t) {
            topics.push(
                OffsetFetchResponseTopics::default()
                    .with_name(TopicName(StrBytes::from_string(t.clone()))),
            );
        }
        let (offset, epoch, meta) = split(o);
        if let Some(last) = topics.last_mut() {
            last.partitions.push(
                OffsetFetchResponsePartitions::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(meta),
            );
        }
    }
    topics
}
