//! Topic lifecycle and the other metadata changes, as clients ask for
//! them: each is validated against the current metadata into the
//! [`MetadataRecord`]s that describe it, committed through the controller
//! quorum (a quorum of one on a standalone node) and answered once this
//! broker applied them (see `cluster::ops` and `cluster::apply`, which
//! opens, stages and publishes what the records change).

use std::sync::Arc;
use std::time::Duration;

use model::pulsar_name::Namespace;
use model::{ProducerId, TopicId, TopicName};
use tracing::{info, warn};

use crate::config::ConfigError;
use crate::config::{BrokerConfig, ConfigSource, TopicConfig, TopicKind};
use crate::core::NewTopic;
use crate::metadata_records::{MetadataRecord, NodeId};
use crate::tenancy::{self, Tenants};
use crate::topic::Topic;
use crate::{Broker, Error};

/// Which dynamic layer of broker keys a change is made in, as Kafka's
/// broker config resources name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerScope {
    /// Every broker's (the resource with an empty name, `--entity-default`).
    ClusterDefault,
    /// This broker's own (the resource named by its id), over the defaults.
    ThisBroker,
}

impl BrokerScope {
    /// The source DescribeConfigs reports for a key set in this layer.
    pub fn source(self) -> ConfigSource {
        match self {
            BrokerScope::ClusterDefault => ConfigSource::DynamicDefault,
            BrokerScope::ThisBroker => ConfigSource::Dynamic,
        }
    }
}

impl Broker {
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
            assignments: Vec::new(),
            name: name.clone(),
            partitions: match kind {
                TopicKind::Partitioned => None,
                TopicKind::NonPartitioned => Some(1),
            },
            replication_factor: None,
            kind,
            config: TopicConfig::default(),
        };
        match self.create_topic_checked(req, false, namespace, None) {
            Ok(t) => {
                info!(topic = %name, kind = kind.as_str(), partitions = t.partition_count(), "auto-created topic");
                Ok(t)
            }
            // Lost a race with another creator: the topic exists now.
            Err(Error::TopicExists(_)) => self
                .topic(name.as_str())
                .ok_or_else(|| Error::UnknownTopic(name.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Creates a topic: committed through the controller quorum, its
    /// partitions opened by the brokers that apply it (this one before it
    /// answers).
    pub fn create_topic(&self, req: NewTopic, validate_only: bool) -> Result<Arc<Topic>, Error> {
        self.create_topic_checked(req, validate_only, None, None)
    }

    /// [`Broker::create_topic`] for a client that waits up to `timeout`
    /// (Kafka's CreateTopics `timeout_ms`): once committed, opening the
    /// partitions here is waited for that long (or the controller's change
    /// timeout, if longer) before [`Error::ControllerUnavailable`] says it
    /// is not done yet. The topic is created either way.
    pub fn create_topic_within(
        &self,
        req: NewTopic,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<Arc<Topic>, Error> {
        self.create_topic_checked(req, validate_only, None, Some(timeout))
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
        self.create_topic_checked(req, false, Some(namespace), None)
    }

    fn create_topic_checked(
        &self,
        req: NewTopic,
        validate_only: bool,
        namespace: Option<&Namespace>,
        patience: Option<Duration>,
    ) -> Result<Arc<Topic>, Error> {
        self.cluster_create_topic(req, validate_only, namespace, patience)
    }

    /// Deletes a topic: the metadata commit deletes it, then its logs are
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
        let id = self.cluster_delete_topic(name, expected_id)?;
        info!(topic = %name, id = %id, "deleted topic");
        Ok(id)
    }

    /// Removes the committed offsets, subscriptions, producer sequences
    /// and schemas of topics that no longer exist, or exist with another
    /// id than the one they were recorded for. Deleting a topic removes
    /// them after the metadata commit; a crash (or a failed group-log
    /// write) in between would leave them for a later topic of the same
    /// name, which cannot be created before this runs at start-up. A
    /// cluster broker that was down while a topic was deleted (and perhaps
    /// created again) learns it here, from the metadata it starts with
    /// (KIP-516: nothing of the old topic is served for the new one). The
    /// topics' ids are then recorded as they are now.
    pub(crate) fn forget_state_of_deleted_topics(
        &self,
        groups: &crate::group::coordinator::GroupCoordinator,
    ) {
        let recorded = groups.topic_ids();
        let mut named = groups.offset_topics();
        named.extend(groups.front_end().topics());
        named.extend(recorded.keys().cloned());
        let stale = |t: &String| match (self.topic(t), recorded.get(t)) {
            (None, _) => true,
            (Some(now), Some(was)) => now.id != *was,
            (Some(_), None) => false,
        };
        for topic in named.iter().filter(|t| stale(t)) {
            warn!(%topic, "removing the offsets, subscriptions and producer sequences left by a deleted topic");
            if let Err(e) = groups.forget_topic(topic) {
                warn!(%topic, "could not remove committed offsets of a deleted topic: {e}");
            }
            if let Err(e) = groups.front_end().forget_topic(topic) {
                warn!(%topic, "could not remove subscriptions, producer sequences or schemas of a deleted topic: {e}");
            }
        }
        let current: Vec<(String, TopicId)> = self
            .topics()
            .iter()
            .map(|t| (t.name.to_string(), t.id))
            .collect();
        if let Err(e) = groups.note_topic_ids(&current) {
            warn!("could not record the topics' ids in the group log: {e}");
        }
    }

    /// Records a topic created (or found created) here with its id, so
    /// what is kept about it is known to be about this topic of the name.
    pub(crate) fn note_topic_created(&self, name: &TopicName, id: TopicId) {
        if self.groups.get().is_none() {
            return;
        }
        for c in self.coordinators_with_home() {
            if let Err(e) = c.note_topic_ids(&[(name.to_string(), id)]) {
                warn!(topic = %name, "could not record the topic's id in the group log: {e}");
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
        self.create_partitions_assigned(name, total, &[], validate_only)
    }

    /// Grows a topic to `total` partitions, the new ones on the replicas
    /// `assignments` names (one list per new partition; empty: placed by
    /// the controller).
    pub fn create_partitions_assigned(
        &self,
        name: &str,
        total: i32,
        assignments: &[Vec<NodeId>],
        validate_only: bool,
    ) -> Result<(), Error> {
        self.cluster_create_partitions(name, total, assignments, validate_only, None)
    }

    /// [`Broker::create_partitions_assigned`] for a client that waits up to
    /// `timeout` (Kafka's CreatePartitions `timeout_ms`), as
    /// [`Broker::create_topic_within`] waits.
    pub fn create_partitions_within(
        &self,
        name: &str,
        total: i32,
        assignments: &[Vec<NodeId>],
        validate_only: bool,
        timeout: Duration,
    ) -> Result<(), Error> {
        self.cluster_create_partitions(name, total, assignments, validate_only, Some(timeout))
    }

    /// Replaces a topic's config overrides with `config`.
    pub fn set_topic_config(
        &self,
        name: &str,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<(), Error> {
        self.update_topic_config(name, validate_only, |_| Ok(config.clone()))
    }

    /// Changes a topic's config overrides with `change`, which sees the
    /// current overrides; read, change and write happen under one lock, so
    /// concurrent changes are not lost.
    pub fn update_topic_config(
        &self,
        name: &str,
        validate_only: bool,
        change: impl Fn(&TopicConfig) -> Result<TopicConfig, Error>,
    ) -> Result<(), Error> {
        self.cluster_update_topic_config(name, validate_only, change)
    }

    /// The topic `name` if clients may change its configuration.
    pub(crate) fn configurable_topic(&self, name: &str) -> Result<Arc<Topic>, Error> {
        let topic = self
            .topic(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        if topic.name.is_internal() {
            // Its retention and cleanup are what keep committed offsets.
            return Err(Error::InvalidRequest(format!(
                "{name} is internal; its configuration is managed by the broker"
            )));
        }
        Ok(topic)
    }

    /// Changes broker keys at runtime in one dynamic layer (`scope`): set
    /// (`Some`) or removed (`None`: the value below it applies again, the
    /// cluster-wide default's, the start-up one or the built-in default).
    /// The layer is persisted (committed through the quorum in a cluster,
    /// where the defaults reach every broker and a broker's own keys only
    /// it), and topics that do not override the keys get the new log
    /// defaults.
    pub fn alter_broker_config(
        &self,
        scope: BrokerScope,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(), Error> {
        self.change_broker_config(scope, changes, false, validate_only)
    }

    /// Replaces one dynamic layer (`scope`) with the keys `values` sets
    /// (the legacy AlterConfigs' whole-set semantics: every key not given,
    /// or given no value, is removed), decided on the layer as it is when
    /// the change is made, so a key set concurrently is removed too rather
    /// than surviving the replacement.
    pub fn replace_broker_config(
        &self,
        scope: BrokerScope,
        values: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(), Error> {
        self.change_broker_config(scope, values, true, validate_only)
    }

    fn change_broker_config(
        &self,
        scope: BrokerScope,
        changes: &[(String, Option<String>)],
        replace: bool,
        validate_only: bool,
    ) -> Result<(), Error> {
        let node = self.node_id();
        let store = self.store.lock();
        let (defaults, own) = (
            store.data.broker_configs.clone(),
            store
                .data
                .node_configs
                .get(&node)
                .cloned()
                .unwrap_or_default(),
        );
        let source = scope.source();
        let mut layer = match scope {
            _ if replace => Default::default(),
            BrokerScope::ClusterDefault => defaults.clone(),
            BrokerScope::ThisBroker => own.clone(),
        };
        let none = std::collections::BTreeMap::new();
        // Values are checked and normalized on the defaults alone: a layer
        // holds what it was given, whatever the start-up values below it.
        let base = BrokerConfig::new(&self.static_config.data_dir, self.static_config.kafka_addr);
        for (k, v) in changes {
            let spec = crate::config::broker_key(k).ok_or_else(|| Error::InvalidConfig {
                key: k.clone(),
                reason: "unknown broker configuration key".into(),
            })?;
            if !spec.dynamic {
                return Err(Error::InvalidConfig {
                    key: k.clone(),
                    reason: "this key cannot be changed while the broker runs".into(),
                });
            }
            // Kafka's per-broker keys have no cluster-wide default; a
            // replacement of that layer (legacy AlterConfigs) may still
            // name them without a value, which removes nothing.
            if spec.per_broker && scope == BrokerScope::ClusterDefault && v.is_some() {
                return Err(Error::InvalidRequest(format!(
                    "Cannot update these configs at default cluster level, broker id must be specified: {k}"
                )));
            }
            match v {
                Some(v) => {
                    base.clone().set(k, v, source).map_err(|e| match e {
                        ConfigError::Config { key, reason }
                        | ConfigError::InvalidConfig { key, reason } => {
                            Error::InvalidConfig { key, reason }
                        }
                    })?;
                    layer.insert(k.clone(), v.clone());
                }
                None => {
                    layer.remove(k);
                }
            }
        }
        // Stored as the configuration reads them back: canonical keys,
        // normalized values.
        let layer = base
            .with_dynamic(&none, &layer)
            .values_from(crate::config::ConfigSource::Dynamic);
        if validate_only {
            return Ok(());
        }
        let (previous, record) = match scope {
            BrokerScope::ClusterDefault => (
                crate::metadata_records::Expectation::BrokerConfigs { values: defaults },
                MetadataRecord::BrokerConfigsSet {
                    values: layer.clone(),
                },
            ),
            BrokerScope::ThisBroker => (
                crate::metadata_records::Expectation::NodeConfigs { node, values: own },
                MetadataRecord::NodeConfigsSet {
                    node,
                    values: layer.clone(),
                },
            ),
        };
        // Every broker applies it from the committed log, this one too.
        drop(store);
        self.cluster_set_broker_configs(previous, record)
    }

    /// Every layer that sets broker key `key`, highest first, with its
    /// value (DescribeConfigs' synonyms): this broker's own, the
    /// cluster-wide default, the start-up value, the built-in default.
    pub fn broker_config_synonyms(&self, key: &str) -> Vec<(String, ConfigSource)> {
        let mut out = Vec::new();
        for scope in [BrokerScope::ThisBroker, BrokerScope::ClusterDefault] {
            if let Some(v) = self.dynamic_broker_configs(scope).get(key) {
                out.push((v.clone(), scope.source()));
            }
        }
        if let Some((v, s)) = self.static_config.get(key) {
            if s == ConfigSource::Static {
                out.push((v.to_string(), s));
            }
        }
        if let Some(spec) = crate::config::broker_key(key) {
            out.push((spec.default.to_string(), ConfigSource::Default));
        }
        out
    }

    /// The keys of one dynamic layer, as stored.
    pub fn dynamic_broker_configs(
        &self,
        scope: BrokerScope,
    ) -> std::collections::BTreeMap<String, String> {
        let store = self.store.lock();
        match scope {
            BrokerScope::ClusterDefault => store.data.broker_configs.clone(),
            BrokerScope::ThisBroker => store
                .data
                .node_configs
                .get(&self.node_id())
                .cloned()
                .unwrap_or_default(),
        }
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
        crate::cluster::next_cluster_producer_id(self)
    }
}
