//! Tenants and namespaces on the broker: creating, changing and deleting
//! them through the metadata log, and the topics each holds. The rules
//! themselves (what a namespace inherits, which names belong where) are
//! `magnetar_metadata::tenancy`.

use std::collections::BTreeMap;
use std::sync::Arc;

use model::pulsar_name::{Namespace, DEFAULT_TENANT};
use model::TopicName;
use tracing::info;

pub use magnetar_metadata::tenancy::*;

use crate::config::{EffectiveValue, TopicConfig};
use crate::metadata_store::{NamespaceRecord, TenantRecord};
use crate::{Broker, Error, Topic};

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
                Some(r) => Ok(r.apply(&mut record.config)?),
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
