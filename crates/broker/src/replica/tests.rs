//! Three replicas of one partition over real logs on disk, driven by a
//! seeded simulation: a producer writing to whoever leads (acks=all and
//! acks=1), followers fetching through a network that delays, reorders and
//! loses messages, a controller deciding ISR changes and elections, time
//! jumping, DeleteRecords moving the leader's log start past lagging
//! followers, brokers crashing (their logs reopened as after a SIGKILL)
//! and coming back, and reassignments (KIP-455) moving the partition among
//! four brokers: added replicas start from an empty log, removed ones drop
//! theirs, a move completes once its target is in sync and may be replaced
//! or cancelled midway. Checked after every step: no batch acknowledged with
//! acks=all is missing from the leader, every replica holds the leader's
//! batches below its own high watermark, a leader's high watermark never
//! goes back within its epoch. A failing seed is printed and replays
//! alone with `REPLICA_SIM_SEED`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use magnetar_metadata::leadership::{partition_state, replica_state};
use magnetar_metadata::reassignment;
use magnetar_replication::controller::{alter_partition, elect_leader, remove_broker};
use magnetar_replication::{
    Acks, AlterPartitionRequest, FetchRequest, LeaderConfig, PartitionState, ReplicationError,
};
use model::{
    LeaderEpoch, NodeId, Offset, PartitionId, Timestamp, TopicId, TopicName, TopicPartition,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{AppendOutcome, BatchBuilder, BatchHeader, Compression, LogConfig, LogManager};

use super::{Replica, ReplicaEffects, ServedFetch};

/// The partition's replicas at first.
const NODES: [NodeId; 3] = [NodeId(1), NodeId(2), NodeId(3)];
/// Every broker: reassignments move the partition among them.
const BROKERS: [NodeId; 4] = [NodeId(1), NodeId(2), NodeId(3), NodeId(4)];
const CONFIG: LeaderConfig = LeaderConfig {
    min_insync_replicas: 2,
    replica_lag_time_max_ms: 2_000,
    alter_partition_retry_ms: 300,
    max_fetch_records: u64::MAX,
};

fn tp() -> TopicPartition {
    TopicPartition::new(TopicName::new("replicated").unwrap(), PartitionId(0))
}

fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        min_insync_replicas: 2,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// A message in flight, to `to`.
#[derive(Debug)]
enum Msg {
    Fetch(FetchRequest),
    Records {
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        bytes: Vec<u8>,
        hw: Offset,
        log_start: Offset,
    },
    Diverging {
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
        end_offset: Offset,
    },
    OutOfRange {
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        log_start: Offset,
    },
    FetchError {
        fetch_id: u64,
    },
    AlterPartition {
        id: u64,
        request: AlterPartitionRequest,
    },
    AlterAnswer {
        id: u64,
        result: Result<PartitionState, ReplicationError>,
    },
}

struct Node {
    _manager: LogManager,
    replica: Replica,
}

struct Sim {
    seed: u64,
    step: usize,
    rng: StdRng,
    dirs: BTreeMap<NodeId, tempfile::TempDir>,
    topic_id: TopicId,
    nodes: BTreeMap<NodeId, Node>,
    state: PartitionState,
    /// The reassignment under way: replicas being added, being removed.
    moving: (Vec<i32>, Vec<i32>),
    reassignments: u64,
    completed: u64,
    net: VecDeque<(NodeId, NodeId, Msg)>,
    now: u64,
    next_request: u64,
    /// acks=all appends not answered yet: request id -> (base, crc).
    waiting: BTreeMap<u64, (Offset, u32)>,
    /// acks=all appends acknowledged: (base offset, crc).
    acked: Vec<(Offset, u32)>,
    /// The leader's high watermark in its epoch.
    leader_hw: Option<(NodeId, LeaderEpoch, Offset)>,
    acked_acks_one: u64,
    truncations: u64,
    refused: u64,
    deleted_records: u64,
    fresh_starts: u64,
    /// Whether fetch answers are sometimes cut short.
    cut_answers: bool,
}

/// The controller's node id in the simulated network.
const CONTROLLER: NodeId = NodeId(0);

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut sim = Sim {
            seed,
            step: 0,
            rng: StdRng::seed_from_u64(seed),
            dirs: BROKERS
                .iter()
                .map(|n| (*n, tempfile::tempdir().unwrap()))
                .collect(),
            topic_id: TopicId::random(),
            nodes: BTreeMap::new(),
            state: PartitionState::new(NODES.to_vec()),
            moving: (Vec::new(), Vec::new()),
            reassignments: 0,
            completed: 0,
            net: VecDeque::new(),
            now: 1_000,
            next_request: 0,
            waiting: BTreeMap::new(),
            acked: Vec::new(),
            leader_hw: None,
            acked_acks_one: 0,
            truncations: 0,
            refused: 0,
            deleted_records: 0,
            fresh_starts: 0,
            cut_answers: true,
        };
        for n in BROKERS {
            sim.start(n);
        }
        sim.publish();
        sim
    }

    fn fail(&self, what: String) -> ! {
        panic!(
            "seed {} step {}: {what}\n  state: {:?}\n  replay: REPLICA_SIM_SEED={} cargo test -p magnetar-broker replica::tests::replays_one_seed -- --ignored --nocapture",
            self.seed, self.step, self.state, self.seed
        )
    }

    fn start(&mut self, n: NodeId) {
        let manager = LogManager::open(self.dirs[&n].path()).unwrap();
        let log = manager
            .open_log(&tp(), self.topic_id, log_config())
            .unwrap();
        let replica = Replica::new(n, log, CONFIG, 400);
        self.nodes.insert(
            n,
            Node {
                _manager: manager,
                replica,
            },
        );
    }

    fn live(&self) -> BTreeSet<NodeId> {
        self.nodes.keys().copied().collect()
    }

    /// Every live broker learns the partition's state (the metadata log).
    fn publish(&mut self) {
        let state = self.state.clone();
        let live: Vec<NodeId> = self.nodes.keys().copied().collect();
        for n in live {
            let fx = self.nodes[&n]
                .replica
                .apply_state(&state, self.now)
                .unwrap_or_else(|e| self.fail(format!("node {n} cannot apply {state:?}: {e}")));
            self.effects(n, fx);
        }
    }

    fn effects(&mut self, from: NodeId, fx: ReplicaEffects) {
        for id in fx.acked {
            if let Some(a) = self.waiting.remove(&id) {
                self.acked.push(a);
            }
        }
        for (id, _) in fx.failed {
            self.waiting.remove(&id);
        }
        for (id, request) in fx.alter_partition {
            self.net
                .push_back((from, CONTROLLER, Msg::AlterPartition { id, request }));
        }
    }

    fn produce(&mut self) {
        let acks = if self.rng.random_bool(0.8) {
            Acks::All
        } else {
            Acks::Leader
        };
        self.produce_with(acks);
    }

    fn produce_with(&mut self, acks: Acks) {
        let Some(leader) = self.state.leader.filter(|l| self.nodes.contains_key(l)) else {
            return;
        };
        let replica = &self.nodes[&leader].replica;
        if replica.check_append(acks).is_err() {
            self.refused += 1;
            return;
        }
        let mut b = BatchBuilder::new(Compression::None);
        for i in 0..self.rng.random_range(1..4) {
            let value = format!("{}-{}-{i}", self.seed, self.next_request);
            b.append(
                Timestamp(self.now as i64),
                None,
                Some(value.as_bytes()),
                &[],
            )
            .unwrap();
        }
        let bytes = b.build().unwrap();
        let (outcome, work) = replica
            .log()
            .append_deferred(&bytes, self.state.leader_epoch, Timestamp(self.now as i64))
            .unwrap();
        replica.log().complete(work).unwrap();
        let AppendOutcome::Appended(info) = outcome else {
            self.fail("a plain batch was a duplicate".into());
        };
        let request = self.next_request;
        self.next_request += 1;
        let crc = BatchHeader::parse(&bytes).unwrap().crc;
        let (answered, fx) = replica
            .leader_appended(
                info.base_offset,
                info.last_offset.plus(1),
                acks,
                request,
                self.now,
            )
            .unwrap_or_else(|e| self.fail(format!("leader refused its own append: {e}")));
        if acks == Acks::All {
            self.waiting.insert(request, (info.base_offset, crc));
        } else if answered {
            self.acked_acks_one += 1;
        }
        self.effects(leader, fx);
    }

    fn deliver(&mut self, from: NodeId, to: NodeId, msg: Msg) {
        if std::env::var("SIM_TRACE").is_ok() {
            eprintln!("{from} -> {to}: {msg:?}");
        }
        if to == CONTROLLER {
            let Msg::AlterPartition { id, request } = msg else {
                return;
            };
            let result = alter_partition(&self.state, &request, &self.live()).map(|next| {
                // As the controller: the ISR change that admits the last
                // target replica completes the move.
                self.commit(&next);
                self.state.clone()
            });
            self.net
                .push_back((CONTROLLER, from, Msg::AlterAnswer { id, result }));
            return;
        }
        let Some(node) = self.nodes.get(&to) else {
            return;
        };
        let replica = &node.replica;
        let now_ts = Timestamp(self.now as i64);
        match msg {
            Msg::Fetch(req) => {
                let max = self.rng.random_range(80..1500);
                let fetch_id = req.fetch_id;
                let leader_epoch = req.leader_epoch;
                let answer = match replica.serve_fetch(&req, max, self.now) {
                    Ok((
                        ServedFetch::Records {
                            region,
                            high_watermark,
                            log_start_offset,
                        },
                        fx,
                    )) => {
                        self.effects(to, fx);
                        let bytes =
                            region.map_or_else(Vec::new, |r| r.read_all().unwrap().to_vec());
                        Msg::Records {
                            fetch_id,
                            leader_epoch,
                            bytes,
                            hw: high_watermark,
                            log_start: log_start_offset,
                        }
                    }
                    Ok((
                        ServedFetch::Diverging {
                            epoch, end_offset, ..
                        },
                        fx,
                    )) => {
                        self.effects(to, fx);
                        Msg::Diverging {
                            fetch_id,
                            leader_epoch,
                            epoch,
                            end_offset,
                        }
                    }
                    Ok((ServedFetch::OutOfRange { log_start_offset }, fx)) => {
                        self.effects(to, fx);
                        Msg::OutOfRange {
                            fetch_id,
                            leader_epoch,
                            log_start: log_start_offset,
                        }
                    }
                    Err(_) => Msg::FetchError { fetch_id },
                };
                self.net.push_back((to, from, answer));
            }
            Msg::Records {
                fetch_id,
                leader_epoch,
                bytes,
                hw,
                log_start,
            } => {
                // Sometimes the answer is cut in the middle of a batch, as
                // a Fetch response may be.
                let cut = if self.cut_answers && !bytes.is_empty() && self.rng.random_bool(0.2) {
                    self.rng.random_range(0..bytes.len())
                } else {
                    bytes.len()
                };
                replica
                    .on_fetched(
                        fetch_id,
                        leader_epoch,
                        &bytes[..cut],
                        (hw, log_start),
                        now_ts,
                    )
                    .unwrap_or_else(|e| self.fail(format!("node {to} cannot take a fetch: {e}")));
            }
            Msg::Diverging {
                fetch_id,
                leader_epoch,
                epoch,
                end_offset,
            } => {
                let before = replica.log().log_end_offset();
                replica
                    .on_diverging(fetch_id, leader_epoch, epoch, end_offset)
                    .unwrap_or_else(|e| self.fail(format!("node {to} cannot truncate: {e}")));
                if replica.log().log_end_offset() < before {
                    self.truncations += 1;
                }
            }
            Msg::OutOfRange {
                fetch_id,
                leader_epoch,
                log_start,
            } => {
                let before = replica.log().log_start_offset();
                replica
                    .on_out_of_range(fetch_id, leader_epoch, log_start)
                    .unwrap_or_else(|e| self.fail(format!("node {to} cannot start afresh: {e}")));
                if replica.log().log_start_offset() > before {
                    self.fresh_starts += 1;
                }
            }
            Msg::FetchError { fetch_id } => replica.on_fetch_error(fetch_id),
            Msg::AlterAnswer { id, result } => {
                let fx = replica
                    .on_alter_partition_response(
                        id,
                        result.as_ref().map_err(Clone::clone),
                        self.now,
                    )
                    .unwrap();
                self.effects(to, fx);
            }
            Msg::AlterPartition { .. } => {}
        }
    }

    /// The leader's log start moves up to its high watermark, as
    /// DeleteRecords moves it (followers keep what they have; one that
    /// falls behind it starts afresh there).
    fn delete_records(&mut self) {
        let Some(leader) = self.state.leader.filter(|l| self.nodes.contains_key(l)) else {
            return;
        };
        let log = self.nodes[&leader].replica.log();
        let hw = log.high_watermark();
        log.delete_records_before(hw).unwrap();
        self.deleted_records += 1;
    }

    fn crash(&mut self, n: NodeId) {
        if self.nodes.len() <= 1 || self.nodes.remove(&n).is_none() {
            return;
        }
        // What was in flight to or from it is lost with it.
        self.net.retain(|(f, t, _)| *f != n && *t != n);
        if self.state.leader == Some(n) {
            self.waiting.clear();
        }
        let next = remove_broker(&self.state, n, &self.live(), false);
        self.commit(&next);
    }

    fn restart(&mut self, n: NodeId) {
        if self.nodes.contains_key(&n) {
            return;
        }
        // A broker that is no replica any more staged its copy for
        // deletion when it came back (KIP-516).
        if !self.state.replicas.contains(&n) {
            self.dirs.insert(n, tempfile::tempdir().unwrap());
        }
        self.start(n);
        let next = match self.state.leader {
            None => elect_leader(&self.state, &self.live(), false).unwrap_or(self.state.clone()),
            Some(_) => self.state.clone(),
        };
        self.commit(&next);
    }

    /// The metadata's form of the partition's state, with the move under
    /// way.
    fn meta(&self, s: &PartitionState) -> crate::metadata_store::PartitionState {
        let mut m = partition_state(s);
        m.adding_replicas = self.moving.0.clone();
        m.removing_replicas = self.moving.1.clone();
        m
    }

    /// Commits `next`, decided from the current state by the replication
    /// rules, as the controller does: the move under way kept (and
    /// completed if its target is in sync now), then published. Live
    /// brokers that are no replica any more drop their copy.
    fn commit(&mut self, next: &PartitionState) {
        let current = self.meta(&self.state);
        let live: BTreeSet<i32> = self.live().iter().map(|n| n.0).collect();
        let next = reassignment::carried(&current, partition_state(next), &live);
        if current.is_reassigning() && !next.is_reassigning() {
            self.completed += 1;
        }
        self.adopt(next);
    }

    /// Makes `next` the partition's state and publishes it.
    fn adopt(&mut self, next: crate::metadata_store::PartitionState) {
        let before = self.state.replicas.clone();
        self.moving = (next.adding_replicas.clone(), next.removing_replicas.clone());
        self.state = replica_state(&next);
        for n in before {
            if !self.state.replicas.contains(&n) && self.nodes.contains_key(&n) {
                self.drop_copy(n);
            }
        }
        self.publish();
    }

    /// `n` stops hosting the partition: its log is gone (staged for
    /// deletion), and a later move back starts it from nothing.
    fn drop_copy(&mut self, n: NodeId) {
        let fx = self.nodes[&n]
            .replica
            .apply_state(&self.state, self.now)
            .unwrap_or_else(|e| self.fail(format!("node {n} cannot step out: {e}")));
        self.effects(n, fx);
        self.nodes.remove(&n);
        self.net.retain(|(f, t, _)| *f != n && *t != n);
        self.dirs.insert(n, tempfile::tempdir().unwrap());
        self.start(n);
    }

    /// An administrator moves the partition to two or three random
    /// brokers, or cancels the move under way.
    fn reassign(&mut self) {
        let current = self.meta(&self.state);
        let live: BTreeSet<i32> = self.live().iter().map(|n| n.0).collect();
        let target: Option<Vec<i32>> = if current.is_reassigning() && self.rng.random_bool(0.3) {
            None
        } else {
            let mut pool: Vec<i32> = BROKERS.iter().map(|n| n.0).collect();
            let mut target = Vec::new();
            for _ in 0..self.rng.random_range(2..=3) {
                target.push(pool.remove(self.rng.random_range(0..pool.len())));
            }
            Some(target)
        };
        if let Ok(Some(next)) = reassignment::change(&current, target.as_deref(), &live) {
            self.reassignments += 1;
            if current.is_reassigning() && !next.is_reassigning() {
                self.completed += 1;
            }
            self.adopt(next);
        }
    }

    fn step(&mut self) {
        self.step += 1;
        match self.rng.random_range(0..101) {
            0..=19 => self.produce(),
            20..=44 => {
                for n in self.live() {
                    if let Some((leader, req)) = self.nodes[&n].replica.poll_fetch(self.now) {
                        self.net.push_back((n, leader, Msg::Fetch(req)));
                    }
                }
            }
            45..=84 => {
                if !self.net.is_empty() {
                    // Reordered: any message in flight may arrive next.
                    let i = self.rng.random_range(0..self.net.len());
                    let (from, to, msg) = self.net.remove(i).unwrap();
                    if !self.rng.random_bool(0.05) {
                        self.deliver(from, to, msg);
                    }
                }
            }
            85 => self.delete_records(),
            86..=95 => {
                self.now += self.rng.random_range(1..300);
                for n in self.live() {
                    let fx = self.nodes[&n].replica.tick(self.now);
                    self.effects(n, fx);
                }
            }
            96 => {
                let n = BROKERS[self.rng.random_range(0..BROKERS.len())];
                self.crash(n);
            }
            97..=99 => {
                let n = BROKERS[self.rng.random_range(0..BROKERS.len())];
                self.restart(n);
            }
            _ => self.reassign(),
        }
        self.check();
    }

    /// The batches of `n`'s log from its start: (base, crc).
    fn batches(&self, n: NodeId) -> Vec<(Offset, u32)> {
        let log = self.nodes[&n].replica.log();
        let mut out = Vec::new();
        let mut at = log.log_start_offset();
        while at < log.log_end_offset() {
            let r = log.read_region_to_end(at, 1 << 20, true).unwrap();
            let Some(region) = r.region else { break };
            let bytes = region.read_all().unwrap();
            let mut pos = 0;
            while pos < bytes.len() {
                let h = BatchHeader::parse(&bytes[pos..]).unwrap();
                out.push((h.base_offset, h.crc));
                pos += h.total_size();
            }
            at = r.next_offset;
        }
        out
    }

    fn check(&mut self) {
        let Some(leader) = self.state.leader.filter(|l| self.nodes.contains_key(l)) else {
            return;
        };
        let theirs = self.batches(leader);
        let leader_start = self.nodes[&leader].replica.log().log_start_offset();
        for a in self.acked.iter().filter(|a| a.0 >= leader_start) {
            if !theirs.contains(a) {
                self.fail(format!(
                    "acknowledged batch {a:?} is not on leader {leader}"
                ));
            }
        }
        let hw = self.nodes[&leader].replica.log().high_watermark();
        if let Some((l, e, before)) = self.leader_hw {
            if l == leader && e == self.state.leader_epoch && hw < before {
                self.fail(format!(
                    "leader {leader}'s high watermark went from {before} to {hw}"
                ));
            }
        }
        self.leader_hw = Some((leader, self.state.leader_epoch, hw));
        for n in self.live() {
            let mine = self.batches(n);
            let hw = self.nodes[&n].replica.log().high_watermark();
            let from = leader_start.max(self.nodes[&n].replica.log().log_start_offset());
            let visible = |b: &&(Offset, u32)| b.0 >= from && b.0 < hw;
            let a: Vec<_> = mine.iter().filter(visible).collect();
            let b: Vec<_> = theirs.iter().filter(visible).collect();
            if a != b {
                self.fail(format!(
                    "node {n} shows {a:?} below its high watermark {hw}; the leader {leader} has {b:?}"
                ));
            }
        }
    }

    /// Every live follower fetches once, and every message in flight
    /// arrives, in order.
    fn round(&mut self) {
        for n in self.live() {
            if let Some((leader, req)) = self.nodes[&n].replica.poll_fetch(self.now) {
                self.net.push_back((n, leader, Msg::Fetch(req)));
            }
        }
        while let Some((from, to, msg)) = self.net.pop_front() {
            self.deliver(from, to, msg);
        }
        self.check();
    }

    /// Everyone back, no more loss: the followers catch up and every log
    /// ends as the leader's, every acks=all batch in it.
    fn heal(&mut self) {
        for n in BROKERS {
            self.restart(n);
        }
        for _ in 0..400 {
            self.now += 50;
            for n in self.live() {
                let fx = self.nodes[&n].replica.tick(self.now);
                self.effects(n, fx);
            }
            self.round();
        }
        let leader = self
            .state
            .leader
            .unwrap_or_else(|| self.fail("no leader after healing".into()));
        // With every broker back, a move under way completes.
        if !self.moving.0.is_empty() || !self.moving.1.is_empty() {
            self.fail(format!("the move {:?} did not complete", self.moving));
        }
        let start = |sim: &Sim, n: NodeId| sim.nodes[&n].replica.log().log_start_offset();
        for n in self.state.replicas.clone() {
            let from = start(self, n).max(start(self, leader));
            let after = |b: &(Offset, u32)| b.0 >= from;
            let mine: Vec<_> = self.batches(n).into_iter().filter(after).collect();
            let theirs: Vec<_> = self.batches(leader).into_iter().filter(after).collect();
            if mine != theirs {
                self.fail(format!("node {n} did not end with leader {leader}'s log"));
            }
            // What the leader deleted is gone from every copy too, so no
            // failover brings it back.
            if start(self, n) < start(self, leader) {
                self.fail(format!(
                    "node {n} starts at {} below leader {leader}'s log start {}",
                    start(self, n),
                    start(self, leader)
                ));
            }
        }
    }
}

#[test]
fn acks_all_is_answered_once_both_followers_have_the_batch() {
    let mut sim = Sim::new(7);
    sim.cut_answers = false;
    let leader = sim.state.leader.unwrap();
    sim.produce_with(Acks::All);
    assert_eq!(sim.waiting.len(), 1);
    assert_eq!(sim.nodes[&leader].replica.log().high_watermark(), Offset(0));
    // The first round carries the batch to the followers; the second
    // tells the leader they have it.
    sim.round();
    assert_eq!(sim.waiting.len(), 1);
    sim.round();
    assert!(sim.waiting.is_empty());
    assert_eq!(sim.acked.len(), 1);
    let end = sim.nodes[&leader].replica.log().log_end_offset();
    assert_eq!(sim.nodes[&leader].replica.log().high_watermark(), end);
    // The followers learn the high watermark with their next fetch.
    sim.round();
    for n in NODES {
        assert_eq!(
            sim.nodes[&n].replica.log().high_watermark(),
            end,
            "node {n}"
        );
    }
    // acks=1 is answered at once; one follower down, acks=all still
    // gets its two in-sync replicas.
    sim.produce_with(Acks::Leader);
    assert_eq!(sim.acked_acks_one, 1);
    let follower = NODES.into_iter().find(|n| *n != leader).unwrap();
    sim.crash(follower);
    assert_eq!(sim.state.isr.len(), 2);
    sim.produce_with(Acks::All);
    sim.round();
    sim.round();
    assert_eq!(sim.acked.len(), 2);
    // The second follower down: acks=all is refused before the append.
    let other = NODES
        .into_iter()
        .find(|n| *n != leader && *n != follower)
        .unwrap();
    sim.crash(other);
    let before = sim.next_request;
    sim.produce_with(Acks::All);
    assert_eq!((sim.next_request, sim.refused), (before, 1));
    sim.heal();
}

fn run(seed: u64, steps: usize) -> Sim {
    let mut sim = Sim::new(seed);
    for _ in 0..steps {
        sim.step();
    }
    sim.heal();
    sim
}

/// A few dozen seeds in every test run; the seeds are fixed, so a failure
/// names one that replays.
#[test]
fn replicas_over_real_logs_keep_what_was_acknowledged() {
    let (mut acked, mut truncations, mut fresh, mut moved) = (0, 0, 0, 0);
    for seed in 0..24 {
        let sim = run(seed, 400);
        acked += sim.acked.len();
        truncations += sim.truncations;
        fresh += sim.fresh_starts;
        moved += sim.completed;
    }
    // The runs did what they are for.
    eprintln!(
        "{acked} acks=all batches acknowledged, {truncations} truncations, {fresh} fresh starts, {moved} moves completed"
    );
    assert!(moved > 0, "no reassignment ever completed");
    assert!(acked > 400, "only {acked} acks=all batches acknowledged");
    assert!(truncations > 0, "no follower ever diverged");
    assert!(
        fresh > 0,
        "no follower ever fell behind its leader's log start"
    );
}

/// Replays one seed (`REPLICA_SIM_SEED`), or many more seeds
/// (`REPLICA_SIM_SEEDS`), outside the default run.
#[test]
#[ignore]
fn replays_one_seed() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(seed) = env("REPLICA_SIM_SEED") {
        let sim = run(seed, 400);
        println!(
            "seed {seed}: {} acked, {} truncations",
            sim.acked.len(),
            sim.truncations
        );
        return;
    }
    for seed in 0..env("REPLICA_SIM_SEEDS").unwrap_or(1_000) {
        run(seed, 400);
    }
}
