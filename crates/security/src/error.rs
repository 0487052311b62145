//! Why an authentication failed.

use thiserror::Error;

/// Why an authentication failed. The message a client gets never tells a
/// wrong password from an unknown user.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum AuthError {
    /// Bad credentials, whichever part was wrong.
    #[error("authentication failed: invalid credentials")]
    InvalidCredentials {
        /// What was wrong, for the broker's own log only.
        detail: String,
    },
    /// The client broke the mechanism's exchange.
    #[error("authentication failed: {0}")]
    Malformed(String),
}

impl AuthError {
    pub(crate) fn invalid(detail: impl Into<String>) -> AuthError {
        AuthError::InvalidCredentials {
            detail: detail.into(),
        }
    }

    /// What to log about this failure (more than the client is told).
    pub fn log_detail(&self) -> String {
        match self {
            AuthError::InvalidCredentials { detail } => detail.clone(),
            AuthError::Malformed(m) => m.clone(),
        }
    }
}
