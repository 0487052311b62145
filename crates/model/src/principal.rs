//! Who a client is, once authenticated.

use std::fmt;

/// An authenticated identity, as Kafka's `KafkaPrincipal` (`User:alice`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    /// The principal type; always `User` here.
    pub kind: String,
    /// The name: a SASL user name, or a TLS certificate's subject.
    pub name: String,
}

impl Principal {
    /// `User:name`.
    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            kind: "User".into(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`: a client on a listener that authenticates no one.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}
