//! The crate's one error type.

use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::message::TopicPartition;

/// A Kafka error code as the broker sent it, with the broker's message if
/// any. [`ResponseError`] names every code of the protocol; codes newer than
/// this client are kept as [`ResponseError::Unknown`].
///
/// ```
/// use magnetar_client::{BrokerError, ResponseError};
/// let e = BrokerError::from_code(3, None).unwrap();
/// assert_eq!(e.kind(), ResponseError::UnknownTopicOrPartition);
/// assert_eq!(e.code(), 3);
/// assert!(BrokerError::from_code(0, None).is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerError {
    kind: ResponseError,
    message: Option<String>,
}

impl BrokerError {
    /// The error for a non-zero code, `None` for 0 (no error).
    pub fn from_code(code: i16, message: Option<&str>) -> Option<BrokerError> {
        ResponseError::try_from_code(code).map(|kind| BrokerError {
            kind,
            message: message.filter(|m| !m.is_empty()).map(str::to_owned),
        })
    }

    /// The protocol's name for the code.
    pub fn kind(&self) -> ResponseError {
        self.kind
    }

    /// The numeric error code.
    pub fn code(&self) -> i16 {
        self.kind.code()
    }

    /// The broker's error message, when the response carries one.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

impl std::fmt::Display for BrokerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.kind, self.kind.code())?;
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

impl std::error::Error for BrokerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

/// Everything that can go wrong in this client.
///
/// Broker-side failures keep the exact Kafka error code in
/// [`Error::Broker`]; client-side failures have their own variants.
///
/// ```
/// use magnetar_client::{Error, ResponseError};
/// let e = Error::from_code(6, None).unwrap(); // NOT_LEADER_OR_FOLLOWER
/// assert!(e.is_retriable());
/// assert_eq!(e.kafka_error(), Some(ResponseError::NotLeaderOrFollower));
/// assert!(!Error::NotFound("t".into()).is_retriable());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The broker answered with a Kafka error code.
    #[error("broker error: {0}")]
    Broker(#[source] BrokerError),
    /// The topic (or group, partition, resource) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The broker does not support what was asked (API or version).
    #[error("not supported: {0}")]
    NotSupported(String),
    /// No answer within the time allowed.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The connection closed before the answer arrived.
    #[error("disconnected from {broker}: {reason}")]
    Disconnected {
        /// `host:port` of the broker.
        broker: String,
        /// Why.
        reason: String,
    },
    /// A socket error (connect, read or write).
    #[error("i/o error talking to {broker}: {source}")]
    Io {
        /// `host:port` of the broker.
        broker: String,
        /// The underlying error, shared so that one failure can be handed to
        /// every request that was waiting on the connection.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// A frame could not be encoded or decoded, or broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Something other than a Kafka broker answered at this address (an
    /// HTTP server, a TLS port, ...).
    #[error("{broker} is not a Kafka broker ({what})")]
    NotKafka {
        /// `host:port` that answered.
        broker: String,
        /// What it answered like.
        what: String,
    },
    /// The broker refused the client's SASL authentication (wrong user
    /// name or password, a mechanism it does not offer, a listener without
    /// SASL) or the client refused the broker's proof (SCRAM's server
    /// signature). Not retriable: the same credentials fail again.
    #[error("authentication failed at {broker}: {message}")]
    Authentication {
        /// `host:port` of the broker.
        broker: String,
        /// What failed, with the broker's error message when it sent one.
        message: String,
    },
    /// TLS failed: the broker's certificate is not trusted or does not
    /// name the host, the broker refused the client's certificate, or the
    /// port does not speak TLS. Not retriable.
    #[error("TLS failed with {broker}: {reason}")]
    Tls {
        /// `host:port` of the broker.
        broker: String,
        /// Why.
        reason: String,
    },
    /// Bad arguments or configuration.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The client (producer, consumer, connection pool) was shut down.
    #[error("client closed")]
    Closed,
    /// A consumer has no position for a partition: nothing committed and
    /// `auto_offset_reset` is none. Seek to go on.
    #[error("no committed offset for {0} and auto_offset_reset is none")]
    NoOffset(TopicPartition),
}

/// `Result` with this crate's [`Error`].
///
/// ```
/// fn parse(s: &str) -> magnetar_client::Result<magnetar_client::Compression> { s.parse() }
/// assert!(parse("gzip").is_ok());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error for a non-zero Kafka error code, `None` for 0.
    pub fn from_code(code: i16, message: Option<&str>) -> Option<Error> {
        BrokerError::from_code(code, message).map(Error::Broker)
    }

    /// `Err` for a non-zero error code.
    pub fn check(code: i16, message: Option<&str>) -> Result<()> {
        match Error::from_code(code, message) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The Kafka error code behind this error, if it came from a broker.
    pub fn kafka_error(&self) -> Option<ResponseError> {
        match self {
            Error::Broker(b) => Some(b.kind()),
            _ => None,
        }
    }

    /// Whether trying again (possibly after refreshing metadata or
    /// reconnecting) may succeed. Kafka codes follow the protocol's own
    /// retriable flag.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Broker(b) => b.kind().is_retriable(),
            Error::Timeout(_) | Error::Disconnected { .. } | Error::Io { .. } => true,
            Error::NotFound(_)
            | Error::NotSupported(_)
            | Error::Protocol(_)
            | Error::NotKafka { .. }
            | Error::Authentication { .. }
            | Error::Tls { .. }
            | Error::InvalidArgument(_)
            | Error::Closed
            | Error::NoOffset(_) => false,
        }
    }

    /// Whether the error means cached metadata (leaders, partitions, the
    /// coordinator) is stale and should be refreshed before a retry.
    pub fn invalidates_metadata(&self) -> bool {
        match self.kafka_error() {
            Some(k) => matches!(
                k,
                ResponseError::NotLeaderOrFollower
                    | ResponseError::UnknownTopicOrPartition
                    | ResponseError::LeaderNotAvailable
                    | ResponseError::UnknownTopicId
                    | ResponseError::FencedLeaderEpoch
                    | ResponseError::UnknownLeaderEpoch
                    | ResponseError::NotCoordinator
                    | ResponseError::CoordinatorNotAvailable
                    | ResponseError::KafkaStorageError
                    | ResponseError::ReplicaNotAvailable
                    | ResponseError::InconsistentTopicId
            ),
            None => matches!(self, Error::Disconnected { .. } | Error::Io { .. }),
        }
    }

    pub(crate) fn protocol(context: &str, e: impl std::fmt::Display) -> Error {
        Error::Protocol(format!("{context}: {e}"))
    }
}

// Here rather than in `message`: the parse fails with an `Error`, which
// names `TopicPartition`, so `message` stays below `error`.
impl std::str::FromStr for TopicPartition {
    type Err = Error;
    /// Parses `topic-partition` (Java's notation; the partition is after
    /// the last `-`).
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidArgument(format!("{s:?} is not topic-partition"));
        let (topic, p) = s.rsplit_once('-').ok_or_else(bad)?;
        let partition = p.parse().map_err(|_| bad())?;
        if topic.is_empty() || partition < 0 {
            return Err(bad());
        }
        Ok(TopicPartition::new(topic, partition))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_and_round_trips() {
        for code in -1i16..=133 {
            if code == 0 {
                assert!(Error::from_code(0, None).is_none());
                continue;
            }
            let e = Error::from_code(code, Some("why")).unwrap();
            let kind = e.kafka_error().unwrap();
            assert_eq!(kind.code(), code);
            assert_eq!(kind.is_retriable(), e.is_retriable(), "code {code}");
            assert!(e.to_string().contains("why"));
            // The source chain reaches the protocol's error kind.
            let src = std::error::Error::source(&e).unwrap();
            assert!(std::error::Error::source(src).is_some());
        }
        let unknown = Error::from_code(9999, None).unwrap();
        assert_eq!(unknown.kafka_error(), Some(ResponseError::Unknown(9999)));
        assert!(!unknown.is_retriable());
    }

    #[test]
    fn classification() {
        let nl = Error::from_code(6, None).unwrap();
        assert!(nl.is_retriable() && nl.invalidates_metadata());
        let too_large = Error::from_code(10, None).unwrap();
        assert!(!too_large.is_retriable() && !too_large.invalidates_metadata());
        let d = Error::Disconnected {
            broker: "b:1".into(),
            reason: "eof".into(),
        };
        assert!(d.is_retriable() && d.invalidates_metadata());
        assert!(Error::Timeout(Duration::from_secs(1)).is_retriable());
        assert!(!Error::NotSupported("x".into()).is_retriable());
        let auth = Error::Authentication {
            broker: "b:1".into(),
            message: "wrong password".into(),
        };
        assert!(!auth.is_retriable() && !auth.invalidates_metadata());
        let tls = Error::Tls {
            broker: "b:1".into(),
            reason: "unknown issuer".into(),
        };
        assert!(!tls.is_retriable() && !tls.invalidates_metadata());
        assert!(Error::check(0, None).is_ok());
        assert!(Error::check(36, Some("exists")).is_err());
    }
}
