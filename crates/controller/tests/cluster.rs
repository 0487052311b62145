//! A 3-node controller quorum in one process on loopback.

mod common;

use std::time::Duration;

use common::{fast, set, Cluster, DEADLINE};
use controller::{ControllerConfig, ControllerError, Fetched, KvMap, StateMachine, Voters};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elects_a_leader_submits_through_any_node_and_converges() {
    let mut c = Cluster::start(3, fast).await;
    let leader = c.leader().await;
    let follower = (1..=3).find(|&i| i != leader).unwrap();

    // A follower refuses and names the leader.
    match c.node(follower).submit(set("k", "v")).await {
        Err(ControllerError::NotLeader {
            leader: Some((id, addr)),
        }) => {
            assert_eq!(id, leader);
            assert_eq!(Some(addr.as_str()), c.voters.addr(leader));
        }
        other => panic!("expected NotLeader, got {other:?}"),
    }

    // The client follows redirects, whichever node it starts with.
    let client = c.client();
    let mut last = 0;
    for i in 0..20 {
        let s = client
            .submit(set(&format!("k{i}"), &format!("v{i}")))
            .await
            .unwrap();
        assert!(s.index > last);
        last = s.index;
    }
    let again = client.submit(set("k0", "w")).await.unwrap();
    assert_eq!(again.response, Some("v0".to_string()));
    last = again.index;

    let state = c.converged(last).await;
    assert_eq!(state.entries.len(), 20);
    assert_eq!(state.entries["k0"], "w");
    let histories: Vec<_> = c.running().map(|n| n.read(|s| s.history.clone())).collect();
    assert!(histories.windows(2).all(|w| w[0] == w[1]));

    // Every node serves the committed log.
    for id in 1..=3 {
        match client.fetch(id, 0, 1000).await.unwrap() {
            Fetched::Records { records, .. } => assert_eq!(records.len(), 21),
            other => panic!("unexpected {other:?}"),
        }
        assert!(client.wait_applied(id, last, DEADLINE).await.unwrap() >= last);
    }
    for id in 1..=3 {
        c.stop(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_and_keeps_committed_entries() {
    let mut c = Cluster::start(3, fast).await;
    let client = c.client();
    let mut last = 0;
    for i in 0..10 {
        last = client
            .submit(set(&format!("a{i}"), "x"))
            .await
            .unwrap()
            .index;
    }
    c.converged(last).await;
    let old = c.leader().await;
    let old_term = c.node(old).status().term;
    c.stop(old).await;

    let new = c.leader().await;
    assert_ne!(new, old);
    assert!(c.node(new).status().term > old_term);
    for i in 10..20 {
        last = client
            .submit(set(&format!("a{i}"), "y"))
            .await
            .unwrap()
            .index;
    }
    let state = c.converged(last).await;
    assert_eq!(state.entries.len(), 20);
    assert!((0..10).all(|i| state.entries[&format!("a{i}")] == "x"));

    // The old leader comes back from disk and catches up.
    c.start_node(old, None).await.unwrap();
    let state = c.converged(last).await;
    assert_eq!(state.entries.len(), 20);
    for id in 1..=3 {
        c.stop(id).await;
    }
}

fn quick_submit(cfg: &mut ControllerConfig) {
    fast(cfg);
    cfg.submit_timeout = Duration::from_millis(1500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_cannot_commit() {
    let mut c = Cluster::start(3, quick_submit).await;
    let leader = c.leader().await;
    let s = c.node(leader).submit(set("before", "1")).await.unwrap();
    c.converged(s.index).await;
    for id in (1..=3).filter(|&i| i != leader) {
        c.stop(id).await;
    }
    match c.node(leader).submit(set("after", "1")).await {
        Err(ControllerError::Timeout { what, .. }) => assert!(what.contains("quorum"), "{what}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    match c.client().submit(set("after", "2")).await {
        Err(ControllerError::Timeout { .. }) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(c.node(leader).read(|s| !s.entries.contains_key("after")));
    c.stop(leader).await;
}

fn snapshot_often(cfg: &mut ControllerConfig) {
    fast(cfg);
    cfg.snapshot_after_entries = 10;
    cfg.entries_kept_after_snapshot = 0;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_catches_up_through_a_snapshot() {
    let mut c = Cluster::start(3, snapshot_often).await;
    let leader = c.leader().await;
    let lagging = (1..=3).find(|&i| i != leader).unwrap();
    let client = c.client();
    let mut last = client.submit(set("first", "1")).await.unwrap().index;
    c.converged(last).await;
    c.stop(lagging).await;
    for i in 0..60 {
        last = client
            .submit(set(&format!("s{i}"), &i.to_string()))
            .await
            .unwrap()
            .index;
    }
    // The leader has compacted its log past what the stopped node holds.
    let purged = c
        .wait_for(&format!("node {leader} to purge its log"), || {
            c.node(leader).status().purged_index.filter(|&p| p > 20)
        })
        .await;

    // A node's fetch from a compacted index says a snapshot is needed, and
    // snapshot + fetch from after it give the whole state.
    match client.fetch(leader, 1, 100).await.unwrap() {
        Fetched::SnapshotNeeded { log_start } => assert!(log_start > purged.min(20)),
        other => panic!("expected SnapshotNeeded, got {other:?}"),
    }
    let snap = client
        .fetch_snapshot(leader)
        .await
        .unwrap()
        .expect("a snapshot");
    let mut rebuilt = KvMap::default();
    rebuilt.restore(&snap.data).unwrap();
    let mut from = snap.index + 1;
    loop {
        match client.fetch(leader, from, 7).await.unwrap() {
            Fetched::Records {
                records,
                next_index,
                ..
            } => {
                for (i, r) in &records {
                    rebuilt.apply(*i, r);
                }
                if next_index > last || (records.is_empty() && next_index == from) {
                    break;
                }
                from = next_index;
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    c.start_node(lagging, None).await.unwrap();
    let state = c.converged(last).await;
    assert_eq!(state.entries.len(), 61);
    assert_eq!(rebuilt.entries, state.entries);
    // It got there through a snapshot (openraft publishes that in its
    // metrics just after the state machine has it), and its own fetch from
    // an old index says so once it has purged its log.
    c.wait_for("the restarted node to report its snapshot", || {
        c.node(lagging).status().snapshot_index
    })
    .await;
    c.wait_for("the restarted node to answer SnapshotNeeded", || {
        matches!(c.node(lagging).fetch(1, 10), Fetched::SnapshotNeeded { .. }).then_some(())
    })
    .await;

    // Restarting everybody from disk keeps the state.
    for id in 1..=3 {
        c.stop(id).await;
    }
    for id in 1..=3 {
        c.start_node(id, None).await.unwrap();
    }
    c.leader().await;
    let state = c.converged(last).await;
    assert_eq!(state.entries.len(), 61);
    let s = c.client().submit(set("after-restart", "1")).await.unwrap();
    assert!(s.index > last);
    for id in 1..=3 {
        c.stop(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_errors_are_clear() {
    let voters: Voters = "1@127.0.0.1:1,2@127.0.0.1:2".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = ControllerConfig::new(3, voters.clone(), dir.path());
    let err = controller::Controller::start(cfg, KvMap::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, ControllerError::NotAVoter { node_id: 3, .. }),
        "{err}"
    );
    assert!(err
        .to_string()
        .contains("not in the controller quorum voters"));

    // A data directory remembers its node and voters.
    let mut c = Cluster::start(3, fast).await;
    c.leader().await;
    c.stop(2).await;
    let mut cfg = c.config(2);
    cfg.voters = "1@127.0.0.1:1,2@127.0.0.1:2".parse().unwrap();
    let err = controller::Controller::start(cfg, KvMap::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, ControllerError::VotersMismatch { .. }),
        "{err}"
    );
    let mut cfg = c.config(2);
    cfg.node_id = 1;
    cfg.data_dir = c.dirs[1].path().to_path_buf();
    let err = controller::Controller::start(cfg, KvMap::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, ControllerError::NodeIdMismatch { .. }),
        "{err}"
    );
    // And starts fine with the right ones.
    c.start_node(2, None).await.unwrap();
    for id in 1..=3 {
        c.stop(id).await;
    }
}
