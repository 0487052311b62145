//! One partition replica: the replication state machines
//! ([`magnetar_replication`]: the leader's ISR and high watermark, the
//! follower's fetch position and truncation) carried out over the
//! partition's log on disk. The machines decide; this applies what they
//! answer to the log (appends of the leader's batches as they are,
//! truncation where a follower diverged, the high watermark consumers stop
//! at) and hands back what the caller must send or answer: fetches to a
//! leader, AlterPartition requests to the controller, `acks=all` produce
//! requests now committed or failed.
//!
//! Blocking (file work): callers on the async runtime run it on the
//! blocking pool. The network around it (replica fetchers, the Fetch and
//! AlterPartition handlers) is the caller's.

mod hosted;
#[cfg(test)]
mod hosted_tests;
mod hub;
mod machine;
mod registry;
mod slot;
#[cfg(test)]
mod tests;
mod throttle;
mod throttling;

pub use hosted::CommitWait;
pub use hub::{Fetched, FetchedPartition, LeaderLink, PartitionFetch, ReplicaFetch};
pub(crate) use machine::clock_ms;
pub use machine::{replica_state, Replica, ReplicaEffects, ReplicaError, ServedFetch};
pub use magnetar_replication::{Acks, FetchRequest, ReplicationError};
pub(crate) use registry::ReplicationHub;
pub use slot::AlterJob;
pub(crate) use slot::PartitionReplication;
pub use throttle::{lists_replica, Side as ThrottleSide};
