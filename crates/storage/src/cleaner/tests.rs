//! The cleaner on real logs: what is kept, tombstone expiry, the lag and
//! dirty-ratio gates, producer state, reads across removed offsets, and
//! coexistence with retention and with concurrent appends and reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use model::{
    LeaderEpoch, Offset, PartitionId, ProducerEpoch, ProducerId, Timestamp, TopicId, TopicName,
    TopicPartition,
};

use super::*;
use crate::batch::{self, Compression};
use crate::builder::BatchBuilder;
use crate::config::{CleanupPolicy, LogConfig};
use crate::log::AppendOutcome;

pub(super) const T0: i64 = 1_700_000_000_000;

/// A stored record: offset, key, value.
pub(super) type Rec = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

pub(super) struct Fixture {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    id: TopicId,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("compacted-0");
        Fixture {
            _tmp: tmp,
            dir,
            id: TopicId::random(),
        }
    }

    pub fn open(&self, config: LogConfig, clean: bool) -> Log {
        let tp = TopicPartition::new(TopicName::new("compacted").unwrap(), PartitionId(0));
        Log::open(self.dir.clone(), tp, self.id, config, clean).unwrap()
    }

    /// Names of the files in the partition directory.
    pub fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }
}

/// A compacted log with small segments and sparse indexes.
pub(super) fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        roll_ms: None,
        retention_ms: None,
        index_interval_bytes: 100,
        producer_id_expiration_ms: None,
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        delete_retention_ms: 1000,
        ..LogConfig::default()
    }
}

/// A cleaner with a small key map budget (`map_bytes`).
pub(super) fn cleaner(map_bytes: u64) -> Arc<LogCleaner> {
    LogCleaner::new(CleanerConfig {
        dedupe_buffer_size: map_bytes,
        ..CleanerConfig::default()
    })
}

/// One record to write: key and value (`None`: null).
pub(super) type Put<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Appends the records as one batch at `ts`; returns its base offset.
pub(super) fn put_batch(log: &Log, codec: Compression, records: &[Put<'_>], ts: i64) -> Offset {
    put_batch_as(log, BatchBuilder::new(codec), records, ts)
}

pub(super) fn put_batch_as(log: &Log, mut b: BatchBuilder, records: &[Put<'_>], ts: i64) -> Offset {
    for (i, (k, v)) in records.iter().enumerate() {
        b.append(Timestamp(ts + i as i64), *k, *v, &[(b"h", Some(b"1"))])
            .unwrap();
    }
    match log
        .append(&b.build().unwrap(), LeaderEpoch(0), Timestamp(ts))
        .unwrap()
    {
        AppendOutcome::Appended(info) => info.base_offset,
        other => panic!("{other:?}"),
    }
}

/// Appends `key`=`value` (a tombstone for `None`) as a batch of its own.
pub(super) fn put(log: &Log, key: &str, value: Option<&str>, ts: i64) -> Offset {
    put_batch(
        log,
        Compression::None,
        &[(Some(key.as_bytes()), value.map(str::as_bytes))],
        ts,
    )
}

/// Every record readable from the log start, through `Log::read` the way a
/// consumer reads (continuing at each batch's next offset), checking that
/// offsets strictly increase and that every read at an offset below the end
/// returns something.
pub(super) fn contents(log: &Log) -> Vec<Rec> {
    let mut out: Vec<Rec> = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, true).unwrap();
        assert!(!r.records.is_empty(), "nothing read at {offset}");
        for (pos, h) in batch::headers(&r.records) {
            let body = Bytes::copy_from_slice(&r.records[pos..pos + h.total_size()]);
            for rec in RecordIter::new(body, u64::MAX).unwrap() {
                let rec = rec.unwrap();
                if rec.offset < offset {
                    continue;
                }
                if let Some(last) = out.last() {
                    assert!(rec.offset.0 > last.0, "offsets must increase: {rec:?}");
                }
                out.push((
                    rec.offset.0,
                    rec.key.map(|k| k.to_vec()),
                    rec.value.map(|v| v.to_vec()),
                ));
            }
            offset = h.next_offset();
        }
    }
    out
}

/// What a consumer that applies every record in order ends up with: the
/// latest value per key, keys whose latest record is a tombstone absent.
pub(super) fn table(records: &[Rec]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut t = BTreeMap::new();
    for (_, k, v) in records {
        if let Some(k) = k {
            match v {
                Some(v) => t.insert(k.clone(), v.clone()),
                None => t.remove(k),
            };
        }
    }
    t
}

/// `keys` × `rounds` updates, one batch each, `k{i}` = `r{round}-k{i}`.
fn updates(log: &Log, keys: usize, rounds: usize) {
    for round in 0..rounds {
        for k in 0..keys {
            let value = format!("r{round}-k{k}");
            put(
                log,
                &format!("k{k}"),
                Some(&value),
                T0 + (round * keys + k) as i64,
            );
        }
    }
}

#[test]
fn keeps_the_latest_value_per_key_and_everything_above_the_cleaned_point() {
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    updates(&log, 8, 15);
    let before = contents(&log);
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let segments = log.segment_count();
    let active = *log.segment_base_offsets().last().unwrap();
    assert!(segments > 5, "{segments}");

    let c = cleaner(1 << 20);
    let s = c.clean(&log, Timestamp(T0 + 10_000)).unwrap().unwrap();
    assert_eq!(s.first_dirty, start);
    assert_eq!(
        s.cleaned_up_to, active,
        "the whole closed part, not the active segment"
    );
    // Full segments are cleaned one by one (merging comes once they shrank).
    assert!(s.segments_after <= s.segments_before && s.segments_after > 0);
    assert!(s.bytes_after < s.bytes_before / 3, "{s:?}");
    assert!(s.records_removed > 80, "{s:?}");
    let after = contents(&log);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (start, end));
    assert_eq!(table(&after), table(&before));
    // Below the cleaned point one record per key; above it, everything.
    let below: Vec<&Rec> = after.iter().filter(|r| r.0 < active.0).collect();
    let keys: std::collections::BTreeSet<_> = below.iter().map(|r| r.1.clone()).collect();
    assert_eq!(keys.len(), below.len(), "{below:?}");
    let above =
        |rs: &[Rec]| -> Vec<Rec> { rs.iter().filter(|r| r.0 >= active.0).cloned().collect() };
    assert_eq!(above(&after), above(&before));
    assert!(after.iter().all(|r| before.contains(r)), "nothing invented");
    assert_eq!(
        read_offset(&f.dir.join(CLEANER_CHECKPOINT)).unwrap(),
        Some(active)
    );
    let stats = c.stats();
    assert_eq!((stats.runs, stats.segments_cleaned), (1, s.segments_before));

    // Nothing new: nothing to do.
    assert!(c.clean(&log, Timestamp(T0 + 10_000)).unwrap().is_none());
    // New updates: the next cleaning also merges the thinned segments.
    updates(&log, 8, 3);
    let before = contents(&log);
    let s = c.clean(&log, Timestamp(T0 + 10_000)).unwrap().unwrap();
    assert!(s.segments_after * 3 <= s.segments_before, "{s:?}");
    assert!(
        log.segment_count() * 2 < segments,
        "{}",
        log.segment_count()
    );
    let after = contents(&log);
    assert_eq!(table(&after), table(&before));
    // Reopening, cleanly or not, reads the same.
    drop(log);
    let checkpoint = read_offset(&f.dir.join(CLEANER_CHECKPOINT))
        .unwrap()
        .unwrap();
    for clean in [false, true] {
        let log = f.open(compact_config(), clean);
        assert_eq!(contents(&log), after);
        // The cleaner goes on where it stopped: nothing is dirty yet.
        assert_eq!(LogCleaner::cleanable(&log, Timestamp(T0)).unwrap(), None);
        assert!(
            f.files()
                .iter()
                .all(|n| !n.ends_with(".cleaned") && !n.ends_with(".swap")),
            "{:?}",
            f.files()
        );
    }
    let log = f.open(compact_config(), false);
    updates(&log, 8, 2);
    let dirty = LogCleaner::cleanable(&log, Timestamp(T0)).unwrap().unwrap();
    assert_eq!(dirty.first_dirty, checkpoint);
}

#[test]
fn reads_at_removed_offsets_continue_at_the_next_record() {
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    updates(&log, 4, 20);
    let c = cleaner(1 << 20);
    c.clean(&log, Timestamp(T0 + 10_000)).unwrap().unwrap();
    let kept: Vec<i64> = contents(&log).iter().map(|r| r.0).collect();
    for offset in 0..log.log_end_offset().0 {
        let next = *kept.iter().find(|o| **o >= offset).unwrap();
        let r = log.read_region(Offset(offset), 1 << 20, false).unwrap();
        let bytes = r.region.expect("a record follows").read_all().unwrap();
        let h = BatchHeader::parse(&bytes).unwrap();
        let first = RecordIter::new(bytes.slice(..h.total_size()), u64::MAX)
            .unwrap()
            .map(|r| r.unwrap().offset.0)
            .find(|o| *o >= offset);
        assert_eq!(first, Some(next), "reading at {offset}");
        assert!(r.next_offset.0 > offset);
    }
    // size_from still counts what a reader at any offset has left.
    assert!(log.size_from(Offset(1)).unwrap() <= log.size_bytes());
}

#[test]
fn tombstones_stay_until_their_horizon_then_go() {
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    put(&log, "gone", Some("v1"), T0);
    put(&log, "kept", Some("v1"), T0);
    put(&log, "gone", None, T0 + 1);
    let filler = |n: usize| {
        for i in 0..n {
            put(
                &log,
                &format!("f{}", i % 3),
                Some("filler-value-xxxxxxxxxx"),
                T0 + 2,
            );
        }
    };
    filler(30);
    let c = cleaner(1 << 20);
    let tombstone = |log: &Log| {
        contents(log)
            .iter()
            .any(|r| r.1.as_deref() == Some(b"gone".as_slice()))
    };
    // First cleaning at t: the old value goes, the tombstone stays and
    // gets the horizon t + delete.retention.ms.
    let t = T0 + 100_000;
    c.clean(&log, Timestamp(t)).unwrap().unwrap();
    let after: Vec<Rec> = contents(&log);
    let gone: Vec<&Rec> = after
        .iter()
        .filter(|r| r.1.as_deref() == Some(b"gone".as_slice()))
        .collect();
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].2, None, "only the tombstone is left");
    filler(30);
    c.clean(&log, Timestamp(t + 999)).unwrap().unwrap();
    assert!(tombstone(&log), "before the horizon the tombstone stays");
    filler(30);
    let s = c.clean(&log, Timestamp(t + 1000)).unwrap().unwrap();
    assert!(!tombstone(&log), "at the horizon it goes");
    assert_eq!(s.tombstones_removed, 1);
    let t2 = table(&contents(&log));
    assert_eq!(
        t2.get(b"kept".as_slice()).map(Vec::as_slice),
        Some(b"v1".as_slice())
    );
    assert!(!t2.contains_key(b"gone".as_slice()));
    // The horizon is in the batch: it survives a restart.
    drop(log);
    let log = f.open(compact_config(), false);
    assert!(!tombstone(&log));
}

#[test]
fn min_compaction_lag_keeps_recent_segments_dirty() {
    let f = Fixture::new();
    let config = LogConfig {
        min_compaction_lag_ms: 60_000,
        ..compact_config()
    };
    let log = f.open(config, false);
    // Old records, then records 10 s old (at now = T0 + 100 s).
    for i in 0..40 {
        put(&log, &format!("k{}", i % 4), Some("old-value"), T0 + i);
    }
    let recent_from = log.log_end_offset();
    for i in 0..40 {
        put(
            &log,
            &format!("k{}", i % 4),
            Some("new-value"),
            T0 + 90_000 + i,
        );
    }
    let before = contents(&log);
    let now = Timestamp(T0 + 100_000);
    let cl = LogCleaner::cleanable(&log, now).unwrap().unwrap();
    let bases = log.segment_base_offsets();
    let holding_recent = bases.iter().rev().find(|b| **b <= recent_from).unwrap();
    assert_eq!(cl.first_uncleanable, *holding_recent);
    let s = cleaner(1 << 20).clean(&log, now).unwrap().unwrap();
    assert_eq!(s.cleaned_up_to, *holding_recent);
    let after = contents(&log);
    let from = |rs: &[Rec]| -> Vec<Rec> {
        rs.iter()
            .filter(|r| r.0 >= holding_recent.0)
            .cloned()
            .collect()
    };
    assert_eq!(from(&after), from(&before), "the lag protects them");
    assert!(after.len() < before.len());
    // A minute later everything closed is cleanable.
    let later = Timestamp(T0 + 200_000);
    let cl = LogCleaner::cleanable(&log, later).unwrap().unwrap();
    assert_eq!(
        cl.first_uncleanable,
        *log.segment_base_offsets().last().unwrap()
    );
}

#[test]
fn the_dirty_ratio_and_max_lag_decide_which_log_is_cleaned() {
    let f = Fixture::new();
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.5,
        ..compact_config()
    };
    let log = Arc::new(f.open(config.clone(), false));
    updates(&log, 20, 10);
    let c = cleaner(1 << 20);
    let now = Timestamp(T0 + 10_000);
    let logs = [Arc::clone(&log)];
    let first = c.clean_filthiest(&logs, now).unwrap().unwrap();
    assert_eq!(first.first_dirty, Offset(0));
    // A little new dirt: under the ratio, nothing is due.
    updates(&log, 4, 2);
    let cl = LogCleaner::cleanable(&log, now).unwrap().unwrap();
    assert!(cl.dirty_ratio > 0.0 && cl.dirty_ratio < 0.5, "{cl:?}");
    assert!(c.clean_filthiest(&logs, now).unwrap().is_none());
    // Past max.compaction.lag.ms it is due anyway.
    log.update_config(LogConfig {
        max_compaction_lag_ms: 1000,
        ..config.clone()
    });
    let late = Timestamp(T0 + 100_000);
    let cl = LogCleaner::cleanable(&log, late).unwrap().unwrap();
    assert!(cl.overdue_ms.is_some_and(|d| d > 0), "{cl:?}");
    assert!(c.clean_filthiest(&logs, late).unwrap().is_some());
    // Lots of new dirt: due by ratio.
    log.update_config(config);
    updates(&log, 4, 30);
    let cl = LogCleaner::cleanable(&log, now).unwrap().unwrap();
    assert!(cl.dirty_ratio > 0.5, "{cl:?}");
    let s = c.clean_filthiest(&logs, now).unwrap().unwrap();
    assert!(s.first_dirty > first.cleaned_up_to, "{s:?}");
    // A log that is not compacted is never taken.
    let g = Fixture::new();
    let plain = Arc::new(g.open(
        LogConfig {
            segment_bytes: 700,
            ..LogConfig::default()
        },
        false,
    ));
    updates(&plain, 4, 20);
    assert!(c.clean_filthiest(&[plain], now).unwrap().is_none());
}

#[test]
fn max_compaction_lag_rolls_the_active_segment() {
    let f = Fixture::new();
    let config = LogConfig {
        segment_bytes: 1 << 20,
        max_compaction_lag_ms: 1000,
        ..compact_config()
    };
    let log = f.open(config, false);
    put(&log, "a", Some("1"), T0);
    put(&log, "a", Some("2"), T0 + 500);
    assert_eq!(log.segment_count(), 1);
    put(&log, "a", Some("3"), T0 + 1500);
    assert_eq!(
        log.segment_count(),
        2,
        "rolled once the first record was past the lag"
    );
}

#[test]
fn the_last_batch_of_an_idempotent_producer_survives_emptied() {
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    let pid = ProducerId(77);
    let idempotent =
        |seq: i32| BatchBuilder::new(Compression::Zstd).producer(pid, ProducerEpoch(3), seq);
    put_batch_as(
        &log,
        idempotent(0),
        &[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"1"))],
        T0,
    );
    put_batch_as(&log, idempotent(2), &[(Some(b"a"), Some(b"2"))], T0 + 1);
    let last = log.log_end_offset().plus(-1);
    // Another writer supersedes everything the producer wrote.
    for i in 0..30 {
        let v = format!("other-{i}");
        put_batch(
            &log,
            Compression::None,
            &[
                (Some(b"a"), Some(v.as_bytes())),
                (Some(b"b"), Some(v.as_bytes())),
            ],
            T0 + 2,
        );
    }
    cleaner(1 << 20)
        .clean(&log, Timestamp(T0 + 10_000))
        .unwrap()
        .unwrap();
    assert!(
        contents(&log).iter().all(|r| r.0 > last.0),
        "the producer's records are gone"
    );
    // Its last batch is still there, without records.
    let r = log.read(Offset(0), 1 << 20, true).unwrap();
    let (_, h) = batch::headers(&r.records).next().unwrap();
    assert_eq!(
        (h.producer_id, h.record_count, h.last_offset()),
        (pid, 0, last)
    );
    assert_eq!(h.last_sequence(), 2);
    // With no snapshot to start from, the state is rebuilt from the log.
    drop(log);
    for name in f.files().iter().filter(|n| n.ends_with(".snapshot")) {
        std::fs::remove_file(f.dir.join(name)).unwrap();
    }
    let log = f.open(compact_config(), false);
    let state = log.producer_state(pid).expect("the producer is known");
    assert_eq!(state.epoch, ProducerEpoch(3));
    assert_eq!(state.batches.back().unwrap().last_seq, 2);
    // Its retry is recognised, its next batch accepted in sequence.
    let retry = idempotent(2);
    let mut b = retry;
    b.append(Timestamp(T0), Some(b"a"), Some(b"2"), &[])
        .unwrap();
    assert!(matches!(
        log.append(&b.build().unwrap(), LeaderEpoch(0), Timestamp(T0))
            .unwrap(),
        AppendOutcome::Duplicate(_)
    ));
    put_batch_as(&log, idempotent(3), &[(Some(b"a"), Some(b"3"))], T0 + 3);
}

#[test]
fn a_full_key_map_ends_the_section_early_and_keeps_what_follows() {
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    updates(&log, 40, 6);
    let before = contents(&log);
    // Room for a few keys only.
    let c = cleaner(0);
    let view = log.cleaning_view().unwrap();
    let mut run = Run {
        log: &log,
        view: &view,
        aborted: super::AbortedIndex::of(&view.aborted),
        throttler: &c.throttler,
        map: OffsetMap::new(600),
        map_end: Offset(0),
        bytes_read: 0,
    };
    assert!(run
        .build_map(Offset(0), *log.segment_base_offsets().last().unwrap())
        .unwrap());
    let end = run.map_end;
    assert!(
        end > Offset(0) && end < Offset(200),
        "stopped early at {end}"
    );
    // Everything at or past the map's end stays, whatever its key.
    for group in groups(&view, end) {
        run.clean_group(
            &group,
            Rules {
                now: T0,
                delete_retention_ms: 0,
            },
        )
        .unwrap();
    }
    let after = contents(&log);
    let from = |rs: &[Rec]| -> Vec<Rec> { rs.iter().filter(|r| r.0 >= end.0).cloned().collect() };
    assert_eq!(from(&after), from(&before));
    assert_eq!(table(&after), table(&before));
}

/// Segments are merged while the merged segment stays within
/// `segment.bytes` and its indexes within `segment.index.bytes`.
#[test]
fn groups_fit_segment_bytes_and_segment_index_bytes() {
    let meta = |i: i64| SegmentMeta {
        base: Offset(i * 10),
        end: Offset(i * 10 + 10),
        size: 100,
        max_timestamp: Timestamp(-1),
        log_path: PathBuf::new(),
        // Two offset index entries, two time index entries.
        index_bytes: (16, 24),
    };
    let view = |segment_bytes: u64, segment_index_bytes: u32| CleaningView {
        closed: (0..4).map(meta).collect(),
        active_base: Offset(40),
        log_start_offset: Offset(0),
        log_end_offset: Offset(45),
        config: LogConfig {
            segment_bytes,
            segment_index_bytes,
            ..compact_config()
        },
        producer_last_offsets: Default::default(),
        last_stable_offset: Offset(45),
        aborted: Vec::new(),
    };
    let sizes =
        |v: &CleaningView| -> Vec<usize> { groups(v, Offset(40)).iter().map(Vec::len).collect() };
    assert_eq!(sizes(&view(10_000, 1 << 20)), [4]);
    assert_eq!(sizes(&view(300, 1 << 20)), [3, 1]);
    // Three time indexes (72 bytes) would not fit in 50.
    assert_eq!(sizes(&view(10_000, 50)), [2, 2]);
    assert_eq!(sizes(&view(10_000, 20)), [1, 1, 1, 1]);
}

#[test]
fn compact_only_logs_keep_their_segments_and_compact_delete_logs_lose_old_ones() {
    for delete in [false, true] {
        let f = Fixture::new();
        let config = LogConfig {
            retention_ms: Some(1000),
            cleanup_policy: CleanupPolicy {
                delete,
                compact: true,
            },
            ..compact_config()
        };
        let log = f.open(config, false);
        updates(&log, 4, 20);
        let segments = log.segment_count();
        cleaner(1 << 20)
            .clean(&log, Timestamp(T0 + 10_000))
            .unwrap()
            .unwrap();
        // Emptied segments have no record timestamp: their age is their
        // file's (the newest source's), as Kafka's are.
        let later = wall_ms(SystemTime::now()) + 1_000_000;
        let removed = log.run_retention(Timestamp(later)).unwrap();
        if delete {
            assert!(removed > 0 && log.log_start_offset() > Offset(0));
        } else {
            assert_eq!(removed, 0);
            assert_eq!(log.segment_count(), segments);
            assert_eq!(log.log_start_offset(), Offset(0));
        }
    }
}

/// Writes a copy of `group`'s batches as the cleaned segment of its base.
fn copy_as_cleaned(f: &Fixture, log: &Log, group: &[SegmentMeta]) {
    let mut w = CleanedWriter::create(&f.dir, group[0].base, 100).unwrap();
    for s in group {
        let seg = log.closed_segment_view(s.base, s.size).unwrap().unwrap();
        scan(&seg.file, &seg.path, 0, seg.end, true, |_, h, body| {
            w.append(body, h)?;
            Ok(true)
        })
        .unwrap();
    }
    w.finish(SystemTime::now()).unwrap();
}

#[test]
fn a_swap_replaces_its_sources_unless_they_changed() {
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    updates(&log, 4, 20);
    let before = contents(&log);
    let segments = log.segment_count();
    let view = log.cleaning_view().unwrap();
    let replace = |group: &[SegmentMeta]| {
        let sources: Vec<(Offset, u64)> = group.iter().map(|s| (s.base, s.size)).collect();
        log.replace_with_cleaned(&sources, group.last().unwrap().end)
            .unwrap()
    };
    // Two segments merged into one, same content.
    copy_as_cleaned(&f, &log, &view.closed[0..2]);
    assert_eq!(replace(&view.closed[0..2]), SwapOutcome::Swapped);
    assert_eq!(log.segment_count(), segments - 1);
    assert_eq!(contents(&log), before);
    // DeleteRecords removes a source before the swap: nothing happens.
    copy_as_cleaned(&f, &log, &view.closed[2..4]);
    log.delete_records_before(view.closed[3].base).unwrap();
    assert_eq!(replace(&view.closed[2..4]), SwapOutcome::Stale);
    assert!(!swap::pending(&f.dir).unwrap());
    // The merged pair and the third segment went; nothing was swapped.
    assert_eq!(log.segment_count(), segments - 3);
    assert!(f.files().iter().all(|n| !n.ends_with(".swap")));
}

#[test]
fn appends_and_reads_go_on_while_the_cleaner_works() {
    let f = Fixture::new();
    let log = Arc::new(f.open(compact_config(), false));
    updates(&log, 6, 10);
    let c = cleaner(1 << 20);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut n = 0;
            while n < 200 {
                put(
                    &log,
                    &format!("k{}", n % 6),
                    Some(&format!("w{n}")),
                    T0 + 1000 + n as i64,
                );
                n += 1;
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let reader = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                // Offsets strictly increase whatever the cleaner is doing.
                contents(&log);
            }
        });
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            c.clean(&log, Timestamp(T0 + 100_000)).unwrap();
        }
        writer.join().unwrap();
        reader.join().unwrap();
    });
    c.clean(&log, Timestamp(T0 + 100_000)).unwrap();
    let t = table(&contents(&log));
    for k in 0..6 {
        let latest = (0..200).filter(|n| n % 6 == k).max().unwrap();
        assert_eq!(
            t.get(format!("k{k}").as_bytes()).map(Vec::as_slice),
            Some(format!("w{latest}").as_bytes())
        );
    }
}

/// Every record's offset and timestamp, brute force.
fn timestamps(log: &Log) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, usize::MAX, true).unwrap();
        for (pos, h) in batch::headers(&r.records) {
            let body = Bytes::copy_from_slice(&r.records[pos..pos + h.total_size()]);
            for rec in RecordIter::new(body, u64::MAX).unwrap() {
                let rec = rec.unwrap();
                out.push((rec.offset.0, rec.timestamp.0));
            }
            offset = h.next_offset();
        }
    }
    out
}

#[test]
fn cleaned_segments_get_new_indexes_that_answer_timestamp_lookups() {
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    updates(&log, 6, 15);
    cleaner(1 << 20)
        .clean(&log, Timestamp(T0 + 10_000))
        .unwrap()
        .unwrap();
    updates(&log, 6, 3);
    cleaner(1 << 20)
        .clean(&log, Timestamp(T0 + 10_000))
        .unwrap()
        .unwrap();
    let kept = timestamps(&log);
    let check = |log: &Log| {
        for target in (T0 - 1..T0 + 120).step_by(7) {
            let expected = kept.iter().find(|(_, ts)| *ts >= target).copied();
            let got = log
                .offset_for_timestamp(Timestamp(target))
                .unwrap()
                .map(|(o, t)| (o.0, t.0));
            assert_eq!(got, expected, "first record at or after {target}");
        }
        let max = kept.iter().max_by_key(|(_, ts)| *ts).copied();
        let got = log
            .offset_of_max_timestamp()
            .unwrap()
            .map(|(o, t)| (o.0, t.0));
        assert_eq!(got, max);
    };
    check(&log);
    drop(log);
    // A clean open trusts the index files written by the cleaner.
    let log = f.open(compact_config(), true);
    assert_eq!(log.recovery_stats().indexes_rebuilt, 0);
    check(&log);
}

/// A transactional batch of `pid` (epoch 0, sequence `seq`) putting `key`.
fn put_txn(log: &Log, pid: i64, seq: i32, key: &str, value: &str, ts: i64) -> Offset {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(ProducerId(pid), ProducerEpoch(0), seq)
        .flags(crate::batch::TRANSACTIONAL_FLAG);
    b.append(
        Timestamp(ts),
        Some(key.as_bytes()),
        Some(value.as_bytes()),
        &[],
    )
    .unwrap();
    let (outcome, work) = log
        .append_transactional_deferred(&b.build().unwrap(), LeaderEpoch(0), Timestamp(ts))
        .unwrap();
    log.complete(work).unwrap();
    outcome.info().base_offset
}

fn end_txn(log: &Log, pid: i64, control: crate::txn::ControlType, ts: i64) {
    let m = crate::txn::TxnMarker {
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(0),
        control,
        coordinator_epoch: 0,
    };
    let (_, work) = log.write_marker(&m, LeaderEpoch(0), Timestamp(ts)).unwrap();
    log.complete(work).unwrap();
}

#[test]
fn aborted_records_are_removed_never_shadow_a_committed_value_and_ongoing_ones_are_not_cleaned() {
    use crate::txn::ControlType::{Abort, Commit};
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    let committed = put(&log, "k", Some("committed"), T0);
    // An aborted transaction writes k again; a committed one writes j.
    let aborted_at = put_txn(&log, 1, 0, "k", "aborted", T0 + 1);
    end_txn(&log, 1, Abort, T0 + 2);
    put_txn(&log, 2, 0, "j", "j1", T0 + 3);
    end_txn(&log, 2, Commit, T0 + 4);
    updates(&log, 4, 6);
    // An ongoing transaction: nothing from its segment on is cleaned.
    let ongoing = put_txn(&log, 3, 0, "k", "ongoing", T0 + 100);
    updates(&log, 4, 6);
    assert_eq!(log.last_stable_offset(), ongoing);
    let c = cleaner(1 << 20);
    let s = c.clean(&log, Timestamp(T0 + 10_000)).unwrap().unwrap();
    assert!(s.cleaned_up_to <= ongoing, "{s:?}");
    let after = contents(&log);
    // The committed value of k is still there for read_committed readers
    // (who drop the aborted one, listed among the aborted transactions).
    assert!(after.iter().any(|(o, _, _)| *o == committed.0), "{after:?}");
    assert!(after
        .iter()
        .any(|(_, k, v)| k.as_deref() == Some(b"j") && v.as_deref() == Some(b"j1")));
    assert!(after.iter().any(|(o, _, _)| *o == ongoing.0));
    // The aborted record itself is gone, as Kafka's cleaner discards it;
    // its transaction stays listed (harmless to readers).
    assert!(
        !after.iter().any(|(o, _, _)| *o == aborted_at.0),
        "the aborted record survived cleaning: {after:?}"
    );
    let aborted = log.aborted_transactions(Offset(0), log.last_stable_offset());
    assert_eq!(aborted.len(), 1);
    assert_eq!(aborted[0].producer_id, ProducerId(1));
    // Reopened after a crash, the same.
    drop(log);
    let log = f.open(compact_config(), false);
    assert_eq!(contents(&log), after);
    assert_eq!(
        log.aborted_transactions(Offset(0), log.last_stable_offset()),
        aborted
    );
}

#[test]
fn an_abort_marker_in_the_active_segment_still_protects_the_committed_value() {
    use crate::txn::ControlType::Abort;
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    let committed = put(&log, "k", Some("committed"), T0);
    put_txn(&log, 5, 0, "k", "aborted", T0 + 1);
    // Segments roll while the transaction is open; its marker lands in
    // the active segment, after the record it aborts.
    updates(&log, 4, 8);
    end_txn(&log, 5, Abort, T0 + 200);
    let marker_segment = *log.segment_base_offsets().last().unwrap();
    assert!(
        marker_segment > Offset(1),
        "the marker is in a later segment"
    );
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    let c = cleaner(1 << 20);
    c.clean(&log, Timestamp(T0 + 10_000)).unwrap().unwrap();
    let after = contents(&log);
    assert!(
        after.iter().any(|(o, _, _)| *o == committed.0),
        "the committed value of k was cleaned away: {after:?}"
    );
}

#[test]
fn a_producers_aborted_transactions_go_and_its_committed_one_stays() {
    use crate::txn::ControlType::{Abort, Commit};
    let f = Fixture::new();
    let log = f.open(compact_config(), false);
    let a1 = put_txn(&log, 7, 0, "a", "aborted-1", T0);
    end_txn(&log, 7, Abort, T0 + 1);
    let c = put_txn(&log, 7, 1, "b", "committed", T0 + 2);
    end_txn(&log, 7, Commit, T0 + 3);
    let a2 = put_txn(&log, 7, 2, "c", "aborted-2", T0 + 4);
    end_txn(&log, 7, Abort, T0 + 5);
    updates(&log, 4, 6);
    cleaner(1 << 20)
        .clean(&log, Timestamp(T0 + 10_000))
        .unwrap()
        .unwrap();
    let offsets: Vec<i64> = contents(&log).iter().map(|(o, _, _)| *o).collect();
    assert!(
        !offsets.contains(&a1.0) && !offsets.contains(&a2.0),
        "{offsets:?}"
    );
    assert!(offsets.contains(&c.0), "{offsets:?}");
}
