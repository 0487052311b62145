//! Reading length-prefixed frames (a 4-byte big-endian size, then the
//! frame), as both Kafka and Pulsar frame their commands, with the bounds
//! every listener applies: a size limit, the global request-bytes budget
//! taken as bytes arrive, a read timeout for a frame that stops arriving,
//! and an idle limit between frames.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::limits::{BudgetPermit, PeerBudget, SMALL_REQUEST};

/// Why a frame could not be read; each closes the connection.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The size prefix is negative.
    #[error("negative frame size {0}")]
    NegativeLength(i32),
    /// The size prefix exceeds the listener's limit.
    #[error("frame of {len} bytes exceeds {limit} = {max}")]
    TooLarge {
        /// Announced size.
        len: usize,
        /// The limit.
        max: usize,
        /// The limit's configuration key.
        limit: &'static str,
    },
    /// The peer closed the connection in the middle of a frame.
    #[error("connection closed in the middle of a frame")]
    Truncated,
    /// A frame did not arrive whole in time.
    #[error("a frame of {len} bytes did not arrive within {timeout:?} (socket.request.read.timeout.ms); {received} bytes came")]
    ReadTimeout {
        /// Announced size (0 if the size prefix itself did not arrive).
        len: usize,
        /// Bytes of it received.
        received: usize,
        /// The limit.
        timeout: Duration,
    },
    /// No frame started within the idle limit.
    #[error("idle for {0:?}")]
    Idle(Duration),
    /// A socket error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Per-frame limits of a listener.
#[derive(Debug, Clone)]
pub struct FrameLimits {
    /// Largest frame, its size prefix excluded.
    pub max_size: usize,
    /// The configuration key of `max_size`, for errors.
    pub max_size_key: &'static str,
    /// `socket.request.read.timeout.ms`: from the first byte of the size
    /// prefix to the whole prefix, and from then (once the request's bytes
    /// are admitted by `queued.max.request.bytes`) to the whole frame.
    pub read_timeout: Option<Duration>,
}

/// Reads one frame, taking its bytes from the request budget (held by the
/// returned permit until the caller drops it): a small frame's
/// ([`SMALL_REQUEST`]) at once, from the part large requests cannot take; a
/// large frame's as they arrive, from the peer address's share. `Ok(None)` is a
/// clean end of stream between frames. `idle` bounds the wait for a frame
/// to start; `limits.read_timeout` the time from its first byte to its last,
/// waits for the budget included.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    limits: &FrameLimits,
    budget: &PeerBudget,
    idle: Option<Duration>,
) -> Result<Option<(Bytes, BudgetPermit)>, ReadError> {
    let mut len_buf = [0u8; 4];
    let first = match idle {
        Some(d) => tokio::time::timeout(d, r.read(&mut len_buf))
            .await
            .map_err(|_| ReadError::Idle(d))??,
        None => r.read(&mut len_buf).await?,
    };
    if first == 0 {
        return Ok(None);
    }
    let timed_out = |len: usize, received: usize| ReadError::ReadTimeout {
        len,
        received,
        timeout: limits.read_timeout.unwrap_or_default(),
    };
    let mut got = first;
    within(limits.read_timeout, async {
        while got < 4 {
            let n = r.read(&mut len_buf[got..]).await?;
            if n == 0 {
                return Err(ReadError::Truncated);
            }
            got += n;
        }
        Ok(())
    })
    .await
    .unwrap_or_else(|| Err(timed_out(0, got)))?;
    let len = i32::from_be_bytes(len_buf);
    if len < 0 {
        return Err(ReadError::NegativeLength(len));
    }
    let len = len as usize;
    if len > limits.max_size {
        return Err(ReadError::TooLarge {
            len,
            max: limits.max_size,
            limit: limits.max_size_key,
        });
    }
    // A large request's bytes are taken from the budget as they arrive, so
    // a connection holds what it sent, not what it announced. They arrive
    // into chunks of exactly what was taken, joined once whole: a buffer
    // grown by doubling would hold up to twice what arrived (the old copy
    // and the new one) while the request stalls.
    let mut permit = BudgetPermit::default();
    let mut chunks: Vec<BytesMut> = Vec::new();
    let (mut received, mut held) = (0usize, 0usize);
    let mut body = (&mut *r).take(len as u64);
    within(limits.read_timeout, async {
        if len <= SMALL_REQUEST {
            permit = budget.acquire_small(len).await;
            held = len;
            chunks.push(BytesMut::with_capacity(len));
        }
        while received < len {
            if received == held {
                let more = (len - held).min(BUDGET_CHUNK);
                permit.merge(budget.acquire_large(more).await);
                held += more;
                chunks.push(BytesMut::with_capacity(more));
            }
            let chunk = chunks.last_mut().expect("a chunk is open");
            let mut room = (&mut body).take((held - received) as u64);
            match room.read_buf(chunk).await? {
                0 => return Err(ReadError::Truncated),
                n => received += n,
            }
        }
        Ok(())
    })
    .await
    .unwrap_or_else(|| Err(timed_out(len, received)))?;
    let frame = match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().expect("one chunk").freeze(),
        _ => {
            let mut whole = BytesMut::with_capacity(len);
            for c in chunks {
                whole.extend_from_slice(&c);
            }
            whole.freeze()
        }
    };
    Ok(Some((frame, permit)))
}

/// How much of a request's size is taken from the budget (and allocated)
/// at a time while it arrives.
const BUDGET_CHUNK: usize = 1 << 20;

/// Runs `f` to completion, or gives up after `limit` (`None` when it ran
/// out of time).
async fn within<T>(limit: Option<Duration>, f: impl std::future::Future<Output = T>) -> Option<T> {
    match limit {
        Some(d) => tokio::time::timeout(d, f).await.ok(),
        None => Some(f.await),
    }
}

/// Warnings about refused connections: a few per second at most.
static REFUSED_LOG: crate::log_limit::RateLimiter =
    crate::log_limit::RateLimiter::new(10, Duration::from_secs(1));
static ACCEPT_LOG: crate::log_limit::RateLimiter =
    crate::log_limit::RateLimiter::new(5, Duration::from_secs(1));

/// Accepts connections on `listener` until `shutdown` turns true, admitting
/// each through `tracker` (one over a limit is reset at once, the reason
/// logged, rate-limited) and running `serve` for it on its own task. On
/// shutdown, connections get 5 s to finish what they are doing, then are
/// stopped. Accepted, refused and open connections are counted in
/// `metrics`. Every front end's listener is this loop.
pub async fn accept_loop<F, Fut>(
    listener: tokio::net::TcpListener,
    tracker: crate::limits::ConnectionTracker,
    metrics: crate::metrics::ListenerMetrics,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    serve: F,
) where
    F: Fn(
        tokio::net::TcpStream,
        std::net::SocketAddr,
        tokio::sync::watch::Receiver<bool>,
        crate::limits::ConnectionGuard,
    ) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let guard = match tracker.admit(peer.ip()) {
                        Ok(g) => g,
                        Err(refused) => {
                            metrics.refused(&refused);
                            crate::warn_limited!(REFUSED_LOG, %peer, "refusing connection: {refused}");
                            // Linger 0: a reset rather than a lingering
                            // FIN_WAIT socket per refused connection during a
                            // flood. (Deprecated because a non-zero linger
                            // blocks on drop; zero never does.)
                            #[allow(deprecated)]
                            let _ = stream.set_linger(Some(Duration::ZERO));
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    // Open until the task ends or is stopped.
                    let open = metrics.accepted();
                    let served = serve(stream, peer, shutdown.clone(), guard);
                    conns.spawn(async move {
                        let _open = open;
                        served.await
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    crate::warn_limited!(ACCEPT_LOG, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(5), drain)
        .await
        .is_err()
    {
        conns.shutdown().await;
    }
}

/// A running listener of any front end: its bound address and a handle to
/// stop it.
#[derive(Debug)]
pub struct Listener {
    /// The address actually bound (useful with port 0).
    pub local_addr: std::net::SocketAddr,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// A listener bound to `local_addr` whose accept task (see
    /// [`accept_loop`]) stops when `shutdown` is set.
    pub fn new(
        local_addr: std::net::SocketAddr,
        shutdown: tokio::sync::watch::Sender<bool>,
        task: tokio::task::JoinHandle<()>,
    ) -> Listener {
        Listener {
            local_addr,
            shutdown,
            task,
        }
    }

    /// Stops accepting, lets in-flight work finish (bounded) and waits for
    /// every connection task to end.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}
