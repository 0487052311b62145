//! What the group log is written to: a log the broker hosts (the
//! `__consumer_offsets` partition), seen only through the few operations
//! [`super::store::GroupLog`] needs, so the coordinator's state does not
//! depend on the broker's partitions.

use model::Timestamp;
use storage::{AppendOutcome, Log};

use crate::error::CoordError;

/// The log under the group log.
pub trait StateLog: std::fmt::Debug + Send + Sync {
    /// Appends encoded record batches (offsets assigned by the log) and
    /// wakes whoever waits for new data. A replicated log refuses once
    /// this broker no longer leads it in the epoch its state was loaded in
    /// ([`CoordError::NotCoordinator`]).
    fn append_batches(&self, batches: &[u8], now: Timestamp) -> Result<AppendOutcome, CoordError>;

    /// Waits until everything appended so far is committed (on the
    /// in-sync replicas of a replicated log; at once on a log of one
    /// replica). Blocking.
    fn wait_committed(&self) -> Result<(), CoordError> {
        Ok(())
    }

    /// The storage log (reads, flushes, offsets, the log start).
    fn storage(&self) -> &Log;

    /// The name storage errors are reported with (`topic-N`).
    fn name(&self) -> String;
}
