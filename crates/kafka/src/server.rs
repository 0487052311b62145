//! The Kafka listener: accepts connections and runs each one's
//! read → parse → handle → write loop. Requests on one connection are handled
//! one at a time, in order, as Kafka does (idempotent producers rely on it);
//! connections are independent, so a bad one never disturbs the others.
//!
//! What one client can take is bounded: connections (`max.connections`,
//! `max.connections.per.ip`), request bytes being read or handled over all
//! connections (`queued.max.request.bytes`), the time a request may take to
//! arrive (`socket.request.read.timeout.ms`) and idle time
//! (`connections.max.idle.ms`). Warnings a client can provoke are
//! rate-limited.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::frame::{self, FrameError, FrameLimits, Parsed};
use super::session::{Gate, ListenerSecurity, Session};
use super::stream::ClientWriter;
use super::Outcome;
use broker::limits::{ConnectionGuard, ConnectionTracker, RequestBudget};
use broker::log_limit::RateLimiter;
use broker::metrics::{Outcome as Recorded, RequestTable};
use broker::{warn_limited, Broker};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

/// Warnings about bad or refused connections: a few per second at most.
static BAD_CONNECTION_LOG: RateLimiter = RateLimiter::new(10, Duration::from_secs(1));
/// Warnings about failed authentications: a few per second at most.
static AUTH_FAILURE_LOG: RateLimiter = RateLimiter::new(10, Duration::from_secs(1));

/// A running listener.
pub use broker::net::Listener as Server;

/// What every connection of one listener shares.
struct Shared {
    broker: Arc<Broker>,
    /// Request counts and latencies by API key.
    requests: RequestTable,
    budget: RequestBudget,
    frame_limits: FrameLimits,
    idle: Option<Duration>,
    security: Arc<ListenerSecurity>,
}

/// Starts serving `listener` in the background as a PLAINTEXT listener.
pub fn serve(listener: TcpListener, broker: Arc<Broker>) -> std::io::Result<Server> {
    serve_listener(listener, broker, Arc::new(ListenerSecurity::plaintext()))
}

/// Starts serving `listener` in the background with `security` (TLS,
/// SASL): a TLS handshake first on TLS listeners, SASL authentication
/// before anything else on SASL listeners.
pub fn serve_listener(
    listener: TcpListener,
    broker: Arc<Broker>,
    security: Arc<ListenerSecurity>,
) -> std::io::Result<Server> {
    let local_addr = listener.local_addr()?;
    let (tx, rx) = watch::channel(false);
    let config = broker.config();
    let listener_metrics = broker.metrics().listener("kafka");
    let tracker = ConnectionTracker::new(config.max_connections(), config.max_connections_per_ip());
    let shared = Arc::new(Shared {
        requests: broker
            .metrics()
            .request_table("kafka", crate::metrics::API_SLOTS),
        budget: broker.request_budget().clone(),
        frame_limits: FrameLimits {
            max_size: config.socket_request_max_bytes(),
            max_size_key: "socket.request.max.bytes",
            read_timeout: config.request_read_timeout(),
        },
        idle: config.connections_max_idle(),
        broker,
        security,
    });
    let task = tokio::spawn(broker::net::accept_loop(
        listener,
        tracker,
        listener_metrics,
        rx,
        move |stream, peer, shutdown, guard| {
            let shared = shared.clone();
            async move {
                if let Err(e) = accept(stream, peer, shared, shutdown, guard).await {
                    debug!(%peer, "connection ended: {e}");
                }
            }
        },
    ));
    Ok(Server::new(local_addr, tx, task))
}

/// Sets up one connection: the TLS handshake (bounded by
/// `socket.request.read.timeout.ms`) on TLS listeners, then its requests.
async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    guard: ConnectionGuard,
) -> std::io::Result<()> {
    let Some(tls) = &shared.security.tls else {
        let (read, write) = stream.into_split();
        let session = Session::new(shared.security.protocol, None);
        let read = BufReader::with_capacity(64 * 1024, read);
        return connection(
            read,
            ClientWriter::Plain(write),
            session,
            peer,
            shared,
            shutdown,
            guard,
        )
        .await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    let handshake = acceptor.accept(stream);
    let limit = shared
        .frame_limits
        .read_timeout
        .unwrap_or(Duration::from_secs(30));
    let stream = match tokio::time::timeout(limit, handshake).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            warn_limited!(BAD_CONNECTION_LOG, %peer, listener = %shared.security.name, "closing connection: TLS handshake failed: {e}");
            return Ok(());
        }
        Err(_) => {
            warn_limited!(BAD_CONNECTION_LOG, %peer, listener = %shared.security.name, "closing connection: no TLS handshake within {limit:?}");
            return Ok(());
        }
    };
    // A verified client certificate names the principal (on SSL; SASL
    // listeners authenticate with SASL), through the mapping rules.
    let certificate = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first());
    let principal = match (certificate, &shared.security.tls) {
        (Some(der), Some(tls)) if !shared.security.protocol.sasl() => match tls.principal_of(der) {
            Ok(p) => Some(p),
            Err(why) => {
                warn_limited!(AUTH_FAILURE_LOG, %peer, listener = %shared.security.name, "closing connection: SSL authentication failed: {why}");
                return Ok(());
            }
        },
        _ => None,
    };
    let session = Session::new(shared.security.protocol, principal);
    let (read, write) = tokio::io::split(stream);
    let read = BufReader::with_capacity(64 * 1024, read);
    connection(
        read,
        ClientWriter::Tls(write),
        session,
        peer,
        shared,
        shutdown,
        guard,
    )
    .await
}

async fn connection(
    mut read: impl AsyncRead + Unpin,
    mut write: ClientWriter,
    mut session: Session,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    _guard: ConnectionGuard,
) -> std::io::Result<()> {
    let broker = &shared.broker;
    let budget = shared.budget.for_peer(peer.ip());
    let mut limits = shared.frame_limits.clone();
    loop {
        if session.authenticated() {
            limits.max_size = shared.frame_limits.max_size;
            limits.max_size_key = shared.frame_limits.max_size_key;
        } else {
            limits.max_size = session.max_request(shared.frame_limits.max_size);
            limits.max_size_key = "sasl.server.max.receive.size, before authentication";
        }
        let frame = tokio::select! {
            _ = shutdown.changed() => return Ok(()),
            f = frame::read_frame(&mut read, &limits, &budget, shared.idle) => f,
        };
        let (frame, mut permit) = match frame {
            Ok(Some((frame, permit))) => (frame, Some(permit)),
            Ok(None) => return Ok(()),
            Err(FrameError::Io(e)) => return Err(e),
            Err(FrameError::Idle(d)) => {
                debug!(%peer, "closing connection idle for {d:?} (connections.max.idle.ms)");
                return Ok(());
            }
            Err(e) => {
                warn_limited!(BAD_CONNECTION_LOG, %peer, listener = %shared.security.name, "closing connection: {e}");
                return Ok(());
            }
        };
        let started = Instant::now();
        // How long to read nothing more from this client (its quotas).
        let mut mute = Duration::ZERO;
        // How long the broker worked on the request.
        let mut work = Duration::ZERO;
        // The API and outcome to count once the answer is written.
        let (out, api, recorded) = match frame::parse_request(frame) {
            Ok(Parsed::Request { mut ctx, body }) => {
                // An IPv4 client of a dual-stack socket as IPv4, so host
                // ACLs match it as in Kafka.
                ctx.client_host = format!("/{}", peer.ip().to_canonical());
                ctx.listener = shared.security.registry_key.clone();
                ctx.principal = session.principal.clone();
                let api = ctx.api_key;
                tracing::trace!(%peer, ?api, version = ctx.api_version, correlation_id = ctx.correlation_id, "request");
                if let Gate::Close(reason) = session.gate(api, started) {
                    record(&shared, api, Recorded::Closed, started);
                    warn_limited!(BAD_CONNECTION_LOG, %peer, listener = %shared.security.name, "closing connection: {reason}");
                    return Ok(());
                }
                let (outcome, close_after) = match body {
                    RequestKind::SaslHandshake(r) => {
                        let (resp, close) =
                            crate::sasl_handshake::handle(&mut session, &shared.security, r);
                        (Outcome::Reply(ResponseKind::SaslHandshake(resp)), close)
                    }
                    RequestKind::SaslAuthenticate(r) => {
                        let answer = crate::sasl_authenticate::handle(
                            broker,
                            &mut session,
                            &shared.security,
                            ctx.api_version,
                            r,
                        )
                        .await;
                        if answer.failed {
                            // Slows guessing down; the connection holds no
                            // worker meanwhile.
                            tokio::time::sleep(shared.security.failed_delay).await;
                            if let Some(why) = &answer.close {
                                warn_limited!(AUTH_FAILURE_LOG, %peer, listener = %shared.security.name, "{why}");
                            }
                        } else if answer.close.is_none() && session.authenticated() {
                            debug!(%peer, principal = %session.principal, "authenticated");
                        }
                        (
                            Outcome::Reply(ResponseKind::SaslAuthenticate(answer.response)),
                            answer.close,
                        )
                    }
                    body => {
                        let (outcome, took) = crate::handle_timed(broker, &ctx, body).await;
                        work = took;
                        (outcome, None)
                    }
                };
                // Handled: the request's bytes are gone, whether or not the
                // client reads its answer (as Kafka frees a request's buffer
                // once handled).
                permit.take();
                let (outcome, throttle) = crate::throttle::apply(broker, &ctx, outcome, work);
                mute = throttle;
                let recorded = crate::metrics::outcome(&outcome);
                let out = match outcome {
                    Outcome::Reply(resp) => match frame::encode_response(&ctx, &resp) {
                        Ok(bytes) => (Some(bytes), api, recorded),
                        Err(e) => {
                            record(&shared, api, Recorded::Closed, started);
                            warn_limited!(BAD_CONNECTION_LOG, %peer, ?api, "closing connection: cannot encode response: {e:#}");
                            return Ok(());
                        }
                    },
                    Outcome::Frame(frame) => {
                        write.write_frame(frame).await?;
                        (None, api, recorded)
                    }
                    Outcome::NoReply => (None, api, recorded),
                    Outcome::Close(reason) => {
                        record(&shared, api, recorded, started);
                        warn_limited!(BAD_CONNECTION_LOG, %peer, ?api, "closing connection: {reason}");
                        return Ok(());
                    }
                };
                if let Some(reason) = close_after {
                    if let Some(bytes) = &out.0 {
                        write.write_all(bytes).await?;
                        write.flush().await?;
                    }
                    record(&shared, api, out.2, started);
                    if api != ApiKey::SaslAuthenticate {
                        warn_limited!(BAD_CONNECTION_LOG, %peer, listener = %shared.security.name, "closing connection: {reason}");
                    }
                    write.shutdown().await.ok();
                    return Ok(());
                }
                out
            }
            Ok(Parsed::UnsupportedApiVersions { correlation_id }) => {
                // Normal negotiation: clients start at their newest version.
                debug!(%peer, "client asked for an ApiVersions version we do not implement; answering v0 with UNSUPPORTED_VERSION");
                let unsupported = kafka_protocol::error::ResponseError::UnsupportedVersion.code();
                (
                    Some(frame::encode_unsupported_api_versions(correlation_id)),
                    kafka_protocol::messages::ApiKey::ApiVersions,
                    Recorded::Error(crate::metrics::error_name(unsupported)),
                )
            }
            Err(e) => {
                warn_limited!(BAD_CONNECTION_LOG, %peer, "closing connection: {e}");
                return Ok(());
            }
        };
        if let Some(bytes) = out {
            write.write_all(&bytes).await?;
            write.flush().await?;
        }
        record(&shared, api, recorded, started);
        // A muted client holds no share of the request-memory budget.
        drop(permit);
        if !mute.is_zero() {
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep(mute) => {}
            }
        }
    }
}

/// Counts one request from its arrival to now.
fn record(
    shared: &Shared,
    api: kafka_protocol::messages::ApiKey,
    outcome: Recorded,
    started: Instant,
) {
    shared.requests.record(
        api as i16 as usize,
        crate::metrics::api_name(api),
        outcome,
        started.elapsed(),
    );
}
