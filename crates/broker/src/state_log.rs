//! The group log's storage is a `__consumer_offsets` partition: the
//! coordinator's state sees it only through [`StateLog`]. A broker's own
//! (unreplicated) group log is the partition itself; a replicated slot of
//! the group log is a [`SlotLog`], written only as its leader, in the
//! leader epoch its state was loaded in.

use std::sync::Arc;
use std::time::Duration;

use model::{LeaderEpoch, Timestamp};
use storage::AppendOutcome;

use crate::coordinator_error::CoordError;
use crate::group::log::StateLog;
use crate::Partition;

impl StateLog for Partition {
    fn append_batches(&self, batches: &[u8], now: Timestamp) -> Result<AppendOutcome, CoordError> {
        self.append_storage(batches, now)
            .map_err(|source| CoordError::Storage {
                partition: self.tp.to_string(),
                source,
            })
    }

    fn storage(&self) -> &storage::Log {
        self.log()
    }

    fn name(&self) -> String {
        self.tp.to_string()
    }
}

/// One partition of a replicated group log, as the coordinator loaded
/// from it in `epoch` writes it.
#[derive(Debug)]
pub struct SlotLog {
    partition: Arc<Partition>,
    epoch: LeaderEpoch,
    // How long a write waits for the in-sync replicas
    // (`offsets.commit.timeout.ms`).
    timeout: Duration,
}

impl SlotLog {
    /// The slot partition `partition`, led here in `epoch`.
    pub fn new(partition: Arc<Partition>, epoch: LeaderEpoch, timeout: Duration) -> SlotLog {
        SlotLog {
            partition,
            epoch,
            timeout,
        }
    }

    fn not_coordinator(&self) -> CoordError {
        CoordError::NotCoordinator(format!(
            "this broker no longer leads {} in leader epoch {}",
            self.partition.tp, self.epoch.0
        ))
    }
}

impl StateLog for SlotLog {
    fn append_batches(&self, batches: &[u8], now: Timestamp) -> Result<AppendOutcome, CoordError> {
        let p = &self.partition;
        let written = p.leader_write(|epoch| {
            // Another epoch is another leadership: the state in memory
            // may not be what the log holds now.
            if epoch != self.epoch {
                return Ok(None);
            }
            p.append_storage_in(batches, epoch, now).map(Some)
        });
        match written {
            Ok(Some(out)) => Ok(out),
            Ok(None) => Err(self.not_coordinator()),
            Err(crate::Error::Storage { partition, source }) => {
                Err(CoordError::Storage { partition, source })
            }
            Err(_) => Err(self.not_coordinator()),
        }
    }

    fn wait_committed(&self) -> Result<(), CoordError> {
        self.partition
            .wait_committed_in_blocking(self.epoch, self.timeout)
            .map_err(
                |e| match crate::group_slots::slot_write_error(&self.partition, e) {
                    crate::Error::NotCoordinator(_) => self.not_coordinator(),
                    other => CoordError::NotCommitted(other.to_string()),
                },
            )
    }

    fn storage(&self) -> &storage::Log {
        self.partition.log()
    }

    fn name(&self) -> String {
        self.partition.tp.to_string()
    }
}
