//! Partition offsets (ListOffsets) and group offset resets (OffsetCommit
//! outside any membership, as `kafka-consumer-groups --reset-offsets` does).

use std::collections::BTreeMap;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, GroupId, ListOffsetsRequest, OffsetCommitRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, PerItem};
use crate::error::{Error, Result};

/// Which offset ListOffsets should look up.
///
/// ```
/// let spec = magnetar_client::OffsetSpec::Timestamp(1_700_000_000_000);
/// assert_ne!(spec, magnetar_client::OffsetSpec::Latest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark (the next offset to be written).
    Latest,
    /// The first record whose timestamp is at or after this (ms).
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(ts) => ts,
        }
    }
}

/// One ListOffsets answer.
///
/// ```
/// let o = magnetar_client::ListedOffset { offset: 42, timestamp: -1 };
/// assert_eq!(o.offset, 42);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset, or -1 if no record matches a timestamp lookup.
    pub offset: i64,
    /// The matching record's timestamp, or -1.
    pub timestamp: i64,
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

impl Admin {
    /// Looks up `spec` for each partition, asking each partition's leader.
    ///
    /// ```no_run
    /// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
    /// let ends = admin.list_offsets(&[("orders", 0), ("orders", 1)], magnetar_client::OffsetSpec::Latest).await?;
    /// for ((t, p), r) in ends { println!("{t}-{p}: {:?}", r.map(|o| o.offset)); }
    /// # Ok(()) }
    /// ```
    pub async fn list_offsets(
        &self,
        partitions: &[(&str, i32)],
        spec: OffsetSpec,
    ) -> Result<PerItem<(String, i32), ListedOffset>> {
        let topics: Vec<&str> = {
            let mut t: Vec<&str> = partitions.iter().map(|(t, _)| *t).collect();
            t.sort();
            t.dedup();
            t
        };
        self.client.refresh_metadata(&topics).await?;
        let metadata = self.client.metadata();
        let mut results: BTreeMap<(String, i32), Result<ListedOffset>> = BTreeMap::new();
        let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
        for (t, p) in partitions {
            match metadata.leader(t, *p) {
                Some(node) => by_leader
                    .entry(node.0)
                    .or_default()
                    .push((t.to_string(), *p)),
                None => {
                    let known = metadata
                        .topics
                        .get(*t)
                        .and_then(|m| m.partition(*p))
                        .is_some();
                    let e = match known {
                        // Listed without a leader: its broker is down or an
                        // election is under way (retriable).
                        true => Error::from_code(
                            5,
                            Some(&format!("partition {t}-{p} has no leader at the moment")),
                        )
                        .expect("a non-zero code"),
                        false => Error::NotFound(format!("partition {t}-{p}")),
                    };
                    results.insert((t.to_string(), *p), Err(e));
                }
            }
        }
        for (leader, parts) in by_leader {
            let conn = self
                .client
                .connection(crate::metadata::NodeId(leader))
                .await?;
            let v = conn.versions().pick::<ListOffsetsRequest>()?;
            let mut grouped: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for (t, p) in &parts {
                grouped.entry(t.as_str()).or_default().push(*p);
            }
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(
                    grouped
                        .iter()
                        .map(|(t, ps)| {
                            ListOffsetsTopic::default()
                                .with_name(topic_name(t))
                                .with_partitions(
                                    ps.iter()
                                        .map(|p| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(*p)
                                                .with_timestamp(spec.wire())
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let resp = conn.send(v, &req)?.await?;
            for t in resp.topics {
                for p in t.partitions {
                    let r = Error::check(p.error_code, None).map(|()| ListedOffset {
                        offset: p.offset,
                        timestamp: p.timestamp,
                    });
                    results.insert((t.name.0.to_string(), p.partition_index), r);
                }
            }
        }
        Ok(partitions
            .iter()
            .map(|(t, p)| {
                let key = (t.to_string(), *p);
                let r = results.remove(&key).unwrap_or_else(|| {
                    Err(Error::Protocol(format!(
                        "no ListOffsets answer for {t}-{p}"
                    )))
                });
                (key, r)
            })
            .collect())
    }

    /// Sets a group's committed offsets, as `kafka-consumer-groups
    /// --reset-offsets --execute` does. The broker accepts this only while
    /// the group has no members.
    ///
    /// ```no_run
    /// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
    /// admin.alter_group_offsets("billing", &[("orders", 0, 1200)]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn alter_group_offsets(
        &self,
        group: &str,
        offsets: &[(&str, i32, i64)],
    ) -> Result<PerItem<(String, i32), ()>> {
        let conn = self.coordinator_connection(group).await?;
        let v = conn.versions().pick::<OffsetCommitRequest>()?;
        let mut grouped: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for (t, p, o) in offsets {
            grouped.entry(t).or_default().push((*p, *o));
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                grouped
                    .iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(
                                ps.iter()
                                    .map(|(p, o)| {
                                        OffsetCommitRequestPartition::default()
                                            .with_partition_index(*p)
                                            .with_committed_offset(*o)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = conn.send(v, &req)?.await?;
        let mut results: BTreeMap<(String, i32), Result<()>> = BTreeMap::new();
        for t in resp.topics {
            for p in t.partitions {
                results.insert(
                    (t.name.0.to_string(), p.partition_index),
                    Error::check(p.error_code, None),
                );
            }
        }
        Ok(offsets
            .iter()
            .map(|(t, p, _)| {
                let key = (t.to_string(), *p);
                let r = results.remove(&key).unwrap_or_else(|| {
                    Err(Error::Protocol(format!(
                        "no OffsetCommit answer for {t}-{p}"
                    )))
                });
                (key, r)
            })
            .collect())
    }
}
