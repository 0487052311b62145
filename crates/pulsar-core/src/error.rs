//! The front end's error: a Pulsar `ServerError` code and a message, made
//! from the codec's and the broker's errors.

use magnetar_pulsar_wire::proto::ServerError;
use magnetar_pulsar_wire::FrameError;

/// A refusal to send a client, with the `ServerError` its client library
/// turns into its usual exception.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct PulsarError {
    /// The code.
    pub code: ServerError,
    /// What went wrong, for the client's log.
    pub message: String,
}

impl PulsarError {
    /// An error with `code` and `message`.
    pub fn new(code: ServerError, message: impl Into<String>) -> PulsarError {
        PulsarError {
            code,
            message: message.into(),
        }
    }
}

impl From<broker::coordinator_error::CoordError> for PulsarError {
    /// As the broker error it is.
    fn from(e: broker::coordinator_error::CoordError) -> Self {
        PulsarError::from(broker::Error::from(e))
    }
}

impl From<broker::Error> for PulsarError {
    fn from(e: broker::Error) -> Self {
        use broker::Error as E;
        // Upstream refuses a message over the topic's maximum with
        // NotAllowed ("Exceed maximum message size").
        if let E::Storage {
            source: storage::Error::RecordBatchTooLarge { size, max },
            ..
        } = &e
        {
            return PulsarError::new(
                ServerError::NotAllowedError,
                format!(
                    "Exceed maximum message size: {size} bytes as stored, over the topic's max.message.bytes {max}"
                ),
            );
        }
        let code = match &e {
            E::UnknownTopic(_)
            | E::UnknownTopicId(_)
            | E::UnknownPartition { .. }
            // Deleted between the name check and the topic's creation.
            | E::NamespaceNotFound(_) => ServerError::TopicNotFound,
            E::InvalidTopic(_) => ServerError::InvalidTopicName,
            // The client looks the topic up again and is sent to its owner.
            E::PartitionNotHosted { .. }
            | E::Replication { .. }
            | E::ReplicationTimeout(_)
            | E::ControllerUnavailable(_)
            | E::CoordinatorUnavailable(_)
            | E::NotCoordinator(_)
            | E::CoordinatorLoadInProgress(_) => {
                ServerError::ServiceNotReady
            }
            E::InternalTopic(_) => ServerError::NotAllowedError,
            E::TopicExists(_) | E::InvalidPartitions(_) | E::InvalidRequest(_) => {
                ServerError::NotAllowedError
            }
            E::Storage { .. } => ServerError::PersistenceError,
            // Upstream's SubscriptionBusyException is ConsumerBusy too.
            E::ConsumerBusy(_) | E::SubscriptionTypeMismatch { .. } => ServerError::ConsumerBusy,
            E::SubscriptionNotFound(_) => ServerError::SubscriptionNotFound,
            E::ConsumerNotFound(_) => ServerError::ConsumerNotFound,
            E::NotAllowed(_) => ServerError::NotAllowedError,
            E::Denied { .. } => ServerError::AuthorizationError,
            _ => ServerError::UnknownError,
        };
        PulsarError::new(code, e.to_string())
    }
}

impl From<model::Error> for PulsarError {
    fn from(e: model::Error) -> Self {
        PulsarError::new(ServerError::InvalidTopicName, e.to_string())
    }
}

impl From<FrameError> for PulsarError {
    fn from(e: FrameError) -> Self {
        let code = match e {
            FrameError::ChecksumMismatch { .. } => ServerError::ChecksumError,
            _ => ServerError::NotAllowedError,
        };
        PulsarError::new(code, e.to_string())
    }
}
