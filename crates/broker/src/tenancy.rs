//! Tenants and namespaces: Pulsar's administrative hierarchy over the
//! broker's one set of (Kafka-named) topics.
//!
//! - A tenant has upstream's `TenantInfo` (admin roles, allowed clusters)
//!   and namespaces; a namespace has policies. Both live in the metadata
//!   file (the commit point) and are published to readers after the write.
//! - `public` and `public/default` always exist and cannot be deleted.
//! - Which namespace a topic is in follows from its Kafka name
//!   (`model::pulsar_name`): `t.ns.rest` is in `t/ns` while that namespace
//!   exists, every other topic in `public/default`. So Kafka topics named
//!   `t.ns.*` join `t/ns` when it is created.
//! - A namespace's policies are topic configuration keys (retention is
//!   `retention.ms` and `retention.bytes`), inherited by each of its topics
//!   that does not override the key, including topics created later;
//!   DescribeConfigs reports them with the namespace as their source.
//! - Deleting a tenant with namespaces, or a namespace with topics, needs
//!   `force`, which deletes them first.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use model::pulsar_name::{Namespace, PulsarTopic, DEFAULT_TENANT};
use model::TopicName;
use tracing::info;

use crate::config::{BrokerConfig, EffectiveValue, TopicConfig};
use crate::metadata_store::{NamespaceRecord, TenantRecord};
use crate::{Broker, Error, Topic};

/// The name of this (single-broker) cluster, as upstream's standalone
/// broker calls its cluster; the only value `allowedClusters` may hold.
pub const CLUSTER_NAME: &str = "standalone";

/// Tenants by name, with their namespaces.
pub(crate) type Tenants = BTreeMap<String, TenantRecord>;

/// Upstream Pulsar's `TenantInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantInfo {
    /// Roles allowed to administer the tenant (recorded; there is no
    /// authorization yet).
    pub admin_roles: BTreeSet<String>,
    /// Clusters the tenant may use; must name this cluster.
    pub allowed_clusters: BTreeSet<String>,
}

/// Upstream Pulsar's `RetentionPolicies` of a namespace: -1 is no limit,
/// 0 (both limits) is no retention, and one limit 0 with the other not is
/// refused, as upstream does.
///
/// Stored as the topic keys `retention.ms` (`time_in_minutes` × 60,000;
/// 0 is kept as 1 ms, the smallest value the key takes) and
/// `retention.bytes` (`size_in_mb` × 1 MiB). Unlike upstream, a
/// subscription does not hold messages back: time and size alone decide,
/// as for every Magnetar topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// `retentionTimeInMinutes`.
    pub time_in_minutes: i64,
    /// `retentionSizeInMB`.
    pub size_in_mb: i64,
}

const MS_PER_MINUTE: i64 = 60_000;
const BYTES_PER_MB: i64 = 1024 * 1024;

impl Retention {
    /// Upstream's rules, plus limits that fit the topic keys.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: &str| {
            Err(Error::InvalidPolicy(format!(
                "Invalid retention policy: {reason}"
            )))
        };
        if self.size_in_mb < -1 {
            return bad("size limit must be >= -1");
        }
        if self.time_in_minutes < -1 {
            return bad("time limit must be >= -1");
        }
        if (self.time_in_minutes == 0) != (self.size_in_mb == 0) {
            return bad(
                "a single time or size limit of 0 is invalid when the other is not 0; \
                 use -1 to ignore one limit, or 0 for both to disable retention",
            );
        }
        if self.time_in_minutes > i64::MAX / MS_PER_MINUTE {
            return bad("time limit too large");
        }
        if self.size_in_mb > i64::MAX / BYTES_PER_MB {
            return bad("size limit too large");
        }
        Ok(())
    }

    /// Writes the policy into `config` as `retention.ms`/`retention.bytes`.
    fn apply(&self, config: &mut TopicConfig) -> Result<(), Error> {
        let ms = match self.time_in_minutes {
            -1 => -1,
            0 => 1,
            m => m * MS_PER_MINUTE,
        };
        let bytes = match self.size_in_mb {
            -1 => -1,
            s => s * BYTES_PER_MB,
        };
        config.set("retention.ms", &ms.to_string())?;
        Ok(config.set("retention.bytes", &bytes.to_string())?)
    }

    /// The policy `config` holds, if it sets retention.
    fn of(config: &TopicConfig) -> Option<Retention> {
        let get = |k: &str| {
            config
                .overrides()
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
        };
        let (ms, bytes) = (get("retention.ms"), get("retention.bytes"));
        if ms.is_none() && bytes.is_none() {
            return None;
        }
        let scale = |v: Option<i64>, unit: i64| match v {
            None | Some(-1) => -1,
            Some(v) => v / unit,
        };
        Some(Retention {
            time_in_minutes: scale(ms, MS_PER_MINUTE),
            size_in_mb: scale(bytes, BYTES_PER_MB),
        })
    }
}

/// Upstream's checks of a `TenantInfo`.
fn validate_tenant_info(info: &TenantInfo) -> Result<(), Error> {
    if info.allowed_clusters.is_empty() || info.allowed_clusters.iter().any(|c| c.trim().is_empty())
    {
        return Err(Error::InvalidPolicy(
            "Clusters cannot be empty or blank".into(),
        ));
    }
    if let Some(c) = info.allowed_clusters.iter().find(|c| *c != CLUSTER_NAME) {
        return Err(Error::InvalidPolicy(format!(
            "Clusters do not exist: {c} (this cluster is {CLUSTER_NAME})"
        )));
    }
    if info.admin_roles.iter().any(|r| r.trim() != r) {
        return Err(Error::InvalidPolicy(
            "AdminRoles contains whitespace in the beginning or end.".into(),
        ));
    }
    Ok(())
}

fn exists(tenants: &Tenants, ns: &Namespace) -> bool {
    tenants
        .get(&ns.tenant)
        .is_some_and(|t| t.namespaces.contains_key(&ns.namespace))
}

fn namespace_mut<'a>(
    tenants: &'a mut Tenants,
    ns: &Namespace,
) -> Result<&'a mut NamespaceRecord, Error> {
    tenants
        .get_mut(&ns.tenant)
        .and_then(|t| t.namespaces.get_mut(&ns.namespace))
        .ok_or_else(|| Error::NamespaceNotFound(ns.to_string()))
}

/// The namespace Kafka topic `name` is in.
pub(crate) fn namespace_of(tenants: &Tenants, name: &TopicName) -> Namespace {
    PulsarTopic::from_kafka(name, |ns| exists(tenants, ns)).namespace
}

/// The policies topic `name` inherits (none for internal topics, whose
/// settings the broker manages).
fn inherited<'a>(tenants: &'a Tenants, name: &TopicName) -> Option<&'a TopicConfig> {
    if name.is_internal() {
        return None;
    }
    let ns = namespace_of(tenants, name);
    tenants
        .get(&ns.tenant)?
        .namespaces
        .get(&ns.namespace)
        .map(|r| &r.config)
}

/// The storage settings of topic `name` with overrides `config`: its own
/// overrides, then its namespace's policies, then the broker's keys.
pub(crate) fn log_config(
    tenants: &Tenants,
    broker: &BrokerConfig,
    name: &TopicName,
    config: &TopicConfig,
) -> storage::LogConfig {
    match inherited(tenants, name) {
        Some(ns) => config.log_config_in(ns, broker),
        None => config.log_config(broker),
    }
}

/// Checks a topic's overrides in combination with its namespace's policies
/// and the broker's keys (see [`TopicConfig::validate_in`]).
pub(crate) fn validate_topic_config(
    tenants: &Tenants,
    broker: &BrokerConfig,
    name: &TopicName,
    config: &TopicConfig,
) -> Result<(), Error> {
    match inherited(tenants, name) {
        Some(ns) => Ok(config.validate_in(ns, broker)?),
        None => Ok(config.validate_in(&TopicConfig::default(), broker)?),
    }
}

/// Whether a topic named `name` would be in namespace `ns`: the namespace
/// exists and the name is not read back as another namespace's topic.
pub(crate) fn check_topic_namespace(
    tenants: &Tenants,
    name: &TopicName,
    ns: &Namespace,
) -> Result<(), Error> {
    if !exists(tenants, ns) {
        return Err(Error::NamespaceNotFound(ns.to_string()));
    }
    if namespace_of(tenants, name) != *ns {
        return Err(Error::InvalidTopic(model::Error::InvalidPulsarName {
            name: name.to_string(),
            reason: "the Kafka name is one of another namespace's topics",
        }));
    }
    Ok(())
}

impl Broker {
    /// The clusters tenants may name: this one.
    pub fn clusters(&self) -> Vec<String> {
        vec![CLUSTER_NAME.to_string()]
    }

    /// Every tenant's name, sorted.
    pub fn tenant_names(&self) -> Vec<String> {
        self.tenants.read().keys().cloned().collect()
    }

    /// A tenant's info.
    pub fn tenant(&self, name: &str) -> Result<TenantInfo, Error> {
        let tenants = self.tenants.read();
        let t = tenants
            .get(name)
            .ok_or_else(|| Error::TenantNotFound(name.to_string()))?;
        Ok(TenantInfo {
            admin_roles: t.admin_roles.clone(),
            allowed_clusters: t.allowed_clusters.clone(),
        })
    }

    /// Creates a tenant (without namespaces).
    pub fn create_tenant(&self, name: &str, info: TenantInfo) -> Result<(), Error> {
        Namespace::check_tenant(name)?;
        validate_tenant_info(&info)?;
        self.change_tenants(|tenants| {
            if tenants.contains_key(name) {
                return Err(Error::TenantExists(name.to_string()));
            }
            tenants.insert(
                name.to_string(),
                TenantRecord {
                    admin_roles: info.admin_roles,
                    allowed_clusters: info.allowed_clusters,
                    namespaces: BTreeMap::new(),
                },
            );
            Ok(())
        })?;
        info!(tenant = name, "created tenant");
        Ok(())
    }

    /// Replaces a tenant's info.
    pub fn update_tenant(&self, name: &str, info: TenantInfo) -> Result<(), Error> {
        validate_tenant_info(&info)?;
        self.change_tenants(|tenants| {
            let t = tenants
                .get_mut(name)
                .ok_or_else(|| Error::TenantNotFound(name.to_string()))?;
            t.admin_roles = info.admin_roles;
            t.allowed_clusters = info.allowed_clusters;
            Ok(())
        })
    }

    /// Deletes a tenant. One with namespaces is refused unless `force`,
    /// which deletes its namespaces (and their topics) first; `public`
    /// cannot be deleted.
    pub fn delete_tenant(&self, name: &str, force: bool) -> Result<(), Error> {
        if name == DEFAULT_TENANT {
            return Err(Error::Undeletable(format!("tenant {name}")));
        }
        if force {
            for ns in self.namespaces(name)? {
                match self.delete_namespace(&ns, true) {
                    Ok(()) | Err(Error::NamespaceNotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.change_tenants(|tenants| {
            let t = tenants
                .get(name)
                .ok_or_else(|| Error::TenantNotFound(name.to_string()))?;
            if !t.namespaces.is_empty() {
                return Err(Error::TenantNotEmpty(name.to_string()));
            }
            tenants.remove(name);
            Ok(())
        })?;
        info!(tenant = name, "deleted tenant");
        Ok(())
    }

    /// The namespaces of a tenant, sorted.
    pub fn namespaces(&self, tenant: &str) -> Result<Vec<Namespace>, Error> {
        let tenants = self.tenants.read();
        let t = tenants
            .get(tenant)
            .ok_or_else(|| Error::TenantNotFound(tenant.to_string()))?;
        Ok(t.namespaces
            .keys()
            .map(|ns| Namespace {
                tenant: tenant.to_string(),
                namespace: ns.clone(),
            })
            .collect())
    }

    /// Whether a namespace exists.
    pub fn namespace_exists(&self, ns: &Namespace) -> bool {
        exists(&self.tenants.read(), ns)
    }

    /// Creates a namespace of an existing tenant, with a retention policy
    /// if given. Kafka topics already named `tenant.namespace.*` become
    /// its topics.
    pub fn create_namespace(
        &self,
        ns: &Namespace,
        retention: Option<Retention>,
    ) -> Result<(), Error> {
        let ns = Namespace::new(&ns.tenant, &ns.namespace)?;
        if let Some(r) = &retention {
            r.validate()?;
        }
        self.change_tenants(|tenants| {
            let t = tenants
                .get_mut(&ns.tenant)
                .ok_or_else(|| Error::TenantNotFound(ns.tenant.clone()))?;
            if t.namespaces.contains_key(&ns.namespace) {
                return Err(Error::NamespaceExists(ns.to_string()));
            }
            let mut record = NamespaceRecord::default();
            if let Some(r) = &retention {
                r.apply(&mut record.config)?;
            }
            t.namespaces.insert(ns.namespace.clone(), record);
            Ok(())
        })?;
        info!(namespace = %ns, "created namespace");
        Ok(())
    }

    /// Deletes a namespace. One with topics is refused unless `force`,
    /// which deletes them first (as Kafka's DeleteTopics does: their
    /// groups' offsets, subscriptions and schemas go too); `public/default`
    /// cannot be deleted.
    pub fn delete_namespace(&self, ns: &Namespace, force: bool) -> Result<(), Error> {
        if ns.is_default() {
            return Err(Error::Undeletable(format!("namespace {ns}")));
        }
        if !self.namespace_exists(ns) {
            return Err(Error::NamespaceNotFound(ns.to_string()));
        }
        if force {
            for t in self.namespace_topics(ns) {
                match self.delete_topic(t.name.as_str()) {
                    Ok(_) | Err(Error::UnknownTopic(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.change_tenants(|tenants| {
            namespace_mut(tenants, ns)?;
            // Checked under the metadata lock: a topic created meanwhile
            // (even during a forced delete) keeps the namespace.
            if self
                .topics()
                .iter()
                .any(|t| !t.name.is_internal() && namespace_of(tenants, &t.name) == *ns)
            {
                return Err(Error::NamespaceNotEmpty(ns.to_string()));
            }
            if let Some(t) = tenants.get_mut(&ns.tenant) {
                t.namespaces.remove(&ns.namespace);
            }
            Ok(())
        })?;
        info!(namespace = %ns, "deleted namespace");
        Ok(())
    }

    /// A namespace's retention policy; `None` when it sets none (its
    /// topics then follow `log.retention.*`).
    pub fn namespace_retention(&self, ns: &Namespace) -> Result<Option<Retention>, Error> {
        let tenants = self.tenants.read();
        let record = tenants
            .get(&ns.tenant)
            .and_then(|t| t.namespaces.get(&ns.namespace))
            .ok_or_else(|| Error::NamespaceNotFound(ns.to_string()))?;
        Ok(Retention::of(&record.config))
    }

    /// Sets (or with `None` removes) a namespace's retention policy; its
    /// topics without their own `retention.*` overrides follow at once.
    pub fn set_namespace_retention(
        &self,
        ns: &Namespace,
        retention: Option<Retention>,
    ) -> Result<(), Error> {
        if let Some(r) = &retention {
            r.validate()?;
        }
        self.change_tenants(|tenants| {
            let record = namespace_mut(tenants, ns)?;
            match &retention {
                Some(r) => r.apply(&mut record.config),
                None => {
                    record.config.remove("retention.ms")?;
                    Ok(record.config.remove("retention.bytes")?)
                }
            }
        })?;
        info!(namespace = %ns, ?retention, "set namespace retention");
        Ok(())
    }

    /// The namespace a Kafka topic is in.
    pub fn namespace_of(&self, name: &TopicName) -> Namespace {
        namespace_of(&self.tenants.read(), name)
    }

    /// The topics of a namespace (internal topics excluded), sorted by
    /// Kafka name.
    pub fn namespace_topics(&self, ns: &Namespace) -> Vec<Arc<Topic>> {
        let tenants = self.tenants.read().clone();
        self.topics()
            .into_iter()
            .filter(|t| !t.name.is_internal() && namespace_of(&tenants, &t.name) == *ns)
            .collect()
    }

    /// Every topic key's value in effect for topic `name` with overrides
    /// `config` and where it comes from: the topic's override, its
    /// namespace's policy, the broker.
    pub fn effective_topic_config(
        &self,
        name: &TopicName,
        config: &TopicConfig,
    ) -> Vec<EffectiveValue> {
        let broker_config = self.config();
        let tenants = self.tenants.read().clone();
        match inherited(&tenants, name) {
            Some(ns) => config.effective_in(ns, &broker_config),
            None => config.effective(&broker_config),
        }
    }

    /// Applies `change` to a copy of the tenants and commits the result
    /// through the controller quorum; every broker then publishes it and
    /// pushes the storage settings it implies to its partitions. Nothing
    /// changes when `change` refuses or the commit fails.
    fn change_tenants<T>(
        &self,
        change: impl FnOnce(&mut Tenants) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut change = Some(change);
        self.cluster_change_tenants(|tenants| match change.take() {
            Some(f) => f(tenants),
            None => Err(Error::MetadataConflict(
                "the tenants changed concurrently; retry".into(),
            )),
        })
    }
}

#[cfg(test)]
#[path = "tenancy_tests.rs"]
mod tests;
