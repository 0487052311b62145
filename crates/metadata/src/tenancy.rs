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

use model::pulsar_name::{Namespace, PulsarTopic};
use model::TopicName;

pub use crate::image::CLUSTER_NAME;

use crate::image::{NamespaceRecord, TenantRecord};
use crate::MetadataError as Error;
use magnetar_config::{BrokerConfig, TopicConfig};

/// Tenants by name, with their namespaces.
pub type Tenants = BTreeMap<String, TenantRecord>;

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
    pub fn apply(&self, config: &mut TopicConfig) -> Result<(), Error> {
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
    pub fn of(config: &TopicConfig) -> Option<Retention> {
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
pub fn validate_tenant_info(info: &TenantInfo) -> Result<(), Error> {
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

/// Whether namespace `ns` exists.
pub fn exists(tenants: &Tenants, ns: &Namespace) -> bool {
    tenants
        .get(&ns.tenant)
        .is_some_and(|t| t.namespaces.contains_key(&ns.namespace))
}

/// Namespace `ns`'s record, to change it.
pub fn namespace_mut<'a>(
    tenants: &'a mut Tenants,
    ns: &Namespace,
) -> Result<&'a mut NamespaceRecord, Error> {
    tenants
        .get_mut(&ns.tenant)
        .and_then(|t| t.namespaces.get_mut(&ns.namespace))
        .ok_or_else(|| Error::NamespaceNotFound(ns.to_string()))
}

/// The namespace Kafka topic `name` is in.
pub fn namespace_of(tenants: &Tenants, name: &TopicName) -> Namespace {
    PulsarTopic::from_kafka(name, |ns| exists(tenants, ns)).namespace
}

/// The policies topic `name` inherits (none for internal topics, whose
/// settings the broker manages).
pub fn inherited<'a>(tenants: &'a Tenants, name: &TopicName) -> Option<&'a TopicConfig> {
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
pub fn log_config(
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
pub fn validate_topic_config(
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
pub fn check_topic_namespace(
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
