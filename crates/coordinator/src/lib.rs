//! Magnetar's coordinators as state machines over a log: consumer groups
//! (classic and KIP-848) and their offsets store (`group`), Pulsar
//! subscriptions, cursors and dispatch rules (`subscription`), transaction
//! state (`txn`), producer sequences for deduplication (`sequences`) and
//! schemas (`schema`), with the group log's record codec (`codec`) and the
//! delivery counters they keep (`traffic`).
//!
//! They take events (and the time) and return effects; what they persist
//! goes through the [`group::log::StateLog`] trait, which the broker's
//! partitions implement. This crate holds no broker, partition or
//! connection and must never import the broker, security's enforcement or
//! a front end; the broker feeds the machines and acts on their effects.

#![warn(missing_docs)]

pub mod codec;
pub mod error;
pub mod group;
pub mod schema;
pub mod sequences;
pub mod subscription;
mod subscription_type;
pub mod traffic;
pub mod txn;

pub use error::CoordError;
