//! The native consumer against the real broker: group members sharing
//! partitions and taking over after leave and kill, a mixed group with a
//! librdkafka member, pattern subscriptions that discover and drop topics,
//! checkpoint/restore across a restart with a different assignment,
//! commits, and manual assignment with seeks.

mod common;
mod consumer_support;
mod groups;

use std::collections::BTreeSet;
use std::time::Duration;

use client::{AutoOffsetReset, Consumer, Error, Offsets, TopicPartition};
use common::{eventually, BrokerProcess};
use consumer_support::{
    admin, builder, covers, create, produce_spread, producer, sorted, Member, Recorder,
};
use groups::{classic_config, GroupConsumer};

fn broker() -> BrokerProcess {
    BrokerProcess::start(&[
        "group.initial.rebalance.delay.ms=200",
        "group.min.session.timeout.ms=1000",
    ])
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn members_share_a_topic_and_take_over_after_leave_and_kill() {
    let broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "six", 6).await;
    let m: Vec<Member> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(Member::subscribed(
                builder(&b, "g6").build().await.unwrap(),
                &["six"],
            ));
        }
        v
    };
    eventually(WAIT, "three members with two partitions each", || {
        let a: Vec<_> = m.iter().map(Member::assignment).collect();
        let ok = covers(&a, 6) && a.iter().all(|x| x.len() == 2);
        async move { ok.then_some(()) }
    })
    .await;

    let sent = values("m", 60);
    let p = producer(&admin).await;
    produce_spread(&p, "six", 6, &sent).await;
    eventually(WAIT, "every message consumed once", || {
        let all = sorted(m.iter().flat_map(Member::values).collect());
        let want = sorted(sent.clone());
        async move { (all == want).then_some(()) }
    })
    .await;
    // Each member read only its own partitions.
    for x in &m {
        let mine = x.assignment();
        assert!(x
            .messages()
            .iter()
            .all(|g| mine.contains(&(g.0.clone(), g.1))));
    }

    // One leaves: the group forgets it at once (no session expiry), and
    // the other two take over.
    let mut m = m;
    m.pop().unwrap().close().await;
    let described = admin.describe_groups(&["g6"]).await.unwrap();
    assert_eq!(described[0].1.as_ref().unwrap().members.len(), 2);
    eventually(WAIT, "two members cover six partitions", || {
        let a: Vec<_> = m.iter().map(Member::assignment).collect();
        let ok = covers(&a, 6) && a.iter().all(|x| x.len() == 3);
        async move { ok.then_some(()) }
    })
    .await;

    // One is killed: its session (3 s) expires and the last takes over.
    m.pop().unwrap().kill().await;
    eventually(WAIT, "the last member owns all six", || {
        let ok = m[0].assignment().len() == 6;
        async move { ok.then_some(()) }
    })
    .await;
    let more = values("late", 12);
    produce_spread(&p, "six", 6, &more).await;
    eventually(
        WAIT,
        "the survivor reads new messages of every partition",
        || {
            let got: BTreeSet<String> = m[0].values().into_iter().collect();
            let ok = more.iter().all(|v| got.contains(v));
            async move { ok.then_some(()) }
        },
    )
    .await;
    assert!(m[0].errors().is_empty(), "{:?}", m[0].errors());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mixed_group_with_librdkafka_gets_disjoint_assignments() {
    let broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "mix", 4).await;
    let p = producer(&admin).await;

    // Ours first: it leads the group when librdkafka joins.
    let ours = Member::subscribed(builder(&b, "gmix").build().await.unwrap(), &["mix"]);
    eventually(WAIT, "our member owns everything", || {
        let ok = ours.assignment().len() == 4;
        async move { ok.then_some(()) }
    })
    .await;
    let rd = GroupConsumer::start(classic_config(&b, "gmix"), &["mix"]);
    let both = |ours: &Member, rd: &GroupConsumer| {
        let a = ours.assignment();
        let r = rd.assignment();
        !a.is_empty() && !r.is_empty() && covers(&[a, r], 4)
    };
    eventually(WAIT, "disjoint assignments with our leader", || {
        let ok = both(&ours, &rd);
        async move { ok.then_some(()) }
    })
    .await;
    let sent = values("a", 40);
    produce_spread(&p, "mix", 4, &sent).await;
    eventually(WAIT, "messages split between the two", || {
        let mut all = ours.values();
        all.extend(rd.values());
        let ok = sorted(all) == sorted(sent.clone());
        async move { ok.then_some(()) }
    })
    .await;
    assert!(!ours.values().is_empty() && !rd.values().is_empty());

    // librdkafka alone, then a new member of ours joins under its lead.
    ours.close().await;
    eventually(WAIT, "librdkafka owns everything", || {
        let ok = rd.assignment().len() == 4;
        async move { ok.then_some(()) }
    })
    .await;
    let ours = Member::subscribed(builder(&b, "gmix").build().await.unwrap(), &["mix"]);
    eventually(WAIT, "disjoint assignments with librdkafka leading", || {
        let ok = both(&ours, &rd);
        async move { ok.then_some(()) }
    })
    .await;
    ours.close().await;
    rd.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pattern_subscription_discovers_new_topics_and_revokes_deleted_ones() {
    let broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "re-a", 2).await;
    create(&admin, "other", 1).await;
    create(&admin, "xre-a", 1).await;
    let rec = Recorder::default();
    let mut c = builder(&b, "gre").build().await.unwrap();
    c.subscribe_pattern("re-.*", rec.clone()).unwrap();
    assert!(c.subscribe_pattern("(", ()).is_err());
    let m = Member::start(c, rec.0.clone());
    let set = |v: &[(&str, i32)]| -> BTreeSet<(String, i32)> {
        v.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    };
    eventually(WAIT, "re-a assigned", || {
        let ok = m.assignment() == set(&[("re-a", 0), ("re-a", 1)]);
        async move { ok.then_some(()) }
    })
    .await;

    // A new matching topic is found by the periodic refresh.
    create(&admin, "re-b", 2).await;
    eventually(WAIT, "re-b assigned too", || {
        let ok = m.assignment() == set(&[("re-a", 0), ("re-a", 1), ("re-b", 0), ("re-b", 1)]);
        async move { ok.then_some(()) }
    })
    .await;
    assert!(m
        .events()
        .iter()
        .any(|e| e == "assign:re-a-0,re-a-1,re-b-0,re-b-1"));
    let p = producer(&admin).await;
    produce_spread(&p, "re-b", 2, &values("b", 4)).await;
    produce_spread(&p, "other", 1, &values("o", 2)).await;
    eventually(WAIT, "re-b's messages", || {
        let ok = sorted(m.values()) == values("b", 4);
        async move { ok.then_some(()) }
    })
    .await;

    // A deleted topic is revoked.
    admin.delete_topics(&["re-a"]).await.unwrap();
    eventually(WAIT, "re-a revoked", || {
        let ok = m.assignment() == set(&[("re-b", 0), ("re-b", 1)]);
        async move { ok.then_some(()) }
    })
    .await;
    let events = m.events();
    let revoked = events
        .iter()
        .rposition(|e| e == "revoke:re-a-0,re-a-1,re-b-0,re-b-1")
        .expect("re-a's partitions revoked");
    assert_eq!(events[revoked + 1], "assign:re-b-0,re-b-1", "{events:?}");
    // Never anything outside the pattern (a full match: not xre-a).
    assert!(events
        .iter()
        .all(|e| !e.contains("other") && !e.contains("xre-a") && !e.contains("__")));
    m.close().await;
}

/// Everything `members` consumed, sorted.
fn consumed(members: &[&Member]) -> Vec<String> {
    sorted(members.iter().flat_map(|m| m.values()).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn checkpoint_and_restore_across_a_restart_with_a_different_assignment() {
    // Instances restored together must join the same first rebalance
    // (none may consume alone first); give them a wide window.
    let broker = BrokerProcess::start(&[
        "group.initial.rebalance.delay.ms=1500",
        "group.min.session.timeout.ms=1000",
    ]);
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "flink", 4).await;
    let p = producer(&admin).await;

    // Two instances read the first batch, snapshot, and stop without
    // committing anything.
    let first = values("one-", 20);
    produce_spread(&p, "flink", 4, &first).await;
    let a = Member::subscribed(builder(&b, "gf").build().await.unwrap(), &["flink"]);
    let bm = Member::subscribed(builder(&b, "gf").build().await.unwrap(), &["flink"]);
    eventually(WAIT, "two instances read the first batch", || {
        let ok = consumed(&[&a, &bm]) == sorted(first.clone())
            && covers(&[a.assignment(), bm.assignment()], 4)
            && a.assignment().len() == 2;
        async move { ok.then_some(()) }
    })
    .await;
    let (cpa, cpb) = (a.checkpoint().await, bm.checkpoint().await);
    assert_eq!((cpa.len(), cpb.len()), (2, 2), "{cpa} / {cpb}");
    a.close().await;
    bm.close().await;
    let mut merged = cpa.clone();
    merged.merge(cpb);
    assert_eq!(
        merged.to_string(),
        "flink-0=5 flink-1=5 flink-2=5 flink-3=5"
    );
    assert!(admin.list_group_offsets("gf").await.unwrap().is_empty());

    // One instance restarts from the merged snapshot: it owns all four
    // partitions and reads only what came after the snapshot (without the
    // restore it would start over: auto_offset_reset is earliest).
    let second = values("two-", 20);
    produce_spread(&p, "flink", 4, &second).await;
    let mut c = builder(&b, "gf").build().await.unwrap();
    c.restore(&merged);
    assert_eq!(c.checkpoint(), {
        // Unassigned yet: everything is carried.
        let mut carried = Offsets::new();
        carried.merge(merged.to_string().replace('=', "~").parse().unwrap());
        carried
    });
    let c = Member::subscribed(c, &["flink"]);
    eventually(
        WAIT,
        "the single instance reads only the second batch",
        || {
            let ok = consumed(&[&c]) == sorted(second.clone());
            async move { ok.then_some(()) }
        },
    )
    .await;
    let cpc = c.checkpoint().await;
    assert_eq!(
        cpc.to_string(),
        "flink-0=10 flink-1=10 flink-2=10 flink-3=10"
    );
    c.close().await;

    // Two instances restart from that snapshot: each applies the positions
    // of the partitions it gets and carries the others'. From here on they
    // commit on revocation (and close) only, so a partition that changes
    // hands later goes on where its last owner stopped.
    let third = values("three-", 20);
    produce_spread(&p, "flink", 4, &third).await;
    let on_revoke = || {
        builder(&b, "gf")
            .enable_auto_commit(true)
            .auto_commit_interval(Duration::from_secs(3600))
    };
    let mut d = on_revoke().build().await.unwrap();
    d.restore(&cpc);
    let mut e = on_revoke().build().await.unwrap();
    e.restore(&cpc);
    let (d, e) = (
        Member::subscribed(d, &["flink"]),
        Member::subscribed(e, &["flink"]),
    );
    eventually(WAIT, "two instances read only the third batch", || {
        let ok = consumed(&[&d, &e]) == sorted(third.clone())
            && covers(&[d.assignment(), e.assignment()], 4)
            && d.assignment().len() == 2;
        async move { ok.then_some(()) }
    })
    .await;
    let (cpd, cpe) = (d.checkpoint().await, e.checkpoint().await);
    for (cp, m) in [(&cpd, &d), (&cpe, &e)] {
        assert_eq!(cp.len(), 4, "{cp}");
        for (tp, off) in cp.iter() {
            let owned = m.assignment().contains(&(tp.topic.clone(), tp.partition));
            assert_eq!(cp.is_carried(tp), !owned, "{cp}");
            assert_eq!(off, if owned { 15 } else { 10 }, "{cp}");
        }
    }
    let mut all = cpd;
    all.merge(cpe);
    assert_eq!(
        all.to_string(),
        "flink-0=15 flink-1=15 flink-2=15 flink-3=15"
    );

    // A third instance joins later (restored from the two snapshots): the
    // eager rebalance revokes everything from the first two, which commit
    // first; partitions that change hands go on from those commits, not
    // from the older snapshot the first two still carry.
    let mut f = on_revoke().build().await.unwrap();
    f.restore(&all);
    let f = Member::subscribed(f, &["flink"]);
    eventually(WAIT, "three instances", || {
        let ok = covers(&[d.assignment(), e.assignment(), f.assignment()], 4)
            && !f.assignment().is_empty()
            && !d.assignment().is_empty()
            && !e.assignment().is_empty();
        async move { ok.then_some(()) }
    })
    .await;
    let fourth = values("four-", 20);
    produce_spread(&p, "flink", 4, &fourth).await;
    let want = sorted(third.iter().chain(&fourth).cloned().collect());
    eventually(WAIT, "the fourth batch, once", || {
        let ok = consumed(&[&d, &e, &f]) == want;
        async move { ok.then_some(()) }
    })
    .await;
    // Stale carried entries lose to the owners' positions in the merge.
    let mut all = Offsets::new();
    for m in [&d, &e, &f] {
        all.merge(m.checkpoint().await);
    }
    assert_eq!(
        all.to_string(),
        "flink-0=20 flink-1=20 flink-2=20 flink-3=20"
    );
    for m in [d, e, f] {
        m.close().await;
    }
    let committed: Vec<i64> = admin
        .list_group_offsets("gf")
        .await
        .unwrap()
        .iter()
        .map(|o| o.offset)
        .collect();
    assert_eq!(committed, [20, 20, 20, 20]);
}

#[tokio::test(flavor = "multi_thread")]
async fn commits_are_where_the_next_member_resumes() {
    let broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "log", 1).await;
    let p = producer(&admin).await;
    produce_spread(&p, "log", 1, &values("v", 20)).await;
    let tp = TopicPartition::new("log", 0);

    let mut c = builder(&b, "gc").build().await.unwrap();
    c.subscribe(&["log"]).unwrap();
    for i in 0..8 {
        let m = tokio::time::timeout(WAIT, c.recv()).await.unwrap().unwrap();
        assert_eq!(
            (m.offset(), m.value()),
            (i, Some(format!("v{i}").as_bytes()))
        );
    }
    c.commit().await.unwrap();
    assert_eq!(
        c.committed(std::slice::from_ref(&tp))
            .await
            .unwrap()
            .get(&tp),
        Some(8)
    );
    // An async commit completes even if its future is dropped.
    c.recv().await.unwrap();
    drop(c.commit_async());
    c.recv().await.unwrap();
    c.commit_async().await.unwrap();
    assert_eq!(c.position(&tp), Some(10));
    c.close().await.unwrap();
    assert!(matches!(c.recv().await, Err(Error::Closed)));
    let offsets = admin.list_group_offsets("gc").await.unwrap();
    assert_eq!(offsets[0].offset, 10);

    // The next member of the group starts at the committed offset.
    let mut c = builder(&b, "gc").build().await.unwrap();
    c.subscribe(&["log"]).unwrap();
    let m = tokio::time::timeout(WAIT, c.recv()).await.unwrap().unwrap();
    assert_eq!(m.offset(), 10);
    c.close().await.unwrap();

    // Auto-commit commits on close (and before revocation).
    let mut c = builder(&b, "gc")
        .enable_auto_commit(true)
        .build()
        .await
        .unwrap();
    c.subscribe(&["log"]).unwrap();
    for i in 10..15 {
        assert_eq!(c.recv().await.unwrap().offset(), i);
    }
    c.close().await.unwrap();
    let offsets = admin.list_group_offsets("gc").await.unwrap();
    assert_eq!(offsets[0].offset, 15);
}

#[tokio::test(flavor = "multi_thread")]
async fn manual_assignment_and_seeks() {
    let broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "man", 2).await;
    let p = producer(&admin).await;
    produce_spread(&p, "man", 2, &values("x", 20)).await;
    let tp1 = TopicPartition::new("man", 1);

    // No group at all.
    let mut c = Consumer::builder()
        .bootstrap(&b)
        .auto_offset_reset(AutoOffsetReset::Earliest)
        .fetch_max_wait(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    assert!(matches!(
        c.subscribe(&["man"]),
        Err(Error::InvalidArgument(_))
    ));
    // Nothing to read yet.
    let e = c.poll(Duration::from_millis(10)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    c.assign(std::slice::from_ref(&tp1)).await.unwrap();
    assert_eq!(c.assignment(), std::slice::from_ref(&tp1));
    let m = c.recv().await.unwrap();
    assert_eq!(
        (m.partition(), m.offset(), m.value()),
        (1, 0, Some(&b"x1"[..]))
    );
    c.seek(&tp1, 7).unwrap();
    let m = c.recv().await.unwrap();
    assert_eq!((m.offset(), m.value()), (7, Some(&b"x15"[..])));
    c.seek_to_beginning(&tp1).unwrap();
    assert_eq!(c.recv().await.unwrap().offset(), 0);
    c.seek_to_end(&tp1).unwrap();
    assert!(c.poll(Duration::from_millis(300)).await.unwrap().is_none());
    assert_eq!(c.position(&tp1), Some(10));
    assert!(c.seek(&TopicPartition::new("man", 0), 0).is_err());
    assert!(matches!(c.commit().await, Err(Error::InvalidArgument(_))));
    // Both partitions now; partition 1 keeps its position.
    c.assign(&[TopicPartition::new("man", 0), tp1.clone()])
        .await
        .unwrap();
    let mut got: Vec<(i32, i64)> = Vec::new();
    while let Some(m) = c.poll(Duration::from_millis(500)).await.unwrap() {
        got.push((m.partition(), m.offset()));
    }
    assert_eq!(got, (0..10).map(|o| (0, o)).collect::<Vec<_>>());

    // The same through the stream interface.
    c.seek(&tp1, 8).unwrap();
    {
        use futures::StreamExt;
        let firsts: Vec<i64> = c
            .stream()
            .take(2)
            .map(|m| m.unwrap().offset())
            .collect()
            .await;
        assert_eq!(firsts, [8, 9]);
    }

    // Every field of a message arrives.
    let tp0 = TopicPartition::new("man", 0);
    p.send(
        client::ProducerRecord::new("man")
            .partition(0)
            .key("k")
            .value("v")
            .header("h1", "x")
            .null_header("h2")
            .timestamp(1_234_567),
    )
    .await
    .unwrap();
    let m = c.recv().await.unwrap();
    assert_eq!(m.topic_partition(), tp0);
    assert_eq!((m.offset(), m.timestamp()), (10, 1_234_567));
    assert_eq!((m.key(), m.value()), (Some(&b"k"[..]), Some(&b"v"[..])));
    let headers: Vec<(&str, Option<&[u8]>)> = m.headers().iter().collect();
    assert_eq!(headers, [("h1", Some(&b"x"[..])), ("h2", None)]);

    // With a group id, manual assignment starts at committed offsets and
    // can commit outside any membership.
    let mut c = builder(&b, "gm").build().await.unwrap();
    c.assign(std::slice::from_ref(&tp1)).await.unwrap();
    c.seek(&tp1, 4).unwrap();
    c.commit().await.unwrap();
    let mut c = builder(&b, "gm").build().await.unwrap();
    c.assign(std::slice::from_ref(&tp1)).await.unwrap();
    assert_eq!(c.recv().await.unwrap().offset(), 4);

    // auto_offset_reset none: no committed offset is an error until a seek.
    let mut c = builder(&b, "gnone")
        .auto_offset_reset(AutoOffsetReset::None)
        .build()
        .await
        .unwrap();
    c.assign(std::slice::from_ref(&tp1)).await.unwrap();
    match c.poll(Duration::from_secs(5)).await {
        Err(Error::NoOffset(tp)) => assert_eq!(tp, tp1),
        other => panic!("{other:?}"),
    }
    c.seek(&tp1, 9).unwrap();
    assert_eq!(c.recv().await.unwrap().offset(), 9);
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_commit_commits_before_partitions_are_revoked() {
    let broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "rev", 2).await;
    let p = producer(&admin).await;
    let old = values("old", 20);
    produce_spread(&p, "rev", 2, &old).await;
    // The interval is far away: only revocation (and close) commit.
    let auto = |b: &str| {
        builder(b, "grev")
            .enable_auto_commit(true)
            .auto_commit_interval(Duration::from_secs(3600))
    };
    let a = Member::subscribed(auto(&b).build().await.unwrap(), &["rev"]);
    eventually(WAIT, "the first member reads everything", || {
        let ok = sorted(a.values()) == sorted(old.clone());
        async move { ok.then_some(()) }
    })
    .await;
    assert!(admin.list_group_offsets("grev").await.unwrap().is_empty());

    // A second member joins: the first revokes (committing 10 and 10),
    // and whoever gets a partition goes on from there.
    let bm = Member::subscribed(auto(&b).build().await.unwrap(), &["rev"]);
    eventually(WAIT, "one partition each", || {
        let ok = covers(&[a.assignment(), bm.assignment()], 2) && a.assignment().len() == 1;
        async move { ok.then_some(()) }
    })
    .await;
    let committed: Vec<i64> = admin
        .list_group_offsets("grev")
        .await
        .unwrap()
        .iter()
        .map(|o| o.offset)
        .collect();
    assert_eq!(committed, [10, 10]);
    assert!(a.events().contains(&"revoke:rev-0,rev-1".to_string()));
    let new = values("new", 4);
    produce_spread(&p, "rev", 2, &new).await;
    eventually(WAIT, "only the new messages after the rebalance", || {
        let ok = sorted(a.values().into_iter().chain(bm.values()).collect())
            == sorted(old.iter().chain(&new).cloned().collect());
        async move { ok.then_some(()) }
    })
    .await;
    assert!(bm.values().iter().all(|v| v.starts_with("new")));
    a.close().await;
    bm.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_member_carries_on_after_a_broker_restart() {
    let mut broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "restart", 2).await;
    let p = producer(&admin).await;
    let before = values("before", 10);
    produce_spread(&p, "restart", 2, &before).await;
    let m = Member::subscribed(
        builder(&b, "grestart")
            .retry_backoff(Duration::from_millis(50))
            .build()
            .await
            .unwrap(),
        &["restart"],
    );
    eventually(WAIT, "the first batch", || {
        let ok = sorted(m.values()) == sorted(before.clone());
        async move { ok.then_some(()) }
    })
    .await;
    m.commit().await.unwrap();

    broker.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    broker.restart();
    let after = values("after", 10);
    produce_spread(&p, "restart", 2, &after).await;
    eventually(WAIT, "the second batch, nothing twice", || {
        let ok = sorted(m.values()) == sorted(before.iter().chain(&after).cloned().collect());
        async move { ok.then_some(()) }
    })
    .await;
    assert_eq!(m.assignment().len(), 2);
    assert!(m.errors().is_empty(), "{:?}", m.errors());
    m.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_auto_commit_a_partition_that_comes_back_goes_on_where_it_was() {
    let broker = broker();
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "keep", 2).await;
    let p = producer(&admin).await;
    let old = values("old", 20);
    produce_spread(&p, "keep", 2, &old).await;
    let x = Member::subscribed(builder(&b, "gkeep").build().await.unwrap(), &["keep"]);
    eventually(WAIT, "x reads everything", || {
        let ok = sorted(x.values()) == sorted(old.clone());
        async move { ok.then_some(()) }
    })
    .await;

    // y joins: the eager rebalance takes both partitions from x and gives
    // one back, which x continues; y starts its one from the beginning
    // (nothing was committed).
    let y = Member::subscribed(builder(&b, "gkeep").build().await.unwrap(), &["keep"]);
    eventually(WAIT, "one partition each", || {
        let ok = covers(&[x.assignment(), y.assignment()], 2) && x.assignment().len() == 1;
        async move { ok.then_some(()) }
    })
    .await;
    let new = values("new", 4);
    produce_spread(&p, "keep", 2, &new).await;
    let x_part = x.assignment().into_iter().next().unwrap().1;
    let y_part = 1 - x_part;
    eventually(WAIT, "both read the new messages", || {
        let xs = x.messages().len();
        let ys = y.messages().len();
        async move { (xs == 22 && ys == 12).then_some(()) }
    })
    .await;
    let xm = x.messages();
    let mut seen = BTreeSet::new();
    assert!(xm.iter().all(|m| seen.insert((m.1, m.2))), "x read twice");
    assert!(y.messages().iter().all(|m| m.1 == y_part));
    assert_eq!(y.messages()[0].2, 0);
    let cp = x.checkpoint().await;
    let tp = |p: i32| TopicPartition::new("keep", p);
    assert_eq!(cp.get(&tp(x_part)), Some(12));
    assert!(!cp.is_carried(&tp(x_part)));
    assert_eq!(cp.get(&tp(y_part)), Some(10));
    assert!(cp.is_carried(&tp(y_part)));
    x.close().await;
    y.close().await;
}
