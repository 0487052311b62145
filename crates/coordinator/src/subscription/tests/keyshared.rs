//! Batches (Key_Shared above all; Shared and Failover too): a batch's outstanding messages go to one
//! consumer in one delivery, even beyond its permits (clients that do not
//! acknowledge batch indexes never acknowledge a batch they got in parts),
//! and per-key order and the one-holder-per-key rule hold batch by batch
//! across consumers joining and leaving.

use model::Offset;

use super::dispatch::{bounds, cid, counts, got, new_sub, r, spec, HIGH, LOW};
use crate::subscription::*;

/// One dispatch round over a log of batches of `size` messages at every
/// offset of `[0, end)`, each batch read whole from the one holding
/// `plan.from`; batch `b` (its first offset) has key hash `key(b)`.
fn round(s: &mut Subscription, end: i64, size: i64, key: &dyn Fn(i64) -> u32) -> Vec<Delivery> {
    let Some(plan) = s.next_read(bounds(0, end)) else {
        return Vec::new();
    };
    let first = plan.from.0 - plan.from.0 % size;
    let entries: Vec<Entry> = (first..end)
        .map(|o| Entry {
            offset: Offset(o),
            batch: Offset(o - o % size),
            key_hash: key(o - o % size),
        })
        .collect();
    let out = s.dispatch(
        &Read {
            plan,
            entries: &entries,
            end: Offset(end),
        },
        Offset(0),
    );
    s.check_invariants(Offset(end)).unwrap();
    out
}

/// Rounds until nothing more can be dispatched.
fn drain(s: &mut Subscription, end: i64, size: i64, key: &dyn Fn(i64) -> u32) -> Vec<Delivery> {
    let mut all = Vec::new();
    for _ in 0..1000 {
        if s.next_read(bounds(0, end)).is_none() {
            return all;
        }
        all.extend(round(s, end, size, key));
    }
    panic!("dispatch does not settle");
}

fn key_shared(consumers: &[u64]) -> Subscription {
    let mut s = new_sub(SubscriptionType::KeyShared, None);
    for &c in consumers {
        s.attach(spec(c, "c", 0), SubscriptionType::KeyShared)
            .unwrap();
    }
    s
}

fn permits(s: &Subscription, c: u64) -> u64 {
    let stats = s.stats(Offset(0));
    stats
        .consumers
        .iter()
        .find(|x| x.id == cid(c))
        .unwrap()
        .permits
}

#[test]
fn a_batch_goes_whole_to_one_consumer_even_beyond_its_permits() {
    let mut s = key_shared(&[1, 2]);
    s.flow(cid(1), 1).unwrap();
    s.flow(cid(2), 100).unwrap();
    // Batches [0, 4) of a high key and [4, 8) of a low one.
    let key = |b: i64| if b == 0 { HIGH } else { LOW };
    let d = drain(&mut s, 8, 4, &key);
    assert_eq!(d.iter().filter(|d| d.consumer == cid(1)).count(), 1);
    assert_eq!(got(&d, 1), vec![0, 1, 2, 3], "one delivery, whole");
    assert_eq!(got(&d, 2), vec![4, 5, 6, 7]);
    // Consumer 1 is 3 permits in debt: a flow of 3 sends nothing more.
    assert_eq!(permits(&s, 1), 0);
    s.flow(cid(1), 3).unwrap();
    assert!(drain(&mut s, 12, 4, &|_| HIGH).is_empty());
    s.flow(cid(1), 1).unwrap();
    assert_eq!(got(&drain(&mut s, 12, 4, &|_| HIGH), 1), vec![8, 9, 10, 11]);
}

#[test]
fn a_held_batch_is_sent_whole_once_its_consumer_has_permits() {
    let mut s = key_shared(&[1, 2]);
    s.flow(cid(2), 100).unwrap();
    let key = |b: i64| if b == 4 { LOW } else { HIGH };
    let d = drain(&mut s, 12, 4, &key);
    assert_eq!(got(&d, 2), vec![4, 5, 6, 7], "other keys flow on");
    assert_eq!(s.stats(Offset(12)).redelivery_backlog, 8);
    s.flow(cid(1), 1).unwrap();
    let d = drain(&mut s, 12, 4, &key);
    assert_eq!(got(&d, 1), vec![0, 1, 2, 3], "the first batch, whole");
    assert_eq!(counts(&d, 1), vec![0; 4], "held, not redelivered");
    s.flow(cid(1), 4).unwrap();
    assert_eq!(got(&drain(&mut s, 12, 4, &key), 1), vec![8, 9, 10, 11]);
}

#[test]
fn a_newcomer_gets_a_moved_key_only_after_the_old_owner_acks_its_batches() {
    let mut s = key_shared(&[1]);
    s.flow(cid(1), 100).unwrap();
    assert_eq!(
        got(&drain(&mut s, 8, 4, &|_| LOW), 1),
        (0..8).collect::<Vec<_>>()
    );
    // The newcomer takes the lower half, and with it the key.
    s.attach(spec(2, "c", 0), SubscriptionType::KeyShared)
        .unwrap();
    s.flow(cid(2), 100).unwrap();
    assert!(drain(&mut s, 16, 4, &|_| LOW).is_empty(), "held behind 1");
    s.ack(cid(1), Ack::Individual(vec![r(0, 7)])).unwrap();
    assert!(drain(&mut s, 16, 4, &|_| LOW).is_empty(), "7 is still out");
    s.ack(cid(1), Ack::Individual(vec![r(7, 8)])).unwrap();
    let d = drain(&mut s, 16, 4, &|_| LOW);
    assert_eq!(got(&d, 2), (8..16).collect::<Vec<_>>());
}

#[test]
fn a_departed_consumers_batches_go_whole_to_the_new_owner_in_order() {
    let mut s = key_shared(&[1, 2]);
    s.flow(cid(1), 100).unwrap();
    // Two batches of the first consumer's key, one partly acked.
    assert_eq!(got(&drain(&mut s, 8, 4, &|_| HIGH), 1).len(), 8);
    s.ack(cid(1), Ack::Individual(vec![r(0, 2)])).unwrap();
    s.detach(cid(1)).unwrap();
    // One permit: still the rest of both batches, one after the other.
    s.flow(cid(2), 1).unwrap();
    let d = drain(&mut s, 12, 4, &|_| HIGH);
    assert_eq!(got(&d, 2), vec![2, 3], "the first batch's rest, whole");
    assert_eq!(counts(&d, 2), vec![1, 1]);
    s.flow(cid(2), 100).unwrap();
    let d = drain(&mut s, 12, 4, &|_| HIGH);
    assert_eq!(got(&d, 2), vec![4, 5, 6, 7, 8, 9, 10, 11]);
    assert_eq!(counts(&d, 2), vec![1, 1, 1, 1, 0, 0, 0, 0]);
}

#[test]
fn a_batch_is_routed_by_its_first_messages_hash() {
    let mut s = key_shared(&[1, 2]);
    s.flow(cid(1), 100).unwrap();
    s.flow(cid(2), 100).unwrap();
    let plan = s.next_read(bounds(0, 3)).unwrap();
    // Hashes that differ inside a batch: the first one decides.
    let entries: Vec<Entry> = [LOW, HIGH, HIGH]
        .iter()
        .enumerate()
        .map(|(i, &h)| Entry {
            offset: Offset(i as i64),
            batch: Offset(0),
            key_hash: h,
        })
        .collect();
    let d = s.dispatch(
        &Read {
            plan,
            entries: &entries,
            end: Offset(3),
        },
        Offset(0),
    );
    assert_eq!(got(&d, 2), vec![0, 1, 2]);
    s.check_invariants(Offset(3)).unwrap();
}

#[test]
fn shared_and_failover_also_send_batches_whole() {
    for sub_type in [SubscriptionType::Shared, SubscriptionType::Failover] {
        let mut s = new_sub(sub_type, None);
        for c in [1, 2] {
            s.attach(spec(c, "c", 0), sub_type).unwrap();
        }
        s.flow(cid(1), 5).unwrap();
        s.flow(cid(2), 5).unwrap();
        // Batches of 4: no batch is split between consumers or deliveries.
        let d = drain(&mut s, 16, 4, &|_| LOW);
        for c in [1, 2] {
            let mine = got(&d, c);
            for batch in mine.chunks(4) {
                assert_eq!(batch.len(), 4, "{sub_type:?}: {mine:?}");
                assert_eq!(batch[0] % 4, 0, "{sub_type:?}: {mine:?}");
            }
        }
        let all = [got(&d, 1), got(&d, 2)].concat();
        assert!(!all.is_empty(), "{sub_type:?}");
    }
}
