//! Subscription tests: dispatch rules per type, acks, redelivery, seek,
//! retention and Readers on the state machine alone; random event
//! sequences against its invariants; durable cursors across a broker
//! restart with the real group log.

mod dispatch;
mod durable;
mod keyshared;
mod proptests;
