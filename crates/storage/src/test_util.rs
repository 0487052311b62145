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
