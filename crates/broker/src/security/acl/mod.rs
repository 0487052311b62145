//! Kafka ACLs on the broker: who may do what (`access`), the authorizer
//! that decides it (`authorizer`), and the ACL admin operations (`ops`).
//! The bindings and filters themselves are metadata records
//! (`magnetar_metadata::acl`), re-exported here.

pub mod access;
pub mod authorizer;
pub mod ops;

pub use magnetar_config::AUTHORIZER_CLASSES;
pub use magnetar_metadata::acl::*;

pub use access::{Access, Requester};
pub use authorizer::{AclIndex, Authorizer, AuthorizerConfig};
