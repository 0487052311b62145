//! Record-level access inside batches: the record parser, streaming
//! decompression, Produce's record validation ([`crate::batch::validate`]
//! calls it), the [`RecordIter`] reader and the timestamp scans behind
//! ListOffsets.
//!
//! Compressed records are never decompressed into one buffer: they are
//! streamed through a fixed 64 KiB chunk ([`CHUNK_BYTES`]) and parsed across
//! chunk boundaries, so memory stays bounded whatever a batch claims or
//! decompresses to.

use model::{Offset, Timestamp};

use crate::attributes::TimestampType;
use crate::error::BatchError;
use crate::header::{BatchHeader, HEADER_LEN};

mod decompress;
mod input;
mod iter;
mod parse;
mod snappy;
pub(crate) mod validate;
mod varint;

#[cfg(test)]
mod tests;

use decompress::Decoder;
pub use input::CHUNK_BYTES;
use input::{Input, SliceInput, StreamInput};
pub use iter::{Header, Headers, Record, RecordIter};
pub(crate) use snappy::XERIAL_MAGIC;
pub(crate) use varint::{put_varint, put_varlong, varint_len, varlong_len};

/// One record's position in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordTimestamp {
    /// The record's offset.
    pub offset: Offset,
    /// The record's timestamp (the batch's `maxTimestamp` for LogAppendTime).
    pub timestamp: Timestamp,
}

/// Calls `f` with the offset and timestamp of each record of one whole
/// `batch`, in order, stopping early (and decompressing no further) when `f`
/// returns `false`.
///
/// Stored batches were validated when appended, so the decompressed size is
/// not limited here; memory is (one 64 KiB chunk plus the codec's window).
pub fn for_each_record(
    batch: &[u8],
    f: impl FnMut(RecordTimestamp) -> bool,
) -> Result<(), BatchError> {
    let header = BatchHeader::parse(batch)?;
    let end = header.total_size().min(batch.len());
    let data = &batch[HEADER_LEN.min(end)..end];
    let compression = header.compression();
    let fault = |error| BatchError::InvalidRecords {
        position: 0,
        record_index: Some(0),
        error,
    };
    match Decoder::new(compression, data).map_err(fault)? {
        None => scan(&mut SliceInput::new(data), &header, f),
        Some(decoder) => {
            let mut input = StreamInput::new(
                decoder,
                compression,
                vec![0u8; CHUNK_BYTES].into_boxed_slice(),
                u64::MAX,
            );
            scan(&mut input, &header, f)
        }
    }
}

fn scan<I: Input>(
    input: &mut I,
    header: &BatchHeader,
    mut f: impl FnMut(RecordTimestamp) -> bool,
) -> Result<(), BatchError> {
    let log_append = header.timestamp_type() == TimestampType::LogAppendTime;
    for i in 0..header.record_count.max(0) {
        let r = parse::read_record(input).map_err(|error| BatchError::InvalidRecords {
            position: 0,
            record_index: Some(i as u32),
            error,
        })?;
        let timestamp = if log_append {
            header.max_timestamp
        } else {
            Timestamp(header.base_timestamp.0.wrapping_add(r.timestamp_delta))
        };
        let rt = RecordTimestamp {
            offset: header.base_offset.plus(i64::from(r.offset_delta)),
            timestamp,
        };
        if !f(rt) {
            return Ok(());
        }
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
