//! Record-level access inside one batch: decompression and the timestamp
//! scans behind ListOffsets. Not on the produce/fetch hot path.
//!
//! A v2 record is `length varint | attributes i8 | timestampDelta varlong |
//! offsetDelta varint | key | value | headers`; only the first fields are
//! decoded, the rest is skipped using `length`.

use std::borrow::Cow;
use std::io::{self, Read};

use model::{Offset, Timestamp};

use crate::batch::{BatchHeader, Compression, TimestampType, HEADER_LEN};
use crate::error::BatchError;

/// The xerial snappy framing used by the Java client and librdkafka.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\0";
/// Magic + version i32 + compatible-version i32.
const XERIAL_HEADER_LEN: usize = 16;

fn decompress_error(compression: Compression) -> impl Fn(io::Error) -> BatchError {
    move |source| BatchError::Decompress {
        compression,
        source,
    }
}

fn invalid_data(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The uncompressed records section of `batch` (one whole batch).
pub fn decompressed_records(batch: &[u8]) -> Result<Cow<'_, [u8]>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let end = header.total_size().min(batch.len());
    let data = &batch[HEADER_LEN.min(end)..end];
    let compression = header.compression();
    let err = decompress_error(compression);
    let out = match compression {
        Compression::None => return Ok(Cow::Borrowed(data)),
        Compression::Gzip => {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(data)
                .read_to_end(&mut out)
                .map_err(err)?;
            out
        }
        Compression::Snappy => decompress_snappy(data).map_err(err)?,
        Compression::Lz4 => {
            let mut out = Vec::new();
            lz4_flex::frame::FrameDecoder::new(data)
                .read_to_end(&mut out)
                .map_err(err)?;
            out
        }
        Compression::Zstd => zstd::stream::decode_all(data).map_err(err)?,
    };
    Ok(Cow::Owned(out))
}

fn decompress_snappy(data: &[u8]) -> io::Result<Vec<u8>> {
    let raw = |chunk: &[u8]| {
        snap::raw::Decoder::new()
            .decompress_vec(chunk)
            .map_err(|e| invalid_data(e.to_string()))
    };
    if data.len() < XERIAL_HEADER_LEN || &data[..XERIAL_MAGIC.len()] != XERIAL_MAGIC {
        return raw(data);
    }
    let mut out = Vec::new();
    let mut rest = &data[XERIAL_HEADER_LEN..];
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(invalid_data("truncated xerial snappy block length"));
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let chunk = rest
            .get(4..4 + len)
            .ok_or_else(|| invalid_data("truncated xerial snappy block"))?;
        out.extend_from_slice(&raw(chunk)?);
        rest = &rest[4 + len..];
    }
    Ok(out)
}

fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, BatchError> {
    let mut value: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = *buf.get(*pos).ok_or(BatchError::MalformedRecord {
            reason: "truncated varint",
        })?;
        *pos += 1;
        if shift > 63 {
            return Err(BatchError::MalformedRecord {
                reason: "varint too long",
            });
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    // Kafka varints are zig-zag encoded so small negatives stay short.
    Ok(((value >> 1) as i64) ^ -((value & 1) as i64))
}

/// One record's position in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordTimestamp {
    /// The record's offset.
    pub offset: Offset,
    /// The record's timestamp (the batch's `maxTimestamp` for LogAppendTime).
    pub timestamp: Timestamp,
}

/// Calls `f` with the offset and timestamp of each record of one whole
/// `batch`, in order, stopping early when `f` returns `false`.
pub fn for_each_record(
    batch: &[u8],
    mut f: impl FnMut(RecordTimestamp) -> bool,
) -> Result<(), BatchError> {
    let header = BatchHeader::parse(batch)?;
    let records = decompressed_records(batch)?;
    let log_append = header.timestamp_type() == TimestampType::LogAppendTime;
    let mut pos = 0;
    for _ in 0..header.record_count.max(0) {
        let length = read_varlong(&records, &mut pos)?;
        let start = pos;
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&e| e <= records.len())
            .ok_or(BatchError::MalformedRecord {
                reason: "record length out of bounds",
            })?;
        // The attributes byte is unused by every record format so far.
        pos += 1;
        let timestamp_delta = read_varlong(&records, &mut pos)?;
        let offset_delta = read_varlong(&records, &mut pos)?;
        if pos > end {
            return Err(BatchError::MalformedRecord {
                reason: "record shorter than its fields",
            });
        }
        let timestamp = if log_append {
            header.max_timestamp
        } else {
            Timestamp(header.base_timestamp.0.wrapping_add(timestamp_delta))
        };
        let rt = RecordTimestamp {
            offset: header.base_offset.plus(offset_delta),
            timestamp,
        };
        if !f(rt) {
            return Ok(());
        }
        pos = end;
    }
    Ok(())
}

/// The first record of `batch` at or after `min_offset` whose timestamp is
/// `>= target` (Kafka's ListOffsets semantics).
pub fn find_offset_for_timestamp(
    batch: &[u8],
    target: Timestamp,
    min_offset: Offset,
) -> Result<Option<RecordTimestamp>, BatchError> {
    let mut found = None;
    for_each_record(batch, |r| {
        if r.offset >= min_offset && r.timestamp >= target {
            found = Some(r);
            false
        } else {
            true
        }
    })?;
    Ok(found)
}

/// The first record of `batch` at or after `min_offset` holding the batch's
/// largest record timestamp.
pub fn max_timestamp_record(
    batch: &[u8],
    min_offset: Offset,
) -> Result<Option<RecordTimestamp>, BatchError> {
    let mut best: Option<RecordTimestamp> = None;
    for_each_record(batch, |r| {
        if r.offset >= min_offset && best.is_none_or(|b| r.timestamp > b.timestamp) {
            best = Some(r);
        }
        true
    })?;
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{batch_with, records_with_timestamps};
    use proptest::prelude::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn every_codec_round_trips_records() {
        let ts = [50, 10, 70, 70, 20];
        for codec in CODECS {
            let buf = batch_with(&records_with_timestamps(0, &ts), codec);
            assert_eq!(BatchHeader::parse(&buf).unwrap().compression(), codec);
            let mut seen = Vec::new();
            for_each_record(&buf, |r| {
                seen.push((r.offset.0, r.timestamp.0));
                true
            })
            .unwrap();
            assert_eq!(
                seen,
                vec![(0, 50), (1, 10), (2, 70), (3, 70), (4, 20)],
                "{codec:?}"
            );
            let first = find_offset_for_timestamp(&buf, Timestamp(60), Offset(0)).unwrap();
            assert_eq!(first.map(|r| r.offset), Some(Offset(2)));
            let max = max_timestamp_record(&buf, Offset(0)).unwrap().unwrap();
            assert_eq!((max.offset, max.timestamp), (Offset(2), Timestamp(70)));
        }
    }

    #[test]
    fn raw_snappy_is_accepted() {
        let payload = b"hello hello hello hello".to_vec();
        let compressed = snap::raw::Encoder::new().compress_vec(&payload).unwrap();
        assert_eq!(decompress_snappy(&compressed).unwrap(), payload);
    }

    #[test]
    fn varints_decode_zigzag() {
        let mut pos = 0;
        assert_eq!(read_varlong(&[0x01], &mut pos).unwrap(), -1);
        pos = 0;
        assert_eq!(read_varlong(&[0xac, 0x02], &mut pos).unwrap(), 150);
        pos = 0;
        assert!(read_varlong(&[0x80], &mut pos).is_err());
    }

    proptest! {
        #[test]
        fn timestamp_search_matches_brute_force(
            ts in proptest::collection::vec(0i64..1000, 1..30),
            target in -10i64..1100,
            codec in 0usize..5,
        ) {
            let buf = batch_with(&records_with_timestamps(0, &ts), CODECS[codec]);
            let expected = ts.iter().position(|t| *t >= target).map(|i| (Offset(i as i64), Timestamp(ts[i])));
            let got = find_offset_for_timestamp(&buf, Timestamp(target), Offset(0)).unwrap()
                .map(|r| (r.offset, r.timestamp));
            prop_assert_eq!(got, expected);
        }
    }
}
