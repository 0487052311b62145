//! Property tests of record validation through `Log::append`: every valid
//! batch (random records, every codec, with and without a producer id) is
//! accepted and reads back as built; breaking exactly one record-level field
//! (with a correct CRC, so only record validation can notice) is refused and
//! leaves the log untouched.

use bytes::Bytes;
use model::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Timestamp};
use proptest::prelude::*;

use super::tests::{small_config, Fixture, NOW};
use super::AppendOutcome;
use crate::batch::{self, Compression, ValidationConfig};
use crate::builder::BatchBuilder;
use crate::error::{BatchError, Error};
use crate::records::RecordIter;
use crate::test_util::{body, varint, Part, RawBatch};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

const BASE_TS: i64 = 1_700_000_000_000;

#[derive(Debug, Clone)]
struct GenRecord {
    ts_delta: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn bytes_field() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..40),
        // Large, compressible values make records span the 64 KiB chunks
        // compressed records are read through.
        1 => (any::<u8>(), 1000usize..40_000).prop_map(|(b, n)| vec![b; n]),
    ]
}

fn gen_record() -> impl Strategy<Value = GenRecord> {
    (
        -1000i64..1000,
        proptest::option::weighted(0.8, bytes_field()),
        proptest::option::weighted(0.9, bytes_field()),
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 0..10),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10)),
            ),
            0..4,
        ),
    )
        .prop_map(|(ts_delta, key, value, headers)| GenRecord {
            ts_delta,
            key,
            value,
            headers,
        })
}

/// One broken field; `record` indexes are taken modulo the record count.
#[derive(Debug, Clone)]
enum Break {
    /// The record's length prefix off by `by` (never below 0).
    RecordLength { record: usize, by: i64 },
    /// An offset delta other than the record's index.
    OffsetDelta { record: usize, delta: i32 },
    /// A key length beyond the record (or below -1).
    KeyLength { record: usize, negative: bool },
    /// One header more than the record holds.
    HeaderCount { record: usize },
    /// The last `cut` bytes of the records cut off.
    TruncatedRecord { cut: usize },
    /// Bytes after the last record.
    TrailingBytes { extra: Vec<u8> },
    /// `recordCount` (and `lastOffsetDelta` with it) off by `by`.
    RecordCount { by: i32 },
    /// The compressed stream cut short (uncompressed: the records).
    CompressedCut { keep: f64 },
}

fn gen_break() -> impl Strategy<Value = Break> {
    let r = 0usize..64;
    prop_oneof![
        (r.clone(), prop_oneof![-3i64..0, 1i64..4])
            .prop_map(|(record, by)| Break::RecordLength { record, by }),
        (r.clone(), any::<i32>()).prop_map(|(record, delta)| Break::OffsetDelta { record, delta }),
        (r.clone(), any::<bool>())
            .prop_map(|(record, negative)| Break::KeyLength { record, negative }),
        r.prop_map(|record| Break::HeaderCount { record }),
        (1usize..20).prop_map(|cut| Break::TruncatedRecord { cut }),
        proptest::collection::vec(any::<u8>(), 1..10)
            .prop_map(|extra| Break::TrailingBytes { extra }),
        prop_oneof![Just(-1), Just(1), 2i32..1000].prop_map(|by| Break::RecordCount { by }),
        (0.0f64..1.0).prop_map(|keep| Break::CompressedCut { keep }),
    ]
}

/// Encodes record `index`, applying `brk` if it is about this record.
fn encode(r: &GenRecord, index: usize, brk: &Break) -> Vec<u8> {
    use Part::{B, V};
    let mine = |record: usize| index == record;
    let offset_delta = match brk {
        Break::OffsetDelta { record, delta } if mine(*record) => {
            if *delta == index as i32 {
                delta.wrapping_add(1)
            } else {
                *delta
            }
        }
        _ => index as i32,
    };
    let len = |b: &Option<Vec<u8>>| b.as_ref().map_or(-1, |b| b.len() as i64);
    let mut fields = body(&[B(&[0]), V(r.ts_delta), V(i64::from(offset_delta))]);
    let key_len = match brk {
        Break::KeyLength { record, negative } if mine(*record) => Some(*negative),
        _ => None,
    };
    let header_count = r.headers.len() as i64
        + i64::from(matches!(brk, Break::HeaderCount { record } if mine(*record)));
    let mut rest = body(&[
        B(r.key.as_deref().unwrap_or_default()),
        V(len(&r.value)),
        B(r.value.as_deref().unwrap_or_default()),
        V(header_count),
    ]);
    for (k, v) in &r.headers {
        rest.extend_from_slice(&body(&[
            V(k.len() as i64),
            B(k),
            V(len(v)),
            B(v.as_deref().unwrap_or_default()),
        ]));
    }
    match key_len {
        None => fields.extend_from_slice(&varint(len(&r.key))),
        Some(true) => fields.extend_from_slice(&varint(-2)),
        // Longer than everything after it in the record.
        Some(false) => fields.extend_from_slice(&varint(rest.len() as i64 + 1)),
    }
    fields.extend_from_slice(&rest);
    let mut declared = fields.len() as i64;
    if let Break::RecordLength { record, by } = brk {
        if mine(*record) {
            declared = (declared + by).max(0);
            if declared == fields.len() as i64 {
                declared += 1;
            }
        }
    }
    let mut out = varint(declared);
    out.extend_from_slice(&fields);
    out
}

fn build(records: &[GenRecord], codec: Compression, producer: Option<(i64, i16)>) -> Vec<u8> {
    let mut b = BatchBuilder::new(codec);
    if let Some((id, epoch)) = producer {
        b = b.producer(ProducerId(id), ProducerEpoch(epoch), 0);
    }
    for r in records {
        let headers: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        b.append(
            Timestamp(BASE_TS + r.ts_delta),
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        )
        .unwrap();
    }
    b.build().unwrap().to_vec()
}

fn check_reads_back(
    batch: Bytes,
    records: &[GenRecord],
    first_offset: i64,
) -> Result<(), TestCaseError> {
    let got: Vec<_> = RecordIter::new(batch, u64::MAX)
        .unwrap()
        .collect::<Result<_, _>>()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(got.len(), records.len());
    let first_ts = BASE_TS + records[0].ts_delta;
    for (i, (g, r)) in got.iter().zip(records).enumerate() {
        prop_assert_eq!(g.offset, Offset(first_offset + i as i64));
        prop_assert_eq!(g.timestamp, Timestamp(BASE_TS + r.ts_delta));
        prop_assert!(g.timestamp.0 - first_ts == r.ts_delta - records[0].ts_delta);
        prop_assert_eq!(g.key.as_deref(), r.key.as_deref());
        prop_assert_eq!(g.value.as_deref(), r.value.as_deref());
        let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = g
            .headers
            .iter()
            .map(|h| (h.key.to_vec(), h.value.map(|v| v.to_vec())))
            .collect();
        prop_assert_eq!(&headers, &r.headers);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn valid_batches_pass_and_one_broken_field_is_refused(
        records in proptest::collection::vec(gen_record(), 1..24),
        codec in 0usize..5,
        producer in proptest::option::of((0i64..1000, 0i16..5)),
        brk in gen_break(),
    ) {
        let codec = CODECS[codec];
        let n = records.len();
        let good = build(&records, codec, producer);
        let rules = ValidationConfig::for_log(&small_config(), super::tests::NOW);
        let copy = good.clone();
        batch::validate(&copy, &rules).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&copy, &good, "a valid batch is stored as built");
        check_reads_back(Bytes::from(good.clone()), &records, 0)?;

        // The same batch with one field broken and a correct CRC.
        let mut brk = brk;
        match &mut brk {
            Break::RecordLength { record, .. }
            | Break::OffsetDelta { record, .. }
            | Break::KeyLength { record, .. }
            | Break::HeaderCount { record } => *record %= n,
            _ => {}
        }
        // The builder makes timestamps relative to the first record's.
        let first_ts = BASE_TS + records[0].ts_delta;
        let mut plain: Vec<u8> = records
            .iter()
            .enumerate()
            .flat_map(|(i, r)| {
                let shifted = GenRecord { ts_delta: r.ts_delta - records[0].ts_delta, ..r.clone() };
                encode(&shifted, i, &brk)
            })
            .collect();
        let mut count = n as i32;
        match &brk {
            Break::TruncatedRecord { cut } => plain.truncate(plain.len().saturating_sub(*cut)),
            Break::TrailingBytes { extra } => plain.extend_from_slice(extra),
            // Never below 1: a header check would refuse that first.
            Break::RecordCount { by } => count = Some(count + by).filter(|c| *c >= 1).unwrap_or(count + 1),
            _ => {}
        }
        let max_ts = records.iter().map(|r| BASE_TS + r.ts_delta).max().unwrap();
        let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
        let header = RawBatch {
            last_offset_delta: count - 1,
            max_timestamp: max_ts,
            producer_id,
            producer_epoch,
            base_sequence: if producer.is_some() { 0 } else { -1 },
            ..RawBatch::new(codec, count, first_ts)
        };
        let bad = match &brk {
            Break::CompressedCut { keep } => {
                let mut compressed = Vec::new();
                crate::builder::compress(codec, Default::default(), &plain, &mut compressed).unwrap();
                let keep = ((compressed.len() as f64 * keep) as usize).min(compressed.len() - 1);
                header.assemble_compressed(&compressed[..keep])
            }
            _ => header.assemble(&plain),
        };
        prop_assert_eq!(batch::compute_crc(&bad), crate::BatchHeader::parse(&bad).unwrap().crc);

        let f = Fixture::new();
        let log = f.open(small_config(), false);
        match log.append(&bad, LeaderEpoch(0), NOW) {
            Err(Error::Batch(BatchError::InvalidRecords { .. })) => {}
            other => prop_assert!(false, "{:?} was not refused as invalid records: {:?}", brk, other),
        }
        prop_assert_eq!(log.log_end_offset(), Offset(0), "nothing appended");
        prop_assert!(log.read(Offset(0), 1 << 20, true).unwrap().records.is_empty());

        // The log (and the producer's sequence) carries on with the good batch.
        let again = good.clone();
        match log.append(&again, LeaderEpoch(0), NOW).unwrap() {
            AppendOutcome::Appended(info) => prop_assert_eq!(info.base_offset, Offset(0)),
            other => prop_assert!(false, "{:?}", other),
        }
        prop_assert_eq!(log.log_end_offset(), Offset(n as i64));
        let stored = log.read(Offset(0), 1 << 20, true).unwrap().records;
        check_reads_back(stored, &records, 0)?;
    }
}
