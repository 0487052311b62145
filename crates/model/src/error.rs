//! The error raised when a domain value is built from untrusted input.

/// Errors raised when constructing a domain value from untrusted input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A topic name breaks Kafka's naming rules.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A Pulsar topic, tenant or namespace name that Magnetar cannot hold.
    #[error("invalid Pulsar name {name:?}: {reason}")]
    InvalidPulsarName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A topic id string is not a UUID.
    #[error("invalid topic id {0:?}")]
    InvalidTopicId(String),
}
