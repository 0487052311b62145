//! Magnetar's storage engine: per-partition segmented logs holding Kafka v2
//! record batches as received (offsets and leader epochs stamped in place).
//!
//! The layering follows Kafka and Redpanda: a segment is
//! one `.log` file with its sparse `.index` and `.timeindex`; a [`Log`] is the
//! ordered segments of one partition plus its leader epoch cache, idempotent
//! producer state and checkpoints; the [`LogManager`] owns the data directory
//! and every log in it.
//!
//! Appends validate batch headers, CRCs and every record (streaming
//! compressed records through a fixed buffer), stamp offsets and leader
//! epochs in place and write the bytes; fetches return whole stored batches
//! without decoding them. [`records`] holds the record parser, the
//! validation, the [`records::RecordIter`] reader and the timestamp scans;
//! [`builder::BatchBuilder`] writes batches. The [`cleaner`] compacts logs
//! with `cleanup.policy=compact`, crash-safely and off the request path.

#![warn(missing_docs)]

mod attributes;
pub mod batch;
pub mod builder;
mod checkpoint;
pub mod cleaner;
mod config;
mod epoch;
mod error;
mod file_names;
mod files;
mod header;
mod index;
mod io;
mod log;
mod manager;
mod parallel;
mod producer_state;
pub mod records;
mod segment;
pub mod txn;

#[cfg(test)]
mod test_util;

pub use batch::{
    BatchHeader, BatchesSummary, Compression, TimestampRules, TimestampType, ValidationConfig,
};
pub use builder::BatchBuilder;
pub use cleaner::{CleanSummary, Cleanable, CleanerConfig, CleanerStats, LogCleaner};
pub use config::{
    CleanupPolicy, CompressionLevels, LogConfig, DECOMPRESSION_RATIO_LIMIT, MIN_DECOMPRESSED_BYTES,
};
pub use epoch::EpochEntry;
pub use error::{BatchError, Error, RecordError, RecordField, RefusedRecord, Result};
pub use files::{cached_open_files, files_opened, open_file_budget, set_open_file_budget};
pub use log::{
    AppendInfo, AppendOutcome, FollowerAppend, Log, ReadResult, RecoveryStats, RegionRead, SyncWork,
};
pub use manager::{LogManager, LogSpec, CLEAN_SHUTDOWN_MARKER, DELETING_DIR, LOCK_FILE};
pub use producer_state::{BatchMetadata, ProducerEntry, MAX_CACHED_BATCHES};
pub use segment::FileRegion;
