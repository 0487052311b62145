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

pub mod controller;
pub mod epoch_cache;
mod error;
pub mod follower;
pub mod leader;
mod partition_epoch;

pub use controller::{AlterPartitionRequest, PartitionState};
pub use epoch_cache::EpochCache;
pub use error::ReplicationError;
pub use follower::{BatchSpan, FetchRequest, FollowerEffect, FollowerReplica};
pub use leader::{Acks, Appended, FetchAnswer, LeaderConfig, LeaderEffect, LeaderReplica};
pub use partition_epoch::PartitionEpoch;
