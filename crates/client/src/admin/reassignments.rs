//! Partition reassignments (KIP-455): move partitions to other brokers,
//! cancel a move, list the moves under way.

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, PerItem};
use crate::error::{Error, Result};
use crate::metadata::NodeId;

/// A partition reassignment under way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReassignment {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its replicas now (the target's, then those being removed).
    pub replicas: Vec<NodeId>,
    /// Replicas being added (copying the partition's data).
    pub adding: Vec<NodeId>,
    /// Replicas removed once the move completes.
    pub removing: Vec<NodeId>,
}

/// One partition to move: topic, partition and its target replicas, the
/// first the preferred leader (`None`: cancel the move under way).
pub type Reassignment<'a> = (&'a str, i32, Option<Vec<NodeId>>);

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

impl Admin {
    /// Starts (or replaces, or cancels) the reassignment of each partition
    /// of `moves`; each partition's result, in order. A started move
    /// completes on its own once the new replicas are in sync (see
    /// [`Admin::list_partition_reassignments`]).
    ///
    /// ```no_run
    /// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
    /// use magnetar_client::NodeId;
    /// let target = vec![NodeId(2), NodeId(3)];
    /// let results = admin.alter_partition_reassignments(&[("orders", 0, Some(target))]).await?;
    /// for ((topic, p), r) in results { r?; println!("{topic}-{p} is moving"); }
    /// # Ok(()) }
    /// ```
    pub async fn alter_partition_reassignments(
        &self,
        moves: &[Reassignment<'_>],
    ) -> Result<PerItem<(String, i32), ()>> {
        let conn = self.controller_connection().await?;
        let v = conn
            .versions()
            .pick::<AlterPartitionReassignmentsRequest>()?;
        let mut topics: Vec<ReassignableTopic> = Vec::new();
        for (t, p, target) in moves {
            let part = ReassignablePartition::default()
                .with_partition_index(*p)
                .with_replicas(
                    target
                        .as_ref()
                        .map(|r| r.iter().map(|b| BrokerId(b.0)).collect()),
                );
            match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
                Some(x) => x.partitions.push(part),
                None => topics.push(
                    ReassignableTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(vec![part]),
                ),
            }
        }
        let req = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_allow_replication_factor_change(true)
            .with_topics(topics);
        let resp = conn.send(v, &req)?.await?;
        Error::check(resp.error_code, resp.error_message.as_deref())?;
        Ok(moves
            .iter()
            .map(|(t, p, _)| {
                let r = resp
                    .responses
                    .iter()
                    .find(|x| x.name.as_str() == *t)
                    .and_then(|x| x.partitions.iter().find(|x| x.partition_index == *p))
                    .ok_or_else(|| Error::Protocol(format!("no result for {t}-{p}")))
                    .and_then(|x| Error::check(x.error_code, x.error_message.as_deref()));
                ((t.to_string(), *p), r)
            })
            .collect())
    }

    /// The reassignments under way (of `topics`' partitions only, if
    /// given as (topic, partitions)).
    pub async fn list_partition_reassignments(
        &self,
        topics: Option<&[(&str, Vec<i32>)]>,
    ) -> Result<Vec<PartitionReassignment>> {
        let conn = self.controller_connection().await?;
        let v = conn
            .versions()
            .pick::<ListPartitionReassignmentsRequest>()?;
        let req = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|(t, ps)| {
                        ListPartitionReassignmentsTopics::default()
                            .with_name(topic_name(t))
                            .with_partition_indexes(ps.clone())
                    })
                    .collect()
            }));
        let resp = conn.send(v, &req)?.await?;
        Error::check(resp.error_code, resp.error_message.as_deref())?;
        let ids = |v: &[BrokerId]| v.iter().map(|b| NodeId(b.0)).collect::<Vec<_>>();
        Ok(resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| PartitionReassignment {
                    topic: t.name.to_string(),
                    partition: p.partition_index,
                    replicas: ids(&p.replicas),
                    adding: ids(&p.adding_replicas),
                    removing: ids(&p.removing_replicas),
                })
            })
            .collect())
    }
}
