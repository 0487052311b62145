//! Magnetar's Pulsar model over the protocol-neutral broker core: what both
//! the Pulsar binary-protocol front end (`magnetar-pulsar`) and the HTTP
//! service (`magnetar-http`) need to answer Pulsar questions the same way.
//!
//! It owns Pulsar topic names over the broker's topics ([`topics`]),
//! lookup and topic ownership ([`lookup`]), who a client is and what it may
//! do ([`authz`]), message ids over offsets ([`message_id`]), messages to
//! and from Kafka record batches ([`convert`]), finding offsets by time
//! ([`seek`]) and the error they all answer with ([`error::PulsarError`]); and what
//! admin paths may ask of the front end's live connections, as a trait the
//! front end implements ([`admin::Connections`]).
//!
//! It holds no connections, sockets or protocol sessions: it may depend on
//! `magnetar-model`, `magnetar-storage`, `magnetar-broker` and
//! `magnetar-pulsar-wire`, and must never import a front end
//! (`magnetar-pulsar`, `magnetar-http`, `magnetar-kafka`).

#![warn(missing_docs)]

pub mod admin;
pub mod authz;
pub mod convert;
pub mod error;
pub mod lookup;
pub mod message_id;
pub mod seek;
pub mod topics;

pub use authz::PulsarSecurity;
pub use error::PulsarError;
