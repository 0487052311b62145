//! The slots of the replicated group log a broker holds, and the
//! coordinator of one id (see [`super`]).

use std::collections::HashMap;
use std::sync::Arc;

use model::LeaderEpoch;
use parking_lot::RwLock;

use crate::group::coordinator::GroupCoordinator;
use crate::state_log::SLOT_COMMIT_TIMEOUT;
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
    // The slot partition and epoch a replicated slot writes in.
    pub(crate) log: Option<(Arc<Partition>, LeaderEpoch)>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field(
                "slot",
                &self.log.as_ref().map(|(p, e)| (p.tp.to_string(), e.0)),
            )
            .finish_non_exhaustive()
    }
}

impl Coordinator {
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
        self.log.as_ref().map_or(0, |(_, e)| e.0)
    }

    /// Waits until what this coordinator wrote so far is committed (on
    /// the slot's in-sync replicas), as every change is before it is
    /// answered. NOT_COORDINATOR if this broker stopped leading the slot
    /// meanwhile, COORDINATOR_NOT_AVAILABLE if it took too long. Blocking.
    pub fn committed_blocking(&self) -> Result<(), Error> {
        let Some((partition, epoch)) = &self.log else {
            return Ok(());
        };
        partition
            .wait_committed_in_blocking(*epoch, SLOT_COMMIT_TIMEOUT)
            .map_err(|e| slot_write_error(partition, e))
    }

    /// [`Coordinator::committed_blocking`] for async callers.
    pub async fn committed(&self) -> Result<(), Error> {
        let Some((partition, epoch)) = &self.log else {
            return Ok(());
        };
        let next = partition.log().log_end_offset();
        let wait = partition.commit_wait(next, *epoch);
        let deadline = tokio::time::Instant::now() + SLOT_COMMIT_TIMEOUT;
        partition
            .committed(wait, deadline)
            .await
            .map_err(|e| slot_write_error(partition, e))
    }
}

/// A slot write's replication error as the coordinator's client sees it.
fn slot_write_error(partition: &Partition, e: Error) -> Error {
    use magnetar_replication::ReplicationError as R;
    match e {
        Error::Replication {
            source: R::NotLeader,
            ..
        } => Error::NotCoordinator(format!("this broker no longer leads {}", partition.tp)),
        other => Error::CoordinatorUnavailable(other.to_string()),
    }
}
