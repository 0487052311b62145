//! Property tests of the cleaner: random logs of keyed records, tombstones
//! and keyless records, in batches of every codec (some from an idempotent
//! producer), cleaned at random points with random key map budgets and
//! clocks. After every cleaning, and after reopening:
//!
//! - offsets strictly increase, and every record read is one that was
//!   written, at the offset it was written at;
//! - everything at or past the cleaned point is there, exactly;
//! - the latest value of every key is there: applying the records in order
//!   gives the same key → value map as applying everything ever written.

use std::collections::BTreeMap;

use model::{Offset, ProducerEpoch, ProducerId, Timestamp};
use proptest::prelude::*;

use super::tests::{cleaner, compact_config, contents, put_batch_as, table, Fixture, Rec, T0};
use crate::batch::Compression;
use crate::builder::BatchBuilder;
use crate::config::LogConfig;
use crate::log::Log;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

#[derive(Debug, Clone)]
enum Op {
    /// A batch of `(key, value)`; key `None` is keyless, value `None` a
    /// tombstone.
    Append {
        codec: usize,
        idempotent: bool,
        records: Vec<(Option<u8>, Option<Vec<u8>>)>,
    },
    /// A cleaning `advance` ms after the previous operation, with a key map
    /// of `map_bytes`.
    Clean { advance: i64, map_bytes: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let record = (
        proptest::option::weighted(0.95, 0u8..8),
        proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..40)),
    );
    prop_oneof![
        6 => (0usize..5, proptest::bool::weighted(0.2), proptest::collection::vec(record, 1..6))
            .prop_map(|(codec, idempotent, records)| Op::Append { codec, idempotent, records }),
        1 => (0i64..3000, prop_oneof![Just(200usize), Just(1000), Just(1 << 20)])
            .prop_map(|(advance, map_bytes)| Op::Clean { advance, map_bytes }),
    ]
}

/// Every record written, by offset.
type History = BTreeMap<i64, (Option<Vec<u8>>, Option<Vec<u8>>)>;

fn check(log: &Log, history: &History, cleaned_up_to: Offset) -> Result<(), TestCaseError> {
    let got: Vec<Rec> = contents(log);
    for (offset, key, value) in &got {
        let written = history.get(offset).map(|(k, v)| (k, v));
        prop_assert_eq!(written, Some((key, value)), "offset {}", offset);
    }
    let from_cleaned: Vec<Rec> = got
        .iter()
        .filter(|r| r.0 >= cleaned_up_to.0)
        .cloned()
        .collect();
    let expected: Vec<Rec> = history
        .range(cleaned_up_to.0..)
        .map(|(o, (k, v))| (*o, k.clone(), v.clone()))
        .collect();
    prop_assert_eq!(
        from_cleaned,
        expected,
        "everything past {} stays",
        cleaned_up_to
    );
    let all: Vec<Rec> = history
        .iter()
        .map(|(o, (k, v))| (*o, k.clone(), v.clone()))
        .collect();
    prop_assert_eq!(table(&got), table(&all));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn cleaning_keeps_the_latest_value_per_key_and_everything_past_the_cleaned_point(
        ops in proptest::collection::vec(op(), 1..60),
        segment_bytes in 300u64..1500,
        merge_bytes in 300u64..6000,
        delete_retention_ms in prop_oneof![Just(0u64), Just(1000), Just(5000)],
    ) {
        let f = Fixture::new();
        let config = LogConfig {
            segment_bytes,
            index_interval_bytes: 64,
            delete_retention_ms,
            ..compact_config()
        };
        let log = f.open(config.clone(), false);
        let mut history = History::new();
        let mut now = T0;
        let mut sequence = 0;
        let mut cleaned_up_to = Offset(0);
        for op in &ops {
            match op {
                Op::Append { codec, idempotent, records } => {
                    let mut b = BatchBuilder::new(CODECS[*codec]);
                    if *idempotent {
                        b = b.producer(ProducerId(5), ProducerEpoch(0), sequence);
                        sequence += records.len() as i32;
                    }
                    let keys: Vec<Option<Vec<u8>>> = records
                        .iter()
                        .map(|(k, _)| k.map(|k| format!("key-{k}").into_bytes()))
                        .collect();
                    let puts: Vec<_> = keys
                        .iter()
                        .zip(records)
                        .map(|(k, (_, v))| (k.as_deref(), v.as_deref()))
                        .collect();
                    let base = put_batch_as(&log, b, &puts, now);
                    for (i, (k, (_, v))) in keys.iter().zip(records).enumerate() {
                        history.insert(base.0 + i as i64, (k.clone(), v.clone()));
                    }
                    now += 1;
                }
                Op::Clean { advance, map_bytes } => {
                    now += advance;
                    // Merged segments may be larger than rolled ones.
                    log.update_config(LogConfig { segment_bytes: merge_bytes, ..config.clone() });
                    let c = cleaner(0);
                    let summary = c.clean_with_map_budget(&log, Timestamp(now), *map_bytes).unwrap();
                    log.update_config(config.clone());
                    if let Some(s) = summary {
                        prop_assert!(s.cleaned_up_to >= cleaned_up_to);
                        cleaned_up_to = s.cleaned_up_to;
                    }
                    check(&log, &history, cleaned_up_to)?;
                }
            }
        }
        check(&log, &history, cleaned_up_to)?;
        drop(log);
        let log = f.open(config, false);
        check(&log, &history, cleaned_up_to)?;
        // Long after every horizon, a last cleaning changes nothing a reader
        // of the latest values would notice.
        put_batch_as(&log, BatchBuilder::new(Compression::None), &[(Some(b"filler"), Some(b"x"))], now);
        history.insert(log.log_end_offset().0 - 1, (Some(b"filler".to_vec()), Some(b"x".to_vec())));
        if let Some(s) = cleaner(1 << 20).clean(&log, Timestamp(now + 1_000_000)).unwrap() {
            cleaned_up_to = s.cleaned_up_to;
        }
        check(&log, &history, cleaned_up_to)?;
    }
}
