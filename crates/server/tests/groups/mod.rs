//! Shared pieces of the consumer-group tests: librdkafka group consumers that
//! record their rebalance callbacks and every message they receive.

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message};

use crate::common::client_config;

/// Records rebalance callbacks as "assign:topic-p,..." / "revoke:..." lines,
/// and the assignment they add up to (eager and incremental alike: assign
/// adds, revoke removes).
#[derive(Clone, Default)]
pub struct Recorder {
    seen: Arc<Mutex<Seen>>,
}

#[derive(Default)]
struct Seen {
    events: Vec<String>,
    assigned: BTreeSet<(String, i32)>,
}

impl ClientContext for Recorder {}

impl ConsumerContext for Recorder {
    fn post_rebalance(&self, _c: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let mut seen = self.seen.lock().unwrap();
        let line = match rebalance {
            Rebalance::Assign(tpl) => {
                seen.assigned.extend(elements(tpl));
                format!("assign:{}", list(tpl))
            }
            Rebalance::Revoke(tpl) => {
                for e in elements(tpl) {
                    seen.assigned.remove(&e);
                }
                format!("revoke:{}", list(tpl))
            }
            Rebalance::Error(e) => format!("error:{e}"),
        };
        seen.events.push(line);
    }
}

fn elements(tpl: &rdkafka::TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect()
}

fn list(tpl: &rdkafka::TopicPartitionList) -> String {
    let mut v: Vec<String> = tpl
        .elements()
        .iter()
        .map(|e| format!("{}-{}", e.topic(), e.partition()))
        .collect();
    v.sort();
    v.join(",")
}

/// A received message: topic, partition, offset, value.
pub type Received = (String, i32, i64, String);

/// A group consumer whose messages are collected by a background task.
pub struct GroupConsumer {
    pub consumer: Arc<StreamConsumer<Recorder>>,
    pub recorder: Recorder,
    pub messages: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl GroupConsumer {
    /// Starts a consumer with `config`, subscribed to `topics` (a `^` prefix
    /// makes librdkafka treat a name as a regex).
    pub fn start(config: ClientConfig, topics: &[&str]) -> GroupConsumer {
        let recorder = Recorder::default();
        let consumer: StreamConsumer<Recorder> = config
            .create_with_context(recorder.clone())
            .expect("consumer");
        consumer.subscribe(topics).expect("subscribe");
        let consumer = Arc::new(consumer);
        let messages: Arc<Mutex<Vec<Received>>> = Arc::default();
        let task = {
            let consumer = consumer.clone();
            let messages = messages.clone();
            tokio::spawn(async move {
                loop {
                    match consumer.recv().await {
                        Ok(m) => messages.lock().unwrap().push((
                            m.topic().to_string(),
                            m.partition(),
                            m.offset(),
                            String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                        )),
                        Err(e) => tracing_log(&format!("consumer error: {e}")),
                    }
                }
            })
        };
        GroupConsumer {
            consumer,
            recorder,
            messages,
            task,
        }
    }

    /// The partitions currently assigned, as the rebalance callbacks
    /// reported them: once a partition shows here, its callback line is in
    /// [`GroupConsumer::events`] too (librdkafka's own assignment changes a
    /// moment before the callback runs, which would race).
    pub fn assignment(&self) -> BTreeSet<(String, i32)> {
        self.recorder.seen.lock().unwrap().assigned.clone()
    }

    /// Values received so far.
    pub fn values(&self) -> Vec<String> {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .map(|m| m.3.clone())
            .collect()
    }

    /// Rebalance callback lines so far.
    pub fn events(&self) -> Vec<String> {
        self.recorder.seen.lock().unwrap().events.clone()
    }

    /// Stops polling and closes the consumer (leaving the group).
    pub async fn close(self) {
        self.task.abort();
        let _ = self.task.await;
        if let Ok(c) = Arc::try_unwrap(self.consumer) {
            let c: StreamConsumer<Recorder> = c;
            c.unsubscribe();
            drop(c);
        }
    }
}

fn tracing_log(s: &str) {
    eprintln!("{s}");
}

/// A classic-protocol group consumer config.
pub fn classic_config(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = client_config(bootstrap);
    c.set("group.id", group)
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "300")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .set("topic.metadata.refresh.interval.ms", "500");
    c
}

/// A KIP-848 (`group.protocol=consumer`) consumer config. Periodic
/// metadata refresh is a minute apart, longer than any test waits, so new
/// topics can only reach the consumer through the broker's assignment
/// (which librdkafka resolves with Metadata v13 by topic id). Not longer:
/// librdkafka 2.12 computes its metadata cache expiry (3x this interval, in
/// microseconds) in 32 bits and expires entries at once above ~12 minutes.
pub fn consumer_protocol_config(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = client_config(bootstrap);
    c.set("group.id", group)
        .set("group.protocol", "consumer")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .set("topic.metadata.refresh.interval.ms", "60000");
    c
}

/// Creates topics.
pub async fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|(n, p)| NewTopic::new(n, *p, TopicReplication::Fixed(1)))
        .collect();
    for r in admin
        .create_topics(&new, &AdminOptions::new())
        .await
        .unwrap()
    {
        assert!(r.is_ok(), "{r:?}");
    }
}

/// Deletes a topic.
pub async fn delete_topic(bootstrap: &str, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let r = admin
        .delete_topics(&[topic], &AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

/// Produces `values` to `topic`, spread over partitions by key; returns
/// (partition, offset) per value.
pub async fn produce(
    bootstrap: &str,
    topic: &str,
    values: &[String],
) -> HashMap<String, (i32, i64)> {
    let p: FutureProducer = client_config(bootstrap)
        .set("linger.ms", "1")
        .create()
        .unwrap();
    let mut out = HashMap::new();
    for v in values {
        let d = p
            .send(
                FutureRecord::to(topic).key(v).payload(v),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
        out.insert(v.clone(), (d.partition, d.offset));
    }
    out
}
