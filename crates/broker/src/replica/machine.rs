//! One partition replica over its log: the state machines carried out
//! (see the module above).

use std::sync::Arc;

use magnetar_replication::{
    AlterPartitionRequest, BatchSpan, FetchAnswer, FollowerEffect, FollowerReplica, LeaderConfig,
    LeaderEffect, LeaderReplica, PartitionState as ReplicaPartitionState,
};
use model::{LeaderEpoch, NodeId, Offset, Timestamp};
use parking_lot::Mutex;
use storage::{BatchHeader, FileRegion, Log};

use magnetar_replication::{Acks, FetchRequest, ReplicationError};

pub use magnetar_metadata::leadership::replica_state;

/// The replicas' clock: milliseconds on a monotonic clock, so a wall
/// clock jump neither shrinks an ISR nor keeps a lagging follower in it.
pub(crate) fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}

/// What a replica's caller must do after an event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReplicaEffects {
    /// `acks=all` appends now committed: answer them with success.
    pub acked: Vec<u64>,
    /// `acks=all` appends committed while the ISR was below
    /// `min.insync.replicas` (NOT_ENOUGH_REPLICAS_AFTER_APPEND), or left
    /// unanswered by a leader that stepped down (NOT_LEADER_OR_FOLLOWER).
    pub failed: Vec<(u64, ReplicationError)>,
    /// AlterPartition requests to send to the active controller, with the
    /// id to pass back with the answer.
    pub alter_partition: Vec<(u64, AlterPartitionRequest)>,
    /// The leader's high watermark, when it moved.
    pub high_watermark: Option<Offset>,
}

impl ReplicaEffects {
    fn leader(&mut self, log: &Log, effects: Vec<LeaderEffect>) -> Result<(), storage::Error> {
        for e in effects {
            match e {
                LeaderEffect::HighWatermark { hw, acked, failed } => {
                    log.set_high_watermark(Some(hw))?;
                    self.high_watermark = Some(hw);
                    self.acked.extend(acked);
                    self.failed.extend(
                        failed
                            .into_iter()
                            .map(|id| (id, ReplicationError::NotEnoughReplicasAfterAppend)),
                    );
                }
                LeaderEffect::AlterPartition { id, request } => {
                    self.alter_partition.push((id, request))
                }
            }
        }
        Ok(())
    }
}

/// What a leader sends back to a follower's fetch.
#[derive(Debug, Clone)]
pub enum ServedFetch {
    /// Whole batches from the follower's fetch offset (`None`: nothing
    /// new), with the leader's high watermark and log start.
    Records {
        /// Where the batches lie in their segment file.
        region: Option<FileRegion>,
        /// The leader's high watermark.
        high_watermark: Offset,
        /// The leader's log start offset.
        log_start_offset: Offset,
    },
    /// The leader's log no longer holds the fetch offset: it starts at
    /// `log_start_offset` (Fetch's OFFSET_OUT_OF_RANGE).
    OutOfRange {
        /// The leader's log start offset.
        log_start_offset: Offset,
    },
    /// The follower's last fetched epoch is not on the leader's log as it
    /// has it: the largest epoch not above it ends at `end_offset` here
    /// (Fetch v12+'s diverging epoch).
    Diverging {
        /// That epoch.
        epoch: LeaderEpoch,
        /// Where it ends on the leader.
        end_offset: Offset,
        /// The leader's high watermark.
        high_watermark: Offset,
    },
}

/// The errors of a replica: the state machines' refusals and the log's.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// Refused by the replication logic (not leader, fenced or unknown
    /// epoch, not enough replicas…).
    #[error(transparent)]
    Replication(#[from] ReplicationError),
    /// The log failed.
    #[error(transparent)]
    Storage(#[from] storage::Error),
}

#[derive(Debug)]
enum Role {
    /// Not a replica, or its partition has no leader.
    Idle,
    Leader(LeaderReplica),
    Follower(FollowerReplica),
}

/// This broker's replica of one partition.
#[derive(Debug)]
pub struct Replica {
    node: NodeId,
    log: Arc<Log>,
    config: LeaderConfig,
    fetch_timeout_ms: u64,
    role: Mutex<Role>,
    /// Fetch ids of a follower role that is replaced start past those of
    /// the one before, so a late answer to the old one is never taken.
    next_fetch_id: Mutex<u64>,
}

impl Replica {
    /// A replica on `node` over `log`, idle until [`Replica::apply_state`].
    pub fn new(node: NodeId, log: Arc<Log>, config: LeaderConfig, fetch_timeout_ms: u64) -> Self {
        Replica {
            node,
            log,
            config,
            fetch_timeout_ms,
            role: Mutex::new(Role::Idle),
            next_fetch_id: Mutex::new(0),
        }
    }

    /// The log.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Follows the partition's state as the metadata has it: leads it when
    /// it names this node leader (a new epoch starts at the log end; the
    /// same epoch takes the new ISR and partition epoch), follows its
    /// leader when this node is another replica, idles otherwise. A leader
    /// that steps down fails the `acks=all` appends it still held.
    pub fn apply_state(
        &self,
        state: &ReplicaPartitionState,
        now: u64,
    ) -> Result<ReplicaEffects, ReplicaError> {
        let mut fx = ReplicaEffects::default();
        let mut role = self.role.lock();
        if state.leader == Some(self.node) {
            if let Role::Leader(l) = &mut *role {
                if l.leader_epoch() == state.leader_epoch {
                    let effects = l.on_partition_update(state, now);
                    fx.leader(&self.log, effects)?;
                    return Ok(fx);
                }
            }
            self.step_down(&mut role, &mut fx);
            // A log replicated for the first time had one replica, in sync
            // with itself: everything in it is committed. Otherwise the
            // high watermark is the one kept with the log (checkpointed
            // from its first setting on, so never too high after a crash).
            let config = LeaderConfig {
                min_insync_replicas: self.log.min_insync_replicas() as usize,
                ..self.config
            };
            let leader = LeaderReplica::new(
                self.node,
                config,
                state,
                self.log.log_end_offset(),
                self.log.high_watermark(),
                self.log.epoch_history(),
                now,
            )?;
            self.log.set_high_watermark(Some(leader.high_watermark()))?;
            fx.high_watermark = Some(leader.high_watermark());
            *role = Role::Leader(leader);
            return Ok(fx);
        }
        if !state.replicas.contains(&self.node) {
            self.step_down(&mut role, &mut fx);
            *role = Role::Idle;
            return Ok(fx);
        }
        if let Role::Follower(f) = &mut *role {
            f.on_leader_change(state.leader, state.leader_epoch);
            return Ok(fx);
        }
        self.step_down(&mut role, &mut fx);
        if !self.log.is_replicated() {
            // Learned from the leader, never assumed.
            self.log
                .set_high_watermark(Some(self.log.log_start_offset()))?;
        }
        let mut follower = self.follower_from_log();
        follower.on_leader_change(state.leader, state.leader_epoch);
        *role = Role::Follower(follower);
        Ok(fx)
    }

    fn step_down(&self, role: &mut Role, fx: &mut ReplicaEffects) {
        if let Role::Leader(l) = std::mem::replace(role, Role::Idle) {
            fx.failed.extend(
                l.resign()
                    .into_iter()
                    .map(|id| (id, ReplicationError::NotLeader)),
            );
        }
    }

    /// Starts `f` again over the log as it is now, following the same
    /// leader in the same epoch (its view and the log parted).
    fn restart_follower(&self, f: &mut FollowerReplica) {
        let mut again = self.follower_from_log();
        again.on_leader_change(f.leader(), f.leader_epoch());
        *f = again;
    }

    /// A follower state over the log as it is now.
    fn follower_from_log(&self) -> FollowerReplica {
        let mut next = self.next_fetch_id.lock();
        let first = *next;
        // Room for the fetches of one role; the next starts past them.
        *next += 1 << 32;
        FollowerReplica::new(
            self.node,
            self.log.log_end_offset(),
            self.log.high_watermark(),
            self.log.epoch_history(),
            self.fetch_timeout_ms,
            first,
        )
    }

    /// The leader this replica fetches from, when it follows one.
    pub fn following(&self) -> Option<NodeId> {
        match &*self.role.lock() {
            Role::Follower(f) => f.leader(),
            _ => None,
        }
    }

    /// The leader epoch a write as leader is made in: this replica's, if
    /// it leads and is not fenced.
    pub fn leading_epoch(&self) -> Option<LeaderEpoch> {
        match &*self.role.lock() {
            Role::Leader(l) if !l.is_fenced() => Some(l.leader_epoch()),
            _ => None,
        }
    }

    /// Whether this replica leads its partition.
    pub fn is_leader(&self) -> bool {
        matches!(*self.role.lock(), Role::Leader(_))
    }

    /// Checks, before an append as leader, that it may be made: this
    /// replica leads, and for `acks=all` the ISR has at least
    /// `min.insync.replicas` members (NOT_ENOUGH_REPLICAS otherwise).
    pub fn check_append(&self, acks: Acks) -> Result<(), ReplicationError> {
        match &*self.role.lock() {
            Role::Leader(l) if l.is_fenced() => Err(ReplicationError::NotLeader),
            Role::Leader(l) => {
                // The log's, as it is now: a topic's min.insync.replicas
                // may change while this replica leads.
                let min = self.log.min_insync_replicas() as usize;
                if acks == Acks::All && l.isr().len() < min {
                    return Err(ReplicationError::NotEnoughReplicas {
                        isr: l.isr().len(),
                        min,
                    });
                }
                Ok(())
            }
            _ => Err(ReplicationError::NotLeader),
        }
    }

    /// The leader appended `[first, next)` to its log (for a producer
    /// that asked `acks`, as `request`). Returns whether the producer may
    /// be answered now (acks=1; acks=all waits for
    /// [`ReplicaEffects::acked`]), and what follows.
    pub fn leader_appended(
        &self,
        first: Offset,
        next: Offset,
        acks: Acks,
        request: u64,
        now: u64,
    ) -> Result<(bool, ReplicaEffects), ReplicaError> {
        let mut role = self.role.lock();
        let Role::Leader(l) = &mut *role else {
            return Err(ReplicationError::NotLeader.into());
        };
        if first != l.log_end() {
            // Something wrote to the log past the leader's view: it
            // cannot vouch for those records.
            return Err(ReplicationError::InvalidRequest(
                "append does not continue the leader's log",
            )
            .into());
        }
        let appended = l.append((next.0 - first.0) as u64, acks, request, now)?;
        let mut fx = ReplicaEffects::default();
        fx.leader(&self.log, appended.effects)?;
        Ok((appended.answered, fx))
    }

    /// Answers a follower's fetch as leader: checks its epochs, records
    /// its progress (perhaps moving the high watermark or proposing it
    /// for the ISR) and finds up to `max_bytes` of whole batches from its
    /// fetch offset, up to the log end (at least one if `max_bytes` is not
    /// zero; none if it is: a throttled replica over its rate).
    pub fn serve_fetch(
        &self,
        req: &FetchRequest,
        max_bytes: usize,
        now: u64,
    ) -> Result<(ServedFetch, ReplicaEffects), ReplicaError> {
        let mut role = self.role.lock();
        let Role::Leader(l) = &mut *role else {
            return Err(ReplicationError::NotLeader.into());
        };
        let (answer, effects) = l.fetch_from_follower(req, now)?;
        let mut fx = ReplicaEffects::default();
        fx.leader(&self.log, effects)?;
        let served = match answer {
            FetchAnswer::Records { from, hw, .. } => {
                match self.log.read_region_to_end(from, max_bytes, max_bytes > 0) {
                    Ok(read) => ServedFetch::Records {
                        region: read.region,
                        high_watermark: hw,
                        log_start_offset: read.log_start_offset,
                    },
                    Err(storage::Error::OffsetOutOfRange {
                        log_start_offset, ..
                    }) if from < log_start_offset => ServedFetch::OutOfRange { log_start_offset },
                    Err(e) => return Err(e.into()),
                }
            }
            FetchAnswer::Diverging {
                epoch,
                end_offset,
                hw,
            } => ServedFetch::Diverging {
                epoch,
                end_offset,
                high_watermark: hw,
            },
        };
        Ok((served, fx))
    }

    /// Time passes: a leader proposes to shrink the ISR of followers that
    /// fell behind, and resends an unanswered AlterPartition.
    pub fn tick(&self, now: u64) -> ReplicaEffects {
        let mut fx = ReplicaEffects::default();
        if let Role::Leader(l) = &mut *self.role.lock() {
            for e in l.tick(now) {
                if let LeaderEffect::AlterPartition { id, request } = e {
                    fx.alter_partition.push((id, request));
                }
            }
        }
        fx
    }

    /// The controller's answer to AlterPartition `id`: the partition's new
    /// state, or why it was refused.
    pub fn on_alter_partition_response(
        &self,
        id: u64,
        result: Result<&ReplicaPartitionState, ReplicationError>,
        now: u64,
    ) -> Result<ReplicaEffects, ReplicaError> {
        let mut fx = ReplicaEffects::default();
        if let Role::Leader(l) = &mut *self.role.lock() {
            let effects = l.on_alter_partition_response(id, result, now);
            fx.leader(&self.log, effects)?;
        }
        Ok(fx)
    }

    /// The fetch a follower should send now, and to which leader.
    pub fn poll_fetch(&self, now: u64) -> Option<(NodeId, FetchRequest)> {
        match &mut *self.role.lock() {
            Role::Follower(f) => f.poll_fetch(now),
            _ => None,
        }
    }

    /// The leader's answer to fetch `fetch_id`: `records` (whole batches,
    /// a trailing partial batch is dropped as Kafka's fetchers drop it),
    /// its high watermark and its log start. Appended as they are, the
    /// high watermark learned and the log start followed (up to what is
    /// committed here); an answer to an older fetch or leader epoch is
    /// ignored.
    pub fn on_fetched(
        &self,
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        records: &[u8],
        (leader_hw, leader_log_start): (Offset, Offset),
        now: Timestamp,
    ) -> Result<(), ReplicaError> {
        let (spans, whole) = spans_of(records);
        let mut role = self.role.lock();
        let Role::Follower(f) = &mut *role else {
            return Ok(());
        };
        let end = self.log.log_end_offset();
        if let Some(first) = spans.first() {
            if first.base < end && first.next > end && self.log.log_start_offset() == end {
                // An empty log started inside the leader's batch (at a log
                // start DeleteRecords set mid-batch): it starts again at
                // the batch, as Kafka's fetchers do, and fetches it whole.
                self.log.truncate_fully_and_start_at(first.base)?;
                self.restart_follower(f);
                return Ok(());
            }
        }
        for e in f.on_fetch_batches(fetch_id, leader_epoch, &spans, leader_hw) {
            if let FollowerEffect::Append { .. } = e {
                let appended = self
                    .log
                    .append_as_follower(&records[..whole], now)
                    .and_then(|(_, work)| self.log.complete(work));
                if let Err(err) = appended {
                    // The follower's view moved on; start again from the log.
                    self.restart_follower(f);
                    return Err(err.into());
                }
            }
        }
        let readable = f.readable_end();
        self.log.set_high_watermark(Some(readable))?;
        // The leader's log start moved (DeleteRecords, retention): so does
        // this copy's, as far as it is committed here, so that records
        // deleted on the leader do not come back with a failover.
        let start = leader_log_start.min(readable);
        if start > self.log.log_start_offset() {
            self.log.delete_records_before(start)?;
        }
        Ok(())
    }

    /// The leader answered fetch `fetch_id` with a diverging epoch: cut
    /// the log back where the follower's and the leader's part.
    pub fn on_diverging(
        &self,
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
        end_offset: Offset,
    ) -> Result<(), ReplicaError> {
        let mut role = self.role.lock();
        let Role::Follower(f) = &mut *role else {
            return Ok(());
        };
        for e in f.on_fetch_diverging(fetch_id, leader_epoch, epoch, end_offset) {
            if let FollowerEffect::Truncate { to } = e {
                let end = self.log.truncate_to(to)?;
                if end != to {
                    // Cut at a batch boundary below `to`: the follower's
                    // view follows the log.
                    self.restart_follower(f);
                }
            }
        }
        self.log.set_high_watermark(Some(f.readable_end()))?;
        Ok(())
    }

    /// The leader answered fetch `fetch_id` that its log now starts at
    /// `leader_log_start`: a log ending before that is emptied to start
    /// there.
    pub fn on_out_of_range(
        &self,
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        leader_log_start: Offset,
    ) -> Result<(), ReplicaError> {
        let mut role = self.role.lock();
        let Role::Follower(f) = &mut *role else {
            return Ok(());
        };
        for e in f.on_fetch_out_of_range(fetch_id, leader_epoch, leader_log_start) {
            if let FollowerEffect::StartAt { offset } = e {
                self.log.truncate_fully_and_start_at(offset)?;
            }
        }
        self.log.set_high_watermark(Some(f.readable_end()))?;
        Ok(())
    }

    /// Fetch `fetch_id` failed or was refused: the next poll fetches again.
    pub fn on_fetch_error(&self, fetch_id: u64) {
        if let Role::Follower(f) = &mut *self.role.lock() {
            f.on_fetch_error(fetch_id);
        }
    }
}

/// The spans of the whole batches at the start of `records`, and how many
/// bytes they take (a fetch answer may end with part of a batch).
fn spans_of(records: &[u8]) -> (Vec<BatchSpan>, usize) {
    let mut spans = Vec::new();
    let mut at = 0;
    while let Ok(h) = BatchHeader::parse(&records[at..]) {
        let size = h.total_size();
        if size > records.len() - at {
            break;
        }
        spans.push(BatchSpan {
            base: h.base_offset,
            next: h.next_offset(),
            epoch: h.partition_leader_epoch,
        });
        at += size;
    }
    (spans, at)
}
