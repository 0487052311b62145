//! Magnetar's Pulsar front end: Pulsar clients produce, subscribe and read
//! over the same topics and log Kafka clients use.
//!
//! The wire format is `magnetar-pulsar-wire`'s; this crate translates
//! commands to the protocol-neutral broker core: topics ([`topics`], names
//! mapped by `model::pulsar_name`), messages to and from Kafka record
//! batches ([`convert`]), message ids over offsets ([`message_id`]),
//! subscriptions in `broker::subscription` driven by [`dispatch`].

#![warn(missing_docs)]

pub mod admin;
pub mod authz;
pub mod consumer;
pub mod convert;
pub mod dispatch;
pub mod error;
pub mod lookup;
pub mod message_id;
mod metrics;
pub mod producer;
pub mod schema;
pub mod server;
pub mod session;
pub mod topics;

pub use authz::PulsarSecurity;
pub use server::{serve, PulsarListener, Server};
