//! The admin client: topics, configs, partitions, records, groups, the
//! cluster, partition lookups (PIP-344 semantics) and batched coordinator
//! lookups (KIP-699), SCRAM credentials.

mod configs;
mod groups;
mod offsets;
mod reassignments;
mod scram;
mod topics;

use std::time::Duration;

use kafka_protocol::messages::{DescribeClusterRequest, MetadataRequest};
use kafka_protocol::ResponseError;

pub use configs::{AlterConfigOp, ConfigEntry, ConfigResource};
pub use groups::{GroupDescription, GroupListing, GroupMember, OffsetAndMetadata};
pub use offsets::{ListedOffset, OffsetSpec};
pub use reassignments::{PartitionReassignment, Reassignment};
pub use topics::{CreatedTopic, NewTopic};

use crate::client::{Client, ClientConfig};
use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::metadata::{Node, NodeId};

/// Results of a batched admin call, one per item asked, in the order asked.
///
/// ```no_run
/// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
/// let results: magnetar_client::PerItem<String, ()> = admin.delete_topics(&["a", "b"]).await?;
/// for (topic, r) in results {
///     if let Err(e) = r { eprintln!("{topic}: {e}"); }
/// }
/// # Ok(()) }
/// ```
pub type PerItem<K, T> = Vec<(K, Result<T>)>;

/// What DescribeCluster (or Metadata, on older brokers) says about the
/// cluster.
///
/// ```no_run
/// # async fn f(admin: magnetar_client::Admin) -> magnetar_client::Result<()> {
/// let c: magnetar_client::ClusterDescription = admin.describe_cluster().await?;
/// println!("cluster {:?}, controller {:?}, {} brokers", c.cluster_id, c.controller, c.brokers.len());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The controller's node id.
    pub controller: Option<NodeId>,
    /// The brokers, sorted by id.
    pub brokers: Vec<Node>,
}

/// Administrative operations on a Kafka-compatible cluster.
///
/// ```no_run
/// # async fn f() -> magnetar_client::Result<()> {
/// use magnetar_client::{Admin, ClientConfig, NewTopic};
/// let admin = Admin::connect(ClientConfig::new(["127.0.0.1:9092"])).await?;
/// admin.create_topic(NewTopic::new("orders", 6).config("retention.ms", "86400000")).await?;
/// let parts = admin.get_partitions_for_topic("orders", false).await?;
/// assert_eq!(parts.len(), 6);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    /// Bootstraps a new [`Client`] for this admin.
    pub async fn connect(config: ClientConfig) -> Result<Admin> {
        Ok(Admin::new(Client::connect(config).await?))
    }

    /// An admin client sharing `client`'s connections.
    pub fn new(client: Client) -> Admin {
        Admin { client }
    }

    /// The cluster handle.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn timeout_ms(&self) -> i32 {
        self.client
            .config()
            .get_request_timeout()
            .as_millis()
            .min(i32::MAX as u128) as i32
    }

    /// The controller, for requests Kafka wants there; any broker when the
    /// controller is unknown (KRaft brokers forward those requests).
    async fn controller_connection(&self) -> Result<Connection> {
        if let Some(c) = self.client.metadata().controller {
            if let Ok(conn) = self.client.connection(c).await {
                return Ok(conn);
            }
        }
        self.client.any_connection().await
    }

    /// The partition ids of `topic` (PIP-344's `getPartitionsForTopic`,
    /// mapped to Kafka).
    ///
    /// - An existing topic gives its partitions (a non-partitioned topic
    ///   has the one partition 0).
    /// - A missing topic with `create_if_auto_creation_enabled = false` is
    ///   [`Error::NotFound`]; nothing is created.
    /// - With `true`, the broker applies its auto-creation policy; if it
    ///   refuses, the result is [`Error::NotFound`] as well.
    /// - A broker whose Metadata API is older than v4 cannot be told not to
    ///   create, so `false` gives [`Error::NotSupported`] instead of risking
    ///   a creation.
    pub async fn get_partitions_for_topic(
        &self,
        topic: &str,
        create_if_auto_creation_enabled: bool,
    ) -> Result<Vec<i32>> {
        let create = create_if_auto_creation_enabled;
        let conn = self.client.any_connection().await?;
        let v = conn.versions().pick::<MetadataRequest>()?;
        if v < 4 && !create {
            return Err(Error::NotSupported(format!(
                "{}: Metadata v{v} cannot forbid topic auto-creation (needs v4+)",
                conn.addr()
            )));
        }
        let mut wait = Duration::from_millis(20);
        for attempt in 0.. {
            let results = self
                .client
                .metadata_on(&conn, Some(&[topic]), create)
                .await?;
            let r = results
                .into_iter()
                .find(|(n, _)| n == topic)
                .map(|(_, r)| r)
                .unwrap_or_else(|| Err(Error::NotFound(format!("topic {topic}"))));
            match r {
                Ok(md) => return Ok(md.partitions.iter().map(|p| p.partition).collect()),
                Err(e) if e.kafka_error() == Some(ResponseError::UnknownTopicOrPartition) => {
                    return Err(Error::NotFound(format!("topic {topic}")));
                }
                // Just created: partitions are not listed until a leader is.
                Err(e) if e.is_retriable() && attempt < 20 => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_millis(500));
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns")
    }

    /// The group coordinator of each group: one FindCoordinator v4+
    /// request carrying every key when the broker supports it (KIP-699),
    /// otherwise one request per group (pipelined on one connection).
    /// Results come in the order of `group_ids`. Same as
    /// [`Client::find_coordinators`].
    pub async fn find_coordinators(&self, group_ids: &[&str]) -> Result<PerItem<String, Node>> {
        self.client.find_coordinators(group_ids).await
    }

    /// The coordinator of one group.
    pub async fn find_coordinator(&self, group_id: &str) -> Result<Node> {
        self.client.find_coordinator(group_id).await
    }

    /// The cluster id, controller and brokers: DescribeCluster when the
    /// broker has it, otherwise Metadata.
    pub async fn describe_cluster(&self) -> Result<ClusterDescription> {
        let conn = self.client.any_connection().await?;
        if let Ok(v) = conn.versions().pick::<DescribeClusterRequest>() {
            let resp = conn.send(v, &DescribeClusterRequest::default())?.await?;
            Error::check(resp.error_code, resp.error_message.as_deref())?;
            let mut brokers: Vec<Node> = resp
                .brokers
                .iter()
                .map(|b| Node {
                    id: NodeId(b.broker_id.0),
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                })
                .collect();
            brokers.sort_by_key(|b| b.id);
            return Ok(ClusterDescription {
                cluster_id: Some(resp.cluster_id.to_string()),
                controller: (resp.controller_id.0 >= 0).then_some(NodeId(resp.controller_id.0)),
                brokers,
            });
        }
        self.client.metadata_on(&conn, Some(&[]), false).await?;
        let md = self.client.metadata();
        let mut brokers: Vec<Node> = md.brokers.values().cloned().collect();
        brokers.sort_by_key(|b| b.id);
        Ok(ClusterDescription {
            cluster_id: md.cluster_id.clone(),
            controller: md.controller,
            brokers,
        })
    }
}

#[cfg(test)]
mod tests;
