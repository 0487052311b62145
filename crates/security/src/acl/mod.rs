//! Kafka ACLs: the bindings and filters (metadata records, re-exported
//! from `magnetar_metadata::acl`) and the authorizer that decides each
//! request by them (Kafka's `StandardAuthorizer` semantics).

pub mod authorizer;

pub use magnetar_config::AUTHORIZER_CLASSES;
pub use magnetar_metadata::acl::*;

pub use authorizer::{AclIndex, Authorizer, AuthorizerConfig};
