//! The serving side: accepts connections (up to a limit), authenticates
//! each ([`crate::auth`], bounded in time and size), then answers one
//! request at a time on it. A failed handshake, a bad frame, a Raft RPC
//! from a peer that is not the voter it names, an idle connection or a
//! failed write closes the connection; refusals are logged, rate-limited.

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::auth;
use crate::codec::{ByteBudget, Channel, ReadLimits};
use crate::error::ControllerError;
use crate::inner::Inner;
use crate::log_limit::warn_refused;
use crate::rpc::{Refused, Request, Response};
use crate::transport::{BoxConn, Handshake, Listener};
use crate::types::NodeId;
use crate::StateMachine;

/// Serves `listener` until `stop` turns true (or its sender is dropped).
pub(crate) async fn serve<S: StateMachine>(
    inner: Arc<Inner<S>>,
    mut listener: Box<dyn Listener>,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(inner.config.max_connections));
    let budget = ByteBudget::new(inner.config.queued_max_request_bytes);
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
                        let budget = budget.clone();
                        conns.spawn(async move {
                            if let Some((channel, node)) =
                                establish(&inner, conn, handshake, &peer).await
                            {
                                serve_conn(inner, channel, node, &peer, &budget).await;
                            }
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        warn_refused!(%peer, "controller: connection limit reached, closing");
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

/// The transport's handshake (TLS), then the controller's, together
/// within the request timeout; `None` (refusal logged) if the peer does
/// not get through.
async fn establish<S: StateMachine>(
    inner: &Inner<S>,
    conn: BoxConn,
    handshake: Option<Handshake>,
    peer: &str,
) -> Option<(Channel, Option<NodeId>)> {
    let limit = inner.config.request_timeout;
    let steps = async {
        let mut conn = match handshake {
            None => conn,
            Some(h) => h(conn).await.map_err(|e| e.to_string())?,
        };
        let session = auth::accept(&mut conn, &inner.config.auth, inner.id).await?;
        Ok::<_, String>((conn, session))
    };
    match tokio::time::timeout(limit, steps).await {
        Ok(Ok((conn, session))) => Some((Channel::new(conn, session.keys), session.peer)),
        Ok(Err(why)) => {
            warn_refused!(%peer, "controller: refusing connection: {why}");
            None
        }
        Err(_) => {
            warn_refused!(%peer, "controller: refusing connection: no handshake within {limit:?}");
            None
        }
    }
}

async fn serve_conn<S: StateMachine>(
    inner: Arc<Inner<S>>,
    mut channel: Channel,
    node: Option<NodeId>,
    peer: &str,
    budget: &ByteBudget,
) {
    let cfg = &inner.config;
    let limits = ReadLimits {
        max: cfg.max_frame_bytes,
        idle: Some(cfg.idle_timeout),
        stall: Some(cfg.frame_timeout),
        total: Some(cfg.snapshot_timeout),
        budget: Some(budget),
    };
    loop {
        let (req, held) = match channel.recv::<Request<S>>(&limits).await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(ControllerError::BadFrame(e)) => {
                warn_refused!(%peer, ?node, "controller: closing connection: bad frame: {e}");
                return;
            }
            Err(e) => {
                tracing::debug!(%peer, ?node, error = %e, "controller: closing connection");
                return;
            }
        };
        if let Err(why) = check_sender(&inner, node, &req) {
            warn_refused!(%peer, ?node, "controller: refusing a Raft request: {why}; closing");
            return;
        }
        let resp = handle(&inner, req).await;
        drop(held);
        let written = tokio::time::timeout(
            cfg.request_timeout,
            channel.send(&resp, cfg.max_frame_bytes),
        )
        .await;
        if !matches!(written, Ok(Ok(()))) {
            return;
        }
    }
}

/// The node a Raft RPC comes from, as it says (the candidate of a vote,
/// the leader of an append or snapshot); `None` for other requests.
fn raft_sender<S: StateMachine>(req: &Request<S>) -> Option<(&'static str, Option<NodeId>)> {
    match req {
        Request::AppendEntries(r) => Some(("AppendEntries", r.vote.leader_id().voted_for())),
        Request::Vote(r) => Some(("Vote", r.vote.leader_id().voted_for())),
        Request::InstallSnapshot { vote, .. } => {
            Some(("InstallSnapshot", vote.leader_id().voted_for()))
        }
        _ => None,
    }
}

/// Raft RPCs are served only from another voter of the configuration,
/// on a connection authenticated as that voter.
fn check_sender<S: StateMachine>(
    inner: &Inner<S>,
    conn_node: Option<NodeId>,
    req: &Request<S>,
) -> Result<(), String> {
    let Some((kind, sender)) = raft_sender(req) else {
        return Ok(());
    };
    let Some(sender) = sender else {
        return Err(format!("{kind} names no sender"));
    };
    if inner.config.voters.addr(sender).is_none() {
        return Err(format!("{kind} from node {sender}, not a voter"));
    }
    if sender == inner.id {
        return Err(format!("{kind} in this node's own name ({sender})"));
    }
    if conn_node != Some(sender) {
        return Err(format!(
            "{kind} in the name of node {sender} on a connection of node {}",
            conn_node.map_or_else(|| "(none)".to_string(), |n| n.to_string())
        ));
    }
    Ok(())
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
        Request::Call(bytes) => Response::Call(inner.call(bytes).await),
    }
}
