//! Tests of the coordinator's state (groups, subscriptions, producer
//! sequences, schemas) over a real broker and its group log.

mod group_coordinator;
mod group_store;
mod schema;
mod sequences;
mod subscription_durable;
