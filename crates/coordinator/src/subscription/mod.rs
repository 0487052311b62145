//! Subscriptions: protocol-neutral cursors and dispatch for front ends whose
//! consumers acknowledge messages one by one (Pulsar's subscriptions and
//! Readers), over the same partition logs Kafka clients read.
//!
//! A subscription is per (topic, partition, name). Messages are the
//! partition's offsets. [`Subscription`] is a sans-IO state machine: it
//! takes consumer events (attach, detach, flow permits, acks, redelivery
//! requests, seek) and the log's bounds, and decides which consumer gets
//! which offset; it reads no log and no clock. The front end drives a
//! dispatch round as:
//!
//! 1. [`Subscription::next_read`] says where to read (a [`ReadPlan`]), or
//!    that nothing can be dispatched now;
//! 2. the front end reads the log once from `plan.from` and passes every
//!    message it read as [`Entry`]s in a [`Read`] to
//!    [`Subscription::dispatch`];
//! 3. which returns the [`Delivery`]s to send: never more messages to a
//!    consumer than its permits, redeliveries first.
//!
//! [`Subscriptions`] is the broker's registry of them (behind one mutex),
//! and persists durable cursors as their own record type in the group log
//! (see [`crate::group::store::RecordKey::Subscription`]).

mod cursor;
mod dispatcher;
mod keyshared;
mod registry;

#[cfg(test)]
mod tests;

use model::Offset;

pub use crate::subscription_type::SubscriptionType;
pub use cursor::{Cursor, CursorRecord, MAX_PERSISTED_RANGES};
pub use dispatcher::{Subscription, MAX_HELD_MESSAGES, ROUND_ROBIN_BATCH};
pub use keyshared::HASH_RANGE_SIZE;
pub use registry::{SubscribeRequest, SubscriptionKey, Subscriptions};

/// A consumer's identity, chosen by the front end: its connection and the
/// consumer id the client gave on that connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumerId {
    /// The front end's connection id.
    pub connection: u64,
    /// The consumer id within the connection.
    pub consumer: u64,
}

/// A consumer attaching to a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerSpec {
    /// Who it is.
    pub id: ConsumerId,
    /// The client's consumer name (may be empty).
    pub name: String,
    /// Pulsar priority level: 0 is the highest.
    pub priority_level: i32,
}

/// Where a new subscription starts (an existing durable one keeps its
/// cursor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPosition {
    /// The log start.
    Earliest,
    /// The log end: only messages produced from now on.
    Latest,
    /// This offset, clamped into [log start, log end].
    Offset(Offset),
}

/// The partition log's current bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBounds {
    /// The first offset still in the log.
    pub start: Offset,
    /// The offset the next append gets.
    pub end: Offset,
}

/// An acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ack {
    /// These offsets (each range end-exclusive).
    Individual(Vec<std::ops::Range<Offset>>),
    /// Everything through this offset, inclusive (Exclusive and Failover
    /// only).
    Cumulative(Offset),
}

/// What the front end should read for one dispatch round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadPlan {
    /// Read from this offset (the lowest offset to redeliver, or the read
    /// position).
    pub from: Offset,
    /// At most this many messages from `from` can be sent this round.
    pub max_messages: usize,
}

/// One message the front end read: its offset, the batch holding it, and
/// the hash of its key in `0..HASH_RANGE_SIZE` (Pulsar: Murmur3-32 of the
/// sticky key, masked to 31 bits, modulo 65536); any hash will do for other
/// types than Key_Shared.
///
/// Every subscription type hands a batch's outstanding messages to one
/// consumer in one delivery, even beyond its permits (as upstream sends
/// whole entries):
/// clients that do not acknowledge batch indexes (the default) acknowledge a
/// batch only once every message of it they were sent is acknowledged, so a
/// batch split between consumers or deliveries is never acknowledged. A
/// batch goes by the hash of its first message in the read; the front end
/// gives all of a batch's messages the same hash (upstream routes an entry
/// by its metadata's key, which producers copy from the batch's first
/// message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The message's offset.
    pub offset: Offset,
    /// The first offset of the stored batch holding it (its own offset for
    /// a message stored alone).
    pub batch: Offset,
    /// Its key hash.
    pub key_hash: u32,
}

/// The result of reading the log for a [`ReadPlan`].
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    /// The plan that was read.
    pub plan: ReadPlan,
    /// Every message in `[plan.from, end)`, in offset order (records before
    /// `plan.from` may be included; they are ignored).
    pub entries: &'a [Entry],
    /// The first offset the read did not cover. Offsets in
    /// `[plan.from, end)` without an entry hold no message (transaction
    /// markers, compacted records) and count as acknowledged.
    pub end: Offset,
}

/// A message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// Its offset.
    pub offset: Offset,
    /// How often it was delivered before and came back unacknowledged.
    pub redelivery_count: u32,
}

/// Messages to send to one consumer, in offset order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The recipient.
    pub consumer: ConsumerId,
    /// What to send it.
    pub messages: Vec<Message>,
}

/// Something the front end must tell a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Failover: `consumer` is now (or is not) the active consumer.
    ActiveConsumerChanged {
        /// Whom to tell.
        consumer: ConsumerId,
        /// Whether it receives messages.
        active: bool,
    },
}

/// One consumer in [`SubscriptionStats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerStats {
    /// Who it is.
    pub id: ConsumerId,
    /// Its name.
    pub name: String,
    /// Its priority level.
    pub priority_level: i32,
    /// Messages it may still be sent.
    pub permits: u64,
    /// Messages sent to it and not acknowledged.
    pub unacked: usize,
    /// Whether it receives messages (always true for Shared/Key_Shared).
    pub active: bool,
}

/// A subscription as stats report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionStats {
    /// Its name.
    pub name: String,
    /// Its type.
    pub sub_type: SubscriptionType,
    /// Whether its cursor is persisted (false for Readers).
    pub durable: bool,
    /// The first offset not acknowledged.
    pub mark_delete: Offset,
    /// The next offset to read from the log.
    pub read_position: Offset,
    /// Messages after the mark-delete position, less those acknowledged.
    pub backlog: u64,
    /// Individually acknowledged ranges beyond the mark-delete position.
    pub acked_ranges: usize,
    /// Messages waiting to be redelivered (or held for Key_Shared order).
    pub redelivery_backlog: usize,
    /// Attached consumers, in attach order.
    pub consumers: Vec<ConsumerStats>,
}
