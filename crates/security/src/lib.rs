//! Who a client is and how it proved it: listeners and their security
//! protocols (Kafka's `listeners`, `listener.security.protocol.map`), TLS
//! (`rustls`, certificates reloaded when their files change), and SASL
//! authentication (PLAIN and SCRAM-SHA-256/512 as sans-IO state machines,
//! with SCRAM credentials stored salted in the broker metadata).
//!
//! Protocol-neutral: the Kafka front end drives these machines from its
//! SaslHandshake/SaslAuthenticate requests; other front ends can reuse them.
//!
//! It also owns the ACL authorizer and the client-quota sensors. It holds
//! no broker and must never import the broker, the coordinators or a front
//! end; the admin operations that change credentials, ACLs and quotas live
//! in the broker, which writes them as metadata records.

pub mod acl;
mod error;
pub use magnetar_config::listeners;
pub mod oauthbearer;
pub mod plain;
pub mod quota;
pub use magnetar_config::principal_mapping;
pub mod scram;
pub mod tls;
pub mod token;

pub use error::AuthError;
pub use magnetar_config::listeners::{KafkaListener, SecurityProtocol};
pub use model::Principal;
pub use scram::{ScramCredential, ScramMechanism};

/// The SASL mechanisms this broker implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    /// RFC 4616: the password in the clear (use it over TLS only).
    Plain,
    /// RFC 5802/7677 with one of the SCRAM hashes.
    Scram(ScramMechanism),
    /// RFC 7628: a bearer token (JWT) checked against the token keys.
    OAuthBearer,
}

impl Mechanism {
    /// Every mechanism, as `sasl.enabled.mechanisms` names them.
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Plain,
        Mechanism::Scram(ScramMechanism::Sha256),
        Mechanism::Scram(ScramMechanism::Sha512),
        Mechanism::OAuthBearer,
    ];

    /// The IANA name (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanisms `sasl.enabled.mechanisms` enables.
    pub fn enabled(config: &magnetar_config::BrokerConfig) -> Vec<Mechanism> {
        config
            .string_value("sasl.enabled.mechanisms")
            .split(',')
            .filter_map(Mechanism::from_name)
            .collect()
    }

    /// The mechanism named `name` (case-sensitive, as Kafka).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// One SASL exchange in progress on a connection.
#[derive(Debug)]
pub enum SaslExchange {
    /// PLAIN: one message, verified against the stored credentials.
    Plain,
    /// SCRAM before the client's first message.
    ScramStart(ScramMechanism),
    /// SCRAM after the server's first message.
    ScramFinal(Box<scram::ScramServer>),
    /// OAUTHBEARER: one message carrying the token.
    OAuthBearer,
}

/// What a step of an exchange produced.
#[derive(Debug)]
pub enum SaslStep {
    /// Send these bytes to the client and wait for its next message.
    Continue(Vec<u8>, SaslExchange),
    /// Authenticated; send these bytes (possibly empty) to the client.
    /// The credential's own end (a token's `exp`, ms since the epoch), if
    /// it has one, bounds the session.
    Done(Principal, Vec<u8>, Option<i64>),
}

/// What a SASL step may consult.
pub struct SaslContext<'a> {
    /// Finds a user's stored credential of a mechanism.
    pub lookup: &'a dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    /// Keys the made-up credentials of unknown users (so a probe cannot
    /// tell them from known ones).
    pub secret: &'a [u8],
    /// Checks bearer tokens; `None` when no token key is configured.
    pub tokens: Option<&'a token::TokenValidator>,
    /// Now, in ms since the epoch (token expiry).
    pub now_ms: i64,
}

impl SaslExchange {
    /// A new exchange of `mechanism`.
    pub fn start(mechanism: Mechanism) -> SaslExchange {
        match mechanism {
            Mechanism::Plain => SaslExchange::Plain,
            Mechanism::Scram(m) => SaslExchange::ScramStart(m),
            Mechanism::OAuthBearer => SaslExchange::OAuthBearer,
        }
    }

    /// Feeds the client's next message. PLAIN derives a key from the
    /// password: run it off async workers.
    pub fn step(self, message: &[u8], cx: &SaslContext<'_>) -> Result<SaslStep, AuthError> {
        match self {
            SaslExchange::Plain => {
                let p = plain::authenticate(message, cx.lookup)?;
                Ok(SaslStep::Done(p, Vec::new(), None))
            }
            SaslExchange::OAuthBearer => {
                let t = oauthbearer::authenticate(message, cx.tokens, cx.now_ms)?;
                Ok(SaslStep::Done(t.principal, Vec::new(), t.expires_ms))
            }
            SaslExchange::ScramStart(m) => {
                let (server, first) = scram::ScramServer::start(m, message, cx.lookup, cx.secret)?;
                Ok(SaslStep::Continue(
                    first,
                    SaslExchange::ScramFinal(Box::new(server)),
                ))
            }
            SaslExchange::ScramFinal(server) => {
                let (p, last) = server.finish(message)?;
                Ok(SaslStep::Done(p, last, None))
            }
        }
    }
}
