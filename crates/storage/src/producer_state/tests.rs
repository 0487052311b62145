use super::*;
use crate::test_util::{batch, producer_records};

fn header(pid: i64, epoch: i16, seq: i32, n: usize, base: i64) -> BatchHeader {
    let mut h = BatchHeader::parse(&batch(&producer_records(pid, epoch, seq, n, 0))).unwrap();
    h.base_offset = Offset(base);
    h
}

fn apply(mgr: &mut ProducerStateManager, h: &BatchHeader) -> Result<Verdict> {
    let mut staged = StagedProducers::default();
    let v = mgr.check(&mut staged, h, Timestamp(0))?;
    mgr.commit(staged);
    Ok(v)
}

#[test]
fn staged_updates_apply_only_on_commit() {
    let mut mgr = ProducerStateManager::default();
    let mut staged = StagedProducers::default();
    // Two batches of one request are checked in order against each other.
    assert_eq!(
        mgr.check(&mut staged, &header(1, 0, 0, 2, 0), Timestamp(0))
            .unwrap(),
        Verdict::Append
    );
    assert_eq!(
        mgr.check(&mut staged, &header(1, 0, 2, 2, 2), Timestamp(0))
            .unwrap(),
        Verdict::Append
    );
    assert!(mgr
        .check(&mut staged, &header(1, 0, 9, 1, 4), Timestamp(0))
        .is_err());
    assert!(mgr.get(ProducerId(1)).is_none());
    mgr.commit(staged);
    let e = mgr.get(ProducerId(1)).unwrap();
    assert_eq!(e.batches.len(), 2);
    assert_eq!(e.batches[1].last_offset, Offset(3));
}

#[test]
fn duplicates_report_the_original_offsets() {
    let mut mgr = ProducerStateManager::default();
    apply(&mut mgr, &header(1, 0, 0, 3, 100)).unwrap();
    apply(&mut mgr, &header(1, 0, 3, 3, 103)).unwrap();
    let dup = apply(&mut mgr, &header(1, 0, 0, 3, 999)).unwrap();
    assert_eq!(
        dup,
        Verdict::Duplicate(BatchMetadata {
            first_seq: 0,
            last_seq: 2,
            first_offset: Offset(100),
            last_offset: Offset(102),
        })
    );
    // Same first sequence but another length is not a duplicate.
    assert!(matches!(
        apply(&mut mgr, &header(1, 0, 0, 2, 999)),
        Err(Error::OutOfOrderSequence { .. })
    ));
}

#[test]
fn snapshots_round_trip_and_corruption_is_detected() {
    let mut mgr = ProducerStateManager::default();
    for i in 0..8 {
        apply(&mut mgr, &header(1, 3, i * 2, 2, i64::from(i) * 2)).unwrap();
    }
    apply(&mut mgr, &header(77, 0, 5, 1, 16)).unwrap();
    let bytes = mgr.snapshot_bytes();
    let path = Path::new("x.snapshot");
    let back = ProducerStateManager::from_snapshot(path, &bytes).unwrap();
    assert_eq!(back.get(ProducerId(1)), mgr.get(ProducerId(1)));
    assert_eq!(back.get(ProducerId(77)), mgr.get(ProducerId(77)));
    assert_eq!(
        back.get(ProducerId(1)).unwrap().batches.len(),
        MAX_CACHED_BATCHES
    );
    let mut bad = bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(ProducerStateManager::from_snapshot(path, &bad).is_err());
    assert!(ProducerStateManager::from_snapshot(path, &bytes[..bytes.len() - 3]).is_err());
}

#[test]
fn loading_skips_future_and_corrupt_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let mut mgr = ProducerStateManager::default();
    apply(&mut mgr, &header(1, 0, 0, 1, 0)).unwrap();
    write_snapshot(dir.path(), Offset(1), &mgr.snapshot_bytes()).unwrap();
    apply(&mut mgr, &header(1, 0, 1, 1, 1)).unwrap();
    write_snapshot(dir.path(), Offset(2), &mgr.snapshot_bytes()).unwrap();
    std::fs::write(snapshot_path(dir.path(), Offset(3)), b"garbage").unwrap();
    write_snapshot(dir.path(), Offset(10), &mgr.snapshot_bytes()).unwrap();

    // The log ends at 5: the snapshot at 10 is beyond it, the one at 3 is corrupt.
    let (state, from) = load_latest(dir.path(), Offset(5)).unwrap();
    assert_eq!(from, Some(Offset(2)));
    assert_eq!(state.get(ProducerId(1)).unwrap().batches.len(), 2);
    assert_eq!(
        list_snapshots(dir.path()).unwrap(),
        vec![Offset(1), Offset(2)]
    );
    delete_snapshots_before(dir.path(), Offset(2)).unwrap();
    assert_eq!(list_snapshots(dir.path()).unwrap(), vec![Offset(2)]);
}

#[test]
fn idle_producers_expire() {
    let mut mgr = ProducerStateManager::default();
    let mut staged = StagedProducers::default();
    mgr.check(&mut staged, &header(1, 0, 0, 1, 0), Timestamp(1000))
        .unwrap();
    mgr.check(&mut staged, &header(2, 0, 0, 1, 1), Timestamp(5000))
        .unwrap();
    mgr.commit(staged);
    assert_eq!(mgr.remove_expired(Timestamp(4999), 4000), 0);
    assert_eq!(mgr.remove_expired(Timestamp(5000), 4000), 1);
    assert!(mgr.get(ProducerId(1)).is_none());
    assert!(mgr.get(ProducerId(2)).is_some());
}
