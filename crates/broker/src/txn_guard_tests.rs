//! KIP-890's verification guard on a partition whose transactions are
//! coordinated by another broker: what lets a transactional batch in, and
//! what a marker or a failed check does to a check in flight.

use model::{PartitionId, ProducerEpoch, ProducerId};
use storage::batch::TRANSACTIONAL_FLAG;
use storage::txn::{ControlType, TxnMarker};
use storage::{BatchBuilder, Compression};

use crate::testing::broker_with_topics;
use crate::{now_ms, Partition};

const PID: ProducerId = ProducerId(7);
const EPOCH: ProducerEpoch = ProducerEpoch(3);

fn txn_batch(sequence: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(PID, EPOCH, sequence)
        .flags(TRANSACTIONAL_FLAG);
    b.append(now_ms(), Some(b"k"), Some(b"v"), &[]).unwrap();
    b.build().unwrap().to_vec()
}

fn append(p: &Partition, sequence: i32) -> Result<(), crate::Error> {
    let (_, work) = p.append_verified_elsewhere(PID, EPOCH, &txn_batch(sequence), now_ms())?;
    p.log().complete(work).unwrap();
    Ok(())
}

fn abort_marker() -> TxnMarker {
    TxnMarker {
        producer_id: PID,
        producer_epoch: EPOCH,
        control: ControlType::Abort,
        coordinator_epoch: 0,
    }
}

#[test]
fn an_unchecked_batch_is_refused_and_a_checked_one_opens_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker_with_topics(dir.path(), &["g"]);
    let p = b.partition("g", PartitionId(0)).unwrap();
    assert!(matches!(
        append(&p, 0),
        Err(crate::Error::Transaction(
            crate::txn::TxnError::InvalidTxnState(_)
        ))
    ));
    p.begin_txn_verification(PID, EPOCH, 1);
    assert!(append(&p, 0).is_err(), "asked, not yet answered");
    assert!(p.finish_txn_verification(PID, 1));
    append(&p, 0).unwrap();
    assert!(p.txn_open(PID, EPOCH));
    // Open here now: later batches need no check.
    append(&p, 1).unwrap();
    // The marker closes it; the next transaction is checked again.
    let w = p
        .write_marker_if_open(&abort_marker(), now_ms(), |_| Ok(()))
        .unwrap()
        .expect("a transaction open here");
    p.log().complete(w).unwrap();
    assert!(!p.txn_open(PID, EPOCH));
    assert!(append(&p, 2).is_err());
}

/// The producer's first batch here is being checked, so nothing of its
/// transaction is here yet and the marker (the transaction was aborted
/// meanwhile, say by a new instance fencing it) has nothing to end: it still
/// cancels the check, so the coordinator's earlier yes lets nothing in.
#[test]
fn a_marker_during_the_check_cancels_it_with_nothing_open_here() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker_with_topics(dir.path(), &["g"]);
    let p = b.partition("g", PartitionId(0)).unwrap();
    p.begin_txn_verification(PID, EPOCH, 1);
    let w = p
        .write_marker_if_open(&abort_marker(), now_ms(), |_| Ok(()))
        .unwrap();
    assert!(
        w.is_none(),
        "no transaction of the producer here: no marker"
    );
    assert!(!p.finish_txn_verification(PID, 1));
    assert!(append(&p, 0).is_err());
    assert_eq!(p.txn_guards(), 0);
}

/// A verified batch that fails to append (here: a CRC mismatch) uses the
/// check up: a retry is checked again.
#[test]
fn a_failed_append_uses_the_check_up() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker_with_topics(dir.path(), &["g"]);
    let p = b.partition("g", PartitionId(0)).unwrap();
    p.begin_txn_verification(PID, EPOCH, 1);
    assert!(p.finish_txn_verification(PID, 1));
    let mut corrupt = txn_batch(0);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert!(p
        .append_verified_elsewhere(PID, EPOCH, &corrupt, now_ms())
        .is_err());
    assert_eq!(p.txn_guards(), 0);
    assert!(append(&p, 0).is_err(), "not checked again");
}

#[test]
fn a_failed_check_leaves_nothing_behind_and_a_stale_one_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker_with_topics(dir.path(), &["g"]);
    let p = b.partition("g", PartitionId(0)).unwrap();
    p.begin_txn_verification(PID, EPOCH, 1);
    p.abandon_txn_verification(PID, 1);
    assert_eq!(p.txn_guards(), 0);
    // A later check replaced an earlier one: the earlier one's answer
    // (either way) does not touch it.
    p.begin_txn_verification(PID, EPOCH, 2);
    p.begin_txn_verification(PID, EPOCH, 3);
    p.abandon_txn_verification(PID, 2);
    assert!(!p.finish_txn_verification(PID, 2));
    assert!(p.finish_txn_verification(PID, 3));
    append(&p, 0).unwrap();
    assert_eq!(p.txn_guards(), 0, "the append consumed the guard");
}
