//! A client of the controller quorum: submits records through whichever
//! node leads (following "not leader" redirects), fetches the committed log
//! from any node.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::auth::PeerAuth;
use crate::config::{ControllerConfig, Voters};
use crate::error::{ControllerError, Result};
use crate::network::{CallError, NetOptions, Peer};
use crate::rpc::{Fetched, Refused, Request, Response, SnapshotData, Submitted};
use crate::transport::{TcpTransport, Transport};
use crate::types::NodeId;
use crate::StateMachine;

/// Timeouts and limits of a [`ControllerClient`].
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Connecting to a node.
    pub connect_timeout: Duration,
    /// One request round trip (fetch, wait).
    pub request_timeout: Duration,
    /// A whole submission, redirects and retries included.
    pub submit_timeout: Duration,
    /// First retry delay when no leader answers; doubles per retry.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Largest frame sent or accepted.
    pub max_frame_bytes: usize,
    /// How the client proves itself to the quorum's nodes (and checks
    /// them): the nodes' own setting.
    pub auth: PeerAuth,
    /// The node id the client names in its handshake (a broker-only node's
    /// own); `None` for a client that is no node.
    pub node_id: Option<NodeId>,
}

impl From<&ControllerConfig> for ClientOptions {
    /// The options of a client on node `c.node_id` (a voter, or a
    /// broker-only node given a configuration for its id).
    fn from(c: &ControllerConfig) -> Self {
        ClientOptions {
            connect_timeout: c.connect_timeout,
            request_timeout: c.request_timeout,
            submit_timeout: c.submit_timeout,
            backoff_min: c.backoff_min,
            backoff_max: c.backoff_max,
            max_frame_bytes: c.max_frame_bytes,
            auth: c.auth.clone(),
            node_id: Some(c.node_id),
        }
    }
}

/// Talks to the controller quorum over the network.
pub struct ControllerClient<S: StateMachine> {
    voters: Voters,
    transport: Arc<dyn Transport>,
    opts: ClientOptions,
    /// Idle connections by address (one each; concurrent calls open more).
    idle: Mutex<HashMap<String, Peer>>,
    /// The last node that accepted a submission.
    leader: Mutex<Option<String>>,
    _sm: std::marker::PhantomData<fn() -> S>,
}

impl<S: StateMachine> ControllerClient<S> {
    /// A TCP client of `voters`.
    pub fn new(voters: Voters, opts: ClientOptions) -> Self {
        Self::with_transport(voters, opts, Arc::new(TcpTransport))
    }

    /// A client over `transport`.
    pub fn with_transport(
        voters: Voters,
        opts: ClientOptions,
        transport: Arc<dyn Transport>,
    ) -> Self {
        ControllerClient {
            voters,
            transport,
            opts,
            idle: Mutex::new(HashMap::new()),
            leader: Mutex::new(None),
            _sm: std::marker::PhantomData,
        }
    }

    async fn call(
        &self,
        addr: &str,
        req: &Request<S>,
        timeout: Duration,
    ) -> Result<Response<S>, CallError> {
        let taken = self.idle.lock().remove(addr);
        let mut peer = taken.unwrap_or_else(|| {
            let opts = NetOptions {
                connect_timeout: self.opts.connect_timeout,
                snapshot_timeout: self.opts.request_timeout,
                backoff_min: self.opts.backoff_min,
                backoff_max: self.opts.backoff_max,
                max_frame_bytes: self.opts.max_frame_bytes,
                auth: self.opts.auth.clone(),
                node_id: self.opts.node_id,
            };
            let expect = self
                .voters
                .iter()
                .find(|(_, a)| *a == addr)
                .map(|(id, _)| id);
            Peer::new(addr.to_string(), expect, self.transport.clone(), opts)
        });
        let r = peer.call(req, timeout).await;
        if r.is_ok() {
            self.idle.lock().insert(addr.to_string(), peer);
        }
        r
    }

    fn addr_of(&self, node: NodeId) -> Result<String> {
        self.voters
            .addr(node)
            .map(str::to_string)
            .ok_or_else(|| ControllerError::NotAVoter {
                node_id: node,
                voters: self.voters.to_string(),
            })
    }

    fn net_err(addr: &str, e: CallError) -> ControllerError {
        ControllerError::Network {
            addr: addr.to_string(),
            reason: e.to_string(),
        }
    }

    /// Submits `record` to the leader: tries the last known leader (or the
    /// first voter), follows redirects, and moves on to the next voter when
    /// one is unreachable or knows no leader, with backoff. Fails with
    /// [`ControllerError::Timeout`] when nothing commits within the
    /// submission timeout (e.g. no quorum). A retry after a connection broke
    /// mid-request may append the record twice; records should be
    /// idempotent or checked by the state machine.
    pub async fn submit(&self, record: S::Record) -> Result<Submitted<S::Response>> {
        self.to_leader(Request::Submit(record), "submission", |r| match r {
            Response::Submit(r) => Some(r),
            _ => None,
        })
        .await
    }

    /// Sends a request to the leader's [`Service`](crate::Service), finding
    /// the leader as [`submit`](Self::submit) does.
    pub async fn call_leader(&self, request: Vec<u8>) -> Result<Vec<u8>> {
        self.to_leader(Request::Call(request), "request", |r| match r {
            Response::Call(r) => Some(r),
            _ => None,
        })
        .await
    }

    async fn to_leader<T>(
        &self,
        req: Request<S>,
        what: &str,
        answer: impl Fn(Response<S>) -> Option<Result<T, Refused>>,
    ) -> Result<T> {
        let deadline = Instant::now() + self.opts.submit_timeout;
        let voters: Vec<String> = self.voters.iter().map(|(_, a)| a.to_string()).collect();
        let mut next_voter = 0usize;
        let mut addr = self
            .leader
            .lock()
            .clone()
            .unwrap_or_else(|| voters[0].clone());
        let mut backoff = self.opts.backoff_min;
        let mut last_err = String::from("no node answered");
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(ControllerError::Timeout {
                    what: format!("{what} to the controller quorum ({last_err})"),
                    after: self.opts.submit_timeout,
                });
            }
            match self.call(&addr, &req, deadline - now).await.map(&answer) {
                Ok(Some(Ok(s))) => {
                    *self.leader.lock() = Some(addr);
                    return Ok(s);
                }
                Ok(Some(Err(Refused::NotLeader {
                    leader: Some((id, to)),
                }))) => {
                    last_err = format!("{addr} redirected to node {id}");
                    if to != addr {
                        addr = to;
                        continue;
                    }
                }
                Ok(Some(Err(Refused::NotLeader { leader: None }))) => {
                    last_err = format!("{addr} knows no leader");
                }
                Ok(Some(Err(r))) => return Err(r.into_error(&addr)),
                Ok(None) => last_err = format!("{addr} answered another request"),
                Err(CallError::Timeout) => last_err = format!("{addr} did not answer"),
                Err(e) => last_err = format!("{addr}: {e}"),
            }
            *self.leader.lock() = None;
            addr = voters[next_voter % voters.len()].clone();
            next_voter += 1;
            let pause = backoff.min(deadline.saturating_duration_since(Instant::now()));
            tokio::time::sleep(pause).await;
            backoff = (backoff * 2).min(self.opts.backoff_max);
        }
    }

    /// Committed records from `from` as node `node` has them.
    pub async fn fetch(&self, node: NodeId, from: u64, max: u32) -> Result<Fetched<S::Record>> {
        let addr = self.addr_of(node)?;
        match self
            .call(
                &addr,
                &Request::Fetch { from, max },
                self.opts.request_timeout,
            )
            .await
        {
            Ok(Response::Fetch(r)) => r.map_err(|e| e.into_error(&addr)),
            Ok(_) => Err(ControllerError::BadFrame("unexpected response".into())),
            Err(e) => Err(Self::net_err(&addr, e)),
        }
    }

    /// Node `node`'s current snapshot.
    pub async fn fetch_snapshot(&self, node: NodeId) -> Result<Option<SnapshotData>> {
        let addr = self.addr_of(node)?;
        match self
            .call(&addr, &Request::FetchSnapshot, self.opts.request_timeout)
            .await
        {
            Ok(Response::FetchSnapshot(r)) => r.map_err(|e| e.into_error(&addr)),
            Ok(_) => Err(ControllerError::BadFrame("unexpected response".into())),
            Err(e) => Err(Self::net_err(&addr, e)),
        }
    }

    /// Waits (at most the request timeout) until node `node` has applied
    /// `index`; returns its applied index.
    pub async fn wait_applied(&self, node: NodeId, index: u64, timeout: Duration) -> Result<u64> {
        let addr = self.addr_of(node)?;
        let timeout = timeout.min(self.opts.request_timeout);
        let req = Request::WaitApplied {
            index,
            timeout_ms: timeout.as_millis() as u64,
        };
        match self
            .call(&addr, &req, timeout + self.opts.connect_timeout)
            .await
        {
            Ok(Response::WaitApplied(r)) => r.map_err(|e| e.into_error(&addr)),
            Ok(_) => Err(ControllerError::BadFrame("unexpected response".into())),
            Err(e) => Err(Self::net_err(&addr, e)),
        }
    }
}
