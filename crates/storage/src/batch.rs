//! The Kafka v2 record batch layout: the on-disk format, parsed in place.
//!
//! ```text
//! baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
//! attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records...
//! ```
//!
//! All fields are big-endian. The CRC-32C covers `attributes` to the end of the
//! batch, so `baseOffset` and `partitionLeaderEpoch` can be stamped in place.

use model::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Timestamp};

use crate::config::LogConfig;
use crate::error::{BatchError, RecordError};
use crate::records::validate::check_records;

/// Size of the v2 batch header, up to and including `recordCount`.
pub const HEADER_LEN: usize = 61;
/// Bytes before the part that `batchLength` counts: `baseOffset` + `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// The only supported magic value.
pub const MAGIC_V2: i8 = 2;

pub(crate) const LENGTH_OFFSET: usize = 8;
const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
pub(crate) const ATTRIBUTES_OFFSET: usize = 21;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub(crate) const BASE_TIMESTAMP_OFFSET: usize = 27;
pub(crate) const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
pub(crate) const RECORD_COUNT_OFFSET: usize = 57;

pub(crate) const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_FLAG: i16 = 0x08;
/// The attributes bit of a transactional batch.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
/// The attributes bit of a control batch (transaction markers).
pub const CONTROL_FLAG: i16 = 0x20;

/// The codec of a batch's records (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Uncompressed.
    None,
    /// gzip.
    Gzip,
    /// Snappy (xerial framing or raw).
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// The codec for a Kafka compression id, if known.
    pub fn from_id(id: u8) -> Option<Compression> {
        Some(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }

    /// The codec's Kafka compression id (attribute bits 0-2).
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// What a batch's timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker on append; every record has `maxTimestamp`.
    LogAppendTime,
}

/// A parsed v2 batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Bytes after the `batchLength` field.
    pub batch_length: i32,
    /// Epoch of the leader that appended the batch.
    pub partition_leader_epoch: LeaderEpoch,
    /// Format version; always 2 once parsed.
    pub magic: i8,
    /// CRC-32C over `attributes` to the end of the batch.
    pub crc: u32,
    /// Compression, timestamp type, transactional and control flags.
    pub attributes: i16,
    /// Offset of the last record minus `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: Timestamp,
    /// Largest record timestamp in the batch.
    pub max_timestamp: Timestamp,
    /// Idempotent producer id, or -1.
    pub producer_id: ProducerId,
    /// Idempotent producer epoch, or -1.
    pub producer_epoch: ProducerEpoch,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub record_count: i32,
}

fn i16_at(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

impl BatchHeader {
    /// Parses the header at the start of `buf` (only the first
    /// [`HEADER_LEN`] bytes are read). Checks the magic, the length field and
    /// the codec, but not the CRC or the record count.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        Self::parse_at(buf, 0)
    }

    /// Like [`BatchHeader::parse`], reporting `position` in errors.
    pub(crate) fn parse_at(buf: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_LEN {
            // A buffer too short to say its own length: report what we know.
            let needed = if buf.len() >= LOG_OVERHEAD {
                (i32_at(buf, LENGTH_OFFSET).max(0) as usize + LOG_OVERHEAD).max(HEADER_LEN)
            } else {
                HEADER_LEN
            };
            return Err(BatchError::Truncated {
                position,
                needed,
                available: buf.len(),
            });
        }
        let batch_length = i32_at(buf, LENGTH_OFFSET);
        if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(BatchError::InvalidLength {
                position,
                length: batch_length,
            });
        }
        let magic = buf[MAGIC_OFFSET] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic { position, magic });
        }
        let attributes = i16_at(buf, ATTRIBUTES_OFFSET);
        let codec = (attributes & COMPRESSION_MASK) as u8;
        if Compression::from_id(codec).is_none() {
            return Err(BatchError::UnsupportedCompression { position, codec });
        }
        Ok(BatchHeader {
            base_offset: Offset(i64_at(buf, 0)),
            batch_length,
            partition_leader_epoch: LeaderEpoch(i32_at(buf, PARTITION_LEADER_EPOCH_OFFSET)),
            magic,
            crc: u32_at(buf, CRC_OFFSET),
            attributes,
            last_offset_delta: i32_at(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: Timestamp(i64_at(buf, BASE_TIMESTAMP_OFFSET)),
            max_timestamp: Timestamp(i64_at(buf, MAX_TIMESTAMP_OFFSET)),
            producer_id: ProducerId(i64_at(buf, PRODUCER_ID_OFFSET)),
            producer_epoch: ProducerEpoch(i16_at(buf, PRODUCER_EPOCH_OFFSET)),
            base_sequence: i32_at(buf, BASE_SEQUENCE_OFFSET),
            record_count: i32_at(buf, RECORD_COUNT_OFFSET),
        })
    }

    /// The records' codec.
    pub fn compression(&self) -> Compression {
        // parse() rejected unknown ids, so this cannot fall through.
        Compression::from_id((self.attributes & COMPRESSION_MASK) as u8)
            .unwrap_or(Compression::None)
    }

    /// What the timestamps mean.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_FLAG != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch is part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    /// Whether the batch holds control records (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }

    /// Whether the batch comes from an idempotent producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id.0 >= 0
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(i64::from(self.last_offset_delta))
    }

    /// Offset just after the batch.
    pub fn next_offset(&self) -> Offset {
        self.last_offset().plus(1)
    }

    /// Bytes the whole batch occupies, `baseOffset` field included.
    pub fn total_size(&self) -> usize {
        self.batch_length.max(0) as usize + LOG_OVERHEAD
    }

    /// Sequence number of the last record (wraps to 0 after `i32::MAX`).
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// `seq + n`, wrapping from `i32::MAX` to 0 as Kafka's sequences do.
pub fn increment_sequence(seq: i32, n: i32) -> i32 {
    if seq < 0 {
        return seq;
    }
    ((i64::from(seq) + i64::from(n)) % (i64::from(i32::MAX) + 1)) as i32
}

/// The CRC-32C a batch should carry, computed over `attributes` to the end.
/// `batch` must hold exactly one whole batch.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..])
}

/// Recomputes and stores the CRC of `batch` (exactly one whole batch).
pub(crate) fn update_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Overwrites the `maxTimestamp` of `batch` (exactly one whole batch) and
/// recomputes its CRC, which covers it.
pub(crate) fn set_max_timestamp(batch: &mut [u8], ts: Timestamp) {
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&ts.0.to_be_bytes());
    update_crc(batch);
}

/// Sets `maxTimestamp` in a copy of a batch's header (`head`, the first
/// [`HEADER_LEN`] bytes) whose records are `body`, with the CRC recomputed
/// over both.
pub(crate) fn set_header_max_timestamp(head: &mut [u8; HEADER_LEN], body: &[u8], ts: Timestamp) {
    head[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&ts.0.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[ATTRIBUTES_OFFSET..]), body);
    head[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Marks a copy of a batch's header (`head`, the first [`HEADER_LEN`]
/// bytes) whose records are `body` as LogAppendTime with `maxTimestamp`
/// `ts`, the CRC recomputed over both (Kafka's `setMaxTimestamp(LOG_APPEND_TIME, now)`).
pub(crate) fn set_header_log_append_time(head: &mut [u8; HEADER_LEN], body: &[u8], ts: Timestamp) {
    let attributes = i16_at(head, ATTRIBUTES_OFFSET) | TIMESTAMP_TYPE_FLAG;
    head[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    set_header_max_timestamp(head, body, ts);
}

/// Overwrites the `baseOffset` of the batch starting at `batch[0]`.
pub fn set_base_offset(batch: &mut [u8], offset: Offset) {
    batch[..8].copy_from_slice(&offset.0.to_be_bytes());
}

/// Overwrites the `partitionLeaderEpoch` of the batch starting at `batch[0]`.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: LeaderEpoch) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.0.to_be_bytes());
}

/// What [`validate`] learned about a buffer of batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchesSummary {
    /// Number of batches.
    pub batch_count: usize,
    /// Records over all batches (each batch's offsets are contiguous).
    pub record_count: u64,
    /// Bytes over all batches.
    pub size_bytes: usize,
    /// Largest `maxTimestamp` over all batches (-1 if none set).
    pub max_timestamp: Timestamp,
    /// Whether any batch is transactional.
    pub has_transactional: bool,
    /// Whether any batch carries a producer id.
    pub has_producer_id: bool,
    /// CreateTime batches whose `maxTimestamp` is not their records'
    /// largest timestamp: `(position in the buffer, the right value)`. The
    /// log writes them corrected (see [`apply_fixes`]).
    pub max_timestamp_fixes: Vec<(usize, Timestamp)>,
    /// The codecs the batches use: bit `1 << id` for each codec id present.
    pub codecs: u8,
}

impl BatchesSummary {
    /// Whether every batch is in `codec`.
    pub fn only_codec(&self, codec: Compression) -> bool {
        self.codecs & !(1 << codec.id()) == 0
    }
}

/// The timestamp rules of Kafka's log validator: the topic's
/// `message.timestamp.type` and the window `message.timestamp.before.max.ms`
/// and `message.timestamp.after.max.ms` allow around the append time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampRules {
    /// The topic's `message.timestamp.type`.
    pub topic_type: TimestampType,
    /// The append time the window is measured from.
    pub now: Timestamp,
    /// How much older than `now` a CreateTime record may be.
    pub before_max_ms: u64,
    /// How much newer than `now` a CreateTime record may be.
    pub after_max_ms: u64,
}

impl TimestampRules {
    /// The rules a log with `config` applies at `now`.
    pub fn for_log(config: &LogConfig, now: Timestamp) -> TimestampRules {
        TimestampRules {
            topic_type: config.timestamp_type,
            now,
            before_max_ms: config.timestamp_before_max_ms,
            after_max_ms: config.timestamp_after_max_ms,
        }
    }

    /// Kafka's `validateTimestamp` for one record whose timestamp (the
    /// batch's `maxTimestamp` in a LogAppendTime batch) is `ts`, in a batch
    /// of type `batch_type`, at offset delta `offset`. On a CreateTime topic
    /// a record with a timestamp must lie in the window; a LogAppendTime
    /// batch from a producer is refused otherwise (on a LogAppendTime
    /// topic, or without a timestamp), exactly as Kafka decides.
    pub fn check(
        &self,
        ts: i64,
        batch_type: TimestampType,
        offset: i32,
    ) -> Result<(), RecordError> {
        if self.topic_type == TimestampType::CreateTime && ts != -1 {
            let diff = i128::from(self.now.0) - i128::from(ts);
            if diff > i128::from(self.before_max_ms) || -diff > i128::from(self.after_max_ms) {
                let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
                return Err(RecordError::TimestampOutOfRange {
                    timestamp: ts,
                    offset,
                    min: clamp(i128::from(self.now.0) - i128::from(self.before_max_ms)),
                    max: clamp(i128::from(self.now.0) + i128::from(self.after_max_ms)),
                });
            }
        } else if batch_type == TimestampType::LogAppendTime {
            return Err(RecordError::LogAppendTimeFromProducer);
        }
        Ok(())
    }
}

/// What [`validate`] enforces beyond the v2 format itself; see
/// [`crate::LogConfig`] for where each limit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationConfig {
    /// Largest batch, header included (`max.message.bytes`).
    pub max_batch_bytes: u32,
    /// Most bytes the records of one batch may decompress to.
    pub max_decompressed_bytes: u64,
    /// Whether every record needs a key (compacted topics).
    pub require_keys: bool,
    /// The timestamp rules, if timestamps are checked.
    pub timestamps: Option<TimestampRules>,
}

impl ValidationConfig {
    /// The rules a log with `config` applies to appends at `now`.
    pub fn for_log(config: &LogConfig, now: Timestamp) -> ValidationConfig {
        ValidationConfig {
            max_batch_bytes: config.max_message_bytes,
            max_decompressed_bytes: config.max_decompressed_bytes(),
            require_keys: config.require_keys,
            timestamps: Some(TimestampRules::for_log(config, now)),
        }
    }
}

/// Checks one batch's header fields and CRC. `batch` must be exactly the
/// batch's bytes; `position` is used in errors.
pub(crate) fn check_batch(
    batch: &[u8],
    header: &BatchHeader,
    position: usize,
) -> Result<(), BatchError> {
    let actual = compute_crc(batch);
    if actual != header.crc {
        return Err(BatchError::CorruptCrc {
            position,
            expected: header.crc,
            actual,
        });
    }
    if header.record_count < 1
        || header.last_offset_delta < 0
        || i64::from(header.record_count) != i64::from(header.last_offset_delta) + 1
    {
        return Err(BatchError::InvalidRecordCount {
            position,
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    Ok(())
}

/// Checks a batch read back from a segment: its CRC, and a record count
/// that fits its offsets. Unlike an appended batch, a stored one may hold
/// fewer records than its offset range (compaction keeps the base and last
/// offsets of a batch it thins out) or none at all (the emptied last batch of
/// an idempotent producer, kept for its producer state).
pub(crate) fn check_stored_batch(
    batch: &[u8],
    header: &BatchHeader,
    position: usize,
) -> Result<(), BatchError> {
    let actual = compute_crc(batch);
    if actual != header.crc {
        return Err(BatchError::CorruptCrc {
            position,
            expected: header.crc,
            actual,
        });
    }
    if header.record_count < 0
        || header.last_offset_delta < 0
        || i64::from(header.record_count) > i64::from(header.last_offset_delta) + 1
    {
        return Err(BatchError::InvalidRecordCount {
            position,
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    Ok(())
}

/// Walks the concatenated batches in `buf`, checking each one as Kafka's
/// log validator does before anything is appended:
///
/// - the header: complete, sane length, magic 2, known codec, CRC,
///   `recordCount >= 1` and `== lastOffsetDelta + 1`, a non-negative sequence
///   when it has a producer id, at most `max_batch_bytes` bytes
///   ([`BatchError`]'s format variants: Kafka's CORRUPT_MESSAGE);
/// - the records ([`BatchError::InvalidRecords`]: INVALID_RECORD): not a
///   control batch; exactly `recordCount` records, each well-formed (every
///   length within the record, the record's length consumed exactly), offset
///   deltas `0..n` in order, timestamps that do not overflow (and, with
///   [`TimestampRules`], that Kafka's timestamp rules accept: INVALID_TIMESTAMP
///   otherwise), keys when `require_keys`, nothing after the last record,
///   (a record with no key or a refused timestamp does not stop the walk:
///   [`BatchError::RecordsRefused`] lists every one),
///   and compressed records
///   decompressing to at most `max_decompressed_bytes` (streamed through one
///   64 KiB buffer, never decompressed whole).
///
/// A CreateTime batch whose `maxTimestamp` is not its records' largest
/// timestamp is to be corrected (its CRC recomputed), as Kafka does: the
/// time index, retention and ListOffsets rely on it. `buf` is not changed;
/// the corrections are listed in the summary.
///
/// An empty buffer is an error.
pub fn validate(buf: &[u8], config: &ValidationConfig) -> Result<BatchesSummary, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut summary = BatchesSummary {
        batch_count: 0,
        record_count: 0,
        size_bytes: buf.len(),
        max_timestamp: Timestamp(-1),
        has_transactional: false,
        has_producer_id: false,
        max_timestamp_fixes: Vec::new(),
        codecs: 0,
    };
    // Reused by every compressed batch of the buffer.
    let mut chunk = None;
    let mut position = 0;
    while position < buf.len() {
        let rest = &buf[position..];
        let header = BatchHeader::parse_at(rest, position)?;
        let size = header.total_size();
        if size > rest.len() {
            return Err(BatchError::Truncated {
                position,
                needed: size,
                available: rest.len(),
            });
        }
        if size > config.max_batch_bytes as usize {
            return Err(BatchError::TooLarge {
                position,
                size,
                max: config.max_batch_bytes,
            });
        }
        let batch = &rest[..size];
        check_batch(batch, &header, position)?;
        if header.has_producer_id() && header.base_sequence < 0 {
            return Err(BatchError::InvalidSequence {
                position,
                producer_id: header.producer_id,
                base_sequence: header.base_sequence,
            });
        }
        let invalid = |record_index, error| BatchError::InvalidRecords {
            position,
            record_index,
            error,
        };
        if header.is_control() {
            return Err(invalid(None, RecordError::ControlBatch));
        }
        let mut refused = Vec::new();
        let max_timestamp = check_records(
            batch,
            &header,
            config.max_decompressed_bytes,
            config.require_keys,
            config.timestamps.as_ref(),
            &mut chunk,
            &mut refused,
        )
        .map_err(|(index, error)| invalid(index, error))?;
        if !refused.is_empty() {
            return Err(BatchError::RecordsRefused {
                position,
                records: refused,
            });
        }
        if max_timestamp != header.max_timestamp {
            summary.max_timestamp_fixes.push((position, max_timestamp));
        }
        summary.batch_count += 1;
        summary.record_count += header.record_count as u64;
        summary.max_timestamp = summary.max_timestamp.max(max_timestamp);
        summary.has_transactional |= header.is_transactional();
        summary.has_producer_id |= header.has_producer_id();
        summary.codecs |= 1 << header.compression().id();
        position += size;
    }
    Ok(summary)
}

/// Applies [`BatchesSummary::max_timestamp_fixes`] to the buffer that was
/// validated (the log does the same in the copy of each header it writes).
pub fn apply_fixes(buf: &mut [u8], fixes: &[(usize, Timestamp)]) {
    for &(at, ts) in fixes {
        let size = BatchHeader::parse(&buf[at..]).map_or(0, |h| h.total_size());
        set_max_timestamp(&mut buf[at..at + size], ts);
    }
}

/// Iterates the headers of already-validated concatenated batches, yielding
/// each batch's position in the buffer and its header.
pub(crate) fn headers(buf: &[u8]) -> impl Iterator<Item = (usize, BatchHeader)> + '_ {
    let mut position = 0;
    std::iter::from_fn(move || {
        let header = BatchHeader::parse(buf.get(position..)?).ok()?;
        let at = position;
        position += header.total_size();
        Some((at, header))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{batch, simple_records};
    use proptest::prelude::*;

    /// Validates a copy of `buf` with only the size limit set.
    fn check(buf: &[u8], max_batch_bytes: u32) -> Result<BatchesSummary, BatchError> {
        validate(
            buf,
            &ValidationConfig {
                max_batch_bytes,
                max_decompressed_bytes: 1 << 30,
                require_keys: false,
                timestamps: None,
            },
        )
    }

    #[test]
    fn parses_a_real_batch() {
        let buf = batch(&simple_records(0, 3, 1000));
        let h = BatchHeader::parse(&buf).unwrap();
        assert_eq!(h.magic, 2);
        assert_eq!(h.record_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.total_size(), buf.len());
        assert_eq!(h.base_timestamp, Timestamp(1000));
        assert_eq!(h.max_timestamp, Timestamp(1002));
        assert_eq!(h.compression(), Compression::None);
        assert_eq!(h.crc, compute_crc(&buf));
        let s = check(&buf, 1 << 20).unwrap();
        assert_eq!(s.batch_count, 1);
        assert_eq!(s.record_count, 3);
    }

    #[test]
    fn stamping_keeps_the_crc_valid() {
        let mut buf = batch(&simple_records(0, 2, 5));
        set_base_offset(&mut buf, Offset(1234));
        set_partition_leader_epoch(&mut buf, LeaderEpoch(7));
        let h = BatchHeader::parse(&buf).unwrap();
        assert_eq!(h.base_offset, Offset(1234));
        assert_eq!(h.partition_leader_epoch, LeaderEpoch(7));
        assert_eq!(h.last_offset(), Offset(1235));
        check(&buf, 1 << 20).unwrap();
    }

    #[test]
    fn rejects_bad_input_precisely() {
        let good = batch(&simple_records(0, 2, 5));
        assert!(matches!(check(&[], 100), Err(BatchError::Empty)));
        assert!(matches!(
            check(&good[..good.len() - 1], 1 << 20),
            Err(BatchError::Truncated { position: 0, .. })
        ));
        assert!(matches!(
            check(&good[..30], 1 << 20),
            Err(BatchError::Truncated { .. })
        ));

        let mut bad = good.clone();
        bad[MAGIC_OFFSET] = 1;
        assert!(matches!(
            check(&bad, 1 << 20),
            Err(BatchError::UnsupportedMagic { magic: 1, .. })
        ));

        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            check(&bad, 1 << 20),
            Err(BatchError::CorruptCrc { .. })
        ));

        let mut bad = good.clone();
        bad[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            check(&bad, 1 << 20),
            Err(BatchError::InvalidLength { length: 10, .. })
        ));

        let mut bad = good.clone();
        bad[RECORD_COUNT_OFFSET..RECORD_COUNT_OFFSET + 4].copy_from_slice(&5i32.to_be_bytes());
        let crc = compute_crc(&bad);
        bad[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            check(&bad, 1 << 20),
            Err(BatchError::InvalidRecordCount {
                record_count: 5,
                ..
            })
        ));

        let mut bad = good.clone();
        bad[ATTRIBUTES_OFFSET + 1] |= 0x07;
        let crc = compute_crc(&bad);
        bad[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            check(&bad, 1 << 20),
            Err(BatchError::UnsupportedCompression { codec: 7, .. })
        ));

        assert!(matches!(
            check(&good, (good.len() - 1) as u32),
            Err(BatchError::TooLarge { .. })
        ));

        // The second batch's error reports its position.
        let mut two = good.clone();
        two.extend_from_slice(&good[..good.len() - 3]);
        assert!(matches!(
            check(&two, 1 << 20),
            Err(BatchError::Truncated { position, .. }) if position == good.len()
        ));
    }

    #[test]
    fn sequences_wrap_to_zero() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    }

    proptest! {
        #[test]
        fn validate_accepts_concatenations(counts in proptest::collection::vec(1usize..20, 1..10)) {
            let mut buf = Vec::new();
            let mut total = 0u64;
            for (i, n) in counts.iter().enumerate() {
                buf.extend_from_slice(&batch(&simple_records(0, *n, i as i64 * 100)));
                total += *n as u64;
            }
            let s = check(&buf, 1 << 20).unwrap();
            prop_assert_eq!(s.batch_count, counts.len());
            prop_assert_eq!(s.record_count, total);
            prop_assert_eq!(headers(&buf).count(), counts.len());
        }

        #[test]
        fn any_single_byte_flip_is_detected(at in 0usize..200, flip in 1u8..=255) {
            let good = batch(&simple_records(0, 4, 1));
            let at = at % good.len();
            let mut bad = good.clone();
            bad[at] ^= flip;
            // baseOffset and partitionLeaderEpoch are outside the CRC by design.
            if at >= 8 && !(12..16).contains(&at) {
                prop_assert!(check(&bad, 1 << 20).is_err());
            }
        }
    }
}
