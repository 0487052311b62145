//! A hosted partition's replication: the [`Replica`] of a partition with
//! more than one replica, the order its leader's appends are told to it
//! in, and the purgatory of `acks=all` producers waiting for the high
//! watermark to pass their records (keyed by offset, completed when the
//! leader's high watermark moves: no polling).
//!
//! Every write to a partition (producer batches of any front end,
//! transaction markers) goes through [`Partition::leader_write`], so a
//! replicated leader's state machine sees every record, in order, and a
//! follower refuses writes.

use std::sync::Arc;

use magnetar_replication::{Acks, ReplicationError};
use model::{LeaderEpoch, Offset};
use tokio::sync::oneshot;

use super::machine::{Replica, ReplicaEffects};
use super::slot::{AlterJob, Replicated, Waiter};
use crate::topic::Partition;
use crate::Error;

/// A registered wait for records to be committed
/// ([`Partition::commit_wait`]).
#[derive(Debug)]
pub enum CommitWait {
    /// Known when registered.
    Done(Result<(), Error>),
    /// Waiting in the purgatory for the records before `next`.
    Waiting {
        /// The offset the high watermark must reach.
        next: Offset,
        /// Completed by the purgatory.
        rx: oneshot::Receiver<Result<(), ReplicationError>>,
    },
}

impl Partition {
    /// The replica of a partition with more than one replica (`None` for
    /// one with a single replica, which needs none).
    pub fn replica(&self) -> Option<Arc<Replica>> {
        self.replication
            .replica
            .read()
            .as_ref()
            .map(|r| r.replica.clone())
    }

    /// Gives the partition its replica (once), with where its
    /// AlterPartition requests go.
    pub(crate) fn ensure_replica(
        &self,
        make: impl FnOnce() -> Replica,
        alter: &tokio::sync::mpsc::UnboundedSender<AlterJob>,
    ) -> Arc<Replica> {
        let mut slot = self.replication.replica.write();
        slot.get_or_insert_with(|| Replicated {
            replica: Arc::new(make()),
            alter: alter.clone(),
        })
        .replica
        .clone()
    }

    /// Whether this broker takes writes and serves consumers for the
    /// partition: it leads it, or it is its only replica. A replicated
    /// partition whose replica is not made yet does neither.
    pub fn leads(&self) -> bool {
        match self.replica() {
            Some(r) => r.is_leader(),
            None => self.state().replicas.len() <= 1,
        }
    }

    /// Runs `f` while no write to the partition is under way (a role
    /// change takes effect between writes, never during one).
    pub(crate) fn between_writes<T>(&self, f: impl FnOnce() -> T) -> T {
        let _order = self.replication.write_order.lock();
        f()
    }

    /// Runs `write` as this partition's leader, in the leader epoch it
    /// passes: refused (NOT_LEADER_OR_FOLLOWER) on a follower; on a
    /// replicated leader the epoch is its replica's, and the records the
    /// write adds are told to the replica in log order.
    pub(crate) fn leader_write<T>(
        &self,
        write: impl FnOnce(LeaderEpoch) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let Some(replica) = self.replica() else {
            if !self.leads() {
                return Err(self.replication_error(ReplicationError::NotLeader));
            }
            return write(self.leader_epoch());
        };
        let _order = self.replication.write_order.lock();
        // Under the write order, so the role cannot change before the
        // write: the epoch stamped is the one the replica leads in.
        let epoch = replica
            .leading_epoch()
            .filter(|e| *e == self.leader_epoch())
            .ok_or_else(|| self.replication_error(ReplicationError::NotLeader))?;
        let before = self.log().log_end_offset();
        let out = write(epoch);
        let after = self.log().log_end_offset();
        if after > before {
            match replica.leader_appended(before, after, Acks::Leader, 0, super::clock_ms()) {
                Ok((_, fx)) => self.settle(fx),
                // The records are in the log but the leader's view lost
                // track (it stepped down in between): the producer is
                // told, and retries with whoever leads now.
                Err(e) => {
                    tracing::warn!(partition = %self.tp, "an append was not taken by the leader's replica: {e}");
                    return Err(self.replica_error(e));
                }
            }
        }
        out
    }

    /// Carries out what a replica event asks: completes `acks=all`
    /// producers the high watermark passed, wakes consumers waiting for
    /// it, sends AlterPartition requests.
    pub(crate) fn settle(&self, fx: ReplicaEffects) {
        if let Some(hw) = fx.high_watermark {
            self.complete_committed(hw);
            self.notify_appended();
        }
        if fx.alter_partition.is_empty() {
            return;
        }
        let Some(r) = self.replication.replica.read().clone() else {
            return;
        };
        for (id, request) in fx.alter_partition {
            let _ = r.alter.send(AlterJob {
                topic_id: self.topic_id,
                partition: self.tp.partition.0,
                id,
                request,
            });
        }
    }

    /// Completes the waiters the high watermark `hw` passed: committed,
    /// unless the ISR is below `min.insync.replicas` by now
    /// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka answers).
    fn complete_committed(&self, hw: Offset) {
        let done = {
            let mut p = self.replication.purgatory.lock();
            let later = p.split_off(&Offset(hw.0 + 1));
            std::mem::replace(&mut *p, later)
        };
        if done.is_empty() {
            return;
        }
        let verdict = match self.replica().map(|r| r.check_append(Acks::All)) {
            Some(Err(ReplicationError::NotEnoughReplicas { .. })) => {
                Err(ReplicationError::NotEnoughReplicasAfterAppend)
            }
            _ => Ok(()),
        };
        for w in done.into_values().flatten() {
            w(verdict.clone());
        }
    }

    /// Fails every waiting `acks=all` producer: this broker no longer
    /// leads (NOT_LEADER_OR_FOLLOWER; the producer retries with the new
    /// leader, and idempotence keeps the retry from doubling records).
    pub(crate) fn fail_waiting(&self) {
        let all = std::mem::take(&mut *self.replication.purgatory.lock());
        for w in all.into_values().flatten() {
            w(Err(ReplicationError::NotLeader));
        }
    }

    /// Waits until the records before `next` are committed (the high
    /// watermark reached it), as an `acks=all` producer is answered, at
    /// most until `deadline` (REQUEST_TIMED_OUT). Answers at once on a
    /// partition with one replica.
    /// The records must have been appended in leader epoch `epoch`: if
    /// this broker no longer leads in it they may have been cut back
    /// (NOT_LEADER_OR_FOLLOWER; the producer retries).
    pub async fn wait_committed(
        &self,
        next: Offset,
        epoch: LeaderEpoch,
        deadline: tokio::time::Instant,
    ) -> Result<(), Error> {
        let wait = self.commit_wait(next, epoch);
        self.committed(wait, deadline).await
    }

    /// [`Partition::wait_committed`] in two steps: the wait registered now
    /// (so its epoch is checked now, not when it is awaited), then awaited
    /// with [`Partition::committed`].
    pub fn commit_wait(&self, next: Offset, epoch: LeaderEpoch) -> CommitWait {
        let (tx, rx) = oneshot::channel();
        let waiter: Waiter = Box::new(move |r| {
            let _ = tx.send(r);
        });
        match self.register_commit(next, epoch, waiter) {
            Some(now) => CommitWait::Done(now),
            None => CommitWait::Waiting { next, rx },
        }
    }

    /// The outcome of `wait`, at most at `deadline` (REQUEST_TIMED_OUT).
    pub async fn committed(
        &self,
        wait: CommitWait,
        deadline: tokio::time::Instant,
    ) -> Result<(), Error> {
        let (next, rx) = match wait {
            CommitWait::Done(r) => return r,
            CommitWait::Waiting { next, rx } => (next, rx),
        };
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(self.replication_error(e)),
            Ok(Err(_)) => Err(self.replication_error(ReplicationError::NotLeader)),
            Err(_) => Err(self.not_replicated_in_time(next)),
        }
    }

    /// [`Partition::wait_committed`] from a blocking thread, for
    /// everything appended so far (a transaction marker just written),
    /// within `timeout`.
    pub fn wait_all_committed_blocking(&self, timeout: std::time::Duration) -> Result<(), Error> {
        let Some(replica) = self.replica() else {
            return Ok(());
        };
        let Some(epoch) = replica.leading_epoch() else {
            return Err(self.replication_error(ReplicationError::NotLeader));
        };
        self.wait_committed_in_blocking(epoch, timeout)
    }

    /// [`Partition::wait_all_committed_blocking`] for records appended in
    /// leader epoch `epoch` (NOT_LEADER_OR_FOLLOWER if this broker no
    /// longer leads in it: they may have been cut back).
    pub fn wait_committed_in_blocking(
        &self,
        epoch: LeaderEpoch,
        timeout: std::time::Duration,
    ) -> Result<(), Error> {
        if self.replica().is_none() {
            return Ok(());
        }
        let next = self.log().log_end_offset();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let waiter: Waiter = Box::new(move |r| {
            let _ = tx.send(r);
        });
        if let Some(now) = self.register_commit(next, epoch, waiter) {
            return now;
        }
        match rx.recv_timeout(timeout) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.replication_error(e)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                Err(self.not_replicated_in_time(next))
            }
            Err(_) => Err(self.replication_error(ReplicationError::NotLeader)),
        }
    }

    fn not_replicated_in_time(&self, next: Offset) -> Error {
        Error::ReplicationTimeout(format!(
            "{}: the records before offset {} were not replicated to the in-sync replicas in time",
            self.tp, next.0
        ))
    }

    /// Puts `waiter` in the purgatory until the high watermark reaches
    /// `next` in leader epoch `epoch`; the outcome at once (`Some`) when
    /// it has already, or the epoch is not this broker's anymore.
    fn register_commit(
        &self,
        next: Offset,
        epoch: LeaderEpoch,
        waiter: Waiter,
    ) -> Option<Result<(), Error>> {
        // One replica: committed as written.
        let Some(replica) = self.replica() else {
            return Some(Ok(()));
        };
        let mut p = self.replication.purgatory.lock();
        // Waiters are failed on every change of epoch, under this lock:
        // checked here, the epoch cannot change unseen.
        if replica.leading_epoch() != Some(epoch) {
            return Some(Err(self.replication_error(ReplicationError::NotLeader)));
        }
        // Checked under the purgatory's lock: the high watermark cannot
        // pass `next` between this check and the insert without
        // completing the waiter.
        if self.log().high_watermark() >= next {
            drop(p);
            return Some(match replica.check_append(Acks::All) {
                Err(ReplicationError::NotEnoughReplicas { .. }) => {
                    Err(self.replication_error(ReplicationError::NotEnoughReplicasAfterAppend))
                }
                _ => Ok(()),
            });
        }
        p.entry(next).or_default().push(waiter);
        None
    }

    /// A replication refusal with this partition's name.
    pub fn replication_error(&self, source: ReplicationError) -> Error {
        Error::Replication {
            partition: self.tp.to_string(),
            source,
        }
    }

    /// A replica's error with this partition's name.
    pub fn replica_error(&self, e: super::machine::ReplicaError) -> Error {
        match e {
            super::machine::ReplicaError::Replication(r) => self.replication_error(r),
            super::machine::ReplicaError::Storage(s) => self.storage_error(s),
        }
    }
}
