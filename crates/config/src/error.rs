//! The configuration crate's one error type.

/// Why a configuration key, value or file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
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
}
