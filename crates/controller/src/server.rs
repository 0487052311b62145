//! The serving side: accepts connections (up to a limit) and answers one
//! request at a time on each. A bad frame, an idle connection or a failed
//! write closes the connection.

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::codec::{read_frame, write_frame};
use crate::node::Inner;
use crate::rpc::{Refused, Request, Response};
use crate::transport::{BoxConn, Listener};
use crate::StateMachine;

/// Refused connections are logged at most this many times a second.
static REFUSED_LOG: LogLimit = LogLimit::new(10);

/// A per-second budget of log lines a peer can provoke.
struct LogLimit {
    per_second: u64,
    /// The second (since the process's first use) and its count, packed.
    state: std::sync::atomic::AtomicU64,
    start: std::sync::OnceLock<std::time::Instant>,
}

impl LogLimit {
    const fn new(per_second: u64) -> Self {
        LogLimit {
            per_second,
            state: std::sync::atomic::AtomicU64::new(0),
            start: std::sync::OnceLock::new(),
        }
    }

    fn allow(&self) -> bool {
        use std::sync::atomic::Ordering;
        let second = self
            .start
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs();
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            let (s, n) = (cur >> 20, cur & 0xF_FFFF);
            let next = if s == second {
                (s << 20) | (n + 1)
            } else {
                (second << 20) | 1
            };
            if s == second && n >= self.per_second {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }
}

/// Serves `listener` until `stop` turns true (or its sender is dropped).
pub(crate) async fn serve<S: StateMachine>(
    inner: Arc<Inner<S>>,
    mut listener: Box<dyn Listener>,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(inner.config.max_connections));
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break;
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((conn, peer)) => match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let inner = inner.clone();
                        let handshake = listener.handshake();
                        conns.spawn(async move {
                            let conn = match handshake {
                                None => conn,
                                Some(h) => {
                                    // A peer gets as long as a request may take.
                                    let limit = inner.config.request_timeout;
                                    match tokio::time::timeout(limit, h(conn)).await {
                                        Ok(Ok(c)) => c,
                                        Ok(Err(e)) => {
                                            if REFUSED_LOG.allow() {
                                                tracing::warn!(%peer, "controller: refusing connection: {e}");
                                            }
                                            return;
                                        }
                                        Err(_) => {
                                            if REFUSED_LOG.allow() {
                                                tracing::warn!(%peer, "controller: refusing connection: no handshake within {limit:?}");
                                            }
                                            return;
                                        }
                                    }
                                }
                            };
                            serve_conn(inner, conn, &peer).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        tracing::warn!(%peer, "controller: connection limit reached, closing");
                    }
                },
                Err(e) => {
                    // E.g. out of descriptors: pause instead of spinning.
                    tracing::warn!(error = %e, "controller: accept failed");
                    tokio::time::sleep(inner.config.backoff_min).await;
                }
            },
        }
    }
    conns.shutdown().await;
}

async fn serve_conn<S: StateMachine>(inner: Arc<Inner<S>>, mut conn: BoxConn, peer: &str) {
    let cfg = &inner.config;
    loop {
        let req = match tokio::time::timeout(
            cfg.idle_timeout,
            read_frame::<_, Request<S>>(&mut conn, cfg.max_frame_bytes),
        )
        .await
        {
            Err(_) | Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "controller: closing connection");
                return;
            }
            Ok(Ok(Some(req))) => req,
        };
        let resp = handle(&inner, req).await;
        let written = tokio::time::timeout(
            cfg.request_timeout,
            write_frame(&mut conn, &resp, cfg.max_frame_bytes),
        )
        .await;
        if !matches!(written, Ok(Ok(()))) {
            return;
        }
    }
}

async fn handle<S: StateMachine>(inner: &Inner<S>, req: Request<S>) -> Response<S> {
    match req {
        Request::AppendEntries(r) => Response::AppendEntries(inner.raft.append_entries(r).await),
        Request::Vote(r) => Response::Vote(inner.raft.vote(r).await),
        Request::InstallSnapshot { vote, meta, data } => {
            let snapshot = openraft::Snapshot {
                meta,
                snapshot: Box::new(data),
            };
            Response::InstallSnapshot(inner.raft.install_full_snapshot(vote, snapshot).await)
        }
        Request::Submit(record) => {
            Response::Submit(inner.submit(record).await.map_err(Refused::from))
        }
        Request::Fetch { from, max } => Response::Fetch(Ok(inner.fetch(from, max as usize))),
        Request::FetchSnapshot => {
            Response::FetchSnapshot(inner.fetch_snapshot().await.map_err(Refused::from))
        }
        Request::WaitApplied { index, timeout_ms } => {
            let timeout =
                std::time::Duration::from_millis(timeout_ms).min(inner.config.request_timeout);
            Response::WaitApplied(
                inner
                    .wait_applied(index, timeout)
                    .await
                    .map_err(Refused::from),
            )
        }
        Request::Call(bytes) => Response::Call(call(inner, bytes).await),
    }
}

pub(crate) async fn call<S: StateMachine>(
    inner: &Inner<S>,
    bytes: Vec<u8>,
) -> Result<Vec<u8>, Refused> {
    if inner.status().state != openraft::ServerState::Leader {
        return Err(Refused::NotLeader {
            leader: inner.leader().filter(|(id, _)| *id != inner.id),
        });
    }
    let Some(service) = inner.service.get() else {
        return Err(Refused::Failed(
            "this controller serves no requests yet".into(),
        ));
    };
    service.call(bytes).await.map_err(Refused::Failed)
}
