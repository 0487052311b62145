//! One subscription's state machine: its cursor, read position, consumers
//! with their permits and unacknowledged messages, the redelivery queue, and
//! the dispatch rules of each subscription type. No I/O, no clock.
//!
//! Invariant (checked by the tests): every offset below the log end is
//! acknowledged in the cursor, pending at exactly one consumer, queued for
//! redelivery, or at/after the read position; pending and queued offsets
//! all lie in `[mark_delete, read_position)`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use model::{Offset, Timestamp};

use super::cursor::{Cursor, CursorRecord};
use super::keyshared::{HashRanges, HASH_RANGE_SIZE};
use super::{
    Ack, ConsumerId, ConsumerSpec, ConsumerStats, Delivery, Effect, LogBounds, Message, Read,
    ReadPlan, StartPosition, SubscriptionStats, SubscriptionType,
};
use crate::error::CoordError;

/// Shared: messages a consumer gets in a row before the next one's turn
/// (upstream's `dispatcherMaxRoundRobinBatchSize`).
pub const ROUND_ROBIN_BATCH: u32 = 20;

/// Key_Shared: most messages held back (their key's consumer has no
/// permits, or an earlier message of the key is still out elsewhere) before
/// the subscription stops reading further.
pub const MAX_HELD_MESSAGES: usize = 10_000;

#[derive(Debug, Clone)]
struct Consumer {
    spec: ConsumerSpec,
    /// Negative after a batch larger than the permits left.
    permits: i64,
    pending: BTreeSet<i64>,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    consumer: ConsumerId,
    hash: u32,
}

/// One subscription on one partition.
#[derive(Debug, Clone)]
pub struct Subscription {
    name: String,
    sub_type: SubscriptionType,
    durable: bool,
    /// The partition index for Failover's pick, `None` for a
    /// non-partitioned topic.
    partition_index: Option<i32>,
    created: Timestamp,
    cursor: Cursor,
    read_position: Offset,
    /// Offsets to (re)deliver → key hash.
    queue: BTreeMap<i64, u32>,
    /// Times each unacknowledged offset came back undelivered.
    redeliveries: HashMap<i64, u32>,
    pending: BTreeMap<i64, Pending>,
    consumers: Vec<Consumer>,
    /// Exclusive/Failover: the consumer receiving messages.
    active: Option<ConsumerId>,
    /// Shared: whose turn it is, and how many messages it has left.
    turn: Option<usize>,
    turn_left: u32,
    ranges: HashRanges,
    /// Key_Shared: per key hash, the consumers holding pending messages of
    /// it and how many.
    holders: HashMap<u32, Vec<(ConsumerId, u32)>>,
    dirty: bool,
}

impl Subscription {
    /// A new subscription with no consumers, positioned by `start`.
    pub fn new(
        name: String,
        sub_type: SubscriptionType,
        durable: bool,
        partition_index: Option<i32>,
        start: StartPosition,
        bounds: LogBounds,
        now: Timestamp,
    ) -> Subscription {
        let at = match start {
            StartPosition::Earliest => bounds.start,
            StartPosition::Latest => bounds.end,
            StartPosition::Offset(o) => o.clamp(bounds.start, bounds.end.max(bounds.start)),
        };
        let mut s = Subscription::restore(
            name,
            CursorRecord {
                sub_type,
                created: now,
                cursor: Cursor::new(at),
            },
            partition_index,
        );
        s.durable = durable;
        s.dirty = durable;
        s
    }

    /// A durable subscription from its stored record, with no consumers;
    /// reading resumes at the mark-delete position (acknowledged offsets
    /// beyond it are skipped).
    pub fn restore(
        name: String,
        record: CursorRecord,
        partition_index: Option<i32>,
    ) -> Subscription {
        Subscription {
            name,
            sub_type: record.sub_type,
            durable: true,
            partition_index,
            created: record.created,
            read_position: record.cursor.mark_delete(),
            cursor: record.cursor,
            queue: BTreeMap::new(),
            redeliveries: HashMap::new(),
            pending: BTreeMap::new(),
            consumers: Vec::new(),
            active: None,
            turn: None,
            turn_left: 0,
            ranges: HashRanges::default(),
            holders: HashMap::new(),
            dirty: false,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its type.
    pub fn sub_type(&self) -> SubscriptionType {
        self.sub_type
    }

    /// Whether the cursor is persisted.
    pub fn durable(&self) -> bool {
        self.durable
    }

    /// The cursor.
    pub fn cursor(&self) -> &Cursor {
        &self.cursor
    }

    /// The next offset to read from the log.
    pub fn read_position(&self) -> Offset {
        self.read_position
    }

    /// Sets the partition index Failover's pick uses (`None` for a
    /// non-partitioned topic); restored subscriptions learn it from the
    /// next subscribe.
    pub fn set_partition_index(&mut self, index: Option<i32>) {
        self.partition_index = index;
    }

    /// Whether any consumer is attached.
    pub fn has_consumers(&self) -> bool {
        !self.consumers.is_empty()
    }

    /// Whether `id` is attached.
    pub fn has_consumer(&self, id: ConsumerId) -> bool {
        self.consumers.iter().any(|c| c.spec.id == id)
    }

    /// The durable record, if the cursor changed since the last call.
    pub fn take_dirty(&mut self) -> Option<CursorRecord> {
        if !self.durable || !self.dirty {
            return None;
        }
        self.dirty = false;
        Some(self.record())
    }

    /// Marks the cursor as not yet persisted (a write failed).
    pub fn mark_dirty(&mut self) {
        self.dirty = self.durable;
    }

    /// The durable record of the current cursor.
    pub fn record(&self) -> CursorRecord {
        CursorRecord {
            sub_type: self.sub_type,
            created: self.created,
            cursor: self.cursor.clone(),
        }
    }

    /// Attaches a consumer. Exclusive refuses a second one; a different
    /// type is refused while consumers are attached (with none, the
    /// subscription takes the new type, as upstream does).
    pub fn attach(
        &mut self,
        spec: ConsumerSpec,
        sub_type: SubscriptionType,
    ) -> Result<Vec<Effect>, CoordError> {
        if self.has_consumer(spec.id) {
            return Err(CoordError::ConsumerBusy(format!(
                "consumer {} is already attached to subscription {}",
                spec.id.consumer, self.name
            )));
        }
        if sub_type != self.sub_type {
            if !self.consumers.is_empty() {
                return Err(CoordError::SubscriptionTypeMismatch {
                    subscription: self.name.clone(),
                    existing: self.sub_type,
                    requested: sub_type,
                });
            }
            self.sub_type = sub_type;
            self.ranges = HashRanges::default();
            self.mark_dirty();
        }
        if sub_type == SubscriptionType::Exclusive && !self.consumers.is_empty() {
            return Err(CoordError::ConsumerBusy(
                "Exclusive consumer is already connected".into(),
            ));
        }
        if sub_type == SubscriptionType::KeyShared && !self.ranges.add(spec.id) {
            return Err(CoordError::ConsumerBusy(
                "no key hash range left to give a new Key_Shared consumer".into(),
            ));
        }
        let id = spec.id;
        self.consumers.push(Consumer {
            spec,
            permits: 0,
            pending: BTreeSet::new(),
        });
        let mut effects = self.reselect_active();
        if self.sub_type == SubscriptionType::Failover
            && !effects.iter().any(
                |e| matches!(e, Effect::ActiveConsumerChanged { consumer, .. } if *consumer == id),
            )
        {
            effects.push(Effect::ActiveConsumerChanged {
                consumer: id,
                active: self.active == Some(id),
            });
        }
        Ok(effects)
    }

    /// Detaches a consumer (closed or disconnected): its unacknowledged
    /// messages go back for redelivery to the others (or the next active
    /// one).
    pub fn detach(&mut self, id: ConsumerId) -> Result<Vec<Effect>, CoordError> {
        let i = self.index(id)?;
        self.requeue(id, None);
        self.consumers.remove(i);
        if self.sub_type == SubscriptionType::KeyShared {
            self.ranges.remove(id);
        }
        self.turn = None;
        self.turn_left = 0;
        Ok(self.reselect_active())
    }

    /// Adds message permits.
    pub fn flow(&mut self, id: ConsumerId, permits: u32) -> Result<(), CoordError> {
        let i = self.index(id)?;
        self.consumers[i].permits += i64::from(permits);
        Ok(())
    }

    /// Applies an acknowledgement from `id`. Acknowledging something not
    /// outstanding is harmless; a cumulative ack on Shared/Key_Shared is
    /// refused.
    pub fn ack(&mut self, id: ConsumerId, ack: Ack) -> Result<(), CoordError> {
        self.index(id)?;
        let ranges = match ack {
            Ack::Individual(r) => r,
            Ack::Cumulative(through) => {
                if !self.sub_type.single_active() {
                    return Err(CoordError::NotAllowed(format!(
                        "cumulative ack is not allowed on {} subscription {}",
                        self.sub_type, self.name
                    )));
                }
                let through = through.0.min(self.read_position.0 - 1);
                if self.cursor.ack_below(Offset(through + 1)) {
                    self.dirty = true;
                }
                vec![Offset(i64::MIN)..Offset(through.saturating_add(1))]
            }
        };
        for r in ranges {
            // Only delivered offsets can be outstanding: the rest are acked
            // already or not yet read.
            let (start, end) = (r.start.0, r.end.0.min(self.read_position.0));
            if start >= end {
                continue;
            }
            let pending: Vec<i64> = self.pending.range(start..end).map(|(&o, _)| o).collect();
            let queued: Vec<i64> = self.queue.range(start..end).map(|(&o, _)| o).collect();
            for o in pending {
                self.unpend(o);
                self.acked(o);
            }
            for o in queued {
                self.queue.remove(&o);
                self.acked(o);
            }
        }
        Ok(())
    }

    /// Puts `id`'s unacknowledged messages (these offsets, or all of them)
    /// back for redelivery.
    pub fn redeliver(
        &mut self,
        id: ConsumerId,
        offsets: Option<&[Offset]>,
    ) -> Result<(), CoordError> {
        self.index(id)?;
        self.requeue(id, offsets);
        Ok(())
    }

    /// Resets the cursor to `offset`: everything below it counts as
    /// acknowledged, nothing from it on; all unacknowledged messages are
    /// forgotten (the front end closes or resets the consumers) and reading
    /// restarts there.
    pub fn seek(&mut self, offset: Offset) {
        self.cursor.reset(offset);
        self.read_position = offset;
        self.queue.clear();
        self.redeliveries.clear();
        self.pending.clear();
        self.holders.clear();
        for c in &mut self.consumers {
            c.pending.clear();
        }
        self.dirty = true;
    }

    /// Skips (acknowledges) the first `n` unacknowledged messages below
    /// `log_end`, or all of them with `None` (admin skip / skip-all).
    /// Skipped messages out at consumers are taken back (their later acks
    /// are harmless), and reading goes on after the last one. Returns how
    /// many were skipped.
    pub fn skip(&mut self, n: Option<u64>, log_end: Offset) -> u64 {
        let ranges = self.cursor.unacked(n, log_end);
        let mut skipped = 0;
        for r in &ranges {
            let (start, end) = (r.start.0, r.end.0);
            let pending: Vec<i64> = self.pending.range(start..end).map(|(&o, _)| o).collect();
            for o in pending {
                self.unpend(o);
            }
            let queued: Vec<i64> = self.queue.range(start..end).map(|(&o, _)| o).collect();
            for o in queued {
                self.queue.remove(&o);
            }
            self.redeliveries.retain(|&o, _| o < start || o >= end);
            self.cursor.ack(r.clone());
            skipped += (end - start) as u64;
        }
        // The skipped offsets are the first unacknowledged ones, so every
        // offset before the last one's end is now acknowledged.
        if let Some(last) = ranges.last() {
            self.read_position = self.read_position.max(last.end);
            self.dirty = true;
        }
        skipped
    }

    /// Where to read for the next dispatch round, or `None` if nothing can
    /// be sent now (no permits, nothing queued and nothing new).
    pub fn next_read(&mut self, bounds: LogBounds) -> Option<ReadPlan> {
        self.apply_retention(bounds.start);
        let max_messages = self.usable_permits();
        if max_messages == 0 {
            return None;
        }
        let max_messages = usize::try_from(max_messages).unwrap_or(usize::MAX);
        let mut blocked = HashSet::new();
        for (&o, &hash) in &self.queue {
            if self.sub_type != SubscriptionType::KeyShared {
                return Some(ReadPlan {
                    from: Offset(o),
                    max_messages,
                });
            }
            if !blocked.contains(&hash) && self.key_shared_target(hash).is_some() {
                return Some(ReadPlan {
                    from: Offset(o),
                    max_messages,
                });
            }
            blocked.insert(hash);
        }
        let held_full =
            self.sub_type == SubscriptionType::KeyShared && self.queue.len() >= MAX_HELD_MESSAGES;
        (self.read_position < bounds.end && !held_full).then_some(ReadPlan {
            from: self.read_position,
            max_messages,
        })
    }

    /// Hands out what the front end read for a plan: queued messages first
    /// in offset order, then new ones from the read position, each to the
    /// consumer the subscription type picks, never beyond permits except
    /// for the rest of a batch, which goes whole to one consumer (see
    /// [`super::Entry`]).
    pub fn dispatch(&mut self, read: &Read<'_>, log_start: Offset) -> Vec<Delivery> {
        self.apply_retention(log_start);
        let from = read.plan.from.0;
        let end = read
            .entries
            .last()
            .map_or(read.end.0, |e| read.end.0.max(e.offset.0 + 1));
        // A stale plan (the read position moved back since, by a seek) or
        // older queued messages outside the read: new messages must wait
        // (for Key_Shared, only those of the same keys).
        let mut new_ok = from <= self.read_position.0;
        if self.sub_type == SubscriptionType::KeyShared {
            let blocked = self.queue.range(..from).map(|(_, &h)| h).collect();
            return self.dispatch_key_shared(read, end, new_ok, blocked);
        }
        if self.queue.range(..from).next().is_some() {
            new_ok = false;
        }
        let mut out: Vec<Delivery> = Vec::new();
        let mut next_new = self.read_position.0;
        let mut prev = from;
        // The consumer the current batch went to: the rest of the batch
        // follows it, beyond its permits if need be (see `Entry`).
        let mut batch_target: Option<(Offset, usize)> = None;
        for e in read.entries {
            let o = e.offset.0;
            if o < from || o < prev {
                continue;
            }
            if o >= end {
                break;
            }
            self.gap(prev, o, &mut next_new, new_ok);
            prev = o + 1;
            let same_batch = batch_target.filter(|(b, _)| *b == e.batch).map(|(_, c)| c);
            if let Some(&hash) = self.queue.get(&o) {
                if let Some(c) = same_batch.or_else(|| self.pick(hash)) {
                    batch_target = Some((e.batch, c));
                    self.queue.remove(&o);
                    self.deliver(c, o, hash, &mut out);
                }
                continue;
            }
            if !new_ok || o < next_new {
                continue;
            }
            next_new = o + 1;
            if self.cursor.is_acked(Offset(o)) {
                continue;
            }
            let hash = e.key_hash % HASH_RANGE_SIZE;
            match same_batch.or_else(|| self.pick(hash)) {
                Some(c) => {
                    batch_target = Some((e.batch, c));
                    self.deliver(c, o, hash, &mut out);
                }
                None => {
                    next_new = o;
                    new_ok = false;
                }
            }
        }
        self.gap(prev, end, &mut next_new, new_ok);
        self.read_position = Offset(self.read_position.0.max(next_new));
        out
    }

    /// Key_Shared's [`Subscription::dispatch`]: batch by batch, all of a
    /// batch's queued and new messages to one consumer, or none (new ones
    /// are then held, or reading stops there when too many are held).
    fn dispatch_key_shared(
        &mut self,
        read: &Read<'_>,
        end: i64,
        mut new_ok: bool,
        mut blocked: HashSet<u32>,
    ) -> Vec<Delivery> {
        let from = read.plan.from.0;
        let mut out: Vec<Delivery> = Vec::new();
        let mut next_new = self.read_position.0;
        let mut prev = from;
        let entries = read.entries;
        let mut i = 0;
        while i < entries.len() {
            let first = entries[i];
            if first.offset.0 < from || first.offset.0 < prev {
                i += 1;
                continue;
            }
            if first.offset.0 >= end {
                break;
            }
            // This batch's messages in the read, and which are outstanding:
            // queued ones and new ones not acknowledged.
            let mut batch: Vec<(i64, bool)> = Vec::new();
            let mut hash = None;
            while i < entries.len() {
                let e = entries[i];
                let o = e.offset.0;
                if e.batch != first.batch || o >= end || o < prev {
                    break;
                }
                i += 1;
                self.gap(prev, o, &mut next_new, new_ok);
                prev = o + 1;
                if let Some(&h) = self.queue.get(&o) {
                    hash.get_or_insert(h);
                    batch.push((o, true));
                    continue;
                }
                if !new_ok || o < next_new {
                    continue;
                }
                next_new = o + 1;
                if !self.cursor.is_acked(Offset(o)) {
                    hash.get_or_insert(e.key_hash % HASH_RANGE_SIZE);
                    batch.push((o, false));
                }
            }
            let Some(hash) = hash else { continue };
            let target = if blocked.contains(&hash) {
                None
            } else {
                self.key_shared_target(hash)
            };
            if let Some(c) = target {
                for &(o, queued) in &batch {
                    if queued {
                        self.queue.remove(&o);
                    }
                    self.deliver(c, o, hash, &mut out);
                }
                continue;
            }
            // Held back: its consumer has no permits, or an earlier message
            // of the key is still out; later messages of the key wait too.
            blocked.insert(hash);
            let fresh: Vec<i64> = batch.iter().filter(|b| !b.1).map(|b| b.0).collect();
            let Some(&first_new) = fresh.first() else {
                continue;
            };
            if self.queue.len() + fresh.len() <= MAX_HELD_MESSAGES {
                self.queue.extend(fresh.iter().map(|&o| (o, hash)));
            } else {
                next_new = first_new;
                new_ok = false;
            }
        }
        self.gap(prev, end, &mut next_new, new_ok);
        self.read_position = Offset(self.read_position.0.max(next_new));
        out
    }

    /// Offsets in `[from, to)` of a read hold no message: queued ones are
    /// dropped and new ones skipped, both counting as acknowledged.
    fn gap(&mut self, from: i64, to: i64, next_new: &mut i64, new_ok: bool) {
        if from >= to {
            return;
        }
        let queued: Vec<i64> = self.queue.range(from..to).map(|(&o, _)| o).collect();
        for o in queued {
            self.queue.remove(&o);
            self.acked(o);
        }
        if new_ok && *next_new >= from && *next_new < to {
            if self.cursor.ack(Offset(*next_new)..Offset(to)) {
                self.dirty = true;
            }
            *next_new = to;
        }
    }

    /// The subscription as stats report it.
    pub fn stats(&self, log_end: Offset) -> SubscriptionStats {
        SubscriptionStats {
            name: self.name.clone(),
            sub_type: self.sub_type,
            durable: self.durable,
            mark_delete: self.cursor.mark_delete(),
            read_position: self.read_position,
            backlog: self.cursor.backlog(log_end),
            acked_ranges: self.cursor.acked_ranges().count(),
            redelivery_backlog: self.queue.len(),
            consumers: self
                .consumers
                .iter()
                .map(|c| ConsumerStats {
                    id: c.spec.id,
                    name: c.spec.name.clone(),
                    priority_level: c.spec.priority_level,
                    permits: c.permits.max(0) as u64,
                    unacked: c.pending.len(),
                    active: !self.sub_type.single_active() || self.active == Some(c.spec.id),
                })
                .collect(),
        }
    }

    fn index(&self, id: ConsumerId) -> Result<usize, CoordError> {
        self.consumers
            .iter()
            .position(|c| c.spec.id == id)
            .ok_or_else(|| {
                CoordError::ConsumerNotFound(format!(
                    "consumer {} of connection {} is not attached to subscription {}",
                    id.consumer, id.connection, self.name
                ))
            })
    }

    /// Permits of the consumers that can receive messages now.
    fn usable_permits(&self) -> u64 {
        match self.sub_type {
            SubscriptionType::Exclusive | SubscriptionType::Failover => self
                .active
                .and_then(|a| self.consumers.iter().find(|c| c.spec.id == a))
                .map_or(0, |c| c.permits.max(0) as u64),
            _ => self.consumers.iter().map(|c| c.permits.max(0) as u64).sum(),
        }
    }

    /// The consumer (index) to send a message of key hash `hash` to now.
    fn pick(&mut self, hash: u32) -> Option<usize> {
        match self.sub_type {
            SubscriptionType::Exclusive | SubscriptionType::Failover => {
                let a = self.active?;
                self.consumers
                    .iter()
                    .position(|c| c.spec.id == a && c.permits > 0)
            }
            SubscriptionType::Shared => self.shared_target(),
            SubscriptionType::KeyShared => self.key_shared_target(hash),
        }
    }

    /// Shared: round-robin over the consumers with permits at the best
    /// priority level, [`ROUND_ROBIN_BATCH`] messages per turn.
    fn shared_target(&mut self) -> Option<usize> {
        let best = self
            .consumers
            .iter()
            .filter(|c| c.permits > 0)
            .map(|c| c.spec.priority_level)
            .min()?;
        let eligible = |c: &Consumer| c.permits > 0 && c.spec.priority_level == best;
        if let Some(t) = self.turn {
            if self.turn_left > 0 && eligible(&self.consumers[t]) {
                self.turn_left -= 1;
                return Some(t);
            }
        }
        let n = self.consumers.len();
        let first = self.turn.map_or(0, |t| t + 1);
        let next = (0..n)
            .map(|k| (first + k) % n)
            .find(|&i| eligible(&self.consumers[i]))?;
        self.turn = Some(next);
        self.turn_left = ROUND_ROBIN_BATCH - 1;
        Some(next)
    }

    /// Key_Shared: the owner of `hash`, if it has permits and no other
    /// consumer still holds messages of that hash (per-key order).
    fn key_shared_target(&self, hash: u32) -> Option<usize> {
        let owner = self.ranges.owner(hash)?;
        if self
            .holders
            .get(&hash)
            .is_some_and(|h| h.iter().any(|(c, _)| *c != owner))
        {
            return None;
        }
        self.consumers
            .iter()
            .position(|c| c.spec.id == owner && c.permits > 0)
    }

    fn deliver(&mut self, i: usize, o: i64, hash: u32, out: &mut Vec<Delivery>) {
        let c = &mut self.consumers[i];
        c.permits -= 1;
        c.pending.insert(o);
        let id = c.spec.id;
        self.pending.insert(o, Pending { consumer: id, hash });
        let holders = self.holders.entry(hash).or_default();
        match holders.iter_mut().find(|(h, _)| *h == id) {
            Some((_, n)) => *n += 1,
            None => holders.push((id, 1)),
        }
        let message = Message {
            offset: Offset(o),
            redelivery_count: self.redeliveries.get(&o).copied().unwrap_or(0),
        };
        match out.iter_mut().find(|d| d.consumer == id) {
            Some(d) => d.messages.push(message),
            None => out.push(Delivery {
                consumer: id,
                messages: vec![message],
            }),
        }
    }

    /// Removes `o` from pending (at whichever consumer holds it).
    fn unpend(&mut self, o: i64) -> Option<Pending> {
        let p = self.pending.remove(&o)?;
        if let Some(c) = self.consumers.iter_mut().find(|c| c.spec.id == p.consumer) {
            c.pending.remove(&o);
        }
        if let Some(h) = self.holders.get_mut(&p.hash) {
            if let Some(i) = h.iter().position(|(c, _)| *c == p.consumer) {
                h[i].1 -= 1;
                if h[i].1 == 0 {
                    h.swap_remove(i);
                }
            }
            if h.is_empty() {
                self.holders.remove(&p.hash);
            }
        }
        Some(p)
    }

    fn acked(&mut self, o: i64) {
        self.redeliveries.remove(&o);
        if self.cursor.ack(Offset(o)..Offset(o + 1)) {
            self.dirty = true;
        }
    }

    /// Moves `id`'s pending messages (these, or all) to the redelivery queue.
    fn requeue(&mut self, id: ConsumerId, offsets: Option<&[Offset]>) {
        let Some(c) = self.consumers.iter().find(|c| c.spec.id == id) else {
            return;
        };
        let moving: Vec<i64> = match offsets {
            None => c.pending.iter().copied().collect(),
            Some(list) => list
                .iter()
                .map(|o| o.0)
                .filter(|o| c.pending.contains(o))
                .collect(),
        };
        for o in moving {
            if let Some(p) = self.unpend(o) {
                self.queue.insert(o, p.hash);
                *self.redeliveries.entry(o).or_default() += 1;
            }
        }
    }

    /// Exclusive/Failover: recomputes the active consumer; on a change the
    /// old one's messages go back for redelivery and, for Failover, every
    /// consumer is told.
    fn reselect_active(&mut self) -> Vec<Effect> {
        if !self.sub_type.single_active() {
            self.active = None;
            return Vec::new();
        }
        let new = self.pick_active();
        if new == self.active {
            return Vec::new();
        }
        if let Some(old) = self.active {
            self.requeue(old, None);
        }
        self.active = new;
        if self.sub_type != SubscriptionType::Failover {
            return Vec::new();
        }
        self.consumers
            .iter()
            .map(|c| Effect::ActiveConsumerChanged {
                consumer: c.spec.id,
                active: Some(c.spec.id) == new,
            })
            .collect()
    }

    /// Upstream's pick: sort by priority level then name (ties keep attach
    /// order), keep the best level, and take index `partition % n` on a
    /// partitioned topic, the first otherwise.
    fn pick_active(&self) -> Option<ConsumerId> {
        let mut sorted: Vec<&Consumer> = self.consumers.iter().collect();
        sorted.sort_by(|a, b| {
            (a.spec.priority_level, &a.spec.name).cmp(&(b.spec.priority_level, &b.spec.name))
        });
        let best = sorted.first()?.spec.priority_level;
        sorted.retain(|c| c.spec.priority_level == best);
        let i = match (self.sub_type, self.partition_index) {
            (SubscriptionType::Failover, Some(p)) if p >= 0 => p as usize % sorted.len(),
            _ => 0,
        };
        Some(sorted[i].spec.id)
    }

    /// Retention removed everything below `log_start`: it counts as
    /// acknowledged and reading continues from there.
    fn apply_retention(&mut self, log_start: Offset) {
        if self.cursor.ack_below(log_start) {
            self.dirty = true;
        }
        let gone: Vec<i64> = self.pending.range(..log_start.0).map(|(&o, _)| o).collect();
        for o in gone {
            self.unpend(o);
            self.redeliveries.remove(&o);
        }
        let gone: Vec<i64> = self.queue.range(..log_start.0).map(|(&o, _)| o).collect();
        for o in gone {
            self.queue.remove(&o);
            self.redeliveries.remove(&o);
        }
        self.read_position = self.read_position.max(log_start);
    }

    /// The consumer `o` is pending at.
    #[cfg(test)]
    pub(crate) fn pending_owner(&self, o: Offset) -> Option<ConsumerId> {
        self.pending.get(&o.0).map(|p| p.consumer)
    }

    /// Checks the invariant for every offset below `log_end`.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self, log_end: Offset) -> Result<(), String> {
        let mark = self.cursor.mark_delete().0;
        if self
            .pending
            .keys()
            .chain(self.queue.keys())
            .any(|&o| o < mark)
        {
            return Err("an offset below the mark-delete position is out".into());
        }
        for o in self.cursor.mark_delete().0..log_end.0 {
            let acked = self.cursor.is_acked(Offset(o));
            let pending_at: Vec<ConsumerId> = self
                .consumers
                .iter()
                .filter(|c| c.pending.contains(&o))
                .map(|c| c.spec.id)
                .collect();
            let queued = self.queue.contains_key(&o);
            let unread = o >= self.read_position.0;
            let states = usize::from(acked) + pending_at.len() + usize::from(queued);
            if unread {
                if pending_at.len() + usize::from(queued) != 0 {
                    return Err(format!("offset {o} at/after the read position is out"));
                }
            } else if states != 1 {
                return Err(format!(
                    "offset {o}: acked {acked}, pending at {pending_at:?}, queued {queued}"
                ));
            }
            if pending_at.len() == 1
                && self.pending.get(&o).map(|p| p.consumer) != pending_at.first().copied()
            {
                return Err(format!("offset {o}: pending index disagrees"));
            }
        }
        let per_consumer: usize = self.consumers.iter().map(|c| c.pending.len()).sum();
        if per_consumer != self.pending.len() {
            return Err("pending index has offsets of no consumer".into());
        }
        let held: u32 = self.holders.values().flatten().map(|(_, n)| n).sum();
        if held as usize != self.pending.len() {
            return Err("key hash holders disagree with pending".into());
        }
        Ok(())
    }
}
