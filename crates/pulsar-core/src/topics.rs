//! Pulsar topic names over the broker's topics (the mapping itself is
//! `model::pulsar_name`).

use std::sync::Arc;

use broker::config::TopicKind;
use broker::{Broker, Partition, Topic};
use magnetar_pulsar_wire::proto::ServerError;
use model::pulsar_name::{Namespace, PulsarTopic};
use model::PartitionId;

use crate::error::PulsarError;
use crate::message_id::IdSpace;

/// Whether a namespace exists (the broker's tenants and namespaces, made
/// through the admin API; `public/default` always does).
pub fn namespace_exists(broker: &Broker, ns: &Namespace) -> bool {
    broker.namespace_exists(ns)
}

/// Parses a topic name a client sent, refusing names of namespaces that do
/// not exist.
pub fn parse(broker: &Broker, name: &str) -> Result<PulsarTopic, PulsarError> {
    let topic = PulsarTopic::parse(name)?;
    if !namespace_exists(broker, &topic.namespace) {
        return Err(PulsarError::new(
            ServerError::TopicNotFound,
            format!("namespace {} does not exist", topic.namespace),
        ));
    }
    if topic.shadows_a_namespace(|ns| namespace_exists(broker, ns)) {
        return Err(PulsarError::new(
            ServerError::InvalidTopicName,
            format!("{name} would be read back as a topic of another namespace"),
        ));
    }
    Ok(topic)
}

/// The Pulsar name of a broker topic.
pub fn pulsar_name(broker: &Broker, topic: &Topic) -> PulsarTopic {
    PulsarTopic::from_kafka(&topic.name, |ns| namespace_exists(broker, ns))
}

/// How many partitions Pulsar reports: 0 for a non-partitioned topic.
pub fn reported_partitions(topic: &Topic) -> u32 {
    match topic.kind {
        TopicKind::NonPartitioned => 0,
        TopicKind::Partitioned => topic.partition_count() as u32,
    }
}

/// One partition a producer or consumer attaches to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The Pulsar name the client used.
    pub name: PulsarTopic,
    /// The broker topic.
    pub topic: Arc<Topic>,
    /// The partition.
    pub partition: Arc<Partition>,
    /// Its message ids.
    pub ids: IdSpace,
}

/// The partition a producer or consumer names: `t-partition-N` is partition
/// N of partitioned topic `t`; a non-partitioned topic is its only
/// partition. Naming a partitioned topic itself is an error (clients attach
/// to each partition). The topic is created when it does not exist and
/// `auto_create` and the broker's policy allow.
pub fn resolve(broker: &Broker, name: &str, auto_create: bool) -> Result<Target, PulsarError> {
    let parsed = parse(broker, name)?;
    let kafka = parsed.kafka_name();
    let topic = if parsed.partition.is_some() {
        // A partition is never created on its own.
        broker.resolve_topic_name(kafka.as_str())?
    } else {
        broker.lookup_topic_in(&kafka, auto_create, Some(&parsed.namespace))?
    };
    let (index, id_partition) = match (parsed.partition, topic.kind) {
        (Some(n), TopicKind::Partitioned) => (n, n as i32),
        (None, TopicKind::NonPartitioned) => (0, -1),
        (Some(_), TopicKind::NonPartitioned) => {
            return Err(PulsarError::new(
                ServerError::TopicNotFound,
                format!("{name}: {} is not a partitioned topic", parsed.base()),
            ))
        }
        (None, TopicKind::Partitioned) => {
            return Err(PulsarError::new(
                ServerError::NotAllowedError,
                format!("{name} is a partitioned topic; attach to its partitions"),
            ))
        }
    };
    let partition = topic.partition(PartitionId(index as i32))?.clone();
    Ok(Target {
        ids: IdSpace::new(topic.id, id_partition),
        name: parsed,
        topic,
        partition,
    })
}
