//! Property tests of the log: round trips, crash recovery and timestamp
//! lookups against brute force.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use model::{LeaderEpoch, Offset, Timestamp};
use proptest::prelude::*;

use super::tests::{append, producer_append, read_all, small_config, Fixture, NOW};
use crate::batch::{self, Compression};
use crate::config::LogConfig;
use crate::segment::{file_name, LOG_EXT};
use crate::test_util::{
    batch, batch_with, producer_records, records_with_timestamps, simple_records, stamped,
};

fn truncate_file(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn round_trip_with_random_batches_and_segment_sizes(
        batches in proptest::collection::vec((1usize..8, 0usize..5), 1..40),
        segment_bytes in 300u64..4000,
        max_bytes in 1usize..2000,
    ) {
        const CODECS: [Compression; 5] =
            [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
        let f = Fixture::new();
        let log = f.open(LogConfig { segment_bytes, ..small_config() }, false);
        let mut total = 0;
        let mut stored = Vec::new();
        for (i, (n, codec)) in batches.iter().enumerate() {
            let bytes = batch_with(&simple_records(0, *n, i as i64), CODECS[*codec]);
            let info = log.append(&bytes, LeaderEpoch(0), NOW).unwrap();
            prop_assert_eq!(info.info().base_offset, Offset(total));
            total += *n as i64;
            stored.push(stamped(&bytes, info.info().base_offset, LeaderEpoch(0)));
        }
        prop_assert_eq!(log.log_end_offset(), Offset(total));
        let all: Vec<u8> = stored.concat();
        let mut got = Vec::new();
        let mut offset = Offset(0);
        while offset < log.log_end_offset() {
            let r = log.read(offset, max_bytes, true).unwrap();
            prop_assert!(!r.records.is_empty());
            prop_assert!(r.records.len() <= max_bytes || batch::headers(&r.records).count() == 1);
            for (_, h) in batch::headers(&r.records) {
                offset = h.next_offset();
            }
            got.extend_from_slice(&r.records);
        }
        prop_assert_eq!(got, all);
    }

    #[test]
    fn recovery_keeps_exactly_the_valid_prefix(
        counts in proptest::collection::vec(1usize..6, 2..30),
        cut in 0.0f64..1.0,
        garbage in proptest::collection::vec(any::<u8>(), 0..100),
        truncate in any::<bool>(),
    ) {
        let f = Fixture::new();
        let config = LogConfig { segment_bytes: 1200, ..small_config() };
        let log = f.open(config.clone(), false);
        for (i, n) in counts.iter().enumerate() {
            append(&log, batch(&producer_records(5, 0, counts[..i].iter().sum::<usize>() as i32, *n, i as i64)));
        }
        let active = *log.segment_base_offsets().last().unwrap();
        let end = log.log_end_offset();
        drop(log); // a crash: no clean close

        let path = f.dir.join(file_name(active, LOG_EXT));
        let content = std::fs::read(&path).unwrap();
        let expected_end = if truncate {
            let len = (content.len() as f64 * cut) as usize;
            truncate_file(&path, len as u64);
            batch::headers(&content)
                .take_while(|(p, h)| p + h.total_size() <= len)
                .last()
                .map_or(active, |(_, h)| h.next_offset())
        } else {
            OpenOptions::new().append(true).open(&path).unwrap().write_all(&garbage).unwrap();
            end
        };

        let log = f.open(config, false);
        prop_assert_eq!(log.log_end_offset(), expected_end);
        let records = read_all(&log);
        prop_assert_eq!(records.len() as i64, expected_end.0);
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len() as usize,
            if truncate { batch::headers(&content).take_while(|(p, h)| p + h.total_size() <= (content.len() as f64 * cut) as usize).last().map_or(0, |(p, h)| p + h.total_size()) } else { content.len() });
        // Appends continue at the right offset, and the producer can go on.
        let next_seq = expected_end.0 as i32;
        let info = *producer_append(&log, 5, 0, next_seq, 2).unwrap().info();
        prop_assert_eq!(info.base_offset, expected_end);
        prop_assert_eq!(read_all(&log).len() as i64, expected_end.0 + 2);
    }

    #[test]
    fn timestamp_lookups_match_brute_force(
        batches in proptest::collection::vec(
            (proptest::collection::vec(0i64..1000, 1..6), 0usize..5), 1..25),
        targets in proptest::collection::vec(-5i64..1010, 1..10),
        delete_before in 0usize..10,
    ) {
        const CODECS: [Compression; 5] =
            [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
        let f = Fixture::new();
        let log = f.open(LogConfig { segment_bytes: 400, index_interval_bytes: 100, ..small_config() }, false);
        let mut all = Vec::new();
        for (ts, codec) in &batches {
            append(&log, batch_with(&records_with_timestamps(0, ts), CODECS[*codec]));
            all.extend_from_slice(ts);
        }
        let start = delete_before.min(all.len());
        log.delete_records_before(Offset(start as i64)).unwrap();
        let live: Vec<(i64, i64)> = all.iter().enumerate().skip(start).map(|(o, t)| (o as i64, *t)).collect();
        for t in targets {
            let expected = live.iter().find(|(_, ts)| *ts >= t).copied();
            let got = log.offset_for_timestamp(Timestamp(t)).unwrap().map(|(o, ts)| (o.0, ts.0));
            prop_assert_eq!(got, expected, "target {}", t);
        }
        let max = live.iter().map(|(_, t)| *t).max();
        let expected = max.and_then(|m| live.iter().find(|(_, t)| *t == m).copied());
        let got = log.offset_of_max_timestamp().unwrap().map(|(o, ts)| (o.0, ts.0));
        prop_assert_eq!(got, expected);
        // The same answers after a clean reopen (from the index files).
        log.close().unwrap();
        drop(log);
        let log = f.open(small_config(), true);
        prop_assert_eq!(log.offset_of_max_timestamp().unwrap().map(|(o, ts)| (o.0, ts.0)), expected);
    }
}
