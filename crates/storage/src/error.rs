//! The crate's error types.

use std::io;
use std::path::{Path, PathBuf};

use model::{Offset, ProducerEpoch, ProducerId, TopicId};

use crate::batch::Compression;

/// A `Result` whose error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a buffer is not a well-formed sequence of v2 record batches.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The buffer holds no batch at all.
    #[error("no record batch in an empty buffer")]
    Empty,
    /// A batch (or its header) runs past the end of the buffer.
    #[error(
        "record batch at byte {position} is truncated: needs {needed} bytes, {available} available"
    )]
    Truncated {
        /// Where the batch starts in the buffer.
        position: usize,
        /// Bytes the batch claims (or the header needs).
        needed: usize,
        /// Bytes left in the buffer from `position`.
        available: usize,
    },
    /// The batch length field is too small to hold a v2 header.
    #[error("record batch at byte {position} has invalid length {length}")]
    InvalidLength {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The `batchLength` field.
        length: i32,
    },
    /// The magic byte is not 2; older message formats are not supported.
    #[error(
        "record batch at byte {position} has unsupported magic {magic} (only v2 is supported)"
    )]
    UnsupportedMagic {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The magic byte found.
        magic: i8,
    },
    /// The compression bits name no known codec.
    #[error("record batch at byte {position} uses unknown compression codec {codec}")]
    UnsupportedCompression {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The codec id from the attributes.
        codec: u8,
    },
    /// The stored CRC does not match the batch content.
    #[error("record batch at byte {position} is corrupt: CRC {actual:#010x} != expected {expected:#010x}")]
    CorruptCrc {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The CRC stored in the batch header.
        expected: u32,
        /// The CRC computed over the batch content.
        actual: u32,
    },
    /// `recordCount` is not positive or disagrees with `lastOffsetDelta`.
    #[error("record batch at byte {position} has record count {record_count} but last offset delta {last_offset_delta}")]
    InvalidRecordCount {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The `recordCount` field.
        record_count: i32,
        /// The `lastOffsetDelta` field.
        last_offset_delta: i32,
    },
    /// An idempotent batch (with a producer id) carries a negative sequence.
    #[error("record batch at byte {position} has producer id {producer_id} but invalid base sequence {base_sequence}")]
    InvalidSequence {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The batch's producer id.
        producer_id: ProducerId,
        /// The negative base sequence.
        base_sequence: i32,
    },
    /// The batch is larger than the configured maximum.
    #[error("record batch at byte {position} is {size} bytes, more than the maximum of {max}")]
    TooLarge {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The batch size, header included.
        size: usize,
        /// The configured maximum.
        max: u32,
    },
    /// The compressed records could not be decompressed.
    #[error("cannot decompress {compression:?} records: {source}")]
    Decompress {
        /// The batch's codec.
        compression: Compression,
        /// What the decompressor reported.
        #[source]
        source: io::Error,
    },
    /// A record inside the batch is malformed.
    #[error("malformed record in batch: {reason}")]
    MalformedRecord {
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Everything that can go wrong in the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A filesystem operation failed.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The appended bytes are not valid v2 record batches.
    #[error("invalid record batch: {0}")]
    Batch(#[source] BatchError),
    /// A batch exceeds `max_message_bytes`.
    #[error("record batch of {size} bytes exceeds the maximum of {max} bytes")]
    RecordBatchTooLarge {
        /// The batch size, header included.
        size: usize,
        /// The configured maximum.
        max: u32,
    },
    /// The requested offset is outside `[log_start_offset, log_end_offset]`
    /// (or beyond the high watermark for `delete_records_before`).
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The requested offset.
        offset: Offset,
        /// The log start offset at the time of the request.
        log_start_offset: Offset,
        /// The log end offset at the time of the request.
        log_end_offset: Offset,
    },
    /// An idempotent producer's batch does not follow its last sequence.
    #[error("out of order sequence for producer {producer_id} (epoch {producer_epoch}): expected {expected_sequence}, got {sequence}")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: ProducerId,
        /// The epoch the batch carries.
        producer_epoch: ProducerEpoch,
        /// The sequence the log expected next.
        expected_sequence: i32,
        /// The batch's base sequence.
        sequence: i32,
    },
    /// The batch's producer epoch is older than the producer's current one
    /// (a fenced, zombie producer).
    #[error(
        "producer {producer_id} epoch {epoch} is older than the current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: ProducerId,
        /// The epoch the batch carries.
        epoch: ProducerEpoch,
        /// The producer's current epoch.
        current_epoch: ProducerEpoch,
    },
    /// Transactional or control batches were appended; transactions are not
    /// supported.
    #[error("transactional and control record batches are not supported")]
    TransactionsNotSupported,
    /// The partition directory belongs to another incarnation of the topic.
    #[error("partition directory {} belongs to topic id {found}, not {expected}", path.display())]
    TopicIdMismatch {
        /// The partition directory.
        path: PathBuf,
        /// The topic id the caller asked for.
        expected: TopicId,
        /// The topic id recorded on disk.
        found: TopicId,
    },
    /// The log was deleted; it accepts no more operations.
    #[error("the log has been deleted")]
    LogDeleted,
    /// The log was closed by [`crate::LogManager::shutdown`].
    #[error("the log has been closed")]
    LogClosed,
    /// Another process holds the data directory's lock.
    #[error("data directory {} is locked by another process", path.display())]
    DataDirLocked {
        /// The data directory.
        path: PathBuf,
    },
    /// The process ran out of file descriptors (RLIMIT_NOFILE).
    #[error("cannot open {}: the process's open-file limit is reached (ulimit -n); raise it, or lower max.connections", path.display())]
    TooManyOpenFiles {
        /// The file being opened.
        path: PathBuf,
    },
    /// A file's content cannot be understood.
    #[error("corrupt file {}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl From<BatchError> for Error {
    fn from(e: BatchError) -> Self {
        match e {
            BatchError::TooLarge { size, max, .. } => Error::RecordBatchTooLarge { size, max },
            other => Error::Batch(other),
        }
    }
}

/// Attaches a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    /// Wraps the error in [`Error::Io`] naming `path`.
    fn at(self, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|source| {
            if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                return Error::TooManyOpenFiles {
                    path: path.to_path_buf(),
                };
            }
            Error::Io {
                path: path.to_path_buf(),
                source,
            }
        })
    }
}

/// Builds an [`Error::Corrupt`].
pub(crate) fn corrupt(path: &Path, reason: impl Into<String>) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}
