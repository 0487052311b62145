//! The controller's pure decisions for one partition: AlterPartition,
//! leader election and fencing a broker (KRaft's ReplicationControl, with
//! KIP-841's rule that only live replicas may be in the ISR).

use std::collections::BTreeSet;

use model::{LeaderEpoch, NodeId};

use crate::{PartitionEpoch, ReplicationError};

/// The controller's record of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The replica set, in preference order.
    pub replicas: Vec<NodeId>,
    /// The in-sync replicas, in replica order.
    pub isr: Vec<NodeId>,
    /// The leader, or `None` while the partition is offline.
    pub leader: Option<NodeId>,
    /// The leader epoch; bumped on every leader change.
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch; bumped on every change of this record.
    pub partition_epoch: PartitionEpoch,
}

impl PartitionState {
    /// A new partition led by the first replica, with every replica in sync.
    pub fn new(replicas: Vec<NodeId>) -> Self {
        PartitionState {
            leader: replicas.first().copied(),
            isr: replicas.clone(),
            replicas,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
        }
    }

    fn in_replica_order(&self, set: &BTreeSet<NodeId>) -> Vec<NodeId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| set.contains(r))
            .collect()
    }
}

/// A leader's request to change the ISR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The leader sending it.
    pub broker: NodeId,
    /// The leader epoch it leads in.
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch its view is built on.
    pub partition_epoch: PartitionEpoch,
    /// The ISR it asks for.
    pub new_isr: Vec<NodeId>,
}

/// Decides an AlterPartition: accepted when sent by the current leader in
/// the current leader epoch, built on the current partition epoch, and
/// naming only live replicas (including the leader). Accepting bumps the
/// partition epoch.
pub fn alter_partition(
    state: &PartitionState,
    request: &AlterPartitionRequest,
    live: &BTreeSet<NodeId>,
) -> Result<PartitionState, ReplicationError> {
    if request.leader_epoch < state.leader_epoch {
        return Err(ReplicationError::FencedLeaderEpoch {
            request: request.leader_epoch,
            current: state.leader_epoch,
        });
    }
    if request.leader_epoch > state.leader_epoch {
        return Err(ReplicationError::UnknownLeaderEpoch {
            request: request.leader_epoch,
            current: state.leader_epoch,
        });
    }
    if state.leader != Some(request.broker) {
        return Err(ReplicationError::NotLeader);
    }
    if request.partition_epoch != state.partition_epoch {
        return Err(ReplicationError::InvalidUpdateVersion {
            request: request.partition_epoch,
            current: state.partition_epoch,
        });
    }
    if !request.new_isr.contains(&request.broker) {
        return Err(ReplicationError::InvalidRequest(
            "the ISR must hold the leader",
        ));
    }
    for r in &request.new_isr {
        if !state.replicas.contains(r) || !live.contains(r) {
            return Err(ReplicationError::IneligibleReplica(*r));
        }
    }
    let set: BTreeSet<NodeId> = request.new_isr.iter().copied().collect();
    let mut next = state.clone();
    next.isr = state.in_replica_order(&set);
    next.partition_epoch = PartitionEpoch(state.partition_epoch.0 + 1);
    Ok(next)
}

/// Elects a leader: the first replica (in replica order) that is in the ISR
/// and live; the ISR keeps its live members. With `unclean_allowed`, and no
/// such replica, the first live replica leads alone. Bumps both epochs.
pub fn elect_leader(
    state: &PartitionState,
    live: &BTreeSet<NodeId>,
    unclean_allowed: bool,
) -> Result<PartitionState, ReplicationError> {
    let clean = state
        .replicas
        .iter()
        .copied()
        .find(|r| state.isr.contains(r) && live.contains(r));
    let (leader, isr) = match clean {
        Some(l) => {
            let isr: BTreeSet<NodeId> = state
                .isr
                .iter()
                .copied()
                .filter(|r| live.contains(r))
                .collect();
            (l, state.in_replica_order(&isr))
        }
        None if unclean_allowed => {
            let l = state
                .replicas
                .iter()
                .copied()
                .find(|r| live.contains(r))
                .ok_or(ReplicationError::NoEligibleLeader)?;
            (l, vec![l])
        }
        None => return Err(ReplicationError::NoEligibleLeader),
    };
    Ok(PartitionState {
        replicas: state.replicas.clone(),
        isr,
        leader: Some(leader),
        leader_epoch: LeaderEpoch(state.leader_epoch.0 + 1),
        partition_epoch: PartitionEpoch(state.partition_epoch.0 + 1),
    })
}

/// The partition after `broker` is fenced (`live` no longer holds it). A
/// fenced leader is replaced by [`elect_leader`]; with nobody eligible the
/// partition goes offline (leader `None`, leader epoch bumped). A fenced
/// ISR member leaves the ISR, except the last one, which keeps it so that it
/// alone may lead again when it returns (KIP-841).
pub fn remove_broker(
    state: &PartitionState,
    broker: NodeId,
    live: &BTreeSet<NodeId>,
    unclean_allowed: bool,
) -> PartitionState {
    if !state.replicas.contains(&broker) {
        return state.clone();
    }
    let others: Vec<NodeId> = state.isr.iter().copied().filter(|r| *r != broker).collect();
    if state.leader == Some(broker) {
        let mut without = state.clone();
        without.isr = others.clone();
        let mut live = live.clone();
        live.remove(&broker);
        if let Ok(next) = elect_leader(&without, &live, unclean_allowed) {
            return next;
        }
        return PartitionState {
            replicas: state.replicas.clone(),
            isr: if others.is_empty() {
                state.isr.clone()
            } else {
                others
            },
            leader: None,
            leader_epoch: LeaderEpoch(state.leader_epoch.0 + 1),
            partition_epoch: PartitionEpoch(state.partition_epoch.0 + 1),
        };
    }
    if state.isr.contains(&broker) && !others.is_empty() {
        let mut next = state.clone();
        next.isr = others;
        next.partition_epoch = PartitionEpoch(state.partition_epoch.0 + 1);
        return next;
    }
    state.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(ids: &[i32]) -> Vec<NodeId> {
        ids.iter().map(|i| NodeId(*i)).collect()
    }

    fn live(ids: &[i32]) -> BTreeSet<NodeId> {
        n(ids).into_iter().collect()
    }

    fn request(state: &PartitionState, isr: &[i32]) -> AlterPartitionRequest {
        AlterPartitionRequest {
            broker: state.leader.unwrap(),
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr: n(isr),
        }
    }

    #[test]
    fn alter_partition_accepts_and_bumps() {
        let s = PartitionState::new(n(&[1, 2, 3]));
        let next = alter_partition(&s, &request(&s, &[1, 3]), &live(&[1, 2, 3])).unwrap();
        assert_eq!(next.isr, n(&[1, 3]));
        assert_eq!(next.partition_epoch, PartitionEpoch(1));
        assert_eq!(next.leader_epoch, s.leader_epoch);
    }

    #[test]
    fn alter_partition_refuses_stale_requests() {
        let s = PartitionState::new(n(&[1, 2, 3]));
        let old = request(&s, &[1, 3]);
        let s1 = alter_partition(&s, &old, &live(&[1, 2, 3])).unwrap();
        assert!(matches!(
            alter_partition(&s1, &old, &live(&[1, 2, 3])),
            Err(ReplicationError::InvalidUpdateVersion { .. })
        ));
        let s2 = elect_leader(&s1, &live(&[3]), false).unwrap();
        assert!(matches!(
            alter_partition(&s2, &request(&s1, &[1]), &live(&[1, 3])),
            Err(ReplicationError::FencedLeaderEpoch { .. })
        ));
        // KIP-841: a fenced broker may not join the ISR.
        assert_eq!(
            alter_partition(&s2, &request(&s2, &[2, 3]), &live(&[3])),
            Err(ReplicationError::IneligibleReplica(NodeId(2)))
        );
    }

    #[test]
    fn election_clean_then_unclean() {
        let mut s = PartitionState::new(n(&[1, 2, 3]));
        s.isr = n(&[1]);
        assert_eq!(
            elect_leader(&s, &live(&[2, 3]), false),
            Err(ReplicationError::NoEligibleLeader)
        );
        let u = elect_leader(&s, &live(&[2, 3]), true).unwrap();
        assert_eq!(u.leader, Some(NodeId(2)));
        assert_eq!(u.isr, n(&[2]));
        assert_eq!(u.leader_epoch, LeaderEpoch(1));
        s.isr = n(&[1, 3]);
        let c = elect_leader(&s, &live(&[2, 3]), false).unwrap();
        assert_eq!(c.leader, Some(NodeId(3)));
        assert_eq!(c.isr, n(&[3]));
    }

    #[test]
    fn fencing_moves_leadership_and_keeps_the_last_member() {
        let s = PartitionState::new(n(&[1, 2, 3]));
        let a = remove_broker(&s, NodeId(2), &live(&[1, 3]), false);
        assert_eq!((a.leader, a.isr.clone()), (Some(NodeId(1)), n(&[1, 3])));
        let b = remove_broker(&a, NodeId(1), &live(&[3]), false);
        assert_eq!((b.leader, b.isr.clone()), (Some(NodeId(3)), n(&[3])));
        assert_eq!(b.leader_epoch, LeaderEpoch(1));
        let c = remove_broker(&b, NodeId(3), &live(&[]), false);
        assert_eq!((c.leader, c.isr.clone()), (None, n(&[3])));
        let d = elect_leader(&c, &live(&[1, 3]), false).unwrap();
        assert_eq!(d.leader, Some(NodeId(3)));
    }
}
