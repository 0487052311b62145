//! The Kafka listener: accepts connections and runs each one's
//! read → parse → handle → write loop. Requests on one connection are handled
//! one at a time, in order, as Kafka does (idempotent producers rely on it);
//! connections are independent, so a bad one never disturbs the others.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::frame::{self, FrameError, Parsed};
use super::{handle, Outcome};
use crate::Broker;

/// A running listener: its bound address and a handle to stop it.
#[derive(Debug)]
pub struct Server {
    /// The address actually bound (useful with port 0).
    pub local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Stops accepting, lets in-flight requests finish (bounded), and waits
    /// for every connection task to end.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Starts serving `listener` in the background.
pub fn serve(listener: TcpListener, broker: Arc<Broker>) -> std::io::Result<Server> {
    let local_addr = listener.local_addr()?;
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, broker, rx));
    Ok(Server {
        local_addr,
        shutdown: tx,
        task,
    })
}

async fn accept_loop(
    listener: TcpListener,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let broker = broker.clone();
                    let rx = shutdown.clone();
                    conns.spawn(async move {
                        if let Err(e) = connection(stream, peer, broker, rx).await {
                            debug!(%peer, "connection ended: {e}");
                        }
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    // Give in-flight requests a moment, then stop the rest.
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(5), drain)
        .await
        .is_err()
    {
        conns.shutdown().await;
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::with_capacity(64 * 1024, read);
    let max = broker.config().socket_request_max_bytes();
    loop {
        let frame = tokio::select! {
            _ = shutdown.changed() => return Ok(()),
            f = frame::read_frame(&mut read, max) => f,
        };
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(()),
            Err(FrameError::Io(e)) => return Err(e),
            Err(e) => {
                warn!(%peer, "closing connection: {e}");
                return Ok(());
            }
        };
        let out = match frame::parse_request(frame) {
            Ok(Parsed::Request { mut ctx, body }) => {
                ctx.client_host = format!("/{}", peer.ip());
                let api = ctx.api_key;
                tracing::trace!(%peer, ?api, version = ctx.api_version, correlation_id = ctx.correlation_id, "request");
                match handle(&broker, &ctx, body).await {
                    Outcome::Reply(resp) => match frame::encode_response(&ctx, &resp) {
                        Ok(bytes) => Some(bytes),
                        Err(e) => {
                            warn!(%peer, ?api, "closing connection: cannot encode response: {e:#}");
                            return Ok(());
                        }
                    },
                    Outcome::NoReply => None,
                    Outcome::Close(reason) => {
                        warn!(%peer, ?api, "closing connection: {reason}");
                        return Ok(());
                    }
                }
            }
            Ok(Parsed::UnsupportedApiVersions { correlation_id }) => {
                // Normal negotiation: clients start at their newest version.
                debug!(%peer, "client asked for an ApiVersions version we do not implement; answering v0 with UNSUPPORTED_VERSION");
                Some(frame::encode_unsupported_api_versions(correlation_id))
            }
            Err(e) => {
                warn!(%peer, "closing connection: {e}");
                return Ok(());
            }
        };
        if let Some(bytes) = out {
            write.write_all(&bytes).await?;
        }
    }
}
