//! Reassignment decisions over a metadata image: start, the ISR change
//! that completes it, replacement, cancellation and refusals, with every
//! record applying cleanly.

use magnetar_config::{TopicConfig, TopicKind};
use magnetar_replication::{AlterPartitionRequest, PartitionEpoch};
use model::{LeaderEpoch, TopicId, TopicName};

use super::*;
use crate::image::TopicRecord;
use crate::leadership::alter_partition;
use crate::leadership::tests::broker;
use crate::records::apply_all;

/// Brokers 1 to 4; topic `t` with one partition on `replicas`, led by
/// the first, all in sync.
fn cluster(replicas: Vec<NodeId>) -> (Metadata, TopicId) {
    let mut m = Metadata::new("c".into());
    for n in 1..=4 {
        m.brokers.insert(n, broker(i64::from(n)));
    }
    m.last_broker_epoch = 4;
    let id = TopicId::random();
    let name = TopicName::new("t").unwrap();
    m.topics.insert(
        name.clone(),
        TopicRecord {
            name,
            id,
            kind: TopicKind::Partitioned,
            partitions: 1,
            config: TopicConfig::default(),
            placements: vec![PartitionState::in_sync(replicas)],
        },
    );
    (m, id)
}

fn state(m: &Metadata) -> PartitionState {
    m.topics.values().next().unwrap().placements[0].clone()
}

fn apply(m: &Metadata, record: Option<MetadataRecord>) -> Metadata {
    apply_all(m, &[record.expect("a change")]).unwrap()
}

/// The leader of `m`'s partition asks for `isr`.
fn alter_isr(m: &Metadata, id: TopicId, isr: &[NodeId]) -> Metadata {
    let s = state(m);
    let request = AlterPartitionRequest {
        broker: model::NodeId(s.leader),
        leader_epoch: LeaderEpoch(s.leader_epoch),
        partition_epoch: PartitionEpoch(s.partition_epoch),
        new_isr: isr.iter().map(|n| model::NodeId(*n)).collect(),
    };
    let (record, _) = alter_partition(m, id, 0, &request).unwrap();
    apply_all(m, &[record]).unwrap()
}

#[test]
fn moving_a_partition_adds_the_target_then_completes_once_it_is_in_sync() {
    let (m, id) = cluster(vec![1]);
    let m = apply(&m, reassign(&m, "t", 0, Some(&[2, 3]), true).unwrap());
    let s = state(&m);
    assert_eq!(s.replicas, vec![2, 3, 1]);
    assert_eq!(s.adding_replicas, vec![2, 3]);
    assert_eq!(s.removing_replicas, vec![1]);
    assert_eq!(
        (s.leader, s.isr.clone()),
        (1, vec![1]),
        "the old leader leads until the target is in sync"
    );
    assert_eq!((s.leader_epoch, s.partition_epoch), (1, 1));
    assert_eq!(ongoing(&m).len(), 1);

    // One target replica in sync: still moving.
    let m = alter_isr(&m, id, &[1, 2]);
    assert!(state(&m).is_reassigning());
    // Both: complete in the same change, leadership handed to the target.
    let m = alter_isr(&m, id, &[1, 2, 3]);
    let s = state(&m);
    assert!(!s.is_reassigning());
    assert_eq!(s.replicas, vec![2, 3]);
    assert_eq!(s.isr, vec![2, 3]);
    assert_eq!(s.leader, 2);
    assert_eq!(s.leader_epoch, 2);
    assert!(ongoing(&m).is_empty());
}

#[test]
fn a_leader_in_the_target_keeps_leading_and_a_shrink_completes_at_once() {
    let (m, id) = cluster(vec![1, 2]);
    let m = apply(&m, reassign(&m, "t", 0, Some(&[1, 3]), false).unwrap());
    let m = alter_isr(&m, id, &[1, 2, 3]);
    let s = state(&m);
    assert_eq!(
        (s.replicas.clone(), s.isr.clone(), s.leader),
        (vec![1, 3], vec![1, 3], 1)
    );

    // Dropping a replica in sync needs no copying.
    let (m, _) = cluster(vec![1, 2, 3]);
    let m = apply(&m, reassign(&m, "t", 0, Some(&[2, 3]), true).unwrap());
    let s = state(&m);
    assert!(!s.is_reassigning());
    assert_eq!((s.replicas.clone(), s.leader), (vec![2, 3], 2));
    assert_eq!((s.leader_epoch, s.partition_epoch), (1, 1));
}

#[test]
fn a_new_target_replaces_the_move_under_way_and_a_cancellation_reverts_it() {
    let (m, id) = cluster(vec![1]);
    let moving = apply(&m, reassign(&m, "t", 0, Some(&[2, 3]), true).unwrap());
    // Counted from every replica it has now: nothing in sync is dropped
    // before the new target is.
    let m = apply(
        &moving,
        reassign(&moving, "t", 0, Some(&[4]), true).unwrap(),
    );
    let s = state(&m);
    assert_eq!(s.replicas, vec![4, 2, 3, 1]);
    // 2 and 3, still being added, leave at completion; 1 is still the
    // original replica.
    assert_eq!(
        (s.adding_replicas.clone(), s.removing_replicas.clone()),
        (vec![4, 2, 3], vec![2, 3, 1])
    );
    assert_eq!((s.leader, s.isr.clone()), (1, vec![1]));
    assert_eq!(original_replicas(&s), vec![1]);
    assert_eq!(target_replicas(&s), vec![4]);
    // The same target again (a retry) changes nothing.
    assert_eq!(reassign(&m, "t", 0, Some(&[4]), true), Ok(None));
    // Cancelled from there: back to the replicas before either move.
    let back = apply(&m, reassign(&m, "t", 0, None, true).unwrap());
    assert_eq!(
        (state(&back).replicas, state(&back).isr, state(&back).leader),
        (vec![1], vec![1], 1)
    );
    let m = alter_isr(&m, id, &[1, 4]);
    let s = state(&m);
    assert_eq!(
        (s.replicas.clone(), s.isr.clone(), s.leader),
        (vec![4], vec![4], 4)
    );

    let m = apply(&moving, reassign(&moving, "t", 0, None, true).unwrap());
    let s = state(&m);
    assert_eq!(
        (s.replicas.clone(), s.isr.clone(), s.leader),
        (vec![1], vec![1], 1)
    );
    assert!(!s.is_reassigning());
    assert_eq!(
        reassign(&m, "t", 0, None, true),
        Err(ReassignError::NoneInProgress)
    );
}

#[test]
fn a_cancellation_that_would_drop_every_replica_in_sync_is_refused() {
    let (m, id) = cluster(vec![1]);
    let m = apply(&m, reassign(&m, "t", 0, Some(&[2, 3]), true).unwrap());
    let m = alter_isr(&m, id, &[1, 2]);
    // Broker 1 fenced: 2, being added, is the only one in sync and leads.
    let mut m = m;
    m.brokers.get_mut(&1).unwrap().fenced = true;
    let records = crate::leadership::after_fencing(&m, 1);
    let m = apply_all(&m, &records).unwrap();
    assert_eq!((state(&m).leader, state(&m).isr.clone()), (2, vec![2]));
    assert!(matches!(
        reassign(&m, "t", 0, None, true),
        Err(ReassignError::InvalidAssignment(_))
    ));
}

#[test]
fn fencing_and_elections_keep_the_reassignment() {
    let (m, _) = cluster(vec![1, 2]);
    let mut m = apply(&m, reassign(&m, "t", 0, Some(&[3, 4]), true).unwrap());
    m.brokers.get_mut(&1).unwrap().fenced = true;
    let records = crate::leadership::after_fencing(&m, 1);
    let m = apply_all(&m, &records).unwrap();
    let s = state(&m);
    assert_eq!(s.leader, 2);
    assert_eq!(
        (s.adding_replicas.clone(), s.removing_replicas.clone()),
        (vec![3, 4], vec![1, 2])
    );
}

#[test]
fn bad_targets_are_refused() {
    let (m, _) = cluster(vec![1, 2]);
    assert!(matches!(
        reassign(&m, "t", 0, Some(&[]), true),
        Err(ReassignError::InvalidAssignment(_))
    ));
    assert!(matches!(
        reassign(&m, "t", 0, Some(&[2, 2]), true),
        Err(ReassignError::InvalidAssignment(_))
    ));
    assert!(matches!(
        reassign(&m, "t", 0, Some(&[1, 9]), true),
        Err(ReassignError::InvalidAssignment(_))
    ));
    assert_eq!(
        reassign(&m, "t", 0, Some(&[3]), false),
        Err(ReassignError::ReplicationFactorChange {
            current: 2,
            target: 1
        })
    );
    assert!(matches!(
        reassign(&m, "t", 1, Some(&[3]), true),
        Err(ReassignError::UnknownPartition { .. })
    ));
    assert!(matches!(
        reassign(&m, "u", 0, Some(&[3]), true),
        Err(ReassignError::UnknownPartition { .. })
    ));
    assert_eq!(
        reassign(&m, "t", 0, Some(&[1, 2]), true),
        Ok(None),
        "the current assignment completes at once"
    );
}

#[test]
fn a_retried_move_changes_nothing_and_keeps_its_original_replicas() {
    let (m, _) = cluster(vec![1]);
    let m = apply(&m, reassign(&m, "t", 0, Some(&[1, 2]), true).unwrap());
    let s = state(&m);
    assert!(s.is_reassigning());
    assert_eq!(reassign(&m, "t", 0, Some(&[1, 2]), true), Ok(None));
    assert_eq!(original_replicas(&state(&m)), vec![1]);
    // A different replica count than the original one still needs the
    // flag, counted from the original replicas.
    assert!(matches!(
        reassign(&m, "t", 0, Some(&[3]), false),
        Ok(Some(_))
    ));
    assert!(matches!(
        reassign(&m, "t", 0, Some(&[2, 3]), false),
        Err(ReassignError::ReplicationFactorChange { .. })
    ));
}
