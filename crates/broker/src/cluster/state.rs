//! What a broker holds of its cluster, a part of every [`crate::Broker`]:
//! the brokers and coordinators of the metadata it last applied
//! ([`ClusterView`]) and its link to the controller quorum
//! ([`ClusterState`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use super::ClusterLink;
use crate::metadata_records::NodeId;
use crate::metadata_store::Metadata;
use crate::Endpoint;

/// A registered broker as clients are told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Its node id.
    pub node: NodeId,
    /// Listener name → advertised `host:port`.
    pub endpoints: BTreeMap<String, String>,
    /// Fenced brokers lead nothing (their partitions are offline).
    pub fenced: bool,
}

impl BrokerInfo {
    /// The endpoint of listener `name`.
    pub fn endpoint(&self, name: &str) -> Option<Endpoint> {
        let (host, port) = self.endpoints.get(name)?.rsplit_once(':')?;
        Some(Endpoint {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port: port.parse().ok()?,
        })
    }
}

/// The brokers and coordinators of the applied metadata, for answering
/// clients without locking the metadata.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// Registered brokers by node id.
    pub brokers: BTreeMap<NodeId, BrokerInfo>,
    /// Coordinator slot → node (empty until placed).
    pub coordinators: Vec<NodeId>,
}

impl ClusterView {
    pub(crate) fn of(m: &Metadata) -> ClusterView {
        ClusterView {
            brokers: m
                .brokers
                .iter()
                .map(|(n, b)| {
                    (
                        *n,
                        BrokerInfo {
                            node: *n,
                            endpoints: b.endpoints.clone(),
                            fenced: b.fenced,
                        },
                    )
                })
                .collect(),
            coordinators: m.coordinators.clone(),
        }
    }

    /// Whether `node` is registered and unfenced.
    pub fn is_live(&self, node: NodeId) -> bool {
        self.brokers.get(&node).is_some_and(|b| !b.fenced)
    }
}

/// A broker's link to its controller quorum and what it applied.
pub(crate) struct ClusterState {
    pub(crate) link: Arc<ClusterLink>,
    /// The last metadata index applied here.
    pub(crate) applied: watch::Sender<u64>,
    pub(crate) view: RwLock<Arc<ClusterView>>,
    /// Topics whose hosted partitions could not be opened when their
    /// metadata was applied (e.g. the disk was full): retried until they
    /// open (see [`crate::Broker::retry_pending_topics`]).
    pub(crate) pending: parking_lot::Mutex<BTreeSet<model::TopicName>>,
    /// This process's registration epoch, once registered (-1 before):
    /// the controller refuses a leader's requests sent under an older one.
    pub(crate) registration_epoch: std::sync::atomic::AtomicI64,
}
