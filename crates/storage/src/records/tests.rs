//! Unit tests of record validation (one per rule, over every codec), the
//! reader and the timestamp scans.

use bytes::Bytes;
use model::{Offset, Timestamp};
use proptest::prelude::*;

use super::*;
use crate::batch::{self, BatchHeader, Compression, ValidationConfig};
use crate::builder::BatchBuilder;
use crate::error::{BatchError, RecordError, RecordField};
use crate::test_util::{
    batch_with, body, record_body, records_with_timestamps, varint, with_length, Part, RawBatch,
};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

const TS: i64 = 1_700_000_000_000;

fn rules() -> ValidationConfig {
    ValidationConfig {
        max_batch_bytes: 1 << 20,
        max_decompressed_bytes: 32 << 20,
        require_keys: false,
        timestamps: None,
    }
}

/// `n` well-formed records with keys, values and a header.
fn good_records(n: i32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            with_length(&record_body(
                i,
                i64::from(i),
                Some(format!("k{i}").as_bytes()),
                Some(b"some value"),
                &[(b"h", Some(b"v"))],
            ))
        })
        .collect()
}

fn raw(codec: Compression, n: i32) -> RawBatch {
    RawBatch {
        max_timestamp: TS + i64::from(n) - 1,
        ..RawBatch::new(codec, n, TS)
    }
}

/// The record-level fault `validate` reports for `buf`, if any.
fn fault(buf: &[u8], rules: &ValidationConfig) -> Option<(Option<u32>, RecordError)> {
    match batch::validate(buf, rules) {
        Ok(_) => None,
        Err(BatchError::InvalidRecords {
            record_index,
            error,
            ..
        }) => Some((record_index, error)),
        Err(BatchError::RecordsRefused { records, .. }) => {
            records.into_iter().next().map(|r| (Some(r.index), r.error))
        }
        Err(other) => panic!("expected a record-level error, got {other}"),
    }
}

#[test]
fn well_formed_batches_pass_in_every_codec() {
    for codec in CODECS {
        let buf = raw(codec, 4).assemble(&good_records(4));
        let copy = buf.clone();
        let s = batch::validate(&copy, &rules()).unwrap();
        assert_eq!((s.record_count, s.max_timestamp), (4, Timestamp(TS + 3)));
        assert_eq!(copy, buf, "{codec:?}: a correct batch is not rewritten");
    }
}

#[test]
fn record_count_must_match_the_records_present() {
    for codec in CODECS {
        // Claims 2^31-1 records, holds one.
        let claims_more = RawBatch {
            record_count: i32::MAX,
            last_offset_delta: i32::MAX - 1,
            ..raw(codec, 1)
        }
        .assemble(&good_records(1));
        assert!(
            matches!(
                fault(&claims_more, &rules()),
                Some((
                    None,
                    RecordError::CountMismatch {
                        claimed: i32::MAX,
                        found: 1
                    }
                ))
            ),
            "{codec:?}"
        );
        // Holds three, claims two.
        let claims_fewer = raw(codec, 2).assemble(&good_records(3));
        assert!(matches!(
            fault(&claims_fewer, &rules()),
            Some((None, RecordError::TrailingBytes { count: 2 }))
        ));
        let mut trailing = good_records(2);
        trailing.push(0);
        assert!(matches!(
            fault(&raw(codec, 2).assemble(&trailing), &rules()),
            Some((None, RecordError::TrailingBytes { .. }))
        ));
    }
}

#[test]
fn offset_deltas_must_run_from_zero_in_order() {
    for codec in CODECS {
        for deltas in [[0, 0, 2], [0, 2, 1], [0, 1, -1], [1, 2, 3]] {
            let records: Vec<u8> = deltas
                .iter()
                .flat_map(|d| with_length(&record_body(*d, 0, Some(b"k"), None, &[])))
                .collect();
            let (index, err) = fault(&raw(codec, 3).assemble(&records), &rules()).unwrap();
            let first_bad = deltas.iter().zip(0..).position(|(d, i)| *d != i).unwrap();
            assert_eq!(index, Some(first_bad as u32), "{codec:?} {deltas:?}");
            assert!(matches!(err, RecordError::OffsetDelta { .. }), "{err}");
        }
    }
}

#[test]
fn each_malformed_field_is_refused() {
    use Part::{B, V};
    type Case = (&'static str, Vec<u8>, fn(&RecordError) -> bool);
    let cases: Vec<Case> = vec![
        ("negative length", varint(-3), |e| {
            matches!(e, RecordError::InvalidLength { length: -3 })
        }),
        (
            "length longer than the fields",
            {
                let mut b = record_body(0, 0, Some(b"k"), Some(b"v"), &[]);
                b.push(7);
                with_length(&b)
            },
            |e| matches!(e, RecordError::LengthMismatch { .. }),
        ),
        (
            "length shorter than the fields",
            {
                let b = record_body(0, 0, Some(b"key"), Some(b"value"), &[]);
                let mut r = varint(b.len() as i64 - 2);
                r.extend_from_slice(&b);
                r
            },
            |e| {
                matches!(
                    e,
                    RecordError::FieldPastRecordEnd { .. } | RecordError::LengthMismatch { .. }
                )
            },
        ),
        (
            "key length below -1",
            with_length(&body(&[B(&[0]), V(0), V(0), V(-2), V(-1), V(0)])),
            |e| {
                matches!(
                    e,
                    RecordError::InvalidFieldLength {
                        field: RecordField::Key,
                        length: -2
                    }
                )
            },
        ),
        (
            "key past the record",
            with_length(&body(&[B(&[0]), V(0), V(0), V(50), B(b"abc"), V(-1), V(0)])),
            |e| {
                matches!(
                    e,
                    RecordError::FieldPastRecordEnd {
                        field: RecordField::Key,
                        ..
                    }
                )
            },
        ),
        (
            "value length below -1",
            with_length(&body(&[B(&[0]), V(0), V(0), V(-1), V(-7), V(0)])),
            |e| {
                matches!(
                    e,
                    RecordError::InvalidFieldLength {
                        field: RecordField::Value,
                        ..
                    }
                )
            },
        ),
        (
            "value past the record",
            with_length(&body(&[B(&[0]), V(0), V(0), V(-1), V(9), B(b"abc"), V(0)])),
            |e| {
                matches!(
                    e,
                    RecordError::FieldPastRecordEnd {
                        field: RecordField::Value,
                        ..
                    }
                )
            },
        ),
        (
            "negative header count",
            with_length(&body(&[B(&[0]), V(0), V(0), V(-1), V(-1), V(-1)])),
            |e| matches!(e, RecordError::InvalidHeaderCount { count: -1 }),
        ),
        (
            "more headers than the record holds",
            with_length(&body(&[
                B(&[0]),
                V(0),
                V(0),
                V(-1),
                V(-1),
                V(i64::from(i32::MAX)),
                V(1),
                B(b"h"),
                V(-1),
            ])),
            |e| matches!(e, RecordError::InvalidHeaderCount { count: i32::MAX }),
        ),
        (
            "null header key",
            with_length(&body(&[
                B(&[0]),
                V(0),
                V(0),
                V(-1),
                V(-1),
                V(1),
                V(-1),
                V(-1),
            ])),
            |e| {
                matches!(
                    e,
                    RecordError::InvalidFieldLength {
                        field: RecordField::HeaderKey,
                        length: -1
                    }
                )
            },
        ),
        (
            "header value below -1",
            with_length(&body(&[
                B(&[0]),
                V(0),
                V(0),
                V(-1),
                V(-1),
                V(1),
                V(1),
                B(b"h"),
                V(-2),
            ])),
            |e| {
                matches!(
                    e,
                    RecordError::InvalidFieldLength {
                        field: RecordField::HeaderValue,
                        ..
                    }
                )
            },
        ),
        (
            "header value past the record",
            with_length(&body(&[
                B(&[0]),
                V(0),
                V(0),
                V(-1),
                V(-1),
                V(1),
                V(1),
                B(b"h"),
                V(40),
            ])),
            |e| {
                matches!(
                    e,
                    RecordError::FieldPastRecordEnd {
                        field: RecordField::HeaderValue,
                        ..
                    }
                )
            },
        ),
        (
            "overlong varint",
            with_length(&body(&[B(&[0]), B(&[0xff; 11])])),
            |e| matches!(e, RecordError::MalformedVarint { max_bytes: 10 }),
        ),
        (
            "truncated record",
            {
                let r = with_length(&record_body(0, 0, Some(b"key"), Some(b"value"), &[]));
                r[..r.len() - 3].to_vec()
            },
            |e| matches!(e, RecordError::Truncated),
        ),
    ];
    for codec in CODECS {
        for (what, record, expected) in &cases {
            // The bad record comes second, after a good one.
            let mut records = with_length(&record_body(0, 0, Some(b"k"), None, &[]));
            let mut second = record.clone();
            // Records start with their offset delta in place: fix it to 1
            // where the case left it at 0 (the attributes byte comes first).
            if let Some(pos) = offset_delta_position(&second) {
                second[pos] = 2; // zig-zag 1
            }
            records.extend_from_slice(&second);
            let buf = raw(codec, 2).assemble(&records);
            let (index, err) =
                fault(&buf, &rules()).unwrap_or_else(|| panic!("{codec:?} {what}: accepted"));
            assert!(expected(&err), "{codec:?} {what}: {err}");
            assert_eq!(index, Some(1), "{codec:?} {what}");
        }
    }
}

/// Where a hand-built record's offset delta byte is (length varint,
/// attributes, timestamp delta 0), if it has one.
fn offset_delta_position(record: &[u8]) -> Option<usize> {
    let mut input = SliceInput::new(record);
    varint::read_varint(&mut input).ok()?;
    let at = input.position() as usize + 2;
    (record.get(at) == Some(&0) && record.get(at - 1) == Some(&0)).then_some(at)
}

#[test]
fn timestamps_must_not_overflow_and_max_timestamp_is_corrected() {
    for codec in CODECS {
        let records = with_length(&record_body(0, 10, None, None, &[]));
        let overflow = RawBatch {
            base_timestamp: i64::MAX - 5,
            max_timestamp: i64::MAX,
            ..raw(codec, 1)
        }
        .assemble(&records);
        assert!(matches!(
            fault(&overflow, &rules()),
            Some((Some(0), RecordError::TimestampOverflow { delta: 10, .. }))
        ));

        // maxTimestamp says 0; the records say TS + 2: corrected, CRC redone.
        let records: Vec<u8> = [2, 0, 1]
            .iter()
            .enumerate()
            .flat_map(|(i, d)| with_length(&record_body(i as i32, *d, Some(b"k"), None, &[])))
            .collect();
        let mut buf = RawBatch {
            max_timestamp: 0,
            ..raw(codec, 3)
        }
        .assemble(&records);
        let s = batch::validate(&buf, &rules()).unwrap();
        assert_eq!(s.max_timestamp, Timestamp(TS + 2));
        assert_eq!(s.max_timestamp_fixes, vec![(0, Timestamp(TS + 2))]);
        batch::apply_fixes(&mut buf, &s.max_timestamp_fixes);
        let h = BatchHeader::parse(&buf).unwrap();
        assert_eq!(h.max_timestamp, Timestamp(TS + 2), "{codec:?}");
        assert_eq!(h.crc, batch::compute_crc(&buf), "the CRC covers the fix");
    }
}

#[test]
fn control_batches_are_refused() {
    let buf = RawBatch {
        flags: 0x20,
        ..raw(Compression::None, 1)
    }
    .assemble(&good_records(1));
    assert!(matches!(
        fault(&buf, &rules()),
        Some((None, RecordError::ControlBatch))
    ));
}

#[test]
fn compacted_topics_need_keys() {
    let require = ValidationConfig {
        require_keys: true,
        ..rules()
    };
    for codec in CODECS {
        let records: Vec<u8> = [Some(&b"a"[..]), Some(b""), None]
            .iter()
            .enumerate()
            .flat_map(|(i, k)| with_length(&record_body(i as i32, 0, *k, Some(b"v"), &[])))
            .collect();
        let buf = raw(codec, 3).assemble(&records);
        assert!(matches!(
            fault(&buf, &require),
            Some((Some(2), RecordError::MissingKey))
        ));
        assert!(
            fault(&buf, &rules()).is_none(),
            "keys are optional elsewhere"
        );
    }
}

/// Every record a compacted topic refuses is listed with its index, not
/// only the first (KIP-467's `record_errors`, as Kafka's LogValidator
/// collects them); well-formed records with keys are not.
#[test]
fn every_keyless_record_is_listed() {
    let require = ValidationConfig {
        require_keys: true,
        ..rules()
    };
    for codec in CODECS {
        let keys: Vec<Option<&[u8]>> = (0..10)
            .map(|i| if i % 3 == 1 { None } else { Some(&b"k"[..]) })
            .collect();
        let records: Vec<u8> = keys
            .iter()
            .enumerate()
            .flat_map(|(i, k)| with_length(&record_body(i as i32, 0, *k, Some(b"v"), &[])))
            .collect();
        let buf = raw(codec, 10).assemble(&records);
        match batch::validate(&buf, &require) {
            Err(e @ BatchError::RecordsRefused { .. }) => {
                assert!(!e.is_invalid_timestamp());
                let BatchError::RecordsRefused { records, .. } = &e else {
                    unreachable!()
                };
                let listed: Vec<u32> = records.iter().map(|r| r.index).collect();
                assert_eq!(listed, [1, 4, 7], "{codec:?}");
                assert!(records
                    .iter()
                    .all(|r| matches!(r.error, RecordError::MissingKey)));
                assert!(e.to_string().contains("3 records refused"), "{e}");
            }
            other => panic!("{codec:?}: {other:?}"),
        }
    }
}

#[test]
fn compressed_garbage_and_short_streams_are_refused() {
    for codec in &CODECS[1..] {
        let garbage = raw(*codec, 1).assemble_compressed(&[0x5a; 300]);
        assert!(fault(&garbage, &rules()).is_some(), "{codec:?} garbage");

        let mut compressed = Vec::new();
        crate::builder::compress(
            *codec,
            Default::default(),
            &good_records(50),
            &mut compressed,
        )
        .unwrap();
        for cut in [1, compressed.len() / 2, compressed.len() - 1] {
            let short = raw(*codec, 50).assemble_compressed(&compressed[..cut]);
            assert!(fault(&short, &rules()).is_some(), "{codec:?} cut at {cut}");
        }
        // Another stream appended after the records' stream.
        let mut twice = compressed.clone();
        twice.extend_from_slice(&compressed);
        assert!(
            fault(&raw(*codec, 50).assemble_compressed(&twice), &rules()).is_some(),
            "{codec:?} twice"
        );
    }
}

#[test]
fn raw_snappy_as_librdkafka_writes_it_is_accepted() {
    let records = good_records(10);
    let compressed = snap::raw::Encoder::new().compress_vec(&records).unwrap();
    let buf = raw(Compression::Snappy, 10).assemble_compressed(&compressed);
    assert!(fault(&buf, &rules()).is_none());
    let iter = RecordIter::new(Bytes::from(buf), u64::MAX).unwrap();
    assert_eq!(iter.count(), 10);
}

#[test]
fn decompression_beyond_the_limit_is_refused_without_allocating_it() {
    // One record whose value is 4 MiB of zeros: a few KB compressed.
    let value = vec![0u8; 4 << 20];
    let records = with_length(&record_body(0, 0, None, Some(&value), &[]));
    let small = ValidationConfig {
        max_decompressed_bytes: 1 << 20,
        ..rules()
    };
    for codec in &CODECS[1..] {
        let buf = raw(*codec, 1).assemble(&records);
        assert!(buf.len() < 300_000, "{codec:?}: {}", buf.len());
        assert!(matches!(
            fault(&buf, &small),
            Some((Some(0), RecordError::DecompressedTooLarge { limit })) if limit == 1 << 20
        ));
        assert!(
            fault(&buf, &rules()).is_none(),
            "{codec:?} within the limit"
        );
        let mut iter = RecordIter::new(Bytes::from(buf), 1 << 20).unwrap();
        assert!(matches!(
            iter.next(),
            Some(Err(BatchError::InvalidRecords {
                error: RecordError::DecompressedTooLarge { .. },
                ..
            }))
        ));
    }
}

#[test]
fn random_bytes_with_a_valid_crc_are_refused() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for codec in CODECS {
        for len in [1usize, 7, 100, 5000] {
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s as u8
                })
                .collect();
            let buf = raw(codec, 3).assemble_compressed(&junk);
            assert!(fault(&buf, &rules()).is_some(), "{codec:?} {len}");
        }
    }
}

#[test]
fn builder_batches_validate_and_read_back_in_every_codec() {
    for codec in CODECS {
        let mut b =
            BatchBuilder::new(codec).producer(model::ProducerId(7), model::ProducerEpoch(2), 40);
        b.append(
            Timestamp(TS + 5),
            Some(b"k0"),
            Some(b"v0"),
            &[(b"h1", Some(b"x")), (b"h2", None)],
        )
        .unwrap();
        b.append(Timestamp(TS), None, None, &[]).unwrap();
        b.append(Timestamp(TS + 9), Some(b""), Some(&[7u8; 100_000]), &[])
            .unwrap();
        let buf = b.build().unwrap().to_vec();
        let h = BatchHeader::parse(&buf).unwrap();
        assert_eq!(h.compression(), codec);
        assert_eq!(
            (h.producer_id.0, h.producer_epoch.0, h.base_sequence),
            (7, 2, 40)
        );
        assert_eq!((h.record_count, h.max_timestamp), (3, Timestamp(TS + 9)));
        let before = buf.clone();
        batch::validate(&buf, &rules()).unwrap();
        assert_eq!(buf, before, "{codec:?}: valid as built");

        let records: Vec<Record> = RecordIter::new(Bytes::from(buf), u64::MAX)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].timestamp, Timestamp(TS + 5));
        assert_eq!(records[1].timestamp, Timestamp(TS));
        assert_eq!(records[2].offset, Offset(2));
        assert_eq!(records[0].key.as_deref(), Some(&b"k0"[..]));
        assert_eq!(records[1].key, None);
        assert_eq!(records[1].value, None);
        assert_eq!(records[2].key.as_deref(), Some(&b""[..]));
        assert_eq!(records[2].value.as_ref().map(|v| v.len()), Some(100_000));
        let headers: Vec<Header> = records[0].headers.iter().collect();
        assert_eq!(records[0].headers.len(), 2);
        assert_eq!(headers[0].key, Bytes::from_static(b"h1"));
        assert_eq!(headers[0].value, Some(Bytes::from_static(b"x")));
        assert_eq!(headers[1].value, None);
        assert!(records[1].headers.is_empty());
    }
    assert!(matches!(
        BatchBuilder::new(Compression::None).build(),
        Err(BatchError::Empty)
    ));
}

#[test]
fn uncompressed_records_are_slices_of_the_batch() {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(Timestamp(1), Some(b"key"), Some(b"value"), &[])
        .unwrap();
    let batch = b.build().unwrap().freeze();
    let r = RecordIter::new(batch.clone(), u64::MAX)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let value = r.value.unwrap();
    let inside = batch.as_ptr_range();
    assert!(inside.contains(&value.as_ptr()), "zero copy");
}

#[test]
fn the_reader_reports_malformed_batches() {
    for codec in CODECS {
        let short = RawBatch {
            record_count: 3,
            last_offset_delta: 2,
            ..raw(codec, 1)
        }
        .assemble(&good_records(2));
        let got: Vec<_> = RecordIter::new(Bytes::from(short), u64::MAX)
            .unwrap()
            .collect();
        assert_eq!(got.len(), 3, "two records, then the error, then nothing");
        assert!(matches!(
            got[2],
            Err(BatchError::InvalidRecords {
                error: RecordError::CountMismatch { found: 2, .. },
                ..
            })
        ));
        let mut trailing = good_records(1);
        trailing.extend_from_slice(&[1, 2, 3]);
        let got: Vec<_> = RecordIter::new(Bytes::from(raw(codec, 1).assemble(&trailing)), u64::MAX)
            .unwrap()
            .collect();
        assert!(matches!(
            got.last(),
            Some(Err(BatchError::InvalidRecords {
                error: RecordError::TrailingBytes { .. },
                ..
            }))
        ));
    }
}

#[test]
fn kafka_protocol_batches_read_back_in_every_codec() {
    let ts = [50, 10, 70, 70, 20];
    for codec in CODECS {
        let buf = batch_with(&records_with_timestamps(0, &ts), codec);
        assert_eq!(BatchHeader::parse(&buf).unwrap().compression(), codec);
        assert!(fault(&buf, &rules()).is_none(), "{codec:?}");
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
        let values: Vec<Bytes> = RecordIter::new(Bytes::from(buf), u64::MAX)
            .unwrap()
            .map(|r| r.unwrap().value.unwrap())
            .collect();
        assert_eq!(
            values[1],
            Bytes::from(format!("value-1-{}", "x".repeat(20)))
        );
    }
}

#[test]
fn scans_stop_decompressing_once_answered() {
    // A stored batch larger than any limit: the scan streams it and stops at
    // the first match, far before the end.
    let value = vec![1u8; 1 << 20];
    let mut records = Vec::new();
    for i in 0..64 {
        records.extend_from_slice(&with_length(&record_body(
            i,
            i64::from(i),
            None,
            Some(&value),
            &[],
        )));
    }
    for codec in &CODECS[1..] {
        let buf = raw(*codec, 64).assemble(&records);
        let r = find_offset_for_timestamp(&buf, Timestamp(TS + 3), Offset(0))
            .unwrap()
            .unwrap();
        assert_eq!(r.offset, Offset(3));
        let max = max_timestamp_record(&buf, Offset(0)).unwrap().unwrap();
        assert_eq!(max.offset, Offset(63));
    }
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

/// Validation throughput on the produce hot path: 1 GiB of 1 KiB records in
/// 1 MiB uncompressed batches (and, for reference, 256 MiB of lz4 and zstd).
/// Run with `cargo test --release -p magnetar-storage -- --ignored --nocapture
/// validation_throughput`.
#[test]
#[ignore = "a benchmark; run in release"]
fn validation_throughput() {
    let value = vec![b'x'; 1000];
    for (codec, total) in [
        (Compression::None, 1usize << 30),
        (Compression::Lz4, 256 << 20),
        (Compression::Zstd, 256 << 20),
    ] {
        let mut b = BatchBuilder::new(codec);
        for i in 0..1000u32 {
            let key = i.to_be_bytes();
            b.append(Timestamp(TS + i64::from(i)), Some(&key), Some(&value), &[])
                .unwrap();
        }
        let batch = b.build().unwrap().to_vec();
        let uncompressed = 1000 * (value.len() + 4 + 12) + 61;
        let rounds = total / uncompressed;
        let buf = batch.clone();
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            batch::validate(&buf, &rules()).unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        let crc_start = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(batch::compute_crc(&buf));
        }
        let crc_secs = crc_start.elapsed().as_secs_f64();
        eprintln!(
            "{codec:?}: validated {} MiB of records ({} batches of {} bytes on the wire) in {secs:.3} s = {:.0} MB/s (of which CRC {:.0}%)",
            (rounds * uncompressed) >> 20,
            rounds,
            batch.len(),
            (rounds * uncompressed) as f64 / secs / 1e6,
            crc_secs / secs * 100.0
        );
    }
}
