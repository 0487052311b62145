//! A broker as a member of a cluster (issue 10): its metadata is the
//! controller quorum's committed log, applied in order ([`apply`]); the
//! changes it is asked for are validated here, submitted through the
//! quorum's leader and answered once applied locally ([`ops`]); the active
//! controller registers, unfences and fences brokers ([`service`]).
//!
//! A standalone node (`magnetar standalone`) is such a member too, of a
//! quorum of one inside its process (see [`membership`]).

mod alter_partition;
mod apply;
mod controller_port;
mod dir;
mod elect;
mod link;
mod membership;
mod ops;
mod reassign;
mod service;
mod state;

use std::sync::Arc;

pub use alter_partition::AlterPartitionRefusal;
pub use dir::{ClusterDir, MetadataFile, IMPORTED_SUFFIX, MEMBERSHIP_FILE};
pub use link::ClusterLink;
pub use membership::{join, Membership};
pub(crate) use ops::next_cluster_producer_id;
pub use reassign::ReassignRequest;
pub use service::{
    run_fencing, BrokerService, QuorumDescription, ReplicaProgress, ServiceRequest, ServiceResponse,
};
pub(crate) use state::ClusterState;
pub use state::{BrokerInfo, ClusterView};

use crate::metadata_records::NodeId;
use crate::Endpoint;

/// Listener names in a broker registration's endpoints.
pub use magnetar_config::listeners::KAFKA_LISTENER;
/// The Pulsar binary protocol listener.
pub const PULSAR_LISTENER: &str = "pulsar";
/// The registration key of a broker's Pulsar TLS (`pulsar+ssl`) listener.
pub const PULSAR_TLS_LISTENER: &str = "pulsar+ssl";
/// The HTTP service listener.
pub const HTTP_LISTENER: &str = "http";
/// The HTTPS service listener.
pub const HTTPS_LISTENER: &str = "https";

/// The controller id clients are told (see [`crate::Broker::controller_id`]).
fn pick_controller(view: &ClusterView, leader: Option<NodeId>, me: NodeId) -> NodeId {
    leader
        .filter(|l| view.is_live(*l))
        .or_else(|| view.is_live(me).then_some(me))
        .or_else(|| view.brokers.values().find(|b| !b.fenced).map(|b| b.node))
        .unwrap_or(me)
}

impl crate::Broker {
    /// The cluster's brokers as last applied.
    pub fn cluster_view(&self) -> Arc<ClusterView> {
        self.cluster.view.read().clone()
    }

    /// Every registered broker's node id.
    pub fn registered_brokers(&self) -> Vec<NodeId> {
        self.cluster_view().brokers.keys().copied().collect()
    }

    /// The brokers clients may use, with the endpoint of `listener`: the
    /// unfenced ones.
    pub fn live_brokers(&self, listener: &str) -> Vec<(NodeId, Endpoint)> {
        self.cluster_view()
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter_map(|b| Some((b.node, b.endpoint(listener)?)))
            .collect()
    }

    /// The node reported as the controller: the quorum's leader when this
    /// node knows it (combined mode) and it is a live broker (clients send
    /// admin requests there), else this broker if live, else the lowest
    /// live one; any broker forwards them. Never a fenced broker while one
    /// is live: clients do not know a broker missing from the broker list
    /// and would wait for it (as Kafka, which names a live broker).
    pub fn controller_id(&self) -> NodeId {
        let view = self.cluster_view();
        pick_controller(&view, self.cluster.link.leader(), self.node_id())
    }

    /// Waits, at most `timeout`, until the metadata applied here shows this
    /// broker fenced (after its controlled shutdown: its partitions have
    /// other leaders then, and its replicas refuse writes); whether it is.
    pub async fn wait_fenced(&self, timeout: std::time::Duration) -> bool {
        self.wait_liveness(false, timeout).await
    }

    /// Waits, at most `timeout`, until the metadata applied here shows
    /// this broker registered and unfenced, so the first clients are told
    /// about it (Kafka's broker waits "for the broker to be unfenced"
    /// before it starts, too); whether it is.
    pub async fn wait_unfenced(&self, timeout: std::time::Duration) -> bool {
        self.wait_liveness(true, timeout).await
    }

    /// Waits, at most `timeout`, until the applied metadata shows this
    /// broker live (`true`) or fenced (`false`); whether it does.
    async fn wait_liveness(&self, live: bool, timeout: std::time::Duration) -> bool {
        let c = &self.cluster;
        let me = self.node_id();
        let mut applied = c.applied.subscribe();
        let reached = async {
            loop {
                if c.view.read().is_live(me) == live {
                    return;
                }
                if applied.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, reached).await.is_ok()
    }

    /// The leader clients are told for a partition in `state`: its leader
    /// if that broker is unfenced, else none (-1: offline).
    pub fn live_leader(&self, state: &crate::metadata_records::PartitionState) -> NodeId {
        if self.cluster_view().is_live(state.leader) {
            state.leader
        } else {
            -1
        }
    }

    /// The replicas of a partition in `state` that are offline: on a broker
    /// that is fenced or not registered (as Kafka's metadata reports them).
    pub fn offline_replicas(&self, state: &crate::metadata_records::PartitionState) -> Vec<NodeId> {
        let view = self.cluster_view();
        state
            .replicas
            .iter()
            .copied()
            .filter(|r| !view.is_live(*r))
            .collect()
    }

    /// Whether this broker coordinates the group or transactional id
    /// `key`. One that does not answers NOT_COORDINATOR, so a client with
    /// a stale coordinator looks it up again instead of making a second
    /// copy of the group here.
    pub fn coordinates(&self, key: &str) -> bool {
        if self.replicated_groups() {
            return self.coordinator(key).is_ok();
        }
        let v = self.cluster_view();
        !v.coordinators.is_empty()
            && v.coordinators[coordinator_slot(key, v.coordinators.len())] == self.node_id()
    }

    /// The coordinator of a group or transactional id and its endpoint on
    /// `listener`: the leader of the id's slot of the replicated group log
    /// (created on first use), or the broker the slot was placed on.
    /// [`crate::Error::CoordinatorUnavailable`] while that broker is fenced
    /// or unknown.
    pub fn coordinator_of(
        &self,
        key: &str,
        listener: &str,
    ) -> Result<(NodeId, Endpoint), crate::Error> {
        let node = if self.replicated_groups() {
            self.ensure_group_log()?;
            self.coordinator_node(key).ok_or_else(|| {
                crate::Error::CoordinatorUnavailable(format!(
                    "the group log slot of {key:?} has no leader"
                ))
            })?
        } else {
            let slots = self.coordinator_slots()?;
            slots[coordinator_slot(key, slots.len())]
        };
        let view = self.cluster_view();
        match view.brokers.get(&node) {
            Some(b) if !b.fenced => b.endpoint(listener).map(|e| (node, e)).ok_or_else(|| {
                crate::Error::CoordinatorUnavailable(format!(
                    "the coordinator of {key:?}, broker {node}, has no {listener} listener"
                ))
            }),
            _ => Err(crate::Error::CoordinatorUnavailable(format!(
                "the coordinator of {key:?}, broker {node}, is not available"
            ))),
        }
    }
}

/// How many coordinator slots a cluster places (Kafka's
/// `offsets.topic.num.partitions` default).
pub const DEFAULT_COORDINATOR_SLOTS: usize = 50;

/// The slot of a group or transactional id (see [`model::coordinator_slot`]).
pub use model::coordinator_slot;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn slots_follow_java_string_hash() {
        // "group-1".hashCode() == 293_427_299 in Java.
        assert_eq!(coordinator_slot("group-1", 50), 293_427_299 % 50);
        assert_eq!(coordinator_slot("", 50), 0);
        assert!(coordinator_slot("zzzzzzzzzzzzzzzzzzzz", 7) < 7);
    }

    #[test]
    fn endpoints_parse() {
        let b = BrokerInfo {
            node: 1,
            endpoints: [(KAFKA_LISTENER.to_string(), "[::1]:9092".to_string())].into(),
            fenced: false,
        };
        assert_eq!(
            b.endpoint(KAFKA_LISTENER),
            Some(Endpoint {
                host: "::1".into(),
                port: 9092
            })
        );
        assert_eq!(b.endpoint(PULSAR_LISTENER), None);
    }

    fn view(fenced: &[(NodeId, bool)]) -> ClusterView {
        ClusterView {
            brokers: fenced
                .iter()
                .map(|&(node, fenced)| {
                    (
                        node,
                        BrokerInfo {
                            node,
                            endpoints: BTreeMap::new(),
                            fenced,
                        },
                    )
                })
                .collect(),
            coordinators: Vec::new(),
        }
    }

    #[test]
    fn the_reported_controller_is_a_live_broker() {
        let all = view(&[(1, false), (2, false), (3, false)]);
        assert_eq!(pick_controller(&all, Some(3), 1), 3, "the live leader");
        assert_eq!(pick_controller(&all, None, 2), 2, "no leader known: self");
        // Node 1 leads the quorum but has not seen its own unfencing yet:
        // naming it would send clients to a broker absent from the list.
        let starting = view(&[(1, true), (2, false), (3, false)]);
        assert_eq!(pick_controller(&starting, Some(1), 1), 2);
        assert_eq!(pick_controller(&starting, Some(1), 3), 3);
        let none = view(&[(1, true), (2, true)]);
        assert_eq!(pick_controller(&none, Some(1), 2), 2, "nothing live: self");
    }
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod apply_tests;
