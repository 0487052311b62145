//! The error type of the coordinator's state (groups, subscriptions,
//! producer sequences, schemas, transactions): exactly what those parts
//! produce, each with the text and meaning of the broker error it becomes
//! (the broker turns each into its own error of the same name and text),
//! and the transaction coordinator's refusals ([`TxnError`]) it wraps.

use std::path::PathBuf;

use crate::subscription_type::SubscriptionType;

/// Everything an operation on the coordinator's state can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    /// A request that is well-formed but not acceptable (or state that
    /// could not be encoded).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The group log's storage refused or failed.
    #[error("partition {partition}: {source}")]
    Storage {
        /// The partition concerned (`topic-N`).
        partition: String,
        /// The storage error.
        #[source]
        source: storage::Error,
    },
    /// This broker no longer leads the group log partition the state
    /// lives in (NOT_COORDINATOR: the client looks the coordinator up
    /// again).
    #[error("{0}")]
    NotCoordinator(String),
    /// A group-log write did not reach the in-sync replicas in time, or
    /// too few are in sync (COORDINATOR_NOT_AVAILABLE, as Kafka answers a
    /// commit it could not replicate); retried.
    #[error("{0}")]
    NotCommitted(String),
    /// The group log holds a batch that cannot be decoded.
    #[error("metadata file {path} is corrupt: {reason}")]
    MetadataCorrupt {
        /// The log's directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A transactional request the transaction coordinator refused.
    #[error(transparent)]
    Transaction(#[from] TxnError),
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
        existing: SubscriptionType,
        /// The type asked for.
        requested: SubscriptionType,
    },
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
}

/// Why a transactional request is refused (each maps to Kafka's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// INVALID_PRODUCER_ID_MAPPING: the transactional id has no producer
    /// id, or another one.
    #[error("transactional id {0:?} is not mapped to this producer id")]
    InvalidProducerIdMapping(String),
    /// PRODUCER_FENCED: an older epoch; a newer producer took over.
    #[error("producer epoch {sent} is fenced by epoch {current}")]
    ProducerFenced {
        /// The epoch sent.
        sent: i16,
        /// The current epoch.
        current: i16,
    },
    /// INVALID_TXN_STATE.
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// CONCURRENT_TRANSACTIONS: markers of the previous transaction are
    /// still being written; retry.
    #[error("the previous transaction of {0:?} is still completing")]
    ConcurrentTransactions(String),
    /// INVALID_TRANSACTION_TIMEOUT.
    #[error("transaction timeout {0} ms is not within 1..={1} ms")]
    InvalidTimeout(i32, i64),
    /// NOT_COORDINATOR: another broker of the cluster coordinates this
    /// transactional id (the client looks its coordinator up again).
    #[error("this broker does not coordinate transactional id {0:?}")]
    NotCoordinator(String),
    /// COORDINATOR_NOT_AVAILABLE: a broker the transaction needs (its
    /// coordinator, a partition's leader, a group's coordinator) cannot be
    /// reached now; retried.
    #[error("{0}")]
    CoordinatorNotAvailable(String),
}
