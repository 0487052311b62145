//! The broker's metadata records replicated by a real controller quorum
//! (three `magnetar-controller` nodes on loopback in this process): every
//! node applies the same batches to the same `Metadata`, a conflicting
//! batch is refused everywhere, a node that was down catches up through a
//! snapshot, a broker that only reads the committed log rebuilds the same
//! state, and a quorum of one (the standalone case) commits alone.

use std::sync::Arc;
use std::time::Duration;

use controller::transport::{Listener, TcpListener, TcpTransport};
use controller::{
    ClientOptions, Controller, ControllerClient, ControllerConfig, Fetched, ServerState,
    StateMachine, Voters,
};
use magnetar_broker::config::{TopicConfig, TopicKind};
use magnetar_broker::metadata_machine::{MetadataBatch, MetadataMachine};
use magnetar_broker::metadata_records::{MetadataRecord, PartitionState};
use magnetar_broker::metadata_store::TopicRecord;
use model::{TopicId, TopicName};
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_secs(30);

fn tune(c: &mut ControllerConfig) {
    c.election_timeout_min = Duration::from_millis(300);
    c.election_timeout_max = Duration::from_millis(600);
    c.heartbeat_interval = Duration::from_millis(60);
    c.backoff_min = Duration::from_millis(20);
    c.backoff_max = Duration::from_millis(200);
    c.connect_timeout = Duration::from_millis(500);
    c.snapshot_after_entries = 10;
    c.entries_kept_after_snapshot = 0;
}

struct Quorum {
    dirs: Vec<tempfile::TempDir>,
    voters: Voters,
    nodes: Vec<Option<Controller<MetadataMachine>>>,
}

impl Quorum {
    async fn start(n: usize) -> Quorum {
        let mut listeners = Vec::new();
        for _ in 0..n {
            listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let voters = Voters::new(
            listeners
                .iter()
                .enumerate()
                .map(|(i, l)| (i as u64 + 1, l.local_addr().unwrap())),
        )
        .unwrap();
        let mut q = Quorum {
            dirs: (0..n).map(|_| tempfile::tempdir().unwrap()).collect(),
            voters,
            nodes: (0..n).map(|_| None).collect(),
        };
        for (i, l) in listeners.into_iter().enumerate() {
            let node = Controller::start_with(
                q.config(i as u64 + 1),
                MetadataMachine::new(),
                Arc::new(TcpTransport),
                Some(Box::new(l)),
            )
            .await
            .unwrap();
            q.nodes[i] = Some(node);
        }
        q
    }

    fn config(&self, id: u64) -> ControllerConfig {
        let mut c =
            ControllerConfig::new(id, self.voters.clone(), self.dirs[id as usize - 1].path());
        tune(&mut c);
        c
    }

    async fn restart(&mut self, id: u64) {
        let node = Controller::start(self.config(id), MetadataMachine::new())
            .await
            .unwrap();
        self.nodes[id as usize - 1] = Some(node);
    }

    async fn stop(&mut self, id: u64) {
        if let Some(n) = self.nodes[id as usize - 1].take() {
            n.shutdown().await;
        }
    }

    fn client(&self) -> ControllerClient<MetadataMachine> {
        ControllerClient::new(self.voters.clone(), ClientOptions::from(&self.config(1)))
    }

    fn running(&self) -> impl Iterator<Item = &Controller<MetadataMachine>> {
        self.nodes.iter().flatten()
    }

    async fn leader(&self) -> u64 {
        let deadline = Instant::now() + DEADLINE;
        let mut changes: Vec<_> = self
            .nodes
            .iter()
            .map(|n| n.as_ref().map(|n| n.status_changes()))
            .collect();
        loop {
            // Seen before looking, so a change after the look wakes us.
            for rx in changes.iter_mut().flatten() {
                rx.borrow_and_update();
            }
            let views: Vec<(usize, Option<u64>)> = self
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, n)| n.as_ref().map(|n| (i, n.status().leader)))
                .collect();
            let first = views[0].1;
            // The node to wait for: one without the first node's view, or
            // the named leader until it is one.
            let waiting = match first {
                None => Some(views[0].0),
                Some(l) => views
                    .iter()
                    .find(|(_, v)| *v != first)
                    .map(|(i, _)| *i)
                    .or_else(|| match &self.nodes[l as usize - 1] {
                        Some(n) if n.status().state == ServerState::Leader => None,
                        Some(_) => Some(l as usize - 1),
                        // A stopped node is named: wait for the views to move.
                        None => Some(views[0].0),
                    }),
            };
            let Some(i) = waiting else {
                return first.unwrap();
            };
            let rx = changes[i].as_mut().expect("a running node");
            tokio::time::timeout_at(deadline, rx.changed())
                .await
                .unwrap_or_else(|_| panic!("no agreed leader: {views:?}"))
                .expect("the node is running");
        }
    }

    /// Every running node's metadata once it applied `index`; all equal.
    async fn converged(&self, index: u64) -> MetadataMachine {
        let mut states = Vec::new();
        for n in self.running() {
            n.wait_applied(index, DEADLINE).await.unwrap();
            states.push(n.read(|s| s.clone()));
        }
        for s in &states[1..] {
            assert_eq!(s.metadata, states[0].metadata);
        }
        states.swap_remove(0)
    }
}

fn topic(name: &str, partitions: i32) -> TopicRecord {
    TopicRecord {
        name: TopicName::new(name).unwrap(),
        id: TopicId::random(),
        kind: TopicKind::Partitioned,
        partitions,
        config: TopicConfig::default(),
        placements: (0..partitions)
            .map(|p| PartitionState::single(1 + p % 3))
            .collect(),
    }
}

fn batch(records: Vec<MetadataRecord>) -> MetadataBatch {
    MetadataBatch(records)
}

/// What a broker that only reads the committed log (no vote) rebuilds:
/// the latest snapshot, if the log was compacted, then every batch after it.
async fn rebuilt_by_fetching(
    client: &ControllerClient<MetadataMachine>,
    from_node: u64,
    upto: u64,
) -> MetadataMachine {
    let mut m = MetadataMachine::new();
    let mut next = 1;
    let deadline = Instant::now() + DEADLINE;
    while next <= upto {
        assert!(
            Instant::now() < deadline,
            "fetched up to {next} of {upto} from node {from_node}"
        );
        // A request that timed out under load is asked again: each attempt
        // is bounded by the client's request timeout.
        let Ok(fetched) = client.fetch(from_node, next, 4).await else {
            continue;
        };
        match fetched {
            Fetched::Records {
                records,
                next_index,
                ..
            } => {
                // Every node has applied `upto` (converged), so each answer
                // moves on.
                assert!(next_index > next, "fetch from {next} did not advance");
                for (index, b) in records {
                    m.apply(index, &b).ok();
                }
                next = next_index;
            }
            Fetched::SnapshotNeeded { .. } => {
                let Ok(snap) = client.fetch_snapshot(from_node).await else {
                    continue;
                };
                let snap = snap.expect("a compacted log has a snapshot");
                m.restore(&snap.data).unwrap();
                next = snap.index + 1;
            }
        }
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_controllers_replicate_the_metadata_and_a_lagging_one_catches_up() {
    let mut q = Quorum::start(3).await;
    let leader = q.leader().await;
    let client = q.client();

    let first = client
        .submit(batch(vec![
            MetadataRecord::ClusterInitialized {
                cluster_id: "c-1".into(),
            },
            MetadataRecord::TopicCreated {
                topic: topic("orders", 6),
            },
        ]))
        .await
        .unwrap();
    assert_eq!(first.response, Ok(()));

    // Two controllers that validated against the same stale state would both
    // create `orders`: the second batch is refused by every node, whole.
    let dup = client
        .submit(batch(vec![
            MetadataRecord::ProducerIdsReserved { limit: 9000 },
            MetadataRecord::TopicCreated {
                topic: topic("orders", 1),
            },
        ]))
        .await
        .unwrap();
    let reason = dup.response.unwrap_err();
    assert!(reason.contains("orders"), "{reason}");
    let state = q.converged(dup.index).await;
    assert_eq!(state.metadata.cluster_id, "c-1");
    assert_eq!(state.metadata.producer_id_limit, 0);
    assert_eq!(state.metadata.topics.len(), 1);

    // A node misses 30 decisions and comes back after the log was compacted.
    let lagging = (1..=3).find(|&i| i != leader).unwrap();
    q.stop(lagging).await;
    for i in 0..30 {
        let mut records = vec![MetadataRecord::TopicCreated {
            topic: topic(&format!("t{i}"), 1 + i % 4),
        }];
        if i % 3 == 0 {
            records.push(MetadataRecord::ProducerIdsReserved {
                limit: 1000 * (i as i64 + 1),
            });
        }
        let s = client.submit(batch(records)).await.unwrap();
        assert_eq!(s.response, Ok(()), "decision {i}");
    }
    let deleted = q.nodes[leader as usize - 1]
        .as_ref()
        .unwrap()
        .read(|m| m.metadata.topics[&TopicName::new("t4").unwrap()].id);
    let last = client
        .submit(batch(vec![MetadataRecord::TopicDeleted {
            id: deleted,
            name: TopicName::new("t4").unwrap(),
        }]))
        .await
        .unwrap()
        .index;
    q.restart(lagging).await;
    let state = q.converged(last).await;
    assert_eq!(state.metadata.topics.len(), 30);
    assert_eq!(state.metadata.producer_id_limit, 28_000);
    let placed: usize = state
        .metadata
        .topics
        .values()
        .map(|t| t.placements.len())
        .sum();
    assert_eq!(
        placed as i32,
        state
            .metadata
            .topics
            .values()
            .map(|t| t.partitions)
            .sum::<i32>()
    );

    // A broker-only node reading the committed log gets the same metadata,
    // from any controller.
    for id in 1..=3 {
        let rebuilt = rebuilt_by_fetching(&client, id, last).await;
        assert_eq!(rebuilt.metadata, state.metadata, "fetched from node {id}");
    }
    for id in 1..=3 {
        q.stop(id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_one_commits_alone_and_keeps_its_metadata_across_restarts() {
    let mut q = Quorum::start(1).await;
    q.leader().await;
    let client = q.client();
    let mut last = 0;
    for i in 0..25 {
        last = client
            .submit(batch(vec![MetadataRecord::TopicCreated {
                topic: topic(&format!("s{i}"), 2),
            }]))
            .await
            .unwrap()
            .index;
    }
    let before = q.converged(last).await;
    q.stop(1).await;
    q.restart(1).await;
    q.leader().await;
    let after = q.converged(last).await;
    assert_eq!(after.metadata, before.metadata);
    assert_eq!(after.metadata.topics.len(), 25);
    q.stop(1).await;
}
