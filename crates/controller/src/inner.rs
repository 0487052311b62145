//! A running node's shared state and what it answers: the node's own API,
//! its handles and its server all act through it.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{EntryPayload, ServerState};
use tokio::sync::Semaphore;

use crate::config::ControllerConfig;
use crate::error::{ControllerError, Result};
use crate::log_store::{LogReader, ReadFrom};
use crate::rpc::{Fetched, Refused, SnapshotData, Submitted};
use crate::service::Service;
use crate::sm_store::Shared;
use crate::types::{NodeId, Raft};
use crate::StateMachine;

/// A node's view of the quorum, from openraft's metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// The current term.
    pub term: u64,
    /// Leader, follower, candidate…
    pub state: ServerState,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// The last index in the local log.
    pub last_log_index: Option<u64>,
    /// The last index applied to the local state machine.
    pub applied_index: Option<u64>,
    /// The last index in the local snapshot.
    pub snapshot_index: Option<u64>,
    /// The log is purged up to here.
    pub purged_index: Option<u64>,
    /// The voters of the current membership and their addresses, in id
    /// order.
    pub voters: Vec<(NodeId, String)>,
    /// On the leader: the last index each voter's log is known to match
    /// (the leader's own is its last log index); elsewhere `None`.
    pub replication: Option<BTreeMap<NodeId, Option<u64>>>,
    /// On the leader: how long ago a quorum last acknowledged it.
    pub millis_since_quorum_ack: Option<u64>,
}

/// A running node's state, shared by its [`crate::Controller`], its
/// handles and its server.
pub(crate) struct Inner<S: StateMachine> {
    pub id: NodeId,
    pub config: ControllerConfig,
    pub raft: Raft<S>,
    pub sm: Arc<Shared<S>>,
    pub log: LogReader<S>,
    pub submits: Semaphore,
    pub service: OnceLock<Arc<dyn Service>>,
}

impl<S: StateMachine> Inner<S> {
    pub(crate) fn status(&self) -> Status {
        let m = self.raft.metrics().borrow().clone();
        Status {
            id: m.id,
            term: m.current_term,
            state: m.state,
            leader: m.current_leader,
            last_log_index: m.last_log_index,
            applied_index: m.last_applied.map(|l| l.index),
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            voters: {
                let membership = m.membership_config.membership();
                membership
                    .voter_ids()
                    .map(|id| {
                        let addr = membership.get_node(&id).map(|n| n.addr.clone());
                        (id, addr.unwrap_or_default())
                    })
                    .collect()
            },
            replication: m.replication.as_ref().map(|r| {
                r.iter()
                    .map(|(id, matched)| (*id, matched.map(|l| l.index)))
                    .collect()
            }),
            millis_since_quorum_ack: m.millis_since_quorum_ack,
        }
    }

    pub(crate) fn leader(&self) -> Option<(NodeId, String)> {
        let m = self.raft.metrics().borrow().clone();
        let id = m.current_leader?;
        let addr = self
            .config
            .voters
            .addr(id)
            .map(str::to_string)
            .or_else(|| {
                m.membership_config
                    .membership()
                    .get_node(&id)
                    .map(|n| n.addr.clone())
            })?;
        Some((id, addr))
    }

    pub(crate) async fn submit(&self, record: S::Record) -> Result<Submitted<S::Response>> {
        let after = self.config.submit_timeout;
        let timeout = || ControllerError::Timeout {
            what: "commit of the submitted record (is a quorum of controllers reachable?)".into(),
            after,
        };
        let deadline = tokio::time::Instant::now() + after;
        let _permit = tokio::time::timeout_at(deadline, self.submits.acquire())
            .await
            .map_err(|_| timeout())?
            .map_err(|_| ControllerError::Shutdown)?;
        match tokio::time::timeout_at(deadline, self.raft.client_write(record)).await {
            Err(_) => Err(timeout()),
            Ok(Ok(resp)) => match resp.data {
                Some(response) => Ok(Submitted {
                    index: resp.log_id.index,
                    response,
                }),
                None => Err(ControllerError::Raft("no response for a record".into())),
            },
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                let leader = f.leader_id.and_then(|id| {
                    let addr = self.config.voters.addr(id).map(str::to_string);
                    addr.or(f.leader_node.map(|n| n.addr)).map(|a| (id, a))
                });
                Err(ControllerError::NotLeader { leader })
            }
            Ok(Err(RaftError::Fatal(openraft::error::Fatal::Stopped))) => {
                Err(ControllerError::Shutdown)
            }
            Ok(Err(e)) => Err(ControllerError::Raft(e.to_string())),
        }
    }

    pub(crate) fn fetch(&self, from: u64, max: usize) -> Fetched<S::Record> {
        let applied = *self.sm.applied.borrow();
        let Some(upto) = applied else {
            return Fetched::Records {
                records: Vec::new(),
                next_index: from,
                applied_index: None,
            };
        };
        // Keep the answer well inside one frame.
        let budget = self.config.max_frame_bytes / 2;
        match self.log.read_from(from, upto, max.clamp(1, 10_000)) {
            ReadFrom::Purged(p) => Fetched::SnapshotNeeded { log_start: p + 1 },
            ReadFrom::Entries(entries) => {
                let mut next_index = from;
                let mut size = 0usize;
                let mut records = Vec::new();
                for e in entries {
                    if let EntryPayload::Normal(rec) = e.payload {
                        size += postcard::experimental::serialized_size(&rec).unwrap_or(0) + 16;
                        if size > budget && !records.is_empty() {
                            break;
                        }
                        records.push((e.log_id.index, rec));
                    }
                    next_index = e.log_id.index + 1;
                }
                Fetched::Records {
                    records,
                    next_index,
                    applied_index: applied,
                }
            }
        }
    }

    pub(crate) async fn fetch_snapshot(&self) -> Result<Option<SnapshotData>> {
        Ok(self.sm.snapshot().await?.and_then(|s| {
            let last = s.meta.last_log_id?;
            Some(SnapshotData {
                index: last.index,
                term: last.leader_id.term,
                data: *s.snapshot,
            })
        }))
    }

    pub(crate) async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<u64> {
        let mut rx = self.sm.applied.subscribe();
        let got =
            tokio::time::timeout(timeout, rx.wait_for(|a| a.is_some_and(|a| a >= index))).await;
        match got {
            Err(_) => Err(ControllerError::Timeout {
                what: format!("applying index {index}"),
                after: timeout,
            }),
            Ok(Err(_)) => Err(ControllerError::Shutdown),
            Ok(Ok(a)) => Ok(a.unwrap_or(index)),
        }
    }

    /// Answers a request of the application [`Service`] if this node leads.
    pub(crate) async fn call(&self, bytes: Vec<u8>) -> Result<Vec<u8>, Refused> {
        if self.status().state != ServerState::Leader {
            return Err(Refused::NotLeader {
                leader: self.leader().filter(|(id, _)| *id != self.id),
            });
        }
        let Some(service) = self.service.get() else {
            return Err(Refused::Failed(
                "this controller serves no requests yet".into(),
            ));
        };
        service.call(bytes).await.map_err(Refused::Failed)
    }
}
