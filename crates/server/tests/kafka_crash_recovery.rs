//! Crash safety with the real process: SIGKILL in the middle of an acks=all
//! stream loses no acknowledged message; a torn/garbage segment tail is
//! truncated on restart and the partition keeps working; SIGKILLs during the
//! recovery that follows lose nothing either.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{assign_config, client_config, eventually, BrokerProcess};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

async fn create_topic(bootstrap: &str, name: &str, partitions: i32, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let mut t = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    assert!(admin
        .create_topics(&[t], &AdminOptions::new())
        .await
        .unwrap()[0]
        .is_ok());
}

/// Reads every partition from the beginning up to its high watermark.
async fn read_everything(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> HashMap<(i32, i64), String> {
    let meta: BaseConsumer = client_config(bootstrap).create().unwrap();
    let mut highs = HashMap::new();
    for p in 0..partitions {
        let (_, high) = meta
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .unwrap();
        highs.insert(p, high);
    }
    let total: i64 = highs.values().sum();
    let c: StreamConsumer = assign_config(bootstrap).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = HashMap::new();
    let mut stream = c.stream();
    while (out.len() as i64) < total {
        let m = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("timed out reading back")
            .unwrap()
            .unwrap();
        out.insert(
            (m.partition(), m.offset()),
            String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_stream_loses_no_acknowledged_message() {
    // Small segments so the stream spans several rolls before the crash.
    let mut broker = BrokerProcess::start(&["log.segment.bytes=65536"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "durable", 2, &[]).await;
    let producer: FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "2")
        .set("message.timeout.ms", "4000")
        .create()
        .unwrap();
    let acked: Arc<Mutex<Vec<(i32, i64, String)>>> = Arc::default();
    let producing = {
        let acked = acked.clone();
        let producer = producer.clone();
        tokio::spawn(async move {
            let mut in_flight = FuturesUnordered::new();
            for i in 0..200_000u64 {
                let value = format!("message-{i}-{}", "p".repeat((i % 64) as usize));
                let p = producer.clone();
                in_flight.push(async move {
                    let r = p
                        .send(
                            FutureRecord::to("durable")
                                .key(&i.to_string())
                                .payload(&value),
                            Duration::from_secs(1),
                        )
                        .await;
                    (r, value)
                });
                if in_flight.len() >= 200 {
                    if let Some((r, value)) = in_flight.next().await {
                        match r {
                            Ok(d) => acked.lock().unwrap().push((d.partition, d.offset, value)),
                            // The broker is gone: stop after draining.
                            Err(_) => break,
                        }
                    }
                }
            }
            while let Some((r, value)) = in_flight.next().await {
                if let Ok(d) = r {
                    acked.lock().unwrap().push((d.partition, d.offset, value));
                }
            }
        })
    };
    eventually(
        Duration::from_secs(60),
        "5000 acknowledged messages",
        || {
            let n = acked.lock().unwrap().len();
            async move { (n >= 5000).then_some(()) }
        },
    )
    .await;
    broker.kill();
    producing.await.unwrap();
    drop(producer);
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 5000);

    broker.restart();
    let stored = read_everything(&broker.bootstrap(), "durable", 2).await;
    for (p, o, value) in &acked {
        assert_eq!(
            stored.get(&(*p, *o)),
            Some(value),
            "acknowledged message at {p}:{o} must survive SIGKILL"
        );
    }
    let segments = std::fs::read_dir(broker.dir().join("durable-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert!(segments > 1, "the stream rolled segments before the crash");
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_tail_is_truncated_and_the_partition_keeps_working() {
    let mut broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "torn", 1, &[]).await;
    let producer: FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .create()
        .unwrap();
    for i in 0..50 {
        producer
            .send(
                FutureRecord::to("torn")
                    .key("k")
                    .payload(&format!("before-{i}")),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
    drop(producer);
    broker.kill();

    // A torn write: half a batch header followed by junk.
    let segment = std::fs::read_dir(broker.dir().join("torn-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let clean_len = std::fs::metadata(&segment).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    f.write_all(&[
        0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 1, 0, 0xde, 0xad, 0xbe, 0xef, 7, 7, 7,
    ])
    .unwrap();
    drop(f);

    broker.restart();
    let stored = read_everything(&broker.bootstrap(), "torn", 1).await;
    assert_eq!(stored.len(), 50, "all complete batches kept, junk dropped");
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        clean_len,
        "tail truncated to the last valid batch"
    );
    let producer: FutureProducer = client_config(&broker.bootstrap())
        .set("acks", "all")
        .create()
        .unwrap();
    let offset = producer
        .send(
            FutureRecord::to("torn").key("k").payload("after"),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap()
        .offset;
    assert_eq!(
        offset, 50,
        "appends continue right after the recovered data"
    );
    // Recovery is logged.
    broker.wait_for_log_line("a truncation", Duration::from_secs(10), |l| {
        l.to_lowercase().contains("truncat")
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_during_recovery_loses_nothing() {
    // Per-log "opened log" lines show how far recovery has got.
    let mut broker = BrokerProcess::start_with_env(
        &[("MAGNETAR_LOG", "info,magnetar_storage::log::open=debug")],
        &["log.segment.bytes=262144"],
    );
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "recovering", 16, &[]).await;
    let producer: FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let mut acked = Vec::new();
    let mut in_flight = FuturesUnordered::new();
    for i in 0..40_000u64 {
        let value = format!("recover-{i}-{}", "r".repeat((i % 80) as usize));
        let p = producer.clone();
        in_flight.push(async move {
            let d = p
                .send(
                    FutureRecord::to("recovering")
                        .key(&i.to_string())
                        .payload(&value),
                    Duration::from_secs(10),
                )
                .await
                .map_err(|(e, _)| e)
                .unwrap();
            (d.partition, d.offset, value)
        });
        if in_flight.len() >= 500 {
            acked.push(in_flight.next().await.unwrap());
        }
    }
    while let Some(a) = in_flight.next().await {
        acked.push(a);
    }
    drop(producer);
    // Nothing was flushed: every partition is recovered at the next start.
    broker.kill();
    // Where each kill lands varies; typically the first after one of the
    // 17 logs is open and the last after most of them.
    for nth in [1, 4, 12] {
        broker.restart_and_kill_at("opened log", nth);
    }
    broker.restart();
    broker.wait_for_log("partitions opened");
    let stored = read_everything(&broker.bootstrap(), "recovering", 16).await;
    for (p, o, value) in &acked {
        assert_eq!(
            stored.get(&(*p, *o)),
            Some(value),
            "acknowledged message at {p}:{o} must survive SIGKILLs during recovery"
        );
    }
    assert_eq!(stored.len(), acked.len(), "nothing extra appeared");
}
