//! The reader: Pulsar's Reader API over Kafka partitions. No group, no
//! committed state, just a position per partition that survives
//! disconnections and broker restarts.

use std::time::Duration;

use tokio::time::Instant;

use crate::client::{Client, ClientSource, Lane};
use crate::error::{Error, Result};
use crate::fetcher::{FetchSettings, Fetcher, Order, OutOfRange, Pos, Reset};
use crate::message::{Message, MessageId, TopicPartition};

/// Where a [`Reader`] starts (and where [`Reader::seek`] moves it).
///
/// ```
/// use magnetar_client::StartPosition;
/// let from_offset = StartPosition::Offset(0, 42);
/// let from_time = StartPosition::Timestamp(1_700_000_000_000);
/// assert_ne!(from_offset, from_time);
/// assert_eq!(StartPosition::default(), StartPosition::Earliest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartPosition {
    /// The first message still retained.
    #[default]
    Earliest,
    /// Messages written from now on; with `start_inclusive(true)`, the
    /// last message already written as well.
    Latest,
    /// `(partition, offset)`: that message (with `start_inclusive(true)`)
    /// or the one after it. A reader of every partition starts the other
    /// partitions at [`StartPosition::Earliest`]. An offset retention
    /// already deleted continues at the first retained message.
    Offset(i32, i64),
    /// The same offset in every partition read (with `start_inclusive`
    /// as for [`StartPosition::Offset`]); in a partition that ends before
    /// it, the next message written there.
    OffsetInEach(i64),
    /// The first message whose timestamp is at or after this many ms since
    /// the epoch (the end if there is none).
    Timestamp(i64),
}

/// Builds a [`Reader`].
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use magnetar_client::{Reader, StartPosition};
/// let mut reader = Reader::builder("events")
///     .bootstrap("127.0.0.1:9092")
///     .start(StartPosition::Offset(0, 100))
///     .start_inclusive(true)
///     .partition(Some(0))
///     .build()
///     .await?;
/// let m = reader.read_next().await?;
/// assert!(m.offset() >= 100); // > 100 only if retention removed 100
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReaderBuilder {
    topic: String,
    source: ClientSource,
    start: StartPosition,
    inclusive: bool,
    partition: Option<i32>,
    fetch_max_wait: Duration,
    max_partition_fetch_bytes: i32,
    request_timeout: Duration,
    retry_backoff: Duration,
}

impl ReaderBuilder {
    /// Bootstrap brokers: one `host:port` or a comma-separated list.
    pub fn bootstrap(mut self, servers: &str) -> Self {
        self.source.add_bootstrap(servers);
        self
    }

    /// Uses an existing [`Client`] (the reader still fetches on a
    /// connection of its own).
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

    /// Where to start (default [`StartPosition::Earliest`]).
    pub fn start(mut self, start: StartPosition) -> Self {
        self.start = start;
        self
    }

    /// Whether the message named by [`StartPosition::Offset`] (or the last
    /// one, for [`StartPosition::Latest`]) is read too (default false, as
    /// in Pulsar). Applies to [`Reader::seek`] as well.
    pub fn start_inclusive(mut self, inclusive: bool) -> Self {
        self.inclusive = inclusive;
        self
    }

    /// Reads only this partition; `None` (the default) reads them all.
    pub fn partition(mut self, partition: Option<i32>) -> Self {
        self.partition = partition;
        self
    }

    /// How long the broker may hold a Fetch waiting for data (default
    /// 500 ms).
    pub fn fetch_max_wait(mut self, d: Duration) -> Self {
        self.fetch_max_wait = d;
        self
    }

    /// The most bytes fetched per partition per request (default 1 MiB).
    pub fn max_partition_fetch_bytes(mut self, bytes: i32) -> Self {
        self.max_partition_fetch_bytes = bytes.max(1);
        self
    }

    /// How long to wait for a response (default 30 s).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Pause after a failed fetch before trying again (doubling up to 1 s).
    pub fn retry_backoff(mut self, d: Duration) -> Self {
        self.retry_backoff = d;
        self
    }

    /// Connects (unless a [`Client`] was given) and looks up the topic; a
    /// missing topic or partition is [`Error::NotFound`].
    pub async fn build(self) -> Result<Reader> {
        let client = self.source.connect(self.request_timeout).await?;
        let results = client.fetch_metadata(Some(&[&self.topic]), false).await?;
        let md = match results.into_iter().find(|(n, _)| *n == self.topic) {
            Some((_, Ok(md))) => md,
            _ => return Err(Error::NotFound(format!("topic {}", self.topic))),
        };
        let partitions: Vec<i32> = match self.partition {
            Some(p) if md.partition(p).is_some() => vec![p],
            Some(p) => {
                return Err(Error::NotFound(format!(
                    "partition {p} of {} ({} partitions)",
                    self.topic,
                    md.partitions.len()
                )))
            }
            None => md.partitions.iter().map(|p| p.partition).collect(),
        };
        if let (StartPosition::Offset(p, _), Some(only)) = (self.start, self.partition) {
            if p != only {
                return Err(Error::InvalidArgument(format!(
                    "start offset is in partition {p}, the reader reads partition {only}"
                )));
            }
        }
        let lane = client.new_lane();
        let fetcher = Fetcher::new(
            client.clone(),
            lane,
            FetchSettings {
                max_wait: self.fetch_max_wait,
                min_bytes: 1,
                max_bytes: 50 << 20,
                partition_max_bytes: self.max_partition_fetch_bytes,
                request_timeout: self.request_timeout,
                retry_backoff: self.retry_backoff,
            },
            Order::Timestamp,
            OutOfRange::Clamp,
        );
        let mut reader = Reader {
            client,
            lane,
            topic: self.topic,
            partitions,
            fetcher,
            inclusive: self.inclusive,
            request_timeout: self.request_timeout,
            retry_backoff: self.retry_backoff,
        };
        for p in reader.partitions.clone() {
            let tp = TopicPartition::new(reader.topic.clone(), p);
            let pos = reader.start_pos(p, self.start);
            reader.fetcher.add(tp, pos);
        }
        Ok(reader)
    }
}

/// Reads a topic (every partition, or one) from a chosen position, with no
/// consumer group and no committed state: Pulsar's Reader.
///
/// - Each partition's position only moves when a message is returned, so
///   after a disconnection or a broker restart the reader goes on right
///   after the last message it returned: no duplicates, no gaps.
/// - If retention deleted the position (at the start or while reading), it
///   goes on at the first retained message; the returned
///   [`Message::id`]s show the jump.
/// - Across partitions, messages come in timestamp order: each
///   `read_next` returns, among the next messages of all partitions, the
///   one with the smallest timestamp (ties: lower partition). A partition
///   the broker reports as having more data is waited for; one that is
///   caught up, or failing, does not hold the others back. Within a
///   partition the order is always by offset.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use std::time::Duration;
/// use magnetar_client::{Reader, StartPosition};
/// let mut reader = Reader::builder("events")
///     .bootstrap("127.0.0.1:9092")
///     .start(StartPosition::Earliest)
///     .build()
///     .await?;
/// while reader.has_message_available().await? {
///     let m = reader.read_next().await?;
///     println!("{} {:?}", m.id(), m.value());
/// }
/// // Wait a little for more.
/// if let Some(m) = reader.read_next_timeout(Duration::from_secs(1)).await? {
///     println!("late arrival {}", m.id());
/// }
/// # Ok(()) }
/// ```
pub struct Reader {
    client: Client,
    lane: Lane,
    topic: String,
    partitions: Vec<i32>,
    fetcher: Fetcher,
    inclusive: bool,
    request_timeout: Duration,
    retry_backoff: Duration,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.client.release_lane(self.lane);
    }
}

impl Reader {
    /// A builder for a reader of `topic`.
    pub fn builder(topic: impl Into<String>) -> ReaderBuilder {
        ReaderBuilder {
            topic: topic.into(),
            source: ClientSource::default(),
            start: StartPosition::Earliest,
            inclusive: false,
            partition: None,
            fetch_max_wait: Duration::from_millis(500),
            max_partition_fetch_bytes: 1 << 20,
            request_timeout: Duration::from_secs(30),
            retry_backoff: Duration::from_millis(100),
        }
    }

    fn start_pos(&self, partition: i32, start: StartPosition) -> Pos {
        match start {
            StartPosition::Earliest => Pos::Pending(Reset::Earliest),
            StartPosition::Latest if self.inclusive => Pos::Pending(Reset::LastMessage),
            StartPosition::Latest => Pos::Pending(Reset::Latest),
            StartPosition::Offset(p, o) if p == partition => Pos::At(if self.inclusive {
                o
            } else {
                o.saturating_add(1)
            }),
            StartPosition::Offset(..) => Pos::Pending(Reset::Earliest),
            StartPosition::OffsetInEach(o) => Pos::At(if self.inclusive {
                o
            } else {
                o.saturating_add(1)
            }),
            StartPosition::Timestamp(ms) => Pos::Pending(Reset::Timestamp(ms)),
        }
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partitions read.
    pub fn partitions(&self) -> &[i32] {
        &self.partitions
    }

    /// The next message, waiting as long as it takes.
    pub async fn read_next(&mut self) -> Result<Message> {
        loop {
            if let Some(m) = self
                .read_until(Instant::now() + Duration::from_secs(3600))
                .await?
            {
                return Ok(m);
            }
        }
    }

    /// The next message, or `None` if none arrives within `timeout`.
    pub async fn read_next_timeout(&mut self, timeout: Duration) -> Result<Option<Message>> {
        self.read_until(Instant::now() + timeout).await
    }

    async fn read_until(&mut self, deadline: Instant) -> Result<Option<Message>> {
        loop {
            if let Some(e) = self.fetcher.take_error() {
                return Err(e);
            }
            if let Some(m) = self.fetcher.next() {
                return Ok(Some(m));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            self.fetcher.fill(deadline, None).await;
        }
    }

    /// Whether a message after the current position exists now (asks the
    /// broker unless one is buffered already). A partition that cannot be
    /// asked (its leader is down) does not hide the others' messages: only
    /// when none has one and such a partition still cannot be asked after
    /// the request timeout is its error returned.
    pub async fn has_message_available(&mut self) -> Result<bool> {
        if self.fetcher.has_buffered() {
            return Ok(true);
        }
        let deadline = Instant::now() + self.request_timeout;
        loop {
            self.fetcher.resolve_pending().await;
            if let Some(e) = self.fetcher.take_error() {
                return Err(e);
            }
            let bounds = self.fetcher.bounds().await;
            let tps: Vec<TopicPartition> = self.fetcher.partitions().cloned().collect();
            let mut unknown = None;
            for (tp, b) in tps.iter().zip(bounds) {
                match (self.fetcher.position(tp), b) {
                    (Some(Pos::At(pos)), Ok((earliest, end))) if pos.max(earliest) < end => {
                        return Ok(true)
                    }
                    (Some(Pos::At(_)), Ok(_)) => {}
                    (_, Err(e)) if !e.is_retriable() => return Err(e),
                    (_, Err(e)) => unknown = Some(e),
                    (_, Ok(_)) => {
                        unknown.get_or_insert(Error::Timeout(self.request_timeout));
                    }
                }
            }
            let Some(e) = unknown else {
                return Ok(false);
            };
            if Instant::now() >= deadline {
                return Err(e);
            }
            tokio::time::sleep(self.retry_backoff).await;
        }
    }

    /// Moves every partition read to `position` (honouring
    /// `start_inclusive`), dropping what was fetched ahead.
    pub fn seek(&mut self, position: StartPosition) -> Result<()> {
        if let StartPosition::Offset(p, _) = position {
            if !self.partitions.contains(&p) {
                return Err(Error::InvalidArgument(format!(
                    "partition {p} is not read by this reader"
                )));
            }
        }
        for p in self.partitions.clone() {
            let tp = TopicPartition::new(self.topic.clone(), p);
            let pos = self.start_pos(p, position);
            self.fetcher.seek(&tp, pos);
        }
        Ok(())
    }

    /// The id of the next message `read_next` would return from
    /// `partition`, once its position is known.
    pub fn position(&self, partition: i32) -> Option<MessageId> {
        let tp = TopicPartition::new(self.topic.clone(), partition);
        match self.fetcher.position(&tp)? {
            Pos::At(offset) => Some(MessageId { partition, offset }),
            Pos::Pending(_) => None,
        }
    }
}
