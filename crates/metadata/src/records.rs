//! The broker's metadata as records: every change of topics, partitions,
//! their placement, configs, tenants and producer ids is one or more
//! [`MetadataRecord`]s, applied in order to a [`Metadata`] by the pure
//! [`apply`]. The controller quorum replicates them (a quorum of one on a
//! standalone node), and each broker applies the ones it receives
//! (Kafka's `MetadataDelta`).
//!
//! `apply` is total and deterministic: a record that does not fit the state
//! (a topic created twice, a deletion of a topic id that is not there) is
//! refused with [`Error::MetadataConflict`] and leaves the state as it was,
//! so every replica that applies the same records reaches the same state.

use std::collections::BTreeMap;

use model::{TopicId, TopicName};
use serde::{Deserialize, Serialize};

pub use crate::image::{NodeId, PartitionState, NO_LEADER};

use crate::image::{BrokerRegistration, Metadata, TenantRecord, TopicRecord};
use crate::MetadataError as Error;
use magnetar_config::TopicConfig;

/// One change of the metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MetadataRecord {
    /// The cluster got its id: the first record of a controller quorum's
    /// log (or part of an [`MetadataRecord::Imported`] file).
    ClusterInitialized {
        /// The cluster id, as Kafka's `ClusterId`.
        cluster_id: String,
    },
    /// A single node's metadata file (`cluster-metadata.json`, which
    /// `magnetar standalone` kept before it ran a quorum of one) became
    /// the first state of its quorum, cluster id included.
    Imported {
        /// The file's content (as JSON text: this enum's internal tag
        /// buffers its fields, which loses the integer map keys a
        /// `Metadata` has).
        #[serde(with = "json_text")]
        metadata: Box<Metadata>,
    },
    /// A topic was created with these partitions (`topic.placements`).
    TopicCreated {
        /// The topic, its id and placements included.
        topic: TopicRecord,
    },
    /// Partitions were added to a topic, after its last one.
    PartitionsAdded {
        /// The topic's id.
        id: TopicId,
        /// Its name.
        name: TopicName,
        /// The new partitions, in index order.
        placements: Vec<PartitionState>,
    },
    /// A partition's leader, ISR or epochs changed: an ISR change its
    /// leader asked for (AlterPartition), or an election or ISR removal
    /// after a broker's fencing. Its whole new state; refused unless its
    /// partition epoch is above the current one.
    PartitionChanged {
        /// The topic's id.
        id: TopicId,
        /// The partition.
        partition: i32,
        /// The partition's new state.
        state: PartitionState,
    },
    /// A topic's config overrides were replaced.
    TopicConfigSet {
        /// The topic's id.
        id: TopicId,
        /// Its name.
        name: TopicName,
        /// The new overrides.
        config: TopicConfig,
    },
    /// A topic was deleted; its id is never valid again.
    TopicDeleted {
        /// The topic's id.
        id: TopicId,
        /// Its name.
        name: TopicName,
    },
    /// The broker keys changed at runtime for every broker (the whole
    /// set of cluster-wide defaults).
    BrokerConfigsSet {
        /// Key → value.
        values: BTreeMap<String, String>,
    },
    /// The broker keys changed at runtime for broker `node` (its whole
    /// set; empty removes them).
    NodeConfigsSet {
        /// The broker.
        node: NodeId,
        /// Key → value.
        values: BTreeMap<String, String>,
    },
    /// Producer ids below `limit` may be handed out.
    ProducerIdsReserved {
        /// The new limit (never lower than the last).
        limit: i64,
    },
    /// The tenants and their namespaces (the whole set).
    TenantsSet {
        /// Tenant → record.
        tenants: BTreeMap<String, TenantRecord>,
    },
    /// A user's SCRAM credential for one mechanism was set (KIP-554).
    ScramCredentialSet {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: crate::credentials::ScramMechanism,
        /// The salted credential.
        credential: crate::credentials::ScramCredential,
    },
    /// A user's SCRAM credential for one mechanism was removed.
    ScramCredentialDeleted {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: crate::credentials::ScramMechanism,
    },
    /// An ACL was created (creating one that exists changes nothing).
    AclCreated {
        /// The ACL.
        binding: crate::acl::AclBinding,
    },
    /// An ACL was deleted (deleting one that is gone changes nothing: two
    /// DeleteAcls may select the same ACL).
    AclDeleted {
        /// The ACL.
        binding: crate::acl::AclBinding,
    },
    /// A client quota was set (`value`) or removed (`None`).
    ClientQuotaSet {
        /// Whose quota.
        entity: crate::quota::QuotaEntity,
        /// The quota key (`producer_byte_rate`, ...).
        key: String,
        /// The new value.
        value: Option<f64>,
    },
    /// A broker registered (again): its epoch must be above every earlier
    /// registration's (of any broker, unregistered ones included).
    BrokerRegistered {
        /// The broker's node id.
        node: NodeId,
        /// Its registration.
        registration: BrokerRegistration,
    },
    /// A registered broker's fencing changed (for that epoch only).
    BrokerFencing {
        /// The broker's node id.
        node: NodeId,
        /// The registration it applies to.
        epoch: i64,
        /// Fenced (true) or unfenced.
        fenced: bool,
        /// A controlled shutdown: the registration is fenced for good, and
        /// a later unfencing of it (decided before the shutdown) changes
        /// nothing. Absent in records written before it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shutdown: bool,
    },
    /// The group and transaction coordinators were placed: coordinator
    /// slot `i` (a hash of the group or transactional id modulo the slot
    /// count, as Kafka's `__consumer_offsets` partitions) is served by
    /// `nodes[i]`. Placed once; slots do not move in a cluster without
    /// replication.
    CoordinatorsPlaced {
        /// Slot → broker.
        nodes: Vec<NodeId>,
    },
    /// A guard: the batch it is in applies only if the metadata still is
    /// as its submitter validated it against (a compare-and-set of the
    /// records after it, which would otherwise overwrite a concurrent
    /// change made through another broker).
    Expect {
        /// What must hold.
        expect: Expectation,
    },
    /// A broker left the cluster for good (its registration is removed).
    BrokerUnregistered {
        /// The broker's node id.
        node: NodeId,
        /// The registration removed (a newer one is left alone).
        epoch: i64,
    },
}

/// What an [`MetadataRecord::Expect`] guard checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "of", rename_all = "snake_case")]
pub enum Expectation {
    /// The topic (by id) has this many partitions.
    PartitionCount {
        /// The topic's id.
        id: TopicId,
        /// Its partition count.
        count: i32,
    },
    /// The topic (by id) has exactly these overrides.
    TopicConfig {
        /// The topic's id.
        id: TopicId,
        /// Its overrides.
        config: TopicConfig,
    },
    /// The dynamic broker keys are these.
    BrokerConfigs {
        /// Key → value.
        values: BTreeMap<String, String>,
    },
    /// Broker `node`'s own dynamic keys are these.
    NodeConfigs {
        /// The broker.
        node: NodeId,
        /// Key → value.
        values: BTreeMap<String, String>,
    },
    /// The tenants are these.
    Tenants {
        /// Tenant → record.
        tenants: BTreeMap<String, TenantRecord>,
    },
}

impl MetadataRecord {
    /// Whether it changes the client quotas.
    pub fn is_quota(&self) -> bool {
        matches!(
            self,
            MetadataRecord::ClientQuotaSet { .. } | MetadataRecord::Imported { .. }
        )
    }

    /// Whether it changes the ACLs.
    pub fn is_acl(&self) -> bool {
        matches!(
            self,
            MetadataRecord::AclCreated { .. }
                | MetadataRecord::AclDeleted { .. }
                | MetadataRecord::Imported { .. }
        )
    }
}

/// A value carried as JSON text.
mod json_text {
    use serde::de::{DeserializeOwned, Error as _};
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        serde_json::to_string(v)
            .map_err(S::Error::custom)?
            .serialize(s)
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(D::Error::custom)
    }
}

fn conflict(what: String) -> Error {
    Error::MetadataConflict(what)
}

fn live_topic<'a>(
    m: &'a mut Metadata,
    id: TopicId,
    name: &TopicName,
) -> Result<&'a mut TopicRecord, Error> {
    m.topics
        .get_mut(name)
        .filter(|t| t.id == id)
        .ok_or_else(|| conflict(format!("no topic {name} with id {id}")))
}

/// Applies one record to `m`; on [`Error::MetadataConflict`] `m` is
/// unchanged.
pub fn apply(m: &mut Metadata, record: &MetadataRecord) -> Result<(), Error> {
    match record {
        MetadataRecord::ClusterInitialized { cluster_id } => {
            if cluster_id.is_empty() {
                return Err(conflict("an empty cluster id".into()));
            }
            if !m.cluster_id.is_empty() && m.cluster_id != *cluster_id {
                return Err(conflict(format!(
                    "cluster id {cluster_id} for cluster {}",
                    m.cluster_id
                )));
            }
            m.cluster_id = cluster_id.clone();
        }
        MetadataRecord::Imported { metadata } => {
            if !m.cluster_id.is_empty() {
                return Err(conflict(format!(
                    "an import into cluster {}, which has its metadata already",
                    m.cluster_id
                )));
            }
            if metadata.cluster_id.is_empty() {
                return Err(conflict("an import without a cluster id".into()));
            }
            *m = (**metadata).clone();
        }
        MetadataRecord::TopicCreated { topic } => {
            if m.topics.get(&topic.name) == Some(topic) {
                // The same decision applied twice (a submission retried
                // after a lost answer): the random id makes it unmistakable.
                return Ok(());
            }
            if m.topics.contains_key(&topic.name) {
                return Err(conflict(format!("topic {} exists", topic.name)));
            }
            if m.topics.values().any(|t| t.id == topic.id) {
                return Err(conflict(format!("topic id {} is in use", topic.id)));
            }
            if topic.placements.len() != topic.partitions as usize {
                return Err(conflict(format!(
                    "topic {} has {} partitions but {} placements",
                    topic.name,
                    topic.partitions,
                    topic.placements.len()
                )));
            }
            m.topics.insert(topic.name.clone(), topic.clone());
        }
        MetadataRecord::PartitionsAdded {
            id,
            name,
            placements,
        } => {
            let t = live_topic(m, *id, name)?;
            t.partitions += placements.len() as i32;
            t.placements.extend(placements.iter().cloned());
        }
        MetadataRecord::TopicConfigSet { id, name, config } => {
            live_topic(m, *id, name)?.config = config.clone();
        }
        MetadataRecord::TopicDeleted { id, name } => {
            live_topic(m, *id, name)?;
            m.topics.remove(name);
        }
        MetadataRecord::BrokerConfigsSet { values } => m.broker_configs = values.clone(),
        MetadataRecord::NodeConfigsSet { node, values } => {
            if values.is_empty() {
                m.node_configs.remove(node);
            } else {
                m.node_configs.insert(*node, values.clone());
            }
        }
        MetadataRecord::ProducerIdsReserved { limit } => {
            // Strictly above: two brokers reserving from the same limit
            // must not both get the same block.
            if *limit <= m.producer_id_limit {
                return Err(conflict(format!(
                    "producer id limit {limit} is not above {}",
                    m.producer_id_limit
                )));
            }
            m.producer_id_limit = *limit;
        }
        MetadataRecord::TenantsSet { tenants } => m.tenants = tenants.clone(),
        MetadataRecord::ScramCredentialSet {
            user,
            mechanism,
            credential,
        } => {
            m.scram_credentials
                .entry(user.clone())
                .or_default()
                .insert(*mechanism, credential.clone());
        }
        MetadataRecord::ScramCredentialDeleted { user, mechanism } => {
            let Some(of_user) = m.scram_credentials.get_mut(user) else {
                return Err(conflict(format!("user {user} has no SCRAM credential")));
            };
            if of_user.remove(mechanism).is_none() {
                return Err(conflict(format!(
                    "user {user} has no {} credential",
                    mechanism.name()
                )));
            }
            if of_user.is_empty() {
                m.scram_credentials.remove(user);
            }
        }
        MetadataRecord::AclCreated { binding } => {
            m.acls.insert(binding.clone());
        }
        MetadataRecord::AclDeleted { binding } => {
            m.acls.remove(binding);
        }
        MetadataRecord::ClientQuotaSet { entity, key, value } => match value {
            Some(v) => {
                m.client_quotas
                    .entry(entity.clone())
                    .or_default()
                    .insert(key.clone(), *v);
            }
            None => {
                if let Some(values) = m.client_quotas.get_mut(entity) {
                    values.remove(key);
                    if values.is_empty() {
                        m.client_quotas.remove(entity);
                    }
                }
            }
        },
        MetadataRecord::BrokerRegistered { node, registration } => {
            if registration.epoch <= m.last_broker_epoch {
                return Err(conflict(format!(
                    "broker {node} registration epoch {} is not above {}",
                    registration.epoch, m.last_broker_epoch
                )));
            }
            m.last_broker_epoch = registration.epoch;
            m.brokers.insert(*node, registration.clone());
        }
        MetadataRecord::BrokerFencing {
            node,
            epoch,
            fenced,
            shutdown,
        } => match m.brokers.get_mut(node) {
            Some(b) if b.epoch == *epoch => {
                if *shutdown {
                    b.fenced = true;
                    b.shut_down = true;
                } else if !b.shut_down {
                    b.fenced = *fenced;
                }
            }
            _ => {
                return Err(conflict(format!(
                    "broker {node} has no registration of epoch {epoch}"
                )))
            }
        },
        MetadataRecord::CoordinatorsPlaced { nodes } => {
            if !m.coordinators.is_empty() {
                return Err(conflict("the coordinators are placed already".into()));
            }
            if nodes.is_empty() {
                return Err(conflict("no coordinator slots".into()));
            }
            m.coordinators = nodes.clone();
        }
        MetadataRecord::Expect { expect } => {
            let topic = |id: &TopicId| m.topics.values().find(|t| t.id == *id);
            let holds = match expect {
                Expectation::PartitionCount { id, count } => {
                    topic(id).is_some_and(|t| t.partitions == *count)
                }
                Expectation::TopicConfig { id, config } => {
                    topic(id).is_some_and(|t| t.config == *config)
                }
                Expectation::BrokerConfigs { values } => m.broker_configs == *values,
                Expectation::NodeConfigs { node, values } => {
                    m.node_configs.get(node).cloned().unwrap_or_default() == *values
                }
                Expectation::Tenants { tenants } => m.tenants == *tenants,
            };
            if !holds {
                let what = match expect {
                    Expectation::PartitionCount { .. } => "the topic's partitions",
                    Expectation::TopicConfig { .. } => "the topic's configuration",
                    Expectation::BrokerConfigs { .. } => "the broker configuration",
                    Expectation::NodeConfigs { .. } => "the broker's own configuration",
                    Expectation::Tenants { .. } => "the tenants and namespaces",
                };
                return Err(conflict(format!("{what} changed meanwhile")));
            }
        }
        MetadataRecord::PartitionChanged {
            id,
            partition,
            state,
        } => {
            let Some(topic) = m.topics.values_mut().find(|t| t.id == *id) else {
                return Err(conflict(format!("no topic with id {id}")));
            };
            let Some(current) = usize::try_from(*partition)
                .ok()
                .and_then(|p| topic.placements.get_mut(p))
            else {
                return Err(conflict(format!(
                    "topic {} has no partition {partition}",
                    topic.name
                )));
            };
            if state.partition_epoch <= current.partition_epoch {
                return Err(conflict(format!(
                    "partition {}-{partition} is at partition epoch {}, not below {}",
                    topic.name, current.partition_epoch, state.partition_epoch
                )));
            }
            *current = state.clone();
        }
        MetadataRecord::BrokerUnregistered { node, epoch } => {
            if m.brokers.get(node).map(|b| b.epoch) != Some(*epoch) {
                return Err(conflict(format!(
                    "broker {node} has no registration of epoch {epoch}"
                )));
            }
            m.brokers.remove(node);
        }
    }
    Ok(())
}

/// Applies `records` in order to a copy of `m`: the new state, or the
/// first conflict (and `m` untouched).
pub fn apply_all(m: &Metadata, records: &[MetadataRecord]) -> Result<Metadata, Error> {
    let mut next = m.clone();
    for r in records {
        apply(&mut next, r)?;
    }
    Ok(next)
}

#[cfg(test)]
mod tests;
