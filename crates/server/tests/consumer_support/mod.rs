//! Support for the native consumer's end-to-end tests: a consumer driven
//! by a background task (as an application would run it) that records its
//! assignment, messages and rebalance callbacks, and takes commands.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::{
    Admin, AutoOffsetReset, ClientConfig, Consumer, ConsumerBuilder, NewTopic, Offsets, Producer,
    ProducerRecord, RebalanceListener, TopicPartition,
};
use tokio::sync::{mpsc, oneshot};

/// A received message: topic, partition, offset, value.
pub type Got = (String, i32, i64, String);

/// What a running member has seen.
#[derive(Default)]
pub struct Seen {
    pub assignment: Vec<TopicPartition>,
    pub messages: Vec<Got>,
    /// "assign:t-0,t-1" / "revoke:..." lines from the listener.
    pub events: Vec<String>,
    pub errors: Vec<String>,
}

/// A listener that records into [`Seen`].
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Seen>>);

fn list(p: &[TopicPartition]) -> String {
    p.iter()
        .map(|tp| tp.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl RebalanceListener for Recorder {
    fn on_partitions_revoked(&self, p: &[TopicPartition]) {
        self.0
            .lock()
            .unwrap()
            .events
            .push(format!("revoke:{}", list(p)));
    }
    fn on_partitions_assigned(&self, p: &[TopicPartition]) {
        self.0
            .lock()
            .unwrap()
            .events
            .push(format!("assign:{}", list(p)));
    }
}

enum Cmd {
    Checkpoint(oneshot::Sender<Offsets>),
    Commit(oneshot::Sender<client::Result<()>>),
    Close(oneshot::Sender<client::Result<()>>),
}

/// A consumer polled by a background task.
pub struct Member {
    pub seen: Arc<Mutex<Seen>>,
    cmds: mpsc::UnboundedSender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

impl Member {
    /// Starts polling `consumer`; `seen` should be the one its listener
    /// (if any) records into.
    pub fn start(mut consumer: Consumer, seen: Arc<Mutex<Seen>>) -> Member {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let s = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                while let Ok(cmd) = rx.try_recv() {
                    match cmd {
                        Cmd::Checkpoint(reply) => {
                            let _ = reply.send(consumer.checkpoint());
                        }
                        Cmd::Commit(reply) => {
                            let _ = reply.send(consumer.commit().await);
                        }
                        Cmd::Close(reply) => {
                            let _ = reply.send(consumer.close().await);
                            return;
                        }
                    }
                }
                if rx.is_closed() {
                    return;
                }
                let r = consumer.poll(Duration::from_millis(50)).await;
                let mut seen = s.lock().unwrap();
                match r {
                    Ok(Some(m)) => seen.messages.push((
                        m.topic().to_string(),
                        m.partition(),
                        m.offset(),
                        String::from_utf8_lossy(m.value().unwrap_or_default()).into_owned(),
                    )),
                    Ok(None) => {}
                    Err(e) => seen.errors.push(e.to_string()),
                }
                seen.assignment = consumer.assignment().to_vec();
            }
        });
        Member {
            seen,
            cmds: tx,
            task,
        }
    }

    /// Subscribes `consumer` to `topics` with a recording listener and
    /// starts it.
    pub fn subscribed(mut consumer: Consumer, topics: &[&str]) -> Member {
        let rec = Recorder::default();
        consumer
            .subscribe_with_listener(topics, rec.clone())
            .unwrap();
        Member::start(consumer, rec.0)
    }

    pub fn assignment(&self) -> BTreeSet<(String, i32)> {
        self.seen
            .lock()
            .unwrap()
            .assignment
            .iter()
            .map(|tp| (tp.topic.clone(), tp.partition))
            .collect()
    }

    pub fn values(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .messages
            .iter()
            .map(|m| m.3.clone())
            .collect()
    }

    pub fn messages(&self) -> Vec<Got> {
        self.seen.lock().unwrap().messages.clone()
    }

    pub fn events(&self) -> Vec<String> {
        self.seen.lock().unwrap().events.clone()
    }

    pub fn errors(&self) -> Vec<String> {
        self.seen.lock().unwrap().errors.clone()
    }

    pub async fn checkpoint(&self) -> Offsets {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(Cmd::Checkpoint(tx)).unwrap();
        rx.await.unwrap()
    }

    pub async fn commit(&self) -> client::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(Cmd::Commit(tx)).unwrap();
        rx.await.unwrap()
    }

    /// Closes the consumer (revoking and leaving the group).
    pub async fn close(self) {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(Cmd::Close(tx)).unwrap();
        rx.await.unwrap().unwrap();
        self.task.await.unwrap();
    }

    /// Drops the consumer mid-poll without leaving: heartbeats stop, and
    /// the group notices when the session expires.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A consumer builder tuned for fast group tests.
pub fn builder(bootstrap: &str, group: &str) -> ConsumerBuilder {
    Consumer::builder()
        .bootstrap(bootstrap)
        .group_id(group)
        .session_timeout(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(300))
        .rebalance_timeout(Duration::from_secs(10))
        .auto_offset_reset(AutoOffsetReset::Earliest)
        .enable_auto_commit(false)
        .fetch_max_wait(Duration::from_millis(100))
        .metadata_refresh_interval(Duration::from_millis(300))
        .request_timeout(Duration::from_secs(10))
}

pub async fn admin(bootstrap: &str) -> Admin {
    Admin::connect(ClientConfig::new([bootstrap]).request_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
}

pub async fn create(admin: &Admin, topic: &str, partitions: i32) {
    admin
        .create_topic(NewTopic::new(topic, partitions))
        .await
        .unwrap();
}

pub async fn producer(admin: &Admin) -> Producer {
    Producer::builder()
        .client(admin.client().clone())
        .linger(Duration::from_millis(1))
        .build()
        .await
        .unwrap()
}

/// Sends `values[i]` to partition `i % partitions`; waits for every ack.
pub async fn produce_spread(p: &Producer, topic: &str, partitions: i32, values: &[String]) {
    let acks: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            p.send(
                ProducerRecord::new(topic)
                    .partition(i as i32 % partitions)
                    .value(v.clone()),
            )
        })
        .collect();
    for a in acks {
        a.await.unwrap();
    }
}

/// True when the members' assignments are disjoint and cover `total`.
pub fn covers(assignments: &[BTreeSet<(String, i32)>], total: usize) -> bool {
    let mut seen = BTreeSet::new();
    for a in assignments {
        for tp in a {
            if !seen.insert(tp.clone()) {
                return false;
            }
        }
    }
    seen.len() == total
}

/// `values` sorted, for comparing what a group consumed with what was sent.
pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
