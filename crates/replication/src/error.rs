//! The one error type of the replication state machines.

use model::{LeaderEpoch, NodeId};

use crate::PartitionEpoch;

/// Why a replication event was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    /// An acks=all append while the committed ISR is smaller than
    /// `min.insync.replicas`.
    #[error("not enough in-sync replicas: ISR has {isr}, min.insync.replicas is {min}")]
    NotEnoughReplicas {
        /// The committed ISR size.
        isr: usize,
        /// The configured minimum.
        min: usize,
    },
    /// The records reached the high watermark, but the ISR had shrunk below
    /// `min.insync.replicas` by then (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    #[error("the ISR shrank below min.insync.replicas after the append")]
    NotEnoughReplicasAfterAppend,
    /// This replica is not (or no longer) the partition's leader.
    #[error("not the leader")]
    NotLeader,
    /// The request carries an older leader epoch than the receiver's.
    #[error("fenced leader epoch: request has {request}, current is {current}")]
    FencedLeaderEpoch {
        /// The epoch the request carried.
        request: LeaderEpoch,
        /// The receiver's epoch.
        current: LeaderEpoch,
    },
    /// The request carries a newer leader epoch than the receiver knows.
    #[error("unknown leader epoch: request has {request}, current is {current}")]
    UnknownLeaderEpoch {
        /// The epoch the request carried.
        request: LeaderEpoch,
        /// The receiver's epoch.
        current: LeaderEpoch,
    },
    /// An AlterPartition built on a stale partition epoch.
    #[error("invalid update version: request has partition epoch {request}, current is {current}")]
    InvalidUpdateVersion {
        /// The partition epoch the request carried.
        request: PartitionEpoch,
        /// The controller's partition epoch.
        current: PartitionEpoch,
    },
    /// A broker that is not one of the partition's replicas.
    #[error("broker {0} is not a replica of the partition")]
    UnknownReplica(NodeId),
    /// An ISR naming a broker that is fenced or not a replica (KIP-841).
    #[error("broker {0} may not join the ISR")]
    IneligibleReplica(NodeId),
    /// No replica may become leader (no live ISR member, unclean election off).
    #[error("no eligible leader")]
    NoEligibleLeader,
    /// A malformed request.
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
}
