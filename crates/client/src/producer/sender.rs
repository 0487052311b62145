//! The producer's background task: metadata for queued topics, the
//! producer id, draining batches into Produce requests and handling their
//! answers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    InitProducerIdRequest, ProduceRequest, ProduceResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions};
use kafka_protocol::ResponseError;
use tokio::task::{AbortHandle, JoinSet};

use super::accumulator::{take_sendable, Ack, Batch, SharedAccumulator};
use super::builder::ProducerConfig;
use super::Acks;
use crate::client::Client;
use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::metadata::NodeId;

/// Aborts the sender task when the producer is dropped.
pub(crate) struct SenderHandle(AbortHandle);

impl Drop for SenderHandle {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) fn spawn(
    acc: Arc<SharedAccumulator>,
    client: Client,
    config: Arc<ProducerConfig>,
) -> SenderHandle {
    let sender = Sender {
        idempotent: config.idempotence,
        acc,
        client,
        config,
        producer: None,
        in_flight: HashMap::new(),
        connecting: HashSet::new(),
        tasks: JoinSet::new(),
        next_metadata: Instant::now(),
        next_init: Instant::now(),
        next_expire: Instant::now(),
    };
    SenderHandle(tokio::spawn(sender.run()).abort_handle())
}

/// A batch on its way, with where it goes.
struct InFlight {
    topic: String,
    partition: i32,
    batch: Batch,
}

enum Event {
    /// A Produce request came back (or failed as a whole).
    Produced {
        node: NodeId,
        batches: Vec<InFlight>,
        result: Result<ProduceResponse>,
    },
    /// A connection attempt to a leader finished.
    Connected(NodeId),
}

struct Sender {
    acc: Arc<SharedAccumulator>,
    client: Client,
    config: Arc<ProducerConfig>,
    idempotent: bool,
    /// `(producer id, epoch)` once InitProducerId succeeded.
    producer: Option<(i64, i16)>,
    in_flight: HashMap<NodeId, usize>,
    connecting: HashSet<NodeId>,
    tasks: JoinSet<Event>,
    next_metadata: Instant,
    next_init: Instant,
    next_expire: Instant,
}

impl Sender {
    async fn run(mut self) {
        loop {
            let mut deadline = None;
            if self.idempotent && self.producer.is_none() {
                self.init_producer_id(&mut deadline).await;
            }
            self.update_metadata(&mut deadline).await;
            self.expire();
            if !self.idempotent || self.producer.is_some() {
                self.drain(&mut deadline);
            }
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.acc.wake.notified() => {}
                Some(ev) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    if let Ok(ev) = ev {
                        self.handle(ev);
                    }
                }
                _ = sleep => {}
            }
        }
    }

    async fn init_producer_id(&mut self, deadline: &mut Option<Instant>) {
        let now = Instant::now();
        if now < self.next_init {
            lower(deadline, self.next_init);
            return;
        }
        match self.request_producer_id().await {
            Ok(id) => {
                tracing::debug!(
                    producer_id = id.0,
                    epoch = id.1,
                    "idempotent producer ready"
                );
                self.producer = Some(id);
            }
            Err(Error::NotSupported(why)) if !self.config.idempotence_explicit => {
                tracing::warn!(%why, "broker lacks InitProducerId; idempotence off");
                self.idempotent = false;
            }
            Err(e) if e.is_retriable() => {
                tracing::debug!(error = %e, "InitProducerId failed; retrying");
                self.next_init = now + self.config.retry_backoff;
                lower(deadline, self.next_init);
            }
            Err(e) => {
                tracing::error!(error = %e, "idempotent producer cannot start");
                let mut acc = self.acc.state.lock().unwrap();
                acc.fatal = Some(e.clone());
                let n = acc.fail_all(&e);
                self.acc.records_done(&mut acc, n);
            }
        }
    }

    async fn request_producer_id(&self) -> Result<(i64, i16)> {
        let conn = self.client.any_connection().await?;
        let v = conn.versions().pick::<InitProducerIdRequest>()?;
        let mut req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX);
        if v < 3 {
            // Those versions lack the fields; keep them at their defaults.
            req = req.with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
        }
        let resp = conn.send(v, &req)?.await?;
        Error::check(resp.error_code, None)?;
        Ok((resp.producer_id.0, resp.producer_epoch))
    }

    /// Fetches metadata for topics with records waiting for it or whose
    /// leaders went stale, at most once per retry backoff.
    async fn update_metadata(&mut self, deadline: &mut Option<Instant>) {
        let wanted: Vec<String> = {
            let acc = self.acc.state.lock().unwrap();
            acc.topics
                .iter()
                .filter(|(_, t)| t.partitions.is_none() || t.stale || t.waiting_since.is_some())
                .map(|(n, _)| n.clone())
                .collect()
        };
        if wanted.is_empty() {
            return;
        }
        let now = Instant::now();
        if now < self.next_metadata {
            lower(deadline, self.next_metadata);
            return;
        }
        self.next_metadata = now + self.config.retry_backoff;
        let names: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let results = match self
            .client
            .fetch_metadata(Some(&names), self.config.allow_auto_create_topics)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "producer metadata refresh failed");
                lower(deadline, self.next_metadata);
                return;
            }
        };
        let mut acc = self.acc.state.lock().unwrap();
        let mut done = 0;
        for (name, r) in results {
            match r {
                Ok(md) if !md.partitions.is_empty() => {
                    done += acc.resolve_topic(
                        &name,
                        md.partitions.len() as i32,
                        self.config.batch_size,
                    );
                }
                Ok(_) => lower(deadline, self.next_metadata),
                Err(e) if e.is_retriable() => {
                    // Unknown topics and leader elections are retried until
                    // the delivery timeout.
                    lower(deadline, self.next_metadata);
                }
                Err(e) => {
                    done += acc.fail_waiting(&name, &e);
                }
            }
        }
        self.acc.records_done(&mut acc, done);
    }

    fn expire(&mut self) {
        // A scan of every partition: often enough for a timeout counted in
        // seconds, rarely enough to cost nothing per record.
        let now = Instant::now();
        if now < self.next_expire {
            return;
        }
        self.next_expire = now + Duration::from_millis(100);
        let mut acc = self.acc.state.lock().unwrap();
        let (n, gap) = acc.expire(now, self.config.delivery_timeout);
        if n > 0 {
            self.acc.records_done(&mut acc, n);
        }
        if gap && self.idempotent {
            // A sequence number was skipped: start over with a new id.
            self.producer = None;
            acc.reset_sequences();
        }
    }

    /// Takes every batch that may go now and sends one request per leader,
    /// at most one batch per partition each.
    fn drain(&mut self, deadline: &mut Option<Instant>) {
        let md = self.client.metadata();
        loop {
            let now = Instant::now();
            let mut per_node: HashMap<NodeId, Vec<InFlight>> = HashMap::new();
            {
                let mut acc = self.acc.state.lock().unwrap();
                let hurry = acc.flushing > 0 || acc.closed;
                for (topic, tq) in acc.topics.iter_mut() {
                    for p in 0..tq.parts.len() {
                        let pq = &tq.parts[p];
                        if pq.open.is_none() && pq.ready.is_empty() {
                            continue;
                        }
                        let Some(leader) = md.leader(topic, p as i32) else {
                            // No leader (an election, a broker down): look
                            // again after the backoff. Waking for it also
                            // expires these records on time, not never.
                            tq.stale = true;
                            lower(
                                deadline,
                                self.next_metadata.max(now + self.config.retry_backoff),
                            );
                            continue;
                        };
                        let busy = self.in_flight.get(&leader).copied().unwrap_or(0)
                            + per_node
                                .get(&leader)
                                .map_or(0, |v| (!v.is_empty()) as usize);
                        if busy >= self.config.max_in_flight {
                            continue;
                        }
                        if self.client.cached_connection(leader).is_none() {
                            if self.connecting.insert(leader) {
                                let client = self.client.clone();
                                self.tasks.spawn(async move {
                                    if let Err(e) = client.connection(leader).await {
                                        tracing::debug!(broker = %leader, error = %e, "leader unreachable");
                                    }
                                    Event::Connected(leader)
                                });
                            }
                            continue;
                        }
                        if let Some(mut batch) =
                            take_sendable(tq, p, now, self.config.linger, hurry, deadline)
                        {
                            let pq = &mut tq.parts[p];
                            if self.idempotent {
                                let (pid, epoch) = self.producer.expect("drain runs with an id");
                                if batch
                                    .sequence
                                    .is_none_or(|(id, e, _)| id != pid || e != epoch)
                                {
                                    let seq = pq.next_sequence;
                                    pq.next_sequence = next_sequence(seq, batch.len());
                                    batch.sequence = Some((pid, epoch, seq));
                                    batch.encoded = None;
                                }
                            }
                            pq.in_flight += 1;
                            per_node.entry(leader).or_default().push(InFlight {
                                topic: topic.clone(),
                                partition: p as i32,
                                batch,
                            });
                        }
                    }
                }
            }
            if per_node.is_empty() {
                return;
            }
            for (node, batches) in per_node {
                self.send(node, batches);
            }
        }
    }

    fn send(&mut self, node: NodeId, mut batches: Vec<InFlight>) {
        let conn = self.client.cached_connection(node);
        let request = conn
            .as_ref()
            .ok_or_else(|| Error::NotFound(format!("connection to broker {node}")))
            .and_then(|c| self.build_request(c, &mut batches));
        let (conn, (version, req)) = match (conn, request) {
            (Some(c), Ok(r)) => (c, r),
            (_, Err(e)) => {
                self.tasks.spawn(async move {
                    Event::Produced {
                        node,
                        batches,
                        result: Err(e),
                    }
                });
                *self.in_flight.entry(node).or_default() += 1;
                return;
            }
            (None, Ok(_)) => unreachable!("request built only with a connection"),
        };
        *self.in_flight.entry(node).or_default() += 1;
        if self.config.acks == Acks::None {
            let result = conn
                .send_oneway(version, &req)
                .map(|_| ProduceResponse::default());
            self.tasks.spawn(async move {
                Event::Produced {
                    node,
                    batches,
                    result,
                }
            });
            return;
        }
        match conn.send_with_timeout(version, &req, self.config.request_timeout) {
            Ok(fut) => {
                self.tasks.spawn(async move {
                    Event::Produced {
                        node,
                        batches,
                        result: fut.await,
                    }
                });
            }
            Err(e) => {
                self.tasks.spawn(async move {
                    Event::Produced {
                        node,
                        batches,
                        result: Err(e),
                    }
                });
            }
        }
    }

    fn build_request(
        &self,
        conn: &Connection,
        batches: &mut [InFlight],
    ) -> Result<(i16, ProduceRequest)> {
        let version = conn.versions().pick::<ProduceRequest>()?;
        let mut topics: Vec<TopicProduceData> = Vec::new();
        for f in batches.iter_mut() {
            let bytes = encode(&mut f.batch, &self.config)?;
            let data = PartitionProduceData::default()
                .with_index(f.partition)
                .with_records(Some(bytes));
            match topics.iter_mut().find(|t| t.name.0.as_str() == f.topic) {
                Some(t) => t.partition_data.push(data),
                None => topics.push(
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(f.topic.clone())))
                        .with_partition_data(vec![data]),
                ),
            }
        }
        let timeout_ms = self
            .config
            .request_timeout
            .as_millis()
            .min(i32::MAX as u128) as i32;
        Ok((
            version,
            ProduceRequest::default()
                .with_transactional_id(None)
                .with_acks(self.config.acks.as_i16())
                .with_timeout_ms(timeout_ms)
                .with_topic_data(topics),
        ))
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Connected(node) => {
                self.connecting.remove(&node);
            }
            Event::Produced {
                node,
                batches,
                result,
            } => {
                if let Some(n) = self.in_flight.get_mut(&node) {
                    *n = n.saturating_sub(1);
                }
                self.produced(batches, result);
            }
        }
    }

    fn produced(&mut self, batches: Vec<InFlight>, result: Result<ProduceResponse>) {
        let mut acc = self.acc.state.lock().unwrap();
        let mut done = 0;
        let mut reset = false;
        for mut f in batches {
            let outcome = match &result {
                Err(e) => Err(e.clone()),
                Ok(_) if self.config.acks == Acks::None => Ok(Ack {
                    partition: f.partition,
                    base_offset: -1,
                    log_append_time: -1,
                }),
                Ok(resp) => partition_outcome(resp, &f.topic, f.partition),
            };
            let Some(tq) = acc.topics.get_mut(&f.topic) else {
                continue;
            };
            let pq = &mut tq.parts[f.partition as usize];
            pq.in_flight = pq.in_flight.saturating_sub(1);
            let blocked = pq.blocked;
            let e = match outcome {
                Ok(ack) => {
                    done += f.batch.len();
                    f.batch.completion.complete(Ok(ack));
                    continue;
                }
                Err(e) => e,
            };
            let kind = e.kafka_error();
            if kind == Some(ResponseError::DuplicateSequenceNumber) {
                done += f.batch.len();
                f.batch.completion.complete(Ok(Ack {
                    partition: f.partition,
                    base_offset: -1,
                    log_append_time: -1,
                }));
                continue;
            }
            // After an earlier batch of the partition failed, later ones
            // are refused as out of order: that is part of the same retry.
            let out_of_order = kind == Some(ResponseError::OutOfOrderSequenceNumber);
            let unknown_pid = kind == Some(ResponseError::UnknownProducerId);
            let retriable = e.is_retriable() || (out_of_order && blocked) || unknown_pid;
            f.batch.attempts += 1;
            let expired = f.batch.created.elapsed() >= self.config.delivery_timeout;
            if retriable && f.batch.attempts <= self.config.retries && !expired {
                tracing::debug!(topic = %f.topic, partition = f.partition, error = %e, "retrying batch");
                if e.invalidates_metadata() {
                    tq.stale = true;
                }
                if unknown_pid {
                    reset = true;
                }
                f.batch.retry_after = Some(Instant::now() + self.config.retry_backoff);
                tq.parts[f.partition as usize].requeue(f.batch);
            } else {
                if out_of_order {
                    reset = true;
                }
                done += f.batch.len();
                let e = if expired && retriable {
                    Error::Timeout(self.config.delivery_timeout)
                } else {
                    e
                };
                f.batch.completion.complete(Err(e));
            }
        }
        if reset && self.idempotent {
            self.producer = None;
            acc.reset_sequences();
        }
        self.acc.records_done(&mut acc, done);
    }
}

fn lower(deadline: &mut Option<Instant>, at: Instant) {
    *deadline = Some(deadline.map_or(at, |d| d.min(at)));
}

/// Kafka sequences wrap from `i32::MAX` to 0.
fn next_sequence(seq: i32, n: usize) -> i32 {
    ((seq as i64 + n as i64) % (i32::MAX as i64 + 1)) as i32
}

/// Encodes a batch once; retries reuse the bytes unless the producer id
/// changed.
pub(crate) fn encode(batch: &mut Batch, config: &ProducerConfig) -> Result<Bytes> {
    if let Some(b) = &batch.encoded {
        return Ok(b.clone());
    }
    let (pid, epoch, base) = batch.sequence.unwrap_or((-1, -1, -1));
    for (i, r) in batch.records.iter_mut().enumerate() {
        r.producer_id = pid;
        r.producer_epoch = epoch;
        r.offset = i as i64;
        // offset - sequence must stay constant for the encoder to keep one
        // batch; without an id the base sequence comes out as -1.
        r.sequence = if base >= 0 {
            base.wrapping_add(i as i32)
        } else {
            i as i32 - 1
        };
    }
    let mut buf = BytesMut::with_capacity(batch.bytes + 61);
    RecordBatchEncoder::encode(
        &mut buf,
        &batch.records,
        &RecordEncodeOptions {
            version: 2,
            compression: config.compression.to_protocol(),
        },
    )
    .map_err(|e| Error::protocol("encoding record batch", e))?;
    let bytes = buf.freeze();
    batch.encoded = Some(bytes.clone());
    Ok(bytes)
}

fn partition_outcome(resp: &ProduceResponse, topic: &str, partition: i32) -> Result<Ack> {
    let p = resp
        .responses
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partition_responses.iter())
        .find(|p| p.index == partition)
        .ok_or_else(|| Error::Protocol(format!("no answer for {topic}/{partition}")))?;
    Error::check(p.error_code, p.error_message.as_deref())?;
    Ok(Ack {
        partition,
        base_offset: p.base_offset,
        log_append_time: p.log_append_time_ms,
    })
}
