//! CLI errors and the exit codes scripts can rely on.

use std::process::ExitCode;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: the operation failed (the broker refused it, or partly failed).
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad command-line usage or input.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the topic, group or partition does not exist.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code: the broker could not be reached (or did not answer in time).
pub const EXIT_UNREACHABLE: u8 = 4;
/// Exit code: authentication failed: the broker refused the SASL
/// credentials or the client certificate, or the broker's certificate could
/// not be verified. Trying again with the same settings fails again.
pub const EXIT_AUTH: u8 = 5;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A client call failed.
    #[error("{context} (broker {broker}): {source}")]
    Client {
        /// What was being done.
        context: String,
        /// The bootstrap address used.
        broker: String,
        /// The client error.
        #[source]
        source: client::Error,
    },
    /// Bad arguments or input.
    #[error("{0}")]
    Usage(String),
    /// Some items of a batch failed; each was reported already.
    #[error("{failed} of {total} {what} failed")]
    Partial {
        /// How many failed.
        failed: usize,
        /// How many were asked.
        total: usize,
        /// What they were.
        what: &'static str,
        /// Exit code to use (not found if every failure was not found).
        code: u8,
    },
    /// Local I/O (reading input, writing output).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A broker spoken to without the Kafka client (the Pulsar benchmark)
    /// could not be reached or did not answer in time.
    #[error("{context} (broker {broker}): {message}")]
    Unreachable {
        /// What was being done.
        context: String,
        /// The address used.
        broker: String,
        /// Why.
        message: String,
    },
    /// Such a broker refused or failed an operation.
    #[error("{context} (broker {broker}): {message}")]
    Failed {
        /// What was being done.
        context: String,
        /// The address used.
        broker: String,
        /// Why.
        message: String,
    },
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Client { source, .. } => client_code(source),
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Partial { code, .. } => *code,
            CliError::Io(_) => EXIT_FAILED,
            CliError::Unreachable { .. } => EXIT_UNREACHABLE,
            CliError::Failed { .. } => EXIT_FAILED,
        }
    }

    /// Prints the error and turns it into an exit code.
    pub fn report(&self) -> ExitCode {
        eprintln!("magnetar: error: {self}");
        ExitCode::from(self.exit_code())
    }
}

/// The exit code a client error maps to.
pub fn client_code(e: &client::Error) -> u8 {
    use client::{Error as E, ResponseError as R};
    match e {
        E::NotFound(_) => EXIT_NOT_FOUND,
        E::Broker(b)
            if matches!(
                b.kind(),
                R::UnknownTopicOrPartition | R::UnknownTopicId | R::GroupIdNotFound
            ) =>
        {
            EXIT_NOT_FOUND
        }
        E::Timeout(_) | E::Disconnected { .. } | E::Io { .. } | E::NotKafka { .. } => {
            EXIT_UNREACHABLE
        }
        // Still without a leader or coordinator after the wait: its broker
        // is down.
        E::Broker(b) if matches!(b.kind(), R::LeaderNotAvailable | R::CoordinatorNotAvailable) => {
            EXIT_UNREACHABLE
        }
        E::Authentication { .. } | E::Tls { .. } => EXIT_AUTH,
        E::InvalidArgument(_) => EXIT_USAGE,
        _ => EXIT_FAILED,
    }
}

/// A parse error's text without the "invalid argument" prefix.
pub(crate) fn message(e: client::Error) -> String {
    match e {
        client::Error::InvalidArgument(m) => m,
        other => other.to_string(),
    }
}

/// Attaches context and the broker address to client results.
pub trait Context<T> {
    /// Wraps an error with what was being done.
    fn context(self, what: impl Into<String>, broker: &str) -> Result<T, CliError>;
}

impl<T> Context<T> for Result<T, client::Error> {
    fn context(self, what: impl Into<String>, broker: &str) -> Result<T, CliError> {
        self.map_err(|source| CliError::Client {
            context: what.into(),
            broker: broker.to_string(),
            source,
        })
    }
}

/// Collapses per-item results: reports each failure on stderr and returns
/// an error if any failed.
pub fn check_items<K: std::fmt::Display, T>(
    items: &[(K, client::Result<T>)],
    what: &'static str,
) -> Result<(), CliError> {
    let failures: Vec<&client::Error> =
        items.iter().filter_map(|(_, r)| r.as_ref().err()).collect();
    for (k, r) in items {
        if let Err(e) = r {
            eprintln!("magnetar: {k}: {e}");
        }
    }
    if failures.is_empty() {
        return Ok(());
    }
    let all_not_found = failures.iter().all(|e| client_code(e) == EXIT_NOT_FOUND);
    Err(CliError::Partial {
        failed: failures.len(),
        total: items.len(),
        what,
        code: if all_not_found {
            EXIT_NOT_FOUND
        } else {
            EXIT_FAILED
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authentication_failures_have_their_own_code() {
        let auth = client::Error::Authentication {
            broker: "b:1".into(),
            message: "SCRAM-SHA-512 as \"alice\": wrong".into(),
        };
        assert_eq!(client_code(&auth), EXIT_AUTH);
        let tls = client::Error::Tls {
            broker: "b:1".into(),
            reason: "unknown issuer".into(),
        };
        assert_eq!(client_code(&tls), EXIT_AUTH);
        let e = CliError::Client {
            context: "cannot connect".into(),
            broker: "b:1".into(),
            source: auth,
        };
        assert_eq!(e.exit_code(), EXIT_AUTH);
        assert!(
            e.to_string().contains("authentication failed at b:1"),
            "{e}"
        );
    }
}
