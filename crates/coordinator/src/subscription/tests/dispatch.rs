//! Dispatch rules of each subscription type, acks, redelivery, seek and
//! retention, on the state machine alone.

use model::{Offset, Timestamp};

use crate::error::CoordError;
use crate::subscription::*;

pub(super) fn cid(n: u64) -> ConsumerId {
    ConsumerId {
        connection: n,
        consumer: n,
    }
}

pub(super) fn spec(n: u64, name: &str, priority_level: i32) -> ConsumerSpec {
    ConsumerSpec {
        id: cid(n),
        name: name.into(),
        priority_level,
    }
}

pub(super) fn bounds(start: i64, end: i64) -> LogBounds {
    LogBounds {
        start: Offset(start),
        end: Offset(end),
    }
}

pub(super) fn new_sub(t: SubscriptionType, partition_index: Option<i32>) -> Subscription {
    Subscription::new(
        "s".into(),
        t,
        true,
        partition_index,
        StartPosition::Earliest,
        bounds(0, 0),
        Timestamp(0),
    )
}

/// One dispatch round over a log holding a message at every offset of
/// `[start, end)`, key hash `key(offset)`.
pub(super) fn round(
    s: &mut Subscription,
    start: i64,
    end: i64,
    key: &dyn Fn(i64) -> u32,
) -> Vec<Delivery> {
    let Some(plan) = s.next_read(bounds(start, end)) else {
        return Vec::new();
    };
    let to = (plan.from.0 + plan.max_messages as i64).min(end);
    let entries: Vec<Entry> = (plan.from.0..to)
        .map(|o| Entry {
            offset: Offset(o),
            batch: Offset(o),
            key_hash: key(o),
        })
        .collect();
    let out = s.dispatch(
        &Read {
            plan,
            entries: &entries,
            end: Offset(to),
        },
        Offset(start),
    );
    s.check_invariants(Offset(end)).unwrap();
    out
}

/// Rounds until nothing more can be dispatched.
fn drain(s: &mut Subscription, end: i64, key: &dyn Fn(i64) -> u32) -> Vec<Delivery> {
    let mut all = Vec::new();
    for _ in 0..1000 {
        if s.next_read(bounds(0, end)).is_none() {
            return all;
        }
        all.extend(round(s, 0, end, key));
    }
    panic!("dispatch does not settle");
}

fn no_key(_: i64) -> u32 {
    0
}

/// The offsets `consumer` got, in order.
pub(super) fn got(d: &[Delivery], consumer: u64) -> Vec<i64> {
    d.iter()
        .filter(|d| d.consumer == cid(consumer))
        .flat_map(|d| d.messages.iter().map(|m| m.offset.0))
        .collect()
}

pub(super) fn counts(d: &[Delivery], consumer: u64) -> Vec<u32> {
    d.iter()
        .filter(|d| d.consumer == cid(consumer))
        .flat_map(|d| d.messages.iter().map(|m| m.redelivery_count))
        .collect()
}

pub(super) fn r(a: i64, b: i64) -> std::ops::Range<Offset> {
    Offset(a)..Offset(b)
}

#[test]
fn exclusive_refuses_a_second_consumer_and_respects_permits() {
    let mut s = new_sub(SubscriptionType::Exclusive, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Exclusive)
        .unwrap();
    let e = s.attach(spec(2, "b", 0), SubscriptionType::Exclusive);
    assert!(matches!(e, Err(CoordError::ConsumerBusy(m)) if m.contains("Exclusive")));
    assert!(drain(&mut s, 10, &no_key).is_empty(), "no permits yet");
    s.flow(cid(1), 4).unwrap();
    let d = drain(&mut s, 10, &no_key);
    assert_eq!(got(&d, 1), vec![0, 1, 2, 3]);
    s.flow(cid(1), 100).unwrap();
    assert_eq!(
        got(&drain(&mut s, 10, &no_key), 1),
        (4..10).collect::<Vec<_>>()
    );
    assert_eq!(s.stats(Offset(10)).consumers[0].permits, 94);
    assert_eq!(s.stats(Offset(10)).consumers[0].unacked, 10);
    // Gone consumer: the next one may attach.
    s.detach(cid(1)).unwrap();
    s.attach(spec(2, "b", 0), SubscriptionType::Exclusive)
        .unwrap();
    s.flow(cid(2), 100).unwrap();
    let d = drain(&mut s, 10, &no_key);
    assert_eq!(got(&d, 2), (0..10).collect::<Vec<_>>(), "redelivered");
    assert!(counts(&d, 2).iter().all(|&c| c == 1));
}

#[test]
fn individual_and_cumulative_acks() {
    let mut s = new_sub(SubscriptionType::Exclusive, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Exclusive)
        .unwrap();
    s.flow(cid(1), 100).unwrap();
    drain(&mut s, 20, &no_key);
    s.ack(cid(1), Ack::Cumulative(Offset(3))).unwrap();
    assert_eq!(s.cursor().mark_delete(), Offset(4));
    s.ack(cid(1), Ack::Individual(vec![r(6, 8), r(10, 11)]))
        .unwrap();
    let st = s.stats(Offset(20));
    assert_eq!(st.backlog, 20 - 4 - 3);
    assert_eq!(st.acked_ranges, 2);
    assert_eq!(st.consumers[0].unacked, 20 - 4 - 3);
    // Acking what is not outstanding (already acked, never read) is harmless.
    s.ack(cid(1), Ack::Individual(vec![r(0, 2), r(6, 7), r(50, 60)]))
        .unwrap();
    assert_eq!(s.stats(Offset(20)).backlog, 13);
    // A cumulative ack beyond what was read stops at the read position.
    s.ack(cid(1), Ack::Cumulative(Offset(1000))).unwrap();
    assert_eq!(s.cursor().mark_delete(), Offset(20));
    assert_eq!(s.stats(Offset(25)).backlog, 5);
    s.check_invariants(Offset(25)).unwrap();
    // Acks from a consumer that is not attached are refused.
    assert!(matches!(
        s.ack(cid(9), Ack::Cumulative(Offset(1))),
        Err(CoordError::ConsumerNotFound(_))
    ));
}

#[test]
fn shared_round_robins_by_permits_and_priority() {
    let mut s = new_sub(SubscriptionType::Shared, None);
    for n in 1..=3 {
        s.attach(spec(n, "c", 0), SubscriptionType::Shared).unwrap();
        s.flow(cid(n), 30).unwrap();
    }
    let d = drain(&mut s, 60, &no_key);
    assert_eq!(got(&d, 1), (0..20).collect::<Vec<_>>());
    assert_eq!(got(&d, 2), (20..40).collect::<Vec<_>>());
    assert_eq!(got(&d, 3), (40..60).collect::<Vec<_>>());
    // A consumer out of permits is skipped.
    let mut s = new_sub(SubscriptionType::Shared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Shared).unwrap();
    s.attach(spec(2, "b", 0), SubscriptionType::Shared).unwrap();
    s.flow(cid(1), 5).unwrap();
    s.flow(cid(2), 100).unwrap();
    let d = drain(&mut s, 100, &no_key);
    assert_eq!(got(&d, 1).len(), 5);
    assert_eq!(got(&d, 2).len(), 95);
    // The best priority level (lowest number) is served first.
    let mut s = new_sub(SubscriptionType::Shared, None);
    s.attach(spec(1, "low", 1), SubscriptionType::Shared)
        .unwrap();
    s.attach(spec(2, "high", 0), SubscriptionType::Shared)
        .unwrap();
    s.flow(cid(1), 100).unwrap();
    s.flow(cid(2), 30).unwrap();
    let d = drain(&mut s, 50, &no_key);
    assert_eq!(got(&d, 2), (0..30).collect::<Vec<_>>());
    assert_eq!(got(&d, 1), (30..50).collect::<Vec<_>>());
    // Cumulative acks are not for Shared.
    assert!(matches!(
        s.ack(cid(1), Ack::Cumulative(Offset(40))),
        Err(CoordError::NotAllowed(_))
    ));
    // Any consumer's ack counts for the subscription.
    s.ack(cid(1), Ack::Individual(vec![r(0, 50)])).unwrap();
    assert_eq!(s.cursor().mark_delete(), Offset(50));
    assert_eq!(s.stats(Offset(50)).consumers[1].unacked, 0);
}

#[test]
fn shared_redelivers_a_departed_consumers_messages_first() {
    let mut s = new_sub(SubscriptionType::Shared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Shared).unwrap();
    s.attach(spec(2, "b", 0), SubscriptionType::Shared).unwrap();
    s.flow(cid(1), 10).unwrap();
    let d = drain(&mut s, 10, &no_key);
    assert_eq!(got(&d, 1), (0..10).collect::<Vec<_>>());
    s.ack(cid(1), Ack::Individual(vec![r(2, 4)])).unwrap();
    s.detach(cid(1)).unwrap();
    s.flow(cid(2), 100).unwrap();
    let d = drain(&mut s, 15, &no_key);
    assert_eq!(got(&d, 2), vec![0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    assert_eq!(counts(&d, 2), [vec![1; 8], vec![0; 5]].concat());
}

#[test]
fn redeliver_some_or_all_pending() {
    let mut s = new_sub(SubscriptionType::Shared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Shared).unwrap();
    s.flow(cid(1), 5).unwrap();
    drain(&mut s, 10, &no_key);
    // Offsets not pending at this consumer are ignored.
    s.redeliver(cid(1), Some(&[Offset(1), Offset(3), Offset(8)]))
        .unwrap();
    s.flow(cid(1), 2).unwrap();
    let d = drain(&mut s, 10, &no_key);
    assert_eq!(got(&d, 1), vec![1, 3]);
    assert_eq!(counts(&d, 1), vec![1, 1]);
    s.redeliver(cid(1), None).unwrap();
    s.flow(cid(1), 3).unwrap();
    let d = drain(&mut s, 10, &no_key);
    assert_eq!(
        got(&d, 1),
        vec![0, 1, 2],
        "redeliveries before new messages"
    );
    assert_eq!(counts(&d, 1), vec![1, 2, 1]);
}

#[test]
fn failover_picks_like_upstream_and_switches_on_disconnect() {
    // Partition 4 of 3 consumers at the best level: sorted by name, index 4 % 3.
    let mut s = new_sub(SubscriptionType::Failover, Some(4));
    let e = s
        .attach(spec(1, "c", 0), SubscriptionType::Failover)
        .unwrap();
    assert_eq!(
        e,
        vec![Effect::ActiveConsumerChanged {
            consumer: cid(1),
            active: true
        }]
    );
    s.attach(spec(2, "a", 0), SubscriptionType::Failover)
        .unwrap();
    // A worse priority level never wins while a better one is attached.
    let e = s
        .attach(spec(4, "0", 5), SubscriptionType::Failover)
        .unwrap();
    assert_eq!(
        e,
        vec![Effect::ActiveConsumerChanged {
            consumer: cid(4),
            active: false
        }],
        "a newcomer is told the state"
    );
    let e = s
        .attach(spec(3, "b", 0), SubscriptionType::Failover)
        .unwrap();
    // Sorted a(2), b(3), c(1): index 4 % 3 = 1 → b.
    assert!(e.contains(&Effect::ActiveConsumerChanged {
        consumer: cid(3),
        active: true
    }));
    assert!(e.contains(&Effect::ActiveConsumerChanged {
        consumer: cid(1),
        active: false
    }));
    assert_eq!(e.len(), 4, "every consumer is told");
    for n in 1..=4 {
        s.flow(cid(n), 100).unwrap();
    }
    let d = drain(&mut s, 5, &no_key);
    assert_eq!(got(&d, 3), (0..5).collect::<Vec<_>>());
    assert_eq!(d.len(), 1, "only the active consumer gets messages");
    // b leaves: a, c remain, 4 % 2 = 0 → a, which gets b's unacked messages.
    let e = s.detach(cid(3)).unwrap();
    assert!(e.contains(&Effect::ActiveConsumerChanged {
        consumer: cid(2),
        active: true
    }));
    let d = drain(&mut s, 7, &no_key);
    assert_eq!(got(&d, 2), (0..7).collect::<Vec<_>>());
    // Cumulative acks are allowed on Failover.
    s.ack(cid(2), Ack::Cumulative(Offset(6))).unwrap();
    assert_eq!(s.cursor().mark_delete(), Offset(7));

    // A non-partitioned topic takes the first of the sorted consumers.
    let mut s = new_sub(SubscriptionType::Failover, None);
    s.attach(spec(1, "z", 0), SubscriptionType::Failover)
        .unwrap();
    s.attach(spec(2, "m", 0), SubscriptionType::Failover)
        .unwrap();
    let active: Vec<_> = s
        .stats(Offset(0))
        .consumers
        .iter()
        .filter(|c| c.active)
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(active, vec!["m".to_string()]);
}

#[test]
fn a_different_type_is_refused_while_consumers_are_attached() {
    let mut s = new_sub(SubscriptionType::Shared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Shared).unwrap();
    let e = s.attach(spec(2, "b", 0), SubscriptionType::Failover);
    match e {
        Err(e @ CoordError::SubscriptionTypeMismatch { .. }) => {
            assert!(e
                .to_string()
                .starts_with("Subscription is of different type"))
        }
        other => panic!("{other:?}"),
    }
    s.detach(cid(1)).unwrap();
    s.attach(spec(2, "b", 0), SubscriptionType::Failover)
        .unwrap();
    assert_eq!(s.sub_type(), SubscriptionType::Failover);
    assert_eq!(s.take_dirty().unwrap().sub_type, SubscriptionType::Failover);
}

/// In the lower half: the second consumer's after one split.
pub(super) const LOW: u32 = 100;
/// In the upper half: the first consumer's.
pub(super) const HIGH: u32 = 40_000;

#[test]
fn key_shared_routes_by_hash_range() {
    let mut s = new_sub(SubscriptionType::KeyShared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.attach(spec(2, "b", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.flow(cid(1), 100).unwrap();
    s.flow(cid(2), 100).unwrap();
    let key = |o: i64| if o % 2 == 0 { LOW } else { HIGH };
    let d = drain(&mut s, 10, &key);
    assert_eq!(got(&d, 2), vec![0, 2, 4, 6, 8]);
    assert_eq!(got(&d, 1), vec![1, 3, 5, 7, 9]);
    assert!(matches!(
        s.ack(cid(1), Ack::Cumulative(Offset(3))),
        Err(CoordError::NotAllowed(_))
    ));
}

#[test]
fn key_shared_holds_keys_of_a_consumer_without_permits() {
    let mut s = new_sub(SubscriptionType::KeyShared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.attach(spec(2, "b", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.flow(cid(2), 100).unwrap();
    let key = |o: i64| if o % 2 == 0 { LOW } else { HIGH };
    let d = drain(&mut s, 10, &key);
    assert_eq!(got(&d, 2), vec![0, 2, 4, 6, 8], "other keys flow on");
    assert_eq!(s.stats(Offset(10)).redelivery_backlog, 5, "held");
    s.flow(cid(1), 3).unwrap();
    let d = drain(&mut s, 12, &key);
    assert_eq!(got(&d, 1), vec![1, 3, 5], "in key order, not redeliveries");
    assert_eq!(counts(&d, 1), vec![0, 0, 0]);
    assert_eq!(got(&d, 2), vec![10]);
    s.flow(cid(1), 10).unwrap();
    assert_eq!(got(&drain(&mut s, 12, &key), 1), vec![7, 9, 11]);
}

#[test]
fn key_shared_keeps_key_order_when_ranges_resplit() {
    // A newcomer takes over a key whose messages are out at the old owner:
    // it gets nothing of that key until they are acked.
    let mut s = new_sub(SubscriptionType::KeyShared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.flow(cid(1), 4).unwrap();
    let key = |_| LOW;
    assert_eq!(got(&drain(&mut s, 4, &key), 1), vec![0, 1, 2, 3]);
    s.attach(spec(2, "b", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.flow(cid(2), 100).unwrap();
    assert!(drain(&mut s, 8, &key).is_empty(), "held behind consumer a");
    s.ack(cid(1), Ack::Individual(vec![r(0, 3)])).unwrap();
    assert!(drain(&mut s, 8, &key).is_empty(), "offset 3 still out");
    s.ack(cid(1), Ack::Individual(vec![r(3, 4)])).unwrap();
    assert_eq!(got(&drain(&mut s, 8, &key), 2), vec![4, 5, 6, 7]);

    // The old owner leaves instead: its messages go to the new owner first.
    let mut s = new_sub(SubscriptionType::KeyShared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.attach(spec(2, "b", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.flow(cid(1), 4).unwrap();
    let key = |_| HIGH;
    assert_eq!(got(&drain(&mut s, 4, &key), 1), vec![0, 1, 2, 3]);
    s.detach(cid(1)).unwrap();
    s.flow(cid(2), 2).unwrap();
    let d = drain(&mut s, 8, &key);
    assert_eq!(got(&d, 2), vec![0, 1]);
    s.flow(cid(2), 100).unwrap();
    let d = drain(&mut s, 8, &key);
    assert_eq!(got(&d, 2), vec![2, 3, 4, 5, 6, 7]);
    assert_eq!(counts(&d, 2), vec![1, 1, 0, 0, 0, 0]);
}

#[test]
fn seek_resets_the_cursor_and_drops_pending() {
    let mut s = new_sub(SubscriptionType::Shared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Shared).unwrap();
    s.flow(cid(1), 100).unwrap();
    drain(&mut s, 10, &no_key);
    s.ack(cid(1), Ack::Individual(vec![r(0, 2), r(5, 6)]))
        .unwrap();
    s.redeliver(cid(1), Some(&[Offset(7)])).unwrap();
    s.seek(Offset(3));
    s.check_invariants(Offset(10)).unwrap();
    let st = s.stats(Offset(10));
    assert_eq!(
        (st.mark_delete, st.acked_ranges, st.consumers[0].unacked),
        (Offset(3), 0, 0)
    );
    assert_eq!(st.redelivery_backlog, 0);
    assert_eq!(st.backlog, 7);
    let d = drain(&mut s, 10, &no_key);
    assert_eq!(got(&d, 1), (3..10).collect::<Vec<_>>());
    assert!(counts(&d, 1).iter().all(|&c| c == 0));
    // Backwards too: everything from the target is unacked again.
    s.ack(cid(1), Ack::Individual(vec![r(3, 10)])).unwrap();
    s.seek(Offset(0));
    assert_eq!(got(&drain(&mut s, 10, &no_key), 1).len(), 10);
}

#[test]
fn retention_past_the_mark_delete_position_continues_from_the_log_start() {
    let mut s = new_sub(SubscriptionType::Shared, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Shared).unwrap();
    s.flow(cid(1), 5).unwrap();
    drain(&mut s, 10, &no_key);
    s.redeliver(cid(1), Some(&[Offset(4)])).unwrap();
    s.flow(cid(1), 100).unwrap();
    // Retention removed [0, 8): pending and queued messages there are gone.
    let plan = s.next_read(bounds(8, 12)).unwrap();
    assert_eq!(plan.from, Offset(8));
    assert_eq!(s.cursor().mark_delete(), Offset(8));
    assert_eq!(s.stats(Offset(12)).consumers[0].unacked, 0);
    let d = round(&mut s, 8, 12, &no_key);
    assert_eq!(got(&d, 1), vec![8, 9, 10, 11]);
    assert_eq!(s.stats(Offset(12)).backlog, 4);
    assert!(s.take_dirty().is_some(), "the moved mark is persisted");
}

#[test]
fn offsets_without_messages_are_skipped_and_count_as_acked() {
    let mut s = new_sub(SubscriptionType::Exclusive, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Exclusive)
        .unwrap();
    s.flow(cid(1), 100).unwrap();
    let plan = s.next_read(bounds(0, 6)).unwrap();
    // Offsets 2 and 5 are transaction markers.
    let entries: Vec<Entry> = [0, 1, 3, 4]
        .iter()
        .map(|&o| Entry {
            offset: Offset(o),
            batch: Offset(o),
            key_hash: 0,
        })
        .collect();
    let d = s.dispatch(
        &Read {
            plan,
            entries: &entries,
            end: Offset(6),
        },
        Offset(0),
    );
    assert_eq!(got(&d, 1), vec![0, 1, 3, 4]);
    assert_eq!(s.read_position(), Offset(6));
    s.ack(cid(1), Ack::Individual(vec![r(0, 2), r(3, 5)]))
        .unwrap();
    assert_eq!(s.cursor().mark_delete(), Offset(6));
    s.check_invariants(Offset(6)).unwrap();
}

#[test]
fn a_stale_read_after_a_seek_delivers_nothing_wrong() {
    let mut s = new_sub(SubscriptionType::Exclusive, None);
    s.attach(spec(1, "a", 0), SubscriptionType::Exclusive)
        .unwrap();
    s.flow(cid(1), 100).unwrap();
    drain(&mut s, 10, &no_key);
    let plan = s.next_read(bounds(0, 20)).unwrap();
    assert_eq!(plan.from, Offset(10));
    s.seek(Offset(2));
    let entries: Vec<Entry> = (10..20)
        .map(|o| Entry {
            offset: Offset(o),
            batch: Offset(o),
            key_hash: 0,
        })
        .collect();
    let d = s.dispatch(
        &Read {
            plan,
            entries: &entries,
            end: Offset(20),
        },
        Offset(0),
    );
    assert!(
        d.is_empty(),
        "the read no longer starts at the read position"
    );
    assert_eq!(s.read_position(), Offset(2));
    assert_eq!(
        got(&drain(&mut s, 20, &no_key), 1),
        (2..20).collect::<Vec<_>>()
    );
}

#[test]
fn a_new_subscription_starts_where_asked() {
    let b = bounds(10, 20);
    let at = |start| {
        Subscription::new(
            "r".into(),
            SubscriptionType::Exclusive,
            false,
            None,
            start,
            b,
            Timestamp(0),
        )
        .cursor()
        .mark_delete()
    };
    assert_eq!(at(StartPosition::Earliest), Offset(10));
    assert_eq!(at(StartPosition::Latest), Offset(20));
    assert_eq!(at(StartPosition::Offset(Offset(15))), Offset(15));
    assert_eq!(at(StartPosition::Offset(Offset(3))), Offset(10), "clamped");
    assert_eq!(at(StartPosition::Offset(Offset(99))), Offset(20), "clamped");
    let mut reader = Subscription::new(
        "r".into(),
        SubscriptionType::Exclusive,
        false,
        None,
        StartPosition::Earliest,
        b,
        Timestamp(0),
    );
    assert!(reader.take_dirty().is_none(), "a Reader is never persisted");
}
