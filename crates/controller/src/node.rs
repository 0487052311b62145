//! A controller node: storage, openraft, the server, and the local API.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use openraft::error::{InitializeError, RaftError};
use tokio::sync::{watch, Semaphore};

use crate::config::{Bootstrap, ControllerConfig, Voters};
use crate::error::{ControllerError, Result};
use crate::handle::ControllerHandle;
use crate::inner::{Inner, Status};
use crate::log_file::sync_dir;
use crate::log_store::LogStore;
use crate::network::{NetOptions, NetworkFactory};
use crate::rpc::{Fetched, Refused, SnapshotData, Submitted};
use crate::server::serve;
use crate::service::Service;
use crate::sm_store::SmStore;
use crate::transport::{Listener, TcpTransport, Transport};
use crate::types::{Node, NodeId, Raft};
use crate::StateMachine;

const IDENTITY_FILE: &str = "controller.id";

/// A running controller node (see the crate docs).
pub struct Controller<S: StateMachine> {
    inner: Arc<Inner<S>>,
    local_addr: String,
    stop: watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl From<ControllerError> for Refused {
    fn from(e: ControllerError) -> Self {
        match e {
            ControllerError::NotLeader { leader } => Refused::NotLeader { leader },
            ControllerError::Timeout { what, after } => Refused::Timeout {
                what,
                after_ms: after.as_millis() as u64,
            },
            ControllerError::Shutdown => Refused::Shutdown,
            e => Refused::Failed(e.to_string()),
        }
    }
}

impl Refused {
    pub(crate) fn into_error(self, addr: &str) -> ControllerError {
        match self {
            Refused::NotLeader { leader } => ControllerError::NotLeader { leader },
            Refused::Timeout { what, after_ms } => ControllerError::Timeout {
                what: format!("{what} (at {addr})"),
                after: Duration::from_millis(after_ms),
            },
            Refused::Shutdown => ControllerError::Shutdown,
            Refused::Failed(message) => ControllerError::Remote {
                addr: addr.to_string(),
                message,
            },
        }
    }
}

/// The node id and voter set the controller state in `dir` was made for
/// (`None`: no state there yet).
pub fn identity_of(dir: &Path) -> Result<Option<(NodeId, String)>> {
    let path = dir.join(IDENTITY_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ControllerError::io(&path, e)),
    };
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
            .map(str::to_string)
    };
    let id = field("node.id").and_then(|v| v.parse::<NodeId>().ok());
    match (id, field("controller.quorum.voters")) {
        (Some(id), Some(voters)) => Ok(Some((id, voters))),
        _ => Err(ControllerError::corrupt(&path, "unreadable identity file")),
    }
}

/// Checks that `dir` was made for this node and voter set, or records them.
fn check_identity(dir: &Path, node_id: NodeId, voters: &Voters) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| ControllerError::io(dir, e))?;
    let path = dir.join(IDENTITY_FILE);
    let want = format!("node.id={node_id}\ncontroller.quorum.voters={voters}\n");
    match identity_of(dir)? {
        Some((id, on_disk)) => {
            if id != node_id {
                return Err(ControllerError::NodeIdMismatch {
                    configured: node_id,
                    on_disk: id,
                    dir: dir.to_path_buf(),
                });
            }
            let same = on_disk.parse::<Voters>().is_ok_and(|v| &v == voters);
            if !same {
                return Err(ControllerError::VotersMismatch {
                    configured: voters.to_string(),
                    on_disk,
                    dir: dir.to_path_buf(),
                });
            }
            Ok(())
        }
        None => {
            let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
            let mut f = fs::File::create(&tmp).map_err(|e| ControllerError::io(&tmp, e))?;
            f.write_all(want.as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(|e| ControllerError::io(&tmp, e))?;
            fs::rename(&tmp, &path).map_err(|e| ControllerError::io(&path, e))?;
            sync_dir(dir)
        }
    }
}

impl<S: StateMachine> Controller<S> {
    /// Starts a node over TCP, listening on its voter address (or
    /// `config.listen_addr`). `sm` is the empty state; a snapshot on disk
    /// replaces it.
    pub async fn start(config: ControllerConfig, sm: S) -> Result<Self> {
        Self::start_with(config, sm, Arc::new(TcpTransport), None).await
    }

    /// Starts a node over `transport`, on `listener` if given (e.g. bound
    /// to port 0 beforehand), else on a listener bound to its address.
    pub async fn start_with(
        config: ControllerConfig,
        sm: S,
        transport: Arc<dyn Transport>,
        listener: Option<Box<dyn Listener>>,
    ) -> Result<Self> {
        let raft_config = Arc::new(config.raft_config()?);
        config.check_unauthenticated(transport.authenticates_peers())?;
        let id = config.node_id;
        let dir = config.data_dir.clone();
        check_identity(&dir, id, &config.voters)?;
        let log = LogStore::<S>::open(&dir.join("log"), &config.log).await?;
        let sm = SmStore::open(&dir.join("state"), sm, config.log.io_mode).await?;
        let shared = sm.shared();
        let pristine = log.is_pristine() && shared.state.read().last_applied.is_none();
        let reader = log.reader();
        let listener = match listener {
            Some(l) => l,
            None => {
                let addr = config.listen_addr();
                transport
                    .bind(&addr)
                    .await
                    .map_err(|e| ControllerError::Network {
                        addr: addr.clone(),
                        reason: format!("cannot listen: {e}"),
                    })?
            }
        };
        let local_addr = listener.local_addr().unwrap_or_default();
        let network = NetworkFactory {
            id,
            transport,
            opts: NetOptions {
                connect_timeout: config.connect_timeout,
                snapshot_timeout: config.snapshot_timeout,
                backoff_min: config.backoff_min,
                backoff_max: config.backoff_max,
                max_frame_bytes: config.max_frame_bytes,
                auth: config.auth.clone(),
                node_id: Some(id),
            },
        };
        let raft = Raft::<S>::new(id, raft_config, network, log, sm)
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))?;

        // The membership the log holds must be the configured voter set.
        let on_disk: BTreeMap<NodeId, String> = raft
            .metrics()
            .borrow()
            .membership_config
            .nodes()
            .map(|(id, n)| (*id, n.addr.clone()))
            .collect();
        if !on_disk.is_empty() && &on_disk != config.voters.map() {
            let _ = raft.shutdown().await;
            let on_disk = Voters::new(on_disk).map_or_else(|e| e.to_string(), |v| v.to_string());
            return Err(ControllerError::VotersMismatch {
                configured: config.voters.to_string(),
                on_disk,
                dir,
            });
        }

        let initialize = match config.bootstrap {
            Bootstrap::Auto => pristine && id == config.voters.lowest(),
            Bootstrap::Always => pristine,
            Bootstrap::Never => false,
        };
        let members: BTreeMap<NodeId, Node> = config
            .voters
            .iter()
            .map(|(id, addr)| (id, Node::new(addr)))
            .collect();
        let inner = Arc::new(Inner {
            id,
            submits: Semaphore::new(config.max_inflight_submits),
            config,
            raft,
            sm: shared,
            log: reader,
            service: OnceLock::new(),
        });
        let (stop, stop_rx) = watch::channel(false);
        tokio::spawn(snapshot_watchdog(inner.clone(), stop_rx.clone()));
        let server = tokio::spawn(serve(inner.clone(), listener, stop_rx));
        let node = Controller {
            inner,
            local_addr,
            stop,
            server: Some(server),
        };
        if initialize {
            match node.inner.raft.initialize(members).await {
                Ok(()) => tracing::info!(node = id, "controller: cluster initialized"),
                Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => {
                    node.shutdown().await;
                    return Err(ControllerError::Raft(format!("initialize: {e}")));
                }
            }
        } else if node.inner.config.voters.len() == 1 {
            // The only voter needs nobody's vote: waiting out an election
            // timeout first would only delay every restart.
            if let Err(e) = node.inner.raft.trigger().elect().await {
                tracing::warn!(error = %e, "controller: could not start an election");
            }
        }
        Ok(node)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// The address the node listens on.
    pub fn local_addr(&self) -> &str {
        &self.local_addr
    }

    /// Appends `record` if this node is the leader and waits until it is
    /// committed and applied here; otherwise [`ControllerError::NotLeader`]
    /// names the leader. After a [`ControllerError::Timeout`] the record
    /// may still commit later.
    pub async fn submit(&self, record: S::Record) -> Result<Submitted<S::Response>> {
        self.inner.submit(record).await
    }

    /// Committed records from `from` (at most `max` log entries scanned).
    pub fn fetch(&self, from: u64, max: usize) -> Fetched<S::Record> {
        self.inner.fetch(from, max)
    }

    /// The current snapshot, if one was taken or installed.
    pub async fn fetch_snapshot(&self) -> Result<Option<SnapshotData>> {
        self.inner.fetch_snapshot().await
    }

    /// Waits until `index` is applied here; returns the applied index.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<u64> {
        self.inner.wait_applied(index, timeout).await
    }

    /// The last applied index.
    pub fn applied_index(&self) -> Option<u64> {
        *self.inner.sm.applied.borrow()
    }

    /// Reads the state machine.
    pub fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        f(&self.inner.sm.state.read().sm)
    }

    /// The leader this node knows of, with its address.
    pub fn leader(&self) -> Option<(NodeId, String)> {
        self.inner.leader()
    }

    /// The node's Raft status.
    pub fn status(&self) -> Status {
        self.inner.status()
    }

    /// A cloneable handle for tasks that submit and read while it runs.
    pub fn handle(&self) -> ControllerHandle<S> {
        ControllerHandle(self.inner.clone())
    }

    /// Installs the application service the leader answers
    /// ([`crate::Service`]); only the first call takes effect.
    pub fn set_service(&self, service: Arc<dyn Service>) {
        let _ = self.inner.service.set(service);
    }

    /// Status changes as they happen (for waiting on a condition).
    pub fn status_changes(&self) -> watch::Receiver<openraft::RaftMetrics<NodeId, Node>> {
        self.inner.raft.metrics()
    }

    /// Asks for a snapshot now (it is built in the background).
    pub async fn trigger_snapshot(&self) -> Result<()> {
        self.inner
            .raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))
    }

    /// The openraft handle, for what this API does not cover.
    pub fn raft(&self) -> &Raft<S> {
        &self.inner.raft
    }

    /// Stops serving and stops Raft. Everything acknowledged is on disk
    /// already; nothing is handed over (the others elect a new leader).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(error = %e, "controller: raft shutdown");
        }
    }
}

/// Re-arms openraft's snapshot policy: `LogsSinceLast` drops a trigger
/// that races a build in progress and does not check again until more
/// entries arrive (openraft issue #1829), so a node that went quiet after a
/// burst would keep its log (and its purge) behind indefinitely. This asks
/// for a snapshot whenever the applied index is `snapshot_after_entries`
/// past the last snapshot, at most twice a second, until one is built.
async fn snapshot_watchdog<S: StateMachine>(inner: Arc<Inner<S>>, mut stop: watch::Receiver<bool>) {
    let every = inner.config.snapshot_after_entries;
    if every == 0 {
        return;
    }
    let mut metrics = inner.raft.metrics();
    let mut last_trigger: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            changed = metrics.changed() => if changed.is_err() { return },
            // A quiet node sees no metrics change: look again now and then.
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
        let (applied, snapshot) = {
            let m = metrics.borrow();
            (
                m.last_applied.map_or(0, |l| l.index),
                m.snapshot.map_or(0, |l| l.index),
            )
        };
        let due = applied.saturating_sub(snapshot) >= every;
        let rested =
            last_trigger.is_none_or(|t| t.elapsed() >= std::time::Duration::from_millis(500));
        if due && rested {
            last_trigger = Some(std::time::Instant::now());
            if let Err(e) = inner.raft.trigger().snapshot().await {
                tracing::debug!(error = %e, "controller: snapshot trigger");
            }
        }
    }
}

impl<S: StateMachine> Drop for Controller<S> {
    fn drop(&mut self) {
        // Dropped without shutdown(): stop serving at once and stop Raft in
        // the background, like a crash as far as the peers can tell.
        if let Some(server) = self.server.take() {
            server.abort();
            let raft = self.inner.raft.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = raft.shutdown().await;
                });
            }
        }
    }
}
