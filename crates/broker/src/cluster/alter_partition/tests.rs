//! AlterPartition through a node's own controller quorum, over the broker
//! service as a replicated partition's leader will send it: committed
//! with a new partition epoch and applied here, and refused, with the
//! reason the leader's state machine needs, when built on a stale
//! partition epoch, leaving the leader out, sent under a stale
//! registration, or for an unknown partition.

use magnetar_replication::{AlterPartitionRequest, PartitionEpoch, ReplicationError};
use model::{LeaderEpoch, NodeId, TopicId};

use crate::config::TopicKind;
use crate::testing::TestNode;
use crate::NewTopic;

fn request(broker: i32, partition_epoch: i32) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker: NodeId(broker),
        leader_epoch: LeaderEpoch(0),
        partition_epoch: PartitionEpoch(partition_epoch),
        new_isr: vec![NodeId(broker)],
    }
}

#[test]
fn an_isr_change_is_committed_applied_and_a_stale_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::on(dir.path());
    let topic = node
        .create_topic(
            NewTopic {
                name: model::TopicName::new("isr").unwrap(),
                partitions: Some(2),
                replication_factor: None,
                assignments: Vec::new(),
                kind: TopicKind::Partitioned,
                config: Default::default(),
            },
            false,
        )
        .unwrap();
    let me = node.node_id();
    let ask = |req: AlterPartitionRequest, id: TopicId, p: i32| {
        node.runtime()
            .block_on(node.alter_partition(id, p, &req))
            .expect("the controller answers")
    };
    let state = ask(request(me, 0), topic.id, 1).expect("accepted");
    assert_eq!(state.partition_epoch, PartitionEpoch(1));
    assert_eq!(state.isr, vec![NodeId(me)]);
    // The answer follows the commit; this broker applies it as it
    // follows the metadata log, soon after.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let applied = |p: usize| node.topic("isr").unwrap().placements[p].partition_epoch;
    while applied(1) != 1 {
        assert!(std::time::Instant::now() < deadline, "never applied here");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(applied(0), 0);
    // The same request again is built on an old partition epoch.
    assert!(matches!(
        ask(request(me, 0), topic.id, 1),
        Err(ReplicationError::InvalidUpdateVersion { .. })
    ));
    // An ISR without its leader is refused on its merits.
    let mut without_leader = request(me, 1);
    without_leader.new_isr = vec![NodeId(me + 1)];
    assert!(ask(without_leader, topic.id, 1).is_err());
    // Sent under a registration that is not this node's current one: the
    // sender may not lead.
    let registered = node
        .cluster
        .registration_epoch
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(registered > 0);
    node.set_registration_epoch(registered + 99);
    assert_eq!(
        ask(request(me, 1), topic.id, 1),
        Err(ReplicationError::NotLeader)
    );
    node.set_registration_epoch(registered);
    assert!(matches!(
        ask(request(me, 0), TopicId::random(), 0),
        Err(ReplicationError::InvalidRequest(_))
    ));
    assert!(matches!(
        ask(request(me, 0), topic.id, 9),
        Err(ReplicationError::InvalidRequest(_))
    ));
}
