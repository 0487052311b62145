//! Broker errors → Kafka error codes. The only place codes are chosen.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::BatchIndexAndErrorMessage;
use kafka_protocol::protocol::StrBytes;

use broker::Error;

/// The Kafka error for a broker error.
pub fn response_error(e: &Error) -> ResponseError {
    use ResponseError as R;
    match e {
        Error::Config { .. } | Error::InvalidConfig { .. } => R::InvalidConfig,
        Error::InvalidTopic(_) | Error::InternalTopic(_) => R::InvalidTopicException,
        Error::UnknownTopic(_) | Error::UnknownPartition { .. } => R::UnknownTopicOrPartition,
        Error::UnknownTopicId(_) => R::UnknownTopicId,
        Error::PartitionNotHosted { .. } => R::NotLeaderOrFollower,
        Error::TopicExists(_) => R::TopicAlreadyExists,
        Error::InvalidPartitions(_) => R::InvalidPartitions,
        Error::InvalidReplicationFactor(_) => R::InvalidReplicationFactor,
        Error::InvalidReplicaAssignment(_) => R::InvalidReplicaAssignment,
        Error::NotEnoughReplicas { .. } => R::NotEnoughReplicas,
        Error::Replication { source, .. } => replication_error(source),
        Error::ReplicationTimeout(_) => R::RequestTimedOut,
        Error::InvalidRequest(_) | Error::MetadataConflict(_) => R::InvalidRequest,
        // Subscriptions are not reachable from Kafka requests.
        Error::ConsumerBusy(_)
        | Error::SubscriptionTypeMismatch { .. }
        | Error::SubscriptionNotFound(_)
        | Error::SubscriptionExists(_)
        | Error::ConsumerNotFound(_)
        | Error::NotAllowed(_) => R::InvalidRequest,
        // Tenants, namespaces and busy-topic checks are Pulsar admin
        // concepts, not reachable from Kafka requests either.
        Error::TenantNotFound(_)
        | Error::TenantExists(_)
        | Error::TenantNotEmpty(_)
        | Error::NamespaceNotFound(_)
        | Error::NamespaceExists(_)
        | Error::NamespaceNotEmpty(_)
        | Error::InvalidPolicy(_)
        | Error::Undeletable(_)
        | Error::TopicBusy(_) => R::InvalidRequest,
        Error::ControllerUnavailable(_) => R::RequestTimedOut,
        Error::CoordinatorUnavailable(_) => R::CoordinatorNotAvailable,
        Error::NotCoordinator(_) => R::NotCoordinator,
        Error::CoordinatorLoadInProgress(_) => R::CoordinatorLoadInProgress,
        Error::UnacceptableCredential(_) => R::UnacceptableCredential,
        Error::UnsupportedSaslMechanism(_) => R::UnsupportedSaslMechanism,
        Error::DuplicateResource(_) => R::DuplicateResource,
        Error::ResourceNotFound(_) => R::ResourceNotFound,
        Error::SecurityDisabled(_) => R::SecurityDisabled,
        Error::Denied { kind, .. } => denied(*kind),
        Error::Storage { source, .. } => storage_error(source),
        Error::Transaction(t) => txn_error(t),
        Error::TransactionsUnavailable(_) => R::TransactionalIdAuthorizationFailed,
        Error::OperationNotAttempted => R::OperationNotAttempted,
        Error::DataDir(_)
        | Error::MetadataIo { .. }
        | Error::MetadataCorrupt { .. }
        | Error::Startup(_) => R::KafkaStorageError,
    }
}

/// The Kafka error for a replication refusal.
pub fn replication_error(e: &broker::replica::ReplicationError) -> ResponseError {
    use broker::replica::ReplicationError as E;
    use ResponseError as R;
    match e {
        E::NotEnoughReplicas { .. } => R::NotEnoughReplicas,
        E::NotEnoughReplicasAfterAppend => R::NotEnoughReplicasAfterAppend,
        E::NotLeader => R::NotLeaderOrFollower,
        E::FencedLeaderEpoch { .. } => R::FencedLeaderEpoch,
        E::UnknownLeaderEpoch { .. } => R::UnknownLeaderEpoch,
        E::InvalidUpdateVersion { .. } => R::InvalidUpdateVersion,
        E::UnknownReplica(_) => R::UnknownServerError,
        E::IneligibleReplica(_) => R::IneligibleReplica,
        E::NoEligibleLeader => R::EligibleLeadersNotAvailable,
        E::InvalidRequest(_) => R::InvalidRequest,
    }
}

/// Kafka's error for a denied operation on a resource of `kind`.
pub fn denied(kind: broker::security::acl::ResourceType) -> ResponseError {
    use broker::security::acl::ResourceType as T;
    match kind {
        T::Topic => ResponseError::TopicAuthorizationFailed,
        T::Group => ResponseError::GroupAuthorizationFailed,
        T::Cluster => ResponseError::ClusterAuthorizationFailed,
        T::TransactionalId => ResponseError::TransactionalIdAuthorizationFailed,
        T::DelegationToken => ResponseError::DelegationTokenAuthorizationFailed,
        T::User => ResponseError::PrincipalDeserializationFailure,
    }
}

/// The Kafka error for a storage error.
pub fn storage_error(e: &storage::Error) -> ResponseError {
    use storage::Error as S;
    use ResponseError as R;
    match e {
        // Kafka's split: a batch whose records break a rule is an invalid
        // record (not retried by clients); a malformed header or a bad CRC
        // is a corrupt message.
        S::Batch(b) if b.is_invalid_timestamp() => R::InvalidTimestamp,
        S::Batch(
            storage::BatchError::InvalidRecords { .. } | storage::BatchError::RecordsRefused { .. },
        ) => R::InvalidRecord,
        S::Batch(_) => R::CorruptMessage,
        S::RecordBatchTooLarge { .. } => R::MessageTooLarge,
        S::OffsetOutOfRange { .. } => R::OffsetOutOfRange,
        S::OutOfOrderSequence { .. } => R::OutOfOrderSequenceNumber,
        S::InvalidProducerEpoch { .. } => R::InvalidProducerEpoch,
        // Only a transactional Produce without a transactional id, or a
        // control batch from a client, gets here.
        S::TransactionsNotSupported => R::InvalidTxnState,
        S::InvalidTxnState(_) => R::InvalidTxnState,
        S::TransactionCoordinatorFenced { .. } => R::TransactionCoordinatorFenced,
        S::LogDeleted | S::LogClosed => R::NotLeaderOrFollower,
        _ => R::KafkaStorageError,
    }
}

/// The Kafka error for a transaction coordinator refusal.
pub fn txn_error(e: &broker::txn::TxnError) -> ResponseError {
    use broker::txn::TxnError as T;
    use ResponseError as R;
    match e {
        T::InvalidProducerIdMapping(_) => R::InvalidProducerIdMapping,
        T::ProducerFenced { .. } => R::ProducerFenced,
        T::InvalidTxnState(_) => R::InvalidTxnState,
        T::ConcurrentTransactions(_) => R::ConcurrentTransactions,
        T::InvalidTimeout(..) => R::InvalidTransactionTimeout,
        T::NotCoordinator(_) => R::NotCoordinator,
        T::CoordinatorNotAvailable(_) => R::CoordinatorNotAvailable,
    }
}

/// PRODUCER_FENCED as the versions before it answer it:
/// INVALID_PRODUCER_EPOCH (`old`: the request's version predates it).
pub fn fenced_as_epoch(e: ResponseError, old: bool) -> ResponseError {
    match e {
        ResponseError::ProducerFenced if old => ResponseError::InvalidProducerEpoch,
        other => other,
    }
}

/// Produce v8+'s per-record errors for a refused append to partition
/// `partition` of `topic`: each record at fault with its index within its
/// batch and Kafka's message for it (empty when the fault is not one
/// record's), as Kafka's `LogValidator` lists them (KIP-467).
pub fn record_errors(e: &Error, topic: &str, partition: i32) -> Vec<BatchIndexAndErrorMessage> {
    let entry = |index: u32, message: String| {
        BatchIndexAndErrorMessage::default()
            .with_batch_index(i32::try_from(index).unwrap_or(i32::MAX))
            .with_batch_index_error_message(Some(StrBytes::from_string(message)))
    };
    match e {
        Error::Storage {
            source: storage::Error::Batch(batch),
            ..
        } => match batch {
            storage::BatchError::InvalidRecords {
                record_index: Some(index),
                error,
                ..
            } => vec![entry(*index, error.to_string())],
            storage::BatchError::RecordsRefused { records, .. } => records
                .iter()
                .map(|r| entry(r.index, record_message(&r.error, topic, partition)))
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Kafka's `LogValidator` message for a refused record.
fn record_message(error: &storage::RecordError, topic: &str, partition: i32) -> String {
    use storage::RecordError as R;
    match error {
        R::MissingKey => format!(
            "Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
        ),
        R::TimestampOutOfRange {
            timestamp,
            offset,
            min,
            max,
        } => format!(
            "Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be within [{min}, {max}]"
        ),
        R::LogAppendTimeFromProducer => {
            "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime."
                .to_string()
        }
        other => other.to_string(),
    }
}

/// The partition-level message of a Produce refused for its records, as
/// Kafka words it (the per-record messages follow in `record_errors`);
/// `None` for other errors.
pub fn records_refused_message(errors: &[BatchIndexAndErrorMessage], e: &Error) -> Option<String> {
    let Error::Storage {
        source: storage::Error::Batch(batch @ storage::BatchError::RecordsRefused { .. }),
        ..
    } = e
    else {
        return None;
    };
    if batch.is_invalid_timestamp() {
        return Some("One or more records have been rejected due to invalid timestamp".into());
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|r| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                r.batch_index,
                r.batch_index_error_message.as_deref().unwrap_or("null")
            )
        })
        .collect();
    Some(format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    ))
}

/// The code and message for an optional error.
pub fn code_and_message(r: &Result<(), Error>) -> (i16, Option<String>) {
    match r {
        Ok(()) => (0, None),
        Err(e) => (response_error(e).code(), Some(e.to_string())),
    }
}

/// The Kafka error for a classic group state-machine error.
pub fn classic_error(e: &broker::group::classic::GroupError) -> ResponseError {
    use broker::group::classic::GroupError as G;
    use ResponseError as R;
    match e {
        G::UnknownMemberId => R::UnknownMemberId,
        G::IllegalGeneration => R::IllegalGeneration,
        G::RebalanceInProgress => R::RebalanceInProgress,
        G::InconsistentGroupProtocol => R::InconsistentGroupProtocol,
        G::FencedInstanceId => R::FencedInstanceId,
        G::MemberIdRequired(_) => R::MemberIdRequired,
        G::InvalidSessionTimeout => R::InvalidSessionTimeout,
        G::GroupMaxSizeReached => R::GroupMaxSizeReached,
        G::CoordinatorNotAvailable => R::CoordinatorNotAvailable,
    }
}

/// The Kafka error for a consumer-protocol state-machine error.
pub fn consumer_error(e: &broker::group::consumer::ConsumerError) -> ResponseError {
    use broker::group::consumer::ConsumerError as C;
    use ResponseError as R;
    match e {
        C::FencedMemberEpoch(_) => R::FencedMemberEpoch,
        C::UnknownMemberId(_) => R::UnknownMemberId,
        C::StaleMemberEpoch(_) => R::StaleMemberEpoch,
        C::UnreleasedInstanceId(_) => R::UnreleasedInstanceId,
        C::UnsupportedAssignor(_) => R::UnsupportedAssignor,
        C::GroupMaxSizeReached => R::GroupMaxSizeReached,
        C::InvalidRequest(_) => R::InvalidRequest,
        C::InvalidRegex(..) => R::InvalidRegularExpression,
    }
}

/// The Kafka error for a coordinator error.
pub fn coordinator_error(e: &broker::group::coordinator::CoordinatorError) -> ResponseError {
    use broker::group::coordinator::{CoordinatorError as E, ProtocolMismatch};
    use ResponseError as R;
    match e {
        E::Classic(g) => classic_error(g),
        E::Consumer(c) => consumer_error(c),
        // As Kafka: a classic request for a consumer-protocol group is an
        // inconsistent protocol; a consumer heartbeat for a classic group
        // finds no consumer group of that id.
        E::WrongProtocol(_, ProtocolMismatch::ClassicOnConsumer) => R::InconsistentGroupProtocol,
        E::WrongProtocol(_, ProtocolMismatch::ConsumerOnClassic) => R::GroupIdNotFound,
        E::GroupNotFound(_) => R::GroupIdNotFound,
        E::NonEmptyGroup(_) => R::NonEmptyGroup,
        E::SubscribedToTopic(_) => R::GroupSubscribedToTopic,
        E::Storage(e) => coord_state_error(e),
    }
}

/// The Kafka error for an error of the coordinator's state: the one the
/// broker error it becomes gets.
pub fn coord_state_error(e: &broker::coordinator_error::CoordError) -> ResponseError {
    use broker::coordinator_error::CoordError as C;
    use ResponseError as R;
    match e {
        C::InvalidRequest(_) => R::InvalidRequest,
        // Subscriptions are not reachable from Kafka requests.
        C::ConsumerBusy(_)
        | C::SubscriptionTypeMismatch { .. }
        | C::SubscriptionNotFound(_)
        | C::SubscriptionExists(_)
        | C::ConsumerNotFound(_)
        | C::NotAllowed(_) => R::InvalidRequest,
        C::Storage { source, .. } => storage_error(source),
        C::Transaction(t) => txn_error(t),
        C::MetadataCorrupt { .. } => R::KafkaStorageError,
        C::NotCoordinator(_) => R::NotCoordinator,
        C::NotCommitted(_) => R::CoordinatorNotAvailable,
    }
}
