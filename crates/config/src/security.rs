//! The security keys' typed views: bearer-token keys, and the Pulsar and
//! HTTP listeners' TLS and authentication.

use std::path::PathBuf;

use model::Principal;

use super::broker::BrokerConfig;
use super::key_spec;

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
                file_path(&v).map_err(|e| format!("sasl.oauthbearer.jwks.endpoint.url: {e}"))?,
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

    /// The TLS settings (`ssl.*`), if a keystore is set.
    pub fn tls_settings(&self) -> Option<TlsSettings> {
        let path = |k: &str| {
            let v = self.raw(k);
            (!v.is_empty()).then(|| PathBuf::from(v))
        };
        Some(TlsSettings {
            keystore: path("ssl.keystore.location")?,
            key: path("ssl.key.location"),
            truststore: path("ssl.truststore.location"),
            client_auth: ClientAuth::from_name(self.raw("ssl.client.auth"))
                .unwrap_or(ClientAuth::None),
            tls12: self
                .raw("ssl.enabled.protocols")
                .split(',')
                .any(|p| p == "TLSv1.2"),
            // Checked when the key is set.
            principal_rules: crate::principal_mapping::PrincipalMapper::parse(
                self.raw("ssl.principal.mapping.rules"),
            )
            .unwrap_or_default(),
        })
    }

    /// The named principal if `principal_key` is set; otherwise
    /// `User:ANONYMOUS` only where nothing depends on who a client is (no
    /// authentication asked for and no authorizer), so that a front end's
    /// unauthenticated clients never inherit by accident what an
    /// authorizer grants a Kafka listener's `User:ANONYMOUS`.
    fn anonymous_principal(&self, enabled_key: &str, principal_key: &str) -> Option<Principal> {
        // Checked when the key is set.
        if let Ok(p) = key_spec::parse_user_principal(self.raw(principal_key)) {
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
        key_spec::parse_listener(v).ok()
    }
}

/// Where the keys are and what a token must say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenSettings {
    /// A JWKS (JSON Web Key Set) file.
    pub jwks: Option<PathBuf>,
    /// The shared HMAC secret (HS256/384/512), as a key source (below).
    pub secret_key: Option<String>,
    /// A public key (PEM, or DER as Pulsar writes it), as a key source.
    pub public_key: Option<String>,
    /// The public key's algorithm (`RS256`, `ES256`, ...).
    pub public_alg: String,
    /// The claim naming the principal (`sub`).
    pub subject_claim: String,
    /// Audiences of which a token's `aud` must name one; empty = `aud` is
    /// not checked.
    pub audience: Vec<String>,
    /// The issuer a token's `iss` must be; `None` = not checked.
    pub issuer: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub clock_skew_s: u64,
}

impl TokenSettings {
    /// Whether any key is configured (no key: no token is valid, and token
    /// authentication is unavailable).
    pub fn has_keys(&self) -> bool {
        self.jwks.is_some() || self.secret_key.is_some() || self.public_key.is_some()
    }
}

/// The path of `file:///path` or of a plain path; other URLs are refused.
pub fn file_path(source: &str) -> Result<PathBuf, String> {
    if let Some(p) = source.strip_prefix("file://") {
        return Ok(PathBuf::from(p));
    }
    if source.contains("://") {
        return Err(format!(
            "{source}: only file: URLs and paths are read (Magnetar fetches no keys over the network)"
        ));
    }
    Ok(PathBuf::from(source))
}

/// What `ssl.client.auth` asks of clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// A certificate is asked for; clients without one still connect.
    Requested,
    /// Clients without a valid certificate are refused.
    Required,
}

impl ClientAuth {
    /// The value of `ssl.client.auth`.
    pub fn from_name(v: &str) -> Option<ClientAuth> {
        match v {
            "none" => Some(ClientAuth::None),
            "requested" => Some(ClientAuth::Requested),
            "required" => Some(ClientAuth::Required),
            _ => None,
        }
    }
}

/// Where the TLS material is and what is asked of clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM: the certificate chain, leaf first, and the private key unless
    /// `key` names another file.
    pub keystore: PathBuf,
    /// PEM private key, if not in `keystore`.
    pub key: Option<PathBuf>,
    /// PEM CA certificates that client certificates must chain to.
    pub truststore: Option<PathBuf>,
    /// What is asked of clients.
    pub client_auth: ClientAuth,
    /// Whether TLS 1.2 is offered besides 1.3 (`ssl.enabled.protocols`).
    pub tls12: bool,
    /// How a client certificate's subject becomes a principal
    /// (`ssl.principal.mapping.rules`).
    pub principal_rules: crate::principal_mapping::PrincipalMapper,
}
