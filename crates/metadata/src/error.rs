//! The metadata crate's one error type. Its variants and messages are the
//! broker's own (`broker::Error` maps each to the variant of the same
//! name), so a refusal reads and maps to a protocol error code the same
//! wherever it was decided.

use std::path::PathBuf;

use magnetar_config::ConfigError;
use model::TopicId;

/// Why a metadata decision, record or file was refused.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// A configuration key or value is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A topic name breaks the naming rules.
    #[error(transparent)]
    InvalidTopic(#[from] model::Error),
    /// The topic does not exist.
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    /// No topic has this id (never existed, or deleted).
    #[error("no topic has id {0}")]
    UnknownTopicId(TopicId),
    /// CreateTopics for a name already taken.
    #[error("topic {0} already exists")]
    TopicExists(String),
    /// A partition count is invalid.
    #[error("invalid partitions: {0}")]
    InvalidPartitions(String),
    /// A replication factor this cluster cannot satisfy.
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    /// A replica assignment this cluster cannot carry out (it names a
    /// broker that does not exist, or repeats one).
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// A request that is well-formed but not acceptable.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Broker metadata could not be read or written.
    #[error("metadata file {path}: {source}")]
    MetadataIo {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A record does not apply to the state it was written against (a
    /// concurrent change got there first); nothing was changed.
    #[error("metadata conflict: {0}")]
    MetadataConflict(String),
    /// No namespace of this name.
    #[error("namespace {0} does not exist")]
    NamespaceNotFound(String),
    /// A tenant or namespace policy is invalid (unknown cluster, blank
    /// role, invalid retention, ...).
    #[error("{0}")]
    InvalidPolicy(String),
    /// The metadata file is unreadable.
    #[error("metadata file {path} is corrupt: {reason}")]
    MetadataCorrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}
