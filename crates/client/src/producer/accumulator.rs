//! Records queued per partition, grouped into batches, and the futures that
//! report each record's fate.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::records::{Record, TimestampType};
use tokio::sync::Notify;

use super::builder::ProducerConfig;
use super::partitioner::{partition_for_key, random_u32};
use super::record::{ProducerRecord, RecordMetadata};
use crate::error::{Error, Result};

/// What the broker said about a whole batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ack {
    pub partition: i32,
    pub base_offset: i64,
    pub log_append_time: i64,
}

/// One result shared by every record of a batch: one allocation per batch,
/// not per record.
#[derive(Default)]
pub(crate) struct BatchShared {
    state: Mutex<SharedState>,
}

#[derive(Default)]
struct SharedState {
    result: Option<Result<Ack>>,
    wakers: Vec<Waker>,
}

impl BatchShared {
    fn set(&self, r: Result<Ack>) {
        let wakers = {
            let mut st = self.state.lock().unwrap();
            if st.result.is_some() {
                return;
            }
            st.result = Some(r);
            std::mem::take(&mut st.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }
}

/// The future [`crate::Producer::send`] returns: the record's partition and
/// offset once the broker acknowledged its batch, or why it failed.
///
/// ```no_run
/// # async fn f(p: magnetar_client::Producer) {
/// let fut: magnetar_client::DeliveryFuture = p.send(magnetar_client::ProducerRecord::new("t").value("v"));
/// match fut.await {
///     Ok(md) => println!("at {}/{}", md.partition, md.offset),
///     Err(e) => eprintln!("not sent: {e}"),
/// }
/// # }
/// ```
#[must_use = "the record is sent anyway; the future only reports the outcome"]
pub struct DeliveryFuture {
    shared: Option<Arc<BatchShared>>,
    immediate: Option<Error>,
    index: u32,
    timestamp: i64,
    registered: bool,
}

impl std::fmt::Debug for DeliveryFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryFuture")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl DeliveryFuture {
    fn failed(e: Error) -> DeliveryFuture {
        DeliveryFuture {
            shared: None,
            immediate: Some(e),
            index: 0,
            timestamp: -1,
            registered: false,
        }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(e) = self.immediate.take() {
            return Poll::Ready(Err(e));
        }
        let Some(shared) = self.shared.clone() else {
            return Poll::Ready(Err(Error::Closed));
        };
        let mut st = shared.state.lock().unwrap();
        match &st.result {
            Some(Ok(ack)) => Poll::Ready(Ok(RecordMetadata {
                partition: ack.partition,
                offset: if ack.base_offset >= 0 {
                    ack.base_offset + self.index as i64
                } else {
                    -1
                },
                timestamp: if ack.log_append_time >= 0 {
                    ack.log_append_time
                } else {
                    self.timestamp
                },
            })),
            Some(Err(e)) => Poll::Ready(Err(e.clone())),
            None => {
                // Pushing once per poll keeps registration O(1); a future
                // polled again only adds a spare wake-up.
                if !self.registered
                    || !st
                        .wakers
                        .iter()
                        .rev()
                        .take(1)
                        .any(|w| w.will_wake(cx.waker()))
                {
                    st.wakers.push(cx.waker().clone());
                }
                drop(st);
                self.registered = true;
                Poll::Pending
            }
        }
    }
}

/// Completes a batch's futures exactly once; dropping it unfinished (the
/// producer went away) fails them with [`Error::Closed`].
pub(crate) struct Completion {
    shared: Arc<BatchShared>,
    /// Records that waited for metadata have their own result slot:
    /// `(index in this batch, slot)`.
    extras: Vec<(u32, Arc<BatchShared>)>,
    done: bool,
}

impl Completion {
    pub(crate) fn complete(&mut self, r: Result<Ack>) {
        if self.done {
            return;
        }
        self.done = true;
        for (i, slot) in &self.extras {
            slot.set(r.clone().map(|a| Ack {
                base_offset: if a.base_offset >= 0 {
                    a.base_offset + *i as i64
                } else {
                    -1
                },
                ..a
            }));
        }
        self.shared.set(r);
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.complete(Err(Error::Closed));
    }
}

/// A batch of one partition, open (growing) or sealed.
pub(crate) struct Batch {
    pub records: Vec<Record>,
    pub bytes: usize,
    pub created: Instant,
    pub completion: Completion,
    /// Seal order within the partition: retries go back in this order.
    pub order: u64,
    /// `(producer id, epoch, base sequence)` once assigned.
    pub sequence: Option<(i64, i16, i32)>,
    /// The encoded batch, valid for `sequence`.
    pub encoded: Option<Bytes>,
    pub attempts: u32,
    pub retry_after: Option<Instant>,
}

impl Batch {
    fn new(now: Instant) -> Batch {
        Batch {
            records: Vec::new(),
            bytes: 0,
            created: now,
            completion: Completion {
                shared: Arc::new(BatchShared::default()),
                extras: Vec::new(),
                done: false,
            },
            order: 0,
            sequence: None,
            encoded: None,
            attempts: 0,
            retry_after: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

#[derive(Default)]
pub(crate) struct PartitionQueue {
    pub open: Option<Batch>,
    pub ready: VecDeque<Batch>,
    pub next_sequence: i32,
    pub next_order: u64,
    pub in_flight: u32,
    /// A batch failed and went back to the queue: send nothing more until
    /// every in-flight batch of this partition has come back, so retries
    /// keep their order.
    pub blocked: bool,
}

impl PartitionQueue {
    fn seal_open(&mut self) {
        if let Some(mut b) = self.open.take() {
            b.order = self.next_order;
            self.next_order += 1;
            self.ready.push_back(b);
        }
    }

    /// Puts a failed batch back before every later one.
    pub(crate) fn requeue(&mut self, batch: Batch) {
        let pos = self
            .ready
            .iter()
            .position(|b| b.order > batch.order)
            .unwrap_or(self.ready.len());
        self.ready.insert(pos, batch);
        self.blocked = true;
    }
}

struct Waiting {
    record: ProducerRecord,
    timestamp: i64,
    slot: Arc<BatchShared>,
}

#[derive(Default)]
pub(crate) struct TopicQueue {
    /// Partition count, once metadata is known.
    pub partitions: Option<i32>,
    pub parts: Vec<PartitionQueue>,
    /// Records sent before the partition count was known, in call order.
    waiting: VecDeque<Waiting>,
    pub waiting_since: Option<Instant>,
    sticky: Option<i32>,
    last_sticky: i32,
    /// Metadata for this topic should be fetched again.
    pub stale: bool,
}

impl TopicQueue {
    fn pick_sticky(&mut self, n: i32) -> i32 {
        if let Some(p) = self.sticky.filter(|p| *p < n) {
            return p;
        }
        let mut p = (random_u32() % n as u32) as i32;
        if n > 1 && p == self.last_sticky {
            p = (p + 1 + (random_u32() % (n as u32 - 1)) as i32) % n;
        }
        self.sticky = Some(p);
        self.last_sticky = p;
        p
    }

    /// Appends to partition `p`; returns the result slot and index.
    fn append(
        &mut self,
        p: i32,
        record: ProducerRecord,
        timestamp: i64,
        batch_size: usize,
        now: Instant,
    ) -> (Arc<BatchShared>, u32, bool) {
        let size = record.estimated_size();
        let pq = &mut self.parts[p as usize];
        let mut woke = false;
        if pq
            .open
            .as_ref()
            .is_some_and(|b| b.bytes + size > batch_size && !b.records.is_empty())
        {
            pq.seal_open();
            woke = true;
            if self.sticky == Some(p) {
                self.sticky = None;
            }
        }
        let batch = pq.open.get_or_insert_with(|| {
            woke = true;
            Batch::new(now)
        });
        let index = batch.records.len() as u32;
        batch.bytes += size;
        batch.records.push(Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: index as i64,
            sequence: index as i32 - 1,
            timestamp,
            key: record.key,
            value: record.value,
            headers: record.headers,
        });
        let slot = batch.completion.shared.clone();
        if batch.bytes >= batch_size {
            pq.seal_open();
            woke = true;
            if self.sticky == Some(p) {
                self.sticky = None;
            }
        }
        (slot, index, woke)
    }
}

pub(crate) struct Accumulator {
    pub topics: HashMap<String, TopicQueue>,
    /// Records queued and not yet acknowledged or failed.
    pub incomplete: usize,
    /// Flushes in progress: open batches are sent without lingering.
    pub flushing: usize,
    pub closed: bool,
    /// A failure that ends the producer (e.g. idempotence refused).
    pub fatal: Option<Error>,
}

/// The accumulator and the notifications around it.
pub(crate) struct SharedAccumulator {
    pub state: Mutex<Accumulator>,
    /// Wakes the sender: a batch is ready, a topic needs metadata, a flush.
    pub wake: Notify,
    /// Signalled when `incomplete` drops to 0.
    pub idle: Notify,
    pub config: Arc<ProducerConfig>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl SharedAccumulator {
    pub(crate) fn new(config: Arc<ProducerConfig>) -> SharedAccumulator {
        SharedAccumulator {
            state: Mutex::new(Accumulator {
                topics: HashMap::new(),
                incomplete: 0,
                flushing: 0,
                closed: false,
                fatal: None,
            }),
            wake: Notify::new(),
            idle: Notify::new(),
            config,
        }
    }

    pub(crate) fn append(&self, mut record: ProducerRecord) -> DeliveryFuture {
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let mut acc = self.state.lock().unwrap();
        if acc.closed {
            return DeliveryFuture::failed(Error::Closed);
        }
        if let Some(e) = &acc.fatal {
            return DeliveryFuture::failed(e.clone());
        }
        if !acc.topics.contains_key(record.topic.as_str()) {
            acc.topics
                .insert(record.topic.clone(), TopicQueue::default());
        }
        let tq = acc.topics.get_mut(record.topic.as_str()).expect("inserted");
        let n = match tq.partitions {
            Some(n) if tq.waiting.is_empty() => n,
            _ => {
                let slot = Arc::new(BatchShared::default());
                tq.waiting_since.get_or_insert_with(Instant::now);
                tq.waiting.push_back(Waiting {
                    record,
                    timestamp,
                    slot: slot.clone(),
                });
                acc.incomplete += 1;
                drop(acc);
                self.wake.notify_one();
                return DeliveryFuture {
                    shared: Some(slot),
                    immediate: None,
                    index: 0,
                    timestamp,
                    registered: false,
                };
            }
        };
        let p = match choose_partition(tq, &record, n) {
            Ok(p) => p,
            Err(e) => return DeliveryFuture::failed(e),
        };
        record.topic = String::new();
        let (slot, index, woke) =
            tq.append(p, record, timestamp, self.config.batch_size, Instant::now());
        acc.incomplete += 1;
        drop(acc);
        if woke {
            self.wake.notify_one();
        }
        DeliveryFuture {
            shared: Some(slot),
            immediate: None,
            index,
            timestamp,
            registered: false,
        }
    }

    pub(crate) async fn flush(&self) -> Result<()> {
        {
            let mut acc = self.state.lock().unwrap();
            if acc.incomplete == 0 {
                return Ok(());
            }
            acc.flushing += 1;
        }
        self.wake.notify_one();
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            let done = self.state.lock().unwrap().incomplete == 0;
            if done {
                break;
            }
            idle.await;
        }
        self.state.lock().unwrap().flushing -= 1;
        Ok(())
    }

    pub(crate) fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.wake.notify_one();
    }

    /// Counts finished records and wakes flushers when nothing is left.
    pub(crate) fn records_done(&self, acc: &mut Accumulator, n: usize) {
        acc.incomplete = acc.incomplete.saturating_sub(n);
        if acc.incomplete == 0 {
            self.idle.notify_waiters();
        }
    }
}

fn choose_partition(tq: &mut TopicQueue, record: &ProducerRecord, n: i32) -> Result<i32> {
    match (record.partition, &record.key) {
        (Some(p), _) if p < 0 || p >= n => Err(Error::InvalidArgument(format!(
            "partition {p} of topic {} which has {n} partitions",
            record.topic
        ))),
        (Some(p), _) => Ok(p),
        (None, Some(k)) => Ok(partition_for_key(k, n)),
        (None, None) => Ok(tq.pick_sticky(n)),
    }
}

impl Accumulator {
    /// The topic now has `n` partitions: records that waited for it are
    /// placed in call order. Returns how many failed (bad partition).
    pub(crate) fn resolve_topic(&mut self, topic: &str, n: i32, batch_size: usize) -> usize {
        let Some(tq) = self.topics.get_mut(topic) else {
            return 0;
        };
        tq.partitions = Some(n);
        tq.stale = false;
        if tq.parts.len() < n as usize {
            tq.parts.resize_with(n as usize, PartitionQueue::default);
        }
        let now = Instant::now();
        let mut failed = 0;
        while let Some(w) = tq.waiting.pop_front() {
            match choose_partition(tq, &w.record, n) {
                Ok(p) => {
                    let mut record = w.record;
                    record.topic = String::new();
                    let (_, index, _) = tq.append(p, record, w.timestamp, batch_size, now);
                    let pq = &mut tq.parts[p as usize];
                    let batch = pq
                        .open
                        .as_mut()
                        .filter(|b| b.records.len() as u32 > index)
                        .or_else(|| pq.ready.back_mut())
                        .expect("record just appended");
                    batch.completion.extras.push((index, w.slot));
                }
                Err(e) => {
                    w.slot.set(Err(e));
                    failed += 1;
                }
            }
        }
        tq.waiting_since = None;
        failed
    }

    /// Fails the records waiting for `topic`'s metadata.
    pub(crate) fn fail_waiting(&mut self, topic: &str, e: &Error) -> usize {
        let Some(tq) = self.topics.get_mut(topic) else {
            return 0;
        };
        let n = tq.waiting.len();
        for w in tq.waiting.drain(..) {
            w.slot.set(Err(e.clone()));
        }
        tq.waiting_since = None;
        n
    }

    /// Fails everything queued (not in flight); returns the record count.
    pub(crate) fn fail_all(&mut self, e: &Error) -> usize {
        let mut n = 0;
        let names: Vec<String> = self.topics.keys().cloned().collect();
        for t in names {
            n += self.fail_waiting(&t, e);
            let tq = self.topics.get_mut(&t).expect("listed");
            for pq in &mut tq.parts {
                pq.seal_open();
                for mut b in pq.ready.drain(..) {
                    n += b.len();
                    b.completion.complete(Err(e.clone()));
                }
            }
        }
        n
    }

    /// Fails queued batches and waiting records older than `timeout`.
    /// Returns the record count and whether an expired batch had a
    /// sequence assigned (the producer id must then be renewed).
    pub(crate) fn expire(&mut self, now: Instant, timeout: Duration) -> (usize, bool) {
        let mut n = 0;
        let mut gap = false;
        let e = Error::Timeout(timeout);
        for tq in self.topics.values_mut() {
            if tq
                .waiting_since
                .is_some_and(|s| now.duration_since(s) >= timeout)
            {
                n += tq.waiting.len();
                for w in tq.waiting.drain(..) {
                    w.slot.set(Err(e.clone()));
                }
                tq.waiting_since = None;
                continue;
            }
            for pq in &mut tq.parts {
                if pq.in_flight > 0 {
                    continue;
                }
                while pq
                    .ready
                    .front()
                    .is_some_and(|b| now.duration_since(b.created) >= timeout)
                {
                    let mut b = pq.ready.pop_front().expect("front");
                    gap |= b.sequence.is_some();
                    n += b.len();
                    b.completion.complete(Err(e.clone()));
                }
                if pq.ready.is_empty()
                    && pq
                        .open
                        .as_ref()
                        .is_some_and(|b| now.duration_since(b.created) >= timeout)
                {
                    let mut b = pq.open.take().expect("open");
                    n += b.len();
                    b.completion.complete(Err(e.clone()));
                }
            }
        }
        (n, gap)
    }

    /// A new producer id: sequences restart at 0 and batches not yet sent
    /// will be encoded again.
    pub(crate) fn reset_sequences(&mut self) {
        for tq in self.topics.values_mut() {
            for pq in &mut tq.parts {
                pq.next_sequence = 0;
                for b in &mut pq.ready {
                    b.sequence = None;
                    b.encoded = None;
                }
            }
        }
    }
}

/// Takes the next batch of `pq` that may be sent now, sealing the open
/// batch if its linger is over (or a flush is on). `deadline` is lowered to
/// when something of this partition becomes sendable.
pub(crate) fn take_sendable(
    tq: &mut TopicQueue,
    p: usize,
    now: Instant,
    linger: Duration,
    hurry: bool,
    deadline: &mut Option<Instant>,
) -> Option<Batch> {
    let sticky = tq.sticky;
    let pq = &mut tq.parts[p];
    if pq.blocked {
        if pq.in_flight > 0 {
            return None;
        }
        pq.blocked = false;
    }
    if pq.ready.is_empty() {
        let due = pq.open.as_ref().map(|b| b.created + linger)?;
        if !hurry && due > now {
            *deadline = Some(deadline.map_or(due, |d| d.min(due)));
            return None;
        }
        pq.seal_open();
        if sticky == Some(p as i32) {
            tq.sticky = None;
        }
    }
    let pq = &mut tq.parts[p];
    if let Some(at) = pq.ready.front().and_then(|b| b.retry_after) {
        if at > now {
            *deadline = Some(deadline.map_or(at, |d| d.min(at)));
            return None;
        }
    }
    pq.ready.pop_front()
}
