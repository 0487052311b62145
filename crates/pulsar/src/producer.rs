//! Producers: CommandProducer, CommandSend, CommandCloseProducer.
//!
//! A producer attaches to one partition (clients open one per partition of
//! a partitioned topic). Each SEND becomes one Kafka batch appended to that
//! partition's log; its receipt carries the entry id of that batch.
//!
//! Deduplication: resent messages are recognised by producer name and
//! sequence id (each producer name's highest stored sequence id per
//! partition, `broker::sequences`) and answered with the (-1, -1) id
//! without being stored twice. It survives restarts and SIGKILL: every
//! stored batch names its producer and sequence ids (headers on its first
//! record, see [`crate::convert`]), the broker snapshots the map into the
//! group log now and then, and the first producer to attach to a partition
//! after a start brings the last snapshot up to date by reading the
//! batches stored after it ([`replay`]). A sequence id acknowledged before
//! a crash is therefore always known after it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use broker::sequences::{PartitionSequences, SequencesHandle};
use broker::traffic::Traffic;
use broker::{Broker, Partition};
use bytes::Bytes;
use magnetar_pulsar_wire::proto::{
    CommandProducer, CommandProducerSuccess, CommandSend, CommandSendReceipt, MessageIdData,
    MessageMetadata, ProducerAccessMode, ServerError,
};
use model::{Timestamp, TopicPartition};
use parking_lot::Mutex;
use storage::{AppendOutcome, BatchHeader};
use tokio::sync::mpsc;

use crate::convert::{self, Origin, StoredOrigin};
use crate::error::PulsarError;
use crate::schema;
use crate::topics::{self, Target};
use magnetar_pulsar_core::admin::{ClientInfo, Publisher};

/// Most bytes read per step while replaying a partition's log.
const REPLAY_CHUNK: usize = 1 << 20;

/// Producers attached across all connections: names in use and exclusive
/// access.
#[derive(Debug)]
pub struct ProducerRegistry {
    inner: Mutex<RegistryInner>,
    /// Generated names carry the start time, so a name generated after a
    /// restart never inherits an older producer's sequence ids.
    generation: i64,
}

impl Default for ProducerRegistry {
    fn default() -> Self {
        ProducerRegistry {
            inner: Mutex::default(),
            generation: broker::now_ms().0,
        }
    }
}

#[derive(Debug)]
struct Attachment {
    conn: u64,
    /// Which attachment (a name may attach again while the old producer
    /// object still lives on its connection).
    token: u64,
    publisher: Arc<Publisher>,
    partition: Arc<Partition>,
    /// Its connection's outbound frames, to close it from here.
    out: mpsc::Sender<Bytes>,
    closed: Arc<AtomicBool>,
}

/// A producer closed by the broker (its partition is led elsewhere now):
/// where to send its CloseProducer.
#[derive(Debug)]
pub struct Moved {
    /// The client's producer id.
    pub producer_id: u64,
    /// Its connection's outbound frames.
    pub out: mpsc::Sender<Bytes>,
}

#[derive(Debug, Default)]
struct RegistryInner {
    /// (partition, producer name) → the connection holding it.
    attached: HashMap<(TopicPartition, String), Attachment>,
    /// Partitions held by an Exclusive producer → its connection.
    exclusive: HashMap<TopicPartition, u64>,
    /// A number for generated producer names.
    next_name: u64,
    /// The last attachment token handed out.
    next_token: u64,
}

impl ProducerRegistry {
    fn attach(
        &self,
        conn: u64,
        tp: &TopicPartition,
        publisher: Arc<Publisher>,
        partition: Arc<Partition>,
        out: mpsc::Sender<Bytes>,
        closed: Arc<AtomicBool>,
    ) -> Result<u64, PulsarError> {
        let name = publisher.name.as_str();
        let mode = publisher.access_mode;
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
        inner.next_token += 1;
        let token = inner.next_token;
        let a = Attachment {
            conn,
            token,
            publisher,
            partition,
            out,
            closed,
        };
        inner.attached.insert(key, a);
        Ok(token)
    }

    fn detach(&self, tp: &TopicPartition, name: &str, token: u64) {
        let mut inner = self.inner.lock();
        let key = (tp.clone(), name.to_string());
        if inner.attached.get(&key).is_some_and(|a| a.token == token) {
            Self::remove(&mut inner, &key);
        }
    }

    fn remove(inner: &mut RegistryInner, key: &(TopicPartition, String)) {
        if let Some(a) = inner.attached.remove(key) {
            if inner.exclusive.get(&key.0) == Some(&a.conn) {
                inner.exclusive.remove(&key.0);
            }
        }
    }

    /// Closes every producer whose partition is no longer led here: each
    /// is marked closed (its connection drops what it still sends) and
    /// forgotten; the CloseProducer commands to send.
    pub fn close_moved(&self) -> Vec<Moved> {
        let mut inner = self.inner.lock();
        let moved: Vec<(TopicPartition, String)> = inner
            .attached
            .iter()
            .filter(|(_, a)| !a.partition.leads())
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for key in moved {
            if let Some(a) = inner.attached.get(&key) {
                a.closed.store(true, Ordering::Relaxed);
                out.push(Moved {
                    producer_id: a.publisher.producer_id,
                    out: a.out.clone(),
                });
            }
            Self::remove(&mut inner, &key);
        }
        out
    }

    /// The producers attached to `tp`, in attach order.
    pub fn publishers(&self, tp: &TopicPartition) -> Vec<Arc<Publisher>> {
        let mut out: Vec<Arc<Publisher>> = self
            .inner
            .lock()
            .attached
            .iter()
            .filter(|((t, _), _)| t == tp)
            .map(|(_, a)| a.publisher.clone())
            .collect();
        out.sort_by(|a, b| (a.attached_ms, &a.name).cmp(&(b.attached_ms, &b.name)));
        out
    }

    fn generated_name(&self, tp: &TopicPartition) -> String {
        let mut inner = self.inner.lock();
        inner.next_name += 1;
        format!("magnetar-{}-{}-{}", tp, self.generation, inner.next_name)
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
    sequences: SequencesHandle,
    publisher: Arc<Publisher>,
    token: u64,
    closed: Arc<AtomicBool>,
    // Keeps the topic from being deleted without force while attached.
    _attached: broker::ProducerAttachment,
}

impl Producer {
    /// Whether the broker closed it (its partition is led elsewhere now):
    /// its client reconnects it through a lookup and resends what was not
    /// acknowledged, so what it still sends here is dropped.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Closes it from its own connection (a send found its partition led
    /// elsewhere); `false` if it was closed already.
    pub fn close(&self) -> bool {
        let was = self.closed.swap(true, Ordering::Relaxed);
        self.registry
            .detach(&self.target.partition.tp, &self.name, self.token);
        !was
    }

    /// The highest sequence id stored under this producer's name, or -1.
    pub fn last_sequence_id(&self) -> i64 {
        self.sequences.lock().last(&self.name)
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.registry
            .detach(&self.target.partition.tp, &self.name, self.token);
        self.sequences.lock().detach(&self.name, broker::now_ms().0);
    }
}

/// CommandProducer: resolves (and if allowed creates) the topic, checks
/// the name and access mode, records the schema, recovers the partition's
/// sequence ids if it is their first use; the producer and the answer.
/// Reads the log and writes the group log: call off the async workers.
pub fn create(
    broker: &Broker,
    registry: &Arc<ProducerRegistry>,
    conn: u64,
    client: Arc<ClientInfo>,
    out: mpsc::Sender<Bytes>,
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
    let partition = target.partition.clone();
    let sequences = broker.producer_sequences().partition(
        tp.topic.as_str(),
        tp.partition.0,
        broker::now_ms().0,
        |state| replay(&partition, state),
    )?;
    if partition.replica().is_some() {
        // A replicated partition's log also grows while another broker
        // leads it: what was stored meanwhile is read before a producer
        // attaches here, so its resent messages are still recognised.
        let mut s = sequences.lock();
        if s.covered() < partition.log().log_end_offset() {
            replay(&partition, &mut s)?;
        }
    }
    let schema_version = match &cmd.schema {
        Some(s) => Some(schema::get_or_create(broker, &target.topic.name, s)?),
        None => None,
    };
    let publisher = Arc::new(Publisher {
        producer_id: cmd.producer_id,
        name: name.clone(),
        access_mode: mode,
        client,
        attached_ms: broker::now_ms().0,
        traffic: Traffic::default(),
    });
    let closed = Arc::new(AtomicBool::new(false));
    let token = registry.attach(
        conn,
        tp,
        publisher.clone(),
        partition.clone(),
        out,
        closed.clone(),
    )?;
    let last_sequence_id = {
        let mut s = sequences.lock();
        s.attach(&name);
        s.last(&name)
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
        _attached: target.partition.attach_producer(),
        target,
        name,
        registry: registry.clone(),
        sequences,
        publisher,
        token,
        closed,
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
) -> Result<Sent, PulsarError> {
    let first = cmd.sequence_id as i64;
    let highest = (cmd.highest_sequence_id.unwrap_or(0) as i64).max(first);
    let receipt = |id: MessageIdData| CommandSendReceipt {
        producer_id: cmd.producer_id,
        sequence_id: cmd.sequence_id,
        message_id: Some(id),
        highest_sequence_id: cmd.highest_sequence_id,
    };
    // Upstream answers a duplicate with the id (-1, -1).
    let duplicate = || {
        let id = MessageIdData {
            ledger_id: u64::MAX,
            entry_id: u64::MAX,
            ..Default::default()
        };
        // On a replicated partition the original may not be committed
        // yet: the receipt waits for everything appended so far.
        let partition = &producer.target.partition;
        let next = partition
            .replica()
            .map(|_| (partition.log().log_end_offset(), partition.leader_epoch()));
        Ok(Sent {
            receipt: receipt(id),
            work: None,
            next,
        })
    };
    if producer
        .sequences
        .lock()
        .is_duplicate(&producer.name, highest)
    {
        return duplicate();
    }
    let origin = Origin {
        producer_name: &producer.name,
        sequence_id: first,
        highest_sequence_id: highest,
    };
    let (batch, _count) =
        convert::to_kafka_batch(metadata, data, max_message_size, Some(origin))
            .map_err(|e| PulsarError::new(ServerError::NotAllowedError, e.to_string()))?;
    // The append and its record happen under the partition's sequences
    // lock, so a snapshot never covers an offset whose batch it misses.
    let mut sequences = producer.sequences.lock();
    if sequences.is_duplicate(&producer.name, highest) {
        return duplicate();
    }
    let (outcome, work) = producer.target.partition.append_deferred(&batch, now)?;
    let info = match outcome {
        AppendOutcome::Appended(i) | AppendOutcome::Duplicate(i) => i,
    };
    sequences.record(&producer.name, highest, info.last_offset.plus(1), now.0);
    drop(sequences);
    producer
        .publisher
        .traffic
        .record_in(info.record_count, batch.len() as u64);
    let id = producer.target.ids.entry_id(info.base_offset);
    Ok(Sent {
        receipt: receipt(id),
        work: (!work.is_empty()).then_some(work),
        next: Some((info.last_offset.plus(1), info.leader_epoch)),
    })
}

/// A message taken by [`send`].
#[derive(Debug)]
pub struct Sent {
    /// The receipt to send back.
    pub receipt: CommandSendReceipt,
    /// The disk work the append left (see [`broker::complete_disk_work`]).
    pub work: Option<storage::SyncWork>,
    /// The offset after the message and the leader epoch it was written
    /// in: on a replicated partition the receipt waits until it is
    /// committed (`None`: nothing to wait for).
    pub next: Option<(model::Offset, model::LeaderEpoch)>,
}

/// Brings a partition's sequences up to date from its log: every batch from
/// the snapshot's covered offset to the log end, by the origin headers of
/// its first record (batches without them were written by Kafka clients).
/// A batch that cannot be parsed ends the replay (logged): what follows it
/// is not deduplicated, rather than the partition refusing producers.
pub fn replay(partition: &Partition, state: &mut PartitionSequences) -> Result<(), broker::Error> {
    let log = partition.log();
    let limit = log.config().max_decompressed_bytes();
    let mut next = state.covered().max(log.log_start_offset());
    let end = log.log_end_offset();
    let mut batches = 0u64;
    'read: while next < end {
        let chunk = partition.read(next, REPLAY_CHUNK, true)?;
        if chunk.records.is_empty() {
            break;
        }
        let mut rest = chunk.records;
        while !rest.is_empty() {
            let header = match BatchHeader::parse(&rest) {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(partition = %partition.tp, offset = next.0, "producer sequence replay stopped at an unreadable batch: {e}");
                    break 'read;
                }
            };
            let batch = rest.split_to(header.total_size().min(rest.len()));
            next = next.max(header.next_offset());
            batches += 1;
            if header.is_control() {
                continue;
            }
            if let Some(o) = StoredOrigin::of_batch(batch, limit) {
                if let Ok(name) = std::str::from_utf8(&o.producer_name) {
                    let at = header.max_timestamp.0.min(broker::now_ms().0);
                    state.record(name, o.highest_sequence_id, header.next_offset(), at);
                }
            }
        }
    }
    state.replayed_to(next);
    tracing::debug!(partition = %partition.tp, batches, to = next.0, "producer sequences replayed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use broker::config::{BrokerConfig, TopicConfig, TopicKind};
    use broker::sequences::{ProducerEntry, SequenceSnapshot};
    use broker::NewTopic;
    use magnetar_pulsar_wire::payload::build_single;
    use magnetar_pulsar_wire::proto::CompressionType;
    use model::{Offset, PartitionId, TopicName};
    use storage::{BatchBuilder, Compression};

    use super::*;

    fn pulsar_batch(producer: &str, seq: i64, highest: i64) -> bytes::BytesMut {
        let mut m = MessageMetadata {
            producer_name: producer.into(),
            sequence_id: seq as u64,
            publish_time: 1,
            ..Default::default()
        };
        let data = build_single(&mut m, b"v", CompressionType::Zstd).unwrap();
        let origin = Origin {
            producer_name: producer,
            sequence_id: seq,
            highest_sequence_id: highest,
        };
        convert::to_kafka_batch(&m, data, 1 << 20, Some(origin))
            .unwrap()
            .0
    }

    #[test]
    fn replay_reads_the_producers_of_the_batches_after_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker::testing::TestNode::start(BrokerConfig::new(
            dir.path(),
            "127.0.0.1:9092".parse().unwrap(),
        ))
        .unwrap();
        let topic = broker
            .create_topic(
                NewTopic {
                    assignments: Vec::new(),
                    name: TopicName::new("t").unwrap(),
                    partitions: Some(1),
                    replication_factor: None,
                    kind: TopicKind::NonPartitioned,
                    config: TopicConfig::default(),
                },
                false,
            )
            .unwrap();
        let p = topic.partition(PartitionId(0)).unwrap().clone();
        let now = Timestamp(1);
        p.append(&pulsar_batch("a", 0, 0), now).unwrap(); // offset 0
        let mut kafka = BatchBuilder::new(Compression::None);
        kafka.append(now, None, Some(b"k"), &[]).unwrap();
        kafka.append(now, None, Some(b"k"), &[]).unwrap();
        p.append(&kafka.build().unwrap(), now).unwrap(); // 1..3
        p.append(&pulsar_batch("b", 5, 9), now).unwrap(); // 3
        p.append(&pulsar_batch("a", 1, 1), now).unwrap(); // 4

        let mut all = PartitionSequences::restore(SequenceSnapshot::default(), 0);
        replay(&p, &mut all).unwrap();
        assert_eq!((all.last("a"), all.last("b")), (1, 9));
        assert_eq!(all.covered(), Offset(5));

        // From a snapshot covering the first three batches: only the rest.
        let snapshot = SequenceSnapshot {
            covered: Offset(3),
            producers: [("a".to_string(), 0), ("c".to_string(), 2)]
                .into_iter()
                .map(|(n, sequence_id)| {
                    let last_active_ms = 1;
                    (
                        n,
                        ProducerEntry {
                            sequence_id,
                            last_active_ms,
                        },
                    )
                })
                .collect(),
        };
        let mut tail = PartitionSequences::restore(snapshot, 0);
        replay(&p, &mut tail).unwrap();
        assert_eq!((tail.last("a"), tail.last("b"), tail.last("c")), (1, 9, 2));
        // Nothing new: nothing read.
        replay(&p, &mut tail).unwrap();
        assert_eq!(tail.covered(), Offset(5));
        broker.shutdown().unwrap();
    }
}
