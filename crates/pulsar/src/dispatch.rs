//! Delivering messages: one task per subscription (a subscription's
//! consumers may sit on different connections) reads the partition where
//! the subscription core says, lets the core pick each message's consumer
//! within its permits, and writes MESSAGE frames to the consumers'
//! connections.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use broker::coordinator_error::CoordError;
use broker::subscription::{ConsumerId, Entry, LogBounds, Read, SubscriptionKey};
use broker::traffic::Traffic;
use broker::{Broker, Partition};
use bytes::{Bytes, BytesMut};
use magnetar_pulsar_wire::proto::{CommandMessage, MessageIdData};
use magnetar_pulsar_wire::{command, encode_payload_command};
use model::Offset;
use parking_lot::Mutex;
use storage::BatchHeader;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::convert::{self, Entry as PulsarEntry};
use crate::message_id::IdSpace;
use magnetar_pulsar_core::admin::ClientInfo;

/// Most bytes read from the log per dispatch round.
const READ_BYTES: usize = 1 << 20;

/// Where a consumer's messages go.
#[derive(Debug, Clone)]
pub struct ConsumerOutlet {
    /// Its connection's outbound frames.
    pub out: mpsc::Sender<Bytes>,
    /// The consumer id the client chose.
    pub consumer_id: u64,
    /// Its subscription.
    pub key: SubscriptionKey,
    /// Its client.
    pub client: Arc<ClientInfo>,
    /// What was delivered to it.
    pub traffic: Arc<Traffic>,
    /// When it attached (ms since the epoch).
    pub attached_ms: i64,
    /// Message ids of its partition.
    pub ids: IdSpace,
    /// Whether redelivery counts are reported (Shared and Key_Shared, as
    /// upstream; 0 otherwise).
    pub report_redeliveries: bool,
    /// The partition it reads.
    pub partition: Arc<Partition>,
}

/// Consumers attached on every connection, and the running dispatchers.
#[derive(Debug, Default)]
pub struct Dispatchers {
    outlets: Mutex<HashMap<ConsumerId, ConsumerOutlet>>,
    running: Mutex<HashMap<SubscriptionKey, ()>>,
}

impl Dispatchers {
    /// Registers where `id`'s messages go.
    pub fn add_outlet(&self, id: ConsumerId, outlet: ConsumerOutlet) {
        self.outlets.lock().insert(id, outlet);
    }

    /// Forgets a consumer.
    pub fn remove_outlet(&self, id: ConsumerId) {
        self.outlets.lock().remove(&id);
    }

    /// The consumers attached to subscription `key`, by consumer id.
    pub fn outlets_of(&self, key: &SubscriptionKey) -> Vec<(ConsumerId, ConsumerOutlet)> {
        let mut out: Vec<(ConsumerId, ConsumerOutlet)> = self
            .outlets
            .lock()
            .iter()
            .filter(|(_, o)| &o.key == key)
            .map(|(id, o)| (*id, o.clone()))
            .collect();
        out.sort_by_key(|(id, o)| (o.attached_ms, id.connection, id.consumer));
        out
    }

    /// The consumers of partitions no longer led here.
    pub fn moved_outlets(&self) -> Vec<(ConsumerId, ConsumerOutlet)> {
        self.outlets
            .lock()
            .iter()
            .filter(|(_, o)| !o.partition.leads())
            .map(|(id, o)| (*id, o.clone()))
            .collect()
    }

    /// Where `id`'s messages go, if it is attached.
    pub fn outlet_of(&self, id: ConsumerId) -> Option<ConsumerOutlet> {
        self.outlets.lock().get(&id).cloned()
    }

    /// Makes sure a dispatcher runs for `key` (it stops by itself once the
    /// subscription is gone).
    pub fn ensure_running(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        key: SubscriptionKey,
        partition: Arc<Partition>,
    ) {
        if self.running.lock().insert(key.clone(), ()).is_some() {
            return;
        }
        let me = self.clone();
        let broker = broker.clone();
        tokio::spawn(async move {
            run(&me, &broker, &key, &partition).await;
            me.running.lock().remove(&key);
            // A subscribe may have raced with the exit: start again if the
            // subscription is still there.
            if broker.subscriptions().waker(&key).is_some() && !partition.log().is_deleted() {
                me.ensure_running(&broker, key, partition);
            }
        });
    }
}

async fn run(d: &Dispatchers, broker: &Broker, key: &SubscriptionKey, partition: &Arc<Partition>) {
    let subs = broker.subscriptions();
    let max_decompressed = (broker.config().message_max_bytes() as u64 * 32).max(16 << 20);
    loop {
        let Some(waker) = subs.waker(key) else { return };
        let log = partition.log();
        if log.is_deleted() {
            return;
        }
        // Consumers read below the high watermark (the log end on a
        // partition with one replica).
        let bounds = LogBounds {
            start: log.log_start_offset(),
            end: log.high_watermark(),
        };
        let plan = match subs.next_read(key, bounds) {
            Ok(p) => p,
            Err(_) => return,
        };
        let Some(plan) = plan.filter(|p| p.from < bounds.end) else {
            // Nothing to send (no permits, or everything delivered): wait
            // for a change in the subscription or for new records.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            tokio::select! {
                _ = waker.notified() => {}
                _ = partition.wait_for(bounds.end, deadline) => {}
            }
            continue;
        };
        let read = {
            let partition = partition.clone();
            let from = plan.from;
            let max_messages = plan.max_messages;
            tokio::task::spawn_blocking(move || {
                read_entries(&partition, from, max_messages, max_decompressed)
            })
            .await
        };
        let (entries, end) = match read {
            Ok(Ok(r)) => r,
            Ok(Err(ReadFailure::OutOfRange)) => {
                // Retention moved the start: the core skips ahead next round.
                let read = Read {
                    plan,
                    entries: &[],
                    end: plan.from,
                };
                let _ = subs.dispatch(key, &read, log.log_start_offset());
                tokio::task::yield_now().await;
                continue;
            }
            Ok(Err(ReadFailure::Other(e))) => {
                warn!(subscription = %key.name, topic = %key.topic, partition = key.partition, "cannot read for dispatch: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(_) => return,
        };
        let index: Vec<Entry> = entries
            .iter()
            .flat_map(|e| {
                (0..e.count).map(move |i| Entry {
                    offset: Offset(e.base_offset.0 + i as i64),
                    batch: e.base_offset,
                    key_hash: e.key_hash,
                })
            })
            .collect();
        let read = Read {
            plan,
            entries: &index,
            end,
        };
        let deliveries = match subs.dispatch(key, &read, log.log_start_offset()) {
            Ok(d) => d,
            Err(CoordError::SubscriptionNotFound(_)) => return,
            Err(e) => {
                debug!("dispatch: {e}");
                continue;
            }
        };
        for delivery in deliveries {
            let Some(outlet) = d.outlet_of(delivery.consumer) else {
                continue;
            };
            let (records, bytes) = send_delivery(&outlet, &entries, &delivery.messages).await;
            outlet.traffic.record_out(records, bytes);
            partition.traffic().record_out(records, bytes);
            subs.record_delivery(key, records, bytes);
        }
    }
}

enum ReadFailure {
    OutOfRange,
    Other(String),
}

/// Reads whole batches from `from` (at most [`READ_BYTES`], and no more
/// once `max_messages` are read; at least one)
/// and converts each to a Pulsar entry. Returns them and the offset after
/// the last one.
fn read_entries(
    partition: &Partition,
    from: Offset,
    max_messages: usize,
    max_decompressed: u64,
) -> Result<(Vec<PulsarEntry>, Offset), ReadFailure> {
    let found = partition
        .log()
        .read(from, READ_BYTES, true)
        .map_err(|e| match e {
            storage::Error::OffsetOutOfRange { .. } => ReadFailure::OutOfRange,
            e => ReadFailure::Other(e.to_string()),
        })?;
    let mut entries = Vec::new();
    let mut end = from;
    let mut rest = found.records;
    let mut messages = 0usize;
    // No more batches than the permits can take: converting (and
    // decompressing) what cannot be sent this round would be wasted.
    while rest.len() >= storage::batch::HEADER_LEN && messages < max_messages {
        let header = match BatchHeader::parse(&rest) {
            Ok(h) => h,
            Err(e) => return Err(ReadFailure::Other(e.to_string())),
        };
        let len = header.batch_length as usize + storage::batch::LOG_OVERHEAD;
        if len > rest.len() {
            break;
        }
        let batch = rest.split_to(len);
        end = header.base_offset.plus(header.last_offset_delta as i64 + 1);
        if header.is_control() {
            continue;
        }
        match convert::to_pulsar_entry(batch, max_decompressed) {
            Ok(e) => {
                messages += e.count as usize;
                entries.push(e);
            }
            Err(e) => {
                warn!(partition = %partition.tp, offset = %header.base_offset, "skipping a batch Pulsar consumers cannot be sent: {e}");
            }
        }
    }
    Ok((entries, end))
}

/// Sends the messages of one delivery: each entry holding some of them
/// once, with an `ack_set` when only part of a batch is to be delivered.
/// Returns the messages and frame bytes queued for the consumer's
/// connection.
async fn send_delivery(
    outlet: &ConsumerOutlet,
    entries: &[PulsarEntry],
    messages: &[broker::subscription::Message],
) -> (u64, u64) {
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut i = 0;
    for entry in entries {
        let first = entry.base_offset.0;
        let last = first + entry.count as i64;
        let mut chosen = Vec::new();
        let mut redeliveries = 0;
        while i < messages.len() && messages[i].offset.0 < last {
            if messages[i].offset.0 >= first {
                chosen.push((messages[i].offset.0 - first) as usize);
                redeliveries = redeliveries.max(messages[i].redelivery_count);
            }
            i += 1;
        }
        if chosen.is_empty() {
            continue;
        }
        let ack_set = if entry.count > 1 && chosen.len() < entry.count as usize {
            let mut words = vec![0i64; (entry.count as usize).div_ceil(64)];
            for c in &chosen {
                words[c / 64] |= 1i64 << (c % 64);
            }
            words
        } else {
            Vec::new()
        };
        let message_id: MessageIdData = outlet.ids.entry_id(entry.base_offset);
        let cmd = command(CommandMessage {
            consumer_id: outlet.consumer_id,
            message_id,
            redelivery_count: Some(if outlet.report_redeliveries {
                redeliveries
            } else {
                0
            }),
            ack_set,
            consumer_epoch: None,
        });
        let mut frame = BytesMut::new();
        if let Err(e) = encode_payload_command(&cmd, &entry.metadata, &[&entry.payload], &mut frame)
        {
            warn!("cannot encode a message: {e}");
            continue;
        }
        let sent = (chosen.len() as u64, frame.len() as u64);
        if outlet.out.send(frame.freeze()).await.is_err() {
            // The connection is gone; its consumers are being detached.
            break;
        }
        records += sent.0;
        bytes += sent.1;
    }
    (records, bytes)
}
