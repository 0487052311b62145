//! What the group log is written to: a log the broker hosts (the
//! `__consumer_offsets` partition), seen only through the few operations
//! [`super::store::GroupLog`] needs, so the coordinator's state does not
//! depend on the broker's partitions.

use model::Timestamp;
use storage::{AppendOutcome, Log};

/// The log under the group log.
pub trait StateLog: std::fmt::Debug + Send + Sync {
    /// Appends encoded record batches (offsets assigned by the log) and
    /// wakes whoever waits for new data.
    fn append_batches(
        &self,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<AppendOutcome, storage::Error>;

    /// The storage log (reads, flushes, offsets, the log start).
    fn storage(&self) -> &Log;

    /// The name storage errors are reported with (`topic-N`).
    fn name(&self) -> String;
}
