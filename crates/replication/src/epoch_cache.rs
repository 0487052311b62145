//! The leader-epoch cache the replicas work with: the model's
//! [`EpochHistory`](model::EpochHistory), so the state machines and the log
//! on disk apply one OffsetForLeaderEpoch rule.

pub use model::epochs::{EpochEntry, EpochHistory as EpochCache};
