//! The native Reader against the real broker: every start position, one
//! partition or all of them in timestamp order, `has_message_available`,
//! resuming across a broker SIGKILL and restart without duplicates or gaps,
//! and going on after retention removed the position it asked for.

mod common;
mod consumer_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use client::{
    Admin, ClientConfig, Error, MessageId, NewTopic, OffsetSpec, Producer, ProducerRecord, Reader,
    StartPosition,
};
use common::{eventually, BrokerProcess};
use consumer_support::{admin, create, producer};

const WAIT: Duration = Duration::from_secs(30);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sends `(partition, timestamp, value)` in order, each acknowledged before
/// the next.
async fn send(p: &Producer, topic: &str, items: &[(i32, i64, String)]) {
    for (part, ts, v) in items {
        p.send(
            ProducerRecord::new(topic)
                .partition(*part)
                .timestamp(*ts)
                .value(v.clone()),
        )
        .await
        .unwrap();
    }
}

async fn reader(b: &str, topic: &str) -> client::ReaderBuilder {
    Reader::builder(topic)
        .bootstrap(b)
        .fetch_max_wait(Duration::from_millis(100))
}

async fn next(r: &mut Reader) -> client::Message {
    r.read_next_timeout(WAIT)
        .await
        .unwrap()
        .expect("a message in time")
}

/// Reads until nothing more arrives for a while.
async fn drain(r: &mut Reader) -> Vec<client::Message> {
    let mut out = Vec::new();
    while let Some(m) = r
        .read_next_timeout(Duration::from_millis(500))
        .await
        .unwrap()
    {
        out.push(m);
    }
    out
}

fn offsets(v: &[client::Message]) -> Vec<i64> {
    v.iter().map(|m| m.offset()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_start_position() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "pos", 1).await;
    let p = producer(&admin).await;
    let base = now_ms() - 100_000;
    let items: Vec<_> = (0..10)
        .map(|i| (0, base + i * 1000, format!("v{i}")))
        .collect();
    send(&p, "pos", &items).await;

    let open = |start: StartPosition, inclusive: bool| {
        let b = b.clone();
        async move {
            reader(&b, "pos")
                .await
                .start(start)
                .start_inclusive(inclusive)
                .build()
                .await
                .unwrap()
        }
    };
    let mut r = open(StartPosition::Earliest, false).await;
    assert_eq!(offsets(&drain(&mut r).await), (0..10).collect::<Vec<_>>());

    let mut r = open(StartPosition::Offset(0, 4), true).await;
    let m = next(&mut r).await;
    assert_eq!(
        (m.id(), m.value()),
        (
            MessageId {
                partition: 0,
                offset: 4
            },
            Some(&b"v4"[..])
        )
    );
    let mut r = open(StartPosition::Offset(0, 4), false).await;
    assert_eq!(next(&mut r).await.offset(), 5);

    let mut r = open(StartPosition::Timestamp(base + 6000), false).await;
    assert_eq!(next(&mut r).await.offset(), 6);
    let mut r = open(StartPosition::Timestamp(base + 6500), false).await;
    assert_eq!(next(&mut r).await.offset(), 7);
    assert_eq!(
        r.position(0),
        Some(MessageId {
            partition: 0,
            offset: 8
        })
    );

    // Latest: nothing until something new is written; inclusive, the last
    // message too.
    let mut latest = open(StartPosition::Latest, false).await;
    let mut last = open(StartPosition::Latest, true).await;
    let mut future = open(StartPosition::Timestamp(now_ms() + 3_600_000), false).await;
    assert!(latest
        .read_next_timeout(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert_eq!(next(&mut last).await.offset(), 9);
    assert!(future
        .read_next_timeout(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    send(&p, "pos", &[(0, now_ms(), "new".into())]).await;
    assert_eq!(next(&mut latest).await.value(), Some(&b"new"[..]));
    assert_eq!(next(&mut last).await.offset(), 10);
    assert_eq!(next(&mut future).await.offset(), 10);

    // Seeks follow the same rules (and start_inclusive).
    latest.seek(StartPosition::Earliest).unwrap();
    assert_eq!(next(&mut latest).await.offset(), 0);
    latest.seek(StartPosition::Offset(0, 2)).unwrap();
    assert_eq!(next(&mut latest).await.offset(), 3);
    latest.seek(StartPosition::Timestamp(base + 1000)).unwrap();
    assert_eq!(next(&mut latest).await.offset(), 1);
    assert!(latest.seek(StartPosition::Offset(1, 0)).is_err());
    // Past the end: the reader moves to the end and waits there.
    latest.seek(StartPosition::Offset(0, 1000)).unwrap();
    assert!(latest
        .read_next_timeout(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        latest.position(0),
        Some(MessageId {
            partition: 0,
            offset: 11
        })
    );
    send(&p, "pos", &[(0, now_ms(), "after".into())]).await;
    assert_eq!(next(&mut latest).await.offset(), 11);

    // Bad targets.
    let e = reader(&b, "nope").await.build().await.unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    let e = reader(&b, "pos")
        .await
        .partition(Some(3))
        .build()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    let e = reader(&b, "pos")
        .await
        .partition(Some(0))
        .start(StartPosition::Offset(1, 0))
        .build()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn all_partitions_in_timestamp_order_or_one_partition() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "three", 3).await;
    let p = producer(&admin).await;
    let base = now_ms() - 100_000;
    // Message i goes to partition i % 3 with timestamp base + 10 i, but
    // partition 2 is written first: arrival order differs from time order.
    let mut items: Vec<_> = (0..30)
        .map(|i| ((i % 3) as i32, base + 10 * i, format!("m{i}")))
        .collect();
    items.sort_by_key(|x| (x.0 != 2, x.1));
    send(&p, "three", &items).await;

    let mut all = reader(&b, "three").await.build().await.unwrap();
    assert_eq!(all.partitions(), [0, 1, 2]);
    let got = drain(&mut all).await;
    let values: Vec<String> = got
        .iter()
        .map(|m| String::from_utf8(m.value().unwrap().to_vec()).unwrap())
        .collect();
    assert_eq!(values, (0..30).map(|i| format!("m{i}")).collect::<Vec<_>>());

    let mut one = reader(&b, "three")
        .await
        .partition(Some(1))
        .build()
        .await
        .unwrap();
    let got = drain(&mut one).await;
    assert!(got.iter().all(|m| m.partition() == 1));
    assert_eq!(offsets(&got), (0..10).collect::<Vec<_>>());

    // An offset start on an all-partitions reader: that partition from
    // there, the others from the beginning.
    let mut r = reader(&b, "three")
        .await
        .start(StartPosition::Offset(2, 5))
        .build()
        .await
        .unwrap();
    let mut per: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for m in drain(&mut r).await {
        per.entry(m.partition()).or_default().push(m.offset());
    }
    assert_eq!(per[&0], (0..10).collect::<Vec<_>>());
    assert_eq!(per[&1], (0..10).collect::<Vec<_>>());
    assert_eq!(per[&2], (6..10).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn has_message_available_follows_the_log() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    create(&admin, "avail", 2).await;
    let mut r = reader(&b, "avail").await.build().await.unwrap();
    assert!(!r.has_message_available().await.unwrap());
    let p = producer(&admin).await;
    send(
        &p,
        "avail",
        &[
            (0, now_ms(), "a".into()),
            (1, now_ms(), "b".into()),
            (1, now_ms(), "c".into()),
        ],
    )
    .await;
    assert!(r.has_message_available().await.unwrap());
    let mut n = 0;
    while r.has_message_available().await.unwrap() {
        next(&mut r).await;
        n += 1;
    }
    assert_eq!(n, 3);
    assert!(r
        .read_next_timeout(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    // A latest reader has nothing available until something is written.
    let mut l = reader(&b, "avail")
        .await
        .start(StartPosition::Latest)
        .build()
        .await
        .unwrap();
    assert!(!l.has_message_available().await.unwrap());
    send(&p, "avail", &[(0, now_ms(), "d".into())]).await;
    assert!(l.has_message_available().await.unwrap());
    assert_eq!(next(&mut l).await.value(), Some(&b"d"[..]));
}

#[tokio::test(flavor = "multi_thread")]
async fn resumes_after_a_broker_kill_without_duplicates_or_gaps() {
    let mut broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    let cfg = ClientConfig::new([b.clone()])
        .request_timeout(Duration::from_secs(5))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(300));
    let admin = Admin::connect(cfg.clone()).await.unwrap();
    admin
        .create_topic(NewTopic::new("durable", 2))
        .await
        .unwrap();
    let p = producer(&admin).await;
    let first: Vec<_> = (0..100)
        .map(|i| (i % 2, now_ms(), format!("before-{i}")))
        .collect();
    send(&p, "durable", &first).await;

    // A slow reader with a small fetch size is mid-way when the broker dies.
    let client = client::Client::connect(cfg).await.unwrap();
    let mut r = Reader::builder("durable")
        .client(client)
        .fetch_max_wait(Duration::from_millis(100))
        .max_partition_fetch_bytes(256)
        .retry_backoff(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    let reading = tokio::spawn(async move {
        let mut got = Vec::new();
        while got.len() < 200 {
            let m = r.read_next_timeout(Duration::from_secs(60)).await;
            let m = m.expect("read").expect("a message within a minute");
            got.push(m);
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        got
    });
    eventually(WAIT, "the reader under way", || {
        let n = count.load(Ordering::SeqCst);
        async move { (n >= 10).then_some(()) }
    })
    .await;
    broker.kill();
    let at_kill = count.load(Ordering::SeqCst);
    assert!(at_kill < 100, "the reader finished before the kill");
    tokio::time::sleep(Duration::from_millis(500)).await;
    broker.restart();
    let second: Vec<_> = (0..100)
        .map(|i| (i % 2, now_ms(), format!("after-{i}")))
        .collect();
    send(&p, "durable", &second).await;
    let got = tokio::time::timeout(Duration::from_secs(120), reading)
        .await
        .expect("reader finished")
        .unwrap();
    let mut per: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for m in &got {
        per.entry(m.partition()).or_default().push(m.offset());
    }
    assert_eq!(per[&0], (0..100).collect::<Vec<_>>());
    assert_eq!(per[&1], (0..100).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn continues_at_the_first_retained_message_when_retention_removed_its_position() {
    let broker = BrokerProcess::start(&["log.retention.check.interval.ms=100"]);
    let b = broker.bootstrap();
    let admin = admin(&b).await;
    admin
        .create_topic(
            NewTopic::new("ret", 1)
                .config("segment.bytes", "2048")
                .config("retention.bytes", "6144"),
        )
        .await
        .unwrap();
    let p = producer(&admin).await;
    let batch = |from: i64, n: i64| -> Vec<(i32, i64, String)> {
        (from..from + n)
            .map(|i| (0, now_ms(), format!("{i:>100}")))
            .collect()
    };
    send(&p, "ret", &batch(0, 100)).await;
    let earliest = || async {
        let r = admin
            .list_offsets(&[("ret", 0)], OffsetSpec::Earliest)
            .await
            .unwrap();
        r[0].1.as_ref().unwrap().offset
    };
    let start = eventually(WAIT, "retention to remove the first segments", || async {
        let e = earliest().await;
        (e > 0).then_some(e)
    })
    .await;

    // Asking for offset 0 gives the first retained message; its id shows it.
    let mut r = Reader::builder("ret")
        .bootstrap(&b)
        .start(StartPosition::Offset(0, 0))
        .start_inclusive(true)
        .partition(Some(0))
        .max_partition_fetch_bytes(256)
        .fetch_max_wait(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let mut got = vec![next(&mut r).await];
    assert_eq!(
        got[0].id(),
        MessageId {
            partition: 0,
            offset: start
        }
    );
    got.push(next(&mut r).await);
    got.push(next(&mut r).await);

    // Retention passes the reader while it is idle.
    send(&p, "ret", &batch(100, 100)).await;
    let later = eventually(WAIT, "retention to pass the reader", || async {
        let e = earliest().await;
        (e > start + 20).then_some(e)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = later.max(earliest().await);
    got.extend(drain(&mut r).await);
    let o = offsets(&got);
    let gaps: Vec<(i64, i64)> = o
        .windows(2)
        .filter(|w| w[1] != w[0] + 1)
        .map(|w| (w[0], w[1]))
        .collect();
    assert_eq!(gaps.len(), 1, "{o:?}");
    assert_eq!(gaps[0].1, later, "{o:?}");
    assert!(gaps[0].0 >= start + 2);
    assert_eq!(*o.last().unwrap(), 199);
}
