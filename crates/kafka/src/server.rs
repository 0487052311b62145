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

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::frame::{self, FrameError, FrameLimits, Parsed};
use super::{handle, Outcome};
use broker::limits::{ConnectionGuard, ConnectionTracker, RequestBudget};
use broker::log_limit::RateLimiter;
use broker::metrics::{Outcome as Recorded, RequestTable};
use broker::{warn_limited, Broker};

/// Warnings about bad or refused connections: a few per second at most.
static BAD_CONNECTION_LOG: RateLimiter = RateLimiter::new(10, Duration::from_secs(1));

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
}

/// Starts serving `listener` in the background.
pub fn serve(listener: TcpListener, broker: Arc<Broker>) -> std::io::Result<Server> {
    let local_addr = listener.local_addr()?;
    let (tx, rx) = watch::channel(false);
    let config = broker.config();
    let listener_metrics = broker.metrics().listener("kafka");
    let tracker = ConnectionTracker::new(config.max_connections(), config.max_connections_per_ip());
    let shared = Arc::new(Shared {
        requests: broker
            .metrics()
            .request_table("kafka", crate::metrics::API_SLOTS),
        budget: RequestBudget::new(config.queued_max_request_bytes()),
        frame_limits: FrameLimits {
            max_size: config.socket_request_max_bytes(),
            max_size_key: "socket.request.max.bytes",
            read_timeout: config.request_read_timeout(),
        },
        idle: config.connections_max_idle(),
        broker,
    });
    let task = tokio::spawn(broker::net::accept_loop(
        listener,
        tracker,
        listener_metrics,
        rx,
        move |stream, peer, shutdown, guard| {
            let shared = shared.clone();
            async move {
                if let Err(e) = connection(stream, peer, shared, shutdown, guard).await {
                    debug!(%peer, "connection ended: {e}");
                }
            }
        },
    ));
    Ok(Server::new(local_addr, tx, task))
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    _guard: ConnectionGuard,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::with_capacity(64 * 1024, read);
    let broker = &shared.broker;
    loop {
        let frame = tokio::select! {
            _ = shutdown.changed() => return Ok(()),
            f = frame::read_frame(&mut read, &shared.frame_limits, &shared.budget, shared.idle) => f,
        };
        let (frame, _permit) = match frame {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(()),
            Err(FrameError::Io(e)) => return Err(e),
            Err(FrameError::Idle(d)) => {
                debug!(%peer, "closing connection idle for {d:?} (connections.max.idle.ms)");
                return Ok(());
            }
            Err(e) => {
                warn_limited!(BAD_CONNECTION_LOG, %peer, "closing connection: {e}");
                return Ok(());
            }
        };
        let started = Instant::now();
        // The API and outcome to count once the answer is written.
        let (out, api, recorded) = match frame::parse_request(frame) {
            Ok(Parsed::Request { mut ctx, body }) => {
                ctx.client_host = format!("/{}", peer.ip());
                let api = ctx.api_key;
                tracing::trace!(%peer, ?api, version = ctx.api_version, correlation_id = ctx.correlation_id, "request");
                let outcome = handle(broker, &ctx, body).await;
                let recorded = crate::metrics::outcome(&outcome);
                match outcome {
                    Outcome::Reply(resp) => match frame::encode_response(&ctx, &resp) {
                        Ok(bytes) => (Some(bytes), api, recorded),
                        Err(e) => {
                            record(&shared, api, Recorded::Closed, started);
                            warn_limited!(BAD_CONNECTION_LOG, %peer, ?api, "closing connection: cannot encode response: {e:#}");
                            return Ok(());
                        }
                    },
                    Outcome::Frame(frame) => {
                        frame.write_to(&mut write).await?;
                        (None, api, recorded)
                    }
                    Outcome::NoReply => (None, api, recorded),
                    Outcome::Close(reason) => {
                        record(&shared, api, recorded, started);
                        warn_limited!(BAD_CONNECTION_LOG, %peer, ?api, "closing connection: {reason}");
                        return Ok(());
                    }
                }
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
        }
        record(&shared, api, recorded, started);
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
