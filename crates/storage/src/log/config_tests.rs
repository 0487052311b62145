//! The topic configs the log enforces beyond segmenting and retention:
//! `compression.type` (recompression), `message.timestamp.type`
//! (LogAppendTime stamping), the `message.timestamp.*.max.ms` window,
//! `segment.index.bytes`, `segment.jitter.ms`, `file.delete.delay.ms` and
//! `cleanup.policy` in retention. Mirrors Kafka's `LogValidatorTest` cases
//! for the same rules.

use bytes::Bytes;

use super::tests::{append, small_config, Fixture, NOW};
use super::*;
use crate::batch::{BatchHeader, Compression, TimestampType};
use crate::config::CleanupPolicy;
use crate::error::{BatchError, RecordError};
use crate::records::RecordIter;
use crate::test_util::{
    batch, batch_with, producer_records, records_with_timestamps, simple_records,
};

/// A record as (offset, timestamp, key, value).
type Rec = (i64, i64, Bytes, Bytes);

/// Every stored batch with its records.
fn stored(log: &Log) -> Vec<(BatchHeader, Vec<Rec>)> {
    let r = log.read(log.log_start_offset(), 1 << 20, true).unwrap();
    batch::headers(&r.records)
        .map(|(at, h)| {
            let one = r.records.slice(at..at + h.total_size());
            assert_eq!(batch::compute_crc(&one), h.crc, "stored CRC is valid");
            let records = RecordIter::new(one, u64::MAX)
                .unwrap()
                .map(|rec| {
                    let rec = rec.unwrap();
                    (
                        rec.offset.0,
                        rec.timestamp.0,
                        rec.key.unwrap_or_default(),
                        rec.value.unwrap_or_default(),
                    )
                })
                .collect();
            (h, records)
        })
        .collect()
}

fn with(change: impl FnOnce(&mut LogConfig)) -> LogConfig {
    let mut c = small_config();
    change(&mut c);
    c
}

fn record_error(e: Error) -> RecordError {
    match e {
        Error::Batch(BatchError::InvalidRecords { error, .. }) => error,
        Error::Batch(BatchError::RecordsRefused { records, .. }) => {
            records.into_iter().next().expect("at least one").error
        }
        other => panic!("expected a record error, got {other}"),
    }
}

/// LogValidatorTest.testLogAppendTimeNonCompressedV2 /
/// testLogAppendTimeWithRecompressionV2: the batch gets the LogAppendTime
/// type and `maxTimestamp = now`; every record reads back with it.
#[test]
fn log_append_time_stamps_each_batch_in_place() {
    for codec in [Compression::None, Compression::Lz4] {
        let f = Fixture::new();
        let log = f.open(
            with(|c| c.timestamp_type = TimestampType::LogAppendTime),
            false,
        );
        let b = batch_with(&simple_records(0, 3, 5), codec);
        let info = append(&log, b);
        assert_eq!(info.log_append_time, Some(NOW));
        let batches = stored(&log);
        assert_eq!(batches.len(), 1);
        let (h, records) = &batches[0];
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(h.max_timestamp, NOW);
        assert_eq!(h.compression(), codec, "no recompression for a stamp");
        assert!(records.iter().all(|r| r.1 == NOW.0), "{records:?}");
        // The time index and ListOffsets see the append time.
        assert_eq!(
            log.offset_for_timestamp(NOW).unwrap(),
            Some((Offset(0), NOW))
        );
    }
}

/// Without LogAppendTime the stored batch is the producer's, byte for byte
/// past the stamped base offset and leader epoch (the zero-copy path).
#[test]
fn create_time_and_producer_compression_keep_the_batch_as_sent() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let b = batch_with(&simple_records(0, 4, 5), Compression::Snappy);
    let info = append(&log, b.clone());
    assert_eq!(info.log_append_time, None);
    let r = log.read(Offset(0), 1 << 20, true).unwrap();
    assert_eq!(
        &r.records[12..16],
        &0i32.to_be_bytes(),
        "leader epoch stamped"
    );
    assert_eq!(&r.records[16..], &b[16..]);
}

/// LogValidatorTest.testInvalidCreateTimeNonCompressedV2 and
/// testRecordWithPastTimestampIsRejected / FutureTimestamp: a CreateTime
/// record outside [now - before, now + after] refuses the whole batch.
#[test]
fn timestamps_outside_the_window_are_refused() {
    let f = Fixture::new();
    let log = f.open(
        with(|c| {
            c.timestamp_before_max_ms = 1000;
            c.timestamp_after_max_ms = 500;
        }),
        false,
    );
    let at = |ts: &[i64]| log.append(&batch(&records_with_timestamps(0, ts)), LeaderEpoch(0), NOW);
    let now = NOW.0;
    assert!(at(&[now - 1000, now, now + 500]).is_ok());
    let e = record_error(at(&[now, now - 1001]).unwrap_err());
    assert!(
        matches!(
            e,
            RecordError::TimestampOutOfRange { timestamp, offset: 1, min, max }
                if timestamp == now - 1001 && min == now - 1000 && max == now + 500
        ),
        "{e}"
    );
    assert!(e.is_invalid_timestamp());
    assert!(e.to_string().contains("is out of range"), "{e}");
    let e = record_error(at(&[now + 501]).unwrap_err());
    assert!(matches!(e, RecordError::TimestampOutOfRange { .. }), "{e}");
    // NO_TIMESTAMP (-1) is not checked, as in Kafka.
    assert!(at(&[-1]).is_ok());
    assert_eq!(log.log_end_offset(), Offset(4));
}

/// LogValidatorTest.testInvalidTimestampTypeFromProducer (Kafka refuses a
/// LogAppendTime batch from a client on a LogAppendTime topic, and one
/// without a timestamp on a CreateTime topic).
#[test]
fn producers_may_not_send_log_append_time() {
    let mut b = batch(&simple_records(0, 2, NOW.0));
    // Attribute bit 3 (the encoder always writes CreateTime).
    b[22] |= 0x08;
    batch::update_crc(&mut b);
    let f = Fixture::new();
    let log = f.open(
        with(|c| c.timestamp_type = TimestampType::LogAppendTime),
        false,
    );
    let e = record_error(log.append(&b, LeaderEpoch(0), NOW).unwrap_err());
    assert!(matches!(e, RecordError::LogAppendTimeFromProducer), "{e}");
    assert!(e.is_invalid_timestamp());
    // On a CreateTime topic Kafka checks its maxTimestamp against the window.
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    assert!(log.append(&b, LeaderEpoch(0), NOW).is_ok());
}

/// LogValidatorTest.testCompressedV2 with a different target codec
/// (`testRecompression`): records, timestamps and producer fields survive;
/// the stored codec is the topic's.
#[test]
fn a_target_codec_recompresses_and_keeps_records_and_producer_state() {
    for (from, to) in [
        (Compression::None, Compression::Zstd),
        (Compression::Gzip, Compression::None),
        (Compression::Snappy, Compression::Lz4),
        (Compression::Zstd, Compression::Gzip),
    ] {
        let f = Fixture::new();
        let log = f.open(
            with(|c| {
                c.compression = Some(to);
                c.compression_levels.zstd = 19;
            }),
            false,
        );
        let b = batch_with(&producer_records(9, 2, 0, 5, 100), from);
        let sent: Vec<_> = RecordIter::new(Bytes::from(b.clone()), u64::MAX)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                (r.offset.0, r.timestamp.0, r.key.unwrap(), r.value.unwrap())
            })
            .collect();
        let info = append(&log, b.clone());
        assert_eq!((info.base_offset, info.record_count), (Offset(0), 5));
        let batches = stored(&log);
        assert_eq!(batches.len(), 1, "{from:?} -> {to:?}");
        let (h, records) = &batches[0];
        assert_eq!(h.compression(), to);
        assert_eq!(records, &sent, "{from:?} -> {to:?}");
        assert_eq!(h.max_timestamp, Timestamp(104));
        assert_eq!(
            (h.producer_id.0, h.producer_epoch.0, h.base_sequence),
            (9, 2, 0)
        );
        // The idempotent retry of the same batch is still recognised.
        assert!(matches!(
            log.append(&b, LeaderEpoch(0), NOW).unwrap(),
            AppendOutcome::Duplicate(i) if i.base_offset == Offset(0)
        ));
        assert_eq!(log.log_end_offset(), Offset(5));
    }
}

/// A batch in the topic's codec already is stored as sent.
#[test]
fn a_batch_already_in_the_target_codec_is_not_recompressed() {
    let f = Fixture::new();
    let log = f.open(with(|c| c.compression = Some(Compression::Gzip)), false);
    let b = batch_with(&simple_records(0, 3, 5), Compression::Gzip);
    append(&log, b.clone());
    let r = log.read(Offset(0), 1 << 20, true).unwrap();
    assert_eq!(&r.records[16..], &b[16..]);
}

/// Kafka checks `max.message.bytes` again after its validator changed a
/// batch (RecordTooLargeException): decompressing may outgrow it.
#[test]
fn a_recompressed_batch_over_max_message_bytes_is_refused() {
    let f = Fixture::new();
    let log = f.open(
        with(|c| {
            c.compression = Some(Compression::None);
            c.max_message_bytes = 1500;
        }),
        false,
    );
    let b = batch_with(&simple_records(0, 60, 5), Compression::Zstd);
    assert!(b.len() < 1500, "compressed {} bytes", b.len());
    assert!(matches!(
        log.append(&b, LeaderEpoch(0), NOW),
        Err(Error::RecordBatchTooLarge { max: 1500, .. })
    ));
    assert_eq!(log.log_end_offset(), Offset(0));
}

/// Kafka rolls a segment whose offset or time index is full
/// (`segment.index.bytes`).
#[test]
fn a_full_index_rolls_the_segment() {
    let f = Fixture::new();
    let log = f.open(
        with(|c| {
            c.segment_bytes = 1 << 20;
            c.index_interval_bytes = 0;
            // Room for two offset entries (8 bytes) and one time entry (12).
            c.segment_index_bytes = 16;
        }),
        false,
    );
    for i in 0..6 {
        append(&log, batch(&simple_records(0, 1, i)));
    }
    assert!(log.segment_count() >= 3, "{}", log.segment_count());
}

/// `segment.jitter.ms`: each segment rolls up to the jitter earlier, by an
/// amount that is stable for the segment and bounded by `segment.ms`.
#[test]
fn roll_jitter_is_bounded_and_stable_per_segment() {
    let c = with(|c| {
        c.roll_ms = Some(1000);
        c.segment_jitter_ms = 5000;
    });
    let jitters: Vec<u64> = (0..50)
        .map(|b| c.roll_jitter_ms(Offset(b * 7), 42))
        .collect();
    assert!(jitters.iter().all(|j| *j < 1000), "bounded by segment.ms");
    assert!(
        jitters.windows(2).any(|w| w[0] != w[1]),
        "varies per segment"
    );
    assert_eq!(c.roll_jitter_ms(Offset(7), 42), jitters[1]);
    assert_eq!(small_config().roll_jitter_ms(Offset(7), 42), 0);

    // A segment rolls once it has waited segment.ms less its jitter.
    let f = Fixture::new();
    let config = with(|c| {
        c.roll_ms = Some(10_000);
        c.segment_jitter_ms = 10_000;
    });
    let log = f.open(config.clone(), false);
    append(&log, batch(&simple_records(0, 1, 1_000)));
    let jitter = config.roll_jitter_ms(Offset(0), log.jitter_seed()) as i64;
    let due = 1_000 + 10_000 - jitter;
    append(&log, batch(&simple_records(0, 1, due)));
    assert_eq!(log.segment_count(), 1, "not past segment.ms - jitter yet");
    append(&log, batch(&simple_records(0, 1, due + 1)));
    assert_eq!(log.segment_count(), 2);
}

/// `file.delete.delay.ms`: deleted segments' files are renamed `*.deleted`
/// and removed only once the delay has passed; a restart removes leftovers.
#[test]
fn deleted_segment_files_wait_out_the_delay() {
    let f = Fixture::new();
    let log = f.open(
        with(|c| {
            c.segment_bytes = 300;
            c.file_delete_delay_ms = 3_600_000;
        }),
        false,
    );
    for _ in 0..4 {
        append(&log, batch(&simple_records(0, 3, 5)));
    }
    assert!(log.segment_count() > 2);
    let first = f.dir.join(crate::segment::file_name(
        Offset(0),
        crate::segment::LOG_EXT,
    ));
    assert!(first.exists());
    log.delete_records_before(Offset(6)).unwrap();
    assert!(!first.exists());
    let deleted = std::path::PathBuf::from(format!("{}.deleted", first.display()));
    assert!(deleted.exists(), "renamed, not yet removed");
    assert_eq!(log.delete_expired_files(), 0, "the delay has not passed");
    assert!(log.pending_file_deletes() >= 3);

    // A delay of 0 deletes at once.
    log.update_config(with(|c| {
        c.segment_bytes = 300;
        c.file_delete_delay_ms = 0;
    }));
    let second = f.dir.join(crate::segment::file_name(
        Offset(6),
        crate::segment::LOG_EXT,
    ));
    log.delete_records_before(Offset(12)).unwrap();
    assert!(!second.exists());
    assert!(!std::path::PathBuf::from(format!("{}.deleted", second.display())).exists());

    // The broker stopped before the delay passed: the next open removes them.
    drop(log);
    let log = f.open(small_config(), false);
    assert!(!deleted.exists());
    assert_eq!(log.log_start_offset(), Offset(12));
}

/// The pending deletes go once their delay has passed.
#[test]
fn expired_deletes_are_removed() {
    let f = Fixture::new();
    let log = f.open(
        with(|c| {
            c.segment_bytes = 300;
            c.file_delete_delay_ms = 1;
        }),
        false,
    );
    for _ in 0..3 {
        append(&log, batch(&simple_records(0, 3, 5)));
    }
    log.delete_records_before(Offset(6)).unwrap();
    let pending = log.pending_file_deletes();
    assert!(pending >= 3);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut removed = 0;
    while removed < pending {
        assert!(std::time::Instant::now() < deadline, "files never removed");
        removed += log.delete_expired_files();
        std::thread::yield_now();
    }
    assert_eq!(log.pending_file_deletes(), 0);
}

/// Retention by time and size is the `delete` policy's: a compact-only
/// log keeps its segments (Kafka's `UnifiedLog.deleteOldSegments`).
#[test]
fn retention_applies_only_with_the_delete_policy() {
    for (policy, kept) in [
        (
            CleanupPolicy {
                delete: true,
                compact: false,
            },
            false,
        ),
        (
            CleanupPolicy {
                delete: false,
                compact: true,
            },
            true,
        ),
        (
            CleanupPolicy {
                delete: true,
                compact: true,
            },
            false,
        ),
    ] {
        let f = Fixture::new();
        let log = f.open(
            with(|c| {
                c.segment_bytes = 300;
                c.retention_ms = Some(10);
                c.retention_bytes = Some(0);
                c.cleanup_policy = policy;
            }),
            false,
        );
        for _ in 0..4 {
            append(&log, batch(&simple_records(0, 3, 5)));
        }
        let before = log.segment_count();
        log.run_retention(NOW).unwrap();
        assert_eq!(log.segment_count() == before, kept, "{policy:?}");
    }
}
