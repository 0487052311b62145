//! What one broker must do when the metadata changes: Kafka's
//! `MetadataDelta` / `TopicsDelta::localChanges`. Given the metadata before
//! and after some committed records and this broker's node id, which
//! partitions it must start hosting (open or create their logs), which it
//! must stop hosting (stage their logs for deletion, because their topic was
//! deleted, recreated under another id, or the partition moved away), and
//! which hosted partitions changed their leader, replicas or epochs (the
//! broker becomes leader or follower), and which hosted topics need their
//! log configs refreshed (only topics whose own overrides changed: a
//! namespace or broker default change is the caller's to refresh).
//!
//! Pure: the broker applies the answer (logs, topic table) itself, for
//! records of the controller quorum's committed log (a standalone node's
//! quorum of one included); a first full state is the delta from empty
//! metadata (KIP-516 `is_every_partition`, see [`crate::reconcile`]).

use std::collections::{BTreeMap, BTreeSet};

use model::{PartitionId, TopicId, TopicName, TopicPartition};

use crate::image::Metadata;
use crate::records::{NodeId, PartitionState};

/// A partition and the id of the topic it belongs to.
pub type Hosted = BTreeMap<TopicPartition, TopicId>;

/// Every partition `m` gives `node` a replica of, with its topic's id.
pub fn hosted_by(m: &Metadata, node: NodeId) -> Hosted {
    m.partitions()
        .filter(|(_, _, s)| s.has_replica(node))
        .map(|(t, p, _)| (TopicPartition::new(t.name.clone(), PartitionId(p)), t.id))
        .collect()
}

/// The changes of one broker between two metadata states.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalChanges {
    /// Partitions to start hosting, in order (a recreated topic's
    /// partitions appear here with the new id and in `stop` with the old).
    pub start: Vec<(TopicPartition, TopicId)>,
    /// Partitions to stop hosting, with the id of the topic they held.
    pub stop: Vec<(TopicPartition, TopicId)>,
    /// Partitions hosted before and after (same topic id) whose
    /// placement changed: leader, replicas, ISR or epochs, with the new
    /// state.
    pub changed: Vec<(TopicPartition, PartitionState)>,
    /// Topics still hosted whose own config overrides changed.
    pub reconfigured: Vec<TopicName>,
}

impl LocalChanges {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
            && self.stop.is_empty()
            && self.changed.is_empty()
            && self.reconfigured.is_empty()
    }
}

/// What `node` must change to go from hosting `old`'s partitions to
/// hosting `new`'s.
pub fn local_changes(old: &Metadata, new: &Metadata, node: NodeId) -> LocalChanges {
    let before = hosted_by(old, node);
    let after = hosted_by(new, node);
    let stop = before
        .iter()
        .filter(|(tp, id)| after.get(*tp) != Some(*id))
        .map(|(tp, id)| (tp.clone(), *id))
        .collect();
    let start = after
        .iter()
        .filter(|(tp, id)| before.get(*tp) != Some(*id))
        .map(|(tp, id)| (tp.clone(), *id))
        .collect();
    let still: BTreeSet<&TopicName> = after
        .iter()
        .filter(|(tp, id)| before.get(*tp) == Some(*id))
        .map(|(tp, _)| &tp.topic)
        .collect();
    let state = |m: &Metadata, tp: &TopicPartition| {
        m.topics[&tp.topic].placements[tp.partition.0 as usize].clone()
    };
    let changed = after
        .iter()
        .filter(|(tp, id)| before.get(*tp) == Some(*id))
        .filter_map(|(tp, _)| {
            let now = state(new, tp);
            (state(old, tp) != now).then(|| (tp.clone(), now))
        })
        .collect();
    let reconfigured = still
        .into_iter()
        .filter(|name| {
            let (o, n) = (&old.topics[*name], &new.topics[*name]);
            o.config != n.config
        })
        .cloned()
        .collect();
    LocalChanges {
        start,
        stop,
        changed,
        reconfigured,
    }
}

#[cfg(test)]
mod tests;
