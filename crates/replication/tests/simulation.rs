//! A seeded, deterministic simulation of one replicated partition: a
//! controller, three brokers (replicas [1, 2, 3], min.insync.replicas 2), a
//! producer doing acks=all appends and follower fetch loops, over a network
//! that drops, delays and reorders messages, with broker crashes and
//! restarts, network isolation and clock jumps. Every step checks the
//! replication invariants; a failure names its seed, which replays exactly
//! (`SIM_SEED=<seed> cargo test -p magnetar-replication --test simulation
//! -- --ignored sim_replay --nocapture`).
//!
//! Determinism: one `StdRng` seeded from the seed drives every choice; all
//! maps are `BTreeMap`s; no clock, no threads.

use std::collections::{BTreeMap, BTreeSet};

use magnetar_replication::controller::{alter_partition, elect_leader, remove_broker};
use magnetar_replication::{
    Acks, AlterPartitionRequest, BatchSpan, EpochCache, FetchAnswer, FetchRequest, FollowerEffect,
    FollowerReplica, LeaderConfig, LeaderEffect, LeaderReplica, PartitionEpoch, PartitionState,
    ReplicationError,
};
use model::{LeaderEpoch, NodeId, Offset};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The invariants checked after every step.
#[path = "simulation/invariants.rs"]
mod invariants;

const BROKERS: [NodeId; 3] = [NodeId(1), NodeId(2), NodeId(3)];
const HEARTBEAT_MS: u64 = 100;
const SESSION_MS: u64 = 600;
const FETCH_TIMEOUT_MS: u64 = 200;
const HEAL_STEPS: u64 = 300;
const QUIET_STEPS: u64 = 100;
const FAILOVER_STEPS: u64 = 200;
const CONFIG: LeaderConfig = LeaderConfig {
    min_insync_replicas: 2,
    replica_lag_time_max_ms: 300,
    alter_partition_retry_ms: 200,
    max_fetch_records: 20,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Controller,
    Broker(NodeId),
}

#[derive(Debug, Clone)]
enum Msg {
    Fetch(FetchRequest),
    FetchRecords {
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        from: Offset,
        records: Vec<Record>,
        hw: Offset,
    },
    FetchDiverging {
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
        end_offset: Offset,
    },
    FetchError {
        fetch_id: u64,
    },
    Alter {
        id: u64,
        request: AlterPartitionRequest,
    },
    AlterAnswer {
        id: u64,
        result: Result<PartitionState, ReplicationError>,
    },
    Heartbeat {
        incarnation: u64,
    },
    HeartbeatAnswer {
        state: PartitionState,
    },
}

#[derive(Debug)]
struct Envelope {
    from: Node,
    from_incarnation: u64,
    to: Node,
    /// For answers: the broker incarnation they are meant for.
    to_incarnation: Option<u64>,
    msg: Msg,
}

/// One record on a broker's "disk": its epoch and the producer's payload id
/// (its offset is its index).
type Record = (LeaderEpoch, u64);

enum Role {
    Down,
    Follower(FollowerReplica),
    Leader(LeaderReplica),
}

struct Broker {
    id: NodeId,
    /// Survives crashes.
    log: Vec<Record>,
    /// Survives crashes.
    cache: EpochCache,
    role: Role,
    incarnation: u64,
    known: Option<(LeaderEpoch, PartitionEpoch)>,
    next_heartbeat: u64,
    /// Followers created in this incarnation (keeps fetch ids unique).
    followers_made: u64,
}

struct Controller {
    state: PartitionState,
    live: BTreeSet<NodeId>,
    last_heartbeat: BTreeMap<NodeId, u64>,
    incarnation: BTreeMap<NodeId, u64>,
}

/// What a run did, to see that the simulation exercises something.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    acked: u64,
    refused: u64,
    elections: u64,
    truncations: u64,
    crashes: u64,
    dropped: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.acked += o.acked;
        self.refused += o.refused;
        self.elections += o.elections;
        self.truncations += o.truncations;
        self.crashes += o.crashes;
        self.dropped += o.dropped;
    }
}

struct Sim {
    seed: u64,
    step: u64,
    now: u64,
    rng: StdRng,
    trace: bool,
    drop_p: f64,
    /// No more faults: the cluster must heal.
    calm: bool,
    /// No more appends.
    quiet: bool,
    queue: BTreeMap<(u64, u64), Envelope>,
    seq: u64,
    isolated: BTreeMap<NodeId, u64>,
    brokers: BTreeMap<NodeId, Broker>,
    controller: Controller,
    next_payload: u64,
    next_request: u64,
    /// acks=all appends waiting: request -> (offset, payload) pairs.
    inflight: BTreeMap<u64, Vec<(usize, u64)>>,
    /// Every acknowledged record: offset -> payload id.
    acked: BTreeMap<usize, u64>,
    /// Set when the acknowledged records need checking again.
    acked_dirty: bool,
    /// The leader and ISR of the last full check.
    acked_checked_for: Option<(Option<NodeId>, Vec<NodeId>)>,
    writer_of_epoch: BTreeMap<LeaderEpoch, NodeId>,
    hw_of_epoch: BTreeMap<LeaderEpoch, Offset>,
    /// The highest high watermark any leader ever had.
    committed: Offset,
    stats: Stats,
}

impl Sim {
    fn new(seed: u64, trace: bool) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let drop_p = rng.random_range(0.0..0.15);
        let brokers = BROKERS
            .iter()
            .map(|&id| {
                let b = Broker {
                    id,
                    log: Vec::new(),
                    cache: EpochCache::new(),
                    role: Role::Follower(follower(id, Offset(0), EpochCache::new(), 1)),
                    incarnation: 1,
                    known: None,
                    next_heartbeat: 0,
                    followers_made: 0,
                };
                (id, b)
            })
            .collect();
        Sim {
            seed,
            step: 0,
            now: 0,
            rng,
            trace,
            drop_p,
            calm: false,
            quiet: false,
            queue: BTreeMap::new(),
            seq: 0,
            isolated: BTreeMap::new(),
            brokers,
            controller: Controller {
                state: PartitionState::new(BROKERS.to_vec()),
                live: BROKERS.iter().copied().collect(),
                last_heartbeat: BROKERS.iter().map(|b| (*b, 0)).collect(),
                incarnation: BROKERS.iter().map(|b| (*b, 1)).collect(),
            },
            next_payload: 0,
            next_request: 0,
            inflight: BTreeMap::new(),
            acked: BTreeMap::new(),
            acked_dirty: true,
            acked_checked_for: None,
            writer_of_epoch: BTreeMap::new(),
            hw_of_epoch: BTreeMap::new(),
            committed: Offset(0),
            stats: Stats::default(),
        }
    }

    fn log(&self, what: impl FnOnce() -> String) {
        if self.trace {
            println!("[{:>4} t={:>6}] {}", self.step, self.now, what());
        }
    }

    fn fail(&self, what: String) -> ! {
        for b in self.brokers.values() {
            let role = match &b.role {
                Role::Down => "down".to_string(),
                Role::Follower(f) => format!(
                    "follower of {:?} epoch {} hw {}",
                    f.leader(),
                    f.leader_epoch(),
                    f.high_watermark()
                ),
                Role::Leader(l) => format!(
                    "leader epoch {} hw {} isr {:?} fenced {}",
                    l.leader_epoch(),
                    l.high_watermark(),
                    l.isr(),
                    l.is_fenced()
                ),
            };
            eprintln!(
                "  broker {}: {role}, log {}, epochs {:?}",
                b.id,
                b.log.len(),
                b.cache.entries()
            );
        }
        panic!(
            "seed {} step {} (t={}): {what}\n  controller: {:?}\n  replay: SIM_SEED={} cargo test -p magnetar-replication --test simulation -- --ignored sim_replay --nocapture",
            self.seed, self.step, self.now, self.controller.state, self.seed
        )
    }

    fn is_isolated(&self, node: Node) -> bool {
        match node {
            Node::Controller => false,
            Node::Broker(b) => self.isolated.get(&b).is_some_and(|until| *until > self.now),
        }
    }

    fn send(&mut self, env: Envelope) {
        if self.is_isolated(env.from)
            || self.is_isolated(env.to)
            || (!self.calm && self.rng.random_bool(self.drop_p))
        {
            self.stats.dropped += 1;
            return;
        }
        let delay = if !self.calm && self.rng.random_bool(0.05) {
            self.rng.random_range(100..400)
        } else {
            self.rng.random_range(1..30)
        };
        self.seq += 1;
        self.queue.insert((self.now + delay, self.seq), env);
    }

    fn send_to_controller(&mut self, from: NodeId, msg: Msg) {
        let from_incarnation = self.brokers[&from].incarnation;
        self.send(Envelope {
            from: Node::Broker(from),
            from_incarnation,
            to: Node::Controller,
            to_incarnation: None,
            msg,
        });
    }

    fn send_to_broker(&mut self, from: Node, to: NodeId, to_incarnation: Option<u64>, msg: Msg) {
        let from_incarnation = match from {
            Node::Broker(b) => self.brokers[&b].incarnation,
            Node::Controller => 0,
        };
        self.send(Envelope {
            from,
            from_incarnation,
            to: Node::Broker(to),
            to_incarnation,
            msg,
        });
    }

    fn run(&mut self, steps: u64) {
        for _ in 0..steps {
            self.step += 1;
            self.advance_time();
            self.deliver_due();
            if !self.calm {
                self.faults();
            }
            if !self.quiet && self.rng.random_bool(0.4) {
                self.produce();
            }
            self.brokers_act();
            self.controller_act();
            self.check();
        }
    }

    fn advance_time(&mut self) {
        let dt = if !self.calm && self.rng.random_bool(0.01) {
            let jump = self.rng.random_range(200..1500);
            self.log(|| format!("clock jumps {jump}ms"));
            jump
        } else {
            self.rng.random_range(1..25)
        };
        self.now += dt;
    }

    fn deliver_due(&mut self) {
        let later = self.queue.split_off(&(self.now + 1, 0));
        let due = std::mem::replace(&mut self.queue, later);
        for env in due.into_values() {
            self.deliver(env);
        }
    }

    fn faults(&mut self) {
        for id in BROKERS {
            let down = matches!(self.brokers[&id].role, Role::Down);
            if !down && self.rng.random_bool(0.004) {
                self.crash(id);
            } else if down && self.rng.random_bool(0.03) {
                self.restart(id);
            }
        }
        if self.rng.random_bool(0.004) {
            let id = BROKERS[self.rng.random_range(0..BROKERS.len())];
            let until = self.now + self.rng.random_range(200..2000);
            self.log(|| format!("broker {id} isolated until t={until}"));
            self.isolated.insert(id, until);
        }
    }

    fn crash(&mut self, id: NodeId) {
        self.log(|| format!("broker {id} crashes"));
        self.stats.crashes += 1;
        let b = self.brokers.get_mut(&id).expect("broker");
        let role = std::mem::replace(&mut b.role, Role::Down);
        b.known = None;
        if let Role::Leader(l) = role {
            for r in l.resign() {
                self.inflight.remove(&r);
            }
        }
    }

    fn restart(&mut self, id: NodeId) {
        self.log(|| format!("broker {id} restarts"));
        let now = self.now;
        let b = self.brokers.get_mut(&id).expect("broker");
        b.incarnation += 1;
        b.role = Role::Follower(follower(
            id,
            Offset(b.log.len() as i64),
            b.cache.clone(),
            b.incarnation,
        ));
        b.next_heartbeat = now;
        b.followers_made = 0;
    }

    fn produce(&mut self) {
        let target = if self.rng.random_bool(0.85) {
            self.controller.state.leader
        } else {
            Some(BROKERS[self.rng.random_range(0..BROKERS.len())])
        };
        let Some(id) = target else { return };
        let n = self.rng.random_range(1..=3u64);
        let request = self.next_request;
        self.next_request += 1;
        let now = self.now;
        let b = self.brokers.get_mut(&id).expect("broker");
        let Role::Leader(l) = &mut b.role else { return };
        let epoch = l.leader_epoch();
        match l.append(n, Acks::All, request, now) {
            Ok(a) => {
                if a.first.0 as usize != b.log.len() {
                    let msg = format!(
                        "append at {} but broker {id}'s log ends at {}",
                        a.first,
                        b.log.len()
                    );
                    self.fail(msg);
                }
                let mut records = Vec::new();
                for _ in 0..n {
                    let payload = self.next_payload;
                    self.next_payload += 1;
                    records.push((b.log.len(), payload));
                    b.log.push((epoch, payload));
                }
                b.cache = l.epoch_cache().clone();
                self.inflight.insert(request, records);
                if let Some(w) = self.writer_of_epoch.get(&epoch) {
                    if *w != id {
                        self.fail(format!("epoch {epoch} has two writers: {w} and {id}"));
                    }
                }
                self.writer_of_epoch.insert(epoch, id);
                self.log(|| format!("broker {id} appends {n} at {} (epoch {epoch})", a.first));
                self.leader_effects(id, a.effects);
            }
            Err(e) => {
                self.stats.refused += 1;
                self.log(|| format!("broker {id} refuses append: {e}"));
            }
        }
    }

    fn brokers_act(&mut self) {
        let now = self.now;
        for id in BROKERS {
            let b = self.brokers.get_mut(&id).expect("broker");
            if matches!(b.role, Role::Down) {
                continue;
            }
            let heartbeat = now >= b.next_heartbeat;
            if heartbeat {
                b.next_heartbeat = now + HEARTBEAT_MS;
            }
            let incarnation = b.incarnation;
            let mut fetch = None;
            let mut effects = Vec::new();
            match &mut b.role {
                Role::Follower(f) => fetch = f.poll_fetch(now),
                Role::Leader(l) => effects = l.tick(now),
                Role::Down => {}
            }
            if heartbeat {
                self.send_to_controller(id, Msg::Heartbeat { incarnation });
            }
            if let Some((leader, req)) = fetch {
                self.send_to_broker(Node::Broker(id), leader, None, Msg::Fetch(req));
            }
            self.leader_effects(id, effects);
        }
    }

    fn controller_act(&mut self) {
        let now = self.now;
        let expired: Vec<NodeId> = self
            .controller
            .live
            .iter()
            .copied()
            .filter(|b| now.saturating_sub(self.controller.last_heartbeat[b]) > SESSION_MS)
            .collect();
        for b in expired {
            self.log(|| format!("controller fences broker {b}"));
            self.fence(b);
        }
        if self.controller.state.leader.is_none() {
            if let Ok(s) = elect_leader(&self.controller.state, &self.controller.live, false) {
                self.set_state(s);
            }
        }
    }

    fn fence(&mut self, b: NodeId) {
        let c = &mut self.controller;
        c.live.remove(&b);
        let next = remove_broker(&c.state, b, &c.live, false);
        self.set_state(next);
    }

    fn set_state(&mut self, next: PartitionState) {
        if next.leader_epoch != self.controller.state.leader_epoch {
            self.stats.elections += 1;
            self.log(|| {
                format!(
                    "controller: leader {:?} epoch {}",
                    next.leader, next.leader_epoch
                )
            });
        }
        self.controller.state = next;
    }

    fn deliver(&mut self, env: Envelope) {
        match env.to {
            Node::Controller => {
                let Node::Broker(from) = env.from else { return };
                self.at_controller(from, env.from_incarnation, env.msg);
            }
            Node::Broker(id) => {
                let b = &self.brokers[&id];
                if matches!(b.role, Role::Down)
                    || env.to_incarnation.is_some_and(|i| i != b.incarnation)
                {
                    return;
                }
                self.at_broker(id, env.from, env.from_incarnation, env.msg);
            }
        }
    }

    fn at_controller(&mut self, from: NodeId, incarnation: u64, msg: Msg) {
        match msg {
            Msg::Heartbeat { incarnation } => {
                let known = self.controller.incarnation[&from];
                if incarnation < known {
                    return;
                }
                if incarnation > known {
                    // A restarted broker registers: its old incarnation is
                    // fenced first, so it never resumes an old leadership.
                    self.log(|| {
                        format!("controller: broker {from} registers incarnation {incarnation}")
                    });
                    if self.controller.live.contains(&from) {
                        self.fence(from);
                    }
                    self.controller.incarnation.insert(from, incarnation);
                }
                self.controller.last_heartbeat.insert(from, self.now);
                if self.controller.live.insert(from) {
                    self.log(|| format!("controller unfences broker {from}"));
                    if self.controller.state.leader.is_none() {
                        if let Ok(s) =
                            elect_leader(&self.controller.state, &self.controller.live, false)
                        {
                            self.set_state(s);
                        }
                    }
                }
                let state = self.controller.state.clone();
                self.send_to_broker(
                    Node::Controller,
                    from,
                    Some(incarnation),
                    Msg::HeartbeatAnswer { state },
                );
            }
            Msg::Alter { id, request } => {
                let result =
                    alter_partition(&self.controller.state, &request, &self.controller.live);
                self.log(|| {
                    format!(
                        "controller: AlterPartition {:?} from {from}: {:?}",
                        request.new_isr,
                        result.as_ref().map(|s| s.partition_epoch)
                    )
                });
                if let Ok(s) = &result {
                    self.set_state(s.clone());
                }
                self.send_to_broker(
                    Node::Controller,
                    from,
                    Some(incarnation),
                    Msg::AlterAnswer { id, result },
                );
            }
            _ => {}
        }
    }

    fn at_broker(&mut self, id: NodeId, from: Node, from_incarnation: u64, msg: Msg) {
        let now = self.now;
        match msg {
            Msg::HeartbeatAnswer { state } => self.apply_state(id, state),
            Msg::AlterAnswer { id: alter, result } => {
                let b = self.brokers.get_mut(&id).expect("broker");
                if let Role::Leader(l) = &mut b.role {
                    let fx = l.on_alter_partition_response(
                        alter,
                        result.as_ref().map_err(Clone::clone),
                        now,
                    );
                    self.leader_effects(id, fx);
                }
            }
            Msg::Fetch(req) => {
                let Node::Broker(follower) = from else { return };
                let b = self.brokers.get_mut(&id).expect("broker");
                let fetch_id = req.fetch_id;
                let answer = match &mut b.role {
                    Role::Leader(l) => l.fetch_from_follower(&req, now),
                    _ => Err(ReplicationError::NotLeader),
                };
                let epoch = req.leader_epoch;
                let (msg, fx) = match answer {
                    Ok((FetchAnswer::Records { from, count, hw }, fx)) => {
                        let start = from.0 as usize;
                        let records = b.log[start..start + count as usize].to_vec();
                        let msg = Msg::FetchRecords {
                            fetch_id,
                            leader_epoch: epoch,
                            from,
                            records,
                            hw,
                        };
                        (msg, fx)
                    }
                    Ok((
                        FetchAnswer::Diverging {
                            epoch: e,
                            end_offset,
                            ..
                        },
                        fx,
                    )) => {
                        let msg = Msg::FetchDiverging {
                            fetch_id,
                            leader_epoch: epoch,
                            epoch: e,
                            end_offset,
                        };
                        (msg, fx)
                    }
                    Err(_) => (Msg::FetchError { fetch_id }, Vec::new()),
                };
                self.leader_effects(id, fx);
                self.send_to_broker(Node::Broker(id), follower, Some(from_incarnation), msg);
            }
            Msg::FetchRecords {
                fetch_id,
                leader_epoch,
                from,
                records,
                hw,
            } => {
                let b = self.brokers.get_mut(&id).expect("broker");
                let Role::Follower(f) = &mut b.role else {
                    return;
                };
                // Consecutive records of one epoch travel as one batch.
                let mut batches: Vec<BatchSpan> = Vec::new();
                for (i, r) in records.iter().enumerate() {
                    let at = from.plus(i as i64);
                    match batches.last_mut() {
                        Some(b) if b.epoch == r.0 => b.next = at.plus(1),
                        _ => batches.push(BatchSpan {
                            base: at,
                            next: at.plus(1),
                            epoch: r.0,
                        }),
                    }
                }
                for fx in f.on_fetch_batches(fetch_id, leader_epoch, &batches, hw) {
                    if let FollowerEffect::Append { from, to } = fx {
                        assert_eq!(
                            from.0 as usize,
                            b.log.len(),
                            "seed {} step {}",
                            self.seed,
                            self.step
                        );
                        b.log
                            .extend_from_slice(&records[..(to.0 - from.0) as usize]);
                    }
                }
                b.cache = f.epoch_cache().clone();
            }
            Msg::FetchDiverging {
                fetch_id,
                leader_epoch,
                epoch,
                end_offset,
            } => {
                let b = self.brokers.get_mut(&id).expect("broker");
                let Role::Follower(f) = &mut b.role else {
                    return;
                };
                let mut truncated = None;
                for fx in f.on_fetch_diverging(fetch_id, leader_epoch, epoch, end_offset) {
                    if let FollowerEffect::Truncate { to } = fx {
                        truncated = Some((b.log.len(), to));
                        b.log.truncate(to.0 as usize);
                        self.acked_dirty = true;
                    }
                }
                b.cache = f.epoch_cache().clone();
                if let Some((was, to)) = truncated {
                    self.stats.truncations += 1;
                    self.log(|| format!("broker {id} truncates {was} -> {to} (leader's epoch {epoch} ends at {end_offset})"));
                }
            }
            Msg::FetchError { fetch_id } => {
                let b = self.brokers.get_mut(&id).expect("broker");
                if let Role::Follower(f) = &mut b.role {
                    f.on_fetch_error(fetch_id);
                }
            }
            Msg::Alter { .. } | Msg::Heartbeat { .. } => {}
        }
    }

    fn apply_state(&mut self, id: NodeId, state: PartitionState) {
        let now = self.now;
        let b = self.brokers.get_mut(&id).expect("broker");
        let version = (state.leader_epoch, state.partition_epoch);
        if b.known.is_some_and(|k| version <= k) {
            return;
        }
        b.known = Some(version);
        if let Role::Leader(l) = &mut b.role {
            if l.leader_epoch() == state.leader_epoch {
                let fx = l.on_partition_update(&state, now);
                self.leader_effects(id, fx);
                return;
            }
        }
        if let Role::Follower(f) = &mut b.role {
            if state.leader != Some(id) {
                f.on_leader_change(state.leader, state.leader_epoch);
                return;
            }
        }
        let role = std::mem::replace(&mut b.role, Role::Down);
        let (hw, failed) = match role {
            Role::Leader(l) => (l.high_watermark(), l.resign()),
            Role::Follower(f) => (f.high_watermark(), Vec::new()),
            Role::Down => (Offset(0), Vec::new()),
        };
        let log_end = Offset(b.log.len() as i64);
        if state.leader == Some(id) {
            let l = LeaderReplica::new(id, CONFIG, &state, log_end, hw, b.cache.clone(), now)
                .expect("named leader");
            b.cache = l.epoch_cache().clone();
            b.role = Role::Leader(l);
        } else {
            b.followers_made += 1;
            let first_fetch_id = (b.incarnation << 32) + (b.followers_made << 20);
            let mut f = FollowerReplica::new(
                id,
                log_end,
                hw,
                b.cache.clone(),
                FETCH_TIMEOUT_MS,
                first_fetch_id,
            );
            f.on_leader_change(state.leader, state.leader_epoch);
            b.role = Role::Follower(f);
        }
        for r in failed {
            self.inflight.remove(&r);
        }
        self.log(|| {
            format!(
                "broker {id} learns leader {:?} epoch {} isr {:?}",
                state.leader, state.leader_epoch, state.isr
            )
        });
    }

    fn leader_effects(&mut self, id: NodeId, effects: Vec<LeaderEffect>) {
        for fx in effects {
            match fx {
                LeaderEffect::AlterPartition { id: alter, request } => {
                    self.log(|| format!("broker {id} asks ISR {:?}", request.new_isr));
                    self.send_to_controller(id, Msg::Alter { id: alter, request });
                }
                LeaderEffect::HighWatermark { hw, acked, failed } => {
                    self.committed = self.committed.max(hw);
                    self.log(|| format!("broker {id} HW -> {hw}, acks {acked:?}"));
                    for r in failed {
                        self.inflight.remove(&r);
                    }
                    for r in acked {
                        let Some(records) = self.inflight.remove(&r) else {
                            continue;
                        };
                        for (offset, payload) in records {
                            self.stats.acked += 1;
                            self.acked_dirty = true;
                            if let Some(old) = self.acked.insert(offset, payload) {
                                self.fail(format!(
                                    "offset {offset} acknowledged twice: {old} then {payload}"
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
}

fn follower(id: NodeId, log_end: Offset, cache: EpochCache, incarnation: u64) -> FollowerReplica {
    FollowerReplica::new(
        id,
        log_end,
        Offset(0),
        cache,
        FETCH_TIMEOUT_MS,
        incarnation << 32,
    )
}

fn run_seed(seed: u64, steps: u64, trace: bool) -> Stats {
    let mut sim = Sim::new(seed, trace);
    sim.run(steps);
    // Liveness: once faults stop, every broker comes back, rejoins the ISR
    // and acks=all appends are answered again.
    sim.calm = true;
    for id in BROKERS {
        sim.isolated.remove(&id);
        if matches!(sim.brokers[&id].role, Role::Down) {
            sim.restart(id);
        }
    }
    let acked = sim.stats.acked;
    sim.run(HEAL_STEPS);
    sim.quiet = true;
    sim.run(QUIET_STEPS);
    let state = &sim.controller.state;
    let caught_up = state.leader.is_some_and(|l| match &sim.brokers[&l].role {
        Role::Leader(l) => l.high_watermark() == l.log_end() && l.isr().len() == BROKERS.len(),
        _ => false,
    });
    if !caught_up || state.isr.len() != BROKERS.len() || sim.stats.acked == acked {
        sim.fail(format!(
            "did not heal in {HEAL_STEPS} calm steps and {QUIET_STEPS} without appends"
        ));
    }
    // A failover on a quiet partition: the leader dies right after
    // acknowledging a last append (its followers may not have heard of the
    // new high watermark yet); the new leader exposes everything the old one
    // acknowledged without waiting for a write of its own.
    let old = state.leader.expect("a leader after healing");
    let acked = sim.stats.acked;
    for _ in 0..FAILOVER_STEPS {
        if sim.stats.acked > acked {
            break;
        }
        if sim.inflight.is_empty() {
            sim.produce();
        }
        sim.quiet = true;
        sim.run(1);
    }
    if sim.stats.acked == acked {
        sim.fail("a healed cluster acknowledged no last append".into());
    }
    sim.crash(old);
    sim.run(FAILOVER_STEPS);
    let acked_end = sim.acked.keys().next_back().map_or(0, |o| o + 1) as i64;
    let exposed = sim.controller.state.leader.is_some_and(|l| {
        l != old
            && match &sim.brokers[&l].role {
                Role::Leader(l) => {
                    l.high_watermark() == l.log_end() && l.high_watermark() >= Offset(acked_end)
                }
                _ => false,
            }
    });
    if !exposed {
        sim.fail(format!(
            "a new leader did not expose the acknowledged records within {FAILOVER_STEPS} quiet steps"
        ));
    }
    sim.stats
}

fn run_seeds(seeds: std::ops::Range<u64>, steps: u64) -> Stats {
    let mut total = Stats::default();
    for seed in seeds {
        match std::panic::catch_unwind(|| run_seed(seed, steps, false)) {
            Ok(s) => total += s,
            Err(_) => panic!("simulation seed {seed} failed (see the message above)"),
        }
    }
    total
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn sim_seeds() {
    let stats = run_seeds(0..300, 400);
    println!("{stats:?}");
    assert!(
        stats.acked > 10_000,
        "the simulation acknowledges records: {stats:?}"
    );
    assert!(stats.elections > 100 && stats.truncations > 0, "{stats:?}");
}

#[test]
#[ignore]
fn sim_long() {
    let seeds = env_u64("SIM_SEEDS", 10_000);
    let steps = env_u64("SIM_STEPS", 400);
    let stats = run_seeds(0..seeds, steps);
    println!("{seeds} seeds x {steps} steps: {stats:?}");
}

/// Replays one seed with its step trace (`SIM_SEED`; by default 292, a
/// seed that once lost an acknowledged record) and checks that a run is a
/// function of its seed: the same seed twice gives the same outcome.
#[test]
fn sim_replay() {
    let seed = env_u64("SIM_SEED", 292);
    let steps = env_u64("SIM_STEPS", 400);
    let stats = run_seed(seed, steps, true);
    println!("seed {seed}: {stats:?}");
    let again = run_seed(seed, steps, false);
    assert_eq!(
        format!("{stats:?}"),
        format!("{again:?}"),
        "seed {seed} replays identically"
    );
}
