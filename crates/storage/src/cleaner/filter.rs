//! Thinning one batch: keeping it as stored, dropping it, or rewriting it
//! with the records that survive.
//!
//! A rewritten batch keeps what its header says about offsets and
//! producers, as Kafka's cleaner does: the base offset and the last offset
//! delta (the batch still spans the same offsets, so a reader continues at
//! the same next offset), the producer id, epoch and base sequence (the
//! producer's last sequence is still base + last delta), the partition
//! leader epoch and the codec. The record count, the records (re-encoded
//! with their own offsets and timestamps), the length, the base timestamp,
//! a CreateTime batch's max timestamp and the CRC change.
//!
//! Tombstones follow Kafka's rule since 3.1 (KIP-529/534): the first
//! cleaning that keeps a tombstone stamps its batch with a delete horizon,
//! `now + delete.retention.ms`, held in the base timestamp with attribute
//! bit 6 set (record timestamps stay `base + delta`, so readers see them
//! unchanged); a cleaning at or after the horizon removes the tombstones.

use bytes::Bytes;

use crate::attributes::COMPRESSION_MASK;
use crate::batch::{self, BatchHeader, TimestampType, HEADER_LEN, LOG_OVERHEAD};
use crate::builder::{compress, encode_record, Fields};
use crate::config::CompressionLevels;
use crate::error::BatchError;
use crate::header::{
    ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, LENGTH_OFFSET, MAX_TIMESTAMP_OFFSET,
    RECORD_COUNT_OFFSET,
};
use crate::records::{Record, RecordIter};

/// Attribute bit 6: the base timestamp is the batch's delete horizon.
pub(crate) const DELETE_HORIZON_FLAG: i16 = 0x40;

/// The delete horizon a cleaning stamped on the batch, if any.
pub(crate) fn delete_horizon(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON_FLAG != 0).then_some(h.base_timestamp.0)
}

/// A record with a key and no value.
fn is_tombstone(r: &Record) -> bool {
    r.key.is_some() && r.value.is_none()
}

/// What becomes of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Filtered {
    /// Every record stays as it is: the batch is copied as stored.
    Unchanged,
    /// No record stays and nothing needs the batch.
    Removed,
    /// These bytes replace the batch (possibly no records, just the header).
    Rewritten(Vec<u8>),
}

/// Counts of one batch's records.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Records kept.
    pub kept: u64,
    /// Records removed because a later record has their key.
    pub superseded: u64,
    /// Tombstones removed past their delete horizon.
    pub tombstones: u64,
}

/// How a cleaning treats batches.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// The cleaning's clock (ms).
    pub now: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: u64,
}

/// Where a record stands against the cleaning's key map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Past the mapped section: kept untouched, tombstone or not (its key's
    /// older records may still be there).
    Unmapped,
    /// A later record has its key.
    Superseded,
    /// The latest record of its key (or keyless).
    Latest,
}

/// Decides every record of `batch` (one whole stored batch, header `h`)
/// by its `standing`: superseded records go; latest tombstones go once the
/// batch's delete horizon has passed, and a batch keeping a latest
/// tombstone without a horizon gets one. With `keep_header`, a batch left without
/// records is kept as its bare header (the last batch of an idempotent
/// producer: its epoch and sequence must survive for the producer state to
/// be rebuilt from the log). Control batches are kept as they are.
pub(crate) fn filter_batch(
    batch: &[u8],
    h: &BatchHeader,
    keep_header: bool,
    rules: Rules,
    mut standing: impl FnMut(&Record) -> Standing,
) -> Result<(Filtered, Counts), BatchError> {
    let mut counts = Counts::default();
    if h.is_control() {
        counts.kept = h.record_count.max(0) as u64;
        return Ok((Filtered::Unchanged, counts));
    }
    let horizon = delete_horizon(h);
    let expired = horizon.is_some_and(|t| rules.now >= t);
    // Stored batches were validated when appended; the limit is not
    // applied again (max.message.bytes may have been lowered since).
    let mut kept = Vec::new();
    let mut keeps_tombstone = false;
    for r in RecordIter::new(Bytes::copy_from_slice(batch), u64::MAX)? {
        let r = r?;
        match standing(&r) {
            Standing::Superseded => counts.superseded += 1,
            Standing::Latest if is_tombstone(&r) && expired => counts.tombstones += 1,
            Standing::Latest => {
                keeps_tombstone |= is_tombstone(&r);
                kept.push(r);
            }
            Standing::Unmapped => kept.push(r),
        }
    }
    counts.kept = kept.len() as u64;
    let removed = counts.superseded + counts.tombstones > 0;
    let needs_horizon = keeps_tombstone && horizon.is_none();
    let filtered = if !removed && !needs_horizon {
        Filtered::Unchanged
    } else if kept.is_empty() && !keep_header {
        Filtered::Removed
    } else if kept.is_empty() {
        Filtered::Rewritten(empty_batch(batch, h))
    } else {
        let new_horizon = keeps_tombstone.then(|| {
            horizon.unwrap_or_else(|| {
                let retention = rules.delete_retention_ms.min(i64::MAX as u64) as i64;
                rules.now.saturating_add(retention)
            })
        });
        Filtered::Rewritten(rewrite(batch, h, &kept, new_horizon)?)
    };
    Ok((filtered, counts))
}

fn put_i16(buf: &mut [u8], at: usize, v: i16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put_i32(buf: &mut [u8], at: usize, v: i32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn put_i64(buf: &mut [u8], at: usize, v: i64) {
    buf[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// `batch` with only the `kept` records (not empty), in the same codec;
/// stamped with `horizon` if given.
fn rewrite(
    batch: &[u8],
    h: &BatchHeader,
    kept: &[Record],
    horizon: Option<i64>,
) -> Result<Vec<u8>, BatchError> {
    let unencodable = |reason| BatchError::Unencodable { reason };
    let create_time = h.timestamp_type() == TimestampType::CreateTime;
    let base_timestamp = match (horizon, create_time) {
        (Some(t), _) => t,
        (None, true) => kept[0].timestamp.0,
        // The records' own timestamps are not used.
        (None, false) => h.max_timestamp.0,
    };
    let mut records = Vec::new();
    for r in kept {
        let offset_delta = i32::try_from(r.offset.0 - h.base_offset.0)
            .map_err(|_| unencodable("offset delta out of range"))?;
        let timestamp_delta = if create_time {
            r.timestamp
                .0
                .checked_sub(base_timestamp)
                .ok_or(unencodable("timestamp delta out of range"))?
        } else {
            0
        };
        let (count, bytes) = r.headers.encoded();
        encode_record(
            &mut records,
            offset_delta,
            timestamp_delta,
            r.key.as_deref(),
            r.value.as_deref(),
            Fields::Encoded { count, bytes },
        )?;
    }
    let mut out = Vec::with_capacity(HEADER_LEN + records.len());
    out.extend_from_slice(&batch[..HEADER_LEN]);
    // The codec's default levels, as Kafka's cleaner writes retained
    // batches (the topic's `compression.*.level` apply to recompression on
    // append).
    compress(
        h.compression(),
        CompressionLevels::default(),
        &records,
        &mut out,
    )
    .map_err(|_| unencodable("compression failed"))?;
    let length = i32::try_from(out.len() - LOG_OVERHEAD)
        .map_err(|_| unencodable("a batch over 2^31-1 bytes"))?;
    put_i32(&mut out, LENGTH_OFFSET, length);
    put_i32(&mut out, RECORD_COUNT_OFFSET, kept.len() as i32);
    let mut attributes = h.attributes & !DELETE_HORIZON_FLAG;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG;
    }
    put_i16(&mut out, ATTRIBUTES_OFFSET, attributes);
    put_i64(&mut out, BASE_TIMESTAMP_OFFSET, base_timestamp);
    if create_time {
        let max = kept.iter().map(|r| r.timestamp.0).max().unwrap_or(-1);
        put_i64(&mut out, MAX_TIMESTAMP_OFFSET, max);
    }
    batch::update_crc(&mut out);
    Ok(out)
}

/// The header of `batch` alone, holding no record, as Kafka writes an
/// emptied batch: uncompressed (there is nothing to decompress), both
/// timestamps the batch's max timestamp.
fn empty_batch(batch: &[u8], h: &BatchHeader) -> Vec<u8> {
    let mut out = batch[..HEADER_LEN].to_vec();
    put_i32(&mut out, LENGTH_OFFSET, (HEADER_LEN - LOG_OVERHEAD) as i32);
    put_i32(&mut out, RECORD_COUNT_OFFSET, 0);
    let attributes = h.attributes & !DELETE_HORIZON_FLAG & !COMPRESSION_MASK;
    put_i16(&mut out, ATTRIBUTES_OFFSET, attributes);
    put_i64(&mut out, BASE_TIMESTAMP_OFFSET, h.max_timestamp.0);
    batch::update_crc(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use model::{Offset, ProducerEpoch, ProducerId, Timestamp};

    use super::*;
    use crate::batch::{check_stored_batch, Compression};
    use crate::builder::BatchBuilder;

    const RULES: Rules = Rules {
        now: 50_000,
        delete_retention_ms: 500,
    };

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// A stored-looking batch at offset 100 of records `k{i % 3}` = `v{i}`,
    /// every fourth one a tombstone, with a header on each.
    fn stored(codec: Compression, n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(codec).producer(ProducerId(9), ProducerEpoch(2), 40);
        for i in 0..n {
            let key = format!("k{}", i % 3);
            let value = format!("v{i}");
            let value = (i % 4 != 3).then_some(value.as_bytes());
            b.append(
                Timestamp(1_000 + (i as i64 * 7) % 5),
                Some(key.as_bytes()),
                value,
                &[(b"h", Some(b"x"))],
            )
            .unwrap();
        }
        let mut out = b.build().unwrap().to_vec();
        batch::set_base_offset(&mut out, Offset(100));
        out
    }

    fn records(batch: &[u8]) -> Vec<Record> {
        RecordIter::new(Bytes::copy_from_slice(batch), u64::MAX)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn rewritten_batches_keep_offsets_producer_and_codec() {
        for codec in CODECS {
            let original = stored(codec, 10);
            let h = BatchHeader::parse(&original).unwrap();
            let all = records(&original);
            // Keep the odd offsets only.
            let (filtered, counts) = filter_batch(&original, &h, false, RULES, |r| {
                if r.offset.0 % 2 == 0 {
                    Standing::Superseded
                } else {
                    Standing::Latest
                }
            })
            .unwrap();
            assert_eq!(counts.kept, 5);
            assert_eq!(counts.superseded, 5);
            let Filtered::Rewritten(bytes) = filtered else {
                panic!("{codec:?}: {filtered:?}")
            };
            let n = BatchHeader::parse(&bytes).unwrap();
            check_stored_batch(&bytes, &n, 0).unwrap();
            assert_eq!(n.total_size(), bytes.len());
            assert_eq!(n.compression(), codec);
            assert_eq!(n.base_offset, h.base_offset);
            assert_eq!(n.last_offset_delta, h.last_offset_delta);
            assert_eq!(n.record_count, 5);
            assert_eq!(
                (n.producer_id, n.producer_epoch, n.base_sequence),
                (h.producer_id, h.producer_epoch, h.base_sequence)
            );
            let kept: Vec<Record> = all.into_iter().filter(|r| r.offset.0 % 2 == 1).collect();
            assert_eq!(records(&bytes), kept, "{codec:?}");
            let max = kept.iter().map(|r| r.timestamp).max().unwrap();
            assert_eq!(n.max_timestamp, max);
            // Offset 103 is a tombstone: the batch now carries its horizon.
            assert_eq!(delete_horizon(&n), Some(RULES.now + 500));
        }
    }

    #[test]
    fn untouched_batches_are_copied_emptied_ones_dropped_or_kept_bare() {
        let original = stored(Compression::Lz4, 3);
        let h = BatchHeader::parse(&original).unwrap();
        let (f, c) = filter_batch(&original, &h, false, RULES, |_| Standing::Latest).unwrap();
        assert_eq!((f, c.kept), (Filtered::Unchanged, 3));
        let (f, c) = filter_batch(&original, &h, false, RULES, |_| Standing::Superseded).unwrap();
        assert_eq!((f, c.superseded), (Filtered::Removed, 3));
        let (f, _) = filter_batch(&original, &h, true, RULES, |_| Standing::Superseded).unwrap();
        let Filtered::Rewritten(bare) = f else {
            panic!("{f:?}")
        };
        assert_eq!(bare.len(), HEADER_LEN);
        let n = BatchHeader::parse(&bare).unwrap();
        check_stored_batch(&bare, &n, 0).unwrap();
        assert_eq!(n.record_count, 0);
        assert_eq!(n.last_offset(), h.last_offset());
        assert_eq!(n.last_sequence(), h.last_sequence());
        assert_eq!(n.max_timestamp, h.max_timestamp);
        assert!(records(&bare).is_empty());
    }

    #[test]
    fn tombstones_get_a_horizon_and_go_once_it_passed() {
        for codec in CODECS {
            let original = stored(codec, 8);
            let all = records(&original);
            let h = BatchHeader::parse(&original).unwrap();
            // Nothing superseded, but tombstones (offsets 103, 107): stamped.
            let (f, c) = filter_batch(&original, &h, false, RULES, |_| Standing::Latest).unwrap();
            assert_eq!((c.kept, c.tombstones), (8, 0));
            let Filtered::Rewritten(stamped) = f else {
                panic!("{f:?}")
            };
            let sh = BatchHeader::parse(&stamped).unwrap();
            assert_eq!(delete_horizon(&sh), Some(RULES.now + 500));
            assert_eq!(records(&stamped), all, "timestamps read back unchanged");
            // Before the horizon: copied as is; at it: the tombstones go.
            let early = Rules {
                now: RULES.now + 499,
                ..RULES
            };
            let (f, _) = filter_batch(&stamped, &sh, false, early, |_| Standing::Latest).unwrap();
            assert_eq!(f, Filtered::Unchanged);
            let late = Rules {
                now: RULES.now + 500,
                ..RULES
            };
            let (f, c) = filter_batch(&stamped, &sh, false, late, |_| Standing::Latest).unwrap();
            assert_eq!((c.kept, c.tombstones), (6, 2));
            let Filtered::Rewritten(thinned) = f else {
                panic!("{f:?}")
            };
            let th = BatchHeader::parse(&thinned).unwrap();
            check_stored_batch(&thinned, &th, 0).unwrap();
            assert_eq!(delete_horizon(&th), None, "no tombstone left");
            let live: Vec<Record> = all.iter().filter(|r| r.value.is_some()).cloned().collect();
            assert_eq!(records(&thinned), live);
            // Past the mapped section nothing is touched, horizon or not.
            let (f, c) = filter_batch(&stamped, &sh, false, late, |_| Standing::Unmapped).unwrap();
            assert_eq!((f, c.kept), (Filtered::Unchanged, 8));
            let (f, _) = filter_batch(&original, &h, false, RULES, |_| Standing::Unmapped).unwrap();
            assert_eq!(f, Filtered::Unchanged, "no horizon for unmapped tombstones");
        }
    }
}
