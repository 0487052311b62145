use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Error;

/// The consumer groups' offsets and state: Kafka's internal topic.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// A cluster broker's own state log (Pulsar subscriptions, producer
/// sequences and schemas of what it leads) beside the replicated
/// `__consumer_offsets`: never a topic of the cluster, but its directory
/// sits with the partitions', so no topic may take the name.
pub const NODE_STATE_LOG: &str = "__magnetar_node_state";

/// The broker's internal topics, as in Kafka (`Topic.INTERNAL_TOPICS`),
/// and [`NODE_STATE_LOG`]. Other names starting with `__` are ordinary
/// topics.
pub const INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
    NODE_STATE_LOG,
];

/// Whether `name` is one of [`INTERNAL_TOPICS`].
pub fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

/// Longest legal topic name, as in Kafka (leaves room for partition
/// suffixes in directory names).
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// A topic name that follows Kafka's rules: 1 to 249 characters from
/// `[a-zA-Z0-9._-]`, and neither `.` nor `..`.
///
/// Cheap to clone (shared).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicName(Arc<str>);

impl TopicName {
    /// Validates `name` and wraps it.
    pub fn new(name: &str) -> Result<TopicName, Error> {
        let invalid = |reason| Error::InvalidTopicName {
            name: name.to_string(),
            reason,
        };
        if name.is_empty() {
            return Err(invalid("topic name is empty"));
        }
        if name.len() > MAX_TOPIC_NAME_LEN {
            return Err(invalid("topic name is longer than 249 characters"));
        }
        if name == "." || name == ".." {
            return Err(invalid("topic name cannot be \".\" or \"..\""));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return Err(invalid(
                "topic name may only contain ASCII alphanumerics, '.', '_' and '-'",
            ));
        }
        Ok(TopicName(Arc::from(name)))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is one of the broker's internal topics (Kafka's fixed
    /// set), which clients hide from listings and cannot write to.
    pub fn is_internal(&self) -> bool {
        is_internal_topic(&self.0)
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::borrow::Borrow<str> for TopicName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for TopicName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TopicName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TopicName::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_kafka_legal_names() {
        for n in [
            "a",
            "orders",
            "orders-v2.eu_west",
            "__consumer_offsets",
            "...",
        ] {
            assert!(TopicName::new(n).is_ok(), "{n}");
        }
        assert!(TopicName::new("__consumer_offsets").unwrap().is_internal());
        assert!(!TopicName::new("orders").unwrap().is_internal());
        assert!(!TopicName::new("__debezium-heartbeat.db")
            .unwrap()
            .is_internal());
    }

    #[test]
    fn rejects_illegal_names() {
        for n in ["", ".", "..", "has space", "slash/y", "ümlaut", "tab\t"] {
            assert!(TopicName::new(n).is_err(), "{n:?}");
        }
        assert!(TopicName::new(&"a".repeat(249)).is_ok());
        assert!(TopicName::new(&"a".repeat(250)).is_err());
    }

    proptest! {
        #[test]
        fn valid_names_round_trip(name in "[a-zA-Z0-9._-]{3,249}") {
            let t = TopicName::new(&name).unwrap();
            prop_assert_eq!(t.as_str(), name.as_str());
            prop_assert_eq!(t.to_string(), name);
        }
    }
}
