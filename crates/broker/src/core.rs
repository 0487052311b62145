//! The protocol-independent broker: topic lifecycle, auto-creation policy,
//! partition lookup, producer ids and background maintenance.

pub use magnetar_metadata::topic_control::{NewTopic, MAX_PARTITIONS_PER_TOPIC};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use magnetar_metadata::tenancy::Tenants;
use magnetar_security::acl::Authorizer;
use magnetar_security::quota::{QuotaManager, QuotaWindow};
use model::{PartitionId, Timestamp, TopicId, TopicName};
use parking_lot::{Mutex, RwLock};
use storage::{LogManager, LogSpec};
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::group::coordinator::GroupCoordinator;
use crate::group::store::{GroupLog, OFFSETS_TOPIC};
use crate::metadata_records::PartitionState;
use crate::metadata_store::{MetadataStore, TopicRecord};
use crate::topic::{into_partitions, partition_specs, topic_from, Partition, Topic};
use crate::{Endpoint, Error};

/// How producer ids are reserved: the limit on disk moves ahead in blocks so
/// ids are never reused across restarts without a write per id.
pub(crate) const PRODUCER_ID_BLOCK: i64 = 1000;

#[derive(Default)]
pub(crate) struct TopicTable {
    pub(crate) by_name: HashMap<TopicName, Arc<Topic>>,
    pub(crate) by_id: HashMap<TopicId, TopicName>,
}

pub(crate) struct ProducerIds {
    pub(crate) next: i64,
    pub(crate) limit: i64,
}

/// A broker's core state.
pub struct Broker {
    pub(crate) config: RwLock<BrokerConfig>,
    // The configuration as started (defaults, file, `--set`): the dynamic
    // layers are applied over it, so removing a dynamic key brings back
    // the start-up value.
    pub(crate) static_config: BrokerConfig,
    endpoint: Endpoint,
    /// Each Kafka listener's advertised endpoint by registration key
    /// (`kafka`, `kafka:SASL_SSL`, ...), as a single node answers them.
    listener_endpoints: RwLock<std::collections::BTreeMap<String, Endpoint>>,
    pub(crate) logs: LogManager,
    pub(crate) topics: RwLock<TopicTable>,
    // Serializes topic creation/deletion/alteration, tenant and namespace
    // changes, and metadata writes.
    pub(crate) store: Mutex<MetadataStore>,
    // The tenants and namespaces last persisted, for readers that must not
    // wait behind a long topic creation holding `store`.
    pub(crate) tenants: RwLock<Arc<Tenants>>,
    pub(crate) producer_ids: Mutex<ProducerIds>,
    cluster_id: String,
    pub(crate) groups: OnceLock<Arc<GroupCoordinator>>,
    // The replicated group log's slots this broker leads.
    pub(crate) group_slots: crate::group_slots::GroupSlots,
    metrics: crate::metrics::Metrics,
    // Its link to the controller quorum (a quorum of one on a standalone
    // node) and the brokers it knows of.
    pub(crate) cluster: crate::cluster::ClusterState,
    // Set with `authorizer.class.name`.
    pub(crate) authorizer: Option<Authorizer>,
    pub(crate) quotas: QuotaManager,
    // How a cluster member's transactions reach other brokers.
    pub(crate) txn_peers: OnceLock<Arc<dyn crate::txn::TxnPeers>>,
    // Replicas, replica fetchers, AlterPartition requests.
    pub(crate) replication: crate::replica::ReplicationHub,
    // `queued.max.request.bytes`, shared by every listener.
    request_budget: crate::limits::RequestBudget,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("endpoint", &self.endpoint)
            .field("cluster_id", &self.cluster_id)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// The broker over its parts, before its group coordinator starts.
    // Several parts, each opened separately as a node joins; a struct for
    // them would only repeat this list.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        static_config: BrokerConfig,
        config: BrokerConfig,
        endpoint: Endpoint,
        logs: LogManager,
        store: MetadataStore,
        table: TopicTable,
        cluster: crate::cluster::ClusterState,
    ) -> Broker {
        let cluster_id = store.data.cluster_id.clone();
        let tenants = RwLock::new(Arc::new(store.data.tenants.clone()));
        let authorizer = static_config
            .authorizer()
            .map(|c| Authorizer::new(c, &store.data.acls));
        let quotas = QuotaManager::new(
            QuotaWindow::from_config(&static_config),
            store.data.client_quotas.clone(),
        );
        let request_budget =
            crate::limits::RequestBudget::new(static_config.queued_max_request_bytes());
        Broker {
            request_budget,
            config: RwLock::new(config),
            static_config,
            endpoint,
            listener_endpoints: RwLock::new(Default::default()),
            logs,
            topics: RwLock::new(table),
            store: Mutex::new(store),
            tenants,
            producer_ids: Mutex::new(ProducerIds { next: 0, limit: 0 }),
            cluster_id,
            groups: OnceLock::new(),
            group_slots: Default::default(),
            metrics: crate::metrics::Metrics::new(),
            cluster,
            authorizer,
            quotas,
            txn_peers: OnceLock::new(),
            replication: Default::default(),
        }
    }

    /// Opens the group coordinator over `offsets` and forgets the state of
    /// topics deleted meanwhile.
    pub(crate) fn start_groups(&self, offsets: Arc<Partition>) -> Result<(), Error> {
        let coordinator_config = crate::group::coordinator_config(&self.config.read());
        let coordinator = GroupCoordinator::open(GroupLog::new(offsets), coordinator_config)?;
        let _ = self.groups.set(Arc::new(coordinator));
        self.forget_state_of_deleted_topics(self.groups());
        // From here on, topic creation and deletion share the CPU with
        // requests from other clients: requests go first.
        self.logs.set_background_bulk_work(true);
        Ok(())
    }

    /// The broker's own group coordinator: Pulsar subscriptions, producer
    /// sequences and schemas; on a standalone node (or a cluster with
    /// placed coordinators) also every group and transaction it
    /// coordinates. Groups of a replicated group log are reached with
    /// [`Broker::coordinator`].
    pub fn groups(&self) -> &GroupCoordinator {
        // Set in `open_cluster` before the broker is handed out.
        self.groups
            .get()
            .expect("group coordinator initialized in Broker::open_cluster")
    }

    /// [`Broker::groups`], shared.
    pub(crate) fn home_groups(&self) -> Arc<GroupCoordinator> {
        self.groups
            .get()
            .expect("group coordinator initialized in Broker::open_cluster")
            .clone()
    }

    /// `queued.max.request.bytes`: the request bytes every listener's
    /// connections (Kafka and Pulsar) may hold at once, together.
    pub fn request_budget(&self) -> &crate::limits::RequestBudget {
        &self.request_budget
    }

    /// The metrics every front end records into (see [`crate::metrics`]).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// Subscriptions (cursors of Pulsar-style consumers), kept by the group
    /// coordinator in its log.
    pub fn subscriptions(&self) -> &crate::subscription::Subscriptions {
        self.groups().subscriptions()
    }

    /// Producer sequence ids (deduplication), kept by the group
    /// coordinator in its log.
    pub fn producer_sequences(&self) -> &crate::sequences::ProducerSequences {
        &self.groups().front_end().sequences
    }

    /// Declared schemas, kept by the group coordinator in its log.
    pub fn schemas(&self) -> &crate::schema::Schemas {
        &self.groups().front_end().schemas
    }

    /// The partition of the internal offsets topic the metadata holds.
    pub(crate) fn offsets_partition(&self) -> Result<Arc<Partition>, Error> {
        let topic = self
            .topic(OFFSETS_TOPIC)
            .ok_or_else(|| Error::UnknownTopic(OFFSETS_TOPIC.to_string()))?;
        topic.partition(PartitionId(0)).cloned()
    }

    /// The one log directory (the data directory), absolute.
    pub fn log_dir(&self) -> std::path::PathBuf {
        let dir = self.logs.data_dir();
        std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
    }

    /// The log directory's file system: total and usable bytes.
    pub fn log_dir_space(&self) -> Result<(u64, u64), Error> {
        self.logs.disk_space().map_err(Error::DataDir)
    }

    /// A snapshot of the current configuration.
    pub fn config(&self) -> BrokerConfig {
        self.config.read().clone()
    }

    /// The endpoint advertised to clients.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Records the advertised endpoint of each of this node's Kafka
    /// listeners, by registration key, once they are bound.
    pub fn set_listener_endpoints(&self, endpoints: std::collections::BTreeMap<String, Endpoint>) {
        *self.listener_endpoints.write() = endpoints;
    }

    /// The advertised endpoint of this node's listener `key` (its primary
    /// endpoint when the listener is not known).
    pub fn listener_endpoint(&self, key: &str) -> Endpoint {
        self.listener_endpoints
            .read()
            .get(key)
            .cloned()
            .unwrap_or_else(|| self.endpoint.clone())
    }

    /// This broker's node id.
    pub fn node_id(&self) -> i32 {
        self.config.read().node_id()
    }

    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// A topic by name.
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().by_name.get(name).cloned()
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: TopicId) -> Option<Arc<Topic>> {
        let t = self.topics.read();
        t.by_id.get(&id).and_then(|n| t.by_name.get(n)).cloned()
    }

    /// A topic named on the wire, never created: the name must be valid
    /// ([`Error::InvalidTopic`]) and the topic exist ([`Error::UnknownTopic`]).
    pub fn resolve_topic_name(&self, name: &str) -> Result<Arc<Topic>, Error> {
        let name = TopicName::new(name)?;
        self.topic(name.as_str())
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))
    }

    /// A topic by id; [`Error::UnknownTopicId`] if no live topic has it
    /// (never existed, or deleted even if recreated under the same name).
    pub fn resolve_topic_id(&self, id: TopicId) -> Result<Arc<Topic>, Error> {
        self.topic_by_id(id).ok_or(Error::UnknownTopicId(id))
    }

    /// Every topic, sorted by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let mut v: Vec<_> = self.topics.read().by_name.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// A partition by topic name and index.
    pub fn partition(&self, topic: &str, p: PartitionId) -> Result<Arc<Partition>, Error> {
        let t = self
            .topic(topic)
            .ok_or_else(|| Error::UnknownTopic(topic.to_string()))?;
        t.partition(p).cloned()
    }

    /// Partition directories staged for deletion and not yet removed.
    pub fn staged_deletions(&self) -> Vec<std::path::PathBuf> {
        self.logs.staged()
    }

    /// Retention, time-based flushing over every partition, and the removal
    /// of staged partitions older than `log.dir.delete.delay.ms`.
    pub fn run_maintenance(&self, now: Timestamp, retention: bool) {
        let delay = self.config.read().int_value("log.dir.delete.delay.ms");
        self.logs
            .purge_staged(std::time::Duration::from_millis(delay.max(0) as u64));
        if let Err(e) = self.logs.flush_due(now) {
            warn!("periodic flush failed: {e}");
        }
        // Files of deleted segments whose file.delete.delay.ms has passed.
        self.logs.delete_expired_files();
        if retention {
            match self.logs.run_retention(now) {
                Ok(0) => {}
                Ok(n) => info!(segments = n, "retention deleted segments"),
                Err(e) => warn!("retention failed: {e}"),
            }
        }
    }

    /// Flushes everything (subscription cursors and producer sequences
    /// first) and marks the shutdown clean.
    pub fn shutdown(&self) -> Result<(), Error> {
        if let Some(groups) = self.groups.get() {
            if let Err(e) = groups.subscriptions().flush_cursors() {
                warn!("could not persist subscription cursors: {e}");
            }
            let sequences = &groups.front_end().sequences;
            if let Err(e) = sequences.flush(crate::now_ms().0, true) {
                warn!("could not persist producer sequences: {e}");
            }
        }
        self.logs.shutdown().map_err(|source| Error::Storage {
            partition: "all".into(),
            source,
        })
    }
}

/// KIP-516 full-state reconciliation: `m` is everything this broker holds
/// (`is_every_partition`), so any other directory on disk, or one of
/// another topic id, is stale: staged under deleting/ and removed
/// log.dir.delete.delay.ms later. Topics in `local_only` are node-local
/// logs outside the metadata and are left alone.
pub(crate) fn reconcile_disk(
    logs: &LogManager,
    m: &crate::metadata_store::Metadata,
    node: i32,
    local_only: &[&str],
) -> Result<(), Error> {
    let on_disk: Vec<_> = logs
        .scan()
        .map_err(Error::DataDir)?
        .into_iter()
        .filter(|(tp, _)| !local_only.contains(&tp.topic.as_str()))
        .collect();
    let assigned = crate::metadata_delta::hosted_by(m, node);
    for (tp, why) in crate::reconcile::stale_partitions(&on_disk, &assigned) {
        match logs.stage_for_deletion(&tp) {
            Ok(to) => {
                let to = to.map(|p| p.display().to_string()).unwrap_or_default();
                warn!(partition = %tp, reason = ?why, staged = %to, "staging a stale partition directory for deletion (KIP-516)");
            }
            Err(e) => {
                warn!(partition = %tp, reason = ?why, "could not stage a stale partition: {e}")
            }
        }
    }
    Ok(())
}

/// Opens the logs of every partition `m` gives `node` a replica of and
/// builds the topic table (every topic, with its hosted partitions).
pub(crate) fn open_hosted(
    logs: &LogManager,
    m: &crate::metadata_store::Metadata,
    config: &BrokerConfig,
    node: i32,
) -> Result<TopicTable, Error> {
    let started = std::time::Instant::now();
    let recs: Vec<&TopicRecord> = m.topics.values().collect();
    let hosted = |rec: &TopicRecord| -> Vec<i32> {
        (0..rec.partitions)
            .filter(|p| rec.placements[*p as usize].has_replica(node))
            .collect()
    };
    let mut specs: Vec<LogSpec> = Vec::new();
    let mut states: Vec<PartitionState> = Vec::new();
    let mut counts = Vec::new();
    for rec in &recs {
        let mine = hosted(rec);
        counts.push(mine.len());
        for p in mine {
            specs.extend(partition_specs(rec, &m.tenants, config, p..p + 1));
            states.push(rec.placements[p as usize].clone());
        }
    }
    let mut opened = into_partitions(logs.open_logs(specs.clone()), specs, states)?.into_iter();
    let mut table = TopicTable::default();
    for (rec, n) in recs.into_iter().zip(counts) {
        let partitions = opened.by_ref().take(n).collect();
        table.by_id.insert(rec.id, rec.name.clone());
        table
            .by_name
            .insert(rec.name.clone(), Arc::new(topic_from(rec, partitions)));
    }
    info!(
        partitions = logs.logs().len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "partitions opened"
    );
    Ok(table)
}

/// Sets the open-file budget and opens the data directory's logs manager.
pub(crate) fn prepare_data_dir(config: &BrokerConfig) -> Result<LogManager, Error> {
    if let Some(limit) = config.open_file_limit {
        // Sockets get max.connections (at most half the limit), segment
        // files the rest, less a reserve for everything else.
        let limit = limit as usize;
        let sockets = config.max_connections().min(limit / 2);
        let budget = limit.saturating_sub(sockets).saturating_sub(256).max(64);
        storage::set_open_file_budget(budget);
        info!(
            open_file_limit = limit,
            segment_file_budget = budget,
            "open-file budget"
        );
    }
    std::fs::create_dir_all(&config.data_dir).map_err(|source| Error::MetadataIo {
        path: config.data_dir.clone(),
        source,
    })?;
    LogManager::open(&config.data_dir).map_err(Error::DataDir)
}
