//! The calling side of the protocol: one request/response exchange at a time
//! over a kept connection, and openraft's [`RaftNetwork`] on top of it.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    Fatal, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError,
    Timeout, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::RPCTypes;

use crate::auth::PeerAuth;
use crate::codec::{Channel, ReadLimits};
use crate::log_limit::warn_refused;
use crate::rpc::{Request, Response};
use crate::transport::Transport;
use crate::types::{Node, NodeId, TypeConfig, Vote};
use crate::StateMachine;

/// Network settings shared by every peer connection.
#[derive(Clone, Debug)]
pub(crate) struct NetOptions {
    pub connect_timeout: Duration,
    pub snapshot_timeout: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub max_frame_bytes: usize,
    /// How this side proves itself, and checks the other.
    pub auth: PeerAuth,
    /// This side's node id, named in the handshake.
    pub node_id: Option<NodeId>,
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// No connection could be made.
    Unreachable(String),
    /// The other side refused us, or could not prove who it is.
    Handshake(String),
    /// No answer in time.
    Timeout,
    /// The connection broke or carried a bad frame.
    Broken(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(e) => write!(f, "unreachable: {e}"),
            CallError::Handshake(e) => write!(f, "handshake failed: {e}"),
            CallError::Timeout => f.write_str("timed out"),
            CallError::Broken(e) => write!(f, "connection failed: {e}"),
        }
    }
}

/// A connection to one address, opened (and authenticated) on first use
/// and after a failure.
pub(crate) struct Peer {
    pub addr: String,
    /// The node expected at `addr`, when known: another one is refused.
    expect: Option<NodeId>,
    conn: Option<Channel>,
    transport: Arc<dyn Transport>,
    opts: NetOptions,
}

/// Connects to `addr` and runs the handshake, as `opts` says, within
/// `opts.connect_timeout`.
pub(crate) async fn open(
    transport: &dyn Transport,
    addr: &str,
    expect: Option<NodeId>,
    opts: &NetOptions,
) -> Result<Channel, CallError> {
    let limit = opts.connect_timeout;
    let steps = async {
        let mut conn = transport
            .connect(addr)
            .await
            .map_err(|e| CallError::Unreachable(e.to_string()))?;
        let session = crate::auth::connect(&mut conn, &opts.auth, opts.node_id, expect)
            .await
            .map_err(|why| {
                warn_refused!(%addr, "controller: handshake with {addr} failed: {why}");
                CallError::Handshake(why)
            })?;
        Ok(Channel::new(conn, session.keys))
    };
    tokio::time::timeout(limit, steps)
        .await
        .map_err(|_| CallError::Unreachable(format!("no connection within {limit:?}")))?
}

impl Peer {
    pub(crate) fn new(
        addr: String,
        expect: Option<NodeId>,
        transport: Arc<dyn Transport>,
        opts: NetOptions,
    ) -> Self {
        Peer {
            addr,
            expect,
            conn: None,
            transport,
            opts,
        }
    }

    /// Sends `req` and reads its answer within `timeout`. A failed or
    /// cancelled exchange drops the connection, so a late answer can never
    /// be read as the next one's.
    pub(crate) async fn call<S: StateMachine>(
        &mut self,
        req: &Request<S>,
        timeout: Duration,
    ) -> Result<Response<S>, CallError> {
        let conn = self.conn.take();
        let (transport, addr, opts) = (&self.transport, &self.addr, &self.opts);
        let expect = self.expect;
        let exchange = async move {
            let mut conn = match conn {
                Some(c) => c,
                None => open(transport.as_ref(), addr, expect, opts).await?,
            };
            conn.send(req, opts.max_frame_bytes)
                .await
                .map_err(|e| CallError::Broken(e.to_string()))?;
            let limits = ReadLimits::caller(opts.max_frame_bytes);
            match conn.recv::<Response<S>>(&limits).await {
                Ok(Some((resp, _))) => Ok((conn, resp)),
                Ok(None) => Err(CallError::Broken("closed by the peer".into())),
                Err(e) => Err(CallError::Broken(e.to_string())),
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Err(_) => Err(CallError::Timeout),
            Ok(Err(e)) => Err(e),
            Ok(Ok((conn, resp))) => {
                self.conn = Some(conn);
                Ok(resp)
            }
        }
    }
}

/// Makes openraft's per-target clients.
pub(crate) struct NetworkFactory {
    pub id: NodeId,
    pub transport: Arc<dyn Transport>,
    pub opts: NetOptions,
}

impl<S: StateMachine> RaftNetworkFactory<TypeConfig<S>> for NetworkFactory {
    type Network = RaftPeer;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> RaftPeer {
        RaftPeer {
            id: self.id,
            target,
            peer: Peer::new(
                node.addr.clone(),
                Some(target),
                self.transport.clone(),
                self.opts.clone(),
            ),
        }
    }
}

/// openraft's client for one target node.
pub(crate) struct RaftPeer {
    id: NodeId,
    target: NodeId,
    peer: Peer,
}

fn unexpected() -> io::Error {
    io::Error::other("unexpected response type")
}

impl RaftPeer {
    fn rpc_err<E: std::error::Error>(
        &self,
        e: CallError,
        action: RPCTypes,
        ttl: Duration,
    ) -> RPCError<NodeId, Node, E> {
        match e {
            CallError::Unreachable(m) | CallError::Handshake(m) => {
                RPCError::Unreachable(Unreachable::new(&io::Error::other(m)))
            }
            CallError::Timeout => RPCError::Timeout(Timeout {
                action,
                id: self.id,
                target: self.target,
                timeout: ttl,
            }),
            CallError::Broken(m) => RPCError::Network(NetworkError::new(&io::Error::other(m))),
        }
    }

    async fn raft_call<S: StateMachine, T>(
        &mut self,
        req: Request<S>,
        action: RPCTypes,
        ttl: Duration,
        pick: impl FnOnce(Response<S>) -> Option<Result<T, RaftError<NodeId>>>,
    ) -> Result<T, RPCError<NodeId, Node, RaftError<NodeId>>> {
        match self.peer.call(&req, ttl).await {
            Ok(resp) => match pick(resp) {
                Some(r) => r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e))),
                None => Err(RPCError::Network(NetworkError::new(&unexpected()))),
            },
            Err(e) => Err(self.rpc_err(e, action, ttl)),
        }
    }
}

impl<S: StateMachine> RaftNetwork<TypeConfig<S>> for RaftPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig<S>>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        self.raft_call(
            Request::<S>::AppendEntries(rpc),
            RPCTypes::AppendEntries,
            option.hard_ttl(),
            |r| match r {
                Response::AppendEntries(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        self.raft_call(
            Request::<S>::Vote(rpc),
            RPCTypes::Vote,
            option.hard_ttl(),
            |r| match r {
                Response::Vote(r) => Some(r),
                _ => None,
            },
        )
        .await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: openraft::Snapshot<TypeConfig<S>>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig<S>, Fatal<NodeId>>> {
        let req = Request::<S>::InstallSnapshot {
            vote,
            meta: snapshot.meta,
            data: *snapshot.snapshot,
        };
        let ttl = self.peer_snapshot_timeout();
        let res = tokio::select! {
            r = self.peer.call(&req, ttl) => r,
            closed = cancel => return Err(StreamingError::Closed(closed)),
        };
        match res {
            Ok(Response::InstallSnapshot(Ok(r))) => Ok(r),
            Ok(Response::InstallSnapshot(Err(fatal))) => Err(StreamingError::RemoteError(
                RemoteError::new(self.target, fatal),
            )),
            Ok(_) => Err(StreamingError::Network(NetworkError::new(&unexpected()))),
            Err(CallError::Unreachable(m) | CallError::Handshake(m)) => Err(
                StreamingError::Unreachable(Unreachable::new(&io::Error::other(m))),
            ),
            Err(CallError::Timeout) => Err(StreamingError::Timeout(Timeout {
                action: RPCTypes::InstallSnapshot,
                id: self.id,
                target: self.target,
                timeout: ttl,
            })),
            Err(CallError::Broken(m)) => Err(StreamingError::Network(NetworkError::new(
                &io::Error::other(m),
            ))),
        }
    }

    fn backoff(&self) -> Backoff {
        let (min, max) = (self.peer.opts.backoff_min, self.peer.opts.backoff_max);
        Backoff::new(std::iter::successors(Some(min), move |d| {
            Some((*d * 2).min(max))
        }))
    }
}

impl RaftPeer {
    fn peer_snapshot_timeout(&self) -> Duration {
        self.peer.opts.snapshot_timeout
    }
}
