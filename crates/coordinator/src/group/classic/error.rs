//! Why a classic-group request was refused. The protocol edge maps each
//! variant to the Kafka error code of the same name.

/// A refusal from the classic group state machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum GroupError {
    /// The member id (or instance id) is not in the group.
    #[error("unknown member id")]
    UnknownMemberId,
    /// The request's generation is not the group's.
    #[error("illegal generation")]
    IllegalGeneration,
    /// A rebalance is under way: the member must rejoin.
    #[error("rebalance in progress")]
    RebalanceInProgress,
    /// The protocol type or protocols do not fit the group's.
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    /// Another member has taken over this static instance id.
    #[error("fenced instance id")]
    FencedInstanceId,
    /// KIP-394: rejoin with this member id.
    #[error("member id required; rejoin as {0}")]
    MemberIdRequired(String),
    /// The session timeout is outside the broker's allowed range.
    #[error("invalid session timeout")]
    InvalidSessionTimeout,
    /// The group has `group.max.size` members already.
    #[error("group max size reached")]
    GroupMaxSizeReached,
    /// The group is dead (deleted or being moved); find the coordinator again.
    #[error("coordinator not available")]
    CoordinatorNotAvailable,
}
