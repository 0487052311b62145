//! A broker's replication of its partitions, around each partition's
//! [`Replica`]: replicas made and told their partition's state as the
//! metadata changes, replica fetchers pulling followers' records from
//! their leaders (`num.replica.fetchers` per source broker, one request
//! for all of a fetcher's partitions), the leaders' AlterPartition
//! requests carried to the active controller and their answers back, and
//! the periodic tick that shrinks ISRs.
//!
//! The wire is the front end's: fetches reach a leader through a
//! [`LeaderLink`] (Kafka's Fetch, from the Kafka front end). Log work
//! (appends, truncation) runs on the blocking pool.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use magnetar_replication::{FetchRequest, LeaderConfig};
use model::{LeaderEpoch, NodeId, Offset, TopicId};

use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::machine::{replica_state, Replica, ReplicaEffects};
use super::registry::{FetcherSlot, Spawner};
use super::slot::AlterJob;
use super::throttle::Side as ThrottleSide;
use crate::metadata_records::PartitionState;
use crate::topic::Partition;
use crate::txn::PeerFuture;
use crate::Broker;

/// A follower's Fetch to its leader: the partitions of one fetcher.
#[derive(Debug, Clone)]
pub struct ReplicaFetch {
    /// The fetching broker.
    pub replica: NodeId,
    /// Its registration epoch (Fetch v15's `ReplicaState.replica_epoch`).
    pub broker_epoch: i64,
    /// `replica.fetch.wait.max.ms`.
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes`.
    pub min_bytes: i32,
    /// `replica.fetch.response.max.bytes`.
    pub max_bytes: i32,
    /// The partitions.
    pub partitions: Vec<PartitionFetch>,
}

/// One partition of a [`ReplicaFetch`].
#[derive(Debug, Clone)]
pub struct PartitionFetch {
    /// Its topic's id.
    pub topic_id: TopicId,
    /// Its topic's name (Fetch before v13).
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The follower's state machine's request.
    pub request: FetchRequest,
    /// The follower's log start.
    pub log_start_offset: Offset,
    /// `replica.fetch.max.bytes`.
    pub max_bytes: i32,
}

/// A leader's answer for one partition of a [`ReplicaFetch`].
#[derive(Debug, Clone)]
pub struct FetchedPartition {
    /// Its topic's id.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The answer.
    pub outcome: Fetched,
}

/// What a leader answered for a partition.
#[derive(Debug, Clone)]
pub enum Fetched {
    /// Batches from the fetch offset (perhaps none).
    Records {
        /// The batches as the leader stores them.
        records: Bytes,
        /// The leader's high watermark.
        high_watermark: Offset,
        /// The leader's log start (DeleteRecords, retention): the
        /// follower's moves up to it.
        log_start_offset: Offset,
    },
    /// The follower's log diverged: the leader's epoch `epoch` ends at
    /// `end_offset`.
    Diverging {
        /// The epoch.
        epoch: LeaderEpoch,
        /// Where it ends on the leader.
        end_offset: Offset,
    },
    /// The leader's log starts after the fetch offset.
    OutOfRange {
        /// The leader's log start.
        log_start_offset: Offset,
    },
    /// Refused or failed (not the leader, a stale epoch, …): fetched
    /// again after `replica.fetch.backoff.ms`.
    Error(String),
}

/// How a broker's followers reach their leaders.
pub trait LeaderLink: Send + Sync + 'static {
    /// Sends `fetch` to the leader at `addr`; its answers.
    fn fetch(&self, addr: String, fetch: ReplicaFetch) -> PeerFuture<Vec<FetchedPartition>>;
}

/// Which of `n` fetchers takes a partition.
fn fetcher_index(topic_id: TopicId, partition: i32, n: usize) -> usize {
    let (a, b) = topic_id.0.as_u64_pair();
    ((a ^ b ^ partition as u64) % n.max(1) as u64) as usize
}

impl Broker {
    fn leader_config(&self) -> LeaderConfig {
        let c = self.config();
        LeaderConfig {
            min_insync_replicas: 1,
            replica_lag_time_max_ms: c.int_value("replica.lag.time.max.ms").max(1) as u64,
            alter_partition_retry_ms: 1_000,
            max_fetch_records: u64::MAX,
        }
    }

    /// Has `partition` follow its `state` from the metadata: a partition
    /// with more than one replica gets (or keeps) its [`Replica`], which
    /// leads, follows or idles as `state` says; a follower is handed to
    /// the fetcher of its leader. Blocking (may write checkpoints).
    pub(crate) fn apply_replica_state(&self, partition: &Arc<Partition>, state: &PartitionState) {
        let replica = if state.replicas.len() > 1 {
            let node = NodeId(self.node_id());
            let config = self.leader_config();
            let timeout =
                self.config().int_value("replica.fetch.wait.max.ms").max(0) as u64 * 2 + 30_000;
            Some(partition.ensure_replica(
                || Replica::new(node, partition.log().clone(), config, timeout),
                &self.replication.alter_tx,
            ))
        } else {
            partition.replica()
        };
        let Some(replica) = replica else {
            return;
        };
        let was_leader = replica.is_leader();
        let epoch_before = replica.leading_epoch();
        let applied = partition
            .between_writes(|| replica.apply_state(&replica_state(state), super::clock_ms()));
        match applied {
            Ok(fx) => partition.settle(fx),
            Err(e) => {
                warn!(partition = %partition.tp, "could not take the partition's new state: {e}")
            }
        }
        if replica.leading_epoch() != epoch_before {
            // Appends of the old epoch may be cut back by the new leader:
            // their producers retry rather than wait.
            partition.fail_waiting();
        }
        if replica.is_leader() != was_leader {
            self.replication.leadership.send_modify(|n| *n += 1);
            info!(
                partition = %partition.tp,
                leader = replica.is_leader(),
                epoch = state.leader_epoch,
                "replica role changed"
            );
        }
        self.place_follower(partition, replica.following());
    }

    /// Moves `partition` to the fetcher of `leader` (out of every fetcher
    /// for `None`).
    fn place_follower(&self, partition: &Arc<Partition>, leader: Option<NodeId>) {
        let key = (partition.topic_id, partition.tp.partition.0);
        let n = self.config().int_value("num.replica.fetchers").max(1) as usize;
        let want = leader.map(|l| (l, fetcher_index(key.0, key.1, n)));
        let mut fetchers = self.replication.fetchers.lock();
        for (k, slot) in fetchers.iter() {
            if Some(*k) != want && slot.partitions.lock().remove(&key).is_some() {
                slot.changed.notify_one();
            }
        }
        let Some(want) = want else { return };
        let slot = match fetchers.get(&want) {
            Some(s) => s.clone(),
            None => {
                let s = Arc::new(FetcherSlot::default());
                fetchers.insert(want, s.clone());
                if let Some(spawn) = self.replication.started.get() {
                    spawn(want.0, s.clone());
                }
                s
            }
        };
        drop(fetchers);
        slot.partitions.lock().insert(key, partition.clone());
        slot.changed.notify_one();
    }

    /// Takes the partitions of a deleted topic out of the fetchers.
    pub(crate) fn forget_replicas(&self, topic_id: TopicId) {
        for slot in self.replication.fetchers.lock().values() {
            let mut p = slot.partitions.lock();
            let before = p.len();
            p.retain(|(t, _), _| *t != topic_id);
            if p.len() != before {
                slot.changed.notify_one();
            }
        }
    }

    /// Starts replicating: fetchers for the followers, the carrier of
    /// AlterPartition requests and the ISR tick. Once; `link` reaches the
    /// leaders.
    pub fn start_replication(self: &Arc<Self>, link: Arc<dyn LeaderLink>) {
        let rt = tokio::runtime::Handle::current();
        let spawner: Spawner = {
            let (rt, broker) = (rt.clone(), Arc::downgrade(self));
            Box::new(move |leader, slot| {
                rt.spawn(run_fetcher(broker.clone(), leader, slot, link.clone()));
            })
        };
        if self.replication.started.set(spawner).is_err() {
            return;
        }
        if let Some(spawn) = self.replication.started.get() {
            for (k, slot) in self.replication.fetchers.lock().iter() {
                spawn(k.0, slot.clone());
            }
        }
        if let Some(rx) = self.replication.alter_rx.lock().take() {
            rt.spawn(run_alter_partition(Arc::downgrade(self), rx));
        }
        rt.spawn(run_tick(Arc::downgrade(self)));
        self.spawn_leader_balancing();
    }

    /// Changes each time a partition hosted here becomes or stops being
    /// led here: front ends close their clients' producers and consumers of
    /// partitions led elsewhere now ([`Partition::leads`]), so those look
    /// the new leader up.
    pub fn watch_leadership(&self) -> tokio::sync::watch::Receiver<u64> {
        self.replication.leadership.subscribe()
    }

    /// Every hosted partition that has a replica.
    fn replicated_partitions(&self) -> Vec<Arc<Partition>> {
        let topics = self.topics.read();
        topics
            .by_name
            .values()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.replica().is_some())
            .cloned()
            .collect()
    }

    /// The hosted partition `partition` of topic `topic_id`.
    pub fn hosted_partition(&self, topic_id: TopicId, partition: i32) -> Option<Arc<Partition>> {
        let topic = self.topic_by_id(topic_id)?;
        topic
            .hosted_partition(model::PartitionId(partition))
            .cloned()
    }

    /// Answers a follower's fetch of `partition` as its leader: see
    /// [`Replica::serve_fetch`].
    pub fn serve_replica_fetch(
        &self,
        partition: &Partition,
        request: &FetchRequest,
        max_bytes: usize,
    ) -> Result<super::machine::ServedFetch, crate::Error> {
        let Some(replica) = partition.replica() else {
            return Err(
                partition.replication_error(magnetar_replication::ReplicationError::NotLeader)
            );
        };
        // A throttled replica over the leader rate gets no records this
        // time; its progress still counts. As Kafka's, the throttle holds
        // back only replicas out of the ISR (the ones catching up, as a
        // reassignment's new replicas): in-sync followers never fall out
        // of it for a throttle.
        let throttled = self.replication_throttled(partition, ThrottleSide::Leader)
            && !partition.in_sync(request.replica.0);
        let max_bytes = if throttled
            && !self
                .replication_throttle_delay(ThrottleSide::Leader)
                .is_zero()
        {
            0
        } else {
            max_bytes
        };
        let (served, fx) = replica
            .serve_fetch(request, max_bytes, super::clock_ms())
            .map_err(|e| partition.replica_error(e))?;
        partition.settle(fx);
        if throttled {
            if let super::machine::ServedFetch::Records {
                region: Some(region),
                ..
            } = &served
            {
                self.record_throttled_replication(ThrottleSide::Leader, region.len());
            }
        }
        Ok(served)
    }
}

/// One fetcher: fetches its partitions from `leader` in one request,
/// applies the answers, again.
async fn run_fetcher(
    broker: Weak<Broker>,
    leader: NodeId,
    slot: Arc<FetcherSlot>,
    link: Arc<dyn LeaderLink>,
) {
    loop {
        let changed = slot.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let Some(b) = broker.upgrade() else { return };
        let partitions: Vec<Arc<Partition>> = slot.partitions.lock().values().cloned().collect();
        let config = b.config();
        let backoff =
            Duration::from_millis(config.int_value("replica.fetch.backoff.ms").max(0) as u64);
        let now = super::clock_ms();
        let mut asked = Vec::new();
        // Throttled replicas over the follower rate sit this round out.
        let throttle_wait = b.replication_throttle_delay(ThrottleSide::Follower);
        let mut held_back = false;
        let mut throttled = HashSet::new();
        for p in partitions {
            let Some(r) = p.replica() else { continue };
            // As Kafka's, only a replica out of the ISR is held back.
            if b.replication_throttled(&p, ThrottleSide::Follower) && !p.in_sync(b.node_id()) {
                if !throttle_wait.is_zero() {
                    held_back = true;
                    continue;
                }
                throttled.insert((p.topic_id, p.tp.partition.0));
            }
            match r.poll_fetch(now) {
                Some((l, req)) if l == leader => asked.push((p, r, req)),
                Some((_, req)) => r.on_fetch_error(req.fetch_id),
                None => {}
            }
        }
        if asked.is_empty() {
            drop(b);
            let idle = if held_back {
                throttle_wait.clamp(Duration::from_millis(1), Duration::from_secs(1))
            } else {
                Duration::from_secs(1)
            };
            let _ = tokio::time::timeout(idle, changed).await;
            continue;
        }
        let addr = match b.peer_addr(leader.0) {
            Ok(a) => a,
            Err(e) => {
                debug!(
                    leader = leader.0,
                    "replica fetcher cannot reach its leader: {e}"
                );
                for (_, r, req) in &asked {
                    r.on_fetch_error(req.fetch_id);
                }
                drop(b);
                let _ = tokio::time::timeout(backoff, changed).await;
                continue;
            }
        };
        let fetch = ReplicaFetch {
            replica: NodeId(b.node_id()),
            broker_epoch: b.registration_epoch(),
            max_wait_ms: config.int_value("replica.fetch.wait.max.ms").max(0) as i32,
            min_bytes: config.int_value("replica.fetch.min.bytes").max(1) as i32,
            max_bytes: config.int_value("replica.fetch.response.max.bytes").max(1) as i32,
            partitions: asked
                .iter()
                .map(|(p, _, req)| PartitionFetch {
                    topic_id: p.topic_id,
                    topic: p.tp.topic.to_string(),
                    partition: p.tp.partition.0,
                    request: req.clone(),
                    log_start_offset: p.log().log_start_offset(),
                    max_bytes: config.int_value("replica.fetch.max.bytes").max(1) as i32,
                })
                .collect(),
        };
        drop(b);
        let wait = Duration::from_millis(fetch.max_wait_ms as u64) + Duration::from_secs(30);
        let answers = match tokio::time::timeout(wait, link.fetch(addr.clone(), fetch)).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                debug!(leader = leader.0, "replica fetch from {addr} failed: {e}");
                fail_all(&asked);
                let _ = tokio::time::timeout(backoff, changed).await;
                continue;
            }
            Err(_) => {
                debug!(leader = leader.0, "replica fetch from {addr} timed out");
                fail_all(&asked);
                continue;
            }
        };
        if !throttled.is_empty() {
            let bytes: usize = answers
                .iter()
                .filter(|a| throttled.contains(&(a.topic_id, a.partition)))
                .map(|a| match &a.outcome {
                    Fetched::Records { records, .. } => records.len(),
                    _ => 0,
                })
                .sum();
            if let Some(b) = broker.upgrade() {
                b.record_throttled_replication(ThrottleSide::Follower, bytes);
            }
        }
        let errors = tokio::task::spawn_blocking(move || apply_answers(asked, answers))
            .await
            .unwrap_or(true);
        if errors {
            let _ = tokio::time::timeout(backoff, changed).await;
        }
    }
}

fn fail_all(asked: &[(Arc<Partition>, Arc<Replica>, FetchRequest)]) {
    for (_, r, req) in asked {
        r.on_fetch_error(req.fetch_id);
    }
}

/// Applies a leader's answers to the partitions asked; whether any was an
/// error (the fetcher backs off).
fn apply_answers(
    asked: Vec<(Arc<Partition>, Arc<Replica>, FetchRequest)>,
    answers: Vec<FetchedPartition>,
) -> bool {
    let mut by_key: HashMap<(TopicId, i32), Fetched> = answers
        .into_iter()
        .map(|a| ((a.topic_id, a.partition), a.outcome))
        .collect();
    let mut errors = false;
    for (p, r, req) in asked {
        let key = (p.topic_id, p.tp.partition.0);
        let applied = match by_key.remove(&key) {
            None => {
                r.on_fetch_error(req.fetch_id);
                errors = true;
                Ok(())
            }
            Some(Fetched::Records {
                records,
                high_watermark,
                log_start_offset,
            }) => r.on_fetched(
                req.fetch_id,
                req.leader_epoch,
                &records,
                (high_watermark, log_start_offset),
                crate::now_ms(),
            ),
            Some(Fetched::Diverging { epoch, end_offset }) => {
                info!(partition = %p.tp, epoch = epoch.0, end_offset = end_offset.0, "follower diverged from its leader; truncating");
                r.on_diverging(req.fetch_id, req.leader_epoch, epoch, end_offset)
            }
            Some(Fetched::OutOfRange { log_start_offset }) => {
                // Backed off: if the answer changes nothing (the follower
                // is past the leader's log end), the next fetch is not
                // sent at once.
                errors = true;
                r.on_out_of_range(req.fetch_id, req.leader_epoch, log_start_offset)
            }
            Some(Fetched::Error(why)) => {
                debug!(partition = %p.tp, "replica fetch refused: {why}");
                r.on_fetch_error(req.fetch_id);
                errors = true;
                Ok(())
            }
        };
        if let Err(e) = applied {
            warn!(partition = %p.tp, "could not apply what the leader sent: {e}");
            errors = true;
        }
        p.notify_appended();
    }
    errors
}

/// Carries leaders' AlterPartition requests to the active controller and
/// the answers back to their replicas. Each request is sent on its own,
/// so one slow answer holds up no other.
async fn run_alter_partition(broker: Weak<Broker>, mut rx: mpsc::UnboundedReceiver<AlterJob>) {
    while let Some(job) = rx.recv().await {
        let broker = broker.clone();
        tokio::spawn(async move {
            let Some(b) = broker.upgrade() else { return };
            let answer = b
                .alter_partition(job.topic_id, job.partition, &job.request)
                .await;
            let answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    // Resent by the replica's tick after its retry time.
                    debug!(
                        partition = job.partition,
                        "AlterPartition not answered: {e}"
                    );
                    return;
                }
            };
            let Some(p) = b.hosted_partition(job.topic_id, job.partition) else {
                return;
            };
            let Some(r) = p.replica() else { return };
            let _ = tokio::task::spawn_blocking(move || {
                let result = answer.as_ref().map_err(|e| e.clone());
                match r.on_alter_partition_response(job.id, result, super::clock_ms()) {
                    Ok(fx) => p.settle(fx),
                    Err(e) => warn!(partition = %p.tp, "AlterPartition answer not applied: {e}"),
                }
                if let Err(why) = &answer {
                    debug!(partition = %p.tp, "AlterPartition refused: {why}");
                }
            })
            .await;
        });
    }
}

/// Time for the leaders: followers behind for `replica.lag.time.max.ms`
/// are proposed out of the ISR, unanswered AlterPartitions resent.
/// Checked every quarter of that time (at most every 5 s, at least every
/// 100 ms), as Kafka checks ISR expiry periodically.
async fn run_tick(broker: Weak<Broker>) {
    loop {
        let period = {
            let Some(b) = broker.upgrade() else { return };
            let lag = b.config().int_value("replica.lag.time.max.ms").max(1) as u64;
            Duration::from_millis((lag / 4).clamp(100, 5_000))
        };
        tokio::time::sleep(period).await;
        let Some(b) = broker.upgrade() else { return };
        let partitions = b.replicated_partitions();
        drop(b);
        let now = super::clock_ms();
        for p in partitions {
            if let Some(r) = p.replica() {
                let fx: ReplicaEffects = r.tick(now);
                p.settle(fx);
            }
        }
    }
}
