//! The crate's one error type.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong in the controller: configuration, storage,
/// the network and the Raft protocol.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The voter set string could not be parsed.
    #[error("invalid controller quorum voters {input:?}: {reason}")]
    InvalidVoters {
        /// What was given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// This node's id is not one of the voters.
    #[error("node id {node_id} is not in the controller quorum voters ({voters})")]
    NotAVoter {
        /// The configured node id.
        node_id: u64,
        /// The configured voters.
        voters: String,
    },
    /// The configured voters differ from those the data directory was made with.
    #[error("controller quorum voters {configured} disagree with {on_disk} recorded in {dir}")]
    VotersMismatch {
        /// The configured voters.
        configured: String,
        /// The voters on disk.
        on_disk: String,
        /// The data directory.
        dir: PathBuf,
    },
    /// The data directory belongs to another node.
    #[error("data directory {dir} belongs to node {on_disk}, not node {configured}")]
    NodeIdMismatch {
        /// The configured node id.
        configured: u64,
        /// The node id on disk.
        on_disk: u64,
        /// The data directory.
        dir: PathBuf,
    },
    /// A configuration value is out of range.
    #[error("invalid controller configuration: {0}")]
    InvalidConfig(String),
    /// A file operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Stored data failed its checks (not a torn tail, which is repaired).
    #[error("corrupt controller data in {path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// This node is not the leader; `leader` names the one it knows of.
    #[error("not the controller leader; {}", match .leader {
        Some((id, addr)) => format!("the leader is node {id} at {addr}"),
        None => "no leader is known".to_string(),
    })]
    NotLeader {
        /// The leader's id and address, when known.
        leader: Option<(u64, String)>,
    },
    /// An operation did not finish in time.
    #[error("{what} did not complete within {after:?}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        after: Duration,
    },
    /// A connection to a peer failed or broke.
    #[error("network error with {addr}: {reason}")]
    Network {
        /// The peer.
        addr: String,
        /// What happened.
        reason: String,
    },
    /// A frame was malformed or over the size limit; the connection is closed.
    #[error("bad frame: {0}")]
    BadFrame(String),
    /// The peer answered with an error.
    #[error("error from {addr}: {message}")]
    Remote {
        /// The peer.
        addr: String,
        /// Its message.
        message: String,
    },
    /// The Raft core failed.
    #[error("raft: {0}")]
    Raft(String),
    /// A state machine snapshot could not be decoded.
    #[error("state machine snapshot: {0}")]
    Snapshot(String),
    /// The controller has been shut down.
    #[error("the controller is shut down")]
    Shutdown,
}

impl ControllerError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        ControllerError::Io {
            path: path.into(),
            source,
        }
    }

    /// A corruption found in `path`.
    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        ControllerError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = ControllerError> = std::result::Result<T, E>;
