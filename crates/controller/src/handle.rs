//! A cloneable handle on a running node, for its services and background
//! tasks.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Result;
use crate::inner::{Inner, Status};
use crate::rpc::{Fetched, SnapshotData, Submitted};
use crate::types::{Node, NodeId};
use crate::StateMachine;

/// A cloneable handle on a running controller node, for services and
/// background tasks that submit and read while the node runs.
pub struct ControllerHandle<S: StateMachine>(pub(crate) Arc<Inner<S>>);

impl<S: StateMachine> Clone for ControllerHandle<S> {
    fn clone(&self) -> Self {
        ControllerHandle(self.0.clone())
    }
}

impl<S: StateMachine> ControllerHandle<S> {
    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.0.id
    }

    /// As [`Controller::submit`](crate::Controller::submit).
    pub async fn submit(&self, record: S::Record) -> Result<Submitted<S::Response>> {
        self.0.submit(record).await
    }

    /// Whether this node leads the quorum now.
    pub fn is_leader(&self) -> bool {
        self.0.raft.metrics().borrow().state == openraft::ServerState::Leader
    }

    /// Asks this node's own [`Service`] without the network, as
    /// [`ControllerClient::call_leader`](crate::ControllerClient::call_leader)
    /// would if this node leads; [`ControllerError::NotLeader`](crate::ControllerError::NotLeader)
    /// if it does not.
    pub async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>> {
        self.0
            .call(request)
            .await
            .map_err(|r| r.into_error("this node's controller"))
    }

    /// Waits, at most `timeout`, until this node leads the quorum; whether
    /// it does.
    pub async fn wait_leader(&self, timeout: Duration) -> bool {
        let mut rx = self.0.raft.metrics();
        let leads = rx.wait_for(|m| m.state == openraft::ServerState::Leader);
        let led = matches!(tokio::time::timeout(timeout, leads).await, Ok(Ok(_)));
        led
    }

    /// As [`Controller::fetch`](crate::Controller::fetch).
    pub fn fetch(&self, from: u64, max: usize) -> Fetched<S::Record> {
        self.0.fetch(from, max)
    }

    /// As [`Controller::fetch_snapshot`](crate::Controller::fetch_snapshot).
    pub async fn fetch_snapshot(&self) -> Result<Option<SnapshotData>> {
        self.0.fetch_snapshot().await
    }

    /// As [`Controller::wait_applied`](crate::Controller::wait_applied).
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<u64> {
        self.0.wait_applied(index, timeout).await
    }

    /// Reads the state machine.
    pub fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        f(&self.0.sm.state.read().sm)
    }

    /// The leader this node knows of, with its address.
    pub fn leader(&self) -> Option<(NodeId, String)> {
        self.0.leader()
    }

    /// The node's Raft status.
    pub fn status(&self) -> Status {
        self.0.status()
    }

    /// Status changes as they happen.
    pub fn status_changes(&self) -> watch::Receiver<openraft::RaftMetrics<NodeId, Node>> {
        self.0.raft.metrics()
    }
}
