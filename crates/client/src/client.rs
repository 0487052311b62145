//! The cluster handle: bootstrap, one pooled connection per broker with
//! reconnect backoff, and the metadata cache.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::conn::{ConnSettings, Connection};
use crate::error::{Error, Result};
use crate::metadata::{ClusterMetadata, NodeId, TopicMetadata, TopicResults};
use crate::security::{self, SecurityConfig};

/// Connection settings shared by the producer, the admin client and
/// anything else built on a [`Client`].
///
/// ```
/// use std::time::Duration;
/// let cfg = magnetar_client::ClientConfig::new(["127.0.0.1:9092"])
///     .client_id("my-app")
///     .request_timeout(Duration::from_secs(10));
/// assert_eq!(cfg.bootstrap_servers(), ["127.0.0.1:9092"]);
/// ```
#[derive(Debug, Clone)]
pub struct ClientConfig {
    bootstrap: Vec<String>,
    client_id: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    reconnect_backoff: Duration,
    reconnect_backoff_max: Duration,
    security: SecurityConfig,
}

impl ClientConfig {
    /// A config for these `host:port` bootstrap addresses.
    pub fn new<I, S>(bootstrap: I) -> ClientConfig
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ClientConfig {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            client_id: "magnetar-rust-client".to_string(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(1),
            security: SecurityConfig::default(),
        }
    }

    /// Parses a comma-separated `host:port` list.
    pub fn from_bootstrap_list(list: &str) -> ClientConfig {
        ClientConfig::new(list.split(',').map(str::trim).filter(|s| !s.is_empty()))
    }

    /// The bootstrap addresses.
    pub fn bootstrap_servers(&self) -> &[String] {
        &self.bootstrap
    }

    /// The client id sent in every request header.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }

    /// How long to wait for a TCP connection (default 10 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// How long to wait for any response (default 30 s).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// First and largest delay between reconnect attempts to one broker
    /// (default 50 ms doubling up to 1 s, with jitter).
    pub fn reconnect_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.reconnect_backoff = initial;
        self.reconnect_backoff_max = max.max(initial);
        self
    }

    /// The configured request timeout.
    pub fn get_request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// How connections are secured: TLS and SASL (default PLAINTEXT). See
    /// [`SecurityConfig`]; [`Client::connect`] checks the settings and
    /// reads their files before dialling anything.
    pub fn security(mut self, security: SecurityConfig) -> Self {
        self.security = security;
        self
    }

    /// The security settings.
    pub fn get_security(&self) -> &SecurityConfig {
        &self.security
    }
}

/// One broker address's connection and its reconnect state.
#[derive(Default)]
struct Slot {
    state: tokio::sync::Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    conn: Option<Connection>,
    failures: u32,
    next_attempt: Option<Instant>,
}

/// Which of a broker's connections a request travels on.
///
/// A broker answers one connection's requests in order, so a slow request
/// (a long-polling Fetch, a JoinGroup held until the group settles) delays
/// everything queued behind it. Consumers therefore use lanes of their own:
/// one for the group coordinator, one for fetching. [`Lane::SHARED`] is the
/// pool everything else (metadata, produce, admin) uses.
///
/// ```no_run
/// # async fn f(client: magnetar_client::Client) -> magnetar_client::Result<()> {
/// let lane = client.new_lane();
/// let conn = client.connection_to_lane("127.0.0.1:9092", lane).await?;
/// assert!(!conn.is_closed());
/// client.release_lane(lane); // closes the lane's connections
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lane(u64);

impl Lane {
    /// The shared connections.
    pub const SHARED: Lane = Lane(0);
}

type SlotKey = (String, Lane);

struct Inner {
    config: ClientConfig,
    settings: ConnSettings,
    slots: Mutex<HashMap<SlotKey, Arc<Slot>>>,
    /// The last lane handed out by [`Client::new_lane`].
    lanes: AtomicU64,
    /// Lanes handed out and not released yet.
    live_lanes: Mutex<HashSet<Lane>>,
    metadata: RwLock<Arc<ClusterMetadata>>,
    /// Rotates the broker tried first by [`Client::any_connection`].
    next_any: AtomicUsize,
}

/// A handle to a Kafka-compatible cluster: cheap to clone, shared by the
/// producer and the admin client.
///
/// It keeps one pipelined [`Connection`] per broker (reopened with
/// exponential backoff after a failure) and a metadata cache refreshed on
/// demand.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// let client = magnetar_client::Client::connect(magnetar_client::ClientConfig::new(["127.0.0.1:9092"])).await?;
/// let md = client.refresh_metadata(&["orders"]).await?;
/// println!("leader of orders/0: {:?}", md.leader("orders", 0));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("bootstrap", &self.inner.config.bootstrap)
            .finish()
    }
}

impl Client {
    /// Connects to the first bootstrap broker that answers and loads the
    /// broker list. Bad security settings (see [`SecurityConfig::validate`])
    /// or unreadable certificate files are [`Error::InvalidArgument`]; a
    /// refused authentication is [`Error::Authentication`].
    pub async fn connect(config: ClientConfig) -> Result<Client> {
        if config.bootstrap.is_empty() {
            return Err(Error::InvalidArgument("no bootstrap servers".into()));
        }
        let security = security::Resolved::new(&config.security)?;
        let settings = ConnSettings {
            client_id: StrBytes::from_string(config.client_id.clone()),
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            security,
        };
        let client = Client {
            inner: Arc::new(Inner {
                config,
                settings,
                slots: Mutex::new(HashMap::new()),
                lanes: AtomicU64::new(0),
                live_lanes: Mutex::new(HashSet::new()),
                metadata: RwLock::new(Arc::new(ClusterMetadata::default())),
                next_any: AtomicUsize::new(0),
            }),
        };
        client.refresh_metadata(&[]).await?;
        Ok(client)
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The current metadata snapshot (no request is made).
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.inner.metadata.read().unwrap().clone()
    }

    /// The connection to `addr`, opening it if needed. After failures,
    /// attempts are spaced by exponential backoff.
    pub async fn connection_to(&self, addr: &str) -> Result<Connection> {
        self.connection_to_lane(addr, Lane::SHARED).await
    }

    /// A new lane: connections of their own to every broker, opened on
    /// first use. Release it with [`Client::release_lane`] when done.
    pub fn new_lane(&self) -> Lane {
        let lane = Lane(self.inner.lanes.fetch_add(1, Ordering::Relaxed) + 1);
        self.inner.live_lanes.lock().unwrap().insert(lane);
        lane
    }

    /// Closes and forgets every connection of `lane` (never the shared one).
    pub fn release_lane(&self, lane: Lane) {
        if lane == Lane::SHARED {
            return;
        }
        self.inner.live_lanes.lock().unwrap().remove(&lane);
        let gone: Vec<Arc<Slot>> = {
            let mut slots = self.inner.slots.lock().unwrap();
            let keys: Vec<SlotKey> = slots.keys().filter(|k| k.1 == lane).cloned().collect();
            keys.iter().filter_map(|k| slots.remove(k)).collect()
        };
        for slot in gone {
            if let Ok(st) = slot.state.try_lock() {
                if let Some(c) = &st.conn {
                    c.close();
                }
            }
        }
    }

    /// The connection of `lane` to broker `node` (see [`Client::connection`]).
    pub async fn connection_on_lane(&self, node: NodeId, lane: Lane) -> Result<Connection> {
        let addr = self.node_addr(node).await?;
        self.connection_to_lane(&addr, lane).await
    }

    /// The connection of `lane` to `addr`, opening it if needed, with the
    /// same backoff as [`Client::connection_to`]. A released lane is
    /// [`Error::Closed`].
    pub async fn connection_to_lane(&self, addr: &str, lane: Lane) -> Result<Connection> {
        if lane != Lane::SHARED && !self.inner.live_lanes.lock().unwrap().contains(&lane) {
            return Err(Error::Closed);
        }
        let slot = self
            .inner
            .slots
            .lock()
            .unwrap()
            .entry((addr.to_string(), lane))
            .or_default()
            .clone();
        let mut st = slot.state.lock().await;
        if let Some(c) = &st.conn {
            if !c.is_closed() {
                return Ok(c.clone());
            }
            st.conn = None;
        }
        if let Some(at) = st.next_attempt {
            tokio::time::sleep_until(at.into()).await;
        }
        match Connection::open(addr, self.inner.settings.clone()).await {
            Ok(c) => {
                st.failures = 0;
                st.next_attempt = None;
                st.conn = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                st.failures = st.failures.saturating_add(1);
                let delay = backoff(
                    self.inner.config.reconnect_backoff,
                    self.inner.config.reconnect_backoff_max,
                    st.failures,
                );
                st.next_attempt = Some(Instant::now() + delay);
                tracing::debug!(broker = addr, error = %e, ?delay, "connect failed");
                Err(e)
            }
        }
    }

    /// The open connection to broker `node`, if there is one right now
    /// (never waits, never dials).
    pub fn cached_connection(&self, node: NodeId) -> Option<Connection> {
        let addr = self.metadata().brokers.get(&node)?.addr();
        let slot = self
            .inner
            .slots
            .lock()
            .unwrap()
            .get(&(addr, Lane::SHARED))
            .cloned()?;
        let st = slot.state.try_lock().ok()?;
        st.conn.as_ref().filter(|c| !c.is_closed()).cloned()
    }

    /// The open connection of `lane` to `addr`, if there is one right now
    /// (never waits, never dials).
    pub fn open_connection(&self, addr: &str, lane: Lane) -> Option<Connection> {
        let slot = self
            .inner
            .slots
            .lock()
            .unwrap()
            .get(&(addr.to_string(), lane))
            .cloned()?;
        let st = slot.state.try_lock().ok()?;
        st.conn.as_ref().filter(|c| !c.is_closed()).cloned()
    }

    /// The connection to broker `node`; refreshes metadata once if the
    /// node is not known yet.
    pub async fn connection(&self, node: NodeId) -> Result<Connection> {
        let addr = self.node_addr(node).await?;
        self.connection_to(&addr).await
    }

    async fn node_addr(&self, node: NodeId) -> Result<String> {
        if let Some(n) = self.metadata().brokers.get(&node) {
            return Ok(n.addr());
        }
        let md = self.refresh_metadata(&[]).await?;
        md.brokers
            .get(&node)
            .map(|n| n.addr())
            .ok_or_else(|| Error::NotFound(format!("broker {node}")))
    }

    /// A connection to any broker that answers: known brokers first
    /// (rotating), then the bootstrap list.
    pub async fn any_connection(&self) -> Result<Connection> {
        let md = self.metadata();
        let mut addrs: Vec<String> = md.brokers.values().map(|n| n.addr()).collect();
        addrs.sort();
        let start = self.inner.next_any.fetch_add(1, Ordering::Relaxed);
        if !addrs.is_empty() {
            let k = start % addrs.len();
            addrs.rotate_left(k);
        }
        for b in &self.inner.config.bootstrap {
            if !addrs.contains(b) {
                addrs.push(b.clone());
            }
        }
        // An open connection wins over dialling anything.
        for a in &addrs {
            let slot = self
                .inner
                .slots
                .lock()
                .unwrap()
                .get(&(a.clone(), Lane::SHARED))
                .cloned();
            if let Some(slot) = slot {
                if let Ok(st) = slot.state.try_lock() {
                    if let Some(c) = st.conn.as_ref().filter(|c| !c.is_closed()) {
                        return Ok(c.clone());
                    }
                }
            }
        }
        let mut last = None;
        for a in &addrs {
            match self.connection_to(a).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::NotFound("no broker address".into())))
    }

    /// Asks for `topics` (never creating them) and merges the answer into
    /// the cache; an empty slice refreshes only the broker list.
    pub async fn refresh_metadata(&self, topics: &[&str]) -> Result<Arc<ClusterMetadata>> {
        self.fetch_metadata(Some(topics), false).await?;
        Ok(self.metadata())
    }

    /// Asks for every topic and replaces the cached topic list.
    pub async fn refresh_all_metadata(&self) -> Result<Arc<ClusterMetadata>> {
        self.fetch_metadata(None, false).await?;
        Ok(self.metadata())
    }

    /// The cached metadata of `topic`, fetched if missing.
    pub async fn topic_metadata(&self, topic: &str) -> Result<Arc<TopicMetadata>> {
        if let Some(t) = self.metadata().topics.get(topic) {
            return Ok(t.clone());
        }
        self.fetch_metadata(Some(&[topic]), false)
            .await?
            .into_iter()
            .next()
            .map(|(_, r)| r)
            .unwrap_or_else(|| Err(Error::NotFound(format!("topic {topic}"))))
    }

    /// One Metadata request, retried on other brokers when a connection
    /// fails. `topics: None` asks for all topics. Metadata v0–v3 cannot say
    /// "do not create": such brokers treat a named topic as a creation
    /// request whatever `auto_create` says (see
    /// [`crate::Admin::get_partitions_for_topic`] for the strict form).
    pub(crate) async fn fetch_metadata(
        &self,
        topics: Option<&[&str]>,
        auto_create: bool,
    ) -> Result<TopicResults> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let conn = self.any_connection().await?;
            match self.metadata_on(&conn, topics, auto_create).await {
                Err(e) if e.is_retriable() && attempt < 3 => {
                    tracing::debug!(error = %e, "metadata request failed; retrying");
                    continue;
                }
                r => return r,
            }
        }
    }

    /// A Metadata request on `conn`, merged into the cache.
    pub(crate) async fn metadata_on(
        &self,
        conn: &Connection,
        topics: Option<&[&str]>,
        auto_create: bool,
    ) -> Result<TopicResults> {
        let version = conn.versions().pick::<MetadataRequest>()?;
        let resp = conn
            .send(version, &metadata_request(version, topics, auto_create))?
            .await?;
        let all = match topics {
            None => true,
            Some(t) => version == 0 && t.is_empty(),
        };
        Ok(self.merge_metadata(&resp, all))
    }

    fn merge_metadata(&self, resp: &MetadataResponse, all_topics: bool) -> TopicResults {
        let mut guard = self.inner.metadata.write().unwrap();
        let (next, results) = guard.merged(resp, all_topics);
        *guard = Arc::new(next);
        results
    }

    /// Forgets `topic`'s cached metadata so the next lookup asks again.
    pub fn invalidate_topic(&self, topic: &str) {
        let mut guard = self.inner.metadata.write().unwrap();
        if guard.topics.contains_key(topic) {
            let mut next = (**guard).clone();
            next.topics.remove(topic);
            *guard = Arc::new(next);
        }
    }
}

/// Builds a Metadata request valid at `version`.
pub(crate) fn metadata_request(
    version: i16,
    topics: Option<&[&str]>,
    auto_create: bool,
) -> MetadataRequest {
    let topics = match topics {
        // v0 has no "all topics" null; an empty list means all.
        None if version == 0 => Some(Vec::new()),
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.to_string()))))
                })
                .collect(),
        ),
    };
    MetadataRequest::default()
        .with_topics(topics)
        // The field exists from v4; before that it must keep its default.
        .with_allow_auto_topic_creation(version < 4 || auto_create)
}

/// Exponential backoff with ±20% jitter.
pub(crate) fn backoff(initial: Duration, max: Duration, failures: u32) -> Duration {
    let exp = initial.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let base = exp.min(max);
    let jitter = crate::producer::partitioner::random_u32() % 41; // 0..=40
    base.mul_f64(0.8 + jitter as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let i = Duration::from_millis(100);
        let m = Duration::from_secs(2);
        let b1 = backoff(i, m, 1);
        assert!(b1 >= Duration::from_millis(80) && b1 <= Duration::from_millis(120));
        let b3 = backoff(i, m, 3);
        assert!(b3 >= Duration::from_millis(320) && b3 <= Duration::from_millis(480));
        let b20 = backoff(i, m, 20);
        assert!(b20 <= Duration::from_millis(2400));
    }

    #[test]
    fn metadata_request_fields_follow_version() {
        use kafka_protocol::protocol::Encodable;
        for v in 0..=12 {
            let r = metadata_request(v, Some(&["t"]), false);
            let mut buf = bytes::BytesMut::new();
            r.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
            let all = metadata_request(v, None, false);
            all.encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }
}

#[cfg(test)]
mod net_tests {
    use super::*;
    use crate::testing::{FakeBroker, FakeSpec};
    use kafka_protocol::messages::ApiKey;

    fn cfg(addr: &str) -> ClientConfig {
        ClientConfig::new([addr])
            .request_timeout(Duration::from_secs(5))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100))
    }

    #[tokio::test]
    async fn negotiates_highest_common_versions() {
        let fake = FakeBroker::start(FakeSpec::new(3, 7, 2)).await;
        let client = Client::connect(cfg(&fake.addr)).await.unwrap();
        let conn = client.any_connection().await.unwrap();
        assert_eq!(conn.versions().max_version(ApiKey::Metadata), Some(7));
        assert_eq!(
            conn.versions().max_version(ApiKey::FindCoordinator),
            Some(2)
        );
        assert_eq!(conn.versions().max_version(ApiKey::Produce), None);
        // This client's newest ApiVersions is v4; the broker's answer in the
        // v0 format makes it ask again at v3.
        assert_eq!(fake.versions_used(ApiKey::ApiVersions), vec![4, 3]);
        assert_eq!(fake.versions_used(ApiKey::Metadata), vec![7]);
    }

    #[tokio::test]
    async fn falls_back_when_api_versions_v3_is_unsupported() {
        for (max, expect) in [(2, vec![4, 2]), (0, vec![4, 0])] {
            let fake = FakeBroker::start(FakeSpec::new(max, 1, 0)).await;
            let client = Client::connect(cfg(&fake.addr)).await.unwrap();
            let conn = client.any_connection().await.unwrap();
            assert_eq!(fake.versions_used(ApiKey::ApiVersions), expect);
            assert_eq!(conn.versions().max_version(ApiKey::Metadata), Some(1));
        }
    }

    #[tokio::test]
    async fn pipelines_many_requests_on_one_connection() {
        let fake = FakeBroker::start(FakeSpec::new(3, 12, 6).topic("a", 2).topic("b", 5)).await;
        let client = Client::connect(cfg(&fake.addr)).await.unwrap();
        let conn = client.any_connection().await.unwrap();
        let v = conn.versions().pick::<MetadataRequest>().unwrap();
        let mut futs = Vec::new();
        for i in 0..200 {
            let topic = if i % 2 == 0 { "a" } else { "b" };
            futs.push((
                topic,
                conn.send(v, &metadata_request(v, Some(&[topic]), false))
                    .unwrap(),
            ));
        }
        for (topic, f) in futs {
            let resp = f.await.unwrap();
            let t = &resp.topics[0];
            assert_eq!(t.name.as_ref().unwrap().0.as_str(), topic);
            assert_eq!(t.partitions.len(), if topic == "a" { 2 } else { 5 });
        }
        // All on the one connection opened at bootstrap.
        assert_eq!(fake.versions_used(ApiKey::ApiVersions), vec![4, 3]);
    }

    #[tokio::test]
    async fn reconnects_after_the_broker_comes_back() {
        let fake = FakeBroker::start(FakeSpec::new(3, 12, 6).topic("t", 1)).await;
        let addr = fake.addr.clone();
        let client = Client::connect(cfg(&addr)).await.unwrap();
        let first = client.any_connection().await.unwrap();
        drop(fake);
        // The old connection notices the close.
        for _ in 0..100 {
            if first.is_closed() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(first.is_closed());
        assert!(client.refresh_metadata(&["t"]).await.is_err());
        let _fake = FakeBroker::start_on(&addr, FakeSpec::new(3, 12, 6).topic("t", 4)).await;
        let md = client.refresh_metadata(&["t"]).await.unwrap();
        assert_eq!(md.topics["t"].partitions.len(), 4);
    }

    #[tokio::test]
    async fn lanes_have_connections_of_their_own() {
        let fake = FakeBroker::start(FakeSpec::new(3, 12, 6)).await;
        let client = Client::connect(cfg(&fake.addr)).await.unwrap();
        let shared = client.connection_to(&fake.addr).await.unwrap();
        let lane = client.new_lane();
        let other = client.new_lane();
        assert_ne!(lane, other);
        let a = client.connection_to_lane(&fake.addr, lane).await.unwrap();
        let again = client.connection_to_lane(&fake.addr, lane).await.unwrap();
        let b = client.connection_to_lane(&fake.addr, other).await.unwrap();
        // One ApiVersions handshake per connection: shared, lane, other.
        assert_eq!(fake.versions_used(ApiKey::ApiVersions).len(), 6);
        assert!(client.open_connection(&fake.addr, lane).is_some());
        client.release_lane(lane);
        assert!(a.is_closed() && again.is_closed());
        assert!(!b.is_closed() && !shared.is_closed());
        let err = client
            .connection_to_lane(&fake.addr, lane)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Closed), "{err}");
        assert!(client.open_connection(&fake.addr, lane).is_none());
        client.release_lane(Lane::SHARED);
        assert!(!shared.is_closed());
    }

    #[tokio::test]
    async fn a_silent_broker_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let hold = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(s);
        });
        let err = Client::connect(cfg(&addr).request_timeout(Duration::from_millis(200)))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Timeout(_)), "{err}");
        hold.abort();
    }

    #[tokio::test]
    async fn unreachable_bootstrap_is_an_io_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let err = Client::connect(cfg(&addr)).await.unwrap_err();
        assert!(err.is_retriable(), "{err}");
    }
}

/// How a builder gets its [`Client`]: one given to it, or a new pool from
/// bootstrap servers. Shared by the producer, consumer and reader builders.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientSource {
    bootstrap: Vec<String>,
    client: Option<Client>,
    client_id: Option<String>,
    security: Option<SecurityConfig>,
}

impl ClientSource {
    /// Adds `host:port` servers (one, or a comma-separated list).
    pub(crate) fn add_bootstrap(&mut self, servers: &str) {
        self.bootstrap.extend(
            servers
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
    }

    /// Uses an existing client.
    pub(crate) fn set_client(&mut self, client: Client) {
        self.client = Some(client);
    }

    /// The client id of a new pool.
    pub(crate) fn set_client_id(&mut self, id: String) {
        self.client_id = Some(id);
    }

    /// The security settings of a new pool.
    pub(crate) fn set_security(&mut self, security: SecurityConfig) {
        self.security = Some(security);
    }

    /// The given client, or a new one bootstrapped from the servers.
    pub(crate) async fn connect(self, request_timeout: Duration) -> Result<Client> {
        if let Some(c) = self.client {
            return Ok(c);
        }
        let mut cc = ClientConfig::new(self.bootstrap).request_timeout(request_timeout);
        if let Some(id) = self.client_id {
            cc = cc.client_id(id);
        }
        if let Some(security) = self.security {
            cc = cc.security(security);
        }
        Client::connect(cc).await
    }
}
