//! Leadership decisions over a metadata image: AlterPartition, fencing
//! and unfencing, with the records they make applying cleanly.

use std::collections::BTreeMap;

use magnetar_config::{TopicConfig, TopicKind};
use model::TopicName;

use super::*;
use crate::image::BrokerRegistration;
use crate::records::apply_all;

/// A registered, unfenced broker of epoch `epoch`.
pub(crate) fn broker(epoch: i64) -> BrokerRegistration {
    BrokerRegistration {
        epoch,
        incarnation: format!("i{epoch}"),
        directory: format!("d{epoch}"),
        lock: String::new(),
        endpoints: BTreeMap::new(),
        fenced: false,
        shut_down: false,
    }
}

/// Brokers 1, 2, 3; topic `t` with partition 0 on [1, 2, 3] led by 1,
/// partition 1 on [2, 3] led by 2 and partition 2 on [3] alone.
fn cluster() -> (Metadata, TopicId) {
    let mut m = Metadata::new("c".into());
    for n in 1..=3 {
        m.brokers.insert(n, broker(i64::from(n)));
    }
    m.last_broker_epoch = 3;
    let state = PartitionState::in_sync;
    let id = TopicId::random();
    let name = TopicName::new("t").unwrap();
    m.topics.insert(
        name.clone(),
        TopicRecord {
            name,
            id,
            kind: TopicKind::Partitioned,
            partitions: 3,
            config: TopicConfig::default(),
            placements: vec![state(vec![1, 2, 3]), state(vec![2, 3]), state(vec![3])],
        },
    );
    (m, id)
}

fn fence(m: &mut Metadata, node: NodeId) -> Vec<MetadataRecord> {
    m.brokers.get_mut(&node).unwrap().fenced = true;
    let records = after_fencing(m, node);
    *m = apply_all(m, &records).unwrap();
    records
}

fn placements(m: &Metadata) -> Vec<PartitionState> {
    m.topics.values().next().unwrap().placements.clone()
}

#[test]
fn an_isr_change_from_the_leader_is_recorded_with_a_new_partition_epoch() {
    let (m, id) = cluster();
    let request = AlterPartitionRequest {
        broker: model::NodeId(1),
        leader_epoch: LeaderEpoch(0),
        partition_epoch: PartitionEpoch(0),
        new_isr: vec![model::NodeId(1), model::NodeId(3)],
    };
    let (record, state) = alter_partition(&m, id, 0, &request).unwrap();
    assert_eq!(state.partition_epoch, PartitionEpoch(1));
    let m = apply_all(&m, std::slice::from_ref(&record)).unwrap();
    assert_eq!(placements(&m)[0].isr, vec![1, 3]);
    // The same record again is stale.
    assert!(apply_all(&m, &[record]).is_err());
    // A request built on the old partition epoch is refused.
    assert!(matches!(
        alter_partition(&m, id, 0, &request),
        Err(AlterPartitionError::Refused(
            ReplicationError::InvalidUpdateVersion { .. }
        ))
    ));
    assert!(matches!(
        alter_partition(&m, id, 7, &request),
        Err(AlterPartitionError::UnknownPartition { .. })
    ));
    assert!(matches!(
        alter_partition(&m, TopicId::random(), 0, &request),
        Err(AlterPartitionError::UnknownPartition { .. })
    ));
}

#[test]
fn a_fenced_leader_is_replaced_from_the_isr_and_the_last_member_keeps_it() {
    let (mut m, _) = cluster();
    let records = fence(&mut m, 2);
    assert_eq!(records.len(), 2, "{records:?}");
    let p = placements(&m);
    // Partition 0: 2 leaves the ISR, 1 still leads.
    assert_eq!((p[0].leader, p[0].isr.clone()), (1, vec![1, 3]));
    assert_eq!(p[0].leader_epoch, 0);
    // Partition 1: 3 leads, in a new leader epoch.
    assert_eq!((p[1].leader, p[1].isr.clone()), (3, vec![3]));
    assert_eq!(p[1].leader_epoch, 1);
    // Partition 2 has one replica: unchanged.
    assert_eq!(p[2].partition_epoch, 0);
    // 3 fenced too: partition 1 goes offline keeping 3 as its ISR.
    fence(&mut m, 3);
    let p = placements(&m);
    assert_eq!((p[1].leader, p[1].isr.clone()), (NO_LEADER, vec![3]));
    assert_eq!((p[0].leader, p[0].isr.clone()), (1, vec![1]));
    // 2 comes back: it was not in the ISR, partition 1 stays offline.
    m.brokers.get_mut(&2).unwrap().fenced = false;
    assert!(after_unfencing(&m, 2).is_empty());
    // 3 comes back: it leads partition 1 again.
    m.brokers.get_mut(&3).unwrap().fenced = false;
    let records = after_unfencing(&m, 3);
    let m = apply_all(&m, &records).unwrap();
    assert_eq!(placements(&m)[1].leader, 3);
}

#[test]
fn unclean_election_lets_an_out_of_sync_replica_lead_only_when_enabled() {
    let (mut m, _) = cluster();
    fence(&mut m, 3);
    fence(&mut m, 2);
    assert_eq!(placements(&m)[1].leader, NO_LEADER);
    assert_eq!(placements(&m)[1].isr, vec![2]);
    m.brokers.get_mut(&3).unwrap().fenced = false;
    assert!(after_unfencing(&m, 3).is_empty());
    m.broker_configs.insert(UNCLEAN_KEY.into(), "true".into());
    let records = after_unfencing(&m, 3);
    let m = apply_all(&m, &records).unwrap();
    assert_eq!(placements(&m)[1].leader, 3);
    assert_eq!(placements(&m)[1].isr, vec![3]);
}

#[test]
fn fencing_records_carry_the_partition_changes_they_call_for() {
    let (m, _) = cluster();
    // A heartbeat's answer without a fencing: nothing added.
    assert!(with_leadership(&m, Vec::new()).is_empty());
    let fencing = MetadataRecord::BrokerFencing {
        node: 1,
        epoch: 1,
        fenced: true,
        shutdown: true,
    };
    let records = with_leadership(&m, vec![fencing.clone()]);
    assert_eq!(records[0], fencing);
    assert_eq!(records.len(), 2, "{records:?}");
    let m = apply_all(&m, &records).unwrap();
    assert_eq!(placements(&m)[0].leader, 2);
    // Its return (an unfencing) elects nothing: partition 0 has a leader.
    let back = MetadataRecord::BrokerFencing {
        node: 1,
        epoch: 1,
        fenced: false,
        shutdown: false,
    };
    // (A shut-down registration stays fenced: nothing changes.)
    assert_eq!(with_leadership(&m, vec![back.clone()]), vec![back]);
}

#[test]
fn a_returning_preferred_leader_is_owed_only_partitions_it_is_in_sync_for() {
    let (mut m, _) = cluster();
    assert!(
        led_elsewhere(&m, 1).is_empty(),
        "every preferred leader leads"
    );
    fence(&mut m, 2);
    // Partition 1 moved to 3; broker 2 is fenced and out of its ISR.
    assert!(
        led_elsewhere(&m, 2).is_empty(),
        "a fenced broker is owed nothing"
    );
    m.brokers.get_mut(&2).unwrap().fenced = false;
    m = apply_all(&m, &after_unfencing(&m, 2)).unwrap();
    assert!(led_elsewhere(&m, 2).is_empty(), "not in sync again yet");
    let t = m.topics.values_mut().next().unwrap();
    t.placements[1].isr.push(2);
    assert_eq!(led_elsewhere(&m, 2), vec![("t".to_string(), 1)]);
    assert!(led_elsewhere(&m, 3).is_empty(), "3 leads what it prefers");
    let r = elect(&m, "t", 1, ElectionType::Preferred).unwrap();
    let m = apply_all(&m, &[r]).unwrap();
    assert!(led_elsewhere(&m, 2).is_empty(), "balanced again");
}
