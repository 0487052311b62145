//! The group log's storage is the `__consumer_offsets` partition: the
//! coordinator's state sees it only through [`StateLog`].

use model::Timestamp;
use storage::AppendOutcome;

use crate::group::log::StateLog;
use crate::Partition;

impl StateLog for Partition {
    fn append_batches(
        &self,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<AppendOutcome, storage::Error> {
        self.append_storage(batches, now)
    }

    fn storage(&self) -> &storage::Log {
        self.log()
    }

    fn name(&self) -> String {
        self.tp.to_string()
    }
}
