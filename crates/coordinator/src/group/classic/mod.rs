//! The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as
//! a pure, synchronous state machine, following Kafka's group coordinator,
//! including KIP-345 static membership, KIP-394 (member id required) and
//! KIP-814 (skip assignment).
//!
//! A [`ClassicGroup`] takes requests and the passage of time and returns
//! [`Effect`]s; it does no I/O and reads no clock. The caller owns the
//! groups, keeps each parked JoinGroup/SyncGroup responder under its
//! [`RequestId`], delivers the effects in order, stores
//! [`ClassicGroup::snapshot`] on [`Effect::Persist`], and calls
//! [`ClassicGroup::tick`] at [`ClassicGroup::next_deadline`].
//!
//! The life of a group: a member joins an Empty group, which waits
//! `initial_rebalance_delay_ms` for others (PreparingRebalance). When the
//! join phase ends, the generation goes up, a protocol is chosen, and every
//! parked JoinGroup is answered; the leader gets the member list
//! (CompletingRebalance). The leader's SyncGroup carries everyone's
//! assignment, which is handed to every member's SyncGroup (Stable).
//! Members then heartbeat; a join, leave, session expiry or missed sync
//! starts the next rebalance, which members learn of from
//! REBALANCE_IN_PROGRESS on their heartbeats.

mod error;
mod group;
mod member;
mod rebalance;
mod requests;
mod snapshot;
mod timers;
mod types;

#[cfg(test)]
mod tests;

pub use error::GroupError;
pub use group::ClassicGroup;
pub use snapshot::{GroupSnapshot, MemberSnapshot};
pub use types::{
    ClassicConfig, Effect, GroupDescription, GroupState, JoinRequest, JoinResult, JoinedMember,
    MemberDescription, Protocol, RequestId, SyncRequest, SyncResult, NEW_MEMBER_JOIN_TIMEOUT_MS,
};
