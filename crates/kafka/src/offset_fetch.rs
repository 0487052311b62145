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

use super::error::{coordinator_error, response_error};
use super::Versions;
use crate::authz::Access;
use broker::group::store::CommittedOffset;
use broker::security::acl::Operation;
use broker::Broker;

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(1, 9);

type Wanted = Option<Vec<(String, i32)>>;

/// Answers OffsetFetch. With an authorizer each group needs Describe
/// (GROUP_AUTHORIZATION_FAILED), and each topic Describe: a topic asked for
/// gets TOPIC_AUTHORIZATION_FAILED, and "every topic" leaves it out.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    access: &Access,
    version: i16,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let group_denied = |g: &str| !access.group(Operation::Describe, g);
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
                let coordinator = broker.coordinator(g.group_id.as_str());
                match (g.group_id.is_empty(), &coordinator) {
                    _ if group_denied(g.group_id.as_str()) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
                    (true, _) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(ResponseError::InvalidGroupId.code()),
                    (false, Err(e)) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(response_error(e).code()),
                    (false, Ok(coordinator)) => {
                        if let Err(e) = coordinator.groups().validate_fetch_member(
                            g.group_id.as_str(),
                            g.member_id.as_ref().map(|m| m.as_str()),
                            g.member_epoch,
                        ) {
                            return OffsetFetchResponseGroup::default()
                                .with_group_id(g.group_id)
                                .with_error_code(coordinator_error(&e).code());
                        }
                        let rows = fetch(
                            broker,
                            coordinator,
                            access,
                            &g.group_id,
                            wanted.as_deref(),
                            req.require_stable,
                        );
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id)
                            .with_topics(group_topics(rows))
                    }
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    // Before v2 there is no request-level error code.
    let request_error = |e: ResponseError| {
        if version >= 2 {
            return OffsetFetchResponse::default().with_error_code(e.code());
        }
        let topics = req.topics.iter().flatten().map(|t| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partition_indexes
                        .iter()
                        .map(|p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(-1)
                                .with_error_code(e.code())
                        })
                        .collect(),
                )
        });
        OffsetFetchResponse::default().with_topics(topics.collect())
    };
    if group_denied(req.group_id.as_str()) {
        return request_error(ResponseError::GroupAuthorizationFailed);
    }
    if req.group_id.is_empty() {
        return OffsetFetchResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code());
    }
    let coordinator = match broker.coordinator(req.group_id.as_str()) {
        Ok(c) => c,
        Err(e) => return request_error(response_error(&e)),
    };
    let wanted: Wanted = req.topics.map(|ts| {
        ts.iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |p| (t.name.to_string(), *p))
            })
            .collect()
    });
    let rows = fetch(
        broker,
        &coordinator,
        access,
        &req.group_id,
        wanted.as_deref(),
        version >= 7 && req.require_stable,
    );
    let mut topics: Vec<OffsetFetchResponseTopic> = Vec::new();
    for (t, p, o) in rows {
        if topics.last().is_none_or(|last| last.name.as_str() != t) {
            topics.push(
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.clone()))),
            );
        }
        let (offset, epoch, meta, error) = split(o);
        if let Some(last) = topics.last_mut() {
            last.partitions.push(
                OffsetFetchResponsePartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(meta)
                    .with_error_code(error),
            );
        }
    }
    OffsetFetchResponse::default().with_topics(topics)
}

/// A partition's committed offset, or the error for it.
type Row = (String, i32, Result<Option<CommittedOffset>, ResponseError>);

/// The group's committed offsets; with `require_stable` (KIP-447) a
/// partition with offsets staged by an unfinished transaction gets
/// UNSTABLE_OFFSET_COMMIT instead, so a `read_committed` consumer does not
/// start from an offset that transaction may still change.
fn fetch(
    broker: &Broker,
    coordinator: &broker::group_slots::Coordinator,
    access: &Access,
    group: &GroupId,
    wanted: Option<&[(String, i32)]>,
    require_stable: bool,
) -> Vec<Row> {
    let asked = wanted.is_some();
    let pending = if require_stable {
        broker.pending_txn_offsets(group.as_str())
    } else {
        Default::default()
    };
    coordinator
        .groups()
        .fetch_offsets(group.as_str(), wanted)
        .into_iter()
        .filter_map(|(t, p, o)| {
            if access.topic(Operation::Describe, &t) {
                if pending.contains(&(t.clone(), p)) {
                    return Some((t, p, Err(ResponseError::UnstableOffsetCommit)));
                }
                Some((t, p, Ok(o)))
            } else if asked {
                Some((t, p, Err(ResponseError::TopicAuthorizationFailed)))
            } else {
                None
            }
        })
        .collect()
}

fn split(o: Result<Option<CommittedOffset>, ResponseError>) -> (i64, i32, Option<StrBytes>, i16) {
    match o {
        Ok(Some(o)) => (
            o.offset,
            o.leader_epoch,
            Some(StrBytes::from_string(o.metadata.unwrap_or_default())),
            0,
        ),
        // Kafka answers "no offset" with -1 and empty metadata, not an error.
        Ok(None) => (-1, -1, Some(StrBytes::new()), 0),
        Err(e) => (-1, -1, Some(StrBytes::new()), e.code()),
    }
}

fn group_topics(rows: Vec<Row>) -> Vec<OffsetFetchResponseTopics> {
    let mut topics: Vec<OffsetFetchResponseTopics> = Vec::new();
    for (t, p, o) in rows {
        if topics.last().is_none_or(|last| last.name.as_str() != t) {
            topics.push(
                OffsetFetchResponseTopics::default()
                    .with_name(TopicName(StrBytes::from_string(t.clone()))),
            );
        }
        let (offset, epoch, meta, error) = split(o);
        if let Some(last) = topics.last_mut() {
            last.partitions.push(
                OffsetFetchResponsePartitions::default()
                    .with_partition_index(p)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(meta)
                    .with_error_code(error),
            );
        }
    }
    topics
}
