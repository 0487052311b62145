//! Domain types shared by every Magnetar crate: offsets, epochs, ids and
//! validated names. This crate does no I/O and knows nothing of any wire
//! protocol.

use std::fmt;

use serde::{Deserialize, Serialize};

pub mod epochs;
mod error;
mod principal;
pub mod pulsar_name;
mod topic_name;

pub use epochs::{EpochEntry, EpochHistory};
pub use error::Error;
pub use principal::Principal;
pub use pulsar_name::{Namespace, PulsarTopic};
pub use topic_name::{
    is_internal_topic, TopicName, INTERNAL_TOPICS, NODE_STATE_LOG, OFFSETS_TOPIC,
};

macro_rules! newtype {
    ($(#[$meta:meta])* $name:ident($inner:ty)) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The raw value.
            pub const fn get(self) -> $inner {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                Self(v)
            }
        }
    };
}

newtype!(
    /// A position in a partition's log: the offset of one record.
    Offset(i64)
);
newtype!(
    /// The index of a partition within its topic, from 0.
    PartitionId(i32)
);
newtype!(
    /// The epoch of a partition's leader; stamped into every batch it appends.
    LeaderEpoch(i32)
);
newtype!(
    /// An idempotent producer's id, handed out by InitProducerId.
    ProducerId(i64)
);
newtype!(
    /// The epoch of an idempotent producer; a bump fences older instances.
    ProducerEpoch(i16)
);
newtype!(
    /// A broker's node id.
    NodeId(i32)
);
newtype!(
    /// Milliseconds since the Unix epoch.
    Timestamp(i64)
);

impl Offset {
    /// The offset `n` records after this one.
    pub const fn plus(self, n: i64) -> Offset {
        Offset(self.0 + n)
    }
}

impl ProducerId {
    /// The id carried by batches from non-idempotent producers.
    pub const NONE: ProducerId = ProducerId(-1);
}

impl LeaderEpoch {
    /// The epoch carried by batches whose producer did not set one.
    pub const UNKNOWN: LeaderEpoch = LeaderEpoch(-1);
}

/// A topic's permanent identity: a random UUID given at creation and never
/// reused, so a deleted-and-recreated topic can be told apart from the old one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TopicId(pub uuid::Uuid);

impl TopicId {
    /// The all-zero id, which Kafka uses to mean "no id".
    pub const ZERO: TopicId = TopicId(uuid::Uuid::nil());

    /// A fresh random id (never the zero id).
    pub fn random() -> TopicId {
        loop {
            let id = uuid::Uuid::new_v4();
            if !id.is_nil() {
                return TopicId(id);
            }
        }
    }

    /// Whether this is the zero id.
    pub fn is_zero(&self) -> bool {
        self.0.is_nil()
    }

    /// Parses the canonical hyphenated form.
    pub fn parse(s: &str) -> Result<TopicId, Error> {
        uuid::Uuid::parse_str(s.trim())
            .map(TopicId)
            .map_err(|_| Error::InvalidTopicId(s.to_string()))
    }
}

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

/// One partition of one topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    /// The topic.
    pub topic: TopicName,
    /// The partition within it.
    pub partition: PartitionId,
}

impl TopicPartition {
    /// Builds a topic-partition pair.
    pub fn new(topic: TopicName, partition: PartitionId) -> Self {
        Self { topic, partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp(d.as_millis() as i64)
}

/// Kafka's `Utils.abs(key.hashCode()) % slots`: the slot of a group or
/// transactional id, Java's `String.hashCode` over UTF-16 units.
pub fn coordinator_slot(key: &str, slots: usize) -> usize {
    let mut h: i32 = 0;
    for u in key.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(u as i32);
    }
    // Kafka's Utils.abs maps i32::MIN to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs as usize % slots.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_ids_are_random_and_round_trip() {
        let a = TopicId::random();
        let b = TopicId::random();
        assert_ne!(a, b);
        assert!(!a.is_zero());
        assert_eq!(TopicId::parse(&a.to_string()).unwrap(), a);
        assert!(TopicId::parse("not-a-uuid").is_err());
        assert!(TopicId::ZERO.is_zero());
    }

    #[test]
    fn topic_partition_displays_like_kafka_dirs() {
        let tp = TopicPartition::new(TopicName::new("orders").unwrap(), PartitionId(3));
        assert_eq!(tp.to_string(), "orders-3");
    }
}
