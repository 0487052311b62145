//! The cached view of the cluster: brokers, topics, partitions and leaders.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::MetadataResponse;

use crate::error::{BrokerError, Error};

/// A broker's node id.
///
/// ```
/// let n = magnetar_client::NodeId(1);
/// assert_eq!(n.to_string(), "1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub i32);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A broker: its id and where to reach it.
///
/// ```
/// let n = magnetar_client::Node { id: magnetar_client::NodeId(1), host: "localhost".into(), port: 9092, rack: None };
/// assert_eq!(n.addr(), "localhost:9092");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The node id.
    pub id: NodeId,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack, when the broker reports one.
    pub rack: Option<String>,
}

impl Node {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition of a topic as Metadata reported it.
///
/// ```
/// # fn f(p: &magnetar_client::PartitionMetadata) {
/// if let Some(leader) = p.leader { println!("partition {} led by {leader}", p.partition); }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// The leader, `None` while there is none.
    pub leader: Option<NodeId>,
    /// The leader epoch, -1 if unknown.
    pub leader_epoch: i32,
    /// All replicas.
    pub replicas: Vec<NodeId>,
    /// In-sync replicas.
    pub isr: Vec<NodeId>,
    /// Replicas on brokers that are down (fenced or unregistered).
    pub offline: Vec<NodeId>,
    /// A partition-level error (e.g. LEADER_NOT_AVAILABLE).
    pub error: Option<BrokerError>,
}

/// A topic as Metadata reported it.
///
/// ```
/// # fn f(t: &magnetar_client::TopicMetadata) {
/// println!("{} has {} partitions", t.name, t.partitions.len());
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// Topic id (Metadata v10+), `None` when the broker did not send one.
    pub id: Option<TopicId>,
    /// Whether it is an internal topic.
    pub is_internal: bool,
    /// Partitions sorted by index.
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    /// The partition with index `p`.
    pub fn partition(&self, p: i32) -> Option<&PartitionMetadata> {
        self.partitions
            .get(p as usize)
            .filter(|m| m.partition == p)
            .or_else(|| self.partitions.iter().find(|m| m.partition == p))
    }
}

/// A topic's UUID.
///
/// ```
/// let id = magnetar_client::TopicId(uuid::Uuid::nil());
/// assert!(id.is_nil());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopicId(pub uuid::Uuid);

impl TopicId {
    /// Whether this is the all-zero id (no id).
    pub fn is_nil(&self) -> bool {
        self.0.is_nil()
    }
}

impl std::fmt::Display for TopicId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A snapshot of what the client knows about the cluster.
///
/// ```no_run
/// # async fn f(client: magnetar_client::Client) {
/// let md = client.metadata();
/// for b in md.brokers.values() { println!("{} at {}", b.id, b.addr()); }
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClusterMetadata {
    /// Cluster id (Metadata v2+).
    pub cluster_id: Option<String>,
    /// The controller (Metadata v1+).
    pub controller: Option<NodeId>,
    /// Known brokers.
    pub brokers: HashMap<NodeId, Node>,
    /// Known topics.
    pub topics: HashMap<String, Arc<TopicMetadata>>,
}

/// What one Metadata request said about each topic it named.
pub(crate) type TopicResults = Vec<(String, Result<Arc<TopicMetadata>, Error>)>;

impl ClusterMetadata {
    /// Merges a response into a copy of this snapshot. `all_topics` means
    /// the request asked for every topic, so topics missing from the answer
    /// are dropped.
    pub(crate) fn merged(
        &self,
        resp: &MetadataResponse,
        all_topics: bool,
    ) -> (ClusterMetadata, TopicResults) {
        let mut next = ClusterMetadata {
            cluster_id: resp
                .cluster_id
                .as_ref()
                .map(|s| s.to_string())
                .or_else(|| self.cluster_id.clone()),
            controller: (resp.controller_id.0 >= 0)
                .then_some(NodeId(resp.controller_id.0))
                .or(self.controller),
            brokers: HashMap::with_capacity(resp.brokers.len()),
            topics: if all_topics {
                HashMap::new()
            } else {
                self.topics.clone()
            },
        };
        for b in &resp.brokers {
            let id = NodeId(b.node_id.0);
            next.brokers.insert(
                id,
                Node {
                    id,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                },
            );
        }
        if next.brokers.is_empty() {
            next.brokers = self.brokers.clone();
        }
        let mut results = Vec::with_capacity(resp.topics.len());
        for t in &resp.topics {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            if let Some(e) = Error::from_code(t.error_code, None) {
                // LEADER_NOT_AVAILABLE comes with partitions for a topic
                // that is still being created; anything else means no topic.
                if t.partitions.is_empty() {
                    next.topics.remove(&name);
                    results.push((name, Err(e)));
                    continue;
                }
            }
            let mut partitions: Vec<PartitionMetadata> = t
                .partitions
                .iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    leader: (p.leader_id.0 >= 0).then_some(NodeId(p.leader_id.0)),
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|r| NodeId(r.0)).collect(),
                    isr: p.isr_nodes.iter().map(|r| NodeId(r.0)).collect(),
                    offline: p.offline_replicas.iter().map(|r| NodeId(r.0)).collect(),
                    error: BrokerError::from_code(p.error_code, None),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            let md = Arc::new(TopicMetadata {
                name: name.clone(),
                id: (!t.topic_id.is_nil()).then_some(TopicId(t.topic_id)),
                is_internal: t.is_internal,
                partitions,
            });
            next.topics.insert(name.clone(), md.clone());
            results.push((name, Ok(md)));
        }
        (next, results)
    }

    /// The leader of `topic`/`partition`, if known.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<NodeId> {
        self.topics.get(topic)?.partition(partition)?.leader
    }
}
