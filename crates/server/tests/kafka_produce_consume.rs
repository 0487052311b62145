//! librdkafka (via the `rdkafka` crate) producing and consuming through a
//! real `magnetar` process: every codec, keys, headers, idempotence,
//! timestamp lookups, and batches stored exactly as sent.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{assign_config, client_config, BrokerProcess, RawConn};
use futures::StreamExt;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

async fn create_topic(bootstrap: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let res = admin
        .create_topics(
            &[NewTopic::new(name, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .unwrap();
    assert!(res[0].is_ok(), "create {name}: {:?}", res[0]);
}

fn consumer(bootstrap: &str) -> StreamConsumer {
    assign_config(bootstrap).create().unwrap()
}

/// Assigns every partition from the beginning and collects `n` messages as
/// (partition, offset) → (key, value, header).
async fn consume_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    n: usize,
) -> HashMap<(i32, i64), (String, String, String)> {
    let c = consumer(bootstrap);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = HashMap::new();
    let mut stream = c.stream();
    while out.len() < n {
        let m = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("timed out consuming")
            .expect("stream ended")
            .expect("consume error");
        let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
        let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
        let header = m
            .headers()
            .and_then(|h| {
                h.iter()
                    .find(|h| h.key == "idx")
                    .and_then(|h| h.value.map(|v| String::from_utf8(v.to_vec()).unwrap()))
            })
            .unwrap_or_default();
        let prev = out.insert((m.partition(), m.offset()), (key, value, header));
        assert!(
            prev.is_none(),
            "duplicate message at {}:{}",
            m.partition(),
            m.offset()
        );
    }
    out
}

/// Fetches partition `p` raw and returns the compression bits of its first batch.
async fn stored_codec(broker: &BrokerProcess, topic: &str, p: i32) -> u8 {
    let mut conn = RawConn::connect(broker.addr).await;
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let ResponseKind::Fetch(resp) = conn.call(ApiKey::Fetch, 12, req).await else {
        panic!("not a fetch response")
    };
    let data = &resp.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    let records = data.records.as_ref().unwrap();
    assert!(records.len() > 61, "no batch in partition {p}");
    // attributes are the big-endian i16 at byte 21 of a v2 batch.
    records[22] & 0x07
}

#[tokio::test(flavor = "multi_thread")]
async fn every_codec_round_trips_and_is_stored_as_sent() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    for (codec, bits) in [
        ("none", 0u8),
        ("gzip", 1),
        ("snappy", 2),
        ("lz4", 3),
        ("zstd", 4),
    ] {
        let topic = format!("codec-{codec}");
        create_topic(&bootstrap, &topic, 3).await;
        let producer: FutureProducer = client_config(&bootstrap)
            .set("compression.type", codec)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "20")
            .create()
            .unwrap();
        let n = 300;
        let sends: Vec<_> = (0..n)
            .map(|i| {
                let key = format!("key-{i}");
                let value = format!("{codec} value {i} {}", "x".repeat(500 + i % 50));
                let idx = i.to_string();
                let p = producer.clone();
                let topic = topic.clone();
                async move {
                    let headers = OwnedHeaders::new().insert(Header {
                        key: "idx",
                        value: Some(idx.as_str()),
                    });
                    let rec = FutureRecord::to(&topic)
                        .key(&key)
                        .payload(&value)
                        .headers(headers);
                    let d = p
                        .send(rec, Duration::from_secs(10))
                        .await
                        .map_err(|(e, _)| e)
                        .unwrap();
                    ((d.partition, d.offset), (key, value, idx))
                }
            })
            .collect();
        let acked: HashMap<_, _> = futures::future::join_all(sends).await.into_iter().collect();
        assert_eq!(
            acked.len(),
            n,
            "each message acknowledged at its own offset"
        );
        let consumed = consume_all(&bootstrap, &topic, 3, n).await;
        assert_eq!(
            consumed, acked,
            "{codec}: consumed exactly what was acknowledged"
        );
        let mut by_partition: HashMap<i32, usize> = HashMap::new();
        for (p, _) in consumed.keys() {
            *by_partition.entry(*p).or_default() += 1;
        }
        for (p, count) in by_partition {
            assert!(count > 0);
            assert_eq!(
                stored_codec(&broker, &topic, p).await,
                bits,
                "{codec}: batch stored as sent"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn offsets_by_timestamp_and_watermarks() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "times", 1).await;
    let producer: FutureProducer = client_config(&bootstrap)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let base = 1_700_000_000_000i64;
    for i in 0..10i64 {
        producer
            .send(
                FutureRecord::to("times")
                    .key("k")
                    .payload("v")
                    .timestamp(base + i * 1000),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
    let c = consumer(&bootstrap);
    let (low, high) = c
        .fetch_watermarks("times", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!((low, high), (0, 10));
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("times", 0, Offset::Offset(base + 4500))
        .unwrap();
    let offsets = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
    let found = offsets.find_partition("times", 0).unwrap().offset();
    assert_eq!(
        found,
        Offset::Offset(5),
        "first record at or after the timestamp"
    );
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("times", 0, Offset::Offset(base + 60_000))
        .unwrap();
    let after = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
    assert_eq!(
        after.find_partition("times", 0).unwrap().offset(),
        Offset::End,
        "no record that late"
    );
}
