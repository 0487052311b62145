use model::{PartitionId, ProducerEpoch, ProducerId, TopicName};

use std::sync::Arc;

use super::*;
use crate::batch::{BatchHeader, Compression};
use crate::error::BatchError;
use crate::segment::{file_name, LOG_EXT};
use crate::test_util::{
    batch, batch_with, producer_records, records_with_timestamps, simple_records, stamped,
};

pub(super) const NOW: Timestamp = Timestamp(1_000_000);

pub(super) fn tp() -> TopicPartition {
    TopicPartition::new(TopicName::new("orders-eu").unwrap(), PartitionId(3))
}

pub(super) fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        roll_ms: None,
        retention_ms: None,
        retention_bytes: None,
        flush_interval_messages: None,
        flush_interval_ms: None,
        index_interval_bytes: 256,
        max_message_bytes: 1 << 20,
        producer_id_expiration_ms: None,
        require_keys: false,
        ..LogConfig::default()
    }
}

pub(super) struct Fixture {
    _tmp: tempfile::TempDir,
    pub(super) dir: PathBuf,
    id: TopicId,
}

impl Fixture {
    pub(super) fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(tp().to_string());
        Fixture {
            _tmp: tmp,
            dir,
            id: TopicId::random(),
        }
    }

    pub(super) fn open(&self, config: LogConfig, clean: bool) -> Log {
        Log::open(self.dir.clone(), tp(), self.id, config, clean).unwrap()
    }
}

pub(super) fn append(log: &Log, bytes: Vec<u8>) -> AppendInfo {
    match log.append(&bytes, LeaderEpoch(0), NOW).unwrap() {
        AppendOutcome::Appended(info) => info,
        other => panic!("expected an append, got {other:?}"),
    }
}

/// Every (offset, timestamp) readable from the log start, via `read`.
pub(super) fn read_all(log: &Log) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 300, true).unwrap();
        assert!(!r.records.is_empty(), "empty read at {offset}");
        for (pos, h) in batch::headers(&r.records) {
            let body = &r.records[pos..pos + h.total_size()];
            crate::records::for_each_record(body, |rec| {
                if rec.offset >= offset {
                    out.push((rec.offset.0, rec.timestamp.0));
                }
                true
            })
            .unwrap();
            offset = h.next_offset();
        }
    }
    out
}

#[test]
fn appends_get_contiguous_offsets_and_read_back_exactly() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let mut stored = Vec::new();
    for i in 0..30 {
        let bytes = batch(&simple_records(0, 1 + i % 4, i as i64 * 10));
        let info = match log.append(&bytes, LeaderEpoch(2), NOW).unwrap() {
            AppendOutcome::Appended(info) => info,
            other => panic!("{other:?}"),
        };
        assert!(
            BatchHeader::parse(&bytes).unwrap().base_offset.0 == 0,
            "the caller's bytes are not changed"
        );
        let bytes = stamped(&bytes, info.base_offset, LeaderEpoch(2));
        assert_eq!(
            info.base_offset,
            Offset(stored.iter().map(|(_, n)| n).sum::<i64>())
        );
        assert_eq!(info.record_count, (1 + i % 4) as u64);
        let h = BatchHeader::parse(&bytes).unwrap();
        assert_eq!(h.base_offset, info.base_offset);
        assert_eq!(h.partition_leader_epoch, LeaderEpoch(2));
        stored.push((bytes, info.record_count as i64));
    }
    assert!(log.segment_count() > 1, "small segments should have rolled");
    // Reading from each batch's base offset returns that batch first, byte for byte.
    let mut offset = Offset(0);
    for (bytes, n) in &stored {
        let r = log.read(offset, bytes.len(), false).unwrap();
        assert_eq!(&r.records[..], &bytes[..]);
        assert_eq!(r.high_watermark, log.log_end_offset());
        offset = offset.plus(*n);
    }
    assert_eq!(offset, log.log_end_offset());
    let all = read_all(&log);
    assert_eq!(all.len() as i64, offset.0);
    assert!(all.iter().enumerate().all(|(i, (o, _))| *o == i as i64));
}

#[test]
fn reads_respect_max_bytes_and_bounds() {
    let f = Fixture::new();
    let log = f.open(LogConfig::default(), false);
    let one = batch(&simple_records(0, 3, 0));
    for _ in 0..3 {
        append(&log, one.clone());
    }
    let size = one.len();
    // Only whole batches.
    assert_eq!(
        log.read(Offset(0), size * 2 + 10, false)
            .unwrap()
            .records
            .len(),
        size * 2
    );
    // A batch larger than max_bytes: nothing, unless min_one_batch.
    assert!(log.read(Offset(0), 10, false).unwrap().records.is_empty());
    assert_eq!(log.read(Offset(0), 10, true).unwrap().records.len(), size);
    // An offset inside a batch returns that whole batch.
    let r = log.read(Offset(4), size, false).unwrap();
    assert_eq!(
        BatchHeader::parse(&r.records).unwrap().base_offset,
        Offset(3)
    );
    // At the end: empty; past it or below the start: out of range.
    assert!(log.read(Offset(9), 1000, true).unwrap().records.is_empty());
    assert!(matches!(
        log.read(Offset(10), 1000, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
    assert!(matches!(
        log.read(Offset(-1), 1000, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
}

#[test]
fn invalid_and_transactional_batches_are_rejected_without_writing() {
    let f = Fixture::new();
    let log = f.open(LogConfig::default(), false);
    let mut bad = batch(&simple_records(0, 2, 0));
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(matches!(
        log.append(&bad, LeaderEpoch(0), NOW),
        Err(Error::Batch(BatchError::CorruptCrc { .. }))
    ));
    assert!(matches!(
        log.append(&[], LeaderEpoch(0), NOW),
        Err(Error::Batch(BatchError::Empty))
    ));

    let mut recs = producer_records(7, 0, 0, 2, 0);
    for r in &mut recs {
        r.transactional = true;
    }
    let txn = batch(&recs);
    assert!(matches!(
        log.append(&txn, LeaderEpoch(0), NOW),
        Err(Error::TransactionsNotSupported)
    ));

    let big = batch(&simple_records(0, 50, 0));
    log.update_config(LogConfig {
        max_message_bytes: 100,
        ..LogConfig::default()
    });
    assert!(matches!(
        log.append(&big, LeaderEpoch(0), NOW),
        Err(Error::RecordBatchTooLarge { max: 100, .. })
    ));
    assert_eq!(log.log_end_offset(), Offset(0));
    assert_eq!(log.size_bytes(), 0);
}

#[test]
fn a_failed_write_leaves_no_torn_batch_and_the_log_usable() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    append(&log, batch(&producer_records(4, 0, 0, 3, 0)));
    let size = log.size_bytes();
    log.inner.write().active_mut().fail_next_write_after = Some(30);
    let b = batch(&producer_records(4, 0, 3, 3, 0));
    let err = log.append(&b, LeaderEpoch(0), NOW).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(log.size_bytes(), size);
    assert_eq!(log.log_end_offset(), Offset(3));
    let path = f.dir.join(file_name(Offset(0), LOG_EXT));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    // The producer's retry is not mistaken for a duplicate and lands at 3.
    let info = *producer_append(&log, 4, 0, 3, 3).unwrap().info();
    assert_eq!(info.base_offset, Offset(3));
    drop(log);
    let log = f.open(small_config(), false);
    assert_eq!(log.recovery_stats().bytes_truncated, 0);
    assert_eq!(read_all(&log).len(), 6);
}

#[test]
fn rolls_by_size_and_never_splits_an_append() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let mut two = batch(&simple_records(0, 5, 0));
    two.extend_from_slice(&batch(&simple_records(0, 5, 0)));
    let mut appended = 0;
    while log.segment_count() < 4 {
        append(&log, two.clone());
        appended += 1;
    }
    let per_segment = 2048 / two.len();
    assert_eq!(appended, per_segment * 3 + 1);
    let bases = log.segment_base_offsets();
    for w in bases.windows(2) {
        assert_eq!((w[1].0 - w[0].0) as usize, per_segment * 10);
    }
    // A single append larger than a segment still goes in (into a fresh one).
    let huge: Vec<u8> = (0..6).flat_map(|_| two.clone()).collect();
    let info = append(&log, huge);
    assert_eq!(log.segment_base_offsets().last(), Some(&info.base_offset));
}

#[test]
fn rolls_by_time_in_record_time_like_kafka() {
    let f = Fixture::new();
    let config = LogConfig {
        roll_ms: Some(1000),
        ..small_config()
    };
    let log = f.open(config, false);
    // Record timestamps drive the clock (historical data rolls by its own
    // time, not by the wall clock).
    let at = |log: &Log, ts: i64, now: i64| {
        let b = batch(&simple_records(0, 1, ts));
        log.append(&b, LeaderEpoch(0), Timestamp(now)).unwrap();
    };
    at(&log, 10_000, 99_000_000);
    at(&log, 10_500, 99_000_000);
    at(&log, 11_000, 99_000_000);
    assert_eq!(log.segment_count(), 1);
    at(&log, 11_001, 0);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.segment_base_offsets()[1], Offset(3));
    // The clock restarts with the new segment's first batch.
    at(&log, 11_900, 0);
    assert_eq!(log.segment_count(), 2);
}

#[test]
fn rolls_by_wall_time_without_record_timestamps() {
    let f = Fixture::new();
    let config = LogConfig {
        roll_ms: Some(1000),
        ..small_config()
    };
    let log = f.open(config.clone(), false);
    let at = |log: &Log, now: i64| {
        let b = batch(&simple_records(0, 1, -1));
        log.append(&b, LeaderEpoch(0), Timestamp(now)).unwrap();
    };
    at(&log, 5_000);
    at(&log, 6_000);
    assert_eq!(log.segment_count(), 1);
    at(&log, 6_001);
    assert_eq!(log.segment_count(), 2);
    log.close().unwrap();
    drop(log);
    // After a restart the wall clock counts from the first append.
    let log = f.open(config, true);
    at(&log, 50_000);
    at(&log, 51_000);
    assert_eq!(log.segment_count(), 2);
    at(&log, 51_001);
    assert_eq!(log.segment_count(), 3);
}

#[test]
fn roll_snapshots_producers_and_advances_the_recovery_point() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let mut seq = 0;
    while log.segment_count() < 3 {
        append(&log, batch(&producer_records(9, 0, seq, 4, 0)));
        seq += 4;
    }
    let bases = log.segment_base_offsets();
    assert_eq!(log.recovery_point(), bases[2]);
    let snapshots = crate::producer_state::list_snapshots(&f.dir).unwrap();
    assert_eq!(snapshots, vec![bases[1], bases[2]]);
    let checkpoint =
        crate::checkpoint::read_offset(&f.dir.join(crate::checkpoint::RECOVERY_POINT_CHECKPOINT))
            .unwrap();
    assert_eq!(checkpoint, Some(bases[2]));
}

#[test]
fn retention_by_time_keeps_the_active_segment_and_moves_the_start() {
    let f = Fixture::new();
    let config = LogConfig {
        retention_ms: Some(10_000),
        ..small_config()
    };
    let log = f.open(config, false);
    // Old records first, then new ones.
    for i in 0..40 {
        let ts = if i < 20 { 1_000 } else { 100_000 };
        append(&log, batch(&simple_records(0, 3, ts)));
    }
    let before = log.segment_count();
    assert!(before > 3);
    // Nothing is old enough yet.
    assert_eq!(log.run_retention(Timestamp(5_000)).unwrap(), 0);
    let deleted = log.run_retention(Timestamp(50_000)).unwrap();
    assert!(deleted > 0);
    assert_eq!(log.segment_count(), before - deleted as usize);
    let start = log.log_start_offset();
    assert_eq!(start, log.segment_base_offsets()[0]);
    assert!(start.0 > 0 && start.0 <= 60);
    assert!(matches!(
        log.read(start.plus(-1), 100, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
    assert!(log.read(start, 100, true).is_ok());
    // Far in the future everything but the active segment goes.
    log.run_retention(Timestamp(10_000_000)).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    // The deleted files are gone from disk.
    let logs = std::fs::read_dir(&f.dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("log".as_ref()))
        .count();
    assert_eq!(logs, 1);
    // Reopening keeps the start offset.
    drop(log);
    let log = f.open(small_config(), false);
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    assert_eq!(log.log_end_offset(), Offset(120));
}

#[test]
fn retention_by_size_keeps_at_least_the_limit() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    for _ in 0..60 {
        append(&log, batch(&simple_records(0, 3, 0)));
    }
    let limit = 5000;
    log.update_config(LogConfig {
        retention_bytes: Some(limit),
        ..small_config()
    });
    let deleted = log.run_retention(NOW).unwrap();
    assert!(deleted > 0);
    let size = log.size_bytes();
    assert!(size >= limit, "{size} < {limit}");
    // Deleting one more would have gone below the limit.
    let bases = log.segment_base_offsets();
    let oldest = log
        .read(bases[0], usize::MAX >> 1, true)
        .unwrap()
        .records
        .len() as u64;
    assert!(size - oldest < limit || bases.len() == 1);
    assert_eq!(log.log_start_offset(), bases[0]);
}

#[test]
fn delete_records_moves_the_start_and_survives_reopen() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    for _ in 0..40 {
        append(&log, batch(&simple_records(0, 3, 0)));
    }
    assert!(matches!(
        log.delete_records_before(Offset(121)),
        Err(Error::OffsetOutOfRange { .. })
    ));
    let segments = log.segment_count();
    assert_eq!(log.delete_records_before(Offset(50)).unwrap(), Offset(50));
    assert!(
        log.segment_count() < segments,
        "segments wholly below 50 are dropped"
    );
    assert_eq!(log.delete_records_before(Offset(10)).unwrap(), Offset(50));
    assert!(matches!(
        log.read(Offset(49), 100, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
    // Reading at the start returns the batch containing it.
    let r = log.read(Offset(50), 100, true).unwrap();
    assert_eq!(r.log_start_offset, Offset(50));
    assert_eq!(
        BatchHeader::parse(&r.records).unwrap().base_offset,
        Offset(48)
    );
    assert_eq!(read_all(&log).first().map(|r| r.0), Some(50));
    drop(log);
    let log = f.open(small_config(), true);
    assert_eq!(log.log_start_offset(), Offset(50));
    // Up to the end is allowed and leaves an empty readable range.
    assert_eq!(log.delete_records_before(Offset(120)).unwrap(), Offset(120));
    assert!(log.read(Offset(120), 100, true).unwrap().records.is_empty());
}

#[test]
fn offset_for_timestamp_and_max_timestamp_scan_records() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    append(&log, batch(&records_with_timestamps(0, &[100, 300, 200])));
    append(
        &log,
        batch_with(
            &records_with_timestamps(0, &[150, 500, 500, 120]),
            Compression::Zstd,
        ),
    );
    append(
        &log,
        batch_with(&records_with_timestamps(0, &[400]), Compression::Gzip),
    );
    let lookup = |t| {
        log.offset_for_timestamp(Timestamp(t))
            .unwrap()
            .map(|(o, ts)| (o.0, ts.0))
    };
    assert_eq!(lookup(0), Some((0, 100)));
    assert_eq!(lookup(101), Some((1, 300)));
    assert_eq!(lookup(301), Some((4, 500)));
    assert_eq!(lookup(500), Some((4, 500)));
    assert_eq!(lookup(501), None);
    assert_eq!(
        log.offset_of_max_timestamp().unwrap(),
        Some((Offset(4), Timestamp(500)))
    );
    // Records below the log start offset are not candidates.
    log.delete_records_before(Offset(5)).unwrap();
    assert_eq!(lookup(0), Some((5, 500)));
    assert_eq!(
        log.offset_of_max_timestamp().unwrap(),
        Some((Offset(5), Timestamp(500)))
    );
    log.delete_records_before(Offset(6)).unwrap();
    assert_eq!(
        log.offset_of_max_timestamp().unwrap(),
        Some((Offset(7), Timestamp(400)))
    );
}

#[test]
fn a_new_epoch_is_checkpointed_off_the_append_and_rebuilt_after_a_crash() {
    let f = Fixture::new();
    let checkpoint = f.dir.join(crate::epoch::LEADER_EPOCH_CHECKPOINT);
    let log = f.open(LogConfig::default(), false);
    let b = batch(&simple_records(0, 2, 0));
    let (_, work) = log.append_deferred(&b, LeaderEpoch(2), NOW).unwrap();
    assert!(!work.is_empty(), "the new epoch's checkpoint is left to do");
    assert!(
        !checkpoint.exists(),
        "the append itself wrote no checkpoint"
    );
    log.complete(work).unwrap();
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "0\n1\n2 0\n");

    // An epoch whose checkpoint write never ran (the broker died first) is
    // found again in the batches recovery scans.
    let b = batch(&simple_records(0, 3, 0));
    let (_, work) = log.append_deferred(&b, LeaderEpoch(5), NOW).unwrap();
    drop(work);
    drop(log);
    let log = f.open(LogConfig::default(), false);
    let expected = vec![
        EpochEntry {
            epoch: LeaderEpoch(2),
            start_offset: Offset(0),
        },
        EpochEntry {
            epoch: LeaderEpoch(5),
            start_offset: Offset(2),
        },
    ];
    assert_eq!(log.epoch_entries(), expected);
    assert_eq!(
        std::fs::read_to_string(&checkpoint).unwrap(),
        "0\n2\n2 0\n5 2\n"
    );
    // A flush makes it durable before the recovery point passes it.
    let b = batch(&simple_records(0, 1, 0));
    let (_, work) = log.append_deferred(&b, LeaderEpoch(6), NOW).unwrap();
    drop(work);
    log.flush().unwrap();
    assert!(std::fs::read_to_string(&checkpoint)
        .unwrap()
        .ends_with("6 5\n"));
}

#[test]
fn leader_epochs_are_stamped_cached_and_persisted() {
    let f = Fixture::new();
    let log = f.open(LogConfig::default(), false);
    let b = batch(&simple_records(0, 2, 0));
    log.append(&b, LeaderEpoch(1), NOW).unwrap();
    let b = batch(&simple_records(0, 2, 0));
    log.append(&b, LeaderEpoch(1), NOW).unwrap();
    let b = batch(&simple_records(0, 3, 0));
    log.append(&b, LeaderEpoch(4), NOW).unwrap();
    let stored = log.read(Offset(4), 1 << 20, true).unwrap().records;
    assert_eq!(
        BatchHeader::parse(&stored).unwrap().partition_leader_epoch,
        LeaderEpoch(4)
    );
    assert_eq!(log.latest_epoch(), Some(LeaderEpoch(4)));
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(1)),
        Some((LeaderEpoch(1), Offset(4)))
    );
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(2)),
        Some((LeaderEpoch(1), Offset(4)))
    );
    assert_eq!(
        log.end_offset_for_epoch(LeaderEpoch(4)),
        Some((LeaderEpoch(4), Offset(7)))
    );
    assert_eq!(log.end_offset_for_epoch(LeaderEpoch(5)), None);
    drop(log);
    let log = f.open(LogConfig::default(), false);
    assert_eq!(
        log.epoch_entries(),
        vec![
            EpochEntry {
                epoch: LeaderEpoch(1),
                start_offset: Offset(0)
            },
            EpochEntry {
                epoch: LeaderEpoch(4),
                start_offset: Offset(4)
            },
        ]
    );
}

pub(super) fn producer_append(
    log: &Log,
    pid: i64,
    epoch: i16,
    seq: i32,
    n: usize,
) -> Result<AppendOutcome> {
    let b = batch(&producer_records(pid, epoch, seq, n, 0));
    log.append(&b, LeaderEpoch(0), NOW)
}

#[test]
fn idempotent_producers_are_deduplicated_sequenced_and_fenced() {
    let f = Fixture::new();
    let log = f.open(LogConfig::default(), false);
    // Unknown producer: any sequence is accepted.
    let first = producer_append(&log, 1, 0, 42, 3).unwrap();
    assert!(matches!(first, AppendOutcome::Appended(_)));
    producer_append(&log, 1, 0, 45, 2).unwrap();
    let end = log.log_end_offset();
    // A retry of either of the last batches: original offsets, nothing written.
    assert_eq!(
        producer_append(&log, 1, 0, 42, 3).unwrap(),
        AppendOutcome::Duplicate(*first.info())
    );
    assert_eq!(log.log_end_offset(), end);
    // A gap or a repeat that is not a cached batch.
    assert!(matches!(
        producer_append(&log, 1, 0, 48, 1),
        Err(Error::OutOfOrderSequence {
            expected_sequence: 47,
            sequence: 48,
            ..
        })
    ));
    assert!(matches!(
        producer_append(&log, 1, 0, 43, 1),
        Err(Error::OutOfOrderSequence { .. })
    ));
    // Only the last five batches are remembered.
    for i in 0..5 {
        producer_append(&log, 1, 0, 47 + i, 1).unwrap();
    }
    assert_eq!(log.producer_state(ProducerId(1)).unwrap().batches.len(), 5);
    assert!(matches!(
        producer_append(&log, 1, 0, 45, 2),
        Err(Error::OutOfOrderSequence { .. })
    ));
    // A new epoch must start at sequence 0; then the old epoch is fenced.
    assert!(matches!(
        producer_append(&log, 1, 1, 52, 1),
        Err(Error::OutOfOrderSequence {
            expected_sequence: 0,
            ..
        })
    ));
    producer_append(&log, 1, 1, 0, 2).unwrap();
    assert!(matches!(
        producer_append(&log, 1, 0, 52, 1),
        Err(Error::InvalidProducerEpoch {
            epoch: ProducerEpoch(0),
            current_epoch: ProducerEpoch(1),
            ..
        })
    ));
    // Other producers are independent; non-idempotent appends are unaffected.
    producer_append(&log, 2, 5, 7, 1).unwrap();
    append(&log, batch(&simple_records(0, 1, 0)));
    // An idle producer is eventually forgotten, and then any sequence goes.
    log.run_retention(Timestamp(NOW.0 + 24 * 60 * 60 * 1000 - 1))
        .unwrap();
    assert!(log.producer_state(ProducerId(1)).is_some());
    log.run_retention(Timestamp(NOW.0 + 24 * 60 * 60 * 1000))
        .unwrap();
    assert!(log.producer_state(ProducerId(1)).is_none());
    producer_append(&log, 1, 0, 500, 1).unwrap();
}

#[test]
fn sequences_wrap_after_i32_max() {
    let f = Fixture::new();
    let log = f.open(LogConfig::default(), false);
    producer_append(&log, 3, 0, i32::MAX - 1, 2).unwrap();
    assert_eq!(
        log.producer_state(ProducerId(3)).unwrap().batches[0].last_seq,
        i32::MAX
    );
    producer_append(&log, 3, 0, 0, 1).unwrap();
    assert!(matches!(
        producer_append(&log, 3, 0, 2, 1),
        Err(Error::OutOfOrderSequence {
            expected_sequence: 1,
            ..
        })
    ));
}

#[test]
fn producer_state_survives_clean_and_unclean_reopen() {
    for clean in [true, false] {
        let f = Fixture::new();
        let log = f.open(small_config(), false);
        let mut infos = Vec::new();
        for i in 0..40 {
            infos.push(*producer_append(&log, 11, 2, i * 3, 3).unwrap().info());
        }
        assert!(log.segment_count() > 2);
        if clean {
            log.close().unwrap();
        }
        drop(log);
        let log = f.open(small_config(), clean);
        let stats = log.recovery_stats();
        if clean {
            assert_eq!(stats.producer_batches_replayed, 0);
        } else {
            assert!(stats.producer_batches_replayed > 0);
        }
        assert_eq!(
            producer_append(&log, 11, 2, 39 * 3, 3).unwrap(),
            AppendOutcome::Duplicate(infos[39])
        );
        assert_eq!(
            producer_append(&log, 11, 2, 35 * 3, 3).unwrap(),
            AppendOutcome::Duplicate(infos[35])
        );
        assert!(matches!(
            producer_append(&log, 11, 2, 1000, 3),
            Err(Error::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            producer_append(&log, 11, 1, 0, 3),
            Err(Error::InvalidProducerEpoch { .. })
        ));
        producer_append(&log, 11, 2, 120, 3).unwrap();
    }
}

#[test]
fn clean_reopen_scans_nothing_and_unclean_reopen_scans_from_the_recovery_point() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    for _ in 0..50 {
        append(&log, batch(&simple_records(0, 3, 7)));
    }
    let segments = log.segment_count();
    assert!(segments > 3);
    let end = log.log_end_offset();
    log.close().unwrap();
    assert!(matches!(
        log.append(&batch(&simple_records(0, 1, 0)), LeaderEpoch(0), NOW),
        Err(Error::LogClosed)
    ));
    drop(log);

    let log = f.open(small_config(), true);
    let stats = log.recovery_stats();
    assert_eq!(stats.segments_recovered, 0);
    assert_eq!(stats.indexes_rebuilt, 0);
    assert_eq!(stats.segments_loaded, segments);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        log.offset_of_max_timestamp().unwrap().map(|(_, t)| t),
        Some(Timestamp(9))
    );
    assert_eq!(read_all(&log).len() as i64, end.0);
    // More appends, then a crash: only the active segment is scanned, as the
    // closed ones were flushed at roll.
    for _ in 0..20 {
        append(&log, batch(&simple_records(0, 3, 7)));
    }
    let end = log.log_end_offset();
    let segments = log.segment_count();
    drop(log);
    let log = f.open(small_config(), false);
    let stats = log.recovery_stats();
    assert_eq!(stats.segments_recovered, 1);
    assert_eq!(stats.segments_loaded, segments - 1);
    assert_eq!(log.log_end_offset(), end);
}

#[test]
fn missing_or_malformed_indexes_are_rebuilt() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    for _ in 0..30 {
        append(&log, batch(&simple_records(0, 3, 7)));
    }
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    drop(log);
    std::fs::remove_file(f.dir.join(file_name(bases[0], "index"))).unwrap();
    std::fs::write(f.dir.join(file_name(bases[1], "timeindex")), [1, 2, 3]).unwrap();
    let log = f.open(small_config(), true);
    assert_eq!(log.recovery_stats().indexes_rebuilt, 2);
    assert_eq!(read_all(&log).len(), 90);
    assert_eq!(
        log.offset_for_timestamp(Timestamp(9)).unwrap(),
        Some((Offset(2), Timestamp(9)))
    );
}

#[test]
fn flush_policies_move_the_recovery_point() {
    let f = Fixture::new();
    let config = LogConfig {
        flush_interval_messages: Some(5),
        flush_interval_ms: Some(1000),
        ..LogConfig::default()
    };
    let log = f.open(config, false);
    let at = |n, t| {
        let b = batch(&simple_records(0, n, 0));
        log.append(&b, LeaderEpoch(0), Timestamp(t)).unwrap();
    };
    at(3, 0);
    assert_eq!(log.recovery_point(), Offset(0));
    at(2, 10);
    assert_eq!(log.recovery_point(), Offset(5));
    at(1, 100);
    log.flush_due(Timestamp(1099)).unwrap();
    assert_eq!(log.recovery_point(), Offset(5));
    log.flush_due(Timestamp(1100)).unwrap();
    assert_eq!(log.recovery_point(), Offset(6));
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), Offset(6));
}

#[test]
fn concurrent_appends_reads_and_retention_stay_consistent() {
    let f = Fixture::new();
    let log = Arc::new(f.open(small_config(), false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..60 {
                    let b = batch(&producer_records(100 + w, 0, i * 2, 2, 0));
                    log.append(&b, LeaderEpoch(0), NOW).unwrap();
                }
            })
        })
        .collect();
    let reader = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for _ in 0..200 {
                let start = log.log_start_offset();
                match log.read(start, 1000, true) {
                    Ok(r) => assert!(
                        batch::validate(
                            &r.records,
                            &batch::ValidationConfig::for_log(&small_config())
                        )
                        .is_ok()
                            || r.records.is_empty()
                    ),
                    // Retention may move the start between the two calls.
                    Err(Error::OffsetOutOfRange { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
                log.delete_records_before(Offset(log.log_end_offset().0 / 4))
                    .unwrap();
                log.run_retention(NOW).unwrap();
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    assert_eq!(log.log_end_offset(), Offset(360));
    let records = read_all(&log);
    let start = log.log_start_offset().0;
    assert_eq!(records.len() as i64, 360 - start);
    assert!(records
        .iter()
        .enumerate()
        .all(|(i, (o, _))| *o == start + i as i64));
    for w in 0..3 {
        let e = log.producer_state(ProducerId(100 + w)).unwrap();
        assert_eq!(e.batches.back().unwrap().last_seq, 119);
    }
}

#[test]
fn clean_restarts_do_not_pile_up_producer_snapshots() {
    let f = Fixture::new();
    let mut expected_bases = Vec::new();
    for round in 0..4 {
        let log = f.open(small_config(), round > 0);
        for i in 0..10 {
            producer_append(&log, 1, 0, round * 10 + i, 1).unwrap();
        }
        expected_bases = log.segment_base_offsets();
        log.close().unwrap();
    }
    let log = f.open(small_config(), true);
    let snapshots = crate::producer_state::list_snapshots(&f.dir).unwrap();
    let end = log.log_end_offset();
    assert_eq!(snapshots.last(), Some(&end));
    assert!(
        snapshots[..snapshots.len() - 1]
            .iter()
            .all(|s| expected_bases.contains(s)),
        "{snapshots:?} vs {expected_bases:?}"
    );
    assert_eq!(log.recovery_stats().producer_batches_replayed, 0);
}

#[test]
fn offsets_are_never_reused_when_the_start_is_past_a_torn_end() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    for _ in 0..30 {
        append(&log, batch(&simple_records(0, 3, 0)));
    }
    let end = log.log_end_offset();
    let active = *log.segment_base_offsets().last().unwrap();
    log.delete_records_before(end).unwrap();
    drop(log);
    // The crash also tore the whole active segment away.
    std::fs::write(f.dir.join(file_name(active, LOG_EXT)), b"torn").unwrap();
    let log = f.open(small_config(), false);
    assert_eq!(log.log_start_offset(), end);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        append(&log, batch(&simple_records(0, 1, 0))).base_offset,
        end
    );
}

#[test]
fn size_from_counts_the_bytes_a_reader_has_left() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let one = batch(&simple_records(0, 5, 0));
    let mut bases = Vec::new();
    while log.segment_count() < 3 {
        bases.push(append(&log, one.clone()).base_offset);
    }
    let total = log.size_bytes();
    let len = one.len() as u64;
    let end = log.log_end_offset();
    assert_eq!(log.size_from(Offset(0)).unwrap(), total);
    assert_eq!(log.size_from(end).unwrap(), 0);
    assert_eq!(log.size_from(Offset(end.0 + 7)).unwrap(), 0);
    for (i, base) in bases.iter().enumerate() {
        let left = (bases.len() - i) as u64 * len;
        assert_eq!(log.size_from(*base).unwrap(), left, "from batch {i}");
        // An offset inside a batch counts that whole batch.
        assert_eq!(log.size_from(Offset(base.0 + 3)).unwrap(), left);
    }
}
