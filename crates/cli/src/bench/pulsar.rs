//! `bench --protocol pulsar`: the same workloads over the Pulsar binary
//! protocol, batching as the official Pulsar clients do by default (up to
//! 1,000 messages or 128 KiB per batch, `--linger-ms` as the batching
//! delay, one partition per batch as their round-robin router does) and
//! acknowledging in groups (every 100 ms or 1,000 entries).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use magnetar_pulsar_wire::payload::{compress, decode_payload, encode_batch, MessagePayload};
use magnetar_pulsar_wire::proto::command_ack::AckType;
use magnetar_pulsar_wire::proto::command_subscribe::{InitialPosition, SubType};
use magnetar_pulsar_wire::proto::{
    CommandAck, CommandCloseConsumer, CommandCloseProducer, CommandFlow, CommandProducer,
    CommandSend, CommandSubscribe, CommandUnsubscribe, CompressionType, MessageIdData,
    MessageMetadata, SingleMessageMetadata,
};
use magnetar_pulsar_wire::{command, Command};
use tokio::sync::mpsc;

use super::consume::{ConsumerResult, Consumers};
use super::pulsar_conn::{failed, unexpected, Conn, Event};
use super::{now_micros, Report, Workload};
use crate::error::CliError;

/// Batching limits of the official clients' defaults.
const BATCH_MESSAGES: u32 = 1000;
const BATCH_BYTES: usize = 128 * 1024;
/// Most unacknowledged messages per producer (as the Kafka path).
const WINDOW: u64 = 50_000;
/// Messages a consumer asks for at a time (the clients' receiver queue).
const PERMITS: u32 = 1000;
/// Acknowledgements are grouped for this long, or this many entries.
const ACK_GROUP_TIME: Duration = Duration::from_millis(100);
const ACK_GROUP_ENTRIES: usize = 1000;
/// Payloads larger than this are refused on decompression.
const MAX_UNCOMPRESSED: usize = 64 * 1024 * 1024;

/// The Pulsar topic name of a bench topic (the default namespace).
fn full_name(topic: &str) -> String {
    format!("persistent://public/default/{topic}")
}

/// Every partition of the bench topics (the topic itself when it is not
/// partitioned), looked up without creating anything.
async fn targets(conn: &Conn, topics: &[String]) -> Result<Vec<String>, CliError> {
    let mut out = Vec::new();
    for t in topics {
        let name = full_name(t);
        match conn.partitions(&name).await? {
            0 => out.push(name),
            n => out.extend((0..n).map(|p| format!("{name}-partition-{p}"))),
        }
    }
    Ok(out)
}

fn codec(w: &Workload) -> Result<CompressionType, CliError> {
    Ok(match w.compression.as_str() {
        "none" => CompressionType::None,
        "lz4" => CompressionType::Lz4,
        "gzip" | "zlib" => CompressionType::Zlib,
        "zstd" => CompressionType::Zstd,
        "snappy" => CompressionType::Snappy,
        other => {
            return Err(CliError::Usage(format!(
                "unknown compression {other:?} (none, gzip, snappy, lz4, zstd)"
            )))
        }
    })
}

/// One partition's producer and the batch it is filling.
struct Target {
    producer_id: u64,
    name: String,
    next_sequence: u64,
    batch: BytesMut,
    count: u32,
    /// Send times of the batch's messages (µs), for acknowledgement latency.
    sent_at: Vec<u64>,
    opened: Instant,
}

/// Runs the producers for the workload's duration and reports.
pub async fn produce(w: &Workload, done: Arc<AtomicU64>) -> Result<Report, CliError> {
    let codec = codec(w)?;
    let deadline = Instant::now() + Duration::from_secs(w.duration);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..w.producers {
        let (conn, events) = Conn::connect(&w.service_url).await?;
        let mut targets_of = Vec::new();
        for (index, topic) in targets(&conn, &w.topic_names())
            .await?
            .into_iter()
            .enumerate()
        {
            let producer_id = index as u64;
            let answer = conn
                .request(|request_id| {
                    Command::Producer(CommandProducer {
                        topic: topic.clone(),
                        producer_id,
                        request_id,
                        ..Default::default()
                    })
                })
                .await?;
            let name = match answer {
                Command::ProducerSuccess(ok) => ok.producer_name,
                other => return Err(unexpected(conn.url(), &other)),
            };
            targets_of.push(Target {
                producer_id,
                name,
                next_sequence: 0,
                batch: BytesMut::new(),
                count: 0,
                sent_at: Vec::new(),
                opened: Instant::now(),
            });
        }
        let rate = (w.rate as f64 / w.producers as f64).max(0.0);
        let (size, linger) = (w.message_size, Duration::from_millis(w.linger_ms));
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut p = Producing {
                conn,
                events,
                targets: targets_of,
                current: i,
                in_flight: HashMap::new(),
                unacked: 0,
                report: Report::new("produce"),
                scratch: BytesMut::new(),
                codec,
                size,
                linger,
                done,
            };
            p.run(rate, deadline).await?;
            for t in &p.targets {
                let producer_id = t.producer_id;
                p.conn
                    .request(|request_id| {
                        Command::CloseProducer(CommandCloseProducer {
                            producer_id,
                            request_id,
                            ..Default::default()
                        })
                    })
                    .await?;
            }
            Ok::<_, CliError>(p.report)
        }));
    }
    let mut report = Report::new("produce");
    for t in tasks {
        let r = t
            .await
            .map_err(|e| CliError::Usage(format!("producer task failed: {e}")))??;
        report.messages += r.messages;
        report.bytes += r.bytes;
        report.errors += r.errors;
        let _ = report.latency.add(&r.latency);
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// One benchmark producer (one connection, a producer per partition).
struct Producing {
    conn: Conn,
    events: mpsc::UnboundedReceiver<Event>,
    targets: Vec<Target>,
    /// The partition now being filled.
    current: usize,
    /// (producer id, sequence id) → send times of that batch's messages.
    in_flight: HashMap<(u64, u64), Vec<u64>>,
    unacked: u64,
    report: Report,
    scratch: BytesMut,
    codec: CompressionType,
    size: usize,
    linger: Duration,
    done: Arc<AtomicU64>,
}

impl Producing {
    async fn run(&mut self, rate: f64, deadline: Instant) -> Result<(), CliError> {
        let start = Instant::now();
        let mut sent: u64 = 0;
        let mut value = vec![b'x'; self.size];
        while Instant::now() < deadline {
            // A burst of messages between checks of the clock and events.
            for _ in 0..64 {
                if rate > 0.0
                    && start + Duration::from_secs_f64(sent as f64 / rate) > Instant::now()
                {
                    break;
                }
                if self.unacked >= WINDOW {
                    break;
                }
                let now = now_micros();
                value[..8].copy_from_slice(&now.to_be_bytes());
                self.add(&value, now)?;
                sent += 1;
            }
            self.flush_lingering()?;
            while let Ok(e) = self.events.try_recv() {
                self.on_event(e)?;
            }
            let next_due =
                (rate > 0.0).then(|| start + Duration::from_secs_f64(sent as f64 / rate));
            if self.unacked >= WINDOW {
                let e = self.events.recv().await;
                self.on_event_opt(e)?;
            } else if let Some(due) = next_due.filter(|d| *d > Instant::now()) {
                // Wait for the next message's slot, the oldest batch's
                // linger or an event, whichever comes first.
                let until = self
                    .targets
                    .iter()
                    .filter(|t| t.count > 0)
                    .map(|t| t.opened + self.linger)
                    .min()
                    .map_or(due, |l| l.min(due));
                tokio::select! {
                    _ = tokio::time::sleep_until(until.into()) => {}
                    e = self.events.recv() => self.on_event_opt(e)?,
                }
            } else {
                tokio::task::yield_now().await;
            }
        }
        for i in 0..self.targets.len() {
            self.flush(i)?;
        }
        let drain = Instant::now() + Duration::from_secs(30);
        while !self.in_flight.is_empty() && Instant::now() < drain {
            let e = tokio::time::timeout_at(drain.into(), self.events.recv()).await;
            match e {
                Ok(e) => self.on_event_opt(e)?,
                Err(_) => break,
            }
        }
        self.report.errors += self.unacked;
        Ok(())
    }

    /// Adds one message to the current partition's batch.
    fn add(&mut self, value: &[u8], now: u64) -> Result<(), CliError> {
        let t = &mut self.targets[self.current];
        if t.count == 0 {
            t.opened = Instant::now();
        }
        encode_batch(
            std::iter::once((SingleMessageMetadata::default(), value)),
            &mut t.batch,
        )
        .map_err(|e| failed(self.conn.url(), "cannot encode a message", e))?;
        t.count += 1;
        t.sent_at.push(now);
        self.unacked += 1;
        if t.count >= BATCH_MESSAGES || t.batch.len() >= BATCH_BYTES {
            self.flush(self.current)?;
        }
        Ok(())
    }

    fn flush_lingering(&mut self) -> Result<(), CliError> {
        for i in 0..self.targets.len() {
            let t = &self.targets[i];
            if t.count > 0 && t.opened.elapsed() >= self.linger {
                self.flush(i)?;
            }
        }
        Ok(())
    }

    /// Sends partition `i`'s batch, if any; the next batch goes to the next
    /// partition.
    fn flush(&mut self, i: usize) -> Result<(), CliError> {
        let t = &mut self.targets[i];
        if t.count == 0 {
            return Ok(());
        }
        let sequence_id = t.next_sequence;
        t.next_sequence += 1;
        let mut metadata = MessageMetadata {
            producer_name: t.name.clone(),
            sequence_id,
            publish_time: now_micros() / 1000,
            num_messages_in_batch: Some(t.count as i32),
            ..Default::default()
        };
        let data = t.batch.split().freeze();
        let data = if self.codec == CompressionType::None {
            data
        } else {
            metadata.compression = Some(self.codec as i32);
            metadata.uncompressed_size = Some(data.len() as u32);
            compress(self.codec, &data)
                .map_err(|e| failed(self.conn.url(), "cannot compress a batch", e))?
        };
        let send = command(CommandSend {
            producer_id: t.producer_id,
            sequence_id,
            num_messages: Some(t.count as i32),
            ..Default::default()
        });
        self.conn
            .send_payload(&send, &metadata, &data, &mut self.scratch)?;
        self.in_flight
            .insert((t.producer_id, sequence_id), std::mem::take(&mut t.sent_at));
        t.count = 0;
        if i == self.current {
            self.current = (self.current + 1) % self.targets.len();
        }
        Ok(())
    }

    fn on_event_opt(&mut self, e: Option<Event>) -> Result<(), CliError> {
        match e {
            Some(e) => self.on_event(e),
            None => Err(failed(self.conn.url(), "connection lost", "closed")),
        }
    }

    fn on_event(&mut self, e: Event) -> Result<(), CliError> {
        match e {
            Event::Receipt {
                producer_id,
                sequence_id,
                result,
            } => {
                let Some(sent_at) = self.in_flight.remove(&(producer_id, sequence_id)) else {
                    return Ok(());
                };
                self.unacked -= sent_at.len() as u64;
                match result {
                    Ok(()) => {
                        let now = now_micros();
                        for s in &sent_at {
                            self.report.record(self.size, now.saturating_sub(*s));
                        }
                        self.done.fetch_add(sent_at.len() as u64, Ordering::Relaxed);
                    }
                    Err(_) => self.report.errors += sent_at.len() as u64,
                }
                Ok(())
            }
            Event::Message { .. } => Ok(()),
            Event::Closed(why) => Err(failed(self.conn.url(), "producing failed", why)),
        }
    }
}

/// Starts `w.consumers` consumers on one Shared subscription named
/// `subscription` over every partition of the bench topics.
pub async fn start_consumers(
    w: &Workload,
    earliest: bool,
    subscription: &str,
    measure_latency: bool,
) -> Result<Consumers, CliError> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let done = Arc::new(AtomicU64::new(0));
    let not_before = now_micros();
    let mut tasks = Vec::new();
    let mut subscribed = Vec::new();
    for _ in 0..w.consumers {
        let (conn, events) = Conn::connect(&w.service_url).await?;
        let targets = targets(&conn, &w.topic_names()).await?;
        for (index, topic) in targets.iter().enumerate() {
            let consumer_id = index as u64;
            let answer = conn
                .request(|request_id| {
                    Command::Subscribe(CommandSubscribe {
                        topic: topic.clone(),
                        subscription: subscription.to_string(),
                        sub_type: SubType::Shared as i32,
                        consumer_id,
                        request_id,
                        initial_position: Some(if earliest {
                            InitialPosition::Earliest
                        } else {
                            InitialPosition::Latest
                        } as i32),
                        ..Default::default()
                    })
                })
                .await?;
            if !matches!(answer, Command::Success(_)) {
                return Err(unexpected(conn.url(), &answer));
            }
            conn.send(&command(CommandFlow {
                consumer_id,
                message_permits: PERMITS,
            }))?;
        }
        subscribed.push(AtomicU64::new(targets.len() as u64));
        let mut consuming = Consuming {
            conn,
            events,
            granted: vec![0; targets.len()],
            acks: vec![Vec::new(); targets.len()],
            report: Report::new(if measure_latency { "e2e" } else { "consume" }),
            seen: None,
            not_before: measure_latency.then_some(not_before),
            done: done.clone(),
        };
        let mut stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            let r: ConsumerResult = async {
                consuming.run(&mut stop).await?;
                consuming.flush_acks()?;
                for consumer_id in 0..consuming.acks.len() as u64 {
                    consuming
                        .conn
                        .request(|request_id| {
                            Command::CloseConsumer(CommandCloseConsumer {
                                consumer_id,
                                request_id,
                                ..Default::default()
                            })
                        })
                        .await?;
                }
                Ok((consuming.report, consuming.seen))
            }
            .await;
            r
        }));
    }
    Ok(Consumers::new(tasks, stop_tx, done, subscribed))
}

/// Removes the subscription from every partition of the bench topics
/// (after its consumers have closed).
pub async fn unsubscribe(w: &Workload, subscription: &str) -> Result<(), CliError> {
    let (conn, _events) = Conn::connect(&w.service_url).await?;
    for (index, topic) in targets(&conn, &w.topic_names())
        .await?
        .into_iter()
        .enumerate()
    {
        let consumer_id = index as u64;
        let answer = conn
            .request(|request_id| {
                Command::Subscribe(CommandSubscribe {
                    topic,
                    subscription: subscription.to_string(),
                    sub_type: SubType::Shared as i32,
                    consumer_id,
                    request_id,
                    ..Default::default()
                })
            })
            .await?;
        if !matches!(answer, Command::Success(_)) {
            return Err(unexpected(conn.url(), &answer));
        }
        let answer = conn
            .request(|request_id| {
                Command::Unsubscribe(CommandUnsubscribe {
                    consumer_id,
                    request_id,
                    ..Default::default()
                })
            })
            .await?;
        if !matches!(answer, Command::Success(_)) {
            return Err(unexpected(conn.url(), &answer));
        }
    }
    Ok(())
}

/// One benchmark consumer (one connection, a consumer per partition).
struct Consuming {
    conn: Conn,
    events: mpsc::UnboundedReceiver<Event>,
    /// Messages received per consumer since permits were last granted.
    granted: Vec<u32>,
    /// Entries to acknowledge, per consumer.
    acks: Vec<Vec<MessageIdData>>,
    report: Report,
    seen: Option<(Instant, Instant)>,
    not_before: Option<u64>,
    done: Arc<AtomicU64>,
}

impl Consuming {
    async fn run(&mut self, stop: &mut tokio::sync::watch::Receiver<bool>) -> Result<(), CliError> {
        let mut ack_timer = tokio::time::interval(ACK_GROUP_TIME);
        loop {
            tokio::select! {
                _ = stop.changed() => return Ok(()),
                _ = ack_timer.tick() => self.flush_acks()?,
                e = self.events.recv() => match e {
                    Some(Event::Message { consumer_id, id, ack_set, payload }) => {
                        self.on_message(consumer_id, id, &ack_set, payload)?;
                    }
                    Some(Event::Closed(why)) => {
                        return Err(failed(self.conn.url(), "consuming failed", why))
                    }
                    Some(Event::Receipt { .. }) => {}
                    None => return Err(failed(self.conn.url(), "connection lost", "closed")),
                },
            }
        }
    }

    fn on_message(
        &mut self,
        consumer_id: u64,
        id: MessageIdData,
        ack_set: &[i64],
        payload: Box<magnetar_pulsar_wire::frame::Payload>,
    ) -> Result<(), CliError> {
        let url = self.conn.url().to_string();
        let decoded = decode_payload(&payload.metadata, payload.data, MAX_UNCOMPRESSED)
            .map_err(|e| failed(&url, "bad message", e))?;
        let mut count = 0u32;
        match decoded {
            MessagePayload::Single(value) => {
                self.one(&value);
                count += 1;
            }
            MessagePayload::Batch(batch) => {
                // A set `ack_set` names the messages of the batch that are
                // this consumer's (the others were acknowledged or go to
                // another consumer), as the official clients read it.
                let mine = |i: usize| {
                    ack_set.is_empty()
                        || ack_set
                            .get(i / 64)
                            .is_some_and(|w| w & (1i64 << (i % 64)) != 0)
                };
                for (i, entry) in batch.enumerate() {
                    let (_, value) = entry.map_err(|e| failed(&url, "bad batch", e))?;
                    if mine(i) {
                        self.one(&value);
                        count += 1;
                    }
                }
            }
        }
        let c = consumer_id as usize;
        if c >= self.acks.len() {
            return Ok(());
        }
        self.acks[c].push(MessageIdData {
            ledger_id: id.ledger_id,
            entry_id: id.entry_id,
            ..Default::default()
        });
        self.granted[c] += count;
        if self.granted[c] >= PERMITS / 2 {
            self.conn.send(&command(CommandFlow {
                consumer_id,
                message_permits: std::mem::take(&mut self.granted[c]),
            }))?;
        }
        if self.acks[c].len() >= ACK_GROUP_ENTRIES {
            self.flush_acks()?;
        }
        Ok(())
    }

    /// Counts one message (and its end-to-end latency).
    fn one(&mut self, value: &[u8]) {
        let sent = value
            .get(..8)
            .map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])));
        let latency = match self.not_before {
            // End-to-end runs count only this run's messages.
            Some(not_before) if sent < not_before => return,
            Some(_) => now_micros().saturating_sub(sent),
            None => 0,
        };
        self.report.record(value.len(), latency);
        let now = Instant::now();
        self.seen = Some((self.seen.map_or(now, |(first, _)| first), now));
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    fn flush_acks(&mut self) -> Result<(), CliError> {
        for (consumer_id, ids) in self.acks.iter_mut().enumerate() {
            if ids.is_empty() {
                continue;
            }
            self.conn.send(&command(CommandAck {
                consumer_id: consumer_id as u64,
                ack_type: AckType::Individual as i32,
                message_id: std::mem::take(ids),
                ..Default::default()
            }))?;
        }
        Ok(())
    }
}
