//! The native client across a broker SIGKILL and restart: the producer and
//! the admin client reconnect by themselves.

mod client_support;
mod common;

use std::time::Duration;

use client::{Admin, ClientConfig, NewTopic, Producer, ProducerRecord};
use common::BrokerProcess;

#[tokio::test]
async fn producer_and_admin_reconnect_after_a_restart() {
    let mut broker = BrokerProcess::start(&[]);
    let cfg = ClientConfig::new([broker.bootstrap()])
        .request_timeout(Duration::from_secs(5))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(500));
    let admin = Admin::connect(cfg).await.unwrap();
    admin
        .create_topic(NewTopic::new("durable", 2))
        .await
        .unwrap();
    let producer = Producer::builder()
        .client(admin.client().clone())
        .retry_backoff(Duration::from_millis(50))
        .delivery_timeout(Duration::from_secs(60))
        .build()
        .await
        .unwrap();
    for i in 0..20 {
        producer
            .send(
                ProducerRecord::new("durable")
                    .key(format!("k{i}"))
                    .value(format!("before-{i}")),
            )
            .await
            .unwrap();
    }

    broker.kill();
    // Sent while the broker is down: delivered once it is back.
    let pending: Vec<_> = (0..20)
        .map(|i| {
            producer.send(
                ProducerRecord::new("durable")
                    .key(format!("k{i}"))
                    .value(format!("during-{i}")),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    broker.restart();
    for f in pending {
        f.await.unwrap();
    }
    for i in 0..20 {
        producer
            .send(
                ProducerRecord::new("durable")
                    .key(format!("k{i}"))
                    .value(format!("after-{i}")),
            )
            .await
            .unwrap();
    }
    assert!(admin
        .list_topics(false)
        .await
        .unwrap()
        .contains(&"durable".to_string()));
    let mut total = 0;
    for p in 0..2 {
        let records = client_support::fetch_all(admin.client(), "durable", p).await;
        total += records.len();
    }
    assert_eq!(total, 60);
}
