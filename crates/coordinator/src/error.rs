//! The error type of the coordinator's state (groups, subscriptions,
//! producer sequences, schemas, transactions): exactly what those parts
//! produce, each with the text and meaning of the broker error it becomes
//! (the broker turns each into its own error of the same name and text).

use std::path::PathBuf;

use crate::subscription::SubscriptionType;
use crate::txn::state::TxnError;

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
