//! One pipelined connection to one broker: a writer task and a reader task,
//! any number of requests in flight, responses matched by correlation id.
//! With TLS the socket is a rustls stream; with SASL the writer task
//! authenticates the connection after ApiVersions and again before each
//! session ends (KIP-368), writing nothing else meanwhile.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::error::{Error, Result};
use crate::security::sasl::{self, Authenticator};
use crate::security::{self as sec, SaslCredentials};
use crate::versions::ApiVersions;

/// Largest response frame accepted; a bigger size prefix means a broken
/// stream, not a real response.
const MAX_FRAME: usize = 512 * 1024 * 1024;
const CLIENT_SOFTWARE_NAME: &str = "magnetar-rust-client";

/// Settings for one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnSettings {
    pub client_id: StrBytes,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub security: sec::Resolved,
}

type Reply = oneshot::Sender<Result<Bytes>>;

/// What the handle gives the writer task.
enum Outgoing {
    /// A request frame to write.
    Frame(Bytes),
    /// Authenticate with SASL now, SaslAuthenticate at `version`; the
    /// outcome to `done`.
    Authenticate {
        version: i16,
        done: oneshot::Sender<Result<()>>,
    },
}

/// State shared by the handle, the writer and the reader.
struct Shared {
    addr: String,
    pending: Mutex<Pending>,
    closed: AtomicBool,
    next_correlation: AtomicI32,
    client_id: StrBytes,
    /// Successful SASL authentications (the first, then re-authentications).
    authentications: AtomicU64,
}

#[derive(Default)]
struct Pending {
    waiting: HashMap<i32, Reply>,
    /// Why the connection closed; set once.
    closed: Option<Error>,
}

impl Shared {
    /// Fails every waiting request and refuses new ones.
    fn close(&self, why: Error) {
        let waiting = {
            let mut p = self.pending.lock().unwrap();
            if p.closed.is_none() {
                p.closed = Some(why.clone());
            }
            std::mem::take(&mut p.waiting)
        };
        self.closed.store(true, Ordering::Release);
        for (_, reply) in waiting {
            let _ = reply.send(Err(why.clone()));
        }
    }

    fn disconnected(&self, reason: impl Into<String>) -> Error {
        Error::Disconnected {
            broker: self.addr.clone(),
            reason: reason.into(),
        }
    }

    /// A frame for `req` at `version` with the next correlation id.
    fn encode<R: Request>(&self, req: &R, version: i16) -> Result<(i32, Bytes)> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(self.client_id.clone()));
        let header_version = R::header_version(version);
        let size = header
            .compute_size(header_version)
            .and_then(|h| req.compute_size(version).map(|b| h + b))
            .map_err(|e| Error::protocol("sizing request", e))?;
        let mut buf = BytesMut::with_capacity(4 + size);
        buf.put_i32(size as i32);
        header
            .encode(&mut buf, header_version)
            .and_then(|_| req.encode(&mut buf, version))
            .map_err(|e| {
                Error::protocol(
                    &format!("encoding {:?} v{version}", ApiKey::try_from(R::KEY)),
                    e,
                )
            })?;
        debug_assert_eq!(buf.len(), 4 + size);
        Ok((correlation, buf.freeze()))
    }

    /// Registers the reply slot of `correlation`, unless closed.
    fn expect(&self, correlation: i32) -> Result<oneshot::Receiver<Result<Bytes>>> {
        let (reply, rx) = oneshot::channel();
        let mut p = self.pending.lock().unwrap();
        if let Some(why) = &p.closed {
            return Err(why.clone());
        }
        p.waiting.insert(correlation, reply);
        Ok(rx)
    }

    fn io_error(&self, e: std::io::Error) -> Error {
        sec::tls::io_error(&self.addr, e)
    }
}

/// Decodes a response frame (header and body) of `R` at `version`.
fn decode<R: Request>(mut body: Bytes, version: i16) -> Result<R::Response> {
    ResponseHeader::decode(&mut body, R::Response::header_version(version))
        .map_err(|e| Error::protocol("response header", e))?;
    R::Response::decode(&mut body, version).map_err(|e| {
        Error::protocol(
            &format!(
                "decoding {:?} v{version} response",
                ApiKey::try_from(R::KEY)
            ),
            e,
        )
    })
}

struct Inner {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Outgoing>,
    versions: ApiVersions,
    settings: ConnSettings,
    tasks: [AbortHandle; 2],
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: stop both tasks so the socket closes.
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A connection to one broker, cheap to clone (all clones share the socket).
///
/// Requests are written in the order [`Connection::send`] is called and
/// may be in flight together; each returns a future of its own response.
/// The connection negotiated API versions when it opened:
/// [`Connection::versions`] tells the highest version of each API that both
/// sides support.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use kafka_protocol::messages::MetadataRequest;
/// let client = magnetar_client::Client::connect(magnetar_client::ClientConfig::new(["127.0.0.1:9092"])).await?;
/// let conn = client.any_connection().await?;
/// let v = conn.versions().pick::<MetadataRequest>()?;
/// let metadata = conn.send(v, &MetadataRequest::default())?.await?;
/// println!("{} brokers", metadata.brokers.len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.inner.shared.addr)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    /// Connects to `addr` (TCP, then TLS if configured), starts the reader
    /// and writer tasks, negotiates API versions and authenticates with
    /// SASL if configured.
    pub(crate) async fn open(addr: &str, settings: ConnSettings) -> Result<Connection> {
        let io_err = |e: std::io::Error| Error::Io {
            broker: addr.to_string(),
            source: Arc::new(e),
        };
        let stream = tokio::time::timeout(settings.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::Timeout(settings.connect_timeout))?
            .map_err(io_err)?;
        stream.set_nodelay(true).map_err(io_err)?;
        let shared = Arc::new(Shared {
            addr: addr.to_string(),
            pending: Mutex::new(Pending::default()),
            closed: AtomicBool::new(false),
            next_correlation: AtomicI32::new(1),
            client_id: settings.client_id.clone(),
            authentications: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let sasl = settings.security.sasl.clone();
        let timeout = settings.request_timeout;
        let tasks = match &settings.security.tls {
            None => {
                let (rd, wr) = stream.into_split();
                spawn_tasks(rd, wr, rx, &shared, sasl, timeout)
            }
            Some(tls) => {
                let stream = tls.connect(addr, stream, settings.connect_timeout).await?;
                let (rd, wr) = tokio::io::split(stream);
                spawn_tasks(rd, wr, rx, &shared, sasl, timeout)
            }
        };
        let mut conn = Connection {
            inner: Arc::new(Inner {
                shared,
                tx,
                versions: ApiVersions::default(),
                settings,
                tasks,
            }),
        };
        let versions = conn.negotiate().await?;
        if conn.inner.settings.security.sasl.is_some() {
            conn.authenticate(&versions).await?;
        }
        Arc::get_mut(&mut conn.inner)
            .expect("no other handle yet")
            .versions = versions;
        tracing::debug!(broker = addr, "connected");
        Ok(conn)
    }

    /// Has the writer run the SASL exchange (before any other request).
    async fn authenticate(&self, versions: &ApiVersions) -> Result<()> {
        let addr = &self.inner.shared.addr;
        match versions.max_version(ApiKey::SaslHandshake) {
            Some(v) if v >= sasl::HANDSHAKE_VERSION => {}
            _ => {
                return Err(Error::NotSupported(format!(
                    "{addr} does not offer SaslHandshake v1 (SASL): is the security protocol right?"
                )))
            }
        }
        let version = versions
            .pick::<SaslAuthenticateRequest>()
            .map_err(|_| Error::NotSupported(format!("{addr} does not offer SaslAuthenticate")))?;
        let (done, result) = oneshot::channel();
        self.inner
            .tx
            .send(Outgoing::Authenticate { version, done })
            .map_err(|_| self.inner.shared.disconnected("writer stopped"))?;
        result
            .await
            .map_err(|_| self.inner.shared.disconnected("writer stopped"))?
    }

    /// Asks ApiVersions at our highest version; a broker that does not know
    /// it answers UNSUPPORTED_VERSION in the v0 format with its own range,
    /// and we ask again at the highest version it named.
    async fn negotiate(&self) -> Result<ApiVersions> {
        let ours = crate::versions::client_range(ApiKey::ApiVersions).max;
        let mut version = ours;
        for _ in 0..2 {
            let req = if version >= 3 {
                ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str(CLIENT_SOFTWARE_NAME))
                    .with_client_software_version(StrBytes::from_static_str(env!(
                        "CARGO_PKG_VERSION"
                    )))
            } else {
                ApiVersionsRequest::default()
            };
            let frame = self.send_raw(&req, version)?.await?;
            let mut body = frame;
            ResponseHeader::decode(&mut body, ApiVersionsResponse::header_version(version))
                .map_err(|e| Error::protocol("ApiVersions header", e))?;
            // error_code is the first field in every version.
            if body.len() >= 2 && (&body[..2]).get_i16() == 35 && version > 0 {
                let v0 = ApiVersionsResponse::decode(&mut body, 0)
                    .map_err(|e| Error::protocol("ApiVersions v0 fallback", e))?;
                let theirs = v0
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| k.max_version)
                    .unwrap_or(0);
                let next = theirs.min(ours).max(0);
                tracing::debug!(broker = %self.inner.shared.addr, from = version, to = next, "ApiVersions downgrade");
                if next >= version {
                    return Err(Error::NotSupported(format!(
                        "{}: ApiVersions v{version} refused",
                        self.inner.shared.addr
                    )));
                }
                version = next;
                continue;
            }
            let resp = ApiVersionsResponse::decode(&mut body, version)
                .map_err(|e| Error::protocol("ApiVersions", e))?;
            Error::check(resp.error_code, None)?;
            let ranges: Vec<(i16, i16, i16)> = resp
                .api_keys
                .iter()
                .map(|k| (k.api_key, k.min_version, k.max_version))
                .collect();
            return Ok(ApiVersions::from_ranges(&ranges));
        }
        Err(Error::NotSupported(format!(
            "{}: no ApiVersions version agreed",
            self.inner.shared.addr
        )))
    }

    /// `host:port` of the broker.
    pub fn addr(&self) -> &str {
        &self.inner.shared.addr
    }

    /// The versions negotiated when the connection opened.
    pub fn versions(&self) -> &ApiVersions {
        &self.inner.versions
    }

    /// How many times this connection has authenticated with SASL: 1 after
    /// opening, one more for each re-authentication (KIP-368); 0 without
    /// SASL.
    pub fn authentications(&self) -> u64 {
        self.inner.shared.authentications.load(Ordering::Relaxed)
    }

    /// Whether the connection has failed or been closed; a closed
    /// connection refuses new requests and the pool replaces it.
    pub fn is_closed(&self) -> bool {
        self.inner.shared.closed.load(Ordering::Acquire)
    }

    /// Closes the connection; waiting requests fail with
    /// [`Error::Disconnected`].
    pub fn close(&self) {
        self.inner
            .shared
            .close(self.inner.shared.disconnected("closed by client"));
    }

    /// Sends `req` at `version` with the default request timeout.
    ///
    /// The request is queued for writing before this returns, so calls made
    /// one after another reach the broker in that order; the returned future
    /// only waits for the response.
    pub fn send<R: Request>(
        &self,
        version: i16,
        req: &R,
    ) -> Result<impl Future<Output = Result<R::Response>> + Send + 'static> {
        self.send_with_timeout(version, req, self.inner.settings.request_timeout)
    }

    /// [`Connection::send`] with an explicit timeout, e.g. a long-polling
    /// Fetch whose `max_wait` exceeds the request timeout. On timeout the
    /// connection is closed, as Kafka clients do, since later responses on
    /// it can no longer be trusted to arrive.
    pub fn send_with_timeout<R: Request>(
        &self,
        version: i16,
        req: &R,
        timeout: Duration,
    ) -> Result<impl Future<Output = Result<R::Response>> + Send + 'static> {
        let raw = self.send_raw_timeout(req, version, timeout)?;
        Ok(async move { decode::<R>(raw.await?, version) })
    }

    /// Sends a request the broker will not answer (Produce with acks=0).
    pub fn send_oneway<R: Request>(&self, version: i16, req: &R) -> Result<()> {
        let (_, frame) = self.inner.shared.encode(req, version)?;
        self.inner
            .tx
            .send(Outgoing::Frame(frame))
            .map_err(|_| self.inner.shared.disconnected("writer stopped"))
    }

    fn send_raw<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<impl Future<Output = Result<Bytes>> + Send + 'static> {
        self.send_raw_timeout(req, version, self.inner.settings.request_timeout)
    }

    fn send_raw_timeout<R: Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<impl Future<Output = Result<Bytes>> + Send + 'static> {
        let shared = self.inner.shared.clone();
        let (correlation, frame) = shared.encode(req, version)?;
        let rx = shared.expect(correlation)?;
        if self.inner.tx.send(Outgoing::Frame(frame)).is_err() {
            shared.pending.lock().unwrap().waiting.remove(&correlation);
            return Err(shared.disconnected("writer stopped"));
        }
        Ok(async move {
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err(shared.disconnected("connection dropped")),
                Err(_) => {
                    shared.pending.lock().unwrap().waiting.remove(&correlation);
                    shared.close(
                        shared.disconnected(format!("a request timed out after {timeout:?}")),
                    );
                    Err(Error::Timeout(timeout))
                }
            }
        })
    }
}

/// Starts the writer and reader tasks on the two halves of a stream.
fn spawn_tasks<R, W>(
    rd: R,
    wr: W,
    rx: mpsc::UnboundedReceiver<Outgoing>,
    shared: &Arc<Shared>,
    sasl: Option<Arc<SaslCredentials>>,
    timeout: Duration,
) -> [AbortHandle; 2]
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let auth = sasl.map(|credentials| SaslSettings {
        credentials,
        timeout,
    });
    let writer = tokio::spawn(write_loop(wr, rx, shared.clone(), auth)).abort_handle();
    let reader = tokio::spawn(read_loop(rd, shared.clone())).abort_handle();
    [writer, reader]
}

/// What the writer needs to (re-)authenticate.
struct SaslSettings {
    credentials: Arc<SaslCredentials>,
    /// How long each step may take.
    timeout: Duration,
}

/// What woke the writer.
enum Wake {
    Reauthenticate,
    Item(Option<Outgoing>),
}

async fn write_loop<W: AsyncWrite + Unpin>(
    wr: W,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    shared: Arc<Shared>,
    sasl: Option<SaslSettings>,
) {
    let mut wr = BufWriter::with_capacity(64 * 1024, wr);
    // One timer for the life of the connection, armed while a SASL session
    // with a lifetime is open: nothing is set up per request.
    let reauth = tokio::time::sleep(Duration::from_secs(86_400 * 365));
    tokio::pin!(reauth);
    let mut armed = false;
    let mut auth_version = 0;
    // An item taken while coalescing frames that is not a frame.
    let mut held: Option<Outgoing> = None;
    loop {
        let wake = match held.take() {
            Some(item) => Wake::Item(Some(item)),
            // No session to renew: just the queue.
            None if !armed => Wake::Item(rx.recv().await),
            None => tokio::select! {
                biased;
                () = &mut reauth => Wake::Reauthenticate,
                item = rx.recv() => Wake::Item(item),
            },
        };
        let (outcome, done) = match wake {
            Wake::Item(None) => return,
            Wake::Item(Some(Outgoing::Frame(frame))) => {
                let mut result = wr.write_all(&frame).await;
                // Coalesce whatever else is already queued into the same flush.
                while result.is_ok() {
                    match rx.try_recv() {
                        Ok(Outgoing::Frame(frame)) => result = wr.write_all(&frame).await,
                        Ok(other) => {
                            held = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                if result.is_ok() {
                    result = wr.flush().await;
                }
                if let Err(e) = result {
                    shared.close(shared.io_error(e));
                    return;
                }
                continue;
            }
            Wake::Item(Some(Outgoing::Authenticate { version, done })) => {
                auth_version = version;
                (
                    exchange(&mut wr, &shared, sasl.as_ref(), version).await,
                    Some(done),
                )
            }
            Wake::Reauthenticate => {
                armed = false;
                tracing::debug!(broker = %shared.addr, "re-authenticating (KIP-368)");
                (
                    exchange(&mut wr, &shared, sasl.as_ref(), auth_version).await,
                    None,
                )
            }
        };
        match outcome {
            Ok(lifetime) => {
                shared.authentications.fetch_add(1, Ordering::Relaxed);
                if let Some(lifetime) = lifetime {
                    let at = tokio::time::Instant::now() + sasl::reauthenticate_after(lifetime);
                    reauth.as_mut().reset(at);
                    armed = true;
                }
                if let Some(done) = done {
                    let _ = done.send(Ok(()));
                }
            }
            Err(e) => {
                tracing::debug!(broker = %shared.addr, error = %e, "SASL authentication failed");
                shared.close(e.clone());
                if let Some(done) = done {
                    let _ = done.send(Err(e));
                }
                return;
            }
        }
    }
}

/// One SASL exchange, written by the writer task so that no other request
/// is between its steps (the broker closes a connection that sends one);
/// responses to requests written before it still arrive through the reader
/// first. The session lifetime the broker granted, if any.
async fn exchange<W: AsyncWrite + Unpin>(
    wr: &mut BufWriter<W>,
    shared: &Shared,
    sasl: Option<&SaslSettings>,
    version: i16,
) -> Result<Option<Duration>> {
    let Some(sasl) = sasl else {
        return Err(Error::InvalidArgument("no SASL credentials".into()));
    };
    let t = sasl.timeout;
    let mut auth = Authenticator::new(sasl.credentials.clone(), &shared.addr);
    let handshake =
        call::<SaslHandshakeRequest, W>(wr, shared, &auth.handshake(), sasl::HANDSHAKE_VERSION, t)
            .await?;
    let mut request = auth.on_handshake(&handshake)?;
    loop {
        let resp = call::<SaslAuthenticateRequest, W>(wr, shared, &request, version, t).await?;
        // SCRAM's key derivation is deliberately slow: off the workers.
        let scram = auth.mechanism().scram_hash().is_some();
        let (back, next) = if scram {
            tokio::task::spawn_blocking(move || {
                let next = auth.on_authenticate(&resp);
                (auth, next)
            })
            .await
            .map_err(|e| Error::Protocol(format!("SASL step failed: {e}")))?
        } else {
            let next = auth.on_authenticate(&resp);
            (auth, next)
        };
        auth = back;
        match next? {
            Some(r) => request = r,
            None => return Ok(auth.session_lifetime()),
        }
    }
}

/// Writes one request and waits for its response (which the reader task
/// hands over), within `timeout`.
async fn call<R: Request, W: AsyncWrite + Unpin>(
    wr: &mut BufWriter<W>,
    shared: &Shared,
    req: &R,
    version: i16,
    timeout: Duration,
) -> Result<R::Response> {
    let (correlation, frame) = shared.encode(req, version)?;
    let rx = shared.expect(correlation)?;
    let written = async {
        wr.write_all(&frame).await?;
        wr.flush().await
    }
    .await;
    if let Err(e) = written {
        shared.pending.lock().unwrap().waiting.remove(&correlation);
        return Err(shared.io_error(e));
    }
    let body = match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(r)) => r?,
        Ok(Err(_)) => return Err(shared.disconnected("connection dropped")),
        Err(_) => {
            shared.pending.lock().unwrap().waiting.remove(&correlation);
            return Err(Error::Timeout(timeout));
        }
    };
    decode::<R>(body, version)
}

/// The error for a response size no Kafka broker sends: name what answered
/// when its first bytes give it away.
fn not_kafka(addr: &str, len: i32) -> Error {
    let head = len.to_be_bytes();
    let what = match &head {
        b"HTTP" => "it answered HTTP".to_string(),
        [0x15, 0x03, ..] => {
            "it answered with a TLS alert: is this a TLS listener (security protocol SSL or SASL_SSL)?"
                .to_string()
        }
        [0x16, 0x03, ..] => {
            "it answered with a TLS handshake: is this a TLS listener (security protocol SSL or SASL_SSL)?"
                .to_string()
        }
        _ => format!("bad response size {len}"),
    };
    Error::NotKafka {
        broker: addr.to_string(),
        what,
    }
}

/// Whether a response size is really the start of a TLS alert or
/// handshake record (content type 21 or 22, version 3.x).
fn looks_like_tls(len: i32) -> bool {
    let [kind, major, minor, _] = len.to_be_bytes();
    matches!(kind, 0x15 | 0x16) && major == 0x03 && minor <= 0x04
}

async fn read_loop<R: AsyncRead + Unpin>(rd: R, shared: Arc<Shared>) {
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let why = loop {
        let len = match rd.read_i32().await {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break shared.disconnected("closed by broker");
            }
            Err(e) => break shared.io_error(e),
        };
        // A TLS record's header read as a size is over 350 MB: no Kafka
        // response is that large, so say what answered.
        if len < 4 || len as usize > MAX_FRAME || looks_like_tls(len) {
            break not_kafka(&shared.addr, len);
        }
        // Read into spare capacity: no zeroing of what the socket fills.
        let len = len as usize;
        let mut buf = BytesMut::with_capacity(len);
        let mut body = (&mut rd).take(len as u64);
        let mut failed = None;
        while buf.len() < len {
            match body.read_buf(&mut buf).await {
                Ok(0) => {
                    failed = Some(shared.disconnected("closed by broker mid-response"));
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    failed = Some(shared.io_error(e));
                    break;
                }
            }
        }
        if let Some(e) = failed {
            break e;
        }
        let frame = buf.freeze();
        let correlation = (&frame[..4]).get_i32();
        let reply = shared.pending.lock().unwrap().waiting.remove(&correlation);
        match reply {
            Some(reply) => {
                let _ = reply.send(Ok(frame));
            }
            // A request that timed out; its answer is no longer wanted.
            None => tracing::debug!(broker = %shared.addr, correlation, "unexpected response"),
        }
    };
    tracing::debug!(broker = %shared.addr, error = %why, "connection closed");
    shared.close(why);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_records_read_as_sizes_are_named() {
        // An alert record (plaintext client on a TLS port) and a handshake.
        for head in [[0x15, 0x03, 0x03, 0x00], [0x16, 0x03, 0x01, 0x02]] {
            let len = i32::from_be_bytes(head);
            assert!(looks_like_tls(len));
            let e = not_kafka("b:1", len).to_string();
            assert!(e.contains("is this a TLS listener"), "{e}");
        }
        assert!(!looks_like_tls(1024));
        assert!(!looks_like_tls(0x0300_0000));
    }
}
