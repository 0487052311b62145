//! The messages of the controller protocol, and the answers callers see.

use openraft::error::{Fatal, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use crate::types::{NodeId, SnapshotMeta, TypeConfig, Vote};
use crate::StateMachine;

/// A request frame.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub(crate) enum Request<S: StateMachine> {
    /// Raft AppendEntries (also the heartbeat).
    AppendEntries(AppendEntriesRequest<TypeConfig<S>>),
    /// Raft RequestVote.
    Vote(VoteRequest<NodeId>),
    /// Raft InstallSnapshot, the whole snapshot in one frame.
    InstallSnapshot {
        vote: Vote,
        meta: SnapshotMeta,
        data: Vec<u8>,
    },
    /// Append a record through the leader.
    Submit(S::Record),
    /// Committed records from an index.
    Fetch { from: u64, max: u32 },
    /// The current snapshot.
    FetchSnapshot,
    /// Wait until an index is applied here.
    WaitApplied { index: u64, timeout_ms: u64 },
    /// A request of the application's service, answered by the leader.
    Call(Vec<u8>),
}

/// A response frame.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub(crate) enum Response<S: StateMachine> {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(Result<SnapshotResponse<NodeId>, Fatal<NodeId>>),
    Submit(Result<Submitted<S::Response>, Refused>),
    Fetch(Result<Fetched<S::Record>, Refused>),
    FetchSnapshot(Result<Option<SnapshotData>, Refused>),
    WaitApplied(Result<u64, Refused>),
    Call(Result<Vec<u8>, Refused>),
    /// The request could not be served at all.
    Error(String),
}

/// Why a client request was refused, as carried on the wire.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Refused {
    NotLeader { leader: Option<(NodeId, String)> },
    Timeout { what: String, after_ms: u64 },
    Shutdown,
    Failed(String),
}

/// A record appended and applied by the leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted<R> {
    /// The record's log index.
    pub index: u64,
    /// What the state machine answered.
    pub response: R,
}

/// What [`fetch`](crate::Controller::fetch) finds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fetched<R> {
    /// Committed records from the index asked for. Raft's own entries
    /// (leader blanks, membership) have no record and are skipped.
    Records {
        /// (index, record) in index order.
        records: Vec<(u64, R)>,
        /// Where the next fetch starts.
        next_index: u64,
        /// The last index applied on the answering node.
        applied_index: Option<u64>,
    },
    /// The index was compacted into a snapshot: load
    /// [`fetch_snapshot`](crate::Controller::fetch_snapshot), then fetch
    /// from its index + 1. The log now starts at `log_start`.
    SnapshotNeeded {
        /// The first index still in the log.
        log_start: u64,
    },
}

/// A state machine snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotData {
    /// The last log index it includes.
    pub index: u64,
    /// That entry's term.
    pub term: u64,
    /// [`StateMachine::snapshot`] bytes.
    pub data: Vec<u8>,
}
