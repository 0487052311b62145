//! A controller peer for testing a running quorum from outside, well
//! behaved or not: [`Probe`] speaks the protocol as a node would
//! (handshake included) and sends single requests to one node, Raft votes
//! in any name included; [`bare_vote`] and friends make the frames a peer
//! that skips the handshake would send. Nothing in a node uses it.

use std::marker::PhantomData;

use openraft::raft::VoteRequest;
use openraft::{CommittedLeaderId, LogId};

use crate::auth::PeerAuth;
use crate::codec::{encode, Channel, ReadLimits};
use crate::error::{ControllerError, Result};
use crate::rpc::{Fetched, Request, Response, Submitted};
use crate::transport::Transport;
use crate::types::{NodeId, Vote};
use crate::StateMachine;

/// A connection to one controller node, past the handshake.
pub struct Probe<S: StateMachine> {
    addr: String,
    channel: Channel,
    max_frame_bytes: usize,
    _sm: PhantomData<fn() -> S>,
}

impl<S: StateMachine> std::fmt::Debug for Probe<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("addr", &self.addr).finish()
    }
}

fn vote_request(term: u64, candidate: NodeId, last_log_index: u64) -> VoteRequest<NodeId> {
    VoteRequest {
        vote: Vote::new(term, candidate),
        last_log_id: Some(LogId::new(
            CommittedLeaderId::new(term, candidate),
            last_log_index,
        )),
    }
}

impl<S: StateMachine> Probe<S> {
    /// Connects to `addr` over `transport` and runs the handshake as node
    /// `node` with `auth`; a refusal is a [`ControllerError::Network`]
    /// saying why.
    pub async fn connect(
        transport: &dyn Transport,
        addr: &str,
        auth: &PeerAuth,
        node: Option<NodeId>,
    ) -> Result<Self> {
        let net = |reason: String| ControllerError::Network {
            addr: addr.to_string(),
            reason,
        };
        let mut conn = transport
            .connect(addr)
            .await
            .map_err(|e| net(e.to_string()))?;
        let session = crate::auth::connect(&mut conn, auth, node, None)
            .await
            .map_err(net)?;
        Ok(Probe {
            addr: addr.to_string(),
            channel: Channel::new(conn, session.keys),
            max_frame_bytes: 64 << 20,
            _sm: PhantomData,
        })
    }

    async fn call(&mut self, req: Request<S>) -> Result<Response<S>> {
        self.channel.send(&req, self.max_frame_bytes).await?;
        let limits = ReadLimits::caller(self.max_frame_bytes);
        match self.channel.recv::<Response<S>>(&limits).await? {
            Some((resp, _)) => Ok(resp),
            None => Err(ControllerError::Network {
                addr: self.addr.clone(),
                reason: "closed by the node".into(),
            }),
        }
    }

    /// Asks for a vote for `candidate` in `term` with a log ending at
    /// `last_log_index`; whether it was granted.
    pub async fn vote(
        &mut self,
        term: u64,
        candidate: NodeId,
        last_log_index: u64,
    ) -> Result<bool> {
        let req = Request::Vote(vote_request(term, candidate, last_log_index));
        match self.call(req).await? {
            Response::Vote(Ok(r)) => Ok(r.vote_granted),
            Response::Vote(Err(e)) => Err(ControllerError::Raft(e.to_string())),
            _ => Err(ControllerError::BadFrame("unexpected response".into())),
        }
    }

    /// Submits `record` to this node (no redirects).
    pub async fn submit(&mut self, record: S::Record) -> Result<Submitted<S::Response>> {
        match self.call(Request::Submit(record)).await? {
            Response::Submit(r) => r.map_err(|e| e.into_error(&self.addr)),
            _ => Err(ControllerError::BadFrame("unexpected response".into())),
        }
    }

    /// The committed records from `from`, as this node has them.
    pub async fn fetch(&mut self, from: u64, max: u32) -> Result<Fetched<S::Record>> {
        match self.call(Request::Fetch { from, max }).await? {
            Response::Fetch(r) => r.map_err(|e| e.into_error(&self.addr)),
            _ => Err(ControllerError::BadFrame("unexpected response".into())),
        }
    }

    /// Writes `bytes` as they are, outside the protocol (a frame's size
    /// prefix and a body that never ends, say).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        let conn = self.channel.conn();
        conn.write_all(bytes)
            .await
            .map_err(|e| ControllerError::Network {
                addr: self.addr.clone(),
                reason: e.to_string(),
            })
    }
}

fn bare<S: StateMachine>(req: Request<S>) -> Vec<u8> {
    encode(&req, usize::MAX).expect("a request encodes")
}

/// A Vote request frame with no handshake before it.
pub fn bare_vote<S: StateMachine>(term: u64, candidate: NodeId, last_log_index: u64) -> Vec<u8> {
    bare::<S>(Request::Vote(vote_request(term, candidate, last_log_index)))
}

/// A Submit request frame with no handshake before it.
pub fn bare_submit<S: StateMachine>(record: S::Record) -> Vec<u8> {
    bare::<S>(Request::Submit(record))
}

/// A Fetch request frame with no handshake before it.
pub fn bare_fetch<S: StateMachine>(from: u64, max: u32) -> Vec<u8> {
    bare::<S>(Request::Fetch { from, max })
}
