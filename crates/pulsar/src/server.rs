//! The Pulsar listener: accepts connections (within the broker's connection
//! limits), reads frames with the shared frame reader (size limit, request
//! budget, read timeout, idle limit of two keep-alive intervals), and runs
//! each connection's commands in order. A writer task per connection sends
//! answers, messages and keep-alive pings.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use broker::limits::{ConnectionGuard, ConnectionTracker};
use broker::log_limit::RateLimiter;
use broker::net::{read_frame, FrameLimits, ReadError};
use broker::security::tls::TlsContext;
use broker::security::Principal;
use broker::{warn_limited, Broker};
use bytes::Bytes;
use magnetar_pulsar_wire::frame::decode_frame_body;
use magnetar_pulsar_wire::proto::{CommandPing, CommandSendError, ServerError};
use magnetar_pulsar_wire::{command, Command, FrameError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tracing::debug;

use crate::authz::PulsarSecurity;
use crate::lookup::ServiceUrls;
use crate::session::Session;

static BAD_CONNECTION_LOG: RateLimiter = RateLimiter::new(10, Duration::from_secs(1));

/// Frames queued for one connection's writer before senders wait.
const OUT_QUEUE: usize = 1024;
/// Upstream allows frames this much larger than the largest message
/// (counting the 4-byte size field, which `read_frame`'s limit does not).
const FRAME_OVERHEAD: usize = 10 * 1024 - 4;
/// Room for the Kafka batch header, record framing and the message's
/// metadata carried as headers.
const BATCH_OVERHEAD: usize = 16 * 1024;
/// Largest frame before CONNECT is accepted (a CONNECT with a token fits).
const MAX_FRAME_BEFORE_CONNECT: usize = 64 * 1024;

pub use crate::shared::Shared;

/// A running listener.
pub use broker::net::Listener as Server;

/// One Pulsar listener to serve.
pub struct PulsarListener {
    /// The bound socket.
    pub listener: TcpListener,
    /// TLS material: set for a `pulsar+ssl` listener.
    pub tls: Option<Arc<TlsContext>>,
}

/// Stops the cursor flusher when the last listener stops.
struct FlusherGuard(tokio::task::JoinHandle<()>);

impl Drop for FlusherGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts serving Pulsar clients on `listeners` (a plain and a TLS one, or
/// either); Lookup answers give `urls`. Also returns a handle for admin
/// paths. The listeners share producers, subscriptions and limits.
pub fn serve(
    listeners: Vec<PulsarListener>,
    broker: Arc<Broker>,
    urls: ServiceUrls,
    security: PulsarSecurity,
) -> std::io::Result<(Vec<Server>, crate::admin::FrontEnd)> {
    let config = broker.config();
    // A message becomes one Kafka batch, so it must also fit
    // message.max.bytes with the batch's framing and the message's
    // metadata as headers; announcing no more than that lets clients refuse
    // a larger message themselves instead of retrying a refused send.
    let max_message_size = config
        .pulsar_max_message_size()
        .min((config.message_max_bytes() as usize).saturating_sub(BATCH_OVERHEAD))
        .max(1024);
    let tracker = ConnectionTracker::new(config.max_connections(), config.max_connections_per_ip());
    let shared = Arc::new(Shared {
        urls,
        security,
        max_message_size,
        keep_alive: config.pulsar_keep_alive(),
        budget: broker.request_budget().clone(),
        frame_limits: FrameLimits {
            max_size: max_message_size + FRAME_OVERHEAD,
            max_size_key: "pulsar.max.message.size (+10 KiB)",
            read_timeout: config.request_read_timeout(),
        },
        producers: Arc::default(),
        dispatchers: Arc::default(),
        commands: broker
            .metrics()
            .request_table("pulsar", crate::metrics::COMMAND_SLOTS),
        next_connection: AtomicU64::new(1),
        broker: broker.clone(),
    });
    let front_end = crate::admin::FrontEnd::new(shared.clone());
    spawn_leadership_watch(&shared);
    let flusher = Arc::new(FlusherGuard(broker::groups::spawn_flusher(
        broker.clone(),
        Duration::from_millis(100),
    )));
    let mut servers = Vec::new();
    for PulsarListener { listener, tls } in listeners {
        let local_addr = listener.local_addr()?;
        let (tx, rx) = watch::channel(false);
        let listener_metrics = broker.metrics().listener("pulsar");
        let shared = shared.clone();
        let tracker = tracker.clone();
        let flusher = flusher.clone();
        let task = tokio::spawn(async move {
            broker::net::accept_loop(
                listener,
                tracker,
                listener_metrics,
                rx,
                move |stream, peer, shutdown, guard| {
                    accept(stream, peer, shared.clone(), tls.clone(), shutdown, guard)
                },
            )
            .await;
            drop(flusher);
        });
        servers.push(Server::new(local_addr, tx, task));
    }
    Ok((servers, front_end))
}

/// Sets up one connection: the TLS handshake (bounded by
/// `socket.request.read.timeout.ms`) on the TLS listener, then its commands.
async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    tls: Option<Arc<TlsContext>>,
    shutdown: watch::Receiver<bool>,
    guard: ConnectionGuard,
) {
    let Some(tls) = tls else {
        let (read, write) = stream.into_split();
        return connection(read, write, None, peer, shared, shutdown, guard).await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    let limit = shared
        .frame_limits
        .read_timeout
        .unwrap_or(Duration::from_secs(30));
    let stream = match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            warn_limited!(BAD_CONNECTION_LOG, %peer, "closing pulsar connection: TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            warn_limited!(BAD_CONNECTION_LOG, %peer, "closing pulsar connection: no TLS handshake within {limit:?}");
            return;
        }
    };
    // A verified client certificate, for the `tls` provider.
    let certificate = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|der| tls.principal_of(der));
    let (read, write) = tokio::io::split(stream);
    connection(read, write, certificate, peer, shared, shutdown, guard).await
}

async fn connection(
    read: impl AsyncRead + Unpin,
    write: impl AsyncWrite + Send + Unpin + 'static,
    certificate: Option<Result<Principal, String>>,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    _guard: ConnectionGuard,
) {
    let conn = shared.next_connection.fetch_add(1, Ordering::Relaxed);
    let budget = shared.budget.for_peer(peer.ip());
    let read = BufReader::with_capacity(64 * 1024, read);
    let (out, rx) = mpsc::channel::<Bytes>(OUT_QUEUE);
    let writer = tokio::spawn(write_loop(write, rx, shared.keep_alive));
    let mut session = Session::new(conn, shared.clone(), out.clone(), peer, certificate);
    // Two keep-alive intervals without a frame: the peer is gone.
    let idle = Some(shared.keep_alive * 2);
    // Until CONNECT is accepted, frames are small (CONNECT, its credentials).
    let before_connect = FrameLimits {
        max_size: MAX_FRAME_BEFORE_CONNECT.min(shared.frame_limits.max_size),
        max_size_key: "the Pulsar frame limit before CONNECT (64 KiB)",
        read_timeout: shared.frame_limits.read_timeout,
    };
    // A frame being read survives the loop's other events (a receipt
    // ready, the authentication deadline): reading is not cancel-safe, and
    // a frame half read and dropped would leave the stream mid-frame.
    let mut reader = Some(read);
    let mut reading = std::pin::pin!(None);
    let reason = loop {
        let deadline = session.auth_deadline();
        let limits = if session.is_connected() {
            &shared.frame_limits
        } else {
            &before_connect
        };
        if let Some(r) = reader.take() {
            reading.set(Some(next_frame(r, limits, &budget, idle)));
        }
        let frame = tokio::select! {
            _ = shutdown.changed() => break None,
            _ = sleep_until(deadline) => {
                match session.auth_deadline_passed().await {
                    Ok(()) => continue,
                    Err(why) => break Some(why),
                }
            }
            receipt = session.next_receipt() => {
                match session.deliver(receipt).await {
                    Ok(()) => continue,
                    Err(why) => break Some(why),
                }
            }
            (r, f) = async { reading.as_mut().as_pin_mut().expect("a read is in progress").await } => {
                reading.set(None);
                reader = Some(r);
                f
            }
        };
        let (body, _permit) = match frame {
            Ok(Some(f)) => f,
            Ok(None) => break None,
            Err(ReadError::Io(e)) => {
                debug!(%peer, "pulsar connection ended: {e}");
                break None;
            }
            Err(ReadError::Idle(d)) => {
                debug!(%peer, "closing pulsar connection silent for {d:?} (keep-alive)");
                break None;
            }
            Err(e) => break Some(e.to_string()),
        };
        let decoded = decode_frame_body(body);
        let frame = match decoded {
            Ok(f) => f,
            Err(FrameError::ChecksumMismatch { .. }) => {
                // The frame was whole; only its message is bad: refuse that
                // one send and carry on, as upstream does (once connected).
                if let Some(send) =
                    checksum_failed_send(&decoded).filter(|_| session.is_connected())
                {
                    // Behind the answers to the sends before it.
                    match session.answer_in_order(send.into()).await {
                        Ok(()) => continue,
                        Err(why) => break Some(why),
                    }
                }
                break Some("checksum mismatch".into());
            }
            Err(e) => break Some(e.to_string()),
        };
        let cmd = match Command::try_from(frame.command) {
            Ok(c) => c,
            Err(e) => break Some(e.to_string()),
        };
        tracing::trace!(%peer, kind = ?cmd.kind(), "pulsar command");
        if let Err(why) = session.handle(cmd, frame.payload).await {
            break Some(why);
        }
    };
    if let Some(why) = reason {
        warn_limited!(BAD_CONNECTION_LOG, %peer, "closing pulsar connection: {why}");
    }
    session.close().await;
    drop(session);
    drop(out);
    let _ = writer.await;
}

/// Reads the next frame from `read` and gives `read` back with it.
async fn next_frame<R: AsyncRead + Unpin>(
    mut read: R,
    limits: &FrameLimits,
    budget: &broker::limits::PeerBudget,
    idle: Option<Duration>,
) -> (
    R,
    Result<Option<(Bytes, broker::limits::BudgetPermit)>, ReadError>,
) {
    let frame = read_frame(&mut read, limits, budget, idle).await;
    (read, frame)
}

/// Sleeps until `deadline`; never wakes without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The SendError answering a SEND whose checksum did not match.
fn checksum_failed_send(
    decoded: &Result<magnetar_pulsar_wire::Frame, FrameError>,
) -> Option<CommandSendError> {
    let Err(e) = decoded else { return None };
    let send = e.command()?.send.as_ref()?;
    Some(CommandSendError {
        producer_id: send.producer_id,
        sequence_id: send.sequence_id,
        error: ServerError::ChecksumError as i32,
        message: "checksum mismatch".into(),
    })
}

/// Writes queued frames; pings the peer every keep-alive interval.
async fn write_loop(
    write: impl AsyncWrite + Unpin,
    mut rx: mpsc::Receiver<Bytes>,
    keep_alive: Duration,
) {
    let mut w = BufWriter::with_capacity(64 * 1024, write);
    let mut ping = tokio::time::interval(keep_alive);
    ping.tick().await;
    let mut ping_frame = bytes::BytesMut::new();
    if magnetar_pulsar_wire::encode_command(&command(CommandPing {}), &mut ping_frame).is_err() {
        return;
    }
    let ping_frame = ping_frame.freeze();
    loop {
        let frame = tokio::select! {
            f = rx.recv() => match f {
                Some(f) => f,
                None => break,
            },
            _ = ping.tick() => ping_frame.clone(),
        };
        if w.write_all(&frame).await.is_err() {
            return;
        }
        // Coalesce what is already queued into one write.
        while let Ok(more) = rx.try_recv() {
            if w.write_all(&more).await.is_err() {
                return;
            }
        }
        if w.flush().await.is_err() {
            return;
        }
    }
    let _ = w.flush().await;
    let _ = w.into_inner().shutdown().await;
}

/// Closes the producers and consumers of partitions another broker leads
/// now, at each leadership change, until the listener's state is dropped.
fn spawn_leadership_watch(shared: &Arc<Shared>) {
    let mut changes = shared.broker.watch_leadership();
    let shared = Arc::downgrade(shared);
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            crate::session::close_moved(&shared).await;
        }
    });
}
