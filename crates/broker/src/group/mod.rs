//! Consumer groups: the classic protocol's state machine, the consumer
//! (KIP-848) protocol, committed offsets and their durable log.

pub mod classic;
pub mod consumer;
pub mod store;
