//! DescribeConfigs and IncrementalAlterConfigs.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, PerItem};
use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::metadata::NodeId;

/// Something that has configs.
///
/// ```
/// use magnetar_client::ConfigResource;
/// let t = ConfigResource::Topic("orders".into());
/// let b = ConfigResource::Broker(1);
/// assert_ne!(t, b);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConfigResource {
    /// A topic's overrides.
    Topic(String),
    /// A broker's (dynamic) configuration, by node id.
    Broker(i32),
}

impl ConfigResource {
    fn wire(&self) -> (i8, String) {
        match self {
            ConfigResource::Topic(t) => (2, t.clone()),
            ConfigResource::Broker(id) => (4, id.to_string()),
        }
    }

    fn matches(&self, ty: i8, name: &str) -> bool {
        let (t, n) = self.wire();
        t == ty && n == name
    }
}

/// One config value as DescribeConfigs reported it.
///
/// ```no_run
/// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
/// let res = admin.describe_configs(&[magnetar_client::ConfigResource::Topic("t".into())]).await?;
/// for (_, entries) in res {
///     for e in entries? { println!("{} = {:?} (default: {})", e.name, e.value, e.is_default()); }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Key.
    pub name: String,
    /// Value; `None` for sensitive or unset values.
    pub value: Option<String>,
    /// Whether it cannot be changed at runtime.
    pub read_only: bool,
    /// Whether the value is sensitive (hidden).
    pub is_sensitive: bool,
    /// Kafka's config source: 1 dynamic topic, 2 dynamic broker, 3 dynamic
    /// default broker, 4 static broker, 5 default, 6 dynamic broker logger,
    /// -1 unknown.
    pub source: i8,
}

impl ConfigEntry {
    /// Whether the value is a default rather than an override.
    pub fn is_default(&self) -> bool {
        self.source == 5
    }
}

/// One change for IncrementalAlterConfigs.
///
/// ```
/// use magnetar_client::AlterConfigOp;
/// let ops = vec![AlterConfigOp::set("retention.ms", "60000"), AlterConfigOp::delete("segment.ms")];
/// assert_eq!(ops.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Sets a value.
    Set(String, String),
    /// Removes an override (back to the default).
    Delete(String),
}

impl AlterConfigOp {
    /// `SET key=value`.
    pub fn set(key: impl Into<String>, value: impl Into<String>) -> AlterConfigOp {
        AlterConfigOp::Set(key.into(), value.into())
    }

    /// `DELETE key`.
    pub fn delete(key: impl Into<String>) -> AlterConfigOp {
        AlterConfigOp::Delete(key.into())
    }

    fn wire(&self) -> AlterableConfig {
        match self {
            AlterConfigOp::Set(k, v) => AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(v.clone()))),
            AlterConfigOp::Delete(k) => AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(1)
                .with_value(None),
        }
    }
}

impl Admin {
    /// Broker resources must be asked of that broker; topics of any.
    async fn config_connection(&self, resources: &[&ConfigResource]) -> Result<Connection> {
        match resources.iter().find_map(|r| match r {
            ConfigResource::Broker(id) => Some(*id),
            ConfigResource::Topic(_) => None,
        }) {
            Some(id) => self.client.connection(NodeId(id)).await,
            None => self.client.any_connection().await,
        }
    }

    /// Every config of each resource.
    pub async fn describe_configs(
        &self,
        resources: &[ConfigResource],
    ) -> Result<PerItem<ConfigResource, Vec<ConfigEntry>>> {
        let mut out = Vec::with_capacity(resources.len());
        // One request per broker resource (each goes to its broker), one
        // for all topics.
        let (brokers, topics): (Vec<&ConfigResource>, Vec<&ConfigResource>) = resources
            .iter()
            .partition(|r| matches!(r, ConfigResource::Broker(_)));
        let mut groups: Vec<Vec<&ConfigResource>> = brokers.into_iter().map(|b| vec![b]).collect();
        if !topics.is_empty() {
            groups.push(topics);
        }
        for group in groups {
            let conn = self.config_connection(&group).await?;
            let v = conn.versions().pick::<DescribeConfigsRequest>()?;
            let req = DescribeConfigsRequest::default().with_resources(
                group
                    .iter()
                    .map(|r| {
                        let (ty, name) = r.wire();
                        DescribeConfigsResource::default()
                            .with_resource_type(ty)
                            .with_resource_name(StrBytes::from_string(name))
                            .with_configuration_keys(None)
                    })
                    .collect(),
            );
            let resp = conn.send(v, &req)?.await?;
            for r in group {
                let res = resp
                    .results
                    .iter()
                    .find(|x| r.matches(x.resource_type, x.resource_name.as_str()))
                    .ok_or_else(|| Error::Protocol(format!("no result for {r:?}")))
                    .and_then(|x| {
                        Error::check(x.error_code, x.error_message.as_deref())?;
                        Ok(x.configs
                            .iter()
                            .map(|c| ConfigEntry {
                                name: c.name.to_string(),
                                value: c.value.as_ref().map(|v| v.to_string()),
                                read_only: c.read_only,
                                is_sensitive: c.is_sensitive,
                                source: c.config_source,
                            })
                            .collect())
                    });
                out.push((r.clone(), res));
            }
        }
        Ok(out)
    }

    /// Applies SET/DELETE changes to each resource (or only validates them).
    pub async fn incremental_alter_configs(
        &self,
        changes: &[(ConfigResource, Vec<AlterConfigOp>)],
        validate_only: bool,
    ) -> Result<PerItem<ConfigResource, ()>> {
        let mut out = Vec::with_capacity(changes.len());
        for (res, ops) in changes {
            let conn = match res {
                ConfigResource::Broker(_) => self.config_connection(&[res]).await?,
                ConfigResource::Topic(_) => self.controller_connection().await?,
            };
            let v = conn.versions().pick::<IncrementalAlterConfigsRequest>()?;
            let (ty, name) = res.wire();
            let req = IncrementalAlterConfigsRequest::default()
                .with_validate_only(validate_only)
                .with_resources(vec![AlterConfigsResource::default()
                    .with_resource_type(ty)
                    .with_resource_name(StrBytes::from_string(name))
                    .with_configs(ops.iter().map(AlterConfigOp::wire).collect())]);
            let resp = conn.send(v, &req)?.await?;
            let r = resp
                .responses
                .iter()
                .find(|x| res.matches(x.resource_type, x.resource_name.as_str()))
                .ok_or_else(|| Error::Protocol(format!("no result for {res:?}")))
                .and_then(|x| Error::check(x.error_code, x.error_message.as_deref()));
            out.push((res.clone(), r));
        }
        Ok(out)
    }
}
