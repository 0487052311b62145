//! Magnetar's broker core: topics and partitions over the storage engine,
//! consumer groups, broker metadata, and what every protocol front end
//! shares (connection limits, rate-limited logging).
//!
//! The core ([`Broker`], [`Topic`], [`Partition`]) speaks only domain types;
//! wire formats and error codes live in the front-end crates
//! (`magnetar-kafka`, `magnetar-pulsar`), which depend on this one.

#![warn(missing_docs)]

#[cfg(test)]
mod broker_config_tests;
pub mod cluster;
pub use magnetar_config as config;
pub use magnetar_coordinator::{
    error as coordinator_error, group, schema, sequences, subscription, traffic,
};
pub use magnetar_metadata::{
    delta as metadata_delta, image as metadata_store, leadership, machine as metadata_machine,
    placement, reassignment, reconcile, records as metadata_records, registry, topic_control,
};
#[cfg(test)]
mod coordinator_tests;
mod core;
mod endpoint;
mod error;
pub mod group_slots;
pub mod groups;
mod lifecycle;
pub mod limits;
pub mod log_limit;
pub mod maintenance;
pub mod metrics;
pub mod net;
pub mod quota;
pub mod replica;
pub mod security;
mod state_log;
pub mod tenancy;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod topic;
pub mod txn;
#[cfg(test)]
mod txn_guard_tests;

pub use crate::core::{Broker, NewTopic, MAX_PARTITIONS_PER_TOPIC};
pub use endpoint::Endpoint;
pub use error::Error;
pub use lifecycle::BrokerScope;
/// Milliseconds since the Unix epoch, now (see [`model::now_ms`]).
pub use model::now_ms;
pub use topic::{complete_disk_work, Partition, ProducerAttachment, Topic};
