//! Kafka's partition replication protocol as sans-IO state machines.
//!
//! This crate owns the decisions of replicated partitions: the leader's
//! view of its followers, the ISR and the high watermark
//! ([`LeaderReplica`]), a follower's log end, learned high watermark and
//! diverging-epoch truncation ([`FollowerReplica`]), the leader-epoch cache
//! and Kafka's OffsetForLeaderEpoch rule ([`EpochCache`]), and the
//! controller's pure choices over a partition record ([`controller`]).
//!
//! Every machine is driven by events that carry the current time as `u64`
//! milliseconds and answers with effects for its caller to carry out (send a
//! fetch answer, send an AlterPartition, truncate the log, acknowledge a
//! producer). The crate must never do I/O, read a clock, spawn a thread or
//! import a workspace crate other than `model`: that is what lets the
//! seeded simulation in `tests/simulation.rs` replay any failure exactly.

#![warn(missing_docs)]

use std::fmt;

pub mod controller;
pub mod epoch_cache;
mod error;
pub mod follower;
pub mod leader;

pub use controller::{AlterPartitionRequest, PartitionState};
pub use epoch_cache::EpochCache;
pub use error::ReplicationError;
pub use follower::{FetchRequest, FollowerEffect, FollowerReplica};
pub use leader::{Acks, Appended, FetchAnswer, LeaderConfig, LeaderEffect, LeaderReplica};

/// The version of a partition's controller record (ISR, leader, replicas):
/// bumped by the controller on every change, and carried by AlterPartition
/// so that a leader's request built on an older record is refused
/// (Kafka's `partitionEpoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PartitionEpoch(pub i32);

impl fmt::Display for PartitionEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
