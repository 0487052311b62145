//! AlterPartition between a partition's leader and the active controller
//! (Kafka's key 56, carried over the cluster link as the other broker
//! service requests are): the leader asks for a new ISR built on the
//! partition epoch it knows; the controller decides with
//! [`magnetar_metadata::leadership::alter_partition`], commits the
//! `PartitionChanged` record and answers with the partition's state, or
//! says why not in terms the leader's state machine acts on.

use std::sync::atomic::Ordering;

use magnetar_metadata::leadership::{self, replica_state, AlterPartitionError};
use magnetar_replication::{
    AlterPartitionRequest, PartitionEpoch, PartitionState as ReplicaState, ReplicationError,
};
use model::{LeaderEpoch, TopicId};
use serde::{Deserialize, Serialize};

use super::service::{ServiceRequest, ServiceResponse};
use crate::metadata_records::{MetadataRecord, NodeId, PartitionState};
use crate::metadata_store::Metadata;
use crate::{Broker, Error};

/// Why the controller refused an AlterPartition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AlterPartitionRefusal {
    /// Not the sender's current registration, or the sender is fenced
    /// (Kafka's STALE_BROKER_EPOCH).
    StaleBrokerEpoch,
    /// No such topic id or partition.
    UnknownPartition,
    /// The sender's leader epoch is older than the partition's.
    FencedLeaderEpoch {
        /// The request's leader epoch.
        request: i32,
        /// The partition's.
        current: i32,
    },
    /// The sender's leader epoch is newer than the partition's.
    UnknownLeaderEpoch {
        /// The request's leader epoch.
        request: i32,
        /// The partition's.
        current: i32,
    },
    /// The request was built on another partition epoch
    /// (INVALID_UPDATE_VERSION).
    InvalidUpdateVersion {
        /// The request's partition epoch.
        request: i32,
        /// The partition's.
        current: i32,
    },
    /// The sender does not lead the partition.
    NotLeader,
    /// A replica that may not join the ISR (INELIGIBLE_REPLICA).
    IneligibleReplica(NodeId),
    /// A broker that is not a replica of the partition.
    UnknownReplica(NodeId),
    /// Any other refusal of the replication rules.
    Other(String),
}

impl AlterPartitionRefusal {
    fn of(e: &AlterPartitionError) -> Self {
        use AlterPartitionRefusal as R;
        match e {
            AlterPartitionError::UnknownPartition { .. } => R::UnknownPartition,
            AlterPartitionError::Refused(r) => match r {
                ReplicationError::FencedLeaderEpoch { request, current } => R::FencedLeaderEpoch {
                    request: request.0,
                    current: current.0,
                },
                ReplicationError::UnknownLeaderEpoch { request, current } => {
                    R::UnknownLeaderEpoch {
                        request: request.0,
                        current: current.0,
                    }
                }
                ReplicationError::InvalidUpdateVersion { request, current } => {
                    R::InvalidUpdateVersion {
                        request: request.0,
                        current: current.0,
                    }
                }
                ReplicationError::NotLeader => R::NotLeader,
                ReplicationError::IneligibleReplica(n) => R::IneligibleReplica(n.0),
                ReplicationError::UnknownReplica(n) => R::UnknownReplica(n.0),
                other => R::Other(other.to_string()),
            },
        }
    }

    /// The refusal as the leader's state machine takes it.
    pub fn to_replication_error(&self) -> ReplicationError {
        use AlterPartitionRefusal as R;
        match self {
            // A leader no longer registered as it was cannot lead.
            R::StaleBrokerEpoch | R::NotLeader => ReplicationError::NotLeader,
            R::UnknownPartition => ReplicationError::InvalidRequest("no such partition"),
            R::FencedLeaderEpoch { request, current } => ReplicationError::FencedLeaderEpoch {
                request: LeaderEpoch(*request),
                current: LeaderEpoch(*current),
            },
            R::UnknownLeaderEpoch { request, current } => ReplicationError::UnknownLeaderEpoch {
                request: LeaderEpoch(*request),
                current: LeaderEpoch(*current),
            },
            R::InvalidUpdateVersion { request, current } => {
                ReplicationError::InvalidUpdateVersion {
                    request: PartitionEpoch(*request),
                    current: PartitionEpoch(*current),
                }
            }
            R::IneligibleReplica(n) => ReplicationError::IneligibleReplica(model::NodeId(*n)),
            R::UnknownReplica(n) => ReplicationError::UnknownReplica(model::NodeId(*n)),
            R::Other(_) => ReplicationError::InvalidRequest("refused by the controller"),
        }
    }
}

/// The controller's decision on an AlterPartition from broker `node`'s
/// registration `epoch`: the record to commit and the state it makes.
pub(super) fn decide(
    m: &Metadata,
    node: NodeId,
    epoch: i64,
    topic_id: TopicId,
    partition: i32,
    request: &AlterPartitionRequest,
) -> Result<(MetadataRecord, PartitionState), AlterPartitionRefusal> {
    let registered = m
        .brokers
        .get(&node)
        .is_some_and(|b| b.epoch == epoch && !b.fenced);
    if !registered || request.broker != model::NodeId(node) {
        return Err(AlterPartitionRefusal::StaleBrokerEpoch);
    }
    let (record, state) = leadership::alter_partition(m, topic_id, partition, request)
        .map_err(|e| AlterPartitionRefusal::of(&e))?;
    Ok((record, leadership::partition_state(&state)))
}

impl Broker {
    /// Records this process's registration epoch (set once registered).
    pub(crate) fn set_registration_epoch(&self, epoch: i64) {
        self.cluster
            .registration_epoch
            .store(epoch, Ordering::Relaxed);
    }

    /// This process's registration epoch (-1 before it registered).
    pub fn registration_epoch(&self) -> i64 {
        self.cluster.registration_epoch.load(Ordering::Relaxed)
    }

    /// Asks the active controller, as this partition's leader, for the ISR
    /// `request` names (Kafka's AlterPartition; sent as this broker, under
    /// its registration epoch, whatever `request.broker` says). `Ok(Ok)`: committed, the
    /// partition's state now; `Ok(Err)`: refused, as the leader's state
    /// machine takes it; `Err`: no controller answered.
    pub async fn alter_partition(
        &self,
        topic_id: TopicId,
        partition: i32,
        request: &AlterPartitionRequest,
    ) -> Result<Result<ReplicaState, ReplicationError>, Error> {
        let req = ServiceRequest::AlterPartition {
            node: self.node_id(),
            epoch: self.cluster.registration_epoch.load(Ordering::Relaxed),
            topic_id,
            partition,
            leader_epoch: request.leader_epoch.0,
            partition_epoch: request.partition_epoch.0,
            new_isr: request.new_isr.iter().map(|n| n.0).collect(),
        };
        let bytes =
            serde_json::to_vec(&req).map_err(|e| Error::ControllerUnavailable(e.to_string()))?;
        let link = self.cluster.link.clone();
        let answer = tokio::time::timeout(link.change_timeout, link.call(bytes))
            .await
            .map_err(|_| Error::ControllerUnavailable("no controller answered".into()))?
            .map_err(super::link::unavailable)?;
        match serde_json::from_slice(&answer) {
            Ok(ServiceResponse::PartitionChanged { state }) => Ok(Ok(replica_state(&state))),
            Ok(ServiceResponse::AlterPartitionRefused(why)) => Ok(Err(why.to_replication_error())),
            Ok(other) => Err(Error::ControllerUnavailable(format!(
                "the controller answered {other:?}"
            ))),
            Err(e) => Err(Error::ControllerUnavailable(format!(
                "unreadable controller answer: {e}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests;
