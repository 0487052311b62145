//! Magnetar's cluster metadata, as pure data and pure decisions.
//!
//! It owns the metadata records (`records`) and the image they build when
//! applied in order (`image`), the difference between two images that a
//! broker acts on (`delta`), the controller's state machine over the
//! records (`machine`), broker registrations (`registry`), the controller's
//! decisions on topics and their placement (`topic_control`,
//! `placement`) and on partition leadership and ISRs (`leadership`), the full-state reconciliation of a broker's partitions
//! (`reconcile`), the tenancy rules (`tenancy`), and the records' data
//! types for ACLs, SCRAM credentials and client quotas (`acl`,
//! `credentials`, `quota`).
//!
//! It does no I/O beyond reading and writing the standalone metadata file,
//! holds no broker, partition or connection, and must never import the
//! broker, the coordinators, security's enforcement or any front end: the
//! broker applies what is decided here.

#![warn(missing_docs)]

pub mod acl;
pub mod credentials;
pub mod delta;
mod error;
pub mod image;
pub mod leadership;
pub mod machine;
pub mod placement;
pub mod quota;
pub mod reassignment;
pub mod reconcile;
pub mod records;
pub mod registry;
pub mod tenancy;
pub mod topic_control;

pub use error::MetadataError;
pub use topic_control::{NewTopic, MAX_PARTITIONS_PER_TOPIC};
