//! The classic group's inputs and outputs: configuration, requests, results,
//! effects, states and descriptions. None of these are wire types.

use std::fmt;

use bytes::Bytes;

use super::GroupError;

/// Identifies one pending JoinGroup or SyncGroup request. Chosen by the
/// caller, which keeps the responder under this id until an [`Effect`]
/// answers it.
pub type RequestId = u64;

/// The coordinator settings a classic group obeys (Kafka's `group.*` broker
/// properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicConfig {
    /// `group.min.session.timeout.ms`: the smallest session timeout a member
    /// may ask for.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`: the largest session timeout a member
    /// may ask for.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an
    /// empty group waits for more members before completing.
    pub initial_rebalance_delay_ms: i64,
    /// `group.max.size`: the most members a group may have.
    pub max_size: usize,
}

/// How long a brand-new member's JoinGroup may stay parked before the member
/// is dropped (Kafka's fixed five minutes), so clients that gave up on a long
/// rebalance do not linger as defunct members.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

impl Default for ClassicConfig {
    fn default() -> Self {
        ClassicConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: usize::MAX,
        }
    }
}

/// One protocol a member can speak (for consumers: an assignor name and the
/// serialized subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    /// The protocol's name, e.g. `range`.
    pub name: String,
    /// Opaque protocol metadata, handed to the leader.
    pub metadata: Bytes,
}

impl Protocol {
    /// Builds a protocol entry.
    pub fn new(name: impl Into<String>, metadata: impl Into<Bytes>) -> Self {
        Protocol {
            name: name.into(),
            metadata: metadata.into(),
        }
    }
}

/// A JoinGroup request, as far as the group cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    /// The caller's handle for the response.
    pub request: RequestId,
    /// The member id; empty for a member joining for the first time.
    pub member_id: String,
    /// The static member's instance id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// The client id from the request header.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// How long the member may go without heartbeating.
    pub session_timeout_ms: i32,
    /// How long the member may take to rejoin during a rebalance. JoinGroup
    /// v0 has none: pass the session timeout, as Kafka does. A value of zero
    /// or less is replaced by the session timeout.
    pub rebalance_timeout_ms: i32,
    /// The protocol type, e.g. `consumer`.
    pub protocol_type: String,
    /// The protocols the member supports, most preferred first.
    pub protocols: Vec<Protocol>,
    /// JoinGroup v4+ (KIP-394): a new dynamic member must first obtain a
    /// member id and rejoin with it.
    pub require_known_member_id: bool,
    /// JoinGroup v9+ (KIP-814): the client understands `skip_assignment`.
    pub supports_skip_assignment: bool,
    /// The client's reason for joining (logged only).
    pub reason: Option<String>,
}

/// A member as listed to the leader in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// The member id.
    pub member_id: String,
    /// The static instance id, if any.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the chosen protocol.
    pub metadata: Bytes,
}

/// A successful JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    /// The generation the member now belongs to.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The protocol chosen for this generation.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's own id.
    pub member_id: String,
    /// KIP-814: the member is the leader but must not run the assignor (a
    /// static leader rejoined a stable group; the assignment stands).
    pub skip_assignment: bool,
    /// Every member with its metadata; non-empty only for the leader.
    pub members: Vec<JoinedMember>,
}

/// A SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    /// The caller's handle for the response.
    pub request: RequestId,
    /// The member id.
    pub member_id: String,
    /// The static instance id, if any.
    pub group_instance_id: Option<String>,
    /// The generation the member believes it is in.
    pub generation_id: i32,
    /// SyncGroup v5+: the protocol type the member was told, checked.
    pub protocol_type: Option<String>,
    /// SyncGroup v5+: the protocol name the member was told, checked.
    pub protocol_name: Option<String>,
    /// The leader's assignment, by member id; empty from followers.
    pub assignments: Vec<(String, Bytes)>,
}

/// A successful SyncGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResult {
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The generation's protocol.
    pub protocol_name: Option<String>,
    /// This member's assignment (empty if the leader gave it none).
    pub assignment: Bytes,
}

/// Something the caller must do after a call into the group. Effects are in
/// order: a caller that wants Kafka's durability guarantee completes a
/// [`Effect::Persist`] before delivering the responses that follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Answer a parked JoinGroup request.
    JoinDone {
        /// The request being answered.
        request: RequestId,
        /// The response.
        result: Result<JoinResult, GroupError>,
    },
    /// Answer a parked SyncGroup request.
    SyncDone {
        /// The request being answered.
        request: RequestId,
        /// The response.
        result: Result<SyncResult, GroupError>,
    },
    /// The group's durable metadata (generation, protocol, leader, members
    /// and assignments) changed: store [`super::ClassicGroup::snapshot`].
    Persist,
}

impl Effect {
    /// The request this effect answers, if any.
    pub fn request(&self) -> Option<RequestId> {
        match self {
            Effect::JoinDone { request, .. } | Effect::SyncDone { request, .. } => Some(*request),
            Effect::Persist => None,
        }
    }
}

/// The classic group states, as Kafka names them in DescribeGroups and
/// ListGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members (the group may still have committed offsets).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assignment delivered; members heartbeat.
    Stable,
    /// Deleted or unloaded; every request is refused.
    Dead,
}

impl GroupState {
    /// Every state, for filters.
    pub const ALL: [GroupState; 5] = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ];

    /// Kafka's name for the state.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Parses a state name case-insensitively (ListGroups v4+ state filters).
    pub fn from_name(name: &str) -> Option<GroupState> {
        GroupState::ALL
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A member as shown by DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// The static instance id, if any.
    pub group_instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// Metadata for the chosen protocol; empty unless the group is Stable.
    pub metadata: Bytes,
    /// The member's assignment; empty unless the group is Stable.
    pub assignment: Bytes,
}

/// A group as shown by DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// The current state.
    pub state: GroupState,
    /// The protocol type, if the group ever had members.
    pub protocol_type: Option<String>,
    /// The chosen protocol; `None` unless the group is Stable (as in Kafka).
    pub protocol_name: Option<String>,
    /// The members, in join order.
    pub members: Vec<MemberDescription>,
}
