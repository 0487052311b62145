//! A cluster member opens from the quorum's metadata and then follows it:
//! each committed batch is applied to its copy of the metadata, and the
//! difference (Kafka's `MetadataDelta`, see [`crate::metadata_delta`]) is
//! carried out on this broker: logs opened for partitions it now hosts,
//! logs of partitions it no longer hosts (a deleted or recreated topic, a
//! moved partition) staged under `deleting/`, topics republished, broker
//! configs and tenants refreshed.

use std::collections::BTreeSet;
use std::sync::Arc;

use model::{PartitionId, TopicId, TopicName, TopicPartition};
use parking_lot::RwLock;
use storage::LogSpec;
use tokio::sync::watch;
use tracing::{info, warn};

use super::dir::{check_membership, ClusterDir};
use super::{ClusterLink, ClusterState, ClusterView};
use crate::config::BrokerConfig;
use crate::core::{open_hosted, reconcile_disk};
use crate::group::store::OFFSETS_TOPIC;
use crate::metadata_machine::MetadataBatch;
use crate::metadata_records::apply_all;
use crate::metadata_store::{Metadata, MetadataStore, TopicRecord};
use crate::tenancy;
use crate::topic::{into_partitions, partition_specs, Partition, Topic};
use crate::{Broker, Endpoint, Error};

impl Broker {
    /// Opens a cluster member's data directory from `metadata`, the
    /// quorum's state at log index `applied` as received after this
    /// broker's registration: every partition assigned to it (KIP-516
    /// `is_every_partition`), so any other partition directory on disk, or
    /// one of another topic id, is stale and staged under `deleting/`.
    /// The group coordinator keeps its state in a node-local
    /// `__consumer_offsets` log outside the cluster metadata.
    pub fn open_cluster(
        mut config: BrokerConfig,
        dir: ClusterDir,
        endpoint: Endpoint,
        link: Arc<ClusterLink>,
        metadata: Metadata,
        applied: u64,
    ) -> Result<Arc<Broker>, Error> {
        check_membership(&config.data_dir, &metadata.cluster_id, config.node_id())?;
        let logs = dir.logs;
        let node = config.node_id();
        let static_config = config.clone();
        config = metadata.dynamic_config(&static_config, node);
        // A quorum of one publishes its group log as a topic (see
        // `BrokerService::in_process`), with the coordinators placed on
        // it; a cluster that placed coordinators on brokers keeps each
        // one's group log as `__consumer_offsets` of its own; any other
        // cluster replicates `__consumer_offsets` (see
        // `crate::group_slots`) and keeps each broker's own state apart.
        let has_offsets_topic = metadata.topics.keys().any(|t| t.as_str() == OFFSETS_TOPIC);
        let replicated_groups = metadata.coordinators.is_empty();
        let published_offsets = has_offsets_topic && !replicated_groups;
        let home_log = if replicated_groups {
            let replicated = metadata
                .topics
                .values()
                .find(|t| t.name.as_str() == OFFSETS_TOPIC)
                .map(|t| t.id);
            adopt_node_state(&logs, replicated)?;
            model::NODE_STATE_LOG
        } else {
            OFFSETS_TOPIC
        };
        let node_local: &[&str] = if published_offsets { &[] } else { &[home_log] };
        reconcile_disk(&logs, &metadata, node, node_local)?;
        let table = open_hosted(&logs, &metadata, &config, node)?;
        info!(
            topics = table.by_name.len(),
            cluster_id = %metadata.cluster_id,
            applied,
            "cluster metadata loaded"
        );
        let view = ClusterView::of(&metadata);
        let state = ClusterState {
            link,
            applied: watch::Sender::new(applied),
            view: RwLock::new(Arc::new(view)),
            pending: Default::default(),
            registration_epoch: std::sync::atomic::AtomicI64::new(-1),
        };
        let broker = Broker::assemble(
            static_config,
            config,
            endpoint,
            logs,
            MetadataStore::new(metadata),
            table,
            state,
        );
        let offsets = if published_offsets {
            broker.offsets_partition()?
        } else {
            broker.local_offsets_log(home_log)?
        };
        broker.start_groups(offsets)?;
        broker.apply_hosted_replica_states();
        Ok(Arc::new(broker))
    }

    /// The node-local log the group coordinator writes (offsets, groups,
    /// subscriptions, producer sequences, schemas of what this broker
    /// coordinates or leads), with the topic id it was first created with.
    fn local_offsets_log(&self, name: &str) -> Result<Arc<Partition>, Error> {
        let tp = TopicPartition::new(TopicName::new(name)?, PartitionId(0));
        let on_disk = self.logs.scan().map_err(Error::DataDir)?;
        let id = on_disk
            .iter()
            .find(|(t, _)| *t == tp)
            .and_then(|(_, id)| *id)
            .unwrap_or_else(TopicId::random);
        let mut rec = crate::group::store::offsets_topic_record(self.node_id(), id);
        rec.name = tp.topic.clone();
        let broker_config = self.config();
        let specs = partition_specs(&rec, &self.tenants.read(), &broker_config, 0..1);
        let mut opened =
            into_partitions(self.logs.open_logs(specs.clone()), specs, rec.placements)?;
        Ok(opened.remove(0))
    }

    /// Applies committed batches in order (a batch that conflicts was
    /// refused on every node and changes nothing) and carries out what
    /// they change here. Blocking: opens and stages logs.
    pub fn apply_committed(&self, entries: &[(u64, MetadataBatch)]) {
        let Some(last) = entries.last().map(|(i, _)| *i) else {
            return;
        };
        let mut store = self.store.lock();
        let mut next = store.data.clone();
        for (_, batch) in entries {
            if let Ok(n) = apply_all(&next, &batch.0) {
                next = n;
            }
        }
        self.switch_to(&mut store, next);
        drop(store);
        self.cluster.applied.send_replace(last);
    }

    /// Replaces the metadata with a snapshot's `state` at `index` (a broker
    /// that fell behind the quorum's log): the difference is applied as
    /// for records.
    pub fn apply_snapshot(&self, index: u64, state: Metadata) {
        if index <= self.applied_metadata_index() {
            // Older than what is applied here (another voter's): going back
            // would unpublish newer topics.
            return;
        }
        let mut store = self.store.lock();
        self.switch_to(&mut store, state);
        drop(store);
        self.cluster.applied.send_replace(index);
    }

    /// The last metadata index applied here.
    pub fn applied_metadata_index(&self) -> u64 {
        *self.cluster.applied.borrow()
    }

    fn switch_to(&self, store: &mut MetadataStore, new: Metadata) {
        let node = self.node_id();
        let old = std::mem::replace(&mut store.data, new);
        let new = &store.data;
        let changes = crate::metadata_delta::local_changes(&old, new, node);
        for (tp, id) in &changes.stop {
            self.stop_replica(tp, *id, new);
            match self.logs.stage_for_deletion(tp) {
                Ok(Some(to)) => {
                    info!(partition = %tp, topic_id = %id, staged = %to.display(), "stopped hosting a partition; its log is staged for deletion")
                }
                Ok(None) => {}
                Err(e) => warn!(partition = %tp, "could not stage a partition's log: {e}"),
            }
        }
        // Broker keys and tenants first: new logs take their defaults.
        let me = self.node_id();
        let configs_changed = old.broker_configs != new.broker_configs
            || old.node_configs.get(&me) != new.node_configs.get(&me);
        if configs_changed {
            *self.config.write() = new.dynamic_config(&self.static_config, me);
        }
        let tenants_changed = old.tenants != new.tenants;
        if tenants_changed {
            *self.tenants.write() = Arc::new(new.tenants.clone());
        }
        let config = self.config.read().clone();
        let names: BTreeSet<&TopicName> = old.topics.keys().chain(new.topics.keys()).collect();
        for name in names {
            let (before, after) = (old.topics.get(name), new.topics.get(name));
            if before == after {
                continue;
            }
            if let Some(b) = before.filter(|b| after.is_none_or(|a| a.id != b.id)) {
                self.unpublish(b);
            }
            if let Some(a) = after {
                self.republish_or_retry(a, new, &config);
                if before.is_none_or(|b| b.id != a.id) {
                    self.note_topic_created(&a.name, a.id);
                }
            }
        }
        if configs_changed || tenants_changed {
            self.refresh_log_configs(&new.tenants, &config);
        }
        if old.acls != new.acls {
            self.refresh_acls(new);
        }
        if old.client_quotas != new.client_quotas {
            self.refresh_quotas(new);
        }
        *self.cluster.view.write() = Arc::new(ClusterView::of(new));
    }

    /// Steps a partition this broker no longer hosts (moved away by a
    /// reassignment) out of its role before its log is staged: a leader
    /// stops taking writes and fails its waiting `acks=all` producers (they
    /// retry with the new leader), a follower stops fetching.
    fn stop_replica(&self, tp: &TopicPartition, id: TopicId, new: &Metadata) {
        let Some(partition) = self
            .topic_by_id(id)
            .and_then(|t| t.hosted_partition(tp.partition).cloned())
        else {
            return;
        };
        if let Some(state) = new
            .topics
            .get(&tp.topic)
            .filter(|t| t.id == id)
            .and_then(|t| t.placements.get(tp.partition.0 as usize))
        {
            self.apply_replica_state(&partition, state);
        }
        partition.fail_waiting();
    }

    fn republish_or_retry(&self, rec: &TopicRecord, m: &Metadata, config: &BrokerConfig) {
        let c = &self.cluster;
        match self.republish(rec, m, config) {
            Ok(()) => {
                c.pending.lock().remove(&rec.name);
            }
            Err(e) => {
                warn!(topic = %rec.name, "could not open the partitions of a topic (retried): {e}");
                c.pending.lock().insert(rec.name.clone());
            }
        }
    }

    /// Opens again the partitions that failed to open when their metadata
    /// was applied. Blocking.
    pub fn retry_pending_topics(&self) {
        let c = &self.cluster;
        let names: Vec<TopicName> = c.pending.lock().iter().cloned().collect();
        if names.is_empty() {
            return;
        }
        let store = self.store.lock();
        let config = self.config();
        for name in names {
            match store.data.topics.get(&name) {
                Some(rec) => self.republish_or_retry(rec, &store.data, &config),
                None => {
                    c.pending.lock().remove(&name);
                }
            }
        }
    }

    /// Whether every applied topic's partitions are open here.
    pub fn metadata_fully_applied(&self) -> bool {
        self.cluster.pending.lock().is_empty()
    }

    /// Takes a deleted (or replaced) topic out of the table and forgets
    /// its offsets and subscriptions.
    fn unpublish(&self, rec: &TopicRecord) {
        {
            let mut t = self.topics.write();
            if t.by_name.get(&rec.name).is_some_and(|x| x.id == rec.id) {
                t.by_name.remove(&rec.name);
            }
            t.by_id.remove(&rec.id);
        }
        self.forget_replicas(rec.id);
        if self.groups.get().is_some() {
            for groups in self.coordinators_with_home() {
                if let Err(e) = groups.forget_topic(rec.name.as_str()) {
                    warn!(topic = %rec.name, "could not remove committed offsets of the deleted topic: {e}");
                }
                if let Err(e) = groups.front_end().forget_topic(rec.name.as_str()) {
                    warn!(topic = %rec.name, "could not remove subscriptions of the deleted topic: {e}");
                }
            }
        }
        info!(topic = %rec.name, id = %rec.id, "topic deleted");
    }

    /// Publishes `rec` as it is now: partitions hosted before are kept
    /// (their state updated), newly hosted ones opened.
    fn republish(
        &self,
        rec: &TopicRecord,
        m: &Metadata,
        config: &BrokerConfig,
    ) -> Result<(), Error> {
        let node = self.node_id();
        let current = self.topic_by_id(rec.id);
        let log_config = tenancy::log_config(&m.tenants, config, &rec.name, &rec.config);
        let mut keep: Vec<Arc<Partition>> = Vec::new();
        let mut specs: Vec<LogSpec> = Vec::new();
        let mut states = Vec::new();
        for (p, state) in rec.placements.iter().enumerate() {
            if !state.has_replica(node) {
                continue;
            }
            let pid = PartitionId(p as i32);
            match current.as_ref().and_then(|t| t.hosted_partition(pid)) {
                Some(existing) => {
                    existing.set_state(state.clone());
                    if current.as_ref().is_some_and(|t| t.config != rec.config) {
                        existing.log().update_config(log_config.clone());
                    }
                    keep.push(existing.clone());
                }
                None => {
                    specs.extend(partition_specs(
                        rec,
                        &m.tenants,
                        config,
                        p as i32..p as i32 + 1,
                    ));
                    states.push(state.clone());
                }
            }
        }
        let opened = into_partitions(self.logs.open_logs(specs.clone()), specs, states)?;
        keep.extend(opened);
        keep.sort_by_key(|p| p.tp.partition.0);
        let topic = Topic {
            name: rec.name.clone(),
            id: rec.id,
            kind: rec.kind,
            config: rec.config.clone(),
            placements: rec.placements.clone(),
            partitions: keep,
        };
        let mut t = self.topics.write();
        if current.is_none() {
            info!(topic = %rec.name, id = %rec.id, partitions = rec.partitions, "topic created");
        }
        t.by_id.insert(rec.id, rec.name.clone());
        let topic = Arc::new(topic);
        t.by_name.insert(rec.name.clone(), topic.clone());
        drop(t);
        self.apply_topic_replica_states(&topic);
        Ok(())
    }

    /// Has each hosted partition of `topic` follow its placement as a
    /// replica (see [`Broker::apply_replica_state`]).
    fn apply_topic_replica_states(&self, topic: &Topic) {
        for p in &topic.partitions {
            if let Some(state) = topic.placements.get(p.tp.partition.0 as usize) {
                self.apply_replica_state(p, state);
            }
        }
    }

    /// [`Broker::apply_topic_replica_states`] for every topic, as the
    /// broker opens.
    fn apply_hosted_replica_states(&self) {
        let topics: Vec<Arc<Topic>> = self.topics.read().by_name.values().cloned().collect();
        for t in topics {
            self.apply_topic_replica_states(&t);
        }
    }
}

/// A broker that kept its own state as `__consumer_offsets` before the
/// cluster replicated that topic keeps it as [`model::NODE_STATE_LOG`]
/// now (Pulsar subscriptions, producer sequences and schemas are in it):
/// its `__consumer_offsets-0` directory is renamed once, unless it is the
/// replicated topic's (of id `replicated`).
fn adopt_node_state(logs: &storage::LogManager, replicated: Option<TopicId>) -> Result<(), Error> {
    let on_disk = logs.scan().map_err(Error::DataDir)?;
    let found = |topic: &str| {
        on_disk
            .iter()
            .find(|(tp, _)| tp.topic.as_str() == topic && tp.partition.0 == 0)
    };
    let Some((_, id)) = found(OFFSETS_TOPIC) else {
        return Ok(());
    };
    let ours = match (replicated, id) {
        (None, _) => true,
        (Some(r), Some(id)) => *id != r,
        (Some(_), None) => false,
    };
    if !ours || found(model::NODE_STATE_LOG).is_some() {
        return Ok(());
    }
    let old = logs.data_dir().join(format!("{OFFSETS_TOPIC}-0"));
    let new = logs.data_dir().join(format!("{}-0", model::NODE_STATE_LOG));
    match std::fs::rename(&old, &new) {
        Ok(()) => {
            info!(from = %old.display(), to = %new.display(), "kept this broker's own state log under its new name")
        }
        Err(e) => warn!(from = %old.display(), "could not rename this broker's own state log: {e}"),
    }
    Ok(())
}
