//! The crate's error types.

use std::io;
use std::path::{Path, PathBuf};

use model::{Offset, ProducerEpoch, ProducerId, TopicId};

use crate::attributes::Compression;

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
    /// The records inside the batch break a rule of the v2 format (or of the
    /// topic, such as keys on a compacted topic). Kafka's INVALID_RECORD.
    #[error("record batch at byte {position}{}: {error}", RecordIndex(*.record_index))]
    InvalidRecords {
        /// Where the batch starts in the buffer.
        position: usize,
        /// Index within its batch of the record at fault, when one record is
        /// (`None` for faults of the batch as a whole, e.g. a wrong count).
        record_index: Option<u32>,
        /// What is wrong.
        #[source]
        error: RecordError,
    },
    /// Records the topic's rules refuse (a record without a key on a
    /// compacted topic, a timestamp outside the allowed window): every such
    /// record of the batch, in order, as Kafka's log validator lists them in
    /// Produce's `record_errors`. The batch is refused whole. Kafka's
    /// INVALID_TIMESTAMP when any is a timestamp refusal, INVALID_RECORD
    /// otherwise.
    #[error("record batch at byte {position}: {}", Refused(records))]
    RecordsRefused {
        /// Where the batch starts in the buffer.
        position: usize,
        /// The refused records (at least one).
        records: Vec<RefusedRecord>,
    },
    /// A batch could not be built (see [`crate::builder::BatchBuilder`]).
    #[error("cannot build record batch: {reason}")]
    Unencodable {
        /// What does not fit the format.
        reason: &'static str,
    },
}

/// One record of a batch the topic's rules refuse
/// ([`BatchError::RecordsRefused`]).
#[derive(Debug)]
pub struct RefusedRecord {
    /// Its index within its batch (its offset delta).
    pub index: u32,
    /// Why it is refused.
    pub error: RecordError,
}

impl BatchError {
    /// Whether the batch is refused for its timestamps (Kafka's
    /// INVALID_TIMESTAMP rather than INVALID_RECORD): any of its refused
    /// records is, as Kafka decides.
    pub fn is_invalid_timestamp(&self) -> bool {
        match self {
            BatchError::InvalidRecords { error, .. } => error.is_invalid_timestamp(),
            BatchError::RecordsRefused { records, .. } => {
                records.iter().any(|r| r.error.is_invalid_timestamp())
            }
            _ => false,
        }
    }
}

/// Formats the refused records of [`BatchError::RecordsRefused`]: how
/// many, and the first three (as Kafka's message shows at most three).
struct Refused<'a>(&'a [RefusedRecord]);

impl std::fmt::Display for Refused<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.len();
        write!(f, "{n} record{} refused", if n == 1 { "" } else { "s" })?;
        for (i, r) in self.0.iter().take(3).enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            write!(f, "{sep}record {}: {}", r.index, r.error)?;
        }
        if n > 3 {
            f.write_str("; ...")?;
        }
        Ok(())
    }
}

/// Formats " record N" for [`BatchError::InvalidRecords`].
struct RecordIndex(Option<u32>);

impl std::fmt::Display for RecordIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(i) => write!(f, ", record {i}"),
            None => Ok(()),
        }
    }
}

/// A variable-length field of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordField {
    /// The record key.
    Key,
    /// The record value.
    Value,
    /// A header's key.
    HeaderKey,
    /// A header's value.
    HeaderValue,
}

impl std::fmt::Display for RecordField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RecordField::Key => "key",
            RecordField::Value => "value",
            RecordField::HeaderKey => "header key",
            RecordField::HeaderValue => "header value",
        })
    }
}

/// Why the records of a batch are refused: the reasons behind
/// [`BatchError::InvalidRecords`], one per rule of Kafka's record validation.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The records (or the decompressed stream) end in the middle of a record.
    #[error("the records end in the middle of a record")]
    Truncated,
    /// A varint has more bytes than its type allows.
    #[error("malformed varint (longer than {max_bytes} bytes)")]
    MalformedVarint {
        /// 5 for 32-bit varints, 10 for 64-bit ones.
        max_bytes: u8,
    },
    /// The record's length prefix is negative.
    #[error("invalid record length {length}")]
    InvalidLength {
        /// The length read.
        length: i32,
    },
    /// The record's fields do not take exactly the length it declares.
    #[error("record declares {declared} bytes but its fields take {actual}")]
    LengthMismatch {
        /// The record's length prefix.
        declared: i32,
        /// Bytes its fields took (at least).
        actual: u64,
    },
    /// A key, value or header length is below -1 (a header key below 0).
    #[error("invalid {field} length {length}")]
    InvalidFieldLength {
        /// The field.
        field: RecordField,
        /// The length read.
        length: i32,
    },
    /// A field runs past the end of its record.
    #[error("{field} of {length} bytes runs past the end of the record")]
    FieldPastRecordEnd {
        /// The field.
        field: RecordField,
        /// Its length.
        length: i32,
    },
    /// The header count is negative or more headers than the record holds.
    #[error("invalid header count {count}")]
    InvalidHeaderCount {
        /// The count read.
        count: i32,
    },
    /// Offset deltas must run 0, 1, … in order.
    #[error("offset delta {found} where {expected} was expected")]
    OffsetDelta {
        /// The record's index in the batch.
        expected: i32,
        /// The delta it carries.
        found: i32,
    },
    /// `baseTimestamp + timestampDelta` does not fit in 64 bits.
    #[error("timestamp delta {delta} overflows the base timestamp {base}")]
    TimestampOverflow {
        /// The batch's base timestamp.
        base: i64,
        /// The record's delta.
        delta: i64,
    },
    /// A compacted topic needs a key on every record.
    #[error("a compacted topic cannot accept a record without a key")]
    MissingKey,
    /// The batch holds fewer records than `recordCount` claims.
    #[error("the batch claims {claimed} records but holds {found}")]
    CountMismatch {
        /// The `recordCount` field.
        claimed: i32,
        /// Records actually present.
        found: i32,
    },
    /// Bytes follow the last record.
    #[error("bytes follow the last of the batch's {count} records")]
    TrailingBytes {
        /// The `recordCount` field.
        count: i32,
    },
    /// The records decompress to more than the log allows.
    #[error("the records decompress to more than {limit} bytes")]
    DecompressedTooLarge {
        /// The limit (see [`crate::LogConfig::max_decompressed_bytes`]).
        limit: u64,
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
    /// Clients may not write control batches (transaction markers).
    #[error("clients may not write control batches")]
    ControlBatch,
    /// A CreateTime record's timestamp is outside the window
    /// `message.timestamp.before.max.ms` / `after.max.ms` allow around the
    /// append time (Kafka's INVALID_TIMESTAMP, worded as Kafka words it).
    #[error("Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be within [{min}, {max}]")]
    TimestampOutOfRange {
        /// The record's timestamp.
        timestamp: i64,
        /// The record's offset within its batch (its offset delta).
        offset: i32,
        /// The earliest accepted timestamp.
        min: i64,
        /// The latest accepted timestamp.
        max: i64,
    },
    /// The producer sent a LogAppendTime batch; only the broker sets that
    /// type (Kafka's INVALID_TIMESTAMP).
    #[error("Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.")]
    LogAppendTimeFromProducer,
}

impl RecordError {
    /// Whether this is a timestamp refusal (Kafka's INVALID_TIMESTAMP rather
    /// than INVALID_RECORD).
    pub fn is_invalid_timestamp(&self) -> bool {
        matches!(
            self,
            RecordError::TimestampOutOfRange { .. } | RecordError::LogAppendTimeFromProducer
        )
    }
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
    /// A follower's copy of its leader's batches does not start at or
    /// after the log end offset, or its offsets do not grow (Kafka's
    /// `UnexpectedAppendOffsetException`).
    #[error("replicated batch at offset {offset} where offsets from {expected} on were expected")]
    UnexpectedAppendOffset {
        /// The batch's base offset.
        offset: Offset,
        /// The least offset it could have had.
        expected: Offset,
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
    /// Transactional batches were appended without the transaction being
    /// verified with its coordinator, or control batches were sent.
    #[error("transactional and control record batches are not supported")]
    TransactionsNotSupported,
    /// A batch that does not fit the producer's transaction state (Kafka's
    /// INVALID_TXN_STATE).
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// A transaction marker of an older coordinator epoch (Kafka's
    /// TRANSACTION_COORDINATOR_FENCED).
    #[error(
        "producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {current}"
    )]
    TransactionCoordinatorFenced {
        /// The producer.
        producer_id: ProducerId,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The epoch of the coordinator that wrote the last marker.
        current: i32,
    },
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
