//! ListOffsets: a partition's earliest or latest offset, or the first
//! offset at or after a timestamp, asked of each partition's leader.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::{Client, Lane};
use crate::error::{Error, Result};
use crate::metadata::NodeId;

/// The protocol's "latest offset" timestamp.
pub(crate) const LATEST: i64 = -1;
/// The protocol's "earliest offset" timestamp.
pub(crate) const EARLIEST: i64 = -2;

/// One lookup: topic, partition and what to look up ([`LATEST`],
/// [`EARLIEST`] or a timestamp in ms).
pub(crate) type Query = (Arc<str>, i32, i64);

/// Answers `queries` in order. A timestamp lookup with no message at or
/// after the timestamp answers -1. Leaders come from the metadata cache,
/// refreshed once if some are missing.
pub(crate) async fn list_offsets(
    client: &Client,
    lane: Lane,
    queries: &[Query],
) -> Vec<Result<i64>> {
    let mut md = client.metadata();
    if queries.iter().any(|(t, p, _)| md.leader(t, *p).is_none()) {
        let mut topics: Vec<&str> = queries.iter().map(|(t, _, _)| &**t).collect();
        topics.sort_unstable();
        topics.dedup();
        if let Ok(fresh) = client.refresh_metadata(&topics).await {
            md = fresh;
        }
    }
    let mut out: Vec<Option<Result<i64>>> = Vec::with_capacity(queries.len());
    // A request names each partition once (Kafka refuses duplicates), so
    // the second lookup of a partition goes in a second request.
    let mut by_leader: HashMap<(NodeId, usize), Vec<usize>> = HashMap::new();
    let mut seen: HashMap<(&str, i32), usize> = HashMap::new();
    for (i, (t, p, _)) in queries.iter().enumerate() {
        match md.leader(t, *p) {
            Some(n) => {
                let round = seen.entry((&**t, *p)).or_insert(0);
                by_leader.entry((n, *round)).or_default().push(i);
                *round += 1;
                out.push(None);
            }
            None => out.push(Some(Err(no_leader(t, *p)))),
        }
    }
    let requests = by_leader.into_iter().map(|((node, _), idx)| async move {
        let r = ask(client, lane, node, queries, &idx).await;
        (idx, r)
    });
    for (idx, r) in futures::future::join_all(requests).await {
        match r {
            Ok(offsets) => {
                for (i, o) in idx.into_iter().zip(offsets) {
                    out[i] = Some(o);
                }
            }
            Err(e) => {
                for i in idx {
                    out[i] = Some(Err(e.clone()));
                }
            }
        }
    }
    out.into_iter()
        .map(|o| o.expect("every query is answered"))
        .collect()
}

fn no_leader(topic: &str, partition: i32) -> Error {
    Error::from_code(5, Some(&format!("no leader known for {topic}-{partition}")))
        .expect("5 is LEADER_NOT_AVAILABLE")
}

/// One request to `node` for the queries at `idx`.
async fn ask(
    client: &Client,
    lane: Lane,
    node: NodeId,
    queries: &[Query],
    idx: &[usize],
) -> Result<Vec<Result<i64>>> {
    let conn = client.connection_on_lane(node, lane).await?;
    let v = conn.versions().pick::<ListOffsetsRequest>()?;
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for &i in idx {
        let (t, p, ts) = &queries[i];
        let part = ListOffsetsPartition::default()
            .with_partition_index(*p)
            .with_timestamp(*ts);
        match topics.iter_mut().find(|x| x.name.0.as_str() == &**t) {
            Some(x) => x.partitions.push(part),
            None => topics.push(
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_string())))
                    .with_partitions(vec![part]),
            ),
        }
    }
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(topics);
    let resp = conn.send(v, &req)?.await?;
    Ok(idx
        .iter()
        .map(|&i| {
            let (t, p, _) = &queries[i];
            let found = resp
                .topics
                .iter()
                .filter(|x| x.name.0.as_str() == &**t)
                .flat_map(|x| x.partitions.iter())
                .find(|x| x.partition_index == *p);
            match found {
                None => Err(Error::Protocol(format!(
                    "ListOffsets: no answer for {t}-{p}"
                ))),
                Some(x) => Error::check(x.error_code, None).map(|_| x.offset),
            }
        })
        .collect())
}
