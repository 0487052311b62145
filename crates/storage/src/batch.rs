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
//!
//! The header ([`BatchHeader`]) and its attribute bits are defined below the
//! record layer, which reads them; this module adds the work on whole
//! batches: CRCs, stamping in place, and Produce's [`validate`].

use model::{LeaderEpoch, Offset, Timestamp};

use crate::attributes::TIMESTAMP_TYPE_FLAG;
pub use crate::attributes::{Compression, TimestampType, CONTROL_FLAG, TRANSACTIONAL_FLAG};
use crate::config::LogConfig;
use crate::error::{BatchError, RecordError};
use crate::header::{
    i16_at, ATTRIBUTES_OFFSET, CRC_OFFSET, MAX_TIMESTAMP_OFFSET, PARTITION_LEADER_EPOCH_OFFSET,
};
pub use crate::header::{increment_sequence, BatchHeader, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};
use crate::records::validate::check_records;
pub use crate::records::validate::TimestampRules;

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
    use crate::header::{LENGTH_OFFSET, MAGIC_OFFSET, RECORD_COUNT_OFFSET};
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
