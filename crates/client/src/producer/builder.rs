//! Producer settings.

use std::sync::Arc;
use std::time::Duration;

use super::accumulator::SharedAccumulator;
use super::{sender, Acks, Compression, Producer, ProducerShared};
use crate::client::{Client, ClientSource};
use crate::error::{Error, Result};

/// The settings a running producer uses.
#[derive(Debug, Clone)]
pub(crate) struct ProducerConfig {
    pub linger: Duration,
    pub batch_size: usize,
    pub compression: Compression,
    pub acks: Acks,
    pub idempotence: bool,
    /// Whether idempotence was asked for explicitly (a broker without
    /// InitProducerId is then an error rather than a silent downgrade).
    pub idempotence_explicit: bool,
    pub max_in_flight: usize,
    pub request_timeout: Duration,
    pub delivery_timeout: Duration,
    pub retries: u32,
    pub retry_backoff: Duration,
    pub allow_auto_create_topics: bool,
}

/// Builds a [`Producer`]. Defaults follow Kafka's Java producer:
/// idempotence on, `acks=all`, `linger` 5 ms, `batch_size` 16 KiB,
/// `max_in_flight` 5, unlimited retries within a 120 s delivery timeout.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use std::time::Duration;
/// let producer = magnetar_client::Producer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .linger(Duration::from_millis(10))
///     .batch_size(64 * 1024)
///     .compression(magnetar_client::Compression::Zstd)
///     .acks(magnetar_client::Acks::All)
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    source: ClientSource,
    linger: Duration,
    batch_size: usize,
    compression: Compression,
    acks: Acks,
    idempotence: Option<bool>,
    max_in_flight: usize,
    request_timeout: Duration,
    delivery_timeout: Duration,
    retries: u32,
    retry_backoff: Duration,
    allow_auto_create_topics: bool,
}

impl Default for ProducerBuilder {
    fn default() -> Self {
        ProducerBuilder {
            source: ClientSource::default(),
            linger: Duration::from_millis(5),
            batch_size: 16 * 1024,
            compression: Compression::None,
            acks: Acks::All,
            idempotence: None,
            max_in_flight: 5,
            request_timeout: Duration::from_secs(30),
            delivery_timeout: Duration::from_secs(120),
            retries: u32::MAX,
            retry_backoff: Duration::from_millis(100),
            allow_auto_create_topics: true,
        }
    }
}

impl ProducerBuilder {
    /// Bootstrap brokers: one `host:port` or a comma-separated list; may be
    /// called repeatedly.
    pub fn bootstrap(mut self, servers: &str) -> Self {
        self.source.add_bootstrap(servers);
        self
    }

    /// Uses an existing [`Client`] (shares its connections) instead of
    /// bootstrapping a new one.
    pub fn client(mut self, client: Client) -> Self {
        self.source.set_client(client);
        self
    }

    /// The client id for a new connection pool.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.source.set_client_id(id.into());
        self
    }

    /// TLS and SASL settings of the client this builder bootstraps (not
    /// used with [`Self::client`], whose own settings apply).
    pub fn security(mut self, security: crate::SecurityConfig) -> Self {
        self.source.set_security(security);
        self
    }

    /// How long a batch waits for more records before it is sent.
    pub fn linger(mut self, d: Duration) -> Self {
        self.linger = d;
        self
    }

    /// A batch is sent as soon as it holds about this many bytes.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.batch_size = bytes.max(1);
        self
    }

    /// Compression codec for batches.
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// Acknowledgements to wait for. Idempotence needs [`Acks::All`].
    pub fn acks(mut self, acks: Acks) -> Self {
        self.acks = acks;
        self
    }

    /// Turns idempotence (InitProducerId and per-partition sequence
    /// numbers) on or off. On by default; when left at the default it is
    /// turned off quietly if `acks` or `max_in_flight` rule it out or the
    /// broker lacks InitProducerId, while an explicit `true` makes those an
    /// error.
    pub fn idempotence(mut self, on: bool) -> Self {
        self.idempotence = Some(on);
        self
    }

    /// Most requests in flight per broker connection (at most 5 with
    /// idempotence).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// How long to wait for each Produce response.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Upper bound from `send` to success or failure, retries included.
    pub fn delivery_timeout(mut self, d: Duration) -> Self {
        self.delivery_timeout = d;
        self
    }

    /// How many times a batch is retried after a retriable error.
    pub fn retries(mut self, n: u32) -> Self {
        self.retries = n;
        self
    }

    /// Pause before retrying a failed batch.
    pub fn retry_backoff(mut self, d: Duration) -> Self {
        self.retry_backoff = d;
        self
    }

    /// Whether metadata lookups for unknown topics may create them (when the
    /// broker allows it); on by default, as in Kafka's producers.
    pub fn allow_auto_create_topics(mut self, on: bool) -> Self {
        self.allow_auto_create_topics = on;
        self
    }

    pub(crate) fn config(&self) -> Result<ProducerConfig> {
        let explicit = self.idempotence == Some(true);
        let mut idempotence = self.idempotence.unwrap_or(true);
        if idempotence && (self.acks != Acks::All || self.max_in_flight > 5) {
            if explicit {
                return Err(Error::InvalidArgument(
                    "idempotence needs acks=all and max_in_flight <= 5".into(),
                ));
            }
            idempotence = false;
        }
        Ok(ProducerConfig {
            linger: self.linger,
            batch_size: self.batch_size,
            compression: self.compression,
            acks: self.acks,
            idempotence,
            idempotence_explicit: explicit,
            max_in_flight: self.max_in_flight,
            request_timeout: self.request_timeout,
            delivery_timeout: self.delivery_timeout,
            retries: self.retries,
            retry_backoff: self.retry_backoff,
            allow_auto_create_topics: self.allow_auto_create_topics,
        })
    }

    /// Connects (unless a [`Client`] was given) and starts the sender task.
    /// Must be called inside a Tokio runtime.
    pub async fn build(self) -> Result<Producer> {
        let config = Arc::new(self.config()?);
        let client = self.source.connect(self.request_timeout).await?;
        let acc = Arc::new(SharedAccumulator::new(config.clone()));
        let handle = sender::spawn(acc.clone(), client.clone(), config);
        Ok(Producer {
            inner: Arc::new(ProducerShared {
                acc,
                client,
                _sender: handle,
            }),
        })
    }
}
