//! Log compaction against the real broker: a `cleanup.policy=compact`
//! topic created with librdkafka, many updates per key, then a librdkafka
//! consumer reading from the beginning sees only the latest value of every
//! key (offsets kept, tombstones gone after `delete.retention.ms`); and a
//! SIGKILL while the cleaner works loses nothing.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{assign_config, client_config, eventually, BrokerProcess};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

/// One record read back: offset, key, value (`None`: a tombstone).
type Read = (i64, String, Option<String>);

async fn create_compacted(broker: &BrokerProcess, topic: &str, extra: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap()).create().unwrap();
    let mut t = NewTopic::new(topic, 1, TopicReplication::Fixed(1))
        .set("cleanup.policy", "compact")
        .set("segment.bytes", "1024")
        .set("min.cleanable.dirty.ratio", "0.01");
    for (k, v) in extra {
        t = t.set(k, v);
    }
    let created = admin
        .create_topics(&[t], &AdminOptions::new())
        .await
        .unwrap();
    assert!(created[0].is_ok(), "{created:?}");
}

fn producer(broker: &BrokerProcess) -> FutureProducer {
    client_config(&broker.bootstrap())
        .set("linger.ms", "0")
        .create()
        .unwrap()
}

/// Produces `key` = `value` (a tombstone for `None`), waiting for the ack.
async fn send(p: &FutureProducer, topic: &str, key: &str, value: Option<&str>) -> i64 {
    let mut r = FutureRecord::<str, str>::to(topic).key(key);
    if let Some(v) = value {
        r = r.payload(v);
    }
    p.send(r, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .unwrap()
        .offset
}

/// Every record of partition 0 from `from` to the high watermark, as a
/// librdkafka consumer reads them.
fn read_all(bootstrap: &str, topic: &str, from: Offset) -> (Vec<Read>, i64) {
    let c: BaseConsumer = assign_config(bootstrap).create().unwrap();
    let (_, high) = c
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, from).unwrap();
    c.assign(&tpl).unwrap();
    let mut out: Vec<Read> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    // The last offset is in the active segment, which is never cleaned.
    while high > 0 && out.last().is_none_or(|r| r.0 < high - 1) {
        assert!(
            Instant::now() < deadline,
            "did not read up to {high}: {out:?}"
        );
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            if let Some(last) = out.last() {
                assert!(
                    m.offset() > last.0,
                    "offsets increase: {} after {}",
                    m.offset(),
                    last.0
                );
            }
            out.push((
                m.offset(),
                String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
                m.payload().map(|v| String::from_utf8(v.to_vec()).unwrap()),
            ));
        }
    }
    (out, high)
}

/// The latest value per key after applying every record in order.
fn table(records: &[Read]) -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    for (_, k, v) in records {
        match v {
            Some(v) => t.insert(k.clone(), v.clone()),
            None => t.remove(k),
        };
    }
    t
}

/// Files of the partition directory ending with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(suffix))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_of_a_compacted_topic_sees_only_the_latest_value_per_key() {
    let broker = BrokerProcess::start(&["log.cleaner.backoff.ms=50"]);
    let topic = "compacted-latest";
    create_compacted(
        &broker,
        topic,
        &[("segment.ms", "100"), ("delete.retention.ms", "1000")],
    )
    .await;
    let p = producer(&broker);
    let mut expected = BTreeMap::new();
    let mut produced = 0;
    for round in 0..25 {
        for k in 0..20 {
            let (key, value) = (format!("key-{k}"), format!("round-{round}-of-key-{k}"));
            send(&p, topic, &key, Some(&value)).await;
            expected.insert(key, value);
            produced += 1;
        }
    }
    for k in 0..5 {
        let key = format!("key-{k}");
        send(&p, topic, &key, None).await;
        expected.remove(&key);
        produced += 1;
    }
    // Until the cleaner is done (segment.ms rolls the segment at each
    // filler, so the updates all end up in closed segments), keep appending
    // fillers and read from the beginning: every key but the filler must
    // appear once, with its latest value, and the tombstones must be gone.
    let bootstrap = broker.bootstrap();
    let mut fillers = 0;
    let read = eventually(Duration::from_secs(90), "a fully compacted topic", || {
        let p = p.clone();
        let bootstrap = bootstrap.clone();
        fillers += 1;
        let n = fillers;
        async move {
            send(&p, topic, "filler", Some(&format!("filler-{n}"))).await;
            let (read, high) = read_all(&bootstrap, topic, Offset::Beginning);
            let keyed: Vec<&Read> = read.iter().filter(|r| r.1 != "filler").collect();
            let latest: BTreeMap<String, String> = keyed
                .iter()
                .filter_map(|r| Some((r.1.clone(), r.2.clone()?)))
                .collect();
            (keyed.len() == latest.len() && high == produced + n).then_some((read, latest, high))
        }
    })
    .await;
    let (records, latest, high) = read;
    assert_eq!(
        latest, expected,
        "the latest value of every key, nothing deleted"
    );
    assert_eq!(
        high,
        produced + fillers,
        "offsets are kept: the high watermark is unchanged"
    );
    assert!(records[0].0 > 0, "offset 0 (an old value) was removed");
    // Fetching from offsets that were removed continues at the next record.
    let present: Vec<i64> = records.iter().map(|r| r.0).collect();
    let removed: Vec<i64> = (0..high).filter(|o| !present.contains(o)).collect();
    for o in removed.iter().step_by(removed.len().div_ceil(5).max(1)) {
        let (from, _) = read_all(&bootstrap, topic, Offset::Offset(*o));
        let next = present.iter().find(|p| **p > *o).copied();
        assert_eq!(
            from.first().map(|r| r.0),
            next,
            "fetching from removed offset {o}"
        );
    }
    broker.wait_for_log("cleaned log");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkill_while_the_cleaner_works_loses_nothing() {
    // A slow cleaner, so that it is caught in the middle of its work.
    let mut broker = BrokerProcess::start(&[
        "log.cleaner.backoff.ms=50",
        "log.cleaner.io.max.bytes.per.second=15000",
    ]);
    let topic = "compacted-killed";
    create_compacted(&broker, topic, &[]).await;
    let dir = broker.dir().join(format!("{topic}-0"));
    let mut expected = BTreeMap::new();
    let mut produced = 0i64;
    {
        let p = producer(&broker);
        for round in 0..20 {
            for k in 0..30 {
                let (key, value) = (format!("key-{k}"), format!("round-{round}-of-key-{k}"));
                send(&p, topic, &key, Some(&value)).await;
                expected.insert(key, value);
                produced += 1;
            }
        }
    }
    for kill in 0..3 {
        // New updates give the cleaner work; kill it once it writes a
        // cleaned segment.
        let p = producer(&broker);
        let mut n = 0;
        eventually(
            Duration::from_secs(60),
            "the cleaner writing a segment",
            || {
                n += 1;
                let (key, value) = (format!("key-{}", n % 30), format!("kill-{kill}-update-{n}"));
                let cleaning = !files_ending(&dir, ".cleaned").is_empty();
                let p = p.clone();
                if !cleaning {
                    expected.insert(key.clone(), value.clone());
                    produced += 1;
                }
                async move {
                    if cleaning {
                        return Some(());
                    }
                    send(&p, topic, &key, Some(&value)).await;
                    None
                }
            },
        )
        .await;
        broker.kill();
        drop(p);
        broker.restart();
        let (read, high) = read_all(&broker.bootstrap(), topic, Offset::Beginning);
        assert_eq!(
            high, produced,
            "kill {kill}: every acknowledged offset is there"
        );
        assert_eq!(
            table(&read),
            expected,
            "kill {kill}: the latest value of every key"
        );
    }
    // The kills did land in the middle of cleanings: opening the partition
    // found their files.
    broker.wait_for_log_line(
        "a swap completed or undone at open",
        Duration::from_secs(10),
        |l| l.contains("uncommitted log cleaner swap") || l.contains("interrupted segment swap"),
    );
}
