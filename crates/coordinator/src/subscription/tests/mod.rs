//! Subscription tests: dispatch rules per type, acks, redelivery, seek,
//! retention and Readers on the state machine alone; random event
//! sequences against its invariants. (Durable cursors across a broker
//! restart with the real group log are tested with the broker.)

mod dispatch;
mod keyshared;
mod proptests;
