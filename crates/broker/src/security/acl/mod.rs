//! Kafka ACLs on the broker: who may do what (`access`) and the ACL admin
//! operations (`ops`). The bindings, filters and the authorizer are
//! `magnetar_security::acl`, re-exported here.

pub mod access;
pub mod ops;

pub use magnetar_security::acl::*;

pub use access::{Access, Requester};
