//! Broker errors → Kafka error codes. The only place codes are chosen.

use kafka_protocol::error::ResponseError;

use crate::Error;

/// The Kafka error for a broker error.
pub fn response_error(e: &Error) -> ResponseError {
    use ResponseError as R;
    match e {
        Error::Config { .. } | Error::InvalidConfig { .. } => R::InvalidConfig,
        Error::InvalidTopic(_) => R::InvalidTopicException,
        Error::UnknownTopic(_) | Error::UnknownPartition { .. } => R::UnknownTopicOrPartition,
        Error::UnknownTopicId(_) => R::UnknownTopicId,
        Error::TopicExists(_) => R::TopicAlreadyExists,
        Error::InvalidPartitions(_) => R::InvalidPartitions,
        Error::InvalidReplicationFactor(_) => R::InvalidReplicationFactor,
        Error::InvalidRequest(_) => R::InvalidRequest,
        Error::Storage { source, .. } => storage_error(source),
        Error::MetadataIo { .. } | Error::MetadataCorrupt { .. } => R::KafkaStorageError,
    }
}

/// The Kafka error for a storage error.
pub fn storage_error(e: &storage::Error) -> ResponseError {
    use storage::Error as S;
    use ResponseError as R;
    match e {
        S::Batch(_) => R::CorruptMessage,
        S::RecordBatchTooLarge { .. } => R::MessageTooLarge,
        S::OffsetOutOfRange { .. } => R::OffsetOutOfRange,
        S::OutOfOrderSequence { .. } => R::OutOfOrderSequenceNumber,
        S::InvalidProducerEpoch { .. } => R::InvalidProducerEpoch,
        S::TransactionsNotSupported => R::TransactionalIdAuthorizationFailed,
        S::LogDeleted | S::LogClosed => R::NotLeaderOrFollower,
        _ => R::KafkaStorageError,
    }
}

/// The code and message for an optional error.
pub fn code_and_message(r: &Result<(), Error>) -> (i16, Option<String>) {
    match r {
        Ok(()) => (0, None),
        Err(e) => (response_error(e).code(), Some(e.to_string())),
    }
}
