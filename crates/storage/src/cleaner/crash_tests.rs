//! A kill at every step of a swap (see [`super::swap`]), then the log
//! reopened as after a crash: it is readable and consistent, holds the
//! records of before the cleaning or of after the swap that was under way,
//! never a record twice, and the next cleaning finishes the job.

use model::Timestamp;

use super::swap::{crash_after, Step};
use super::tests::{cleaner, compact_config, contents, put_batch, table, Fixture, Rec, T0};
use crate::batch::Compression;
use crate::config::LogConfig;
use crate::log::Log;

const STEPS: [Step; 7] = [
    Step::Written,
    Step::Committed,
    Step::LogRenamed,
    Step::IndexesRenamed,
    Step::FirstRemoved,
    Step::AllRemoved,
    Step::Finished,
];

const NOW: Timestamp = Timestamp(T0 + 50_000);

/// Cleaning merges segments into ones this large, so that a swap
/// replaces several.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4000,
        ..compact_config()
    }
}

/// Updates of six keys in every codec, some tombstones, in many small
/// segments.
fn build(f: &Fixture) -> Log {
    let log = f.open(
        LogConfig {
            segment_bytes: 400,
            ..compact_config()
        },
        false,
    );
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for round in 0..12 {
        let values: Vec<String> = (0..3).map(|k| format!("round-{round}-key-{k}")).collect();
        let keys: Vec<String> = (0..3).map(|k| format!("k{}", (round + k) % 6)).collect();
        let records: Vec<_> = keys
            .iter()
            .zip(&values)
            .enumerate()
            .map(|(i, (k, v))| {
                let tombstone = (round + i) % 7 == 0;
                (Some(k.as_bytes()), (!tombstone).then_some(v.as_bytes()))
            })
            .collect();
        put_batch(&log, codecs[round % 5], &records, T0 + round as i64);
    }
    assert!(log.segment_count() > 4, "{}", log.segment_count());
    log.update_config(config());
    log
}

fn leftovers(f: &Fixture) -> Vec<String> {
    f.files()
        .into_iter()
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect()
}

#[test]
fn a_kill_at_any_step_of_a_swap_recovers_to_before_or_after_it() {
    let reference = Fixture::new();
    let log = build(&reference);
    let before = contents(&log);
    cleaner(1 << 20).clean(&log, NOW).unwrap().unwrap();
    let after = contents(&log);
    assert!(after.len() < before.len());
    drop(log);

    for step in STEPS {
        for clean_open in [false, true] {
            let f = Fixture::new();
            let log = build(&f);
            assert_eq!(contents(&log), before);
            crash_after(Some(step));
            let killed = cleaner(1 << 20).clean(&log, NOW);
            crash_after(None);
            assert!(
                killed.is_err(),
                "{step:?}: the simulated kill stops the cleaning"
            );
            // The process is gone: the log is not closed, just dropped.
            drop(log);
            let log = f.open(config(), clean_open);
            let got: Vec<Rec> = contents(&log);
            assert!(leftovers(&f).is_empty(), "{step:?}: {:?}", leftovers(&f));
            assert_eq!(table(&got), table(&before), "{step:?}: same latest values");
            assert!(
                got.iter().all(|r| before.contains(r)),
                "{step:?}: nothing invented"
            );
            assert!(
                after.iter().all(|r| got.contains(r)),
                "{step:?}: nothing lost"
            );
            if step == Step::Written {
                assert_eq!(got, before, "uncommitted: rolled back");
            } else {
                assert!(
                    got.len() < before.len(),
                    "{step:?}: committed: rolled forward"
                );
            }
            assert_eq!(log.log_end_offset(), log.recovery_point());
            // The next cleaning gets to the same result, and the log takes
            // appends as before.
            cleaner(1 << 20).clean(&log, NOW).unwrap();
            assert_eq!(contents(&log), after, "{step:?}");
            put_batch(
                &log,
                Compression::None,
                &[(Some(b"k0"), Some(b"new"))],
                T0 + 100,
            );
            drop(log);
            let log = f.open(config(), false);
            let t = table(&contents(&log));
            assert_eq!(
                t.get(b"k0".as_slice()).map(Vec::as_slice),
                Some(b"new".as_slice())
            );
        }
    }
}

#[test]
fn a_torn_cleaned_file_without_a_marker_is_discarded() {
    let f = Fixture::new();
    let log = build(&f);
    let before = contents(&log);
    crash_after(Some(Step::Written));
    assert!(cleaner(1 << 20).clean(&log, NOW).is_err());
    crash_after(None);
    drop(log);
    // Cut the cleaned file in the middle of a batch, as a kill during its
    // write would.
    let cleaned = f
        .files()
        .into_iter()
        .find(|n| n.ends_with(".log.cleaned"))
        .expect("a cleaned file was written");
    let path = f.dir.join(cleaned);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let log = f.open(config(), false);
    assert_eq!(contents(&log), before);
    assert!(leftovers(&f).is_empty());
}
