//! The active controller's broker service: registrations and heartbeats
//! (Kafka's BrokerRegistration and BrokerHeartbeat), decided by the pure
//! [`Registry`] and committed before they are answered, and the fencing of
//! brokers whose heartbeats stopped; each fencing or unfencing carries the
//! leader elections and ISR changes of replicated partitions it calls for
//! (see `magnetar_metadata::leadership`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller::{ControllerHandle, Service, ServiceFuture};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::metadata_machine::{MetadataBatch, MetadataMachine};
use crate::metadata_records::{MetadataRecord, NodeId, PartitionState};
use magnetar_replication::{AlterPartitionRequest, PartitionEpoch};
use model::LeaderEpoch;

use super::alter_partition::AlterPartitionRefusal;
use crate::registry::{DirectoryClaim, Registry, RegistryError};
use magnetar_metadata::leadership::with_leadership;

/// A request of a broker to the active controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ServiceRequest {
    /// A broker process starts.
    Register {
        /// Its node id.
        node: NodeId,
        /// A random id of this process.
        incarnation: String,
        /// The id of its data directory (`directory.id`).
        #[serde(default)]
        directory: String,
        /// The identity of the directory lock it holds (empty if unknown).
        #[serde(default)]
        lock: String,
        /// Listener name → advertised `host:port`.
        endpoints: BTreeMap<String, String>,
    },
    /// A broker is alive and has applied the metadata up to `applied`.
    Heartbeat {
        /// Its node id.
        node: NodeId,
        /// The epoch its registration got.
        epoch: i64,
        /// The last metadata index it applied.
        applied: u64,
        /// The index its registration committed at: once it applied that,
        /// it has caught up and may be unfenced.
        registered_at: u64,
    },
    /// A broker shuts down cleanly (Kafka's controlled shutdown): fenced at
    /// once, its session over.
    Shutdown {
        /// Its node id.
        node: NodeId,
        /// The epoch its registration got.
        epoch: i64,
    },
    /// The state of the controller quorum (Kafka's DescribeQuorum), as
    /// the leader knows it.
    DescribeQuorum,
    /// A partition's leader asks for a new ISR (Kafka's AlterPartition).
    AlterPartition {
        /// The leader's node id.
        node: NodeId,
        /// Its registration epoch.
        epoch: i64,
        /// The topic.
        topic_id: model::TopicId,
        /// The partition.
        partition: i32,
        /// The leader epoch it leads in.
        leader_epoch: i32,
        /// The partition epoch its view is built on.
        partition_epoch: i32,
        /// The ISR it asks for.
        new_isr: Vec<NodeId>,
    },
}

/// How far one node has come in the metadata log (Kafka's
/// `ReplicaState`); `-1` where the leader does not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaProgress {
    /// The node.
    pub node: NodeId,
    /// The end of its metadata log (a voter's matched index; an observer's
    /// last applied index, as its heartbeat said).
    pub log_end_offset: i64,
    /// When (epoch milliseconds) the leader last heard from it.
    pub last_fetch_ms: i64,
    /// When it was last known to be caught up with the leader.
    pub last_caught_up_ms: i64,
}

/// The controller quorum as its leader describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    /// The leader's node id.
    pub leader: NodeId,
    /// Its term (Kafka's leader epoch).
    pub leader_epoch: i64,
    /// The last index known committed (applied on the leader).
    pub high_watermark: i64,
    /// The voters.
    pub voters: Vec<ReplicaProgress>,
    /// Each voter's controller address, `host:port` (empty for a voter
    /// inside its broker's process, which has none).
    pub voter_addrs: Vec<(NodeId, String)>,
    /// Registered brokers that do not vote.
    pub observers: Vec<ReplicaProgress>,
}

/// The controller's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ServiceResponse {
    /// Registered: the broker's epoch and the index of the registration.
    Registered {
        /// The broker epoch.
        epoch: i64,
        /// The log index the registration committed at.
        index: u64,
    },
    /// A heartbeat's answer: whether the broker is fenced now.
    Heartbeat {
        /// Fenced or not.
        fenced: bool,
    },
    /// Refused, with why (a duplicate node id, a stale epoch).
    Refused(String),
    /// Not yet: a registration from the data directory of a registration
    /// that still heartbeated moments ago; try again shortly.
    Wait(String),
    /// The heartbeating process was replaced by a later registration of
    /// its node id: it must stop serving.
    Superseded(String),
    /// The quorum's state.
    Quorum(QuorumDescription),
    /// An AlterPartition committed: the partition's state now.
    PartitionChanged {
        /// The state.
        state: PartitionState,
    },
    /// An AlterPartition refused.
    AlterPartitionRefused(AlterPartitionRefusal),
}

/// What to answer once a decision's records are committed.
enum Pending {
    Registered {
        node: NodeId,
        epoch: i64,
    },
    Heartbeat {
        node: NodeId,
        epoch: i64,
        fenced: bool,
    },
    Shutdown {
        node: NodeId,
        epoch: i64,
    },
    AlterPartition {
        state: PartitionState,
    },
}

struct State {
    registry: Registry,
    /// Each broker's last reported applied index and when (epoch ms).
    progress: BTreeMap<NodeId, (u64, i64)>,
    /// The term this controller activated the registry in.
    active_term: Option<u64>,
}

/// The service each controller node installs; only the leader's answers.
pub struct BrokerService {
    controller: ControllerHandle<MetadataMachine>,
    state: Mutex<State>,
    started: Instant,
    session_timeout: Duration,
    /// The broker in this controller's own process and the coordinator
    /// slots to place on it, when nothing else can reach the controller
    /// (see [`BrokerService::in_process`]).
    in_process: Option<(NodeId, usize)>,
}

impl BrokerService {
    /// A service over `controller`, fencing brokers `session_timeout`
    /// after their last heartbeat; brokers heartbeat every
    /// `heartbeat_interval`.
    pub fn new(
        controller: ControllerHandle<MetadataMachine>,
        session_timeout: Duration,
        heartbeat_interval: Duration,
    ) -> Arc<BrokerService> {
        let registry = Registry::new(
            session_timeout.as_millis() as u64,
            heartbeat_interval.as_millis() as u64,
        );
        Self::build(controller, registry, session_timeout, None)
    }

    /// A service for a controller without a network, whose only broker
    /// is `node` in its own process (a quorum of one: `magnetar
    /// standalone`). That broker never loses its session and registers at
    /// once after a restart ([`Registry::in_process`]); its first
    /// registration also places the `slots` coordinator slots on it and
    /// publishes its group log as the internal topic `__consumer_offsets`,
    /// as a single Kafka broker shows it (with several brokers each keeps
    /// its own).
    pub fn in_process(
        controller: ControllerHandle<MetadataMachine>,
        node: NodeId,
        slots: usize,
        heartbeat_interval: Duration,
    ) -> Arc<BrokerService> {
        let session = Duration::from_millis(crate::registry::DEFAULT_SESSION_TIMEOUT_MS);
        let registry = Registry::new(
            session.as_millis() as u64,
            heartbeat_interval.as_millis() as u64,
        )
        .in_process(node);
        Self::build(controller, registry, session, Some((node, slots.max(1))))
    }

    fn build(
        controller: ControllerHandle<MetadataMachine>,
        registry: Registry,
        session_timeout: Duration,
        in_process: Option<(NodeId, usize)>,
    ) -> Arc<BrokerService> {
        Arc::new(BrokerService {
            controller,
            state: Mutex::new(State {
                registry,
                progress: BTreeMap::new(),
                active_term: None,
            }),
            started: Instant::now(),
            session_timeout,
            in_process,
        })
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Makes the registry current for this leadership term: a newly active
    /// controller gives every broker a full session from now.
    fn activate(&self, state: &mut State) {
        let term = self.controller.status().term;
        if state.active_term != Some(term) {
            let now = self.now_ms();
            self.controller
                .read(|sm| state.registry.activate(&sm.metadata, now));
            // Progress heard by an earlier leadership is not this one's.
            state.progress.clear();
            state.active_term = Some(term);
        }
    }

    async fn commit(&self, records: Vec<MetadataRecord>) -> Result<u64, String> {
        let s = self
            .controller
            .submit(MetadataBatch(records))
            .await
            .map_err(|e| e.to_string())?;
        s.response.map(|()| s.index)
    }

    /// Decides `req` under the registry lock: the refusal to answer at
    /// once, or the records to commit and what to answer once they are.
    fn decide(
        &self,
        req: ServiceRequest,
    ) -> Result<(Vec<MetadataRecord>, Pending), ServiceResponse> {
        let mut state = self.state.lock();
        self.activate(&mut state);
        let now = self.now_ms();
        let refused = |e: RegistryError| match e {
            RegistryError::PredecessorAlive(_) => ServiceResponse::Wait(e.to_string()),
            e if e.superseded() => ServiceResponse::Superseded(e.to_string()),
            e => ServiceResponse::Refused(e.to_string()),
        };
        if matches!(req, ServiceRequest::DescribeQuorum) {
            return Err(self.describe_quorum(&state));
        }
        let State {
            registry, progress, ..
        } = &mut *state;
        // Decided on the applied metadata in place: cloning it for every
        // heartbeat would cost in proportion to the partitions.
        self.controller.read(|sm| {
            let m = &sm.metadata;
            match req {
                ServiceRequest::Register {
                    node,
                    incarnation,
                    directory,
                    lock,
                    endpoints,
                } => {
                    let claim = DirectoryClaim {
                        id: &directory,
                        lock: &lock,
                    };
                    let rec = registry
                        .register(m, node, &incarnation, claim, endpoints, now)
                        .map_err(refused)?;
                    let MetadataRecord::BrokerRegistered { registration, .. } = &rec else {
                        unreachable!("register answers BrokerRegistered")
                    };
                    let epoch = registration.epoch;
                    let mut records = Vec::new();
                    if m.cluster_id.is_empty() {
                        records.push(MetadataRecord::ClusterInitialized {
                            cluster_id: crate::metadata_store::new_cluster_id(),
                        });
                    }
                    records.push(rec);
                    if let Some((own, slots)) = self.in_process.filter(|(n, _)| *n == node) {
                        records.extend(in_process_bootstrap(m, own, slots));
                    }
                    // A new registration fences the node's previous one.
                    let records = with_leadership(m, records);
                    Ok((records, Pending::Registered { node, epoch }))
                }
                ServiceRequest::Heartbeat {
                    node,
                    epoch,
                    applied,
                    registered_at,
                } => {
                    let ans = registry
                        .heartbeat(m, node, epoch, applied >= registered_at, now)
                        .map_err(refused)?;
                    // Only a valid registration's heartbeat reports progress.
                    progress.insert(node, (applied, wall_ms()));
                    Ok((
                        with_leadership(m, ans.records),
                        Pending::Heartbeat {
                            node,
                            epoch,
                            fenced: ans.fenced,
                        },
                    ))
                }
                ServiceRequest::Shutdown { node, epoch } => {
                    let records = registry.shutdown(m, node, epoch).map_err(refused)?;
                    let records = with_leadership(m, records);
                    progress.remove(&node);
                    Ok((records, Pending::Shutdown { node, epoch }))
                }
                ServiceRequest::AlterPartition {
                    node,
                    epoch,
                    topic_id,
                    partition,
                    leader_epoch,
                    partition_epoch,
                    new_isr,
                } => {
                    let request = AlterPartitionRequest {
                        broker: model::NodeId(node),
                        leader_epoch: LeaderEpoch(leader_epoch),
                        partition_epoch: PartitionEpoch(partition_epoch),
                        new_isr: new_isr.into_iter().map(model::NodeId).collect(),
                    };
                    let (record, state) = super::alter_partition::decide(
                        m, node, epoch, topic_id, partition, &request,
                    )
                    .map_err(ServiceResponse::AlterPartitionRefused)?;
                    Ok((vec![record], Pending::AlterPartition { state }))
                }
                ServiceRequest::DescribeQuorum => unreachable!("answered above"),
            }
        })
    }

    /// The quorum as this leader sees it: voters from Raft's replication
    /// progress, observers from their heartbeats.
    fn describe_quorum(&self, state: &State) -> ServiceResponse {
        let status = self.controller.status();
        let Some(replication) = status.replication.clone() else {
            return ServiceResponse::Refused("this controller is not the leader".into());
        };
        let now = wall_ms();
        let high_watermark = status.applied_index.map_or(-1, |i| i as i64);
        let heard = |node: NodeId| state.progress.get(&node).map_or(-1, |(_, at)| *at);
        let voters = status
            .voters
            .iter()
            .map(|&(id, _)| {
                let end = if id == status.id {
                    status.last_log_index
                } else {
                    replication.get(&id).copied().flatten()
                };
                let end = end.map_or(-1, |i| i as i64);
                let node = id as NodeId;
                let (fetch, caught_up) = if id == status.id {
                    (now, now)
                } else {
                    let at = heard(node);
                    (at, if end >= high_watermark { at } else { -1 })
                };
                ReplicaProgress {
                    node,
                    log_end_offset: end,
                    last_fetch_ms: fetch,
                    last_caught_up_ms: caught_up,
                }
            })
            .collect();
        // Observers are the brokers that follow the log now: registered,
        // not voting, and heard from within a session.
        let session = self.session_timeout.as_millis() as i64;
        let observers = self.controller.read(|sm| {
            sm.metadata
                .brokers
                .iter()
                .filter(|(n, b)| {
                    !b.shut_down
                        && !status.voters.iter().any(|(v, _)| *v == **n as u64)
                        && state
                            .progress
                            .get(n)
                            .is_some_and(|(_, at)| now - at < session)
                })
                .map(|(&node, _)| {
                    let (end, at) = state
                        .progress
                        .get(&node)
                        .map_or((-1, -1), |(a, at)| (*a as i64, *at));
                    ReplicaProgress {
                        node,
                        log_end_offset: end,
                        last_fetch_ms: at,
                        last_caught_up_ms: if end >= 0 && end >= high_watermark {
                            at
                        } else {
                            -1
                        },
                    }
                })
                .collect()
        });
        ServiceResponse::Quorum(QuorumDescription {
            leader: status.id as NodeId,
            leader_epoch: status.term as i64,
            high_watermark,
            voters,
            voter_addrs: status
                .voters
                .iter()
                .map(|(id, a)| {
                    // A voter inside its broker's process has no address.
                    let a = if a == controller::transport::IN_PROCESS_ADDR {
                        String::new()
                    } else {
                        a.clone()
                    };
                    (*id as NodeId, a)
                })
                .collect(),
            observers,
        })
    }

    // Decided under the lock, committed after it is released: a commit
    // that stalls (no quorum) must not hold back other brokers'
    // heartbeats until their sessions expire.
    async fn answer(&self, req: ServiceRequest) -> Result<ServiceResponse, String> {
        let (records, pending) = match self.decide(req) {
            Ok(d) => d,
            Err(answer) => return Ok(answer),
        };
        let index = if records.is_empty() {
            0
        } else {
            self.commit(records).await?
        };
        Ok(match pending {
            Pending::Registered { node, epoch } => {
                info!(node, epoch, "broker registered");
                ServiceResponse::Registered { epoch, index }
            }
            Pending::Heartbeat {
                node,
                epoch,
                fenced,
            } => {
                if index > 0 {
                    info!(node, epoch, "broker unfenced");
                }
                ServiceResponse::Heartbeat { fenced }
            }
            Pending::Shutdown { node, epoch } => {
                info!(node, epoch, "broker shut down cleanly: fenced");
                ServiceResponse::Heartbeat { fenced: true }
            }
            Pending::AlterPartition { state } => ServiceResponse::PartitionChanged { state },
        })
    }

    /// Fences the brokers whose session expired, when this node leads.
    pub async fn tick(&self) {
        if self.controller.status().state != controller::ServerState::Leader {
            return;
        }
        let fence = {
            let mut state = self.state.lock();
            self.activate(&mut state);
            let now = self.now_ms();
            self.controller
                .read(|sm| with_leadership(&sm.metadata, state.registry.tick(&sm.metadata, now)))
        };
        if fence.is_empty() {
            return;
        }
        let nodes: Vec<String> = fence
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::BrokerFencing { node, .. } => Some(node.to_string()),
                _ => None,
            })
            .collect();
        match self.commit(fence).await {
            Ok(_) => warn!(
                brokers = nodes.join(","),
                "fenced brokers whose heartbeats stopped"
            ),
            Err(e) => warn!("could not fence brokers: {e}"),
        }
    }
}

/// What an in-process broker's registration adds while missing: the
/// coordinator slots, all its own, and its group log as a topic.
fn in_process_bootstrap(
    m: &crate::metadata_store::Metadata,
    node: NodeId,
    slots: usize,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    if m.coordinators.is_empty() {
        records.push(MetadataRecord::CoordinatorsPlaced {
            nodes: vec![node; slots],
        });
    }
    let offsets = crate::group::store::OFFSETS_TOPIC;
    if !m.topics.keys().any(|t| t.as_str() == offsets) {
        records.push(MetadataRecord::TopicCreated {
            topic: crate::group::store::offsets_topic_record(node, model::TopicId::random()),
        });
    }
    records
}

/// The wall clock in epoch milliseconds (what Kafka reports timestamps in).
fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Service for BrokerService {
    fn call(&self, request: Vec<u8>) -> ServiceFuture<'_> {
        Box::pin(async move {
            let req: ServiceRequest = serde_json::from_slice(&request)
                .map_err(|e| format!("bad broker service request: {e}"))?;
            let resp = self.answer(req).await?;
            serde_json::to_vec(&resp).map_err(|e| e.to_string())
        })
    }
}

/// Runs [`BrokerService::tick`] every `every` until `stop` turns true.
pub async fn run_fencing(
    service: Arc<BrokerService>,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => return,
        }
        tokio::select! {
            _ = service.tick() => {}
            _ = stop.changed() => return,
        }
    }
}
