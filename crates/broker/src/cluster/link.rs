//! How a broker reaches the controller quorum: submissions and service
//! requests go to the leader wherever it is; the committed metadata log is
//! read from this node's own controller in combined mode, else from any
//! voter.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use controller::{ControllerClient, ControllerError, ControllerHandle, Fetched, SnapshotData};

use crate::metadata_machine::{MetadataBatch, MetadataMachine};
use crate::metadata_records::NodeId;
use crate::Error;

/// The controller quorum as a broker sees it.
pub struct ClusterLink {
    client: ControllerClient<MetadataMachine>,
    local: Option<ControllerHandle<MetadataMachine>>,
    voters: Vec<u64>,
    runtime: tokio::runtime::Handle,
    /// How long a metadata change may take, submission and local apply.
    pub change_timeout: Duration,
}

impl std::fmt::Debug for ClusterLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterLink")
            .field("voters", &self.voters)
            .field("combined", &self.local.is_some())
            .finish_non_exhaustive()
    }
}

pub(crate) fn unavailable(e: ControllerError) -> Error {
    Error::ControllerUnavailable(e.to_string())
}

impl ClusterLink {
    /// A link through `client`; `local` is this node's own controller in
    /// combined mode. Blocking callers' work runs on `runtime`.
    pub fn new(
        client: ControllerClient<MetadataMachine>,
        local: Option<ControllerHandle<MetadataMachine>>,
        voters: Vec<u64>,
        runtime: tokio::runtime::Handle,
        change_timeout: Duration,
    ) -> ClusterLink {
        ClusterLink {
            client,
            local,
            voters,
            runtime,
            change_timeout,
        }
    }

    /// The node the quorum's leader runs on, if this node knows.
    pub fn leader(&self) -> Option<NodeId> {
        self.local
            .as_ref()
            .and_then(|l| l.leader())
            .map(|(id, _)| id as NodeId)
    }

    /// Whether this node's own controller is the only voter (a quorum of
    /// one, e.g. `magnetar standalone`): it is the leader or nobody is.
    pub fn sole_voter(&self) -> bool {
        self.local.as_ref().is_some_and(|l| self.voters == [l.id()])
    }

    /// This node's own controller when it leads (or, as the only voter,
    /// once it does): requests then skip the network.
    async fn local_leader(&self) -> Option<&ControllerHandle<MetadataMachine>> {
        let local = self.local.as_ref()?;
        if local.is_leader() || (self.sole_voter() && local.wait_leader(self.change_timeout).await)
        {
            return Some(local);
        }
        None
    }

    /// Commits one batch through the leader; its index, or the conflict
    /// that made every node refuse it.
    pub async fn submit(&self, batch: MetadataBatch) -> Result<(u64, Result<(), String>), Error> {
        if let Some(local) = self.local_leader().await {
            if self.sole_voter() {
                let s = local.submit(batch).await.map_err(unavailable)?;
                return Ok((s.index, s.response));
            }
            match local.submit(batch.clone()).await {
                Ok(s) => return Ok((s.index, s.response)),
                // Deposed meanwhile: the client finds the new leader.
                Err(ControllerError::NotLeader { .. }) => {}
                Err(e) => return Err(unavailable(e)),
            }
        }
        if self.sole_voter() {
            // No other controller to ask (an in-process one has no network).
            return Err(unavailable(ControllerError::NotLeader { leader: None }));
        }
        let s = self.client.submit(batch).await.map_err(unavailable)?;
        Ok((s.index, s.response))
    }

    /// A request to the leader's broker service.
    pub async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, ControllerError> {
        if let Some(local) = self.local_leader().await {
            if self.sole_voter() {
                return local.call(request).await;
            }
            match local.call(request.clone()).await {
                Err(ControllerError::NotLeader { .. }) => {}
                answer => return answer,
            }
        }
        if self.sole_voter() {
            return Err(ControllerError::NotLeader { leader: None });
        }
        self.client.call_leader(request).await
    }

    /// Committed batches from `from`, waiting up to `wait` for one when
    /// there is none yet.
    pub async fn fetch(&self, from: u64, wait: Duration) -> Result<Fetched<MetadataBatch>, Error> {
        if let Some(local) = &self.local {
            let f = local.fetch(from, 1000);
            if matches!(&f, Fetched::Records { records, .. } if records.is_empty()) {
                // Nothing new: wait for the next commit (a timeout is fine).
                let _ = local.wait_applied(from, wait).await;
                return Ok(local.fetch(from, 1000));
            }
            return Ok(f);
        }
        let mut last = None;
        for &voter in &self.voters {
            match self.client.fetch(voter, from, 1000).await {
                Ok(f @ Fetched::Records { .. }) => {
                    if matches!(&f, Fetched::Records { records, .. } if records.is_empty()) {
                        let _ = self.client.wait_applied(voter, from, wait).await;
                        return self
                            .client
                            .fetch(voter, from, 1000)
                            .await
                            .map_err(unavailable);
                    }
                    return Ok(f);
                }
                Ok(f) => return Ok(f),
                Err(e) => last = Some(e),
            }
        }
        Err(unavailable(last.unwrap_or(ControllerError::Shutdown)))
    }

    /// The metadata snapshot of this node's controller, or of the first
    /// voter that answers.
    pub async fn fetch_snapshot(&self) -> Result<Option<SnapshotData>, Error> {
        if let Some(local) = &self.local {
            return local.fetch_snapshot().await.map_err(unavailable);
        }
        let mut last = None;
        for &voter in &self.voters {
            match self.client.fetch_snapshot(voter).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(unavailable(last.unwrap_or(ControllerError::Shutdown)))
    }

    /// Runs `f` on the runtime and waits for it from a blocking caller (the
    /// metadata operations are synchronous and run on blocking threads; on
    /// a runtime worker the wait moves the worker's other tasks away).
    pub fn block_on<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(f.await);
        });
        let wait = || rx.recv();
        let on_worker = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let got = if on_worker {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        };
        // The task only drops its sender when the runtime shuts down.
        got.map_err(|_| Error::ControllerUnavailable("the node is shutting down".into()))
    }
}
