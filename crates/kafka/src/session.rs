//! A connection's authentication state on its listener (Kafka's
//! `SaslServerAuthenticator`, as a state machine without I/O): what the
//! listener asks for, who the client is, and which requests it may send.
//!
//! On a SASL listener a new connection may send only ApiVersions and
//! SaslHandshake, then SaslAuthenticate until the exchange is done; any
//! other request closes the connection, as in Kafka. With
//! `connections.max.reauth.ms` the session expires: the client must
//! re-authenticate (KIP-368) on the same connection, as the same principal,
//! before then, and a request after the expiry closes the connection.

use std::sync::Arc;
use std::time::Duration;

use broker::security::tls::TlsContext;
use broker::security::{Mechanism, Principal, SaslExchange, SecurityProtocol};
use kafka_protocol::messages::ApiKey;
use tokio::time::Instant;

/// Largest request accepted before a client has authenticated
/// (`sasl.server.max.receive.size` in Kafka), so an unauthenticated client
/// cannot make the broker buffer much.
pub const MAX_UNAUTHENTICATED_REQUEST: usize = 524_288;

/// What one listener asks of its clients.
#[derive(Debug)]
pub struct ListenerSecurity {
    /// The listener's name (`PLAINTEXT`, `SASL_SSL`, ...).
    pub name: String,
    /// The key its endpoints have in broker registrations.
    pub registry_key: Arc<str>,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// The SASL mechanisms it offers (SASL listeners).
    pub mechanisms: Vec<Mechanism>,
    /// How long a SASL session lasts, if limited.
    pub reauth: Option<Duration>,
    /// How long a failed authentication waits before its answer.
    pub failed_delay: Duration,
    /// The TLS material (TLS listeners).
    pub tls: Option<Arc<TlsContext>>,
    /// Checks OAUTHBEARER tokens, when token keys are configured.
    pub tokens: Option<Arc<broker::security::token::TokenValidator>>,
}

impl ListenerSecurity {
    /// A PLAINTEXT listener (tests, and `--kafka-addr` alone).
    pub fn plaintext() -> ListenerSecurity {
        ListenerSecurity {
            name: "PLAINTEXT".into(),
            registry_key: Arc::from(broker::cluster::KAFKA_LISTENER),
            protocol: SecurityProtocol::Plaintext,
            mechanisms: Vec::new(),
            reauth: None,
            failed_delay: Duration::ZERO,
            tls: None,
            tokens: None,
        }
    }

    /// The mechanisms' names, as SaslHandshake lists them.
    pub fn mechanism_names(&self) -> Vec<&'static str> {
        self.mechanisms.iter().map(|m| m.name()).collect()
    }
}

/// Where the connection's authentication stands.
#[derive(Debug)]
pub(crate) enum AuthState {
    /// The listener authenticates no one with SASL: every request passes.
    Open,
    /// A SASL listener before a handshake.
    AwaitingHandshake,
    /// After a handshake: SaslAuthenticate steps of this exchange.
    Authenticating {
        /// The exchange; `None` while a step runs.
        exchange: Option<SaslExchange>,
        /// Set when this is a re-authentication: the session's principal
        /// (which must not change) and its old expiry.
        reauth_of: Option<(Principal, Option<Instant>)>,
    },
    /// Authenticated, until `expires` if set.
    Authenticated {
        /// When the session ends.
        expires: Option<Instant>,
    },
}

/// What to do with a request, given the connection's state.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    /// Handle it.
    Pass,
    /// Close the connection, logging why.
    Close(String),
}

/// One connection's authentication.
#[derive(Debug)]
pub struct Session {
    /// Who the client is: `User:ANONYMOUS`, a certificate's subject, or the
    /// SASL user once authenticated.
    pub principal: Arc<Principal>,
    pub(crate) state: AuthState,
}

impl Session {
    /// A new connection's session on a listener of `protocol`; `principal`
    /// is the client certificate's, if one was presented.
    pub fn new(protocol: SecurityProtocol, principal: Option<Principal>) -> Session {
        Session {
            principal: Arc::new(principal.unwrap_or_else(Principal::anonymous)),
            state: if protocol.sasl() {
                AuthState::AwaitingHandshake
            } else {
                AuthState::Open
            },
        }
    }

    /// Whether the client has proved who it is where the listener asks it
    /// to (always, on a listener without SASL).
    pub fn authenticated(&self) -> bool {
        matches!(
            self.state,
            AuthState::Open | AuthState::Authenticated { .. }
        )
    }

    /// Whether `api` may be handled now.
    pub fn gate(&self, api: ApiKey, now: Instant) -> Gate {
        let sasl = matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate);
        match &self.state {
            AuthState::Open => Gate::Pass,
            AuthState::AwaitingHandshake => {
                if api == ApiKey::ApiVersions || api == ApiKey::SaslHandshake {
                    Gate::Pass
                } else {
                    Gate::Close(format!(
                        "unexpected {api:?} request before SASL authentication"
                    ))
                }
            }
            AuthState::Authenticating { .. } => {
                if sasl || api == ApiKey::ApiVersions {
                    Gate::Pass
                } else {
                    Gate::Close(format!(
                        "unexpected {api:?} request during SASL authentication"
                    ))
                }
            }
            AuthState::Authenticated { expires } => match expires {
                Some(at) if now >= *at && api != ApiKey::SaslHandshake => Gate::Close(format!(
                    "the SASL session of {} expired (connections.max.reauth.ms) without re-authentication",
                    self.principal
                )),
                _ => Gate::Pass,
            },
        }
    }

    /// The frame size limit now: small until authenticated.
    pub fn max_request(&self, configured: usize) -> usize {
        if self.authenticated() {
            configured
        } else {
            configured.min(MAX_UNAUTHENTICATED_REQUEST)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_listeners_gate_requests_until_authenticated() {
        let now = Instant::now();
        let open = Session::new(SecurityProtocol::Ssl, None);
        assert_eq!(open.gate(ApiKey::Produce, now), Gate::Pass);
        assert_eq!(*open.principal, Principal::anonymous());
        let mut s = Session::new(SecurityProtocol::SaslSsl, None);
        assert!(!s.authenticated());
        assert_eq!(s.gate(ApiKey::ApiVersions, now), Gate::Pass);
        assert_eq!(s.gate(ApiKey::SaslHandshake, now), Gate::Pass);
        assert!(matches!(s.gate(ApiKey::Metadata, now), Gate::Close(_)));
        assert!(matches!(
            s.gate(ApiKey::SaslAuthenticate, now),
            Gate::Close(_)
        ));
        assert_eq!(s.max_request(100 << 20), MAX_UNAUTHENTICATED_REQUEST);
        s.state = AuthState::Authenticating {
            exchange: None,
            reauth_of: None,
        };
        assert_eq!(s.gate(ApiKey::SaslAuthenticate, now), Gate::Pass);
        assert!(matches!(s.gate(ApiKey::Fetch, now), Gate::Close(_)));
        s.state = AuthState::Authenticated {
            expires: Some(now + Duration::from_secs(1)),
        };
        assert_eq!(s.gate(ApiKey::Fetch, now), Gate::Pass);
        assert_eq!(s.max_request(100 << 20), 100 << 20);
        let later = now + Duration::from_secs(2);
        assert!(matches!(s.gate(ApiKey::Fetch, later), Gate::Close(_)));
        assert_eq!(s.gate(ApiKey::SaslHandshake, later), Gate::Pass);
    }
}
