//! The broker's subscriptions, keyed by (topic, partition, name), and the
//! persistence of durable cursors in the group log.
//!
//! Locks: `persist` (the last persisted bytes of each durable cursor) is
//! taken before `state` and held across every group-log write of cursors,
//! so writes of one subscription's record never reorder, and the
//! coordinator's compaction (which takes it too) never re-appends an older
//! cursor after a newer one.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use model::{Offset, Timestamp};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::cursor::CursorRecord;
use super::{
    Ack, ConsumerId, ConsumerSpec, Delivery, Effect, LogBounds, Read, ReadPlan, StartPosition,
    Subscription, SubscriptionStats, SubscriptionType,
};
use crate::error::CoordError;
use crate::group::store::{GroupLog, RecordKey};
use crate::traffic::{Traffic, TrafficCounts, TrafficRates};

/// Which subscription: topic, partition, subscription name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriptionKey {
    /// Topic name (the Kafka name of the topic).
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Subscription name.
    pub name: String,
}

impl SubscriptionKey {
    /// The key of subscription `name` on `topic`'s partition `partition`.
    pub fn new(topic: impl Into<String>, partition: i32, name: impl Into<String>) -> Self {
        SubscriptionKey {
            topic: topic.into(),
            partition,
            name: name.into(),
        }
    }

    fn record_key(&self) -> RecordKey {
        RecordKey::Subscription {
            topic: self.topic.clone(),
            partition: self.partition,
            subscription: self.name.clone(),
        }
    }
}

/// A consumer subscribing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeRequest {
    /// The consumer.
    pub consumer: ConsumerSpec,
    /// The subscription type it asks for.
    pub sub_type: SubscriptionType,
    /// Durable (a subscription) or not (a Reader). Fixed when the
    /// subscription is created.
    pub durable: bool,
    /// Whether the topic is partitioned (Failover picks by partition index
    /// only then).
    pub partitioned: bool,
    /// Where a new subscription starts.
    pub start: StartPosition,
}

#[derive(Debug)]
struct Slot {
    sub: Subscription,
    wake: Arc<Notify>,
    /// What the front ends delivered for it, since it was created or
    /// restored in this process.
    traffic: Traffic,
}

impl Slot {
    fn new(sub: Subscription) -> Slot {
        Slot {
            sub,
            wake: Arc::new(Notify::new()),
            traffic: Traffic::default(),
        }
    }
}

/// Every subscription on this broker.
#[derive(Debug)]
pub struct Subscriptions {
    persist: Mutex<HashMap<SubscriptionKey, Vec<u8>>>,
    state: Mutex<HashMap<SubscriptionKey, Slot>>,
    log: GroupLog,
}

impl Subscriptions {
    /// The durable subscriptions stored in these group-log records (in log
    /// order; the last record of a key wins, a tombstone deletes).
    pub fn restore(
        log: GroupLog,
        records: impl IntoIterator<Item = (SubscriptionKey, Option<Bytes>)>,
    ) -> Subscriptions {
        let mut latest: HashMap<SubscriptionKey, Bytes> = HashMap::new();
        for (key, value) in records {
            match value {
                Some(v) => latest.insert(key, v),
                None => latest.remove(&key),
            };
        }
        let mut persist = HashMap::new();
        let mut state = HashMap::new();
        for (key, bytes) in latest {
            let Some(record) = CursorRecord::decode(&bytes) else {
                tracing::warn!(topic = %key.topic, partition = key.partition, subscription = %key.name,
                    "skipping unreadable subscription record");
                continue;
            };
            let sub = Subscription::restore(key.name.clone(), record, None);
            persist.insert(key.clone(), bytes.to_vec());
            state.insert(key, Slot::new(sub));
        }
        Subscriptions {
            persist: Mutex::new(persist),
            state: Mutex::new(state),
            log,
        }
    }

    /// Attaches a consumer, creating the subscription at `req.start` if it
    /// does not exist. A new durable subscription is in the group log
    /// before this returns.
    pub fn subscribe(
        &self,
        key: &SubscriptionKey,
        req: SubscribeRequest,
        bounds: LogBounds,
        now: Timestamp,
    ) -> Result<Vec<Effect>, CoordError> {
        let mut persisted = self.persist.lock();
        let mut state = self.state.lock();
        let index = req.partitioned.then_some(key.partition);
        if let Some(slot) = state.get_mut(key) {
            // As upstream: a Reader may not take over a durable
            // subscription's cursor, nor a subscription a Reader's.
            match (slot.sub.durable(), req.durable) {
                (true, false) => {
                    return Err(CoordError::NotAllowed(
                        "Durable subscription with the same name already exists.".into(),
                    ))
                }
                (false, true) => {
                    return Err(CoordError::NotAllowed(
                        "NonDurable subscription with the same name already exists.".into(),
                    ))
                }
                _ => {}
            }
            slot.sub.set_partition_index(index);
            let effects = slot.sub.attach(req.consumer, req.sub_type)?;
            slot.wake.notify_one();
            return Ok(effects);
        }
        let mut sub = Subscription::new(
            key.name.clone(),
            req.sub_type,
            req.durable,
            index,
            req.start,
            bounds,
            now,
        );
        let effects = sub.attach(req.consumer, req.sub_type)?;
        if let Some(record) = sub.take_dirty() {
            let bytes = record.encode();
            self.log
                .append(&[(key.record_key(), Some(bytes.clone()))])?;
            persisted.insert(key.clone(), bytes);
        }
        state.insert(key.clone(), Slot::new(sub));
        Ok(effects)
    }

    /// Creates a durable subscription with no consumer at `start` (admin);
    /// it is in the group log before this returns. Its type is set by the
    /// first consumer that attaches.
    pub fn create(
        &self,
        key: &SubscriptionKey,
        start: StartPosition,
        bounds: LogBounds,
        now: Timestamp,
    ) -> Result<(), CoordError> {
        let mut persisted = self.persist.lock();
        let mut state = self.state.lock();
        if state.contains_key(key) {
            return Err(CoordError::SubscriptionExists(key.name.clone()));
        }
        let mut sub = Subscription::new(
            key.name.clone(),
            SubscriptionType::Exclusive,
            true,
            None,
            start,
            bounds,
            now,
        );
        if let Some(record) = sub.take_dirty() {
            let bytes = record.encode();
            self.log
                .append(&[(key.record_key(), Some(bytes.clone()))])?;
            persisted.insert(key.clone(), bytes);
        }
        state.insert(key.clone(), Slot::new(sub));
        Ok(())
    }

    /// Skips the first `n` unacknowledged messages below `log_end` (all
    /// with `None`; see [`Subscription::skip`]); returns how many. Persisted
    /// at the next flush.
    pub fn skip(
        &self,
        key: &SubscriptionKey,
        n: Option<u64>,
        log_end: Offset,
    ) -> Result<u64, CoordError> {
        self.with(key, |s| Ok(s.skip(n, log_end)))
    }

    /// A copy of the subscription's cursor.
    pub fn cursor(&self, key: &SubscriptionKey) -> Option<super::Cursor> {
        self.state.lock().get(key).map(|s| s.sub.cursor().clone())
    }

    /// Counts `records` messages (`bytes` on the wire) a front end sent to
    /// the subscription's consumers.
    pub fn record_delivery(&self, key: &SubscriptionKey, records: u64, bytes: u64) {
        if let Some(slot) = self.state.lock().get(key) {
            slot.traffic.record_out(records, bytes);
        }
    }

    /// What was delivered for the subscription, with rates at `now`.
    pub fn traffic(
        &self,
        key: &SubscriptionKey,
        now: std::time::Instant,
    ) -> Option<(TrafficCounts, TrafficRates)> {
        self.state
            .lock()
            .get(key)
            .map(|s| (s.traffic.counts(), s.traffic.rates(now)))
    }

    /// Deletes the subscription. With a consumer, only if it is the only one
    /// attached (as upstream); with `None`, unconditionally (admin). A
    /// durable subscription's tombstone is in the group log before this
    /// returns.
    pub fn unsubscribe(
        &self,
        key: &SubscriptionKey,
        consumer: Option<ConsumerId>,
    ) -> Result<(), CoordError> {
        let mut persisted = self.persist.lock();
        let mut state = self.state.lock();
        let slot = state
            .get(key)
            .ok_or_else(|| CoordError::SubscriptionNotFound(key.name.clone()))?;
        if let Some(c) = consumer {
            if !slot.sub.has_consumer(c) {
                return Err(CoordError::ConsumerNotFound(format!(
                    "consumer {} is not attached to subscription {}",
                    c.consumer, key.name
                )));
            }
            let stats = slot.sub.stats(Offset(0));
            if stats.consumers.len() != 1 {
                return Err(CoordError::ConsumerBusy(
                    "Unconnected or shared consumer attempting to unsubscribe".into(),
                ));
            }
        }
        if persisted.contains_key(key) {
            self.log.append(&[(key.record_key(), None)])?;
            persisted.remove(key);
        }
        if let Some(slot) = state.remove(key) {
            slot.wake.notify_one();
        }
        Ok(())
    }

    /// A consumer closed or its connection went away: its unacknowledged
    /// messages go back to the others. A Reader (non-durable) vanishes with
    /// its last consumer.
    pub fn detach(
        &self,
        key: &SubscriptionKey,
        consumer: ConsumerId,
    ) -> Result<Vec<Effect>, CoordError> {
        let mut state = self.state.lock();
        let slot = Self::slot(&mut state, key)?;
        let effects = slot.sub.detach(consumer)?;
        slot.wake.notify_one();
        if !slot.sub.durable() && !slot.sub.has_consumers() {
            state.remove(key);
        }
        Ok(effects)
    }

    /// Detaches every consumer of a connection, in every subscription.
    pub fn detach_connection(&self, connection: u64) -> Vec<(SubscriptionKey, Vec<Effect>)> {
        let mut state = self.state.lock();
        let mut out = Vec::new();
        let mut gone = Vec::new();
        for (key, slot) in state.iter_mut() {
            let ids: Vec<ConsumerId> = slot
                .sub
                .stats(Offset(0))
                .consumers
                .iter()
                .map(|c| c.id)
                .filter(|id| id.connection == connection)
                .collect();
            if ids.is_empty() {
                continue;
            }
            let mut effects = Vec::new();
            for id in ids {
                effects.extend(slot.sub.detach(id).unwrap_or_default());
            }
            // Only effects for consumers still attached matter.
            effects.retain(|Effect::ActiveConsumerChanged { consumer, .. }| {
                consumer.connection != connection
            });
            slot.wake.notify_one();
            if !slot.sub.durable() && !slot.sub.has_consumers() {
                gone.push(key.clone());
            }
            out.push((key.clone(), effects));
        }
        for key in gone {
            state.remove(&key);
        }
        out
    }

    /// Adds message permits to a consumer.
    pub fn flow(
        &self,
        key: &SubscriptionKey,
        consumer: ConsumerId,
        permits: u32,
    ) -> Result<(), CoordError> {
        self.with(key, |s| s.flow(consumer, permits))
    }

    /// Applies an acknowledgement (persisted at the next
    /// [`Subscriptions::flush_cursors`], which the broker runs
    /// periodically).
    pub fn ack(
        &self,
        key: &SubscriptionKey,
        consumer: ConsumerId,
        ack: Ack,
    ) -> Result<(), CoordError> {
        self.with(key, |s| s.ack(consumer, ack))
    }

    /// Puts a consumer's unacknowledged messages (these, or all) back for
    /// redelivery.
    pub fn redeliver(
        &self,
        key: &SubscriptionKey,
        consumer: ConsumerId,
        offsets: Option<&[Offset]>,
    ) -> Result<(), CoordError> {
        self.with(key, |s| s.redeliver(consumer, offsets))
    }

    /// Resets the cursor to `offset` (see [`Subscription::seek`]); persisted
    /// at the next flush.
    pub fn seek(&self, key: &SubscriptionKey, offset: Offset) -> Result<(), CoordError> {
        self.with(key, |s| {
            s.seek(offset);
            Ok(())
        })
    }

    /// Where to read for the next dispatch round (see
    /// [`Subscription::next_read`]).
    pub fn next_read(
        &self,
        key: &SubscriptionKey,
        bounds: LogBounds,
    ) -> Result<Option<ReadPlan>, CoordError> {
        let mut state = self.state.lock();
        Ok(Self::slot(&mut state, key)?.sub.next_read(bounds))
    }

    /// Hands out what was read (see [`Subscription::dispatch`]).
    pub fn dispatch(
        &self,
        key: &SubscriptionKey,
        read: &Read<'_>,
        log_start: Offset,
    ) -> Result<Vec<Delivery>, CoordError> {
        let mut state = self.state.lock();
        Ok(Self::slot(&mut state, key)?.sub.dispatch(read, log_start))
    }

    /// Notified whenever the subscription may be able to dispatch more
    /// (permits, acks, redeliveries, consumers changed). One waiter per
    /// subscription (a stored permit is kept for it); new log data is
    /// signalled by the partition.
    pub fn waker(&self, key: &SubscriptionKey) -> Option<Arc<Notify>> {
        self.state.lock().get(key).map(|s| s.wake.clone())
    }

    /// The first unacknowledged offset (for GetLastMessageId).
    pub fn mark_delete(&self, key: &SubscriptionKey) -> Option<Offset> {
        self.state
            .lock()
            .get(key)
            .map(|s| s.sub.cursor().mark_delete())
    }

    /// Writes every durable cursor changed since the last flush to the group
    /// log, returning once they are appended; returns how many were written.
    pub fn flush_cursors(&self) -> Result<usize, CoordError> {
        let mut persisted = self.persist.lock();
        let changed: Vec<(SubscriptionKey, Vec<u8>)> = {
            let mut state = self.state.lock();
            state
                .iter_mut()
                .filter_map(|(k, slot)| Some((k.clone(), slot.sub.take_dirty()?.encode())))
                .filter(|(k, bytes)| persisted.get(k) != Some(bytes))
                .collect()
        };
        let mut written = 0;
        for chunk in changed.chunks(500) {
            let records: Vec<(RecordKey, Option<Vec<u8>>)> = chunk
                .iter()
                .map(|(k, b)| (k.record_key(), Some(b.clone())))
                .collect();
            if let Err(e) = self.log.append(&records) {
                let mut state = self.state.lock();
                for (k, _) in &changed[written..] {
                    if let Some(slot) = state.get_mut(k) {
                        slot.sub.mark_dirty();
                    }
                }
                return Err(e);
            }
            for (k, b) in chunk {
                persisted.insert(k.clone(), b.clone());
            }
            written += chunk.len();
        }
        Ok(written)
    }

    /// The subscriptions of one partition, by name, with backlogs against
    /// `log_end`. Readers appear while a consumer is attached.
    pub fn list(&self, topic: &str, partition: i32, log_end: Offset) -> Vec<SubscriptionStats> {
        let state = self.state.lock();
        let mut out: Vec<SubscriptionStats> = state
            .iter()
            .filter(|(k, _)| k.topic == topic && k.partition == partition)
            .map(|(_, s)| s.sub.stats(log_end))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Every subscription of every partition in one pass (sorted by key),
    /// each with its backlog against `log_end(topic, partition)`;
    /// subscriptions of partitions it does not know are left out.
    pub fn list_all(
        &self,
        log_end: impl Fn(&str, i32) -> Option<Offset>,
    ) -> Vec<(SubscriptionKey, SubscriptionStats)> {
        let state = self.state.lock();
        let mut out: Vec<(SubscriptionKey, SubscriptionStats)> = state
            .iter()
            .filter_map(|(k, s)| {
                log_end(&k.topic, k.partition).map(|end| (k.clone(), s.sub.stats(end)))
            })
            .collect();
        drop(state);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// One subscription's stats.
    pub fn stats(&self, key: &SubscriptionKey, log_end: Offset) -> Option<SubscriptionStats> {
        self.state.lock().get(key).map(|s| s.sub.stats(log_end))
    }

    /// Drops every subscription of a deleted topic (tombstones for the
    /// durable ones are in the group log before this returns).
    pub fn forget_topic(&self, topic: &str) -> Result<(), CoordError> {
        let mut persisted = self.persist.lock();
        let mut state = self.state.lock();
        let stored: Vec<SubscriptionKey> = persisted
            .keys()
            .filter(|k| k.topic == topic)
            .cloned()
            .collect();
        let tombstones: Vec<(RecordKey, Option<Vec<u8>>)> =
            stored.iter().map(|k| (k.record_key(), None)).collect();
        self.log.append(&tombstones)?;
        for k in &stored {
            persisted.remove(k);
        }
        state.retain(|k, slot| {
            let keep = k.topic != topic;
            if !keep {
                slot.wake.notify_one();
            }
            keep
        });
        Ok(())
    }

    /// Runs `f` with the persisted cursor records (the live state a group
    /// log snapshot must keep), holding off cursor writes meanwhile.
    pub(crate) fn with_persisted<T>(
        &self,
        f: impl FnOnce(Vec<(RecordKey, Option<Vec<u8>>)>) -> T,
    ) -> T {
        let persisted = self.persist.lock();
        f(persisted
            .iter()
            .map(|(k, b)| (k.record_key(), Some(b.clone())))
            .collect())
    }

    fn slot<'a>(
        state: &'a mut HashMap<SubscriptionKey, Slot>,
        key: &SubscriptionKey,
    ) -> Result<&'a mut Slot, CoordError> {
        state
            .get_mut(key)
            .ok_or_else(|| CoordError::SubscriptionNotFound(key.name.clone()))
    }

    fn with<T>(
        &self,
        key: &SubscriptionKey,
        f: impl FnOnce(&mut Subscription) -> Result<T, CoordError>,
    ) -> Result<T, CoordError> {
        let mut state = self.state.lock();
        let slot = Self::slot(&mut state, key)?;
        let out = f(&mut slot.sub)?;
        slot.wake.notify_one();
        Ok(out)
    }
}
