//! The official Pulsar client for Python (the C++ client underneath,
//! installed by `scripts/test`) against the real broker: every
//! subscription type on partitioned and non-partitioned topics, acks and
//! redelivery, Readers from every kind of position with seeks and
//! `has_message_available`, pattern subscriptions discovering new topics,
//! PIP-344 `get_topic_partitions` cases 1-4 and 6, a Reader and a durable
//! subscription resuming across SIGKILL, a named producer's sequence ids
//! and a topic's schema surviving SIGKILL and SIGTERM, and Kafka <-> Pulsar
//! interop with rdkafka on the other side, both directions.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assign_config, client_config, BrokerProcess};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/pulsar_client_suite.py")
}

/// Runs one check of the script; returns its stdout.
fn run_check(check: &str, broker: &BrokerProcess, extra: &[&str]) -> String {
    run_check_at(check, &broker.pulsar_url(), broker, extra)
}

/// Runs one check with `service_url` as the client's service URL.
fn run_check_at(check: &str, service_url: &str, broker: &BrokerProcess, extra: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(script())
        .arg(check)
        .arg(service_url)
        .arg(broker.bootstrap())
        .args(extra)
        .output()
        .expect("python3 is needed for the Pulsar client tests");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("OK"),
        "pulsar check {check} failed ({}).\nIf `pulsar` is missing: pip install -r tests/python/requirements.txt\nstdout:\n{stdout}\nstderr:\n{stderr}\nbroker log:\n{}",
        out.status,
        broker.log_text()
    );
    stdout
}

async fn create_topic(bootstrap: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(name, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_subscription_type_on_partitioned_and_plain_topics() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    create_topic(&broker.bootstrap(), "subs-p", 3).await;
    run_check("subscriptions", &broker, &[]);
}

/// Key_Shared with consumers joining and leaving (one closing with messages
/// it never acked) while keyed messages are produced, unbatched and in
/// key-based batches: every message is acked exactly once, each key's
/// messages reach their consumer in publish order, and no two consumers
/// hold a key's messages at once (see `key_shared_churn` in the script).
#[tokio::test(flavor = "multi_thread")]
async fn key_shared_keeps_key_order_across_consumer_churn() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    create_topic(&broker.bootstrap(), "ks-churn-p", 2).await;
    let out = run_check("key-shared-churn", &broker, &[]);
    eprintln!("{out}");
}

#[test]
fn acks_negative_acks_and_cumulative_acks() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    run_check("acks", &broker, &[]);
}

#[tokio::test(flavor = "multi_thread")]
async fn readers_from_any_position_with_seeks() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    create_topic(&broker.bootstrap(), "readers-p", 3).await;
    run_check("readers", &broker, &[]);
}

#[test]
fn pattern_subscription_discovers_new_topics_and_lets_go_of_deleted_ones() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    run_check("pattern", &broker, &[]);
}

#[test]
fn get_topic_partitions_follows_pip_344() {
    let np = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    run_check("pip344", &np, &["non-partitioned"]);
    let p = BrokerProcess::start(&["auto.create.topics.type=partitioned", "num.partitions=2"]);
    run_check("pip344", &p, &["partitioned"]);
    let off = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    run_check("pip344", &off, &["disabled"]);
    // Nothing was created by the refused lookups.
    assert!(!off.log_text().contains("auto-created topic"));
}

#[test]
fn reader_and_subscription_resume_after_sigkill() {
    let mut broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let mut child = Command::new("python3")
        .arg(script())
        .arg("resume")
        .arg(broker.pulsar_url())
        .arg(broker.bootstrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("script ended early: {seen:?}"))
            .unwrap();
        seen.push(line.clone());
        if line == "READY" {
            break;
        }
    }
    broker.kill();
    broker.restart();
    child.stdin.as_mut().unwrap().write_all(b"GO\n").unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert!(
        status.success() && rest.iter().any(|l| l == "OK"),
        "resume check failed: {seen:?} {rest:?}\nbroker log:\n{}",
        broker.log_text()
    );
}

/// Messages in partition 0 of `topic`, by its Kafka high watermark.
fn stored_count(broker: &BrokerProcess, topic: &str) -> i64 {
    let c: BaseConsumer = client_config(&broker.bootstrap()).create().unwrap();
    let (low, high) = c
        .fetch_watermarks(topic, 0, Duration::from_secs(20))
        .unwrap();
    high - low
}

/// A named producer's sequence ids and a topic's schema survive a SIGKILL
/// (recovered by replaying the log: no snapshot is due yet) and a clean
/// stop (from the snapshot written at shutdown): after each, the producer
/// is told its last acknowledged sequence id, resends are not stored, and
/// the schema keeps its version.
#[test]
fn producer_sequences_and_schemas_survive_sigkill_and_sigterm() {
    let mut broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    for (topic, sigkill) in [("durable-kill", true), ("durable-term", false)] {
        run_check("durable-before", &broker, &[topic]);
        assert_eq!(stored_count(&broker, topic), 5);
        if sigkill {
            broker.kill();
        } else {
            assert_eq!(broker.terminate(), Some(0), "clean exit");
        }
        broker.restart();
        run_check("durable-after", &broker, &[topic]);
        assert_eq!(stored_count(&broker, topic), 6, "{topic}: resends stored");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_to_pulsar_keeps_keys_headers_timestamps_and_bytes() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create_topic(&b, "k2p", 2).await;
    let mut sent = HashMap::new();
    for codec in ["zstd", "lz4"] {
        let producer: FutureProducer = client_config(&b)
            .set("compression.type", codec)
            .set("linger.ms", "20")
            .create()
            .unwrap();
        let sends = (0..20).map(|i| {
            let producer = producer.clone();
            let value: Vec<u8> = format!("{codec}-{i}-")
                .into_bytes()
                .into_iter()
                .chain(0..=255u8)
                .collect();
            let key = format!("key-{codec}-{i}");
            let ts = 1_700_000_000_000i64 + i;
            sent.insert(key.clone(), (value.clone(), ts));
            async move {
                producer
                    .send(
                        FutureRecord::to("k2p")
                            .key(&key)
                            .payload(&value)
                            .timestamp(ts)
                            .headers(OwnedHeaders::new().insert(Header {
                                key: "h",
                                value: Some(key.as_bytes()),
                            })),
                        Duration::from_secs(10),
                    )
                    .await
                    .unwrap()
            }
        });
        let delivered = futures::future::join_all(sends).await;
        assert_eq!(delivered.len(), 20);
    }
    let out = run_check(
        "interop-read",
        &broker,
        &["persistent://public/default/k2p", "40"],
    );
    let mut got = 0;
    for line in out.lines().filter(|l| l.starts_with('{')) {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = m["key"].as_str().unwrap();
        let (value, ts) = &sent[key];
        assert_eq!(m["value"].as_str().unwrap(), hex(value), "{key}");
        assert_eq!(m["properties"]["h"].as_str().unwrap(), key);
        // Each message's Kafka timestamp is its event time; the entry's
        // publish time is its first record's.
        assert_eq!(m["event_time"].as_i64().unwrap(), *ts, "{key}");
        assert!(m["publish_time"].as_i64().unwrap() <= *ts, "{key}");
        got += 1;
    }
    assert_eq!(got, 40);
}

#[test]
fn pulsar_to_kafka_keeps_keys_properties_event_times_and_bytes() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    for codec in ["ZSTD", "LZ4", "ZLib", "SNAPPY"] {
        let topic = format!("p2k-{}", codec.to_lowercase());
        run_check("interop-write", &broker, &[&topic, "25", codec]);
        let consumer: BaseConsumer = assign_config(&broker.bootstrap()).create().unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut next = 0;
        while next < 25 {
            assert!(
                std::time::Instant::now() < deadline,
                "{topic}: read {next} of 25"
            );
            let Some(m) = common::polled(consumer.poll(Duration::from_millis(200))) else {
                continue;
            };
            assert_eq!(m.offset(), next as i64, "{topic}: order kept");
            let expected: Vec<u8> = format!("value-{next}-")
                .into_bytes()
                .into_iter()
                .chain(0..=255u8)
                .collect();
            assert_eq!(m.payload().unwrap(), &expected[..], "{topic} #{next}");
            assert_eq!(m.key().unwrap(), format!("key-{next}").as_bytes());
            let headers: HashMap<String, Vec<u8>> = m
                .headers()
                .unwrap()
                .iter()
                .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                .collect();
            assert_eq!(headers["n"], next.to_string().into_bytes());
            assert_eq!(headers["origin"], b"pulsar");
            assert_eq!(
                headers["pulsar.event_time"],
                (1_700_000_000_000u64 + next).to_string().into_bytes()
            );
            next += 1;
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn the_official_client_works_over_the_http_service_url() {
    let broker = BrokerProcess::start(&[]);
    // The script checks the URL is http://: lookups, partition metadata
    // and namespace listings go over HTTP.
    run_check_at("over-http", &broker.http_url(), &broker, &[]);
}
