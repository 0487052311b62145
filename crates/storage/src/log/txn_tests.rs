//! Transactions in the log: the last stable offset, markers, the
//! aborted-transaction index, `read_committed` reads, and all of it after
//! a clean restart, a crash and a cleaning, against a model (proptest).

use std::collections::BTreeMap;

use model::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};
use proptest::prelude::*;

use super::tests::{small_config, Fixture, NOW};
use super::{AppendOutcome, Log};
use crate::batch::{self, Compression, TRANSACTIONAL_FLAG};
use crate::builder::BatchBuilder;
use crate::config::LogConfig;
use crate::error::Error;
use crate::txn::{AbortedTxn, ControlType, TxnMarker};

/// A batch of `n` records of producer `pid` (epoch 0) from `seq`, keyed
/// `key-{first key + i}`.
fn producer_batch(pid: i64, seq: i32, n: usize, transactional: bool, first_key: usize) -> Vec<u8> {
    let mut b =
        BatchBuilder::new(Compression::None).producer(ProducerId(pid), ProducerEpoch(0), seq);
    if transactional {
        b = b.flags(TRANSACTIONAL_FLAG);
    }
    for i in 0..n {
        let key = format!("key-{}", first_key + i);
        b.append(NOW, Some(key.as_bytes()), Some(b"v"), &[])
            .unwrap();
    }
    b.build().unwrap().to_vec()
}

fn txn_append(log: &Log, bytes: &[u8]) -> Offset {
    let (outcome, work) = log
        .append_transactional_deferred(bytes, LeaderEpoch(0), NOW)
        .unwrap();
    log.complete(work).unwrap();
    match outcome {
        AppendOutcome::Appended(i) => i.base_offset,
        other => panic!("{other:?}"),
    }
}

fn marker(log: &Log, pid: i64, control: ControlType) -> Offset {
    let m = TxnMarker {
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(0),
        control,
        coordinator_epoch: 0,
    };
    let (info, work) = log.write_marker(&m, LeaderEpoch(0), NOW).unwrap();
    log.complete(work).unwrap();
    info.base_offset
}

/// The offsets a `read_committed` reader keeps: batches below the last
/// stable offset, without control batches and aborted transactions' data.
fn committed_offsets(log: &Log) -> Vec<i64> {
    let mut out = Vec::new();
    let mut from = log.log_start_offset();
    let lso = log.last_stable_offset();
    let aborted = log.aborted_transactions(from, lso);
    while from < lso {
        let r = log.read_region_isolated(from, 1 << 20, true, true).unwrap();
        let Some(region) = r.region else { break };
        let bytes = region.read_all().unwrap();
        for (_, h) in batch::headers(&bytes) {
            assert!(h.base_offset < lso, "a batch at or after the LSO");
            let dropped = h.is_control()
                || (h.is_transactional()
                    && aborted.iter().any(|t| {
                        t.producer_id == h.producer_id
                            && t.first_offset <= h.base_offset
                            && h.base_offset <= t.last_offset
                    }));
            if !dropped {
                out.extend(h.base_offset.0..h.next_offset().0);
            }
        }
        from = r.next_offset;
    }
    out
}

#[test]
fn ongoing_transactions_hold_the_last_stable_offset_until_their_markers() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    super::tests::append(&log, producer_batch(-1, -1, 1, false, 0)); // 0
    let a = txn_append(&log, &producer_batch(1, 0, 2, true, 1)); // 1-2
    assert_eq!(a, Offset(1));
    assert_eq!(log.last_stable_offset(), Offset(1));
    let b = txn_append(&log, &producer_batch(2, 0, 1, true, 3)); // 3
    super::tests::append(&log, producer_batch(-1, -1, 1, false, 4)); // 4
    assert_eq!(log.last_stable_offset(), Offset(1));
    assert_eq!(
        log.ongoing_transactions(),
        vec![(Offset(1), ProducerId(1)), (Offset(3), ProducerId(2))]
    );
    // A read_committed reader stops at the LSO; read_uncommitted does not.
    assert_eq!(committed_offsets(&log), vec![0]);
    let all = log.read_region(Offset(0), 1 << 20, true).unwrap();
    assert_eq!(all.next_offset, Offset(5));
    assert_eq!(all.last_stable_offset, Offset(1));

    assert_eq!(marker(&log, 1, ControlType::Commit), Offset(5));
    assert_eq!(log.last_stable_offset(), b);
    assert_eq!(marker(&log, 2, ControlType::Abort), Offset(6));
    assert_eq!(log.last_stable_offset(), Offset(7));
    let aborted = vec![AbortedTxn {
        producer_id: ProducerId(2),
        first_offset: Offset(3),
        last_offset: Offset(6),
        last_stable_offset: Offset(7),
    }];
    assert_eq!(log.aborted_transactions(Offset(0), Offset(7)), aborted);
    assert!(log.aborted_transactions(Offset(7), Offset(7)).is_empty());
    assert!(log.aborted_transactions(Offset(0), Offset(3)).is_empty());
    assert_eq!(committed_offsets(&log), vec![0, 1, 2, 4]);

    // The same after a clean restart and after a crash (a replay).
    drop(log);
    for clean in [true, false] {
        let log = f.open(small_config(), clean);
        assert_eq!(log.last_stable_offset(), Offset(7));
        assert_eq!(log.aborted_transactions(Offset(0), Offset(7)), aborted);
        assert_eq!(committed_offsets(&log), vec![0, 1, 2, 4]);
    }
}

#[test]
fn transactional_batches_need_the_verified_path_and_a_consistent_producer() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let e = log
        .append(&producer_batch(1, 0, 1, true, 0), LeaderEpoch(0), NOW)
        .unwrap_err();
    assert!(matches!(e, Error::TransactionsNotSupported), "{e}");
    txn_append(&log, &producer_batch(1, 0, 1, true, 0));
    // During its transaction, the producer's batches must be transactional.
    let e = log
        .append(&producer_batch(1, 1, 1, false, 1), LeaderEpoch(0), NOW)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidTxnState(_)), "{e}");
    // A transactional batch needs a producer id.
    let mut b = BatchBuilder::new(Compression::None).flags(TRANSACTIONAL_FLAG);
    b.append(NOW, Some(b"k"), Some(b"v"), &[]).unwrap();
    let e = log
        .append_transactional_deferred(&b.build().unwrap(), LeaderEpoch(0), NOW)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidTxnState(_)), "{e}");
    // Markers of an older coordinator, or an older producer epoch, are fenced.
    let m = |epoch: i16, coordinator_epoch: i32| TxnMarker {
        producer_id: ProducerId(1),
        producer_epoch: ProducerEpoch(epoch),
        control: ControlType::Commit,
        coordinator_epoch,
    };
    let (_, work) = log.write_marker(&m(1, 5), LeaderEpoch(0), NOW).unwrap();
    log.complete(work).unwrap();
    let e = log.write_marker(&m(1, 4), LeaderEpoch(0), NOW).unwrap_err();
    assert!(
        matches!(e, Error::TransactionCoordinatorFenced { .. }),
        "{e}"
    );
    let e = log.write_marker(&m(0, 5), LeaderEpoch(0), NOW).unwrap_err();
    assert!(matches!(e, Error::InvalidProducerEpoch { .. }), "{e}");
    // The bumped epoch starts its sequences afresh.
    let mut b = BatchBuilder::new(Compression::None)
        .producer(ProducerId(1), ProducerEpoch(1), 0)
        .flags(TRANSACTIONAL_FLAG);
    b.append(NOW, Some(b"k"), Some(b"v"), &[]).unwrap();
    txn_append(&log, &b.build().unwrap());
    assert_eq!(
        log.producer_state(ProducerId(1)).unwrap().coordinator_epoch,
        5
    );
}

#[test]
fn retention_removes_a_segments_aborted_transactions_with_it() {
    let f = Fixture::new();
    let config = LogConfig {
        segment_bytes: 200,
        ..small_config()
    };
    let log = f.open(config.clone(), false);
    for i in 0..6 {
        txn_append(&log, &producer_batch(7, i, 1, true, i as usize));
        marker(&log, 7, ControlType::Abort);
    }
    assert!(log.segment_count() > 2);
    let all = log.aborted_transactions(Offset(0), log.log_end_offset());
    assert_eq!(all.len(), 6);
    let txn_indexes = || {
        std::fs::read_dir(&f.dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".txnindex")
            })
            .count()
    };
    let before = txn_indexes();
    assert!(before >= 2, "{before}");
    log.delete_records_before(Offset(6)).unwrap();
    let left = log.aborted_transactions(log.log_start_offset(), log.log_end_offset());
    assert!(left.len() < 6 && left.iter().all(|t| t.last_offset >= log.log_start_offset()));
    assert!(txn_indexes() < before);
}

#[derive(Debug, Clone)]
enum Op {
    /// A batch of producer `pid` (transactional or not) of `n` records.
    Data { pid: i64, txn: bool, n: usize },
    /// A marker for producer `pid`.
    End { pid: i64, commit: bool },
    /// A plain batch without a producer.
    Plain,
    /// Close and open again, cleanly or as after a crash.
    Reopen { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..3, any::<bool>(), 1usize..4).prop_map(|(pid, txn, n)| Op::Data { pid, txn, n }),
        2 => (0i64..3, any::<bool>()).prop_map(|(pid, commit)| Op::End { pid, commit }),
        1 => Just(Op::Plain),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Against a model: the LSO, the aborted transactions and what a
    /// read_committed reader keeps, after every step, across restarts.
    #[test]
    fn transactions_match_a_model(ops in proptest::collection::vec(op(), 1..40), segment_bytes in 150u64..1500) {
        let f = Fixture::new();
        let config = LogConfig { segment_bytes, ..small_config() };
        let mut log = f.open(config.clone(), false);
        let mut seq: BTreeMap<i64, i32> = BTreeMap::new();
        let mut ongoing: BTreeMap<i64, i64> = BTreeMap::new(); // pid -> first offset
        let mut aborted: Vec<(i64, i64, i64)> = Vec::new(); // pid, first, last
        let mut batches: Vec<(i64, i64, i64, bool, bool)> = Vec::new(); // pid, base, next, txn, control
        let mut key = 0;
        for op in ops {
            let end = log.log_end_offset().0;
            match op {
                Op::Data { pid, txn, n } => {
                    // A producer in a transaction writes transactionally.
                    let txn = txn || ongoing.contains_key(&pid);
                    let s = seq.entry(pid).or_insert(0);
                    let bytes = producer_batch(pid, *s, n, txn, key);
                    key += n;
                    if txn {
                        txn_append(&log, &bytes);
                        ongoing.entry(pid).or_insert(end);
                    } else {
                        super::tests::append(&log, bytes);
                    }
                    *s += n as i32;
                    batches.push((pid, end, end + n as i64, txn, false));
                }
                Op::End { pid, commit } => {
                    let control = if commit { ControlType::Commit } else { ControlType::Abort };
                    prop_assert_eq!(marker(&log, pid, control).0, end);
                    if let Some(first) = ongoing.remove(&pid) {
                        if !commit {
                            aborted.push((pid, first, end));
                        }
                    }
                    batches.push((pid, end, end + 1, true, true));
                }
                Op::Plain => {
                    super::tests::append(&log, producer_batch(-1, -1, 1, false, key));
                    key += 1;
                    batches.push((-1, end, end + 1, false, false));
                }
                Op::Reopen { clean } => {
                    if clean {
                        log.close().unwrap();
                    }
                    drop(log);
                    log = f.open(config.clone(), clean);
                }
            }
            let leo = log.log_end_offset().0;
            let lso = ongoing.values().min().copied().unwrap_or(leo);
            prop_assert_eq!(log.last_stable_offset().0, lso);
            let got: Vec<(i64, i64, i64)> = log
                .aborted_transactions(Offset(0), Offset(leo))
                .iter()
                .map(|t| (t.producer_id.0, t.first_offset.0, t.last_offset.0))
                .collect();
            prop_assert_eq!(&got, &aborted);
            let expected: Vec<i64> = batches
                .iter()
                .filter(|(pid, base, _, txn, control)| {
                    *base < lso
                        && !*control
                        && !(*txn
                            && aborted
                                .iter()
                                .any(|(p, first, last)| p == pid && first <= base && base <= last))
                })
                .flat_map(|(_, base, next, _, _)| *base..*next)
                .collect();
            prop_assert_eq!(committed_offsets(&log), expected);
        }
    }
}

#[test]
fn a_marker_survives_a_crash_before_its_segment_was_flushed() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    txn_append(&log, &producer_batch(3, 0, 2, true, 0));
    marker(&log, 3, ControlType::Abort);
    // No flush, no close: the index entry may be missing; the replay
    // writes it again, once.
    drop(log);
    let path = crate::txn::index_path(&f.dir, Offset(0));
    std::fs::remove_file(&path).unwrap();
    let log = f.open(small_config(), false);
    assert_eq!(log.aborted_transactions(Offset(0), Offset(3)).len(), 1);
    drop(log);
    let log = f.open(small_config(), false);
    assert_eq!(log.aborted_transactions(Offset(0), Offset(3)).len(), 1);
    assert_eq!(crate::txn::read_index(&path).unwrap().len(), 1);
}

#[test]
fn a_newer_epoch_cannot_write_into_an_older_epochs_open_transaction() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    txn_append(&log, &producer_batch(4, 0, 1, true, 0));
    let mut b = BatchBuilder::new(Compression::None)
        .producer(ProducerId(4), ProducerEpoch(1), 0)
        .flags(TRANSACTIONAL_FLAG);
    b.append(NOW, Some(b"k"), Some(b"v"), &[]).unwrap();
    let bumped = b.build().unwrap();
    let e = log
        .append_transactional_deferred(&bumped, LeaderEpoch(0), NOW)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidTxnState(_)), "{e}");
    // Once the coordinator aborted it with the new epoch, the new epoch writes.
    let m = TxnMarker {
        producer_id: ProducerId(4),
        producer_epoch: ProducerEpoch(1),
        control: ControlType::Abort,
        coordinator_epoch: 0,
    };
    let (_, work) = log.write_marker(&m, LeaderEpoch(0), NOW).unwrap();
    log.complete(work).unwrap();
    txn_append(&log, &bumped);
    assert_eq!(log.ongoing_transactions(), vec![(Offset(2), ProducerId(4))]);
    // The LSO never falls below the log start.
    log.delete_records_before(Offset(3)).unwrap();
    assert_eq!(log.last_stable_offset(), Offset(3));
}
