//! The snapshot codec and the sans-IO recovery (snapshot + replay of the
//! log tail). (The registry over a real broker's group log is tested with
//! the broker.)

use model::Offset;

use super::*;

#[test]
fn snapshot_round_trips_and_rejects_garbage() {
    let s = SequenceSnapshot {
        covered: Offset(1 << 40),
        producers: [
            ("a".to_string(), -1, 1),
            ("é-producer".to_string(), i64::MAX, -5),
        ]
        .into_iter()
        .map(|(n, sequence_id, last_active_ms)| {
            (
                n,
                ProducerEntry {
                    sequence_id,
                    last_active_ms,
                },
            )
        })
        .collect(),
    };
    let bytes = s.encode();
    assert_eq!(SequenceSnapshot::decode(&bytes), Some(s));
    assert_eq!(SequenceSnapshot::decode(&bytes[..bytes.len() - 1]), None);
    assert_eq!(
        SequenceSnapshot::decode(&[bytes.as_slice(), &[0]].concat()),
        None
    );
    assert_eq!(SequenceSnapshot::decode(&[3, 0, 0]), None);
    assert_eq!(SequenceSnapshot::decode(&[]), None);
    let empty = SequenceSnapshot::default();
    assert_eq!(SequenceSnapshot::decode(&empty.encode()), Some(empty));
}

/// A log of batches as the front end sees them when replaying: (offset
/// after the batch, producer and highest sequence id if it has one).
type FakeLog = Vec<(i64, Option<(&'static str, i64)>)>;

fn replay(state: &mut PartitionSequences, log: &FakeLog) {
    let from = state.covered();
    for (next, origin) in log.iter().filter(|(next, _)| Offset(*next) > from) {
        if let Some((p, seq)) = origin {
            state.record(p, *seq, Offset(*next), 1);
        }
    }
    state.replayed_to(Offset(log.last().map_or(0, |b| b.0)));
}

#[test]
fn snapshot_plus_replay_equals_the_live_state_wherever_the_snapshot_was_taken() {
    // Batches of two producers, one Kafka batch (no origin) in between.
    let log: FakeLog = vec![
        (1, Some(("a", 0))),
        (3, Some(("b", 5))),
        (4, None),
        (6, Some(("a", 4))),
        (7, Some(("b", 6))),
        (9, Some(("a", 7))),
    ];
    let mut live = PartitionSequences::restore(SequenceSnapshot::default(), 0);
    let mut snapshots = vec![live.clone().take_snapshot(0)];
    for (next, origin) in &log {
        // A Kafka append (no origin) does not touch the state.
        if let Some((p, seq)) = origin {
            live.record(p, *seq, Offset(*next), 1);
        }
        snapshots.push(live.clone().take_snapshot(0));
    }
    assert_eq!((live.last("a"), live.last("b"), live.last("c")), (7, 6, -1));
    for snap in snapshots {
        let covered = snap.covered;
        let mut recovered = PartitionSequences::restore(snap, 0);
        replay(&mut recovered, &log);
        for p in ["a", "b", "c"] {
            assert_eq!(
                recovered.last(p),
                live.last(p),
                "{p} from a snapshot at {covered:?}"
            );
        }
        assert_eq!(recovered.covered(), Offset(9));
    }
}

#[test]
fn duplicates_and_snapshot_policy() {
    let mut s = PartitionSequences::restore(SequenceSnapshot::default(), 1_000);
    assert!(!s.is_duplicate("p", 0), "nothing stored yet");
    assert!(!s.snapshot_due(1_000_000), "nothing changed");
    s.record("p", 3, Offset(1), 1);
    assert!(s.is_duplicate("p", 0) && s.is_duplicate("p", 3));
    assert!(!s.is_duplicate("p", 4) && !s.is_duplicate("q", 0));
    // A lower sequence id never lowers the highest.
    s.record("p", 2, Offset(2), 1);
    assert_eq!(s.last("p"), 3);
    assert!(!s.snapshot_due(1_000 + SNAPSHOT_EVERY_MS - 1));
    assert!(s.snapshot_due(1_000 + SNAPSHOT_EVERY_MS));
    let snap = s.take_snapshot(5_000);
    assert_eq!(snap.covered, Offset(2));
    assert!(!s.changed());
    for i in 0..SNAPSHOT_EVERY_BATCHES {
        assert!(!s.snapshot_due(5_000), "due after {i} batches");
        s.record("p", 10 + i as i64, Offset(3 + i as i64), 1);
    }
    assert!(s.snapshot_due(5_000), "due by count");
    s.snapshot_failed();
    assert!(s.snapshot_due(5_000));
}

#[test]
fn version_1_snapshots_are_read_and_count_inactivity_from_the_restore() {
    // Version 1, covered 3, one producer "p" at sequence id 7.
    let mut v1 = vec![1u8, 6, 1, 1, b'p', 14];
    let snap = SequenceSnapshot::decode(&v1).expect("a version-1 record");
    assert_eq!(snap.covered, Offset(3));
    assert_eq!(snap.producers["p"].sequence_id, 7);
    let mut s = PartitionSequences::restore(snap, 50_000);
    assert_eq!(s.expire(50_000 + 999, 1_000), 0, "counted from the restore");
    assert_eq!(s.expire(51_000, 1_000), 1);
    v1.push(0);
    assert_eq!(SequenceSnapshot::decode(&v1), None, "trailing bytes");
}

#[test]
fn only_detached_producers_inactive_long_enough_are_forgotten() {
    let mut s = PartitionSequences::restore(SequenceSnapshot::default(), 0);
    s.attach("attached");
    s.record("attached", 5, Offset(1), 1_000);
    s.attach("left");
    s.record("left", 9, Offset(2), 1_000);
    s.detach("left", 2_000);
    s.record("kafka-era", 3, Offset(3), 500);
    s.take_snapshot(2_000);
    // 10 s of inactivity: "kafka-era" (last at 0.5 s) goes at 10.5 s,
    // "left" (detached at 2 s) at 12 s, "attached" never while attached.
    assert_eq!(s.expire(10_499, 10_000), 0);
    assert!(!s.changed());
    assert_eq!(s.expire(10_500, 10_000), 1);
    assert!(s.changed(), "the next snapshot leaves it out");
    assert_eq!(s.last("kafka-era"), -1);
    assert_eq!(s.expire(12_000, 10_000), 1);
    assert!(
        !s.is_duplicate("left", 9),
        "a resend after expiry is stored"
    );
    assert_eq!(s.expire(1_000_000, 10_000), 0);
    assert_eq!(s.last("attached"), 5);
    // Two attachments of one name: attached until both detach.
    s.attach("attached");
    s.detach("attached", 1_000_000);
    assert_eq!(s.expire(2_000_000, 10_000), 0);
    s.detach("attached", 2_000_000);
    assert_eq!(s.expire(2_009_999, 10_000), 0);
    assert_eq!(s.expire(2_010_000, 10_000), 1);
    assert!(s.is_empty());
    let snap = s.take_snapshot(2_010_000);
    assert!(snap.producers.is_empty());
}
