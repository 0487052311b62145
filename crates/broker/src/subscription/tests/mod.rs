//! Subscription tests: dispatch rules per type, acks, redelivery, seek,
//! retention and Readers on the state machine alone; random event
//! sequences against its invariants.

mod dispatch;
mod proptests;
