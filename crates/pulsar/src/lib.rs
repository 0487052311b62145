//! Magnetar's Pulsar front end: Pulsar clients produce, subscribe and read
//! over the same topics and log Kafka clients use.
//!
//! The wire format is `magnetar-pulsar-wire`'s; this crate translates
//! commands to the protocol-neutral broker core: topics ([`topics`], names
//! mapped by `model::pulsar_name`), messages to and from Kafka record
//! batches ([`convert`]), message ids over offsets ([`message_id`]),
//! subscriptions in `broker::subscription` driven by [`dispatch`].
//!
//! The Pulsar model it shares with the HTTP service (topic names, lookup,
//! authorization, message ids, conversion, the error) is
//! `magnetar-pulsar-core`'s, re-exported here under its old paths.

#![warn(missing_docs)]

pub mod admin;
pub mod consumer;
pub mod dispatch;
mod metrics;
pub mod producer;
mod receipts;
pub mod schema;
pub mod server;
pub mod session;
mod shared;

pub use magnetar_pulsar_core::{authz, convert, error, lookup, message_id, topics};

pub use authz::PulsarSecurity;
pub use server::{serve, PulsarListener, Server};
