//! Consumer settings.

use std::time::Duration;

use super::assignor::Assignor;
use super::Consumer;
use crate::client::{Client, ClientSource};
use crate::error::{Error, Result};

/// Where a consumer starts in a partition that has no committed offset (or
/// whose committed offset is no longer in the log).
///
/// ```
/// let r: magnetar_client::AutoOffsetReset = "earliest".parse().unwrap();
/// assert_eq!(r, magnetar_client::AutoOffsetReset::Earliest);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// The first message still in the log.
    Earliest,
    /// Only messages written from now on (Kafka's default).
    #[default]
    Latest,
    /// No automatic position: the consumer reports
    /// [`Error::NoOffset`] (or OFFSET_OUT_OF_RANGE) until you
    /// [`Consumer::seek`].
    None,
}

impl std::str::FromStr for AutoOffsetReset {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "earliest" | "smallest" | "beginning" => Ok(AutoOffsetReset::Earliest),
            "latest" | "largest" | "end" => Ok(AutoOffsetReset::Latest),
            "none" | "error" => Ok(AutoOffsetReset::None),
            other => Err(Error::InvalidArgument(format!(
                "auto_offset_reset {other:?} (earliest, latest, none)"
            ))),
        }
    }
}

/// The settings a running consumer uses.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerConfig {
    pub group_id: Option<String>,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_timeout: Duration,
    pub auto_offset_reset: AutoOffsetReset,
    pub enable_auto_commit: bool,
    pub auto_commit_interval: Duration,
    pub fetch_max_wait: Duration,
    pub fetch_min_bytes: i32,
    pub fetch_max_bytes: i32,
    pub max_partition_fetch_bytes: i32,
    pub metadata_refresh_interval: Duration,
    pub assignors: Vec<Assignor>,
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
}

/// Builds a [`Consumer`]. Defaults follow Kafka's Java consumer: session
/// 45 s, heartbeat 3 s, rebalance timeout 5 min, `auto_offset_reset`
/// latest, auto-commit every 5 s, fetches of up to 50 MiB (1 MiB per
/// partition) waiting up to 500 ms; assignors `range` then `roundrobin`
/// (librdkafka's default); pattern subscriptions look for new topics every
/// 30 s.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use std::time::Duration;
/// use magnetar_client::{AutoOffsetReset, Consumer};
/// let mut consumer = Consumer::builder()
///     .bootstrap("127.0.0.1:9092")
///     .group_id("billing")
///     .auto_offset_reset(AutoOffsetReset::Earliest)
///     .session_timeout(Duration::from_secs(10))
///     .heartbeat_interval(Duration::from_secs(1))
///     .enable_auto_commit(false)
///     .build()
///     .await?;
/// consumer.subscribe(&["invoices"])?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ConsumerBuilder {
    source: ClientSource,
    cfg: ConsumerConfig,
}

impl Default for ConsumerBuilder {
    fn default() -> Self {
        ConsumerBuilder {
            source: ClientSource::default(),
            cfg: ConsumerConfig {
                group_id: None,
                session_timeout: Duration::from_secs(45),
                heartbeat_interval: Duration::from_secs(3),
                rebalance_timeout: Duration::from_secs(300),
                auto_offset_reset: AutoOffsetReset::Latest,
                enable_auto_commit: true,
                auto_commit_interval: Duration::from_secs(5),
                fetch_max_wait: Duration::from_millis(500),
                fetch_min_bytes: 1,
                fetch_max_bytes: 50 << 20,
                max_partition_fetch_bytes: 1 << 20,
                metadata_refresh_interval: Duration::from_secs(30),
                assignors: vec![Assignor::Range, Assignor::RoundRobin],
                request_timeout: Duration::from_secs(30),
                retry_backoff: Duration::from_millis(100),
            },
        }
    }
}

impl ConsumerBuilder {
    /// Bootstrap brokers: one `host:port` or a comma-separated list; may be
    /// called repeatedly.
    pub fn bootstrap(mut self, servers: &str) -> Self {
        self.source.add_bootstrap(servers);
        self
    }

    /// Uses an existing [`Client`] (its metadata cache and shared
    /// connections; the consumer still opens its own coordinator and fetch
    /// connections) instead of bootstrapping a new one.
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

    /// The consumer group; needed for [`Consumer::subscribe`] and for
    /// committing offsets.
    pub fn group_id(mut self, id: impl Into<String>) -> Self {
        self.cfg.group_id = Some(id.into());
        self
    }

    /// How long the group waits without a heartbeat before it drops this
    /// member (the broker bounds it by `group.min/max.session.timeout.ms`).
    pub fn session_timeout(mut self, d: Duration) -> Self {
        self.cfg.session_timeout = d;
        self
    }

    /// Time between heartbeats; well below the session timeout (a third
    /// is usual).
    pub fn heartbeat_interval(mut self, d: Duration) -> Self {
        self.cfg.heartbeat_interval = d;
        self
    }

    /// How long the group waits for every member to rejoin in a
    /// rebalance. The consumer rejoins from inside [`Consumer::recv`], so
    /// it is also the longest you may go between two calls during a
    /// rebalance (Java's `max.poll.interval.ms`).
    pub fn rebalance_timeout(mut self, d: Duration) -> Self {
        self.cfg.rebalance_timeout = d;
        self
    }

    /// Where to start without a committed offset.
    pub fn auto_offset_reset(mut self, r: AutoOffsetReset) -> Self {
        self.cfg.auto_offset_reset = r;
        self
    }

    /// Commit positions in the background, before partitions are revoked
    /// and on close (on by default).
    pub fn enable_auto_commit(mut self, on: bool) -> Self {
        self.cfg.enable_auto_commit = on;
        self
    }

    /// How often auto-commit runs.
    pub fn auto_commit_interval(mut self, d: Duration) -> Self {
        self.cfg.auto_commit_interval = d;
        self
    }

    /// How long the broker may hold a Fetch waiting for data.
    pub fn fetch_max_wait(mut self, d: Duration) -> Self {
        self.cfg.fetch_max_wait = d;
        self
    }

    /// The most bytes one Fetch response may carry.
    pub fn fetch_max_bytes(mut self, bytes: i32) -> Self {
        self.cfg.fetch_max_bytes = bytes.max(1);
        self
    }

    /// The most bytes one Fetch returns per partition; also about how much
    /// is buffered per partition ahead of the application.
    pub fn max_partition_fetch_bytes(mut self, bytes: i32) -> Self {
        self.cfg.max_partition_fetch_bytes = bytes.max(1);
        self
    }

    /// How often the consumer refreshes metadata to discover topics that
    /// match a pattern subscription (and, as group leader, partition count
    /// changes).
    pub fn metadata_refresh_interval(mut self, d: Duration) -> Self {
        self.cfg.metadata_refresh_interval = d;
        self
    }

    /// The assignors offered to the group, preferred first.
    pub fn assignors(mut self, assignors: &[Assignor]) -> Self {
        self.cfg.assignors = assignors.to_vec();
        self
    }

    /// How long to wait for a response (JoinGroup and SyncGroup get the
    /// rebalance timeout on top).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.cfg.request_timeout = d;
        self
    }

    /// Pause after a failed request before trying again (doubles up to
    /// 1 s per partition).
    pub fn retry_backoff(mut self, d: Duration) -> Self {
        self.cfg.retry_backoff = d;
        self
    }

    pub(crate) fn config(&self) -> Result<ConsumerConfig> {
        let c = &self.cfg;
        if c.heartbeat_interval >= c.session_timeout {
            return Err(Error::InvalidArgument(
                "heartbeat_interval must be shorter than session_timeout".into(),
            ));
        }
        if c.assignors.is_empty() {
            return Err(Error::InvalidArgument("no assignors".into()));
        }
        if c.group_id.as_deref() == Some("") {
            return Err(Error::InvalidArgument("empty group_id".into()));
        }
        Ok(c.clone())
    }

    /// Connects (unless a [`Client`] was given). Must be called inside a
    /// Tokio runtime.
    pub async fn build(self) -> Result<Consumer> {
        let cfg = self.config()?;
        let client = self.source.connect(cfg.request_timeout).await?;
        Ok(Consumer::new(client, cfg))
    }
}
