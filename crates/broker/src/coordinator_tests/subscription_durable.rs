//! The registry over a real broker and group log: durable cursors survive
//! a restart (and a log compaction), Readers come and go with their
//! consumer, deleted topics lose their subscriptions.

use model::Offset;

use crate::group::store::CommittedOffset;
use crate::now_ms;
use crate::subscription::*;

fn open(dir: &std::path::Path) -> crate::testing::TestNode {
    crate::testing::broker_with_topics(dir, &["orders", "t", "u", "v"])
}

fn cid(n: u64) -> ConsumerId {
    ConsumerId {
        connection: n,
        consumer: n,
    }
}

fn spec(n: u64, name: &str, priority_level: i32) -> ConsumerSpec {
    ConsumerSpec {
        id: cid(n),
        name: name.into(),
        priority_level,
    }
}

fn bounds(start: i64, end: i64) -> LogBounds {
    LogBounds {
        start: Offset(start),
        end: Offset(end),
    }
}

fn request(
    n: u64,
    sub_type: SubscriptionType,
    durable: bool,
    start: StartPosition,
) -> SubscribeRequest {
    SubscribeRequest {
        consumer: spec(n, "c", 0),
        sub_type,
        durable,
        partitioned: true,
        start,
    }
}

/// Dispatch rounds over messages at every offset of `[0, end)`.
fn drain(subs: &Subscriptions, key: &SubscriptionKey, end: i64) -> Vec<i64> {
    let mut out = Vec::new();
    while let Some(plan) = subs.next_read(key, bounds(0, end)).unwrap() {
        let to = (plan.from.0 + plan.max_messages as i64).min(end);
        let entries: Vec<Entry> = (plan.from.0..to)
            .map(|o| Entry {
                offset: Offset(o),
                batch: Offset(o),
                key_hash: 0,
            })
            .collect();
        let read = Read {
            plan,
            entries: &entries,
            end: Offset(to),
        };
        for d in subs.dispatch(key, &read, Offset(0)).unwrap() {
            out.extend(d.messages.iter().map(|m| m.offset.0));
        }
    }
    out
}

#[test]
fn acked_offsets_survive_a_restart_and_the_rest_is_redelivered() {
    let dir = tempfile::tempdir().unwrap();
    let key = SubscriptionKey::new("orders", 2, "billing");
    {
        let b = open(dir.path());
        let subs = b.subscriptions();
        subs.subscribe(
            &key,
            request(1, SubscriptionType::Shared, true, StartPosition::Earliest),
            bounds(0, 50),
            now_ms(),
        )
        .unwrap();
        subs.flow(&key, cid(1), 1000).unwrap();
        assert_eq!(drain(subs, &key, 50), (0..50).collect::<Vec<_>>());
        let acks = vec![Offset(0)..Offset(10), Offset(20)..Offset(25)];
        subs.ack(&key, cid(1), Ack::Individual(acks)).unwrap();
        assert_eq!(subs.flush_cursors().unwrap(), 1);
        assert_eq!(subs.flush_cursors().unwrap(), 0, "nothing changed");
        // Acked after the last flush: a clean shutdown flushes it.
        subs.ack(&key, cid(1), Ack::Individual(vec![Offset(30)..Offset(31)]))
            .unwrap();
        b.shutdown().unwrap();
    }
    let b = open(dir.path());
    let subs = b.subscriptions();
    let st = subs.stats(&key, Offset(50)).expect("restored");
    assert_eq!((st.mark_delete, st.acked_ranges), (Offset(10), 2));
    assert_eq!(st.backlog, 50 - 10 - 6);
    assert!(st.durable && st.consumers.is_empty());
    assert_eq!(st.sub_type, SubscriptionType::Shared);
    // The start position of a later subscribe is ignored.
    subs.subscribe(
        &key,
        request(7, SubscriptionType::Shared, true, StartPosition::Latest),
        bounds(0, 50),
        now_ms(),
    )
    .unwrap();
    subs.flow(&key, cid(7), 1000).unwrap();
    let again = drain(subs, &key, 50);
    let expected: Vec<i64> = (10..20).chain(25..30).chain(31..50).collect();
    assert_eq!(again, expected, "no acked-and-persisted offset, no gap");
}

#[test]
fn a_new_durable_subscription_is_stored_before_subscribe_returns() {
    let dir = tempfile::tempdir().unwrap();
    let key = SubscriptionKey::new("t", 0, "late");
    {
        let b = open(dir.path());
        b.subscriptions()
            .subscribe(
                &key,
                request(1, SubscriptionType::Failover, true, StartPosition::Latest),
                bounds(0, 100),
                now_ms(),
            )
            .unwrap();
        b.shutdown().unwrap();
    }
    let b = open(dir.path());
    let st = b.subscriptions().stats(&key, Offset(120)).unwrap();
    assert_eq!(
        st.mark_delete,
        Offset(100),
        "messages after it are not skipped"
    );
    assert_eq!(st.backlog, 20);
    assert_eq!(st.sub_type, SubscriptionType::Failover);
}

#[test]
fn unsubscribe_and_topic_deletion_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let a = SubscriptionKey::new("t", 0, "a");
    let gone_with_topic = SubscriptionKey::new("u", 1, "x");
    let kept = SubscriptionKey::new("v", 0, "x");
    {
        let b = open(dir.path());
        let subs = b.subscriptions();
        let req = |n| request(n, SubscriptionType::Shared, true, StartPosition::Earliest);
        subs.subscribe(&a, req(1), bounds(0, 5), now_ms()).unwrap();
        subs.subscribe(&a, req(2), bounds(0, 5), now_ms()).unwrap();
        subs.subscribe(&gone_with_topic, req(3), bounds(0, 5), now_ms())
            .unwrap();
        subs.subscribe(&kept, req(4), bounds(0, 5), now_ms())
            .unwrap();
        // Not while another consumer is attached.
        assert!(matches!(
            subs.unsubscribe(&a, Some(cid(1))),
            Err(crate::coordinator_error::CoordError::ConsumerBusy(_))
        ));
        subs.detach(&a, cid(2)).unwrap();
        subs.unsubscribe(&a, Some(cid(1))).unwrap();
        assert!(subs.stats(&a, Offset(5)).is_none());
        subs.forget_topic("u").unwrap();
        assert!(subs.list("u", 1, Offset(5)).is_empty());
        b.shutdown().unwrap();
    }
    let b = open(dir.path());
    let subs = b.subscriptions();
    assert!(subs.stats(&a, Offset(5)).is_none());
    assert!(subs.stats(&gone_with_topic, Offset(5)).is_none());
    assert!(subs.stats(&kept, Offset(5)).is_some());
}

#[test]
fn a_reader_is_listed_while_connected_and_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let reader = SubscriptionKey::new("t", 3, "reader-0a1b2c3d4e");
    let durable = SubscriptionKey::new("t", 3, "sub");
    let b = open(dir.path());
    let subs = b.subscriptions();
    subs.subscribe(
        &durable,
        request(
            1,
            SubscriptionType::Exclusive,
            true,
            StartPosition::Earliest,
        ),
        bounds(10, 20),
        now_ms(),
    )
    .unwrap();
    // A start before the first available message continues from it.
    subs.subscribe(
        &reader,
        request(
            2,
            SubscriptionType::Exclusive,
            false,
            StartPosition::Offset(Offset(4)),
        ),
        bounds(10, 20),
        now_ms(),
    )
    .unwrap();
    let list = subs.list("t", 3, Offset(20));
    let names: Vec<(&str, bool)> = list.iter().map(|s| (s.name.as_str(), s.durable)).collect();
    assert_eq!(names, vec![("reader-0a1b2c3d4e", false), ("sub", true)]);
    assert_eq!(list[0].mark_delete, Offset(10));
    assert_eq!(list[0].consumers.len(), 1);
    subs.flow(&reader, cid(2), 5).unwrap();
    subs.ack(&reader, cid(2), Ack::Cumulative(Offset(12)))
        .unwrap();
    assert_eq!(
        subs.flush_cursors().unwrap(),
        0,
        "reader acks are not stored"
    );
    // The connection goes away: the reader vanishes, the durable one stays.
    let effects = subs.detach_connection(2);
    assert_eq!(effects.len(), 1);
    let names: Vec<String> = subs
        .list("t", 3, Offset(20))
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["sub".to_string()]);
    assert!(matches!(
        subs.flow(&reader, cid(2), 1),
        Err(crate::coordinator_error::CoordError::SubscriptionNotFound(
            _
        ))
    ));
    b.shutdown().unwrap();
    drop(b);
    let b = open(dir.path());
    let names: Vec<String> = b
        .subscriptions()
        .list("t", 3, Offset(20))
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["sub".to_string()]);
}

#[test]
fn cursors_survive_a_group_log_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let key = SubscriptionKey::new("t", 0, "s");
    let b = open(dir.path());
    let subs = b.subscriptions();
    subs.subscribe(
        &key,
        request(
            1,
            SubscriptionType::Exclusive,
            true,
            StartPosition::Earliest,
        ),
        bounds(0, 100),
        now_ms(),
    )
    .unwrap();
    subs.flow(&key, cid(1), 100).unwrap();
    drain(subs, &key, 100);
    subs.ack(&key, cid(1), Ack::Cumulative(Offset(40))).unwrap();
    subs.ack(&key, cid(1), Ack::Individual(vec![Offset(50)..Offset(60)]))
        .unwrap();
    subs.flush_cursors().unwrap();
    // Enough history (~17 MB of offset commits) to trigger compaction.
    let now = now_ms().0;
    let big = "m".repeat(4000);
    for i in 0..4300 {
        let o = CommittedOffset {
            offset: i,
            leader_epoch: -1,
            metadata: Some(big.clone()),
            commit_timestamp: now,
        };
        b.groups()
            .commit_offsets("g", "", None, -1, vec![("t".into(), 0, o)])
            .unwrap();
    }
    let log = b.topic("__consumer_offsets").unwrap().partitions[0]
        .log()
        .clone();
    b.groups().expire_and_compact(now).unwrap();
    assert!(log.log_start_offset().0 > 0, "compacted");
    b.shutdown().unwrap();
    drop(b);
    let b = open(dir.path());
    let st = b.subscriptions().stats(&key, Offset(100)).unwrap();
    assert_eq!((st.mark_delete, st.acked_ranges), (Offset(41), 1));
    assert_eq!(st.backlog, 100 - 41 - 10);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_flusher_persists_acks_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let key = SubscriptionKey::new("t", 0, "s");
    let b = open(dir.path());
    let subs = b.subscriptions();
    subs.subscribe(
        &key,
        request(
            1,
            SubscriptionType::Exclusive,
            true,
            StartPosition::Earliest,
        ),
        bounds(0, 10),
        now_ms(),
    )
    .unwrap();
    subs.flow(&key, cid(1), 10).unwrap();
    drain(subs, &key, 10);
    subs.ack(&key, cid(1), Ack::Cumulative(Offset(4))).unwrap();
    let partition = b.topic("__consumer_offsets").unwrap().partitions[0].clone();
    let log = partition.log().clone();
    let before = log.log_end_offset();
    let flusher = crate::groups::spawn_flusher(b.clone(), std::time::Duration::from_millis(10));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    assert!(
        partition.wait_for(before, deadline).await,
        "the background flusher wrote the cursor"
    );
    flusher.abort();
    assert_eq!(log.log_end_offset(), before.plus(1), "one cursor record");
    assert_eq!(subs.flush_cursors().unwrap(), 0, "nothing left to write");
    b.shutdown().unwrap();
}

#[test]
fn a_reader_cannot_take_a_durable_subscription_nor_the_reverse() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    let subs = b.subscriptions();
    let durable = SubscriptionKey::new("orders", 0, "billing");
    subs.subscribe(
        &durable,
        request(1, SubscriptionType::Shared, true, StartPosition::Earliest),
        bounds(0, 0),
        now_ms(),
    )
    .unwrap();
    let e = subs
        .subscribe(
            &durable,
            request(
                2,
                SubscriptionType::Exclusive,
                false,
                StartPosition::Earliest,
            ),
            bounds(0, 0),
            now_ms(),
        )
        .unwrap_err();
    assert!(
        matches!(&e, crate::coordinator_error::CoordError::NotAllowed(m) if m.contains("Durable subscription")),
        "{e}"
    );
    let reader = SubscriptionKey::new("orders", 0, "reader-x");
    subs.subscribe(
        &reader,
        request(
            3,
            SubscriptionType::Exclusive,
            false,
            StartPosition::Earliest,
        ),
        bounds(0, 0),
        now_ms(),
    )
    .unwrap();
    let e = subs
        .subscribe(
            &reader,
            request(4, SubscriptionType::Shared, true, StartPosition::Earliest),
            bounds(0, 0),
            now_ms(),
        )
        .unwrap_err();
    assert!(
        matches!(&e, crate::coordinator_error::CoordError::NotAllowed(m) if m.contains("NonDurable subscription")),
        "{e}"
    );
    // The durable subscription keeps its consumer.
    assert_eq!(subs.stats(&durable, Offset(0)).unwrap().consumers.len(), 1);
}

#[test]
fn state_left_by_a_deleted_topic_is_removed_at_start_up() {
    // A cursor written for a topic the metadata does not hold: what a crash
    // between a deletion's metadata commit and its tombstones leaves.
    let dir = tempfile::tempdir().unwrap();
    let ghost = SubscriptionKey::new("ghost", 0, "billing");
    {
        let b = open(dir.path());
        b.subscriptions()
            .subscribe(
                &ghost,
                request(1, SubscriptionType::Shared, true, StartPosition::Earliest),
                bounds(0, 0),
                now_ms(),
            )
            .unwrap();
        b.producer_sequences()
            .partition("ghost", 0, 0, |s| {
                s.record("p", 1, Offset(1), 0);
                Ok::<_, crate::Error>(())
            })
            .unwrap();
        b.producer_sequences().flush(0, true).unwrap();
        assert!(b.groups().front_end().topics().contains("ghost"));
        b.shutdown().unwrap();
    }
    for _ in 0..2 {
        let b = open(dir.path());
        assert!(b.subscriptions().stats(&ghost, Offset(0)).is_none());
        assert!(
            b.groups().front_end().topics().is_empty(),
            "tombstones are durable"
        );
        b.shutdown().unwrap();
    }
}

#[test]
fn admin_created_subscriptions_and_skips_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let key = SubscriptionKey::new("orders", 1, "audit");
    {
        let b = open(dir.path());
        let subs = b.subscriptions();
        subs.create(
            &key,
            StartPosition::Offset(Offset(3)),
            bounds(0, 10),
            now_ms(),
        )
        .unwrap();
        let e = subs
            .create(&key, StartPosition::Earliest, bounds(0, 10), now_ms())
            .unwrap_err();
        assert!(
            matches!(
                e,
                crate::coordinator_error::CoordError::SubscriptionExists(_)
            ),
            "{e}"
        );
        let s = subs.stats(&key, Offset(10)).unwrap();
        assert_eq!((s.mark_delete, s.backlog, s.durable), (Offset(3), 7, true));
        assert!(s.consumers.is_empty());
        // No shutdown: a created subscription is in the log already.
    }
    {
        let b = open(dir.path());
        let subs = b.subscriptions();
        assert_eq!(subs.stats(&key, Offset(10)).unwrap().mark_delete, Offset(3));
        assert_eq!(subs.skip(&key, Some(2), Offset(10)).unwrap(), 2);
        assert_eq!(subs.stats(&key, Offset(10)).unwrap().backlog, 5);
        assert_eq!(subs.skip(&key, None, Offset(10)).unwrap(), 5);
        assert_eq!(subs.stats(&key, Offset(10)).unwrap().backlog, 0);
        let missing = SubscriptionKey::new("orders", 1, "nope");
        assert!(matches!(
            subs.skip(&missing, None, Offset(10)),
            Err(crate::coordinator_error::CoordError::SubscriptionNotFound(
                _
            ))
        ));
        subs.flush_cursors().unwrap();
    }
    let b = open(dir.path());
    let s = b.subscriptions().stats(&key, Offset(12)).unwrap();
    assert_eq!((s.mark_delete, s.backlog), (Offset(10), 2));
}
