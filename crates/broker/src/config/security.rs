//! The security keys' typed views: bearer-token keys, and the Pulsar and
//! HTTP listeners' TLS and authentication.

use super::{keys, BrokerConfig};
use crate::security::token::TokenSettings;
use crate::security::Principal;

/// How Pulsar clients may authenticate (`pulsar.authentication.providers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PulsarAuthProvider {
    /// A JWT in CONNECT's auth data (`authMethodName` `token`).
    Token,
    /// A client certificate on the TLS listener (`authMethodName` `tls`).
    Tls,
}

/// HTTP credentials accepted (`http.authentication.methods`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpAuthMethod {
    /// `Authorization: Bearer <JWT>`.
    Bearer,
    /// `Authorization: Basic <user:password>`.
    Basic,
}

impl BrokerConfig {
    /// What bearer tokens are checked against (`sasl.oauthbearer.*`,
    /// `token.*`).
    pub fn token_settings(&self) -> Result<TokenSettings, String> {
        let opt = |k: &str| {
            let v = self.raw(k).trim();
            (!v.is_empty()).then(|| v.to_string())
        };
        let jwks = match opt("sasl.oauthbearer.jwks.endpoint.url") {
            Some(v) => Some(
                crate::security::token::file_path(&v)
                    .map_err(|e| format!("sasl.oauthbearer.jwks.endpoint.url: {e}"))?,
            ),
            None => None,
        };
        Ok(TokenSettings {
            jwks,
            secret_key: opt("token.secret.key"),
            public_key: opt("token.public.key"),
            public_alg: self.raw("token.public.alg").to_string(),
            subject_claim: opt("sasl.oauthbearer.sub.claim.name").unwrap_or_else(|| "sub".into()),
            audience: self
                .raw("sasl.oauthbearer.expected.audience")
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect(),
            issuer: opt("sasl.oauthbearer.expected.issuer"),
            clock_skew_s: self.int("sasl.oauthbearer.clock.skew.seconds").max(0) as u64,
        })
    }

    /// `pulsar.tls.listen.address`, if set.
    pub fn pulsar_tls_listen_address(&self) -> Option<(String, u16)> {
        self.listener_key("pulsar.tls.listen.address")
    }

    /// `pulsar.tls.advertised.address`, if set.
    pub fn pulsar_tls_advertised_address(&self) -> Option<(String, u16)> {
        self.listener_key("pulsar.tls.advertised.address")
    }

    /// The Pulsar authentication providers, or `None` when Pulsar clients
    /// need not authenticate (`pulsar.authentication.enabled`).
    pub fn pulsar_authentication(&self) -> Option<Vec<PulsarAuthProvider>> {
        if self.raw("pulsar.authentication.enabled") != "true" {
            return None;
        }
        Some(
            self.raw("pulsar.authentication.providers")
                .split(',')
                .filter_map(|p| match p {
                    "token" => Some(PulsarAuthProvider::Token),
                    "tls" => Some(PulsarAuthProvider::Tls),
                    _ => None,
                })
                .collect(),
        )
    }

    /// `http.tls.listen.address`, if set.
    pub fn http_tls_listen_address(&self) -> Option<(String, u16)> {
        self.listener_key("http.tls.listen.address")
    }

    /// The HTTP credentials accepted, or `None` when HTTP requests need
    /// none (`http.authentication.enabled`).
    pub fn http_authentication(&self) -> Option<Vec<HttpAuthMethod>> {
        if self.raw("http.authentication.enabled") != "true" {
            return None;
        }
        Some(
            self.raw("http.authentication.methods")
                .split(',')
                .filter_map(|p| match p {
                    "bearer" => Some(HttpAuthMethod::Bearer),
                    "basic" => Some(HttpAuthMethod::Basic),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The principal of Pulsar clients that send no credentials, or `None`
    /// when they are refused (`pulsar.anonymous.principal`).
    pub fn pulsar_anonymous_principal(&self) -> Option<Principal> {
        self.anonymous_principal(
            "pulsar.authentication.enabled",
            "pulsar.anonymous.principal",
        )
    }

    /// The principal of HTTP requests without credentials, or `None` when
    /// they are refused (`http.anonymous.principal`).
    pub fn http_anonymous_principal(&self) -> Option<Principal> {
        self.anonymous_principal("http.authentication.enabled", "http.anonymous.principal")
    }

    /// The named principal if `principal_key` is set; otherwise
    /// `User:ANONYMOUS` only where nothing depends on who a client is (no
    /// authentication asked for and no authorizer), so that a front end's
    /// unauthenticated clients never inherit by accident what an
    /// authorizer grants a Kafka listener's `User:ANONYMOUS`.
    fn anonymous_principal(&self, enabled_key: &str, principal_key: &str) -> Option<Principal> {
        // Checked when the key is set.
        if let Ok(p) = keys::parse_user_principal(self.raw(principal_key)) {
            return Some(p);
        }
        let open = self.raw(enabled_key) != "true" && self.authorizer().is_none();
        open.then(Principal::anonymous)
    }

    fn listener_key(&self, key: &str) -> Option<(String, u16)> {
        let v = self.raw(key);
        if v.is_empty() {
            return None;
        }
        keys::parse_listener(v).ok()
    }
}
