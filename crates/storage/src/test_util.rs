//! Builders of real record batches for tests, using kafka-protocol's encoder.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as KCompression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::batch::Compression;

/// `n` records with timestamps `ts0, ts0+1, ...`, no producer id.
pub fn simple_records(first_offset: i64, n: usize, ts0: i64) -> Vec<Record> {
    records_with_timestamps(
        first_offset,
        &(0..n as i64).map(|i| ts0 + i).collect::<Vec<_>>(),
    )
}

/// One record per timestamp, no producer id.
pub fn records_with_timestamps(first_offset: i64, timestamps: &[i64]) -> Vec<Record> {
    timestamps
        .iter()
        .enumerate()
        .map(|(i, ts)| record(first_offset + i as i64, -1, -1, -1, *ts))
        .collect()
}

/// `n` records of an idempotent producer starting at `sequence`.
pub fn producer_records(pid: i64, epoch: i16, sequence: i32, n: usize, ts0: i64) -> Vec<Record> {
    (0..n)
        .map(|i| {
            record(
                i as i64,
                pid,
                epoch,
                sequence.wrapping_add(i as i32),
                ts0 + i as i64,
            )
        })
        .collect()
}

fn record(offset: i64, pid: i64, epoch: i16, sequence: i32, ts: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        // Keep offset - sequence constant so the encoder makes one batch.
        offset,
        sequence: if pid < 0 { offset as i32 } else { sequence },
        timestamp: ts,
        key: Some(Bytes::from(format!("key-{offset}"))),
        value: Some(Bytes::from(format!("value-{offset}-{}", "x".repeat(20)))),
        headers: Default::default(),
    }
}

/// Encodes `records` as (normally) one uncompressed v2 batch.
pub fn batch(records: &[Record]) -> Vec<u8> {
    batch_with(records, Compression::None)
}

/// Encodes `records` as (normally) one v2 batch with the given codec.
pub fn batch_with(records: &[Record], compression: Compression) -> Vec<u8> {
    let compression = match compression {
        Compression::None => KCompression::None,
        Compression::Gzip => KCompression::Gzip,
        Compression::Snappy => KCompression::Snappy,
        Compression::Lz4 => KCompression::Lz4,
        Compression::Zstd => KCompression::Zstd,
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode batch");
    buf.to_vec()
}

/// What an append stores: `batches` with offsets from `base` on and `epoch`
/// stamped in.
pub fn stamped(batches: &[u8], base: model::Offset, epoch: model::LeaderEpoch) -> Vec<u8> {
    let mut out = batches.to_vec();
    let mut next = base;
    let positions: Vec<(usize, crate::batch::BatchHeader)> =
        crate::batch::headers(batches).collect();
    for (at, h) in positions {
        crate::batch::set_base_offset(&mut out[at..], next);
        crate::batch::set_partition_leader_epoch(&mut out[at..], epoch);
        next = next.plus(i64::from(h.record_count));
    }
    out
}

/// Zig-zag varint bytes (32- and 64-bit varints share the encoding).
pub fn varint(v: i64) -> Vec<u8> {
    let mut out = Vec::new();
    crate::records::put_varlong(&mut out, v);
    out
}

/// A piece of a hand-built (possibly malformed) record body.
pub enum Part<'a> {
    /// A zig-zag varint.
    V(i64),
    /// Raw bytes.
    B(&'a [u8]),
}

/// Concatenates `parts`.
pub fn body(parts: &[Part<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        match p {
            Part::V(v) => out.extend_from_slice(&varint(*v)),
            Part::B(b) => out.extend_from_slice(b),
        }
    }
    out
}

/// The body of a well-formed record.
pub fn record_body(
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&[u8], Option<&[u8]>)],
) -> Vec<u8> {
    use Part::{B, V};
    let len = |b: Option<&[u8]>| b.map_or(-1, |b| b.len() as i64);
    let mut out = body(&[
        B(&[0]),
        V(timestamp_delta),
        V(i64::from(offset_delta)),
        V(len(key)),
        B(key.unwrap_or_default()),
        V(len(value)),
        B(value.unwrap_or_default()),
        V(headers.len() as i64),
    ]);
    for (k, v) in headers {
        out.extend_from_slice(&body(&[
            V(k.len() as i64),
            B(k),
            V(len(*v)),
            B(v.unwrap_or_default()),
        ]));
    }
    out
}

/// `body` preceded by its length.
pub fn with_length(body: &[u8]) -> Vec<u8> {
    let mut out = varint(body.len() as i64);
    out.extend_from_slice(body);
    out
}

/// The header fields of a hand-assembled batch.
#[derive(Debug, Clone, Copy)]
pub struct RawBatch {
    /// Codec of the records.
    pub compression: Compression,
    /// `recordCount`.
    pub record_count: i32,
    /// `lastOffsetDelta`.
    pub last_offset_delta: i32,
    /// `baseTimestamp`.
    pub base_timestamp: i64,
    /// `maxTimestamp`.
    pub max_timestamp: i64,
    /// Attribute bits besides the codec.
    pub flags: i16,
    /// `producerId`.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub base_sequence: i32,
}

impl RawBatch {
    /// `count` records from `base_timestamp`, no producer.
    pub fn new(compression: Compression, count: i32, base_timestamp: i64) -> RawBatch {
        RawBatch {
            compression,
            record_count: count,
            last_offset_delta: count - 1,
            base_timestamp,
            max_timestamp: base_timestamp,
            flags: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }

    /// A batch of `records` (encoded, uncompressed), compressed with the
    /// codec, with a valid CRC.
    pub fn assemble(&self, records: &[u8]) -> Vec<u8> {
        let mut compressed = Vec::new();
        crate::builder::compress(
            self.compression,
            Default::default(),
            records,
            &mut compressed,
        )
        .unwrap();
        self.assemble_compressed(&compressed)
    }

    /// A batch around `data` as its (already compressed) records section,
    /// with a valid CRC.
    pub fn assemble_compressed(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&0i64.to_be_bytes());
        out.extend_from_slice(&((crate::batch::HEADER_LEN - 12 + data.len()) as i32).to_be_bytes());
        out.extend_from_slice(&(-1i32).to_be_bytes());
        out.push(2);
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&(i16::from(self.compression.id()) | self.flags).to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.record_count.to_be_bytes());
        out.extend_from_slice(data);
        crate::batch::update_crc(&mut out);
        out
    }
}
