//! Building v2 record batches on the server side: the group log, the Pulsar
//! front end and tests write batches with [`BatchBuilder`] and read them with
//! [`crate::records::RecordIter`].

use std::io::Write;

use bytes::BytesMut;
use model::{ProducerEpoch, ProducerId, Timestamp};

use crate::batch::{update_crc, BatchesSummary, Compression, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};
use crate::config::CompressionLevels;
use crate::error::BatchError;
use crate::records::RecordIter;
use crate::records::{put_varint, put_varlong, varint_len, varlong_len, XERIAL_MAGIC};

/// Uncompressed bytes per xerial snappy block, as the Java client writes.
const XERIAL_BLOCK: usize = 32 * 1024;

/// A header of a record to append: key (never null) and value.
pub type HeaderRef<'a> = (&'a [u8], Option<&'a [u8]>);

/// Accumulates records and encodes them as one v2 batch (CreateTime
/// timestamps, offsets from 0; the log assigns the real offsets).
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    compression: Compression,
    levels: CompressionLevels,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    base_sequence: i32,
    /// Transactional and control bits of the attributes.
    flags: i16,
    /// The encoded records, uncompressed.
    records: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl BatchBuilder {
    /// An empty batch whose records will be compressed with `compression`.
    pub fn new(compression: Compression) -> BatchBuilder {
        BatchBuilder {
            compression,
            levels: CompressionLevels::default(),
            producer_id: ProducerId(-1),
            producer_epoch: ProducerEpoch(-1),
            base_sequence: -1,
            flags: 0,
            records: Vec::new(),
            count: 0,
            base_timestamp: -1,
            max_timestamp: -1,
        }
    }

    /// Marks the batch as an idempotent producer's, its first record having
    /// sequence `base_sequence`.
    pub fn producer(mut self, id: ProducerId, epoch: ProducerEpoch, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets attribute bits besides the codec: [`crate::batch::TRANSACTIONAL_FLAG`]
    /// and [`crate::batch::CONTROL_FLAG`].
    pub fn flags(mut self, flags: i16) -> Self {
        self.flags = flags;
        self
    }

    /// Compresses with these levels (Kafka's `compression.*.level`)
    /// instead of the codecs' defaults.
    pub fn levels(mut self, levels: CompressionLevels) -> Self {
        self.levels = levels;
        self
    }

    /// The largest record timestamp appended (-1 if none).
    pub fn max_timestamp(&self) -> Timestamp {
        Timestamp(self.max_timestamp)
    }

    /// Number of records appended.
    pub fn record_count(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends a record. Fails only for sizes the format cannot express
    /// (lengths over `i32::MAX`, more than `i32::MAX` records).
    pub fn append(
        &mut self,
        timestamp: Timestamp,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderRef<'_>],
    ) -> Result<(), BatchError> {
        self.append_record(timestamp, key, value, Fields::List(headers))
    }

    fn append_record(
        &mut self,
        timestamp: Timestamp,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: Fields<'_, '_>,
    ) -> Result<(), BatchError> {
        let too_big = |reason| BatchError::Unencodable { reason };
        if self.count == i32::MAX {
            return Err(too_big("more than 2^31-1 records"));
        }
        if self.count == 0 {
            self.base_timestamp = timestamp.0;
        }
        let delta = timestamp
            .0
            .checked_sub(self.base_timestamp)
            .ok_or(too_big("timestamps too far apart"))?;
        encode_record(&mut self.records, self.count, delta, key, value, headers)?;
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp.0);
        Ok(())
    }

    /// Encodes the batch: header, CRC and (compressed) records.
    /// [`BatchError::Empty`] if no record was appended.
    pub fn build(&self) -> Result<BytesMut, BatchError> {
        if self.count == 0 {
            return Err(BatchError::Empty);
        }
        let mut out = Vec::with_capacity(HEADER_LEN + self.records.len() / 2);
        out.resize(HEADER_LEN, 0);
        compress(self.compression, self.levels, &self.records, &mut out).map_err(|_| {
            BatchError::Unencodable {
                reason: "compression failed",
            }
        })?;
        let batch_length =
            i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| BatchError::Unencodable {
                reason: "a batch over 2^31-1 bytes",
            })?;
        let mut h = &mut out[..HEADER_LEN];
        let mut put = |bytes: &[u8]| {
            let (field, rest) = std::mem::take(&mut h).split_at_mut(bytes.len());
            field.copy_from_slice(bytes);
            h = rest;
        };
        put(&0i64.to_be_bytes()); // baseOffset: the log assigns it
        put(&batch_length.to_be_bytes());
        put(&(-1i32).to_be_bytes()); // partitionLeaderEpoch: the log stamps it
        put(&[MAGIC_V2 as u8]);
        put(&0u32.to_be_bytes()); // crc, below
        put(&(i16::from(self.compression.id()) | self.flags).to_be_bytes()); // CreateTime
        put(&(self.count - 1).to_be_bytes());
        put(&self.base_timestamp.to_be_bytes());
        put(&self.max_timestamp.to_be_bytes());
        put(&self.producer_id.0.to_be_bytes());
        put(&self.producer_epoch.0.to_be_bytes());
        put(&self.base_sequence.to_be_bytes());
        put(&self.count.to_be_bytes());
        update_crc(&mut out);
        Ok(BytesMut::from(bytes::Bytes::from(out)))
    }
}

/// A record's headers as [`BatchBuilder`] and [`encode_record`] take them.
#[derive(Clone, Copy)]
pub(crate) enum Fields<'a, 'b> {
    /// Key and value of each.
    List(&'a [HeaderRef<'b>]),
    /// Already encoded as a record holds them (after the count).
    Encoded { count: i32, bytes: &'a [u8] },
}

/// Re-encodes validated batches in `target`, one batch out per batch in,
/// with the same records (keys, values, headers, timestamps, order) and
/// the same producer id, epoch and base sequence, as Kafka's log validator
/// does when `compression.type` names another codec than the producer's.
/// Returns the new batches and their summary (`size_bytes` and the codec
/// updated; offsets are assigned by the log as for any append).
pub(crate) fn recompress(
    batches: &[u8],
    summary: &BatchesSummary,
    target: Compression,
    levels: CompressionLevels,
    max_decompressed_bytes: u64,
) -> Result<(Vec<u8>, BatchesSummary), BatchError> {
    let mut out = Vec::with_capacity(batches.len());
    let mut max_timestamp = model::Timestamp(-1);
    for (at, h) in crate::batch::headers(batches) {
        let one = bytes::Bytes::copy_from_slice(&batches[at..at + h.total_size()]);
        let mut builder = BatchBuilder::new(target).levels(levels).producer(
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
        );
        for record in RecordIter::new(one, max_decompressed_bytes)? {
            let r = record?;
            let (count, bytes) = r.headers.encoded();
            builder.append_record(
                r.timestamp,
                r.key.as_deref(),
                r.value.as_deref(),
                Fields::Encoded { count, bytes },
            )?;
        }
        max_timestamp = max_timestamp.max(builder.max_timestamp());
        out.extend_from_slice(&builder.build()?);
    }
    let summary = BatchesSummary {
        size_bytes: out.len(),
        max_timestamp,
        max_timestamp_fixes: Vec::new(),
        codecs: 1 << target.id(),
        ..summary.clone()
    };
    Ok((out, summary))
}

/// Appends one v2 record to `out`: length, attributes, `timestamp_delta`,
/// `offset_delta`, key, value and headers. Fails only for sizes the format
/// cannot express.
pub(crate) fn encode_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: Fields<'_, '_>,
) -> Result<(), BatchError> {
    let too_big = |reason| BatchError::Unencodable { reason };
    let delta = timestamp_delta;
    let len = |b: Option<&[u8]>| -> Result<i32, BatchError> {
        b.map_or(Ok(-1), |b| {
            i32::try_from(b.len()).map_err(|_| too_big("a field over 2^31-1 bytes"))
        })
    };
    let field_size = |l: i32| varint_len(l) as u64 + l.max(0) as u64;
    let (key_len, value_len) = (len(key)?, len(value)?);
    let (header_count, header_lens) = match headers {
        Fields::List(list) => {
            let mut lens = 0u64;
            for (k, v) in list {
                lens += field_size(len(Some(k))?) + field_size(len(*v)?);
            }
            let count =
                i32::try_from(list.len()).map_err(|_| too_big("more than 2^31-1 headers"))?;
            (count, lens)
        }
        Fields::Encoded { count, bytes } => (count, bytes.len() as u64),
    };
    let mut body = 1
        + varlong_len(delta) as u64
        + varint_len(offset_delta) as u64
        + field_size(key_len)
        + field_size(value_len)
        + varint_len(header_count) as u64;
    body += header_lens;
    let body = i32::try_from(body).map_err(|_| too_big("a record over 2^31-1 bytes"))?;

    out.reserve(body as usize + 5);
    put_varint(out, body);
    out.push(0); // attributes: unused
    put_varlong(out, delta);
    put_varint(out, offset_delta);
    for (l, b) in [(key_len, key), (value_len, value)] {
        put_varint(out, l);
        out.extend_from_slice(b.unwrap_or_default());
    }
    put_varint(out, header_count);
    match headers {
        Fields::List(list) => {
            for (k, v) in list {
                put_varint(out, k.len() as i32);
                out.extend_from_slice(k);
                put_varint(out, len(*v)?);
                out.extend_from_slice(v.unwrap_or_default());
            }
        }
        Fields::Encoded { bytes, .. } => out.extend_from_slice(bytes),
    }
    Ok(())
}

/// Appends `records` compressed with `compression` (at `levels`) to `out`.
pub(crate) fn compress(
    compression: Compression,
    levels: CompressionLevels,
    records: &[u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    match compression {
        Compression::None => out.extend_from_slice(records),
        Compression::Gzip => {
            let level = match u32::try_from(levels.gzip) {
                Ok(l) if (1..=9).contains(&l) => flate2::Compression::new(l),
                _ => flate2::Compression::default(),
            };
            let mut e = flate2::write::GzEncoder::new(out, level);
            e.write_all(records)?;
            e.finish()?;
        }
        Compression::Snappy => {
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes()); // version
            out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
            let mut encoder = snap::raw::Encoder::new();
            for block in records.chunks(XERIAL_BLOCK) {
                let compressed = encoder.compress_vec(block).map_err(std::io::Error::other)?;
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
        }
        Compression::Lz4 => {
            // Independent 64 KiB blocks, as Kafka's Java client writes them.
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            e.write_all(records)?;
            e.finish().map_err(std::io::Error::other)?;
        }
        Compression::Zstd => {
            let mut e = zstd::stream::write::Encoder::new(out, levels.zstd)?;
            e.write_all(records)?;
            e.finish()?;
        }
    }
    Ok(())
}
