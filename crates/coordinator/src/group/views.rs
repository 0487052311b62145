//! The group coordinator's settings, errors and the views of groups it
//! gives out (see [`super::coordinator`]).

use super::classic::{ClassicConfig, GroupError};
use super::consumer::{ConsumerConfig, ConsumerError};
use crate::error::CoordError;

/// Settings of the coordinator, from broker configuration.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Classic groups.
    pub classic: ClassicConfig,
    /// Consumer-protocol groups.
    pub consumer: ConsumerConfig,
    /// Offsets of a group without members expire this long after commit.
    pub offsets_retention_ms: i64,
}

/// Why a group operation was refused, beyond the state machines' own errors.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The classic state machine refused.
    #[error(transparent)]
    Classic(#[from] GroupError),
    /// The consumer-protocol state machine refused.
    #[error(transparent)]
    Consumer(#[from] ConsumerError),
    /// The group id is used by the other protocol.
    #[error("group {0} uses the other group protocol")]
    WrongProtocol(String, ProtocolMismatch),
    /// No such group.
    #[error("group {0} does not exist")]
    GroupNotFound(String),
    /// The group still has members.
    #[error("group {0} is not empty")]
    NonEmptyGroup(String),
    /// The group still consumes the topic whose offsets were to be deleted.
    #[error("group {0} is subscribed to the topic")]
    SubscribedToTopic(String),
    /// The group log could not be written.
    #[error(transparent)]
    Storage(#[from] CoordError),
}

/// Which way round a protocol mismatch is (Kafka answers them differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolMismatch {
    /// A classic request for a consumer-protocol group.
    ClassicOnConsumer,
    /// A consumer-protocol heartbeat for a classic group.
    ConsumerOnClassic,
}

/// A group as the describe APIs show it: the protocol's own view types,
/// never the state machines.
#[derive(Debug, Clone)]
pub enum GroupView {
    /// A classic (JoinGroup/SyncGroup) group.
    Classic(crate::group::classic::GroupDescription),
    /// A consumer-protocol (KIP-848) group.
    Consumer(ConsumerGroupView),
}

/// What a group's members subscribe to.
#[derive(Debug, Clone)]
pub enum SubscriptionsView {
    /// A classic group: its members' opaque protocol metadata (for the
    /// `consumer` protocol type, Kafka's ConsumerProtocolSubscription).
    Classic {
        /// The group's protocol type, if it ever had members.
        protocol_type: Option<String>,
        /// Each member's metadata for the group's protocol.
        metadata: Vec<bytes::Bytes>,
    },
    /// A consumer-protocol group: the topics its members named.
    Consumer {
        /// Subscribed topic names, over all members.
        topics: Vec<String>,
    },
}

/// A consumer-protocol group as the describe APIs show it.
#[derive(Debug, Clone)]
pub struct ConsumerGroupView {
    /// Kafka's state name (`Empty`, `Assigning`, `Reconciling`, `Stable`).
    pub state: &'static str,
    /// The group epoch.
    pub epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The server-side assignor in use.
    pub assignor: &'static str,
    /// Members with their current and target assignments.
    pub members: Vec<crate::group::consumer::MemberDescription>,
}

/// One entry of ListGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// "consumer", or the classic group's protocol type.
    pub protocol_type: String,
    /// Kafka state name.
    pub state: String,
    /// "classic" or "consumer".
    pub group_type: &'static str,
}
