//! The Rust `pulsar` crate (an independent Pulsar client implementation,
//! protocol v12, no feature flags, checksums required on MESSAGE frames)
//! against the real broker: a named producer with keys and properties, an
//! exclusive subscription from the earliest message with acks, and a
//! second subscription that sees only what was not acknowledged.

mod common;

use std::collections::HashMap;

use common::BrokerProcess;
use futures::TryStreamExt;
use pulsar::consumer::{ConsumerOptions, InitialPosition};
use pulsar::{producer, Consumer, Pulsar, SubType, TokioExecutor};

const TOPIC: &str = "persistent://public/default/rust-crate";

async fn consume(
    client: &Pulsar<TokioExecutor>,
    sub: &str,
    n: usize,
    ack: usize,
) -> Vec<(Vec<u8>, Option<String>, HashMap<String, String>)> {
    let mut consumer: Consumer<Vec<u8>, TokioExecutor> = client
        .consumer()
        .with_topic(TOPIC)
        .with_subscription(sub)
        .with_subscription_type(SubType::Exclusive)
        .with_options(ConsumerOptions::default().with_initial_position(InitialPosition::Earliest))
        .build()
        .await
        .unwrap();
    let mut got = Vec::new();
    for i in 0..n {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(20), consumer.try_next())
            .await
            .expect("a message in time")
            .unwrap()
            .expect("the stream goes on");
        let meta = msg.metadata();
        let props = meta
            .properties
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect();
        got.push((msg.payload.data.clone(), meta.partition_key.clone(), props));
        if i < ack {
            consumer.ack(&msg).await.unwrap();
        }
    }
    consumer.close().await.unwrap();
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rust_pulsar_crate_produces_and_consumes() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    let client: Pulsar<TokioExecutor> = Pulsar::builder(broker.pulsar_url(), TokioExecutor)
        .build()
        .await
        .unwrap();
    let mut producer = client
        .producer()
        .with_topic(TOPIC)
        .with_name("rust-producer")
        .build()
        .await
        .unwrap();
    for i in 0..30 {
        let receipt = producer
            .send_non_blocking(producer::Message {
                payload: format!("rs-{i}").into_bytes(),
                partition_key: Some(format!("key-{i}")),
                properties: HashMap::from([("i".to_string(), i.to_string())]),
                ..Default::default()
            })
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(receipt.sequence_id, i as u64);
    }
    let first = consume(&client, "rs-sub", 30, 20).await;
    for (i, (payload, key, props)) in first.iter().enumerate() {
        assert_eq!(payload, &format!("rs-{i}").into_bytes());
        assert_eq!(key.as_deref(), Some(format!("key-{i}").as_str()));
        assert_eq!(props["i"], i.to_string());
    }
    // The first 20 were acknowledged: a new consumer on the same
    // subscription gets the last 10 only.
    let rest = consume(&client, "rs-sub", 10, 10).await;
    let values: Vec<Vec<u8>> = rest.into_iter().map(|(p, _, _)| p).collect();
    assert_eq!(
        values,
        (20..30)
            .map(|i| format!("rs-{i}").into_bytes())
            .collect::<Vec<_>>()
    );
}
