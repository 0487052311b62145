//! What the user sends and what comes back.

use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;

/// A record to produce.
///
/// Key, value and header values are [`Bytes`], so `&'static str`,
/// `String`, `Vec<u8>` and `Bytes` all work without copies beyond the
/// conversion. Headers are unique by key (a later one replaces an earlier
/// one with the same key).
///
/// ```
/// use magnetar_client::ProducerRecord;
/// let r = ProducerRecord::new("orders")
///     .key("customer-7")
///     .value(b"{\"total\": 12}".to_vec())
///     .header("source", "web")
///     .partition(3)
///     .timestamp(1_700_000_000_000);
/// assert_eq!(r.topic(), "orders");
/// assert_eq!(r.get_partition(), Some(3));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerRecord {
    pub(crate) topic: String,
    pub(crate) partition: Option<i32>,
    pub(crate) key: Option<Bytes>,
    pub(crate) value: Option<Bytes>,
    pub(crate) timestamp: Option<i64>,
    pub(crate) headers: IndexMap<StrBytes, Option<Bytes>>,
}

impl ProducerRecord {
    /// A record for `topic` with no key, no value (a tombstone until
    /// [`ProducerRecord::value`] is set), no headers.
    pub fn new(topic: impl Into<String>) -> ProducerRecord {
        ProducerRecord {
            topic: topic.into(),
            partition: None,
            key: None,
            value: None,
            timestamp: None,
            headers: IndexMap::new(),
        }
    }

    /// Sets the key; keyed records go to `murmur2(key) % partitions`.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the value.
    pub fn value(mut self, value: impl Into<Bytes>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// Sends to this partition instead of using the partitioner.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the create timestamp (ms since the epoch) instead of now.
    pub fn timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers
            .insert(StrBytes::from_string(key.into()), Some(value.into()));
        self
    }

    /// Adds a header with a null value.
    pub fn null_header(mut self, key: impl Into<String>) -> Self {
        self.headers.insert(StrBytes::from_string(key.into()), None);
        self
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The explicit partition, if any.
    pub fn get_partition(&self) -> Option<i32> {
        self.partition
    }

    /// Bytes this record adds to a batch, roughly as encoded.
    pub(crate) fn estimated_size(&self) -> usize {
        let mut n = 21
            + self.key.as_ref().map_or(0, |k| k.len())
            + self.value.as_ref().map_or(0, |v| v.len());
        for (k, v) in &self.headers {
            n += 10 + k.len() + v.as_ref().map_or(0, |v| v.len());
        }
        n
    }
}

/// Where a record landed.
///
/// ```no_run
/// # async fn f(p: magnetar_client::Producer) -> magnetar_client::Result<()> {
/// let md: magnetar_client::RecordMetadata = p.send(magnetar_client::ProducerRecord::new("t").value("v")).await?;
/// assert!(md.offset >= 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The partition.
    pub partition: i32,
    /// The record's offset; -1 with `acks=0` (no answer) or when the broker
    /// reported a duplicate without its offset.
    pub offset: i64,
    /// The record's timestamp: the broker's append time for topics with
    /// `LogAppendTime`, otherwise the create time sent.
    pub timestamp: i64,
}
