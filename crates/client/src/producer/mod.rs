//! The producer: batching per partition, compression, idempotence,
//! retries in order, and a future per record.

mod accumulator;
mod builder;
pub(crate) mod partitioner;
mod record;
mod sender;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use accumulator::DeliveryFuture;
pub use builder::ProducerBuilder;
pub use record::{ProducerRecord, RecordMetadata};

use crate::client::Client;
use crate::error::{Error, Result};

/// How many acknowledgements the leader waits for before answering.
///
/// ```
/// assert_eq!(magnetar_client::Acks::All.as_i16(), -1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// No answer at all (`acks=0`): offsets are reported as -1.
    None,
    /// The leader wrote it (`acks=1`).
    Leader,
    /// Every in-sync replica has it (`acks=all`, -1); required for
    /// idempotence.
    All,
}

impl Acks {
    /// The wire value.
    pub fn as_i16(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Batch compression codec.
///
/// ```
/// let c: magnetar_client::Compression = "zstd".parse().unwrap();
/// assert_eq!(c, magnetar_client::Compression::Zstd);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip.
    Gzip,
    /// Snappy (Kafka's framing).
    Snappy,
    /// LZ4 frame.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    pub(crate) fn to_protocol(self) -> kafka_protocol::records::Compression {
        use kafka_protocol::records::Compression as C;
        match self {
            Compression::None => C::None,
            Compression::Gzip => C::Gzip,
            Compression::Snappy => C::Snappy,
            Compression::Lz4 => C::Lz4,
            Compression::Zstd => C::Zstd,
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" | "" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            other => return Err(Error::InvalidArgument(format!("compression {other:?}"))),
        })
    }
}

/// An asynchronous producer.
///
/// [`Producer::send`] queues a record at once, in call order, and returns a
/// future of where it landed. Records are batched per partition (by
/// `linger` and `batch_size`), each batch is encoded and compressed once,
/// and one background task sends them, at most one batch per partition per
/// request and at most `max_in_flight` requests per broker. With
/// idempotence (the default) the broker discards duplicates of retried
/// batches, and retries keep the order of each partition.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use magnetar_client::{Producer, ProducerRecord};
/// let producer = Producer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .compression(magnetar_client::Compression::Lz4)
///     .build()
///     .await?;
/// let ack = producer.send(ProducerRecord::new("orders").key("k1").value("hello"));
/// let md = ack.await?;
/// println!("partition {} offset {}", md.partition, md.offset);
/// producer.flush().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Producer {
    inner: Arc<ProducerShared>,
}

pub(crate) struct ProducerShared {
    pub(crate) acc: Arc<accumulator::SharedAccumulator>,
    pub(crate) client: Client,
    /// Stops the sender task when the last producer handle is dropped.
    _sender: sender::SenderHandle,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").finish_non_exhaustive()
    }
}

impl Producer {
    /// A builder with Kafka's defaults (idempotence on, acks=all).
    pub fn builder() -> ProducerBuilder {
        ProducerBuilder::default()
    }

    /// Queues `record` for sending and returns a future of its partition
    /// and offset. Queueing is synchronous: records sent one after another
    /// to the same partition are written in that order. Errors (unknown
    /// topic, invalid partition, a closed producer) arrive through the
    /// future. The future need not be polled for the record to be sent.
    pub fn send(&self, record: ProducerRecord) -> DeliveryFuture {
        self.inner.acc.append(record)
    }

    /// Sends everything queued now, without waiting for `linger`, and waits
    /// until every record queued so far is acknowledged or failed.
    pub async fn flush(&self) -> Result<()> {
        self.inner.acc.flush().await
    }

    /// Flushes, then stops accepting records; later sends fail with
    /// [`Error::Closed`].
    pub async fn close(&self) -> Result<()> {
        let r = self.flush().await;
        self.inner.acc.close();
        r
    }

    /// The cluster handle this producer uses.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }
}
