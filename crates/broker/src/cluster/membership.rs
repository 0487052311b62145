//! A node joining its cluster: a `magnetar broker` node of the quorum
//! `controller.quorum.voters` names, or a standalone node (no voters), the
//! sole voter of a quorum of one inside its process. Its controller in
//! combined mode, its registration with the active
//! controller, catching up with the committed metadata before the broker
//! opens (KIP-516: that first state names every partition it holds), and
//! the tasks that keep it current afterwards: applying new metadata and
//! heartbeating.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::controller_port::controller_security;
use super::{
    run_fencing, BrokerService, ClusterDir, ClusterLink, MetadataFile, ServiceRequest,
    ServiceResponse,
};
use crate::config::BrokerConfig;
use crate::metadata_machine::{MetadataBatch, MetadataMachine};
use crate::metadata_records::MetadataRecord;
use crate::metadata_store::Metadata;
use crate::{Broker, Endpoint, Error};
use controller::transport::{InProcessTransport, IN_PROCESS_ADDR};
use controller::{
    ClientOptions, Controller, ControllerClient, ControllerConfig, Fetched, StateMachine, Voters,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

type Result<T> = std::result::Result<T, Error>;

/// `Error::Startup` with a formatted message.
macro_rules! startup {
    ($($t:tt)*) => { Error::Startup(format!($($t)*)) };
}

/// Returns `Error::Startup` with a formatted message.
macro_rules! fail {
    ($($t:tt)*) => { return Err(startup!($($t)*)) };
}

fn task_failed(e: tokio::task::JoinError) -> Error {
    Error::Startup(format!("a start-up task failed: {e}"))
}

/// How long a starting node keeps trying to register (a cluster coming
/// up needs a quorum of controllers first).
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(120);

/// The cluster side of a running node.
pub struct Membership {
    controller: Option<Controller<MetadataMachine>>,
    /// The controller is a quorum of one inside this process.
    in_process: bool,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// How to reach the quorum and this node's registration, once it
    /// registered: for the controlled shutdown.
    registered: Option<(Arc<ClusterLink>, i32, i64)>,
    /// Set, with why, when a later registration of this node id replaced
    /// this process's (it must stop serving).
    superseded: watch::Receiver<Option<String>>,
}

/// How long a clean shutdown waits for the controller to fence this
/// broker before it stops anyway (the session then expires).
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

impl Membership {
    /// Stops applying and heartbeating (the broker closes next), then the
    /// controller.
    pub async fn stop_tasks(&mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    /// Tells the controller this broker stops (Kafka's controlled
    /// shutdown): it is fenced at once and its partitions get other
    /// leaders, so clients are not sent to a closed port for a session
    /// timeout, and the next process on this data directory registers
    /// without waiting. Called while the node still serves and applies
    /// metadata: it returns once this broker applied its fencing (its
    /// replicas are followers then), or after a bounded wait.
    pub async fn controlled_shutdown(&mut self, broker: &Broker) {
        let Some((link, node, epoch)) = self.registered.take() else {
            return;
        };
        if self.shutdown_requested(&link, node, epoch).await
            && !broker.wait_fenced(CONTROLLED_SHUTDOWN_TIMEOUT).await
        {
            warn!(
                node,
                "this broker's fencing was not applied in time; stopping anyway"
            );
        }
    }

    /// Asks the controller to fence this registration for good; whether
    /// it did.
    async fn shutdown_requested(&self, link: &ClusterLink, node: i32, epoch: i64) -> bool {
        if self.superseded.borrow().is_some() {
            // That registration is another process's now.
            return false;
        }
        let req = ServiceRequest::Shutdown { node, epoch };
        match tokio::time::timeout(CONTROLLED_SHUTDOWN_TIMEOUT, call(link, &req)).await {
            Ok(Ok(ServiceResponse::Heartbeat { fenced: true })) => {
                info!(node, epoch, "fenced for shutdown");
                return true;
            }
            Ok(Ok(other)) => warn!(node, "controlled shutdown answered {other:?}"),
            Ok(Err(e)) => warn!(node, "controlled shutdown failed: {e}"),
            Err(_) => warn!(
                node,
                "no controller answered the controlled shutdown; the session will expire"
            ),
        }
        false
    }

    /// Resolves, with why, once another process has registered this
    /// node id in this one's place: the process must stop, or two would
    /// serve the same partitions (a copied data directory, or one that
    /// lost the controllers for longer than two heartbeats).
    pub async fn superseded(&self) -> String {
        let mut rx = self.superseded.clone();
        let why = match rx.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            None => std::future::pending().await,
        }
    }

    /// Stops the controller.
    pub async fn shutdown_controller(self) {
        if let Some(c) = self.controller {
            c.shutdown().await;
        }
    }

    /// This node's controller's address, in combined mode (an in-process
    /// quorum of one has none).
    pub fn controller_addr(&self) -> Option<String> {
        self.controller
            .as_ref()
            .filter(|_| !self.in_process)
            .map(|c| c.local_addr().to_string())
    }

    /// Whether the controller is a quorum of one inside this process.
    pub fn in_process(&self) -> bool {
        self.in_process
    }
}

/// Starts the controller (combined mode), registers, catches up and opens
/// the broker.
pub async fn join(
    config: BrokerConfig,
    endpoint: Endpoint,
    endpoints: BTreeMap<String, String>,
) -> Result<(Arc<Broker>, Membership)> {
    let node = config.node_id();
    // No voters named: a quorum of one inside this process (`magnetar
    // standalone`), with no controller port.
    let in_process = config.string_value("controller.quorum.voters").is_empty();
    let voters: Voters = if in_process {
        Voters::new([(node as u64, IN_PROCESS_ADDR.to_string())]).map_err(|e| startup!("{e}"))?
    } else {
        config
            .string_value("controller.quorum.voters")
            .parse()
            .map_err(|e| startup!("controller.quorum.voters: {e}"))?
    };
    if in_process {
        for (key, default) in [
            ("process.roles", "broker,controller"),
            ("controller.listen.address", ""),
            ("controller.security.protocol", "SASL_PLAINTEXT"),
            ("controller.cluster.secret.file", ""),
        ] {
            if config.string_value(key) != default {
                warn!(
                    key,
                    value = config.string_value(key),
                    "ignored: a standalone node's controller is a quorum of one inside the process, with no listener"
                );
            }
        }
    }
    let combined = in_process || config.string_value("process.roles") == "broker,controller";
    let is_voter = voters.addr(node as u64).is_some();
    if combined && !is_voter {
        fail!(
            "node {node} runs a controller (process.roles=broker,controller) but is not in controller.quorum.voters ({voters})"
        );
    }
    if !combined && is_voter {
        fail!(
            "node {node} is in controller.quorum.voters ({voters}) but process.roles=broker runs no controller; give it --controller-addr or another node id"
        );
    }
    let mut cc = ControllerConfig::new(
        node as u64,
        voters.clone(),
        config.data_dir.join("controller"),
    );
    let listen = config.string_value("controller.listen.address");
    if !listen.is_empty() && !in_process {
        cc.listen_addr = Some(listen.trim_start_matches("PLAINTEXT://").to_string());
    }
    cc.queued_max_request_bytes =
        usize::try_from(config.int_value("controller.queued.max.request.bytes"))
            .unwrap_or(usize::MAX);
    let session =
        Duration::from_millis(config.int_value("broker.session.timeout.ms").max(1) as u64);
    let heartbeat =
        Duration::from_millis(config.int_value("broker.heartbeat.interval.ms").max(1) as u64);
    // Locked before the controller starts and before registering: a
    // second process on this directory must fail here, neither touching
    // the live controller's Raft files nor replacing the registration of
    // the process that holds it.
    let c = config.clone();
    let (dir, metadata_file) = tokio::task::spawn_blocking(move || {
        if in_process {
            ClusterDir::open_in_process(&c)
        } else {
            ClusterDir::open(&c).map(|d| (d, MetadataFile::None))
        }
    })
    .await
    .map_err(task_failed)??;
    let (stop, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let transport: Arc<dyn controller::transport::Transport> = if in_process {
        Arc::new(InProcessTransport)
    } else {
        let listen = combined.then(|| {
            cc.listen_addr
                .clone()
                .unwrap_or_else(|| voters.addr(node as u64).unwrap_or_default().to_string())
        });
        match controller_security(&config, &voters, listen.as_deref()) {
            Ok((transport, auth)) => {
                cc.auth = auth;
                transport
            }
            Err(e) => {
                release(dir).await;
                return Err(e);
            }
        }
    };
    let controller = if combined {
        let started =
            Controller::start_with(cc.clone(), MetadataMachine::new(), transport.clone(), None)
                .await;
        let c = match started {
            Ok(c) => c,
            Err(e) => {
                release(dir).await;
                fail!("controller: {e}");
            }
        };
        let service = if in_process {
            let slots = config.int_value("offsets.topic.num.partitions").max(1) as usize;
            BrokerService::in_process(c.handle(), node, slots, heartbeat)
        } else {
            BrokerService::new(c.handle(), session, heartbeat)
        };
        c.set_service(service.clone());
        tasks.push(tokio::spawn(run_fencing(
            service,
            Duration::from_millis(500),
            stop_rx.clone(),
        )));
        info!(node, addr = %c.local_addr(), "controller started");
        Some(c)
    } else {
        None
    };
    let client =
        ControllerClient::with_transport(voters.clone(), ClientOptions::from(&cc), transport);
    let link = Arc::new(ClusterLink::new(
        client,
        controller.as_ref().map(|c| c.handle()),
        voters.iter().map(|(id, _)| id).collect(),
        tokio::runtime::Handle::current(),
        cc.submit_timeout + Duration::from_secs(5),
    ));
    let (superseded_tx, superseded) = watch::channel(None);
    let membership = Membership {
        controller,
        in_process,
        stop,
        tasks,
        registered: None,
        superseded,
    };
    let dir = match settle_file(&link, &membership, metadata_file, dir, &config.data_dir).await {
        Ok(dir) => dir,
        Err(failed) => return Err(abandon(membership, failed).await),
    };
    let joining = Joining {
        config,
        dir,
        endpoint,
        endpoints,
    };
    let joined = register_and_open(joining, link, session, heartbeat, stop_rx, superseded_tx).await;
    match joined {
        Ok((broker, more, registered)) => {
            // Clients are told about unfenced brokers only: serving before
            // would answer Metadata without this broker in it.
            let limit = session + heartbeat * 2;
            if !broker.wait_unfenced(limit).await {
                warn!(
                    node,
                    "still fenced {limit:?} after registering; serving anyway (clients are sent here once the controller unfences this broker)"
                );
            }
            let mut membership = membership;
            membership.tasks.extend(more);
            membership.registered = Some(registered);
            Ok((broker, membership))
        }
        Err(failed) => Err(abandon(membership, failed).await),
    }
}

/// A start that failed once the directory was locked: why, and the
/// directory if this process still holds it.
type Abandoned = (Error, Option<Box<ClusterDir>>);

/// Stops what a failed start began (tasks, then the controller), then
/// gives the directory back: unlocked only once the quorum's files are
/// closed.
async fn abandon(mut membership: Membership, (error, dir): Abandoned) -> Error {
    membership.stop_tasks().await;
    membership.shutdown_controller().await;
    if let Some(dir) = dir {
        release(*dir).await;
    }
    error
}

/// Most bytes of topics in one import batch: a Raft entry is bounded
/// (`LogOptions::max_entry_bytes`), a large node's file is not.
const IMPORT_BATCH_BYTES: usize = 4 << 20;

/// The file's topics as batches of about `limit` bytes at most (a topic
/// larger than that goes alone).
fn import_batches(file: &Metadata, limit: usize) -> Vec<Vec<MetadataRecord>> {
    let mut batches = Vec::new();
    let mut batch = Vec::new();
    let mut bytes = 0;
    for t in file.topics.values() {
        let size = serde_json::to_vec(t).map_or(0, |v| v.len());
        if !batch.is_empty() && bytes + size > limit {
            batches.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes += size;
        batch.push(MetadataRecord::TopicCreated { topic: t.clone() });
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}

/// Makes a single node's metadata file (written by `magnetar standalone`
/// before it ran a quorum of one) the first state of the node's new
/// quorum: everything but the topics in one record, then the topics in
/// batches. An import that does not finish is made again from the file
/// (the directory is marked imported only at the end, and a quorum found
/// unmarked is discarded before the controller starts).
async fn import(
    link: &ClusterLink,
    membership: &Membership,
    file: Metadata,
    data_dir: &std::path::Path,
) -> Result<()> {
    let path = data_dir.join(crate::metadata_store::FILE_NAME);
    let current = quorum_cluster(membership).await?;
    if !current.is_empty() {
        fail!(
            "the controller quorum to import {} into already holds cluster {current}",
            path.display()
        );
    }
    let submit = |records: Vec<MetadataRecord>| async {
        let (index, answer) = link.submit(MetadataBatch(records)).await?;
        answer.map_err(|e| startup!("importing {}: {e}", path.display()))?;
        Ok::<u64, Error>(index)
    };
    let mut rest = file.clone();
    rest.topics.clear();
    let mut index = submit(vec![MetadataRecord::Imported {
        metadata: Box::new(rest),
    }])
    .await?;
    for batch in import_batches(&file, IMPORT_BATCH_BYTES) {
        index = submit(batch).await?;
    }
    info!(
        cluster_id = %file.cluster_id,
        topics = file.topics.len(),
        index,
        "imported the single-node metadata file into the controller quorum"
    );
    Ok(())
}

/// The cluster id the quorum of one holds (empty if none yet), once
/// everything already in its log is applied.
async fn quorum_cluster(membership: &Membership) -> Result<String> {
    let controller = membership
        .controller
        .as_ref()
        .ok_or_else(|| startup!("a quorum of one runs its controller"))?
        .handle();
    // The leader's own entry commits once it leads.
    let limit = Duration::from_secs(30);
    if !controller.wait_leader(limit).await {
        fail!("the controller did not take the lead within {limit:?}");
    }
    if let Some(last) = controller.status().last_log_index {
        controller
            .wait_applied(last, limit)
            .await
            .map_err(|e| startup!("controller: {e}"))?;
    }
    Ok(controller.read(|sm| sm.metadata.cluster_id.clone()))
}

/// Brings a single node's metadata file into the quorum of one: imports
/// it, then marks the directory and moves the file away (only the latter
/// for the file a crash left behind after its import).
async fn settle_file(
    link: &ClusterLink,
    membership: &Membership,
    file: MetadataFile,
    mut dir: ClusterDir,
    data_dir: &std::path::Path,
) -> std::result::Result<ClusterDir, Abandoned> {
    match file {
        MetadataFile::None => return Ok(dir),
        MetadataFile::Import { file, .. } => {
            if let Err(e) = import(link, membership, *file, data_dir).await {
                return Err((e, Some(Box::new(dir))));
            }
        }
        MetadataFile::Imported => warn!(
            "{} was imported before the last stop but not moved away; moving it now",
            data_dir.join(crate::metadata_store::FILE_NAME).display()
        ),
    }
    let data_dir = data_dir.to_path_buf();
    let done = tokio::task::spawn_blocking(move || match dir.import_done(&data_dir) {
        Ok(()) => Ok(dir),
        Err(e) => Err((e, Some(Box::new(dir)))),
    })
    .await;
    done.unwrap_or_else(|e| Err((task_failed(e), None)))
}

/// Gives a data directory back as found, off the async workers.
async fn release(dir: ClusterDir) {
    if let Err(e) = tokio::task::spawn_blocking(move || dir.release()).await {
        warn!("releasing the data directory: {e}");
    }
}

/// A registered node's broker, its tasks, and what its controlled
/// shutdown needs (link, node id, registration epoch).
type Joined = (
    Arc<Broker>,
    Vec<JoinHandle<()>>,
    (Arc<ClusterLink>, i32, i64),
);

/// What a node brings to the cluster it joins.
struct Joining {
    config: BrokerConfig,
    /// Its data directory, locked.
    dir: ClusterDir,
    endpoint: Endpoint,
    endpoints: BTreeMap<String, String>,
}

async fn register_and_open(
    joining: Joining,
    link: Arc<ClusterLink>,
    session: Duration,
    heartbeat: Duration,
    stop: watch::Receiver<bool>,
    superseded: watch::Sender<Option<String>>,
) -> std::result::Result<Joined, Abandoned> {
    let Joining {
        config,
        dir,
        endpoint,
        endpoints,
    } = joining;
    let node = config.node_id();
    if dir.logs.lock_identity().is_none() {
        info!(
            node,
            "this data directory's lock cannot prove a crashed predecessor gone (not a local filesystem, or no kernel boot id): a restart after a crash waits for it to miss two heartbeats"
        );
    }
    let req = ServiceRequest::Register {
        node,
        incarnation: uuid::Uuid::new_v4().to_string(),
        directory: dir.directory_id().to_string(),
        lock: dir.logs.lock_identity().unwrap_or_default().to_string(),
        endpoints,
    };
    let (epoch, registered_at) = match register(&link, req, session).await {
        Ok(r) => r,
        Err(e) => return Err((e, Some(Box::new(dir)))),
    };
    info!(
        node,
        epoch,
        index = registered_at,
        "registered with the controller quorum"
    );
    let (metadata, applied) = match catch_up(&link, registered_at).await {
        Ok(m) => m,
        Err(e) => return Err((e, Some(Box::new(dir)))),
    };
    let l = link.clone();
    let opened = tokio::task::spawn_blocking(move || {
        // A directory of another cluster or node is refused before any
        // log opens, so it is given back as found.
        let data_dir = config.data_dir.clone();
        if let Err(e) = super::dir::check_membership(&data_dir, &metadata.cluster_id, node) {
            return Err((e, Some(Box::new(dir))));
        }
        Broker::open_cluster(config, dir, endpoint, l, metadata, applied).map_err(|e| (e, None))
    })
    .await;
    let broker = match opened {
        Ok(opened) => opened?,
        Err(e) => return Err((task_failed(e), None)),
    };
    broker.set_registration_epoch(epoch);
    let tasks = vec![
        tokio::spawn(follow(broker.clone(), link.clone(), stop.clone())),
        tokio::spawn(heartbeats(
            broker.clone(),
            link.clone(),
            epoch,
            registered_at,
            heartbeat,
            stop,
            superseded,
        )),
    ];
    Ok((broker, tasks, (link, node, epoch)))
}

async fn call(link: &ClusterLink, req: &ServiceRequest) -> Result<ServiceResponse> {
    let bytes = serde_json::to_vec(req).map_err(|e| startup!("{e}"))?;
    let answer = link.call(bytes).await.map_err(super::link::unavailable)?;
    serde_json::from_slice(&answer)
        .map_err(|e| Error::ControllerUnavailable(format!("unreadable answer: {e}")))
}

/// Registers, retrying while no controller leads; a node id another
/// process holds is retried until that process's session would have
/// expired (a crashed predecessor), then refused with a clear error.
async fn register(
    link: &ClusterLink,
    req: ServiceRequest,
    session: Duration,
) -> Result<(i64, u64)> {
    let ServiceRequest::Register { node, .. } = req else {
        fail!("not a registration: {req:?}");
    };
    let started = Instant::now();
    let mut duplicate_since: Option<Instant> = None;
    let mut predecessor_since: Option<Instant> = None;
    loop {
        match call(link, &req).await {
            Ok(ServiceResponse::Registered { epoch, index }) => return Ok((epoch, index)),
            Ok(ServiceResponse::Wait(why)) => {
                // A crashed predecessor misses its heartbeats within two
                // intervals; one that goes on heartbeating for a whole
                // session runs on a copy of this directory.
                let since = *predecessor_since.get_or_insert_with(Instant::now);
                if since.elapsed() > session + Duration::from_secs(2) {
                    fail!(
                        "the controller refused node {node}: {why}; another live process heartbeats with this data directory's id (directory.id in meta.properties): a copy of a running broker's data directory cannot join as that broker"
                    );
                }
                info!(node, "waiting for the previous process on this data directory to miss its heartbeats ({why})");
            }
            Ok(ServiceResponse::Refused(why)) => {
                let since = *duplicate_since.get_or_insert_with(Instant::now);
                if since.elapsed() > session + Duration::from_secs(2) {
                    fail!("the controller refused node {node}: {why}");
                }
                warn!(node, "registration refused ({why}); retrying until the other process's session expires");
            }
            Ok(other) => fail!("unexpected registration answer {other:?}"),
            Err(e) => {
                if started.elapsed() > REGISTRATION_TIMEOUT {
                    fail!("could not register with the controller quorum: {e}");
                }
                info!(node, "waiting for the controller quorum: {e}");
            }
        }
        // Waiting on the quorum (or on another process's session): a
        // fixed pause between attempts, each bounded by its own timeout.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The metadata up to at least `index`: the snapshot if the log was
/// compacted past where we start, then the records.
async fn catch_up(link: &ClusterLink, index: u64) -> Result<(Metadata, u64)> {
    let mut machine = MetadataMachine::new();
    let mut next = 1;
    let mut applied = 0;
    let deadline = Instant::now() + REGISTRATION_TIMEOUT;
    while applied < index {
        if Instant::now() > deadline {
            fail!("could not read the metadata log up to index {index}");
        }
        match link.fetch(next, Duration::from_secs(1)).await? {
            Fetched::Records {
                records,
                next_index,
                applied_index,
            } => {
                for (i, batch) in &records {
                    machine.apply(*i, batch).ok();
                }
                next = next_index;
                // Raft's own entries carry no record but count as applied.
                applied = applied_index.unwrap_or(0).min(next_index.saturating_sub(1));
            }
            Fetched::SnapshotNeeded { .. } => {
                let snap = link
                    .fetch_snapshot()
                    .await?
                    .ok_or_else(|| startup!("the log is compacted but there is no snapshot"))?;
                machine
                    .restore(&snap.data)
                    .map_err(|e| startup!("unreadable metadata snapshot: {e}"))?;
                next = snap.index + 1;
                applied = snap.index;
            }
        }
    }
    Ok((machine.metadata, applied))
}

/// Applies the committed metadata as it comes, until `stop`.
async fn follow(broker: Arc<Broker>, link: Arc<ClusterLink>, mut stop: watch::Receiver<bool>) {
    let mut next = broker.applied_metadata_index() + 1;
    loop {
        if *stop.borrow() {
            return;
        }
        if !broker.metadata_fully_applied() {
            let b = broker.clone();
            let _ = tokio::task::spawn_blocking(move || b.retry_pending_topics()).await;
        }
        let fetched = tokio::select! {
            f = link.fetch(next, Duration::from_secs(1)) => f,
            _ = stop.changed() => return,
        };
        match fetched {
            Ok(Fetched::Records {
                records,
                next_index,
                ..
            }) => {
                next = next_index;
                if records.is_empty() {
                    continue;
                }
                let b = broker.clone();
                let batches: Vec<(u64, MetadataBatch)> = records;
                if let Err(e) =
                    tokio::task::spawn_blocking(move || b.apply_committed(&batches)).await
                {
                    warn!("applying metadata failed: {e}");
                }
            }
            Ok(Fetched::SnapshotNeeded { .. }) => match link.fetch_snapshot().await {
                Ok(Some(snap)) => {
                    let mut machine = MetadataMachine::new();
                    if let Err(e) = machine.restore(&snap.data) {
                        warn!("unreadable metadata snapshot: {e}");
                        continue;
                    }
                    let b = broker.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        b.apply_snapshot(snap.index, machine.metadata)
                    })
                    .await;
                    // An older snapshot than what is applied changes nothing.
                    next = next.max(broker.applied_metadata_index() + 1);
                }
                Ok(None) => warn!("the metadata log is compacted but no snapshot is offered"),
                Err(e) => warn!("cannot fetch the metadata snapshot: {e}"),
            },
            Err(e) => {
                warn!("cannot fetch the metadata log: {e}");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

/// Heartbeats to the active controller every `every`, until `stop`.
async fn heartbeats(
    broker: Arc<Broker>,
    link: Arc<ClusterLink>,
    epoch: i64,
    registered_at: u64,
    every: Duration,
    mut stop: watch::Receiver<bool>,
    superseded: watch::Sender<Option<String>>,
) {
    let node = broker.node_id();
    let mut fenced = true;
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => return,
        }
        let req = ServiceRequest::Heartbeat {
            node,
            epoch,
            // Not caught up while partitions it should host are not open.
            applied: if broker.metadata_fully_applied() {
                broker.applied_metadata_index()
            } else {
                0
            },
            registered_at,
        };
        let answer = tokio::select! {
            a = call(&link, &req) => a,
            _ = stop.changed() => return,
        };
        match answer {
            Ok(ServiceResponse::Heartbeat { fenced: now }) => {
                if now != fenced {
                    info!(node, epoch, fenced = now, "broker fencing changed");
                }
                fenced = now;
            }
            Ok(ServiceResponse::Refused(why)) => warn!(node, epoch, "heartbeat refused: {why}"),
            Ok(ServiceResponse::Superseded(why)) => {
                tracing::error!(
                    node,
                    epoch,
                    "another process registered this node id in this one's place ({why}); stopping so that two processes never serve the same partitions"
                );
                superseded.send_replace(Some(why));
                return;
            }
            Ok(other) => warn!("unexpected heartbeat answer {other:?}"),
            Err(e) => warn!(node, "heartbeat failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{TopicConfig, TopicKind};
    use crate::metadata_records::PartitionState;
    use crate::metadata_store::TopicRecord;
    use model::{TopicId, TopicName};

    fn file_with(topics: usize) -> Metadata {
        let mut m = Metadata::new("c".into());
        for i in 0..topics {
            let t = TopicRecord {
                name: TopicName::new(&format!("t{i:03}")).unwrap(),
                id: TopicId::random(),
                kind: TopicKind::Partitioned,
                partitions: 2,
                config: TopicConfig::default(),
                placements: vec![PartitionState::single(1); 2],
            };
            m.topics.insert(t.name.clone(), t);
        }
        m
    }

    fn names(b: &[MetadataRecord]) -> Vec<String> {
        b.iter()
            .map(|r| match r {
                MetadataRecord::TopicCreated { topic } => topic.name.to_string(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn an_import_is_cut_into_bounded_batches() {
        let file = file_with(10);
        let one = serde_json::to_vec(&file.topics.values().next().unwrap())
            .unwrap()
            .len();
        // Three topics' worth per batch: 3 + 3 + 3 + 1, every topic once.
        let batches = import_batches(&file, one * 3 + one / 2);
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [3, 3, 3, 1]
        );
        let all: Vec<String> = batches.iter().flat_map(|b| names(b)).collect();
        assert_eq!(all, (0..10).map(|i| format!("t{i:03}")).collect::<Vec<_>>());
        // A topic larger than the limit still goes, alone.
        assert_eq!(import_batches(&file, 1).len(), 10);
    }

    #[test]
    fn a_file_placing_partitions_on_another_node_is_refused() {
        let file = file_with(2);
        assert!(super::super::dir::check_import(&file, 1, std::path::Path::new("/d")).is_ok());
        let e = super::super::dir::check_import(&file, 2, std::path::Path::new("/d")).unwrap_err();
        assert!(e.to_string().contains("--set node.id=1"), "{e}");
    }
}
