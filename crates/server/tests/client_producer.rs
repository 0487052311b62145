//! The native client's producer against the real broker: every codec read
//! back by librdkafka and the reverse, key placement identical to
//! librdkafka's murmur2_random, explicit partitions and timestamps, acks,
//! and idempotent retries that leave no duplicates.

mod client_support;
mod common;

use std::collections::HashMap;
use std::time::Duration;

use client::{Acks, Admin, ClientConfig, Compression, NewTopic, Producer, ProducerRecord};
use client_support::{fetch_all, rdkafka_read, Proxy};
use common::{client_config, BrokerProcess};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

const CODECS: [(Compression, &str); 5] = [
    (Compression::None, "none"),
    (Compression::Gzip, "gzip"),
    (Compression::Snappy, "snappy"),
    (Compression::Lz4, "lz4"),
    (Compression::Zstd, "zstd"),
];

async fn admin(b: &BrokerProcess) -> Admin {
    Admin::connect(ClientConfig::new([b.bootstrap()]))
        .await
        .unwrap()
}

async fn create(admin: &Admin, name: &str, partitions: i32) {
    admin
        .create_topic(NewTopic::new(name, partitions))
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
}

#[tokio::test]
async fn every_codec_is_read_back_by_librdkafka() {
    let broker = BrokerProcess::start(&[]);
    let admin = admin(&broker).await;
    for (codec, name) in CODECS {
        let topic = format!("native-{name}");
        create(&admin, &topic, 2).await;
        let producer = Producer::builder()
            .client(admin.client().clone())
            .compression(codec)
            .linger(Duration::from_millis(20))
            .build()
            .await
            .unwrap();
        let futs: Vec<_> = (0..200)
            .map(|i| {
                producer.send(
                    ProducerRecord::new(topic.as_str())
                        .key(format!("key-{i}"))
                        .value(format!("{name}-value-{i}"))
                        .header("idx", i.to_string()),
                )
            })
            .collect();
        let mut placed = HashMap::new();
        for (i, f) in futs.into_iter().enumerate() {
            let md = f.await.unwrap_or_else(|e| panic!("{name} #{i}: {e}"));
            assert!(md.offset >= 0);
            placed.insert((md.partition, md.offset), i);
        }
        producer.flush().await.unwrap();
        let read = rdkafka_read(&broker.bootstrap(), &topic, 2, 200).await;
        assert_eq!(read.len(), 200);
        for m in read {
            let i = placed[&(m.partition, m.offset)];
            assert_eq!(
                m.key.as_deref(),
                Some(format!("key-{i}").as_bytes()),
                "{name}"
            );
            assert_eq!(
                m.value.as_deref(),
                Some(format!("{name}-value-{i}").as_bytes())
            );
            assert_eq!(
                m.headers,
                vec![("idx".to_string(), Some(i.to_string().into_bytes()))]
            );
        }
    }
}

#[tokio::test]
async fn librdkafka_records_are_read_back_by_the_client() {
    let broker = BrokerProcess::start(&[]);
    let admin = admin(&broker).await;
    for (_, name) in CODECS {
        let topic = format!("rdkafka-{name}");
        create(&admin, &topic, 1).await;
        let p: FutureProducer = client_config(&broker.bootstrap())
            .set("compression.type", name)
            .set("linger.ms", "10")
            .create()
            .unwrap();
        let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        let values: Vec<String> = (0..100).map(|i| format!("{name}-{i}")).collect();
        let futs: Vec<_> = keys
            .iter()
            .zip(&values)
            .map(|(key, value)| {
                let headers = OwnedHeaders::new().insert(Header {
                    key: "h",
                    value: Some("x"),
                });
                p.send(
                    FutureRecord::to(&topic)
                        .key(key)
                        .payload(value)
                        .headers(headers),
                    Duration::from_secs(10),
                )
            })
            .collect();
        for r in futures::future::join_all(futs).await {
            r.expect("delivered");
        }
        let records = fetch_all(admin.client(), &topic, 0).await;
        assert_eq!(records.len(), 100, "{name}");
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            assert_eq!(r.value.as_deref(), Some(format!("{name}-{i}").as_bytes()));
            assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
            assert_eq!(r.headers.len(), 1);
        }
    }
}

#[tokio::test]
async fn keys_land_on_the_partitions_librdkafka_picks() {
    let broker = BrokerProcess::start(&[]);
    let admin = admin(&broker).await;
    create(&admin, "keys-rd", 7).await;
    create(&admin, "keys-native", 7).await;
    let rd: FutureProducer = client_config(&broker.bootstrap())
        .set("partitioner", "murmur2_random")
        .create()
        .unwrap();
    let keys: Vec<String> = (0..300).map(|i| format!("user-{i}-{}", i * 7919)).collect();
    let mut expected = HashMap::new();
    for k in &keys {
        let d = rd
            .send(
                FutureRecord::to("keys-rd").key(k).payload("x"),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        expected.insert(k.clone(), d.partition);
    }
    let producer = Producer::builder()
        .client(admin.client().clone())
        .build()
        .await
        .unwrap();
    let futs: Vec<_> = keys
        .iter()
        .map(|k| producer.send(ProducerRecord::new("keys-native").key(k.clone()).value("x")))
        .collect();
    let mut spread = std::collections::HashSet::new();
    for (k, f) in keys.iter().zip(futs) {
        let md = f.await.unwrap();
        assert_eq!(md.partition, expected[k], "key {k}");
        assert_eq!(md.partition, client::partition_for_key(k.as_bytes(), 7));
        spread.insert(md.partition);
    }
    assert_eq!(spread.len(), 7);
}

#[tokio::test]
async fn explicit_partition_timestamp_and_acks() {
    let broker = BrokerProcess::start(&[]);
    let admin = admin(&broker).await;
    create(&admin, "explicit", 3).await;
    for acks in [Acks::None, Acks::Leader, Acks::All] {
        let producer = Producer::builder()
            .client(admin.client().clone())
            .acks(acks)
            .build()
            .await
            .unwrap();
        let md = producer
            .send(
                ProducerRecord::new("explicit")
                    .partition(2)
                    .timestamp(1_600_000_000_123)
                    .value(format!("{acks:?}")),
            )
            .await
            .unwrap();
        assert_eq!(md.partition, 2);
        assert_eq!(md.timestamp, 1_600_000_000_123);
        if acks == Acks::None {
            assert_eq!(md.offset, -1);
        } else {
            assert!(md.offset >= 0);
        }
        producer.flush().await.unwrap();
    }
    let err = Producer::builder()
        .client(admin.client().clone())
        .build()
        .await
        .unwrap()
        .send(ProducerRecord::new("explicit").partition(3).value("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, client::Error::InvalidArgument(_)), "{err}");
    let read = rdkafka_read(&broker.bootstrap(), "explicit", 3, 3).await;
    assert!(read
        .iter()
        .all(|m| m.partition == 2 && m.timestamp == Some(1_600_000_000_123)));
    let mut values: Vec<_> = read.into_iter().map(|m| m.value.unwrap()).collect();
    values.sort();
    assert_eq!(
        values,
        vec![b"All".to_vec(), b"Leader".to_vec(), b"None".to_vec()]
    );
}

#[tokio::test]
async fn keyless_records_fill_batches_on_few_partitions() {
    let broker = BrokerProcess::start(&[]);
    let admin = admin(&broker).await;
    create(&admin, "sticky", 8).await;
    let producer = Producer::builder()
        .client(admin.client().clone())
        .linger(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    // Forty small records sent at once fit one batch: the sticky
    // partitioner keeps them together instead of spraying 8 partitions.
    let futs: Vec<_> = (0..40)
        .map(|i| producer.send(ProducerRecord::new("sticky").value(format!("{i}"))))
        .collect();
    let mut parts = std::collections::HashSet::new();
    for f in futs {
        parts.insert(f.await.unwrap().partition);
    }
    assert_eq!(parts.len(), 1, "{parts:?}");
}

#[tokio::test]
async fn idempotent_retries_after_a_lost_response_leave_no_duplicates() {
    let mut proxy = Proxy::bind().await;
    let broker = BrokerProcess::start(&[&format!("advertised.listeners={}", proxy.addr)]);
    proxy.start(broker.addr);
    let admin = Admin::connect(ClientConfig::new([proxy.addr.to_string()]))
        .await
        .unwrap();
    create(&admin, "idem", 1).await;
    let producer = Producer::builder()
        .client(admin.client().clone())
        .linger(Duration::from_millis(0))
        .retry_backoff(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    producer
        .send(ProducerRecord::new("idem").value("v0"))
        .await
        .unwrap();
    // The broker writes the next batches, but the answers never arrive.
    proxy.cut_next_produce_responses(2);
    let futs: Vec<_> = (1..50)
        .map(|i| producer.send(ProducerRecord::new("idem").value(format!("v{i}"))))
        .collect();
    let mut offsets = Vec::new();
    for f in futs {
        offsets.push(f.await.unwrap().offset);
    }
    assert_eq!(proxy.cuts_done(), 2, "the proxy cut two responses");
    let records = fetch_all(admin.client(), "idem", 0).await;
    let values: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
        .collect();
    let want: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    assert_eq!(values, want, "each record once, in order");
    for (i, off) in offsets.into_iter().enumerate() {
        // A duplicate the broker recognised may come back without offset.
        assert!(
            off == -1 || off == i as i64 + 1,
            "record {} at {off}",
            i + 1
        );
    }
}
