//! A follower's copy of a leader's log: appended as it is, cut back where
//! it diverged, emptied to start afresh; after every step, restarts and
//! crashes included, it holds the leader's bytes and the leader's epochs,
//! producer state and transactions (proptest against the leader itself).

use model::{LeaderEpoch, Offset, ProducerEpoch, ProducerId};
use proptest::prelude::*;

use super::tests::{small_config, Fixture, NOW};
use super::{AppendOutcome, Log};
use crate::batch::{self, Compression, TRANSACTIONAL_FLAG};
use crate::builder::BatchBuilder;
use crate::config::LogConfig;
use crate::error::{BatchError, Error};
use crate::test_util::{batch, simple_records, stamped};
use crate::txn::{ControlType, TxnMarker};

/// A batch of `n` records of producer `pid` (none if negative) from `seq`.
fn producer_batch(pid: i64, seq: i32, n: usize, transactional: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    if pid >= 0 {
        b = b.producer(ProducerId(pid), ProducerEpoch(0), seq);
    }
    if transactional {
        b = b.flags(TRANSACTIONAL_FLAG);
    }
    for i in 0..n {
        let key = format!("key-{i}");
        b.append(NOW, Some(key.as_bytes()), Some(b"value"), &[])
            .unwrap();
    }
    b.build().unwrap().to_vec()
}

/// The stored bytes of `log` from `from` to its end.
fn bytes_from(log: &Log, from: Offset) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    while at < log.log_end_offset() {
        let r = log.read_region(at, 1 << 20, true).unwrap();
        let Some(region) = r.region else { break };
        out.extend_from_slice(&region.read_all().unwrap());
        at = r.next_offset;
    }
    out
}

/// Copies what `leader` has past `follower`'s end, `max_bytes` at a time,
/// as a replica fetcher would.
fn catch_up(leader: &Log, follower: &Log, max_bytes: usize) {
    while follower.log_end_offset() < leader.log_end_offset() {
        let r = leader
            .read_region(follower.log_end_offset(), max_bytes, true)
            .unwrap();
        let bytes = r.region.expect("the leader has more").read_all().unwrap();
        let (_, work) = follower.append_as_follower(&bytes, NOW).unwrap();
        follower.complete(work).unwrap();
    }
}

/// Everything the two logs must agree on, from the follower's start.
fn assert_same(leader: &Log, follower: &Log) {
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    let from = follower.log_start_offset();
    assert_eq!(bytes_from(follower, from), bytes_from(leader, from));
    assert_eq!(follower.epoch_entries(), leader.epoch_entries());
    assert_eq!(follower.producer_states(), leader.producer_states());
    assert_eq!(follower.last_stable_offset(), leader.last_stable_offset());
    let end = leader.log_end_offset();
    assert_eq!(
        follower.aborted_transactions(from, end),
        leader.aborted_transactions(from, end)
    );
}

fn leader_append(log: &Log, bytes: &[u8], epoch: i32, transactional: bool) -> Offset {
    let (outcome, work) = if transactional {
        log.append_transactional_deferred(bytes, LeaderEpoch(epoch), NOW)
    } else {
        log.append_deferred(bytes, LeaderEpoch(epoch), NOW)
    }
    .unwrap();
    log.complete(work).unwrap();
    match outcome {
        AppendOutcome::Appended(i) => i.base_offset,
        other => panic!("{other:?}"),
    }
}

fn leader_marker(log: &Log, pid: i64, commit: bool, epoch: i32) {
    let m = TxnMarker {
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(0),
        control: if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        },
        coordinator_epoch: 0,
    };
    let (_, work) = log.write_marker(&m, LeaderEpoch(epoch), NOW).unwrap();
    log.complete(work).unwrap();
}

#[test]
fn a_copy_keeps_offsets_epochs_and_bytes() {
    let (lf, ff) = (Fixture::new(), Fixture::new());
    let leader = lf.open(small_config(), false);
    let follower = ff.open(small_config(), false);
    leader_append(&leader, &batch(&simple_records(0, 3, NOW.0)), 0, false);
    leader_append(&leader, &producer_batch(7, 0, 2, false), 2, false);
    leader_append(&leader, &producer_batch(8, 0, 1, true), 2, true);
    leader_marker(&leader, 8, false, 2);
    catch_up(&leader, &follower, 1);
    assert_same(&leader, &follower);
    assert_eq!(
        follower
            .epoch_entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect::<Vec<_>>(),
        vec![(0, 0), (2, 3)]
    );
    assert_eq!(follower.aborted_transactions(Offset(0), Offset(7)).len(), 1);
    // A copy read back after a crash and after a clean close is the same.
    drop(follower);
    let follower = ff.open(small_config(), false);
    assert_same(&leader, &follower);
    follower.close().unwrap();
    drop(follower);
    assert_same(&leader, &ff.open(small_config(), true));
}

#[test]
fn offsets_must_not_go_back_and_a_bad_batch_writes_nothing() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let first = stamped(
        &batch(&simple_records(0, 2, NOW.0)),
        Offset(0),
        LeaderEpoch(1),
    );
    let (_, work) = log.append_as_follower(&first, NOW).unwrap();
    log.complete(work).unwrap();
    // Before the log end.
    let again = stamped(
        &batch(&simple_records(0, 1, NOW.0)),
        Offset(1),
        LeaderEpoch(1),
    );
    assert!(matches!(
        log.append_as_follower(&again, NOW),
        Err(Error::UnexpectedAppendOffset {
            offset: Offset(1),
            expected: Offset(2)
        })
    ));
    // Overlapping batches in one copy.
    let mut two = stamped(
        &batch(&simple_records(0, 2, NOW.0)),
        Offset(5),
        LeaderEpoch(1),
    );
    two.extend(stamped(
        &batch(&simple_records(0, 1, NOW.0)),
        Offset(6),
        LeaderEpoch(1),
    ));
    assert!(matches!(
        log.append_as_follower(&two, NOW),
        Err(Error::UnexpectedAppendOffset { .. })
    ));
    // A flipped byte, and a batch cut short.
    let mut corrupt = stamped(
        &batch(&simple_records(0, 1, NOW.0)),
        Offset(2),
        LeaderEpoch(1),
    );
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert!(matches!(
        log.append_as_follower(&corrupt, NOW),
        Err(Error::Batch(BatchError::CorruptCrc { .. }))
    ));
    let whole = stamped(
        &batch(&simple_records(0, 1, NOW.0)),
        Offset(2),
        LeaderEpoch(1),
    );
    assert!(matches!(
        log.append_as_follower(&whole[..whole.len() - 3], NOW),
        Err(Error::Batch(BatchError::Truncated { .. }))
    ));
    assert!(matches!(
        log.append_as_follower(&[], NOW),
        Err(Error::Batch(BatchError::Empty))
    ));
    assert_eq!(log.log_end_offset(), Offset(2));
    assert_eq!(bytes_from(&log, Offset(0)), first);
}

#[test]
fn a_compacted_leaders_gaps_are_kept() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    let mut copy = stamped(
        &batch(&simple_records(0, 2, NOW.0)),
        Offset(3),
        LeaderEpoch(0),
    );
    copy.extend(stamped(
        &batch(&simple_records(0, 1, NOW.0)),
        Offset(10),
        LeaderEpoch(1),
    ));
    let (done, work) = log.append_as_follower(&copy, NOW).unwrap();
    log.complete(work).unwrap();
    assert_eq!(done.first_offset, Offset(3));
    assert_eq!(done.log_end_offset, Offset(11));
    assert_eq!(log.log_end_offset(), Offset(11));
    // A read in the gap gets the next batch.
    let r = log.read(Offset(6), 1 << 20, true).unwrap();
    assert_eq!(
        batch::headers(&r.records).next().unwrap().1.base_offset,
        Offset(10)
    );
    // A gap wider than a segment's relative offsets starts a segment.
    let far = Offset(11 + i64::from(u32::MAX) + 5);
    let next = stamped(&batch(&simple_records(0, 1, NOW.0)), far, LeaderEpoch(1));
    let (_, work) = log.append_as_follower(&next, NOW).unwrap();
    log.complete(work).unwrap();
    assert_eq!(log.segment_base_offsets().last(), Some(&far));
    drop(log);
    let log = f.open(small_config(), false);
    assert_eq!(log.log_end_offset(), far.plus(1));
}

#[test]
fn truncation_cuts_whole_batches_segments_and_what_follows_them() {
    let f = Fixture::new();
    let config = LogConfig {
        segment_bytes: 250,
        ..small_config()
    };
    let log = f.open(config.clone(), false);
    for epoch in 0..6 {
        leader_append(&log, &batch(&simple_records(0, 3, NOW.0)), epoch, false);
    }
    assert!(log.segment_count() > 2, "{:?}", log.segment_base_offsets());
    // Mid-batch: the whole batch holding offset 7 goes.
    assert_eq!(log.truncate_to(Offset(7)).unwrap(), Offset(6));
    assert_eq!(log.log_end_offset(), Offset(6));
    assert!(log.segment_base_offsets().iter().all(|b| *b < Offset(7)));
    assert_eq!(
        log.epoch_entries().last().map(|e| e.epoch),
        Some(LeaderEpoch(1))
    );
    let files: Vec<String> = std::fs::read_dir(&f.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert_eq!(files.len(), log.segment_count(), "{files:?}");
    // Past the end: nothing to do. Appends go on from the new end.
    assert_eq!(log.truncate_to(Offset(100)).unwrap(), Offset(6));
    assert_eq!(
        leader_append(&log, &batch(&simple_records(0, 1, NOW.0)), 9, false),
        Offset(6)
    );
    // The cut survives a crash.
    drop(log);
    let log = f.open(config, false);
    assert_eq!(log.log_end_offset(), Offset(7));
    assert_eq!(
        log.epoch_entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset.0))
            .collect::<Vec<_>>(),
        vec![(0, 0), (1, 3), (9, 6)]
    );
}

#[test]
fn truncating_fully_starts_an_empty_log_anywhere() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    leader_append(&log, &producer_batch(4, 0, 3, false), 1, false);
    log.truncate_fully_and_start_at(Offset(50)).unwrap();
    assert_eq!(log.log_start_offset(), Offset(50));
    assert_eq!(log.log_end_offset(), Offset(50));
    assert!(log.epoch_entries().is_empty());
    assert!(log.producer_states().is_empty());
    let copy = stamped(
        &batch(&simple_records(0, 2, NOW.0)),
        Offset(50),
        LeaderEpoch(3),
    );
    let (_, work) = log.append_as_follower(&copy, NOW).unwrap();
    log.complete(work).unwrap();
    // At or below the log start, truncate_to empties the log too.
    assert_eq!(log.truncate_to(Offset(50)).unwrap(), Offset(50));
    assert_eq!(log.log_end_offset(), Offset(50));
    let (_, work) = log.append_as_follower(&copy, NOW).unwrap();
    log.complete(work).unwrap();
    drop(log);
    let log = f.open(small_config(), false);
    assert_eq!(log.log_start_offset(), Offset(50));
    assert_eq!(log.log_end_offset(), Offset(52));
    assert_eq!(bytes_from(&log, Offset(50)), copy);
}

/// A follower that took records the new leader never had: it cuts back to
/// where the new leader's log says its epoch ended, copies on, and ends
/// with the new leader's log (KIP-101).
#[test]
fn a_diverged_follower_ends_with_the_new_leaders_log() {
    let (af, bf) = (Fixture::new(), Fixture::new());
    let a = af.open(small_config(), false);
    let b = bf.open(small_config(), false);
    leader_append(&a, &producer_batch(1, 0, 3, false), 0, false);
    catch_up(&a, &b, 1 << 20);
    // Only the old leader has these.
    leader_append(&a, &producer_batch(1, 3, 2, false), 0, false);
    leader_append(&a, &producer_batch(2, 0, 1, true), 0, true);
    // b leads epoch 1 and writes on.
    leader_append(&b, &producer_batch(1, 3, 4, false), 1, false);
    let last = a.latest_epoch().unwrap();
    let (_, end) = b.end_offset_for_epoch(last).unwrap();
    assert_eq!(end, Offset(3));
    a.truncate_to(end).unwrap();
    catch_up(&b, &a, 64);
    assert_same(&b, &a);
    assert_eq!(a.last_stable_offset(), a.log_end_offset());
}

#[test]
fn consumers_read_below_the_high_watermark_followers_to_the_end() {
    let f = Fixture::new();
    let log = f.open(small_config(), false);
    for _ in 0..3 {
        leader_append(&log, &batch(&simple_records(0, 2, NOW.0)), 0, false);
    }
    assert!(!log.is_replicated());
    assert_eq!(log.high_watermark(), Offset(6));
    assert_eq!(log.set_high_watermark(Some(Offset(2))).unwrap(), Offset(2));
    assert!(log.is_replicated());
    let offsets = |bytes: &[u8]| -> Vec<i64> {
        batch::headers(bytes)
            .map(|(_, h)| h.base_offset.0)
            .collect()
    };
    let r = log.read(Offset(0), 1 << 20, true).unwrap();
    assert_eq!(offsets(&r.records), vec![0]);
    assert_eq!(r.high_watermark, Offset(2));
    assert_eq!(r.last_stable_offset, Offset(2));
    // At the high watermark: nothing yet, and no error (it is in range).
    assert!(log
        .read(Offset(4), 1 << 20, true)
        .unwrap()
        .records
        .is_empty());
    let r = log.read_region_to_end(Offset(0), 1 << 20, true).unwrap();
    assert_eq!(
        offsets(&r.region.unwrap().read_all().unwrap()),
        vec![0, 2, 4]
    );
    assert_eq!(log.last_stable_offset(), Offset(2));
    assert!(matches!(
        log.delete_records_before(Offset(4)),
        Err(Error::OffsetOutOfRange { .. })
    ));
    // Never past the log end; cut back with the log.
    assert_eq!(log.set_high_watermark(Some(Offset(99))).unwrap(), Offset(6));
    log.truncate_to(Offset(4)).unwrap();
    assert_eq!(log.high_watermark(), Offset(4));
    leader_append(&log, &batch(&simple_records(0, 2, NOW.0)), 1, false);
    assert_eq!(log.high_watermark(), Offset(4));
    // Kept across a restart once checkpointed.
    log.set_high_watermark(Some(Offset(5))).unwrap();
    log.flush().unwrap();
    drop(log);
    let log = f.open(small_config(), false);
    assert_eq!(log.high_watermark(), Offset(5));
    assert!(log.is_replicated());
    // Back to a log of one replica: the log end, and no checkpoint left.
    assert_eq!(log.set_high_watermark(None).unwrap(), Offset(6));
    log.close().unwrap();
    drop(log);
    let log = f.open(small_config(), true);
    assert!(!log.is_replicated());
    assert_eq!(log.high_watermark(), Offset(6));
}

#[derive(Debug, Clone)]
enum Op {
    /// The leader appends `n` records, as producer `pid` (none if negative),
    /// in a transaction or not.
    Data { pid: i64, txn: bool, n: usize },
    /// The leader ends `pid`'s transaction.
    End { pid: i64, commit: bool },
    /// Leadership moved away and back: a new epoch.
    NewEpoch,
    /// The follower copies up to `max_bytes` at a time, up to the end.
    CatchUp { max_bytes: usize },
    /// The follower cuts its log back to this fraction of its end.
    Truncate { permille: u32 },
    /// The follower restarts, cleanly or after a crash.
    Restart { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (-1i64..3, any::<bool>(), 1usize..5).prop_map(|(pid, txn, n)| Op::Data { pid, txn, n }),
        2 => (0i64..3, any::<bool>()).prop_map(|(pid, commit)| Op::End { pid, commit }),
        1 => Just(Op::NewEpoch),
        3 => (1usize..700).prop_map(|max_bytes| Op::CatchUp { max_bytes }),
        2 => (0u32..1000).prop_map(|permille| Op::Truncate { permille }),
        1 => any::<bool>().prop_map(|clean| Op::Restart { clean }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Whatever the leader writes and however the follower copies it, cuts
    /// it back and restarts, once caught up it holds the leader's log.
    #[test]
    fn a_follower_that_catches_up_holds_the_leaders_log(
        ops in proptest::collection::vec(op(), 1..50),
        segment_bytes in 150u64..1500,
    ) {
        let (lf, ff) = (Fixture::new(), Fixture::new());
        let config = LogConfig { segment_bytes, ..small_config() };
        let leader = lf.open(config.clone(), false);
        let mut follower = ff.open(config.clone(), false);
        let mut epoch = 0;
        let mut seq = [0i32; 3];
        let mut in_txn = [false; 3];
        for op in ops {
            match op {
                Op::Data { pid, txn, n } => {
                    let txn = pid >= 0 && (txn || in_txn[pid as usize]);
                    let s = if pid >= 0 { seq[pid as usize] } else { -1 };
                    leader_append(&leader, &producer_batch(pid, s, n, txn), epoch, txn);
                    if pid >= 0 {
                        seq[pid as usize] += n as i32;
                        in_txn[pid as usize] |= txn;
                    }
                }
                Op::End { pid, commit } => {
                    leader_marker(&leader, pid, commit, epoch);
                    in_txn[pid as usize] = false;
                }
                Op::NewEpoch => epoch += 1,
                Op::CatchUp { max_bytes } => {
                    catch_up(&leader, &follower, max_bytes);
                    assert_same(&leader, &follower);
                }
                Op::Truncate { permille } => {
                    let end = follower.log_end_offset().0;
                    let to = Offset(end * i64::from(permille) / 1000);
                    let cut = follower.truncate_to(to).unwrap();
                    prop_assert!(cut <= to.max(follower.log_start_offset()));
                    prop_assert_eq!(follower.log_end_offset(), cut);
                    let from = follower.log_start_offset();
                    let mine = bytes_from(&follower, from);
                    let theirs = bytes_from(&leader, from);
                    prop_assert!(theirs.starts_with(&mine), "the cut log is not a prefix");
                }
                Op::Restart { clean } => {
                    if clean {
                        follower.close().unwrap();
                    }
                    drop(follower);
                    follower = ff.open(config.clone(), clean);
                }
            }
        }
        catch_up(&leader, &follower, 1 << 20);
        assert_same(&leader, &follower);
    }
}
