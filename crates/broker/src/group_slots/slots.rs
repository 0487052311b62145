//! The slots of the replicated group log a broker holds, and the
//! coordinator of one id (see [`super`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use model::LeaderEpoch;
use parking_lot::RwLock;

use crate::group::coordinator::GroupCoordinator;
use crate::txn::Transactions;
use crate::{Error, Partition};

/// A slot's state as this broker holds it.
pub(crate) enum Slot {
    /// Being read from the log as leader in this epoch.
    Loading(LeaderEpoch),
    /// Served.
    Loaded(Arc<Loaded>),
}

/// A slot's loaded coordinator and the task driving its timers.
pub(crate) struct Loaded {
    pub(crate) partition: Arc<Partition>,
    pub(crate) epoch: LeaderEpoch,
    pub(crate) groups: Arc<GroupCoordinator>,
    pub(crate) timers: tokio::task::JoinHandle<()>,
    // `offsets.commit.timeout.ms` as loaded.
    pub(crate) commit_timeout: Duration,
}

impl Loaded {
    /// The coordinator this slot serves, while this broker still leads its
    /// partition in the epoch it was loaded in (a deposed one answers
    /// nothing, reads included, even before the keeper drops it).
    pub(crate) fn coordinator(&self) -> Option<Coordinator> {
        let leads = match self.partition.replica() {
            Some(r) => r.leading_epoch() == Some(self.epoch),
            None => self.partition.leads(),
        };
        leads.then(|| Coordinator {
            groups: self.groups.clone(),
            log: Some(SlotWrites {
                partition: self.partition.clone(),
                epoch: self.epoch,
                timeout: self.commit_timeout,
            }),
        })
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        self.timers.abort();
    }
}

/// The slots this broker leads (see the module documentation).
#[derive(Default)]
pub(crate) struct GroupSlots {
    pub(crate) slots: RwLock<HashMap<i32, Slot>>,
}

/// The coordinator of one group or transactional id on this broker.
#[derive(Clone)]
pub struct Coordinator {
    pub(crate) groups: Arc<GroupCoordinator>,
    // Where a replicated slot writes (none for a broker's own log).
    log: Option<SlotWrites>,
}

/// The slot partition, the leader epoch its coordinator writes in, and how
/// long a write may wait for the in-sync replicas.
#[derive(Clone)]
struct SlotWrites {
    partition: Arc<Partition>,
    epoch: LeaderEpoch,
    timeout: Duration,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field(
                "slot",
                &self
                    .log
                    .as_ref()
                    .map(|w| (w.partition.tp.to_string(), w.epoch.0)),
            )
            .finish_non_exhaustive()
    }
}

impl Coordinator {
    /// The coordinator over a broker's own group log (nothing to wait for).
    pub(crate) fn home(groups: Arc<GroupCoordinator>) -> Coordinator {
        Coordinator { groups, log: None }
    }

    /// Groups and committed offsets.
    pub fn groups(&self) -> &GroupCoordinator {
        &self.groups
    }

    /// Transactions.
    pub fn transactions(&self) -> &Transactions {
        &self.groups.front_end().transactions
    }

    /// Offsets staged here for transactions other brokers coordinate.
    pub(crate) fn staged(&self) -> &crate::txn::staged::StagedOffsets {
        &self.groups.front_end().staged_offsets
    }

    /// The leader epoch of the slot this coordinator serves (0 for a
    /// broker's own group log): transaction markers carry it as their
    /// coordinator epoch.
    pub fn epoch(&self) -> i32 {
        self.log.as_ref().map_or(0, |w| w.epoch.0)
    }

    /// Waits until what this coordinator wrote so far is committed (on
    /// the slot's in-sync replicas), as every change is before it is
    /// answered. NOT_COORDINATOR if this broker stopped leading the slot
    /// meanwhile, COORDINATOR_NOT_AVAILABLE if it took too long. Blocking.
    pub fn committed_blocking(&self) -> Result<(), Error> {
        let Some(w) = &self.log else {
            return Ok(());
        };
        w.partition
            .wait_committed_in_blocking(w.epoch, w.timeout)
            .map_err(|e| slot_write_error(&w.partition, e))
    }

    /// Where the slot's log ends now (none for a broker's own log), for
    /// [`Coordinator::committed_blocking_since`].
    pub fn log_end(&self) -> Option<model::Offset> {
        self.log
            .as_ref()
            .map(|w| w.partition.log().log_end_offset())
    }

    /// [`Coordinator::committed_blocking`] for a request that may have
    /// written nothing: if the log still ends at `before` (from
    /// [`Coordinator::log_end`]), there is nothing to wait for, and the
    /// request is not refused for want of in-sync replicas (a heartbeat
    /// that changed nothing, as Kafka answers it).
    pub fn committed_blocking_since(&self, before: Option<model::Offset>) -> Result<(), Error> {
        if before.is_some() && self.log_end() == before {
            return Ok(());
        }
        self.committed_blocking()
    }

    /// [`Coordinator::committed_blocking`] for async callers.
    pub async fn committed(&self) -> Result<(), Error> {
        let Some(w) = &self.log else {
            return Ok(());
        };
        let next = w.partition.log().log_end_offset();
        let deadline = tokio::time::Instant::now() + w.timeout;
        w.partition
            .wait_committed(next, w.epoch, deadline)
            .await
            .map_err(|e| slot_write_error(&w.partition, e))
    }
}

/// A slot write's replication error as the coordinator's client sees it.
pub(crate) fn slot_write_error(partition: &Partition, e: Error) -> Error {
    use magnetar_replication::ReplicationError as R;
    match e {
        Error::Replication {
            source: R::NotLeader,
            ..
        } => Error::NotCoordinator(format!("this broker no longer leads {}", partition.tp)),
        other => Error::CoordinatorUnavailable(other.to_string()),
    }
}
