//! A well-behaved librdkafka client that must keep producing and consuming,
//! losing nothing, while a test attacks the broker.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::{assign_config, client_config};

/// A producer and a consumer of one topic, each on its own connections.
pub struct Healthy {
    topic: String,
    producer: FutureProducer,
    consumer: BaseConsumer,
    /// Every value produced, in order.
    sent: Vec<String>,
}

impl Healthy {
    /// Creates `topic` (one partition) and connects both clients.
    pub async fn start(bootstrap: &str, topic: &str) -> Healthy {
        let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
        let r = admin
            .create_topics(
                &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
                &AdminOptions::new(),
            )
            .await
            .unwrap();
        assert!(r[0].is_ok(), "{r:?}");
        let producer: FutureProducer = client_config(bootstrap)
            .set("linger.ms", "0")
            .create()
            .unwrap();
        let consumer: BaseConsumer = assign_config(bootstrap).create().unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        Healthy {
            topic: topic.to_string(),
            producer,
            consumer,
            sent: Vec::new(),
        }
    }

    /// Produces one value and reads it back, checking that every value
    /// produced so far arrived once, in order. Panics naming `what` if the
    /// round trip does not complete within `within`.
    pub async fn round_trip(&mut self, what: &str, within: Duration) {
        let value = format!("{what} #{}", self.sent.len());
        let offset = self
            .producer
            .send(
                FutureRecord::to(&self.topic).key("k").payload(&value),
                within,
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap_or_else(|e| panic!("healthy producer failed during {what}: {e}"))
            .offset;
        assert_eq!(
            offset,
            self.sent.len() as i64,
            "{what}: acknowledged at the next offset"
        );
        self.sent.push(value.clone());
        let deadline = Instant::now() + within;
        let want = self.sent.len();
        let mut got = 0usize;
        while got < 1 {
            assert!(
                Instant::now() < deadline,
                "healthy consumer did not read {value:?} during {what}"
            );
            let Some(m) = super::polled(self.consumer.poll(Duration::from_millis(100))) else {
                continue;
            };
            let idx = m.offset() as usize;
            assert!(idx < want, "{what}: an offset never produced");
            assert_eq!(
                m.payload_view::<str>().unwrap().unwrap(),
                self.sent[idx],
                "{what}: the value at offset {idx}"
            );
            if idx + 1 == want {
                got += 1;
            }
        }
    }
}
