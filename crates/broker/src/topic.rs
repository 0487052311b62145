//! Topics and partitions: the broker's view of the logs it serves, and
//! how they are built from the metadata's topic records.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use magnetar_metadata::tenancy::{self, Tenants};
use model::{
    LeaderEpoch, Offset, PartitionId, ProducerEpoch, ProducerId, Timestamp, TopicId, TopicName,
    TopicPartition,
};
use parking_lot::{Mutex, RwLock};
use storage::{AppendOutcome, Log, LogSpec, ReadResult, SyncWork};
use tokio::sync::Notify;

use crate::config::{BrokerConfig, TopicConfig, TopicKind};
use crate::metadata_records::PartitionState;
use crate::metadata_store::TopicRecord;
use crate::topic_control::NewTopic;
use crate::traffic::Traffic;
use crate::Error;

/// A topic and its partitions. Immutable; a change (more partitions, new
/// configs) publishes a new `Topic` value.
#[derive(Debug)]
pub struct Topic {
    /// Name.
    pub name: TopicName,
    /// Permanent id.
    pub id: TopicId,
    /// Partitioned or non-partitioned.
    pub kind: TopicKind,
    /// Config overrides.
    pub config: TopicConfig,
    /// Every partition's replicas and leader, in index order (all of the
    /// topic's partitions, wherever they are).
    pub placements: Vec<PartitionState>,
    /// The partitions this broker holds a replica of, in index order (on a
    /// single node: all of them).
    pub partitions: Vec<Arc<Partition>>,
}

impl Topic {
    /// [`Error::InternalTopic`] for a topic only the broker writes
    /// (`__consumer_offsets`); clients of any protocol are refused.
    pub fn ensure_client_writable(&self) -> Result<(), Error> {
        if self.name.is_internal() {
            return Err(Error::InternalTopic(self.name.to_string()));
        }
        Ok(())
    }

    /// How many partitions the topic has (on any broker).
    pub fn partition_count(&self) -> usize {
        self.placements.len()
    }

    /// Whether the topic has partition `p` (on any broker).
    pub fn has_partition(&self, p: PartitionId) -> bool {
        usize::try_from(p.0).is_ok_and(|i| i < self.placements.len())
    }

    /// Partition `p` of this broker: [`Error::UnknownPartition`] if the
    /// topic has no such partition, [`Error::PartitionNotHosted`] if
    /// another broker holds it.
    pub fn partition(&self, p: PartitionId) -> Result<&Arc<Partition>, Error> {
        let index = usize::try_from(p.0).ok();
        let Some(state) = index.and_then(|i| self.placements.get(i)) else {
            return Err(Error::UnknownPartition {
                topic: self.name.to_string(),
                partition: p,
            });
        };
        // Hosted partitions are in index order: a binary search by index.
        match self
            .partitions
            .binary_search_by_key(&p.0, |x| x.tp.partition.0)
        {
            Ok(i) if self.partitions[i].leads() => Ok(&self.partitions[i]),
            _ => Err(Error::PartitionNotHosted {
                topic: self.name.to_string(),
                partition: p,
                leader: state.leader,
            }),
        }
    }

    /// This broker's replica of partition `p`, led here or not (a
    /// follower's log, for replication).
    pub fn hosted_partition(&self, p: PartitionId) -> Option<&Arc<Partition>> {
        self.partitions
            .binary_search_by_key(&p.0, |x| x.tp.partition.0)
            .ok()
            .map(|i| &self.partitions[i])
    }
}

/// One partition: its log and the waiters for new data.
#[derive(Debug)]
pub struct Partition {
    /// Which partition.
    pub tp: TopicPartition,
    /// The owning topic's id.
    pub topic_id: TopicId,
    log: Arc<Log>,
    appended: Notify,
    traffic: Traffic,
    producers: AtomicUsize,
    state: RwLock<PartitionState>,
    /// Transactional producers being checked with (or cleared by) their
    /// coordinator on another broker before their first append here;
    /// held across such an append and across a marker's write, which
    /// clears its producer's guard (see
    /// [`crate::Broker::verify_transactional_appends`]).
    txn_guards: Mutex<std::collections::HashMap<ProducerId, TxnGuard>>,
    /// Its replica, when it has more than one (see [`crate::replica`]).
    pub(crate) replication: crate::replica::PartitionReplication,
}

/// A transactional producer's check with its coordinator (KIP-890's
/// verification guard).
#[derive(Debug, Clone, Copy)]
struct TxnGuard {
    epoch: ProducerEpoch,
    token: u64,
    verified: bool,
}

/// A producer counted as attached to a partition until this is dropped
/// (see [`Partition::attach_producer`]).
#[derive(Debug)]
pub struct ProducerAttachment(Arc<Partition>);

impl Drop for ProducerAttachment {
    fn drop(&mut self) {
        self.0.producers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Partition {
    pub(crate) fn new(
        tp: TopicPartition,
        topic_id: TopicId,
        log: Arc<Log>,
        state: PartitionState,
    ) -> Partition {
        Partition {
            tp,
            topic_id,
            log,
            appended: Notify::new(),
            traffic: Traffic::default(),
            producers: AtomicUsize::new(0),
            state: RwLock::new(state),
            txn_guards: Mutex::new(std::collections::HashMap::new()),
            replication: Default::default(),
        }
    }

    /// Whether `producer` has a transaction open here at `epoch`.
    pub fn txn_open(&self, producer: ProducerId, epoch: ProducerEpoch) -> bool {
        self.log
            .producer_state(producer)
            .is_some_and(|e| e.epoch == epoch && e.txn_first_offset.is_some())
    }

    /// Starts checking `producer`'s transaction with its coordinator.
    pub(crate) fn begin_txn_verification(
        &self,
        producer: ProducerId,
        epoch: ProducerEpoch,
        token: u64,
    ) {
        let guard = TxnGuard {
            epoch,
            token,
            verified: false,
        };
        self.txn_guards.lock().insert(producer, guard);
    }

    /// The coordinator said yes: true if no marker (or later check) came
    /// in between, so the producer's next append here is let in.
    pub(crate) fn finish_txn_verification(&self, producer: ProducerId, token: u64) -> bool {
        match self.txn_guards.lock().get_mut(&producer) {
            Some(g) if g.token == token => {
                g.verified = true;
                true
            }
            _ => false,
        }
    }

    /// The check failed (or was never answered): forgets it, unless a later
    /// one replaced it.
    pub(crate) fn abandon_txn_verification(&self, producer: ProducerId, token: u64) {
        let mut guards = self.txn_guards.lock();
        if guards.get(&producer).is_some_and(|g| g.token == token) {
            guards.remove(&producer);
        }
    }

    /// How many checks with a coordinator are outstanding or unused.
    #[cfg(test)]
    pub(crate) fn txn_guards(&self) -> usize {
        self.txn_guards.lock().len()
    }

    /// Appends transactional batches of `producer` at `epoch` whose
    /// coordinator is on another broker, if it has a transaction open here
    /// at that epoch or was just verified for one; otherwise refuses them
    /// as not in a transaction (INVALID_TXN_STATE).
    pub(crate) fn append_verified_elsewhere(
        &self,
        producer: ProducerId,
        epoch: ProducerEpoch,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<(AppendOutcome, SyncWork), Error> {
        let mut guards = self.txn_guards.lock();
        let verified = guards
            .get(&producer)
            .is_some_and(|g| g.verified && g.epoch == epoch);
        if !verified && !self.txn_open(producer, epoch) {
            return Err(crate::txn::TxnError::InvalidTxnState(format!(
                "{} is not in an open transaction of producer {} at epoch {}",
                self.tp, producer.0, epoch.0
            ))
            .into());
        }
        let out = self.append_transactional_deferred(batches, now);
        if verified {
            // Used once: the transaction is open here now (its marker
            // closes it), or the append failed and a retry is checked again.
            guards.remove(&producer);
        }
        out
    }

    /// Its replicas, in-sync replicas, leader and epochs.
    pub fn state(&self) -> PartitionState {
        self.state.read().clone()
    }

    /// A new placement applied from the metadata.
    pub(crate) fn set_state(&self, state: PartitionState) {
        *self.state.write() = state;
    }

    /// Counts a producer of a front end as attached until the returned
    /// value is dropped, so that a topic in use is not deleted without
    /// force.
    pub fn attach_producer(self: &Arc<Self>) -> ProducerAttachment {
        self.producers.fetch_add(1, Ordering::Relaxed);
        ProducerAttachment(self.clone())
    }

    /// How many producers are attached.
    pub fn producer_count(&self) -> usize {
        self.producers.load(Ordering::Relaxed)
    }

    /// The partition's log.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// What came in and went out since the partition was opened; front
    /// ends count their deliveries with [`Traffic::record_out`].
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        LeaderEpoch(self.state.read().leader_epoch)
    }

    /// Whether broker `node` is in the partition's ISR as the metadata
    /// has it.
    pub fn in_sync(&self, node: i32) -> bool {
        self.state.read().isr.contains(&node)
    }

    /// The replicas in sync with the leader, the leader included: this
    /// node alone for a partition with one replica.
    pub fn in_sync_replicas(&self) -> usize {
        if self.replica().is_some() {
            self.state.read().isr.len()
        } else {
            1
        }
    }

    /// [`Error::NotEnoughReplicas`] when an `acks=all` write would have
    /// fewer in-sync replicas than the log's `min.insync.replicas`, as Kafka
    /// refuses it (before appending); NOT_LEADER_OR_FOLLOWER on a follower.
    pub fn check_min_insync(&self) -> Result<(), Error> {
        if let Some(r) = self.replica() {
            return r
                .check_append(magnetar_replication::Acks::All)
                .map_err(|e| self.replication_error(e));
        }
        let required = self.log.min_insync_replicas();
        let in_sync = self.in_sync_replicas();
        if (in_sync as u64) < u64::from(required) {
            return Err(Error::NotEnoughReplicas {
                partition: self.tp.to_string(),
                in_sync,
                required,
            });
        }
        Ok(())
    }

    /// Appends producer batches (validated, offsets assigned by the log) and
    /// wakes fetchers waiting for data.
    pub fn append(&self, batches: &[u8], now: Timestamp) -> Result<AppendOutcome, Error> {
        self.leader_write(|epoch| {
            let out = self
                .log
                .append(batches, epoch, now)
                .map_err(|e| self.storage_error(e))?;
            if let AppendOutcome::Appended(info) = &out {
                self.traffic
                    .record_in(info.record_count, batches.len() as u64);
                self.appended.notify_waiters();
            }
            Ok(out)
        })
    }

    /// [`Partition::append`] with the storage error as it is, for the
    /// group coordinator's own log (one replica: no leader to check).
    pub(crate) fn append_storage(
        &self,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<AppendOutcome, storage::Error> {
        self.append_storage_raw(batches, self.leader_epoch(), now)
    }

    /// [`Partition::append_storage`] in leader epoch `epoch`, inside
    /// [`Partition::leader_write`] (a replicated group log's slot).
    pub(crate) fn append_storage_in(
        &self,
        batches: &[u8],
        epoch: model::LeaderEpoch,
        now: Timestamp,
    ) -> Result<AppendOutcome, Error> {
        self.append_storage_raw(batches, epoch, now)
            .map_err(|e| self.storage_error(e))
    }

    fn append_storage_raw(
        &self,
        batches: &[u8],
        epoch: model::LeaderEpoch,
        now: Timestamp,
    ) -> Result<AppendOutcome, storage::Error> {
        let out = self.log.append(batches, epoch, now)?;
        if let AppendOutcome::Appended(info) = &out {
            self.traffic
                .record_in(info.record_count, batches.len() as u64);
            self.appended.notify_waiters();
        }
        Ok(out)
    }

    /// [`Partition::append`] leaving the disk work it causes to the caller
    /// (see [`storage::Log::append_deferred`]).
    pub fn append_deferred(
        &self,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<(AppendOutcome, storage::SyncWork), Error> {
        self.leader_write(|epoch| {
            let out = self.log.append_deferred(batches, epoch, now);
            self.note_append(out, batches.len())
        })
    }

    /// [`Partition::append_deferred`] for transactional batches whose
    /// producer has this partition in its ongoing transaction (the caller
    /// checked with the transaction coordinator).
    pub fn append_transactional_deferred(
        &self,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<(AppendOutcome, storage::SyncWork), Error> {
        self.leader_write(|epoch| {
            let out = self.log.append_transactional_deferred(batches, epoch, now);
            self.note_append(out, batches.len())
        })
    }

    /// Counts an append's traffic and wakes fetchers waiting for data.
    fn note_append(
        &self,
        out: Result<(AppendOutcome, storage::SyncWork), storage::Error>,
        bytes: usize,
    ) -> Result<(AppendOutcome, storage::SyncWork), Error> {
        let out = out.map_err(|e| self.storage_error(e))?;
        if let AppendOutcome::Appended(info) = &out.0 {
            self.traffic.record_in(info.record_count, bytes as u64);
            self.appended.notify_waiters();
        }
        Ok(out)
    }

    /// Wakes whoever waits for new data or a new high watermark.
    pub(crate) fn notify_appended(&self) {
        self.appended.notify_waiters();
    }

    /// Ends the marker's producer's transaction here: writes the marker
    /// (see [`storage::Log::write_marker`]) if that producer has one open
    /// and `check` (given its epoch in the log) allows it, and wakes
    /// fetchers, as the last stable offset may have moved; `None` when none
    /// is open. Either way a check with the coordinator in flight for that
    /// producer is cancelled: its answer was about the transaction this
    /// ends, even when no batch of it got here yet.
    pub fn write_marker_if_open(
        &self,
        marker: &storage::txn::TxnMarker,
        now: Timestamp,
        check: impl FnOnce(ProducerEpoch) -> Result<(), Error>,
    ) -> Result<Option<storage::SyncWork>, Error> {
        let mut guards = self.txn_guards.lock();
        guards.remove(&marker.producer_id);
        let open = self
            .log
            .producer_state(marker.producer_id)
            .filter(|e| e.txn_first_offset.is_some());
        let Some(open) = open else {
            return Ok(None);
        };
        check(open.epoch)?;
        let (_, work) = self.leader_write(|epoch| {
            self.log
                .write_marker(marker, epoch, now)
                .map_err(|e| self.storage_error(e))
        })?;
        drop(guards);
        self.appended.notify_waiters();
        Ok(Some(work))
    }

    /// Reads whole batches from `offset`.
    pub fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<ReadResult, Error> {
        self.log
            .read(offset, max_bytes, min_one)
            .map_err(|e| self.storage_error(e))
    }

    /// Where the batches [`Partition::read`] would return lie in their
    /// segment file, without reading them.
    pub fn read_region(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<storage::RegionRead, Error> {
        self.read_region_isolated(offset, max_bytes, min_one, false)
    }

    /// [`Partition::read_region`]; `read_committed` stops at the last
    /// stable offset.
    pub fn read_region_isolated(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one: bool,
        read_committed: bool,
    ) -> Result<storage::RegionRead, Error> {
        self.log
            .read_region_isolated(offset, max_bytes, min_one, read_committed)
            .map_err(|e| self.storage_error(e))
    }

    /// Waits until the high watermark is past `offset` (a record at or
    /// after `offset` is readable by consumers: on a partition with one
    /// replica, exists) or `deadline` passes; true if it is. The
    /// long-poll primitive of every front end: Kafka's Fetch waits with the
    /// log end it last saw, a Pulsar dispatcher with its read position.
    pub async fn wait_for(&self, offset: Offset, deadline: tokio::time::Instant) -> bool {
        self.wait_until(deadline, |log| log.high_watermark() > offset)
            .await
    }

    /// [`Partition::wait_for`] for a follower's fetch: until the log end
    /// (not the high watermark) is past `offset`.
    pub async fn wait_for_log_end(&self, offset: Offset, deadline: tokio::time::Instant) -> bool {
        self.wait_until(deadline, |log| log.log_end_offset() > offset)
            .await
    }

    /// Waits, woken by appends and high watermark moves, until `ready`
    /// holds for the log or `deadline` passes; whether it holds.
    async fn wait_until(
        &self,
        deadline: tokio::time::Instant,
        ready: impl Fn(&Log) -> bool,
    ) -> bool {
        loop {
            // Registered before the check, so an append in between is seen.
            let notified = self.appended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready(&self.log) {
                return true;
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline) => return ready(&self.log),
            }
        }
    }

    /// Wraps a storage error with this partition's name.
    pub fn storage_error(&self, source: storage::Error) -> Error {
        Error::Storage {
            partition: self.tp.to_string(),
            source,
        }
    }
}

/// Runs what the appends left for the disk on the blocking pool: flushes a
/// policy requires are awaited, the rest (fsyncs after rolls) goes on in
/// the background. Failures are logged; the data is in the page cache and
/// a later flush or recovery covers it. Returns how long the required
/// flushes were waited for (`None` when none was required), for metrics.
pub async fn complete_disk_work(
    work: Vec<(Arc<Partition>, SyncWork)>,
) -> Option<std::time::Duration> {
    let (required, background): (Vec<_>, Vec<_>) =
        work.into_iter().partition(|(_, w)| w.flush_required());
    let run = |items: Vec<(Arc<Partition>, SyncWork)>| {
        move || {
            for (p, w) in items {
                if let Err(e) = p.log().complete(w) {
                    tracing::warn!("flushing {} failed: {e}", p.tp);
                }
            }
        }
    };
    if !background.is_empty() {
        drop(tokio::task::spawn_blocking(run(background)));
    }
    if required.is_empty() {
        return None;
    }
    let started = std::time::Instant::now();
    let _ = tokio::task::spawn_blocking(run(required)).await;
    Some(started.elapsed())
}

/// What a validate-only creation answers: the topic as asked, no id, no
/// partitions.
pub(crate) fn validated_only(req: NewTopic) -> Arc<Topic> {
    Arc::new(Topic {
        name: req.name,
        id: TopicId::ZERO,
        kind: req.kind,
        config: req.config,
        placements: Vec::new(),
        partitions: Vec::new(),
    })
}

/// The logs of `rec`'s partitions in `range`.
pub(crate) fn partition_specs(
    rec: &TopicRecord,
    tenants: &Tenants,
    config: &BrokerConfig,
    range: std::ops::Range<i32>,
) -> Vec<LogSpec> {
    let log_config = tenancy::log_config(tenants, config, &rec.name, &rec.config);
    range
        .map(|p| LogSpec {
            topic_partition: TopicPartition::new(rec.name.clone(), PartitionId(p)),
            topic_id: rec.id,
            config: log_config.clone(),
        })
        .collect()
}

/// Partitions over opened logs; the first failure names its partition.
pub(crate) fn into_partitions(
    opened: Vec<Result<Arc<storage::Log>, storage::Error>>,
    specs: Vec<LogSpec>,
    states: Vec<PartitionState>,
) -> Result<Vec<Arc<Partition>>, Error> {
    opened
        .into_iter()
        .zip(specs)
        .zip(states)
        .map(|((log, spec), state)| {
            let tp = spec.topic_partition;
            match log {
                Ok(log) => Ok(Arc::new(Partition::new(tp, spec.topic_id, log, state))),
                Err(source) => Err(Error::Storage {
                    partition: tp.to_string(),
                    source,
                }),
            }
        })
        .collect()
}

pub(crate) fn topic_from(rec: &TopicRecord, partitions: Vec<Arc<Partition>>) -> Topic {
    Topic {
        name: rec.name.clone(),
        id: rec.id,
        kind: rec.kind,
        config: rec.config.clone(),
        placements: rec.placements.clone(),
        partitions,
    }
}
