//! The protocol-independent broker: topic lifecycle, auto-creation policy,
//! partition lookup, producer ids and background maintenance.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use model::pulsar_name::Namespace;
use model::{PartitionId, ProducerId, Timestamp, TopicId, TopicName, TopicPartition};
use parking_lot::{Mutex, RwLock};
use storage::{LogManager, LogSpec};
use tracing::{info, warn};

use crate::config::{BrokerConfig, ConfigSource, TopicConfig, TopicKind};
use crate::group::coordinator::GroupCoordinator;
use crate::group::store::{GroupLog, OFFSETS_TOPIC};
use crate::metadata_store::{MetadataStore, TopicRecord};
use crate::tenancy::{self, Tenants};
use crate::topic::{Partition, Topic};
use crate::Error;

/// Most partitions one topic may have. Like Kafka's cap on the records one
/// admin operation may create, it keeps a single request from exhausting
/// memory or file descriptors.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

/// How producer ids are reserved: the limit on disk moves ahead in blocks so
/// ids are never reused across restarts without a write per id.
const PRODUCER_ID_BLOCK: i64 = 1000;

/// The address clients are told to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// A request to create a topic.
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Name (validated).
    pub name: TopicName,
    /// Partition count; `None` = `num.partitions`.
    pub partitions: Option<i32>,
    /// Replication factor; `None` = the default (1 on a single node).
    pub replication_factor: Option<i16>,
    /// Partitioned or not.
    pub kind: TopicKind,
    /// Overrides.
    pub config: TopicConfig,
}

#[derive(Default)]
struct TopicTable {
    by_name: HashMap<TopicName, Arc<Topic>>,
    by_id: HashMap<TopicId, TopicName>,
}

struct ProducerIds {
    next: i64,
    limit: i64,
}

/// A single-node broker's core state.
pub struct Broker {
    config: RwLock<BrokerConfig>,
    endpoint: Endpoint,
    logs: LogManager,
    topics: RwLock<TopicTable>,
    // Serializes topic creation/deletion/alteration, tenant and namespace
    // changes, and metadata writes.
    pub(crate) store: Mutex<MetadataStore>,
    // The tenants and namespaces last persisted, for readers that must not
    // wait behind a long topic creation holding `store`.
    pub(crate) tenants: RwLock<Arc<Tenants>>,
    producer_ids: Mutex<ProducerIds>,
    cluster_id: String,
    groups: OnceLock<GroupCoordinator>,
    metrics: crate::metrics::Metrics,
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
    /// Opens the data directory: loads metadata, opens (and if needed
    /// recovers) every partition's log, and removes partition directories
    /// that belong to no live topic (deleted topics, or an older topic with
    /// the same name).
    pub fn open(mut config: BrokerConfig, endpoint: Endpoint) -> Result<Arc<Broker>, Error> {
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
        let logs = LogManager::open(&config.data_dir).map_err(Error::DataDir)?;
        let store = MetadataStore::open(&config.data_dir)?;
        for (k, v) in &store.data.broker_configs {
            if let Err(e) = config.set(k, v, ConfigSource::Dynamic) {
                warn!("ignoring stored dynamic config: {e}");
            }
        }
        let on_disk = logs.scan().map_err(Error::DataDir)?;
        for (tp, id) in on_disk {
            let live = store
                .data
                .topics
                .get(&tp.topic)
                .filter(|t| Some(t.id) == id && tp.partition.0 < t.partitions);
            if live.is_none() {
                warn!(partition = %tp, topic_id = ?id, "removing partition directory of a deleted or replaced topic");
                if let Err(e) = logs.delete_log(&tp) {
                    warn!(partition = %tp, "could not remove stale partition: {e}");
                }
            }
        }
        let mut table = TopicTable::default();
        let started = std::time::Instant::now();
        let recs: Vec<&TopicRecord> = store.data.topics.values().collect();
        let tenants = &store.data.tenants;
        let specs: Vec<LogSpec> = recs
            .iter()
            .flat_map(|rec| partition_specs(rec, tenants, &config, 0..rec.partitions))
            .collect();
        let mut opened = into_partitions(logs.open_logs(specs.clone()), specs)?.into_iter();
        for rec in recs {
            let partitions = opened.by_ref().take(rec.partitions as usize).collect();
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
        let limit = store.data.producer_id_limit;
        let cluster_id = store.data.cluster_id.clone();
        info!(topics = table.by_name.len(), %cluster_id, "broker state loaded");
        let coordinator_config = crate::group::coordinator_config(&config);
        let tenants = RwLock::new(Arc::new(store.data.tenants.clone()));
        let broker = Broker {
            config: RwLock::new(config),
            endpoint,
            logs,
            topics: RwLock::new(table),
            store: Mutex::new(store),
            tenants,
            producer_ids: Mutex::new(ProducerIds { next: limit, limit }),
            cluster_id,
            groups: OnceLock::new(),
            metrics: crate::metrics::Metrics::new(),
        };
        let offsets = broker.offsets_partition()?;
        let coordinator = GroupCoordinator::open(GroupLog::new(offsets), coordinator_config)?;
        let _ = broker.groups.set(coordinator);
        broker.forget_state_of_deleted_topics();
        // From here on, topic creation and deletion share the CPU with
        // requests from other clients: requests go first.
        broker.logs.set_background_bulk_work(true);
        Ok(Arc::new(broker))
    }

    /// The group coordinator.
    pub fn groups(&self) -> &GroupCoordinator {
        // Set in `open` before the broker is handed out.
        self.groups
            .get()
            .expect("group coordinator initialized in Broker::open")
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

    /// The internal offsets topic's partition, created on first start.
    fn offsets_partition(&self) -> Result<Arc<Partition>, Error> {
        let name = TopicName::new(OFFSETS_TOPIC)?;
        let topic = match self.topic(OFFSETS_TOPIC) {
            Some(t) => t,
            None => {
                // Never expire by time or size: the coordinator compacts it.
                let mut config = TopicConfig::default();
                config.set("retention.ms", "-1")?;
                config.set("retention.bytes", "-1")?;
                config.set("segment.bytes", "16777216")?;
                config.set("cleanup.policy", "compact")?;
                self.create_topic(
                    NewTopic {
                        name,
                        partitions: Some(1),
                        replication_factor: None,
                        kind: TopicKind::Partitioned,
                        config,
                    },
                    false,
                )?
            }
        };
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

    /// Partition-metadata lookup: the topic if it exists; otherwise it is
    /// created only when the caller asked (`allow_auto_create`) *and* the
    /// broker allows it (`auto.create.topics.enable`), following
    /// `auto.create.topics.type` and `num.partitions`. Anything else is
    /// [`Error::UnknownTopic`]; nothing is ever reported as "0 partitions".
    pub fn lookup_topic(
        &self,
        name: &TopicName,
        allow_auto_create: bool,
    ) -> Result<Arc<Topic>, Error> {
        self.lookup_topic_in(name, allow_auto_create, None)
    }

    /// [`Broker::lookup_topic`] for a topic a client named in `namespace`
    /// (Pulsar): a topic it creates is created only while `name` still
    /// belongs to that namespace (see [`Broker::create_topic_in`]).
    pub fn lookup_topic_in(
        &self,
        name: &TopicName,
        allow_auto_create: bool,
        namespace: Option<&Namespace>,
    ) -> Result<Arc<Topic>, Error> {
        if let Some(t) = self.topic(name.as_str()) {
            return Ok(t);
        }
        let (enabled, kind) = {
            let c = self.config.read();
            (c.auto_create_topics_enable(), c.auto_create_topics_type())
        };
        if !(allow_auto_create && enabled) {
            return Err(Error::UnknownTopic(name.to_string()));
        }
        let req = NewTopic {
            name: name.clone(),
            partitions: match kind {
                TopicKind::Partitioned => None,
                TopicKind::NonPartitioned => Some(1),
            },
            replication_factor: None,
            kind,
            config: TopicConfig::default(),
        };
        match self.create_topic_checked(req, false, namespace) {
            Ok(t) => {
                info!(topic = %name, kind = kind.as_str(), partitions = t.partitions.len(), "auto-created topic");
                Ok(t)
            }
            // Lost a race with another creator: the topic exists now.
            Err(Error::TopicExists(_)) => self
                .topic(name.as_str())
                .ok_or_else(|| Error::UnknownTopic(name.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Creates a topic. The partition directories are made first and the
    /// metadata write is the commit point; on start-up, directories without
    /// a committed topic are removed.
    pub fn create_topic(&self, req: NewTopic, validate_only: bool) -> Result<Arc<Topic>, Error> {
        self.create_topic_checked(req, validate_only, None)
    }

    /// Creates a topic a client named in Pulsar namespace `namespace`: as
    /// [`Broker::create_topic`], but checked under the metadata lock that
    /// the Kafka name still belongs to that namespace (it exists, and for
    /// `public/default`, the name is not one of another namespace's), so a
    /// namespace deleted meanwhile never gets a topic.
    pub fn create_topic_in(
        &self,
        namespace: &Namespace,
        req: NewTopic,
    ) -> Result<Arc<Topic>, Error> {
        self.create_topic_checked(req, false, Some(namespace))
    }

    fn create_topic_checked(
        &self,
        req: NewTopic,
        validate_only: bool,
        namespace: Option<&Namespace>,
    ) -> Result<Arc<Topic>, Error> {
        let mut store = self.store.lock();
        if let Some(ns) = namespace {
            tenancy::check_topic_namespace(&store.data.tenants, &req.name, ns)?;
        }
        if self.topic(req.name.as_str()).is_some() {
            return Err(Error::TopicExists(req.name.to_string()));
        }
        let config = self.config.read().clone();
        let partitions = match req.partitions {
            None => config.num_partitions(),
            Some(n) if (1..=MAX_PARTITIONS_PER_TOPIC).contains(&n) => n,
            Some(n) => {
                return Err(Error::InvalidPartitions(format!(
                    "{n} partitions requested; must be 1 to {MAX_PARTITIONS_PER_TOPIC}"
                )))
            }
        };
        if req.kind == TopicKind::NonPartitioned && partitions != 1 {
            return Err(Error::InvalidPartitions(
                "a non-partitioned topic has exactly one partition".into(),
            ));
        }
        match req.replication_factor {
            None | Some(-1) | Some(1) => {}
            Some(n) => {
                return Err(Error::InvalidReplicationFactor(format!(
                    "replication factor {n} is larger than the 1 available broker"
                )))
            }
        }
        tenancy::validate_topic_config(&store.data.tenants, &config, &req.name, &req.config)?;
        if validate_only {
            return Ok(Arc::new(Topic {
                name: req.name,
                id: TopicId::ZERO,
                kind: req.kind,
                config: req.config,
                partitions: Vec::new(),
            }));
        }
        let rec = TopicRecord {
            name: req.name.clone(),
            id: TopicId::random(),
            kind: req.kind,
            partitions,
            config: req.config,
        };
        let topic = match open_topic(&self.logs, &store.data.tenants, &config, &rec) {
            Ok(t) => t,
            Err(e) => {
                self.remove_logs(&rec.name, 0..partitions);
                return Err(e);
            }
        };
        if let Err(e) = store.update(|m| {
            m.topics.insert(rec.name.clone(), rec.clone());
        }) {
            self.remove_logs(&rec.name, 0..partitions);
            return Err(e);
        }
        let topic = Arc::new(topic);
        let mut t = self.topics.write();
        t.by_id.insert(rec.id, rec.name.clone());
        t.by_name.insert(rec.name.clone(), topic.clone());
        Ok(topic)
    }

    /// Deletes a topic: the metadata write commits it, then its logs are
    /// staged for removal. Its id is never reused.
    pub fn delete_topic(&self, name: &str) -> Result<TopicId, Error> {
        self.delete_topic_checked(name, None)
    }

    /// Deletes a topic as the Pulsar admin API does: without `force`, a
    /// topic with attached producers or consumers (of any front end that
    /// registers them) is refused with [`Error::TopicBusy`].
    pub fn delete_topic_unless_busy(&self, name: &str, force: bool) -> Result<TopicId, Error> {
        let topic = self
            .topic(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        if !force && self.topic_in_use(&topic) {
            return Err(Error::TopicBusy(name.to_string()));
        }
        self.delete_topic_checked(name, Some(topic.id))
            .map_err(|e| match e {
                // Deleted (and perhaps recreated) since it was looked up.
                Error::UnknownTopicId(_) => Error::UnknownTopic(name.to_string()),
                e => e,
            })
    }

    /// Whether producers or consumers are attached to any partition of
    /// `topic` (Pulsar producers, and consumers of its subscriptions,
    /// Readers included).
    pub fn topic_in_use(&self, topic: &Topic) -> bool {
        topic.partitions.iter().any(|p| {
            p.producer_count() > 0
                || self
                    .subscriptions()
                    .list(
                        topic.name.as_str(),
                        p.tp.partition.0,
                        p.log().log_end_offset(),
                    )
                    .iter()
                    .any(|s| !s.consumers.is_empty())
        })
    }

    /// Deletes the topic with this id (not a newer topic of the same name).
    pub fn delete_topic_by_id(&self, id: TopicId) -> Result<TopicName, Error> {
        let topic = self.topic_by_id(id).ok_or(Error::UnknownTopicId(id))?;
        self.delete_topic_checked(topic.name.as_str(), Some(id))?;
        Ok(topic.name.clone())
    }

    fn delete_topic_checked(
        &self,
        name: &str,
        expected_id: Option<TopicId>,
    ) -> Result<TopicId, Error> {
        if name == OFFSETS_TOPIC {
            return Err(Error::InvalidRequest(format!(
                "{OFFSETS_TOPIC} is internal and cannot be deleted"
            )));
        }
        let mut store = self.store.lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        if let Some(id) = expected_id.filter(|id| *id != topic.id) {
            // Deleted and recreated since the id was resolved.
            return Err(Error::UnknownTopicId(id));
        }
        store.update(|m| {
            m.topics.remove(name);
        })?;
        {
            let mut t = self.topics.write();
            t.by_name.remove(name);
            t.by_id.remove(&topic.id);
        }
        self.remove_logs(&topic.name, 0..topic.partitions.len() as i32);
        drop(store);
        if let Some(groups) = self.groups.get() {
            if let Err(e) = groups.forget_topic(name) {
                warn!(topic = %name, "could not remove committed offsets of the deleted topic: {e}");
            }
            if let Err(e) = groups.front_end().forget_topic(name) {
                warn!(topic = %name, "could not remove subscriptions, producer sequences or schemas of the deleted topic: {e}");
            }
        }
        info!(topic = %name, id = %topic.id, "deleted topic");
        Ok(topic.id)
    }

    /// Removes the committed offsets, subscriptions, producer sequences
    /// and schemas of topics that no longer exist. Deleting a topic removes
    /// them after the metadata commit; a crash (or a failed group-log
    /// write) in between would leave them for a later topic of the same
    /// name, which cannot be created before this runs at start-up.
    fn forget_state_of_deleted_topics(&self) {
        let groups = self.groups();
        let mut named = groups.offset_topics();
        named.extend(groups.front_end().topics());
        for topic in named.iter().filter(|t| self.topic(t).is_none()) {
            warn!(%topic, "removing the offsets and subscriptions left by a deleted topic");
            if let Err(e) = groups.forget_topic(topic) {
                warn!(%topic, "could not remove committed offsets of a deleted topic: {e}");
            }
            if let Err(e) = groups.front_end().forget_topic(topic) {
                warn!(%topic, "could not remove subscriptions, producer sequences or schemas of a deleted topic: {e}");
            }
        }
    }

    /// Grows a topic to `total` partitions.
    pub fn create_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<(), Error> {
        let mut store = self.store.lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        let current = topic.partitions.len() as i32;
        if topic.kind == TopicKind::NonPartitioned {
            return Err(Error::InvalidPartitions(format!(
                "topic {name} is non-partitioned"
            )));
        }
        if total > MAX_PARTITIONS_PER_TOPIC {
            return Err(Error::InvalidPartitions(format!(
                "{total} partitions requested; at most {MAX_PARTITIONS_PER_TOPIC}"
            )));
        }
        if topic.name.is_internal() {
            return Err(Error::InvalidRequest(format!(
                "{name} is internal; its partitions are managed by the broker"
            )));
        }
        if total <= current {
            return Err(Error::InvalidPartitions(format!(
                "topic {name} has {current} partitions; the new count {total} must be larger"
            )));
        }
        if validate_only {
            return Ok(());
        }
        let config = self.config.read().clone();
        let log_config =
            tenancy::log_config(&store.data.tenants, &config, &topic.name, &topic.config);
        let mut parts = topic.partitions.clone();
        let specs: Vec<LogSpec> = (current..total)
            .map(|p| LogSpec {
                topic_partition: TopicPartition::new(topic.name.clone(), PartitionId(p)),
                topic_id: topic.id,
                config: log_config.clone(),
            })
            .collect();
        match into_partitions(self.logs.open_logs(specs.clone()), specs) {
            Ok(new) => parts.extend(new),
            Err(e) => {
                self.remove_logs(&topic.name, current..total);
                return Err(e);
            }
        }
        if let Err(e) = store.update(|m| {
            if let Some(r) = m.topics.get_mut(name) {
                r.partitions = total;
            }
        }) {
            self.remove_logs(&topic.name, current..total);
            return Err(e);
        }
        self.publish(Topic {
            name: topic.name.clone(),
            id: topic.id,
            kind: topic.kind,
            config: topic.config.clone(),
            partitions: parts,
        });
        Ok(())
    }

    /// Replaces a topic's config overrides with `config`.
    pub fn set_topic_config(
        &self,
        name: &str,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<(), Error> {
        self.update_topic_config(name, validate_only, |_| Ok(config))
    }

    /// Changes a topic's config overrides with `change`, which sees the
    /// current overrides; read, change and write happen under one lock, so
    /// concurrent changes are not lost.
    pub fn update_topic_config(
        &self,
        name: &str,
        validate_only: bool,
        change: impl FnOnce(&TopicConfig) -> Result<TopicConfig, Error>,
    ) -> Result<(), Error> {
        let mut store = self.store.lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        if topic.name.is_internal() {
            // Its retention and cleanup are what keep committed offsets.
            return Err(Error::InvalidRequest(format!(
                "{name} is internal; its configuration is managed by the broker"
            )));
        }
        let config = change(&topic.config)?;
        let broker_config = self.config.read().clone();
        tenancy::validate_topic_config(&store.data.tenants, &broker_config, &topic.name, &config)?;
        if validate_only {
            return Ok(());
        }
        store.update(|m| {
            if let Some(r) = m.topics.get_mut(name) {
                r.config = config.clone();
            }
        })?;
        let log_config =
            tenancy::log_config(&store.data.tenants, &broker_config, &topic.name, &config);
        for p in &topic.partitions {
            p.log().update_config(log_config.clone());
        }
        self.publish(Topic {
            name: topic.name.clone(),
            id: topic.id,
            kind: topic.kind,
            config,
            partitions: topic.partitions.clone(),
        });
        Ok(())
    }

    /// Changes broker keys at runtime (`None` = back to default), persists
    /// them, and pushes new log defaults to topics that do not override them.
    pub fn alter_broker_config(
        &self,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(), Error> {
        let mut store = self.store.lock();
        let mut next = self.config.read().clone();
        for (k, v) in changes {
            let spec = crate::config::BROKER_KEYS
                .iter()
                .find(|s| s.name == k)
                .ok_or_else(|| Error::InvalidConfig {
                    key: k.clone(),
                    reason: "unknown broker configuration key".into(),
                })?;
            if !spec.dynamic {
                return Err(Error::InvalidConfig {
                    key: k.clone(),
                    reason: "this key cannot be changed while the broker runs".into(),
                });
            }
            match v {
                Some(v) => next.set(k, v, ConfigSource::Dynamic),
                None => next.reset(k),
            }
            .map_err(|e| match e {
                Error::Config { key, reason } => Error::InvalidConfig { key, reason },
                other => other,
            })?;
        }
        if validate_only {
            return Ok(());
        }
        let dynamic = next.dynamic_values();
        store.update(|m| m.broker_configs = dynamic)?;
        *self.config.write() = next.clone();
        self.refresh_log_configs(&store.data.tenants, &next);
        Ok(())
    }

    /// Pushes every topic's storage settings to its partitions after a
    /// change of the layers below the topic's own overrides (broker keys,
    /// namespace policies, which namespace a topic belongs to).
    pub(crate) fn refresh_log_configs(&self, tenants: &Tenants, broker_config: &BrokerConfig) {
        for t in self.topics() {
            let c = tenancy::log_config(tenants, broker_config, &t.name, &t.config);
            for p in &t.partitions {
                p.log().update_config(c.clone());
            }
        }
    }

    /// Hands out a producer id never given before, even across restarts.
    pub fn next_producer_id(&self) -> Result<ProducerId, Error> {
        let mut ids = self.producer_ids.lock();
        if ids.next >= ids.limit {
            let new_limit = ids.limit + PRODUCER_ID_BLOCK;
            self.store
                .lock()
                .update(|m| m.producer_id_limit = new_limit)?;
            ids.limit = new_limit;
        }
        let id = ids.next;
        ids.next += 1;
        Ok(ProducerId(id))
    }

    /// Retention and time-based flushing over every partition.
    pub fn run_maintenance(&self, now: Timestamp, retention: bool) {
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

    fn publish(&self, topic: Topic) {
        let mut t = self.topics.write();
        t.by_name.insert(topic.name.clone(), Arc::new(topic));
    }

    fn remove_logs(&self, name: &TopicName, range: std::ops::Range<i32>) {
        let tps: Vec<TopicPartition> = range
            .map(|p| TopicPartition::new(name.clone(), PartitionId(p)))
            .collect();
        for (tp, r) in self.logs.delete_logs(tps) {
            if let Err(e) = r {
                warn!(partition = %tp, "could not remove log: {e}");
            }
        }
    }
}

fn open_topic(
    logs: &LogManager,
    tenants: &Tenants,
    config: &BrokerConfig,
    rec: &TopicRecord,
) -> Result<Topic, Error> {
    let specs = partition_specs(rec, tenants, config, 0..rec.partitions);
    let partitions = into_partitions(logs.open_logs(specs.clone()), specs)?;
    Ok(topic_from(rec, partitions))
}

/// The logs of `rec`'s partitions in `range`.
fn partition_specs(
    rec: &TopicRecord,
    tenants: &Tenants,
    config: &BrokerConfig,
    range: std::ops::Range<i32>,
) -> Vec<LogSpec> {
    let log_config = tenancy::log_config(tenants, config, &rec.name, &rec.config);
    range
        .map(|p| LogSpec {
            topic_partition: TopicPartition::new(rec.name.clone(), PartitionId(p)),
            topic_id: rec.id,
            config: log_config.clone(),
        })
        .collect()
}

/// Partitions over opened logs; the first failure names its partition.
fn into_partitions(
    opened: Vec<Result<Arc<storage::Log>, storage::Error>>,
    specs: Vec<LogSpec>,
) -> Result<Vec<Arc<Partition>>, Error> {
    opened
        .into_iter()
        .zip(specs)
        .map(|(log, spec)| {
            let tp = spec.topic_partition;
            match log {
                Ok(log) => Ok(Arc::new(Partition::new(tp, spec.topic_id, log))),
                Err(source) => Err(Error::Storage {
                    partition: tp.to_string(),
                    source,
                }),
            }
        })
        .collect()
}

fn topic_from(rec: &TopicRecord, partitions: Vec<Arc<Partition>>) -> Topic {
    Topic {
        name: rec.name.clone(),
        id: rec.id,
        kind: rec.kind,
        config: rec.config.clone(),
        partitions,
    }
}
