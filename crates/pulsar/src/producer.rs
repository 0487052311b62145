//! Producers: CommandProducer, CommandSend, CommandCloseProducer.
//!
//! A producer attaches to one partition (clients open one per partition of
//! a partitioned topic). Each SEND becomes one Kafka batch appended to that
//! partition's log; its receipt carries the entry id of that batch.
//! Resent messages are recognised by producer name and sequence id (the
//! broker keeps each producer name's highest stored sequence id per
//! partition) and answered with the original receipt's shape without being
//! stored twice.

use std::collections::HashMap;
use std::sync::Arc;

use broker::Broker;
use bytes::Bytes;
use magnetar_pulsar_wire::proto::{
    CommandProducer, CommandProducerSuccess, CommandSend, CommandSendReceipt, MessageIdData,
    MessageMetadata, ProducerAccessMode, ServerError,
};
use model::{Timestamp, TopicPartition};
use parking_lot::Mutex;
use storage::AppendOutcome;

use crate::convert;
use crate::error::PulsarError;
use crate::schema::Schemas;
use crate::topics::{self, Target};

/// Producers attached across all connections: names in use, exclusive
/// access, and each producer name's highest stored sequence id.
#[derive(Debug, Default)]
pub struct ProducerRegistry {
    inner: Mutex<RegistryInner>,
}

#[derive(Debug, Default)]
struct RegistryInner {
    /// (partition, producer name) → connection holding it.
    attached: HashMap<(TopicPartition, String), u64>,
    /// Partitions held by an Exclusive producer → its connection.
    exclusive: HashMap<TopicPartition, u64>,
    /// (partition, producer name) → highest sequence id stored.
    last_sequence: HashMap<(TopicPartition, String), i64>,
    /// A number for generated producer names.
    next_name: u64,
}

impl ProducerRegistry {
    fn attach(
        &self,
        conn: u64,
        tp: &TopicPartition,
        name: &str,
        mode: ProducerAccessMode,
    ) -> Result<i64, PulsarError> {
        let mut inner = self.inner.lock();
        let key = (tp.clone(), name.to_string());
        if inner.attached.contains_key(&key) {
            return Err(PulsarError::new(
                ServerError::ProducerBusy,
                format!("producer with name '{name}' is already connected to topic"),
            ));
        }
        let others = inner.attached.keys().any(|(t, _)| t == tp);
        match mode {
            ProducerAccessMode::Shared => {
                if inner.exclusive.contains_key(tp) {
                    return Err(PulsarError::new(
                        ServerError::ProducerBusy,
                        format!("topic {tp} has an exclusive producer"),
                    ));
                }
            }
            _ => {
                if others {
                    return Err(PulsarError::new(
                        ServerError::ProducerBusy,
                        format!("topic {tp} has other producers; exclusive access refused"),
                    ));
                }
                inner.exclusive.insert(tp.clone(), conn);
            }
        }
        inner.attached.insert(key.clone(), conn);
        Ok(inner.last_sequence.get(&key).copied().unwrap_or(-1))
    }

    fn detach(&self, tp: &TopicPartition, name: &str) {
        let mut inner = self.inner.lock();
        if let Some(conn) = inner.attached.remove(&(tp.clone(), name.to_string())) {
            if inner.exclusive.get(tp) == Some(&conn) {
                inner.exclusive.remove(tp);
            }
        }
    }

    fn generated_name(&self, tp: &TopicPartition) -> String {
        let mut inner = self.inner.lock();
        inner.next_name += 1;
        format!("magnetar-{}-{}", tp, inner.next_name)
    }

    /// Whether `highest` was already stored for this producer name.
    fn is_duplicate(&self, tp: &TopicPartition, name: &str, highest: i64) -> bool {
        let inner = self.inner.lock();
        inner
            .last_sequence
            .get(&(tp.clone(), name.to_string()))
            .is_some_and(|last| highest <= *last)
    }

    fn stored(&self, tp: &TopicPartition, name: &str, highest: i64) {
        let mut inner = self.inner.lock();
        let last = inner
            .last_sequence
            .entry((tp.clone(), name.to_string()))
            .or_insert(-1);
        *last = (*last).max(highest);
    }
}

/// One attached producer.
#[derive(Debug)]
pub struct Producer {
    /// Where it writes.
    pub target: Target,
    /// Its name.
    pub name: String,
    registry: Arc<ProducerRegistry>,
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.registry.detach(&self.target.partition.tp, &self.name);
    }
}

/// CommandProducer: resolves (and if allowed creates) the topic, checks
/// the name and access mode, records the schema; the producer and the
/// answer.
pub fn create(
    broker: &Broker,
    registry: &Arc<ProducerRegistry>,
    schemas: &Schemas,
    conn: u64,
    cmd: &CommandProducer,
) -> Result<(Producer, CommandProducerSuccess), PulsarError> {
    let target = topics::resolve(broker, &cmd.topic, true)?;
    target.topic.ensure_client_writable()?;
    let tp = &target.partition.tp;
    let name = match cmd.producer_name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => n.to_string(),
        None => registry.generated_name(tp),
    };
    let mode = cmd.producer_access_mode();
    let last_sequence_id = registry.attach(conn, tp, &name, mode)?;
    let schema_version = match &cmd.schema {
        Some(s) => Some(schemas.get_or_create(&target.topic.name, s)),
        None => None,
    };
    let ok = CommandProducerSuccess {
        request_id: cmd.request_id,
        producer_name: name.clone(),
        last_sequence_id: Some(last_sequence_id),
        schema_version,
        topic_epoch: None,
        producer_ready: Some(true),
    };
    let producer = Producer {
        target,
        name,
        registry: registry.clone(),
    };
    Ok((producer, ok))
}

/// CommandSend: stores the message(s) as one batch. Returns the receipt
/// and the disk work the append left (see [`broker::complete_disk_work`]).
pub fn send(
    producer: &Producer,
    cmd: &CommandSend,
    metadata: &MessageMetadata,
    data: Bytes,
    max_message_size: usize,
    now: Timestamp,
) -> Result<(CommandSendReceipt, Option<storage::SyncWork>), PulsarError> {
    let tp = &producer.target.partition.tp;
    let first = cmd.sequence_id as i64;
    let highest = (cmd.highest_sequence_id.unwrap_or(0) as i64).max(first);
    let receipt = |id: MessageIdData| CommandSendReceipt {
        producer_id: cmd.producer_id,
        sequence_id: cmd.sequence_id,
        message_id: Some(id),
        highest_sequence_id: cmd.highest_sequence_id,
    };
    if producer.registry.is_duplicate(tp, &producer.name, highest) {
        // Upstream answers a duplicate with the id (-1, -1).
        let id = MessageIdData {
            ledger_id: u64::MAX,
            entry_id: u64::MAX,
            ..Default::default()
        };
        return Ok((receipt(id), None));
    }
    let (batch, _count) = convert::to_kafka_batch(metadata, data, max_message_size)
        .map_err(|e| PulsarError::new(ServerError::NotAllowedError, e.to_string()))?;
    let (outcome, work) = producer.target.partition.append_deferred(&batch, now)?;
    let info = match outcome {
        AppendOutcome::Appended(i) | AppendOutcome::Duplicate(i) => i,
    };
    producer.registry.stored(tp, &producer.name, highest);
    let id = producer.target.ids.entry_id(info.base_offset);
    Ok((receipt(id), (!work.is_empty()).then_some(work)))
}
