//! The producer-sequence registry over a real broker's group log.

use model::Offset;

use crate::sequences::*;

fn open(dir: &std::path::Path) -> crate::testing::TestNode {
    crate::testing::broker_with_topics(dir, &["t", "u"])
}

#[test]
fn the_registry_persists_recovers_and_forgets() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let seqs = b.producer_sequences();
    let no_log = |_: &mut PartitionSequences| Ok::<_, crate::Error>(());
    let h = seqs.partition("t", 0, 0, no_log).unwrap();
    h.lock().record("p", 41, Offset(10), 1);
    seqs.partition("u", 1, 0, no_log)
        .unwrap()
        .lock()
        .record("q", 7, Offset(3), 1);
    assert_eq!(seqs.flush(1, false).unwrap(), 0, "not due yet");
    assert_eq!(seqs.flush(1, true).unwrap(), 2);
    assert_eq!(seqs.flush(2, true).unwrap(), 0, "nothing changed");
    // Stored after the snapshot: only the log (the replay) knows.
    h.lock().record("p", 42, Offset(11), 1);
    b.shutdown().unwrap();
    drop(b);

    let b = open(dir.path());
    let seqs = b.producer_sequences();
    let mut replayed_from = None;
    let h = seqs
        .partition("t", 0, 0, |s| {
            replayed_from = Some(s.covered());
            assert_eq!(s.last("p"), 42, "the clean shutdown wrote a snapshot");
            s.replayed_to(Offset(11));
            Ok::<_, crate::Error>(())
        })
        .unwrap();
    assert_eq!(replayed_from, Some(Offset(11)));
    assert_eq!(h.lock().last("p"), 42);
    // Loaded once: later calls do not replay.
    seqs.partition("t", 0, 0, |_| -> Result<(), crate::Error> {
        panic!("replayed twice")
    })
    .unwrap();

    // What Broker::delete_topic does for a deleted topic.
    b.groups().front_end().forget_topic("u").unwrap();
    b.shutdown().unwrap();
    drop(b);
    let b = open(dir.path());
    let h = b
        .producer_sequences()
        .partition("u", 1, 0, |s| {
            assert_eq!(s.covered(), Offset(0), "the tombstone removed the snapshot");
            Ok::<_, crate::Error>(())
        })
        .unwrap();
    assert_eq!(h.lock().last("q"), -1);
    b.shutdown().unwrap();
}

#[test]
fn a_failed_replay_is_retried_on_next_use() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let seqs = b.producer_sequences();
    let r = seqs.partition("t", 0, 0, |_| {
        Err(crate::Error::InvalidRequest("io".into()))
    });
    assert!(r.is_err());
    let h = seqs
        .partition("t", 0, 0, |s| {
            s.record("p", 1, Offset(1), 1);
            Ok::<_, crate::Error>(())
        })
        .unwrap();
    assert_eq!(h.lock().last("p"), 1);
    b.shutdown().unwrap();
}

#[test]
fn the_registry_expires_at_most_once_a_minute() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let seqs = b.producer_sequences();
    let h = seqs
        .partition("t", 0, 0, |_| Ok::<_, crate::Error>(()))
        .unwrap();
    h.lock().record("p", 1, Offset(1), 0);
    assert_eq!(seqs.expire(100, || 50), 1);
    h.lock().record("q", 1, Offset(2), 100);
    assert_eq!(seqs.expire(200, || 50), 0, "checked less than a minute ago");
    assert_eq!(seqs.expire(100 + EXPIRY_CHECK_MS, || 50), 1);
}
