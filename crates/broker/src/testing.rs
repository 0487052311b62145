//! Helpers for tests (this crate's, and the front ends' with the
//! `testing` feature): a standalone node's broker core, its quorum of one
//! included, without listeners.

use std::path::Path;
use std::sync::Arc;

use model::TopicName;

use crate::cluster::Membership;
use crate::config::{BrokerConfig, TopicKind};
use crate::{Broker, Endpoint, Error, NewTopic};

/// A standalone node's broker core started as `magnetar standalone`
/// starts it (a controller quorum of one inside the process, registered
/// and following its metadata), on a runtime of its own, so synchronous
/// tests can use it. It derefs to the broker; dropping it shuts the node
/// down cleanly (its data directory can then be opened again).
pub struct TestNode {
    broker: Arc<Broker>,
    membership: Option<Membership>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl TestNode {
    /// Starts a node on `config`'s data directory.
    pub fn start(config: BrokerConfig) -> Result<TestNode, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::Startup(format!("test runtime: {e}")))?;
        let endpoint = Endpoint {
            host: "127.0.0.1".into(),
            port: config.kafka_addr.port(),
        };
        let endpoints = [(
            crate::cluster::KAFKA_LISTENER.to_string(),
            format!("127.0.0.1:{}", config.kafka_addr.port()),
        )]
        .into();
        let joined = block_on(&runtime, crate::cluster::join(config, endpoint, endpoints));
        let (broker, membership) = match joined {
            Ok(j) => j,
            Err(e) => {
                shut_down(runtime);
                return Err(e);
            }
        };
        Ok(TestNode {
            broker,
            membership: Some(membership),
            runtime: Some(runtime),
        })
    }

    /// Starts a node with the default configuration on `dir`.
    pub fn on(dir: &Path) -> TestNode {
        TestNode::start(BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap()))
            .expect("a test node starts")
    }

    /// The broker core.
    pub fn broker(&self) -> Arc<Broker> {
        self.broker.clone()
    }

    /// The runtime the node runs on (for tests that spawn on it).
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("running")
    }
}

impl std::ops::Deref for TestNode {
    type Target = Arc<Broker>;

    fn deref(&self) -> &Arc<Broker> {
        &self.broker
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        let (Some(runtime), Some(mut membership)) = (self.runtime.take(), self.membership.take())
        else {
            return;
        };
        let broker = self.broker.clone();
        let stop = async move {
            membership.controlled_shutdown(&broker).await;
            membership.stop_tasks().await;
            let _ = tokio::task::spawn_blocking(move || broker.shutdown()).await;
            membership.shutdown_controller().await;
        };
        let stopped = std::thread::scope(|s| s.spawn(|| runtime.block_on(stop)).join());
        if stopped.is_err() && !std::thread::panicking() {
            panic!("the test node's shutdown panicked");
        }
        shut_down(runtime);
    }
}

/// Shuts `runtime` down from a thread of its own: not from inside another
/// runtime (an async test's), and without a second panic while a failed
/// test unwinds.
fn shut_down(runtime: tokio::runtime::Runtime) {
    let stopped =
        std::thread::spawn(move || runtime.shutdown_timeout(std::time::Duration::from_secs(5)))
            .join();
    if stopped.is_err() && !std::thread::panicking() {
        panic!("the test runtime did not shut down");
    }
}

/// Runs `f` on `runtime` from a thread of its own, so that async tests
/// (already inside a runtime) can start and stop nodes too.
fn block_on<T: Send>(
    runtime: &tokio::runtime::Runtime,
    f: impl std::future::Future<Output = T> + Send,
) -> T {
    std::thread::scope(|s| {
        s.spawn(|| runtime.block_on(f))
            .join()
            .expect("the test node's start-up or shutdown panicked")
    })
}

/// A node on `dir` (default config) holding at least `topics`, each
/// created with 4 partitions if it does not exist yet. State kept for a
/// topic that does not exist is removed when a broker opens, so tests of
/// durable front-end state name real topics.
pub fn broker_with_topics(dir: &Path, topics: &[&str]) -> TestNode {
    let b = TestNode::on(dir);
    for t in topics {
        if b.topic(t).is_none() {
            b.create_topic(
                NewTopic {
                    assignments: Vec::new(),
                    name: TopicName::new(t).unwrap(),
                    partitions: Some(4),
                    replication_factor: None,
                    kind: TopicKind::Partitioned,
                    config: Default::default(),
                },
                false,
            )
            .unwrap();
        }
    }
    b
}
