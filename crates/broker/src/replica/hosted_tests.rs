//! A replicated partition as the front ends use it: a leader's appends
//! told to its replica, `acks=all` producers waiting in the purgatory
//! until a follower's fetch moves the high watermark, consumers held below
//! it, a follower refusing writes and clients.

use std::sync::Arc;
use std::time::Duration;

use magnetar_replication::{FetchRequest, LeaderConfig, ReplicationError};
use model::{
    LeaderEpoch, NodeId, Offset, PartitionId, Timestamp, TopicId, TopicName, TopicPartition,
};
use storage::{AppendOutcome, BatchBuilder, Compression, LogConfig, LogManager};
use tokio::time::Instant;

use super::{clock_ms, replica_state, Replica, ServedFetch};
use crate::metadata_records::PartitionState;
use crate::topic::Partition;
use crate::Error;

const CONFIG: LeaderConfig = LeaderConfig {
    min_insync_replicas: 2,
    replica_lag_time_max_ms: 10_000,
    alter_partition_retry_ms: 1_000,
    max_fetch_records: u64::MAX,
};

fn batch(value: &str) -> bytes::BytesMut {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(Timestamp(1), None, Some(value.as_bytes()), &[])
        .unwrap();
    b.build().unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    _manager: LogManager,
    partition: Arc<Partition>,
    alter: tokio::sync::mpsc::UnboundedReceiver<super::AlterJob>,
}

/// Broker `node`'s replica of a partition on brokers 1 and 2, both in
/// sync, led by `leader`.
fn replica_on(node: i32, leader: i32) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::open(dir.path()).unwrap();
    let tp = TopicPartition::new(TopicName::new("replicated").unwrap(), PartitionId(0));
    let config = LogConfig {
        min_insync_replicas: 2,
        ..LogConfig::default()
    };
    let id = TopicId::random();
    let log = manager.open_log(&tp, id, config).unwrap();
    let state = PartitionState {
        replicas: vec![1, 2],
        isr: vec![1, 2],
        leader,
        leader_epoch: 3,
        partition_epoch: 5,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    };
    let partition = Arc::new(Partition::new(tp, id, log.clone(), state.clone()));
    let (tx, alter) = tokio::sync::mpsc::unbounded_channel();
    let r = partition.ensure_replica(|| Replica::new(NodeId(node), log, CONFIG, 1_000), &tx);
    let fx = r.apply_state(&replica_state(&state), clock_ms()).unwrap();
    partition.settle(fx);
    Fixture {
        _dir: dir,
        _manager: manager,
        partition,
        alter,
    }
}

fn follower_fetch(offset: i64, epoch: Option<i32>) -> FetchRequest {
    FetchRequest {
        replica: NodeId(2),
        leader_epoch: LeaderEpoch(3),
        fetch_id: 0,
        fetch_offset: Offset(offset),
        last_fetched_epoch: epoch.map(LeaderEpoch),
    }
}

#[tokio::test]
async fn acks_all_waits_for_the_follower_and_consumers_stop_at_the_high_watermark() {
    let f = replica_on(1, 1);
    let p = f.partition.clone();
    assert!(p.leads());
    p.check_min_insync().unwrap();
    let (out, _) = p.append_deferred(&batch("a"), Timestamp(1)).unwrap();
    let AppendOutcome::Appended(info) = out else {
        panic!("{out:?}")
    };
    let next = Offset(info.last_offset.0 + 1);

    // Not replicated yet: consumers see nothing, an acks=all producer
    // waits (and times out if nobody fetches).
    assert_eq!(p.log().high_watermark(), Offset(0));
    let read = p.read_region(Offset(0), 1 << 20, true).unwrap();
    assert!(
        read.region.is_none(),
        "a consumer read past the high watermark"
    );
    let early = p
        .wait_committed(
            next,
            info.leader_epoch,
            Instant::now() + Duration::from_millis(50),
        )
        .await;
    assert!(
        matches!(early, Err(Error::ReplicationTimeout(_))),
        "{early:?}"
    );

    let waiting = {
        let p = p.clone();
        tokio::spawn(async move {
            p.wait_committed(
                next,
                info.leader_epoch,
                Instant::now() + Duration::from_secs(30),
            )
            .await
        })
    };
    // The follower fetches the batch, then asks past it: that is its log
    // end, so the high watermark moves and the producer is answered.
    let broker_less = |req: &FetchRequest| {
        let r = p.replica().unwrap();
        let (served, fx) = r.serve_fetch(req, 1 << 20, clock_ms()).unwrap();
        p.settle(fx);
        served
    };
    match broker_less(&follower_fetch(0, None)) {
        ServedFetch::Records { region, .. } => assert!(region.is_some()),
        other => panic!("{other:?}"),
    }
    assert!(!waiting.is_finished());
    broker_less(&follower_fetch(next.0, Some(3)));
    waiting.await.unwrap().unwrap();
    assert_eq!(p.log().high_watermark(), next);
    let read = p.read_region(Offset(0), 1 << 20, true).unwrap();
    assert!(read.region.is_some());

    // A stale leader epoch from a follower is fenced.
    let stale = FetchRequest {
        leader_epoch: LeaderEpoch(2),
        ..follower_fetch(next.0, Some(3))
    };
    let refused = p
        .replica()
        .unwrap()
        .serve_fetch(&stale, 1 << 20, clock_ms());
    assert!(matches!(
        refused,
        Err(super::ReplicaError::Replication(
            ReplicationError::FencedLeaderEpoch { .. }
        ))
    ));
}

#[tokio::test]
async fn a_waiting_producer_hears_not_leader_when_leadership_moves() {
    let f = replica_on(1, 1);
    let p = f.partition.clone();
    let (out, _) = p.append_deferred(&batch("a"), Timestamp(1)).unwrap();
    let AppendOutcome::Appended(info) = out else {
        panic!()
    };
    let waiting = {
        let p = p.clone();
        let next = Offset(info.last_offset.0 + 1);
        let epoch = info.leader_epoch;
        tokio::spawn(async move {
            p.wait_committed(next, epoch, Instant::now() + Duration::from_secs(30))
                .await
        })
    };
    tokio::task::yield_now().await;
    // The controller elects broker 2.
    let moved = PartitionState {
        replicas: vec![1, 2],
        isr: vec![2],
        leader: 2,
        leader_epoch: 4,
        partition_epoch: 6,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    };
    let r = p.replica().unwrap();
    p.settle(r.apply_state(&replica_state(&moved), clock_ms()).unwrap());
    p.fail_waiting();
    let answer = waiting.await.unwrap();
    assert!(
        matches!(
            answer,
            Err(Error::Replication {
                source: ReplicationError::NotLeader,
                ..
            })
        ),
        "{answer:?}"
    );
    assert!(!p.leads());
    assert_eq!(r.following(), Some(NodeId(2)));
}

#[tokio::test]
async fn a_follower_refuses_writes_and_a_lagging_follower_is_proposed_out() {
    let mut f = replica_on(2, 1);
    let p = f.partition.clone();
    assert!(!p.leads());
    let refused = p.append_deferred(&batch("a"), Timestamp(1));
    assert!(
        matches!(
            refused,
            Err(Error::Replication {
                source: ReplicationError::NotLeader,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(p.log().log_end_offset(), Offset(0));

    // On the leader, a follower that does not fetch what was appended is
    // proposed out of the ISR once replica.lag.time.max.ms passed: the
    // request goes out.
    let leader = replica_on(1, 1);
    let _ = leader
        .partition
        .append_deferred(&batch("b"), Timestamp(1))
        .unwrap();
    let r = leader.partition.replica().unwrap();
    leader
        .partition
        .settle(r.tick(clock_ms() + CONFIG.replica_lag_time_max_ms + 1));
    let mut alter = leader.alter;
    let job = alter.try_recv().expect("an AlterPartition request");
    assert_eq!(job.request.new_isr.len(), 1);
    assert!(f.alter.try_recv().is_err());
}

#[tokio::test]
async fn a_partition_with_one_replica_is_committed_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::open(dir.path()).unwrap();
    let tp = TopicPartition::new(TopicName::new("single").unwrap(), PartitionId(0));
    let log = manager
        .open_log(&tp, TopicId::random(), LogConfig::default())
        .unwrap();
    let state = PartitionState::single(1);
    let p = Partition::new(tp, TopicId::random(), log, state);
    assert!(p.leads());
    let (out, _) = p.append_deferred(&batch("a"), Timestamp(1)).unwrap();
    let AppendOutcome::Appended(info) = out else {
        panic!()
    };
    let next = Offset(info.last_offset.0 + 1);
    p.wait_committed(next, info.leader_epoch, Instant::now())
        .await
        .unwrap();
    p.wait_all_committed_blocking(Duration::ZERO).unwrap();
}
