//! Security on the broker: the SCRAM credential and ACL admin operations
//! and who may do what (`acl::access`). The mechanisms themselves (TLS,
//! SASL, tokens, the authorizer) are `magnetar_security`, re-exported here.

pub mod acl;
pub mod credentials;

pub use magnetar_security::*;
