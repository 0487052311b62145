//! Partition reassignment (KIP-455, as Kafka's controller does it): a new
//! replica set is reached through a transitional one. The replicas the
//! target adds join `replicas` (listed in `adding_replicas`) and fetch
//! from the leader like any follower; once every target replica is in the
//! ISR the reassignment completes in the same partition change that
//! admitted the last one: the replicas the target drops leave, and the
//! leader moves into the target if it was not there. Every step bumps the
//! leader epoch, so the leader rebuilds its view of the replica set and
//! followers fetch in the new epoch.

use std::collections::BTreeSet;

use crate::image::{Metadata, PartitionState, NO_LEADER};
use crate::records::{MetadataRecord, NodeId};

/// Why a reassignment was refused (Kafka's error for each named).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassignError {
    /// No such partition (UNKNOWN_TOPIC_OR_PARTITION).
    #[error("no partition {partition} of {topic}")]
    UnknownPartition {
        /// The topic asked for.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// The target is empty, repeats a broker or names one that is not
    /// registered (INVALID_REPLICA_ASSIGNMENT).
    #[error("{0}")]
    InvalidAssignment(String),
    /// The target changes the number of replicas and the request does not
    /// allow it (INVALID_REPLICATION_FACTOR).
    #[error("the target has {target} replicas, the partition {current}; the request does not allow changing the replication factor")]
    ReplicationFactorChange {
        /// Replicas the partition has.
        current: usize,
        /// Replicas the target has.
        target: usize,
    },
    /// A cancellation of a partition not being reassigned
    /// (NO_REASSIGNMENT_IN_PROGRESS).
    #[error("no reassignment of the partition is in progress")]
    NoneInProgress,
}

/// The replicas a partition had before the reassignment under way (its
/// replicas when none is).
pub fn original_replicas(s: &PartitionState) -> Vec<NodeId> {
    s.replicas
        .iter()
        .copied()
        .filter(|r| !s.adding_replicas.contains(r))
        .collect()
}

/// The replicas a reassignment under way moves to (its replicas when none
/// is).
pub fn target_replicas(s: &PartitionState) -> Vec<NodeId> {
    s.replicas
        .iter()
        .copied()
        .filter(|r| !s.removing_replicas.contains(r))
        .collect()
}

/// `next`, a state the replication rules decided from `current` (an ISR
/// change, an election), with `current`'s reassignment kept, and completed
/// if `next`'s ISR now holds every target replica.
pub fn carried(
    current: &PartitionState,
    mut next: PartitionState,
    live: &BTreeSet<NodeId>,
) -> PartitionState {
    next.adding_replicas = current.adding_replicas.clone();
    next.removing_replicas = current.removing_replicas.clone();
    complete(&next, live).unwrap_or(next)
}

/// The state that completes `s`'s reassignment, if one is under way and
/// every target replica is in the ISR: the removed replicas leave the
/// replicas and the ISR, and a leader outside the target hands over to the
/// first target replica in the ISR that is live. The partition epoch is
/// the caller's; the leader epoch is bumped.
pub fn complete(s: &PartitionState, live: &BTreeSet<NodeId>) -> Option<PartitionState> {
    if !s.is_reassigning() {
        return None;
    }
    let target = target_replicas(s);
    if !target.iter().all(|r| s.isr.contains(r)) {
        return None;
    }
    let isr: Vec<NodeId> = s
        .isr
        .iter()
        .copied()
        .filter(|r| target.contains(r))
        .collect();
    let leader = if target.contains(&s.leader) {
        s.leader
    } else {
        target
            .iter()
            .copied()
            .find(|r| isr.contains(r) && live.contains(r))
            .unwrap_or(NO_LEADER)
    };
    Some(PartitionState {
        replicas: target,
        isr,
        leader,
        leader_epoch: s.leader_epoch + 1,
        partition_epoch: s.partition_epoch,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    })
}

/// Decides AlterPartitionReassignments for `partition` of `topic`: moving
/// it to `target` (`None`: cancelling the reassignment under way). The
/// record to commit, or `None` when nothing changes (the target is the
/// partition's replica set and nothing is under way: Kafka completes
/// such a reassignment at once).
pub fn reassign(
    m: &Metadata,
    topic: &str,
    partition: i32,
    target: Option<&[NodeId]>,
    allow_replication_factor_change: bool,
) -> Result<Option<MetadataRecord>, ReassignError> {
    let (rec, current) =
        m.partition_named(topic, partition)
            .ok_or_else(|| ReassignError::UnknownPartition {
                topic: topic.to_string(),
                partition,
            })?;
    if let Some(target) = target {
        check_target(m, target)?;
        let original = original_replicas(current);
        if !allow_replication_factor_change && target.len() != original.len() {
            return Err(ReassignError::ReplicationFactorChange {
                current: original.len(),
                target: target.len(),
            });
        }
    }
    Ok(
        change(current, target, &m.live_brokers())?.map(|state| MetadataRecord::PartitionChanged {
            id: rec.id,
            partition,
            state,
        }),
    )
}

/// The state a reassignment makes of `current`: toward `target` (a
/// valid replica set; `None`: back to the replicas before the move under
/// way), `None` when nothing changes. `live`: the brokers that may lead.
pub fn change(
    current: &PartitionState,
    target: Option<&[NodeId]>,
    live: &BTreeSet<NodeId>,
) -> Result<Option<PartitionState>, ReassignError> {
    let original = original_replicas(current);
    match target {
        None => {
            if !current.is_reassigning() {
                return Err(ReassignError::NoneInProgress);
            }
            revert(current, &original, live).map(Some)
        }
        Some(target) if !current.is_reassigning() && current.replicas == target => Ok(None),
        // The same move again (a retry): nothing changes.
        Some(target) if target_replicas(current) == target => Ok(None),
        // From every replica it has now: a replica still being added that
        // the new target drops is removed with the others at completion,
        // so the ISR keeps all its members until then.
        Some(target) => Ok(Some(moving(current, &original, target, live))),
    }
}

fn check_target(m: &Metadata, target: &[NodeId]) -> Result<(), ReassignError> {
    if target.is_empty() {
        return Err(ReassignError::InvalidAssignment(
            "the target replica set is empty".into(),
        ));
    }
    let distinct: BTreeSet<NodeId> = target.iter().copied().collect();
    if distinct.len() != target.len() {
        return Err(ReassignError::InvalidAssignment(format!(
            "the target replica set {target:?} names a broker twice"
        )));
    }
    if let Some(b) = target.iter().find(|b| !m.brokers.contains_key(b)) {
        return Err(ReassignError::InvalidAssignment(format!(
            "broker {b} is not registered"
        )));
    }
    Ok(())
}

/// The transitional state toward `target` from the partition's `current`
/// replicas (a reassignment already under way is replaced), whose
/// replicas before any move were `original`: the target first, then every
/// other current replica, all removed at completion; completed at once
/// when the target is in sync already (a shrink). Adding: every replica
/// not an original one (one still being added that the new target drops
/// is both adding and removing), so the original replicas stay known for
/// a cancellation.
fn moving(
    current: &PartitionState,
    original: &[NodeId],
    target: &[NodeId],
    live: &BTreeSet<NodeId>,
) -> PartitionState {
    let removing: Vec<NodeId> = current
        .replicas
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let replicas: Vec<NodeId> = target.iter().chain(removing.iter()).copied().collect();
    let adding: Vec<NodeId> = replicas
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let mut next = with_replicas(current, replicas, live);
    next.adding_replicas = adding;
    next.removing_replicas = removing;
    complete(&next, live).map_or(next, |mut done| {
        // One change, one leader epoch.
        done.leader_epoch = current.leader_epoch + 1;
        done
    })
}

/// The state back on the `original` replicas (a cancellation): the
/// replicas being added leave; refused when none of the original ones is
/// in sync to lead.
fn revert(
    current: &PartitionState,
    original: &[NodeId],
    live: &BTreeSet<NodeId>,
) -> Result<PartitionState, ReassignError> {
    if !current.isr.iter().any(|r| original.contains(r)) {
        return Err(ReassignError::InvalidAssignment(
            "no replica of the original assignment is in sync: the reassignment cannot be cancelled".into(),
        ));
    }
    Ok(with_replicas(current, original.to_vec(), live))
}

/// `current` with the replica set `replicas`, no reassignment, the ISR cut
/// to it, the leader kept if it is still a replica in sync (else the first
/// replica in sync that is live) and both epochs bumped.
fn with_replicas(
    current: &PartitionState,
    replicas: Vec<NodeId>,
    live: &BTreeSet<NodeId>,
) -> PartitionState {
    let isr: Vec<NodeId> = current
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    let leader = if isr.contains(&current.leader) {
        current.leader
    } else {
        replicas
            .iter()
            .copied()
            .find(|r| isr.contains(r) && live.contains(r))
            .unwrap_or(NO_LEADER)
    };
    PartitionState {
        replicas,
        isr,
        leader,
        leader_epoch: current.leader_epoch + 1,
        partition_epoch: current.partition_epoch + 1,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}

/// The partitions being reassigned (topic name, index, state), for
/// ListPartitionReassignments.
pub fn ongoing(m: &Metadata) -> Vec<(String, i32, PartitionState)> {
    m.partitions()
        .filter(|(_, _, s)| s.is_reassigning())
        .map(|(t, i, s)| (t.name.to_string(), i, s.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
