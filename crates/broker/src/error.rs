//! The broker crate's error type. Kafka error codes are assigned from it only
//! at the protocol edges (the front-end crates).

use std::path::PathBuf;

use model::{PartitionId, TopicId};

/// Everything a broker operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A start-up configuration key or value is invalid.
    #[error("configuration key {key}: {reason}")]
    Config {
        /// The key (or file) at fault.
        key: String,
        /// Why.
        reason: String,
    },
    /// A topic configuration override is invalid.
    #[error("invalid config {key}: {reason}")]
    InvalidConfig {
        /// The key at fault.
        key: String,
        /// Why.
        reason: String,
    },
    /// A topic name breaks the naming rules.
    #[error(transparent)]
    InvalidTopic(#[from] model::Error),
    /// A client tried to write an internal topic (written by the broker only).
    #[error("topic {0} is internal and written by the broker only")]
    InternalTopic(String),
    /// The topic does not exist.
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    /// No topic has this id (never existed, or deleted).
    #[error("no topic has id {0}")]
    UnknownTopicId(TopicId),
    /// The topic exists but not this partition.
    #[error("topic {topic} has no partition {partition}")]
    UnknownPartition {
        /// Topic name.
        topic: String,
        /// The missing partition.
        partition: PartitionId,
    },
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
    /// An `acks=all` write to a partition with fewer in-sync replicas than
    /// its `min.insync.replicas`.
    #[error("partition {partition} has {in_sync} in-sync replicas, fewer than its min.insync.replicas of {required}")]
    NotEnoughReplicas {
        /// The partition (`topic-N`).
        partition: String,
        /// In-sync replicas now.
        in_sync: usize,
        /// The partition's `min.insync.replicas`.
        required: u32,
    },
    /// Refused or failed by a partition's replication (not its leader, an
    /// ISR below `min.insync.replicas`, a stale leader epoch…).
    #[error("partition {partition}: {source}")]
    Replication {
        /// The partition (`topic-N`).
        partition: String,
        /// Why.
        #[source]
        source: magnetar_replication::ReplicationError,
    },
    /// `acks=all` records not replicated to the in-sync replicas within
    /// the request's timeout (they may still be, later).
    #[error("{0}")]
    ReplicationTimeout(String),
    /// A request that is well-formed but not acceptable.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The storage engine refused or failed.
    #[error("partition {partition}: {source}")]
    Storage {
        /// The partition concerned (`topic-N`).
        partition: String,
        /// The storage error.
        #[source]
        source: storage::Error,
    },
    /// A transactional request the transaction coordinator refused.
    #[error(transparent)]
    Transaction(#[from] crate::txn::TxnError),
    /// Transactions cannot be served here (a cluster: markers would have
    /// to reach other brokers' partitions).
    #[error("{0}")]
    TransactionsUnavailable(String),
    /// Not attempted because another part of the request failed.
    #[error("not attempted: another part of the request failed")]
    OperationNotAttempted,
    /// The data directory could not be opened or scanned (locked by another
    /// broker, unreadable, ...).
    #[error("{0}")]
    DataDir(#[source] storage::Error),
    /// Broker metadata could not be read or written.
    #[error("metadata file {path}: {source}")]
    MetadataIo {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A consumer cannot attach, or cannot unsubscribe, while others are
    /// attached (Pulsar's ConsumerBusy).
    #[error("{0}")]
    ConsumerBusy(String),
    /// Subscribing with another type than the subscription's while
    /// consumers are attached.
    #[error("Subscription is of different type: {subscription} is {existing}, not {requested}")]
    SubscriptionTypeMismatch {
        /// The subscription.
        subscription: String,
        /// Its type.
        existing: crate::subscription::SubscriptionType,
        /// The type asked for.
        requested: crate::subscription::SubscriptionType,
    },
    /// The partition exists but another broker holds it (clients must ask
    /// its leader: Kafka's NOT_LEADER_OR_FOLLOWER).
    #[error(
        "partition {partition} of {topic} is not on this broker (its leader is node {leader})"
    )]
    PartitionNotHosted {
        /// The topic.
        topic: String,
        /// The partition.
        partition: model::PartitionId,
        /// The node leading it, or -1 if none.
        leader: i32,
    },
    /// A metadata record does not fit the metadata it is applied to (a
    /// concurrent change got there first); nothing was changed.
    #[error("metadata conflict: {0}")]
    MetadataConflict(String),
    /// A SCRAM credential change Kafka refuses as UNACCEPTABLE_CREDENTIAL
    /// (bad iterations, empty name or salt).
    #[error("{0}")]
    UnacceptableCredential(String),
    /// A SCRAM mechanism this broker does not know.
    #[error("{0}")]
    UnsupportedSaslMechanism(String),
    /// A user named twice in one credential request.
    #[error("{0}")]
    DuplicateResource(String),
    /// A credential (or user) that does not exist.
    #[error("{0}")]
    ResourceNotFound(String),
    /// The authorizer denied an operation on a resource.
    #[error("not authorized: {operation:?} on {kind:?} {name}")]
    Denied {
        /// The resource's type.
        kind: magnetar_security::acl::ResourceType,
        /// Its name.
        name: String,
        /// What was denied.
        operation: magnetar_security::acl::Operation,
    },
    /// ACLs asked of a broker without an authorizer.
    #[error("{0}")]
    SecurityDisabled(String),
    /// A subscription of this name exists on the partition (admin create).
    #[error("Subscription {0} already exists for topic")]
    SubscriptionExists(String),
    /// No subscription of this name on the partition.
    #[error("subscription {0} does not exist")]
    SubscriptionNotFound(String),
    /// The consumer is not attached to the subscription.
    #[error("{0}")]
    ConsumerNotFound(String),
    /// The operation is not allowed on this subscription (a cumulative ack
    /// on Shared or Key_Shared).
    #[error("{0}")]
    NotAllowed(String),
    /// No tenant of this name.
    #[error("tenant {0} does not exist")]
    TenantNotFound(String),
    /// Creating a tenant whose name is taken.
    #[error("tenant {0} already exists")]
    TenantExists(String),
    /// Deleting (without force) a tenant that has namespaces.
    #[error("tenant {0} still has namespaces")]
    TenantNotEmpty(String),
    /// No namespace of this name.
    #[error("namespace {0} does not exist")]
    NamespaceNotFound(String),
    /// Creating a namespace whose name is taken.
    #[error("namespace {0} already exists")]
    NamespaceExists(String),
    /// Deleting (without force) a namespace that has topics.
    #[error("namespace {0} still has topics")]
    NamespaceNotEmpty(String),
    /// A tenant or namespace policy that breaks a rule (unknown cluster,
    /// invalid retention, ...).
    #[error("{0}")]
    InvalidPolicy(String),
    /// Something that always exists (`public`, `public/default`) cannot
    /// be deleted.
    #[error("{0} always exists and cannot be deleted")]
    Undeletable(String),
    /// Deleting (without force) a topic with attached producers or
    /// consumers.
    #[error("topic {0} has attached producers or consumers")]
    TopicBusy(String),
    /// The controller quorum did not take or apply a metadata change in
    /// time (no quorum, no leader yet): nothing is known to have changed;
    /// retry.
    #[error("the controller quorum is unavailable: {0}")]
    ControllerUnavailable(String),
    /// A node could not start as a member of its cluster (its controller
    /// did not start, its registration was refused, its data directory
    /// holds another cluster's metadata); the message says why.
    #[error("{0}")]
    Startup(String),
    /// The broker coordinating a group or transactional id is fenced or
    /// unknown (or none is live to place coordinators on); retry.
    #[error("{0}")]
    CoordinatorUnavailable(String),
    /// Another broker coordinates this group or transactional id now (it
    /// leads the id's group-log slot); the client looks it up again.
    #[error("{0}")]
    NotCoordinator(String),
    /// This broker leads the id's group-log slot and is still loading its
    /// state; retry shortly.
    #[error("{0}")]
    CoordinatorLoadInProgress(String),
    /// The metadata file is unreadable.
    #[error("metadata file {path} is corrupt: {reason}")]
    MetadataCorrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl From<magnetar_config::ConfigError> for Error {
    fn from(e: magnetar_config::ConfigError) -> Error {
        match e {
            magnetar_config::ConfigError::Config { key, reason } => Error::Config { key, reason },
            magnetar_config::ConfigError::InvalidConfig { key, reason } => {
                Error::InvalidConfig { key, reason }
            }
        }
    }
}

impl From<magnetar_metadata::MetadataError> for Error {
    fn from(e: magnetar_metadata::MetadataError) -> Error {
        use magnetar_metadata::MetadataError as M;
        match e {
            M::Config(e) => e.into(),
            M::InvalidTopic(e) => Error::InvalidTopic(e),
            M::UnknownTopic(t) => Error::UnknownTopic(t),
            M::UnknownTopicId(id) => Error::UnknownTopicId(id),
            M::TopicExists(t) => Error::TopicExists(t),
            M::InvalidPartitions(r) => Error::InvalidPartitions(r),
            M::InvalidReplicationFactor(r) => Error::InvalidReplicationFactor(r),
            M::InvalidReplicaAssignment(r) => Error::InvalidReplicaAssignment(r),
            M::InvalidRequest(r) => Error::InvalidRequest(r),
            M::MetadataIo { path, source } => Error::MetadataIo { path, source },
            M::MetadataConflict(r) => Error::MetadataConflict(r),
            M::NamespaceNotFound(n) => Error::NamespaceNotFound(n),
            M::InvalidPolicy(r) => Error::InvalidPolicy(r),
            M::MetadataCorrupt { path, reason } => Error::MetadataCorrupt { path, reason },
        }
    }
}

impl From<crate::coordinator_error::CoordError> for Error {
    /// Each coordinator-state error is the broker error of the same name,
    /// text and wrapped source.
    fn from(e: crate::coordinator_error::CoordError) -> Error {
        use crate::coordinator_error::CoordError as C;
        match e {
            C::InvalidRequest(m) => Error::InvalidRequest(m),
            C::Storage { partition, source } => Error::Storage { partition, source },
            C::MetadataCorrupt { path, reason } => Error::MetadataCorrupt { path, reason },
            C::NotCoordinator(m) => Error::NotCoordinator(m),
            C::NotCommitted(m) => Error::CoordinatorUnavailable(m),
            C::Transaction(t) => Error::Transaction(t),
            C::ConsumerBusy(m) => Error::ConsumerBusy(m),
            C::SubscriptionTypeMismatch {
                subscription,
                existing,
                requested,
            } => Error::SubscriptionTypeMismatch {
                subscription,
                existing,
                requested,
            },
            C::SubscriptionExists(m) => Error::SubscriptionExists(m),
            C::SubscriptionNotFound(m) => Error::SubscriptionNotFound(m),
            C::ConsumerNotFound(m) => Error::ConsumerNotFound(m),
            C::NotAllowed(m) => Error::NotAllowed(m),
        }
    }
}
