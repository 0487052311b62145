//! Local changes of a broker: the cases Kafka's `TopicsDelta` handles
//! (created, deleted, recreated under another id, moved away, config
//! changed), and for random pairs of states, the old hosted set with the
//! changes applied is exactly the new one.

use proptest::prelude::*;

use super::*;
use crate::image::TopicRecord;
use crate::records::{apply, MetadataRecord, PartitionState};
use magnetar_config::{TopicConfig, TopicKind};

fn topic(name: &str, nodes: &[NodeId]) -> TopicRecord {
    TopicRecord {
        name: TopicName::new(name).unwrap(),
        id: TopicId::random(),
        kind: TopicKind::Partitioned,
        partitions: nodes.len() as i32,
        config: TopicConfig::default(),
        placements: nodes.iter().map(|n| PartitionState::single(*n)).collect(),
    }
}

fn tp(name: &str, p: i32) -> TopicPartition {
    TopicPartition::new(TopicName::new(name).unwrap(), PartitionId(p))
}

fn with(records: &[MetadataRecord]) -> Metadata {
    let mut m = Metadata::new("c".into());
    for r in records {
        apply(&mut m, r).unwrap();
    }
    m
}

#[test]
fn created_deleted_recreated_moved_and_reconfigured() {
    let orders = topic("orders", &[1, 2, 1]);
    let old = with(&[MetadataRecord::TopicCreated {
        topic: orders.clone(),
    }]);
    // The first full state is the change from nothing.
    let first = local_changes(&Metadata::new("c".into()), &old, 1);
    assert_eq!(
        first.start,
        vec![(tp("orders", 0), orders.id), (tp("orders", 2), orders.id)]
    );
    assert!(first.stop.is_empty() && first.reconfigured.is_empty());
    assert_eq!(local_changes(&old, &old, 1), LocalChanges::default());
    assert!(local_changes(&old, &old, 1).is_empty());

    // Recreated under another id while this broker was away: every old
    // partition stops, every new one starts (KIP-516 Scenario 2).
    let again = topic("orders", &[1, 1]);
    let recreated = with(&[MetadataRecord::TopicCreated {
        topic: again.clone(),
    }]);
    let c = local_changes(&old, &recreated, 1);
    assert_eq!(
        c.stop,
        vec![(tp("orders", 0), orders.id), (tp("orders", 2), orders.id)]
    );
    assert_eq!(
        c.start,
        vec![(tp("orders", 0), again.id), (tp("orders", 1), again.id)]
    );
    assert!(
        c.reconfigured.is_empty(),
        "a new topic is started, not reconfigured"
    );

    // Moved away: partition 2 now lives on node 3 only.
    let mut moved = orders.clone();
    moved.placements[2] = PartitionState::single(3);
    let moved = with(&[MetadataRecord::TopicCreated { topic: moved }]);
    let c = local_changes(&old, &moved, 1);
    assert_eq!(c.stop, vec![(tp("orders", 2), orders.id)]);
    assert!(c.start.is_empty());
    assert_eq!(
        local_changes(&old, &moved, 3).start,
        vec![(tp("orders", 2), orders.id)]
    );

    // A new leader for a partition both replicas keep.
    let mut led = orders.clone();
    led.placements[1] = PartitionState {
        replicas: vec![2, 1],
        isr: vec![2, 1],
        leader: 1,
        leader_epoch: 1,
        partition_epoch: 1,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    };
    let mut shared = orders.clone();
    shared.placements[1].replicas = vec![2, 1];
    shared.placements[1].isr = vec![2, 1];
    let before = with(&[MetadataRecord::TopicCreated { topic: shared }]);
    let after = with(&[MetadataRecord::TopicCreated { topic: led.clone() }]);
    let c = local_changes(&before, &after, 1);
    assert_eq!(
        c.changed,
        vec![(tp("orders", 1), led.placements[1].clone())]
    );
    assert!(c.start.is_empty() && c.stop.is_empty());

    // A config change matters to the brokers hosting the topic only.
    let mut config = TopicConfig::default();
    config.set("retention.ms", "1000").unwrap();
    let mut reconfigured = old.clone();
    apply(
        &mut reconfigured,
        &MetadataRecord::TopicConfigSet {
            id: orders.id,
            name: orders.name.clone(),
            config,
        },
    )
    .unwrap();
    let c = local_changes(&old, &reconfigured, 2);
    assert_eq!(c.reconfigured, vec![orders.name.clone()]);
    assert!(c.start.is_empty() && c.stop.is_empty());
    assert!(local_changes(&old, &reconfigured, 3).is_empty());

    // Deleted.
    let gone = local_changes(&old, &Metadata::new("c".into()), 2);
    assert_eq!(gone.stop, vec![(tp("orders", 1), orders.id)]);
}

/// A random state: up to four topics (some sharing names across the two
/// states, with the same or another id), partitions on nodes 1 to 3, and
/// a random retention override.
fn state(ids: [TopicId; 4]) -> impl Strategy<Value = Metadata> {
    prop::collection::vec(
        (
            0usize..4,
            any::<bool>(),
            prop::collection::vec(1i32..4, 1..4),
            prop::option::of(1i64..3),
        ),
        0..4,
    )
    .prop_map(move |topics| {
        let mut m = Metadata::new("c".into());
        for (name, same_id, nodes, retention) in topics {
            let mut t = topic(&format!("t{name}"), &nodes);
            if same_id {
                t.id = ids[name];
            }
            if let Some(r) = retention {
                t.config.set("retention.ms", &r.to_string()).unwrap();
            }
            // A name drawn twice keeps its first topic.
            let _ = apply(&mut m, &MetadataRecord::TopicCreated { topic: t });
        }
        m
    })
}

fn states() -> impl Strategy<Value = (Metadata, Metadata)> {
    let ids = [(); 4].map(|_| TopicId::random());
    (state(ids), state(ids))
}

proptest! {
    #[test]
    fn the_changes_lead_from_the_old_hosted_set_to_the_new((old, new) in states(), node in 1i32..4) {
        let c = local_changes(&old, &new, node);
        let mut hosted = hosted_by(&old, node);
        for (tp, id) in &c.stop {
            prop_assert_eq!(hosted.remove(tp), Some(*id));
        }
        for (tp, id) in &c.start {
            prop_assert!(hosted.insert(tp.clone(), *id).is_none());
        }
        prop_assert_eq!(&hosted, &hosted_by(&new, node));
        // Reconfigured topics are hosted before and after, under one id.
        for name in &c.reconfigured {
            prop_assert_eq!(old.topics[name].id, new.topics[name].id);
            prop_assert!(hosted.keys().any(|tp| &tp.topic == name));
            prop_assert!(old.topics[name].config != new.topics[name].config);
        }
        // Changed partitions are hosted before and after, under one id,
        // with another state.
        for (tp, state) in &c.changed {
            let (o, n) = (&old.topics[&tp.topic], &new.topics[&tp.topic]);
            prop_assert_eq!(o.id, n.id);
            prop_assert_eq!(&n.placements[tp.partition.0 as usize], state);
            prop_assert!(&o.placements[tp.partition.0 as usize] != state);
        }
        prop_assert!(local_changes(&new, &new, node).is_empty());
    }
}
