//! Finding a partition's offsets by time: where a seek by publish time, a
//! subscription's rollback duration and the REST reset-cursor-by-time
//! paths start reading.

use broker::Partition;
use model::{Offset, Timestamp};

use crate::error::PulsarError;

/// The first offset with a timestamp at or after `ts` (the log end if none).
pub fn offset_at_time(partition: &Partition, ts: Timestamp) -> Result<Offset, PulsarError> {
    let log = partition.log();
    match log.offset_for_timestamp(ts) {
        Ok(Some((o, _))) => Ok(o),
        Ok(None) => Ok(log.log_end_offset()),
        Err(e) => Err(partition.storage_error(e).into()),
    }
}
