//! Helpers for the crate's own tests.

use std::path::Path;
use std::sync::Arc;

use model::TopicName;

use crate::config::{BrokerConfig, TopicKind};
use crate::{Broker, Endpoint, NewTopic};

/// A broker on `dir` (default config) holding at least `topics`, each
/// created with 4 partitions if it does not exist yet. State kept for a
/// topic that does not exist is removed when a broker opens, so tests of
/// durable front-end state name real topics.
pub(crate) fn broker_with_topics(dir: &Path, topics: &[&str]) -> Arc<Broker> {
    let b = Broker::open(
        BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap()),
        Endpoint {
            host: "127.0.0.1".into(),
            port: 9092,
        },
    )
    .unwrap();
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
