//! What the consumer and the reader hand out: messages, their ids, and
//! topic-partition names.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, TimestampType};

/// A partition of a topic.
///
/// ```
/// let tp = magnetar_client::TopicPartition::new("orders", 3);
/// assert_eq!(tp.to_string(), "orders-3");
/// assert_eq!("orders-3".parse::<magnetar_client::TopicPartition>().unwrap(), tp);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`'s partition `partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Where a message sits in its topic: partition and offset. Like Pulsar's
/// `MessageId`, it shows whether a reader got the message it asked for or
/// a later one (after retention removed the earlier ones).
///
/// ```
/// let id = magnetar_client::MessageId { partition: 2, offset: 41 };
/// assert_eq!(id.to_string(), "2:41");
/// assert!(id < magnetar_client::MessageId { partition: 2, offset: 42 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId {
    /// Partition index.
    pub partition: i32,
    /// Offset within the partition.
    pub offset: i64,
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.partition, self.offset)
    }
}

/// A message's headers, in the order the producer wrote them (unique by
/// key).
///
/// ```no_run
/// # fn f(m: &magnetar_client::Message) {
/// if let Some(Some(source)) = m.headers().get("source") {
///     println!("from {}", String::from_utf8_lossy(source));
/// }
/// for (k, v) in m.headers().iter() { println!("{k}: {v:?}"); }
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Headers(IndexMap<StrBytes, Option<Bytes>>);

impl Headers {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of header `key`: `None` if absent, `Some(None)` for a
    /// header with a null value.
    pub fn get(&self, key: &str) -> Option<Option<&[u8]>> {
        self.0
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v.as_deref())
    }

    /// Every header as (key, value).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&[u8]>)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_deref()))
    }
}

/// A message read from a partition, by a [`crate::Consumer`] or a
/// [`crate::Reader`].
///
/// Key, value and header values share the fetched response's memory (no
/// copy for uncompressed batches); the topic name is shared by every
/// message of the topic.
///
/// ```no_run
/// # async fn f(mut consumer: magnetar_client::Consumer) -> magnetar_client::Result<()> {
/// let m: magnetar_client::Message = consumer.recv().await?;
/// println!(
///     "{}/{}@{} key={:?} value={:?} ts={}",
///     m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp()
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    timestamp: i64,
    log_append_time: bool,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Headers,
}

impl Message {
    /// A message from a decoded record (moves the record's buffers).
    pub(crate) fn from_record(topic: &Arc<str>, partition: i32, r: Record) -> Message {
        Message {
            topic: topic.clone(),
            partition,
            offset: r.offset,
            timestamp: r.timestamp,
            log_append_time: r.timestamp_type == TimestampType::LogAppend,
            key: r.key,
            value: r.value,
            headers: Headers(r.headers),
        }
    }

    /// Topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Partition index.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Offset within the partition.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Partition and offset.
    pub fn id(&self) -> MessageId {
        MessageId {
            partition: self.partition,
            offset: self.offset,
        }
    }

    /// Topic and partition as an owned name.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(&*self.topic, self.partition)
    }

    /// Timestamp in ms since the epoch: the producer's create time, or
    /// the broker's append time for topics with `LogAppendTime`.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// Whether [`Message::timestamp`] is the broker's append time.
    pub fn is_log_append_time(&self) -> bool {
        self.log_append_time
    }

    /// The key, if any.
    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    /// The value; `None` for a tombstone.
    pub fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }

    /// The key as shared bytes (cheap to clone and keep).
    pub fn key_bytes(&self) -> Option<&Bytes> {
        self.key.as_ref()
    }

    /// The value as shared bytes (cheap to clone and keep).
    pub fn value_bytes(&self) -> Option<&Bytes> {
        self.value.as_ref()
    }

    /// The headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_partition_parses_the_last_dash() {
        let tp: TopicPartition = "my-topic-12".parse().unwrap();
        assert_eq!(tp, TopicPartition::new("my-topic", 12));
        assert!("nodash".parse::<TopicPartition>().is_err());
        assert!("-3".parse::<TopicPartition>().is_err());
        assert!("t-x".parse::<TopicPartition>().is_err());
    }

    #[test]
    fn message_from_record_keeps_everything() {
        let mut headers = IndexMap::new();
        headers.insert(
            StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"v")),
        );
        headers.insert(StrBytes::from_static_str("n"), None);
        let r = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 7,
            sequence: -1,
            timestamp: 1234,
            key: Some(Bytes::from_static(b"k")),
            value: None,
            headers,
        };
        let topic: Arc<str> = Arc::from("t");
        let m = Message::from_record(&topic, 3, r);
        assert_eq!(
            m.id(),
            MessageId {
                partition: 3,
                offset: 7
            }
        );
        assert_eq!(m.topic_partition(), TopicPartition::new("t", 3));
        assert_eq!(m.key(), Some(&b"k"[..]));
        assert_eq!(m.value(), None);
        assert_eq!(m.timestamp(), 1234);
        assert!(!m.is_log_append_time());
        assert_eq!(m.headers().get("h"), Some(Some(&b"v"[..])));
        assert_eq!(m.headers().get("n"), Some(None));
        assert_eq!(m.headers().get("x"), None);
        let keys: Vec<&str> = m.headers().iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["h", "n"]);
    }
}
