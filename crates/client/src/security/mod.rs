//! Connection security, as Kafka clients configure it: the security
//! protocol (`security.protocol`), TLS with PEM files and SASL (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512) with KIP-368 re-authentication.

pub(crate) mod sasl;
pub(crate) mod scram;
pub(crate) mod tls;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::{Error, Result};

/// How connections to brokers are secured: Kafka's `security.protocol`.
///
/// ```
/// use magnetar_client::SecurityProtocol;
/// let p: SecurityProtocol = "sasl_ssl".parse().unwrap();
/// assert_eq!(p, SecurityProtocol::SaslSsl);
/// assert!(p.uses_tls() && p.uses_sasl());
/// assert_eq!(p.to_string(), "SASL_SSL");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SecurityProtocol {
    /// No TLS, no authentication (the default).
    #[default]
    Plaintext,
    /// TLS; the client may present a certificate.
    Ssl,
    /// SASL authentication without TLS.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections use TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl std::fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SecurityProtocol {
    type Err = Error;

    /// Kafka's names, in any case.
    fn from_str(s: &str) -> Result<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "unknown security protocol {s:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"
            ))
        })
    }
}

/// A SASL mechanism this client implements.
///
/// ```
/// use magnetar_client::SaslMechanism;
/// let m: SaslMechanism = "scram-sha-512".parse().unwrap();
/// assert_eq!(m, SaslMechanism::ScramSha512);
/// assert_eq!(m.name(), "SCRAM-SHA-512");
/// assert!("GSSAPI".parse::<SaslMechanism>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616): the password is sent as is; use it over TLS.
    Plain,
    /// SCRAM-SHA-256 (RFC 7677).
    ScramSha256,
    /// SCRAM-SHA-512.
    ScramSha512,
}

impl SaslMechanism {
    /// The IANA name, as SaslHandshake carries it.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's SCRAM mechanism type code (1, 2) as the credential APIs
    /// carry it; `None` for PLAIN.
    pub fn scram_code(self) -> Option<i8> {
        match self {
            SaslMechanism::Plain => None,
            SaslMechanism::ScramSha256 => Some(1),
            SaslMechanism::ScramSha512 => Some(2),
        }
    }

    pub(crate) fn scram_hash(self) -> Option<scram::ScramHash> {
        match self {
            SaslMechanism::Plain => None,
            SaslMechanism::ScramSha256 => Some(scram::ScramHash::Sha256),
            SaslMechanism::ScramSha512 => Some(scram::ScramHash::Sha512),
        }
    }
}

impl std::fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SaslMechanism {
    type Err = Error;

    /// The IANA names, in any case.
    fn from_str(s: &str) -> Result<SaslMechanism> {
        [
            SaslMechanism::Plain,
            SaslMechanism::ScramSha256,
            SaslMechanism::ScramSha512,
        ]
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "unsupported SASL mechanism {s:?} (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
            ))
        })
    }
}

/// SASL credentials: a mechanism, a user name and a password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SaslCredentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<hidden>")
            .finish()
    }
}

/// PEM material: a file to read when the client connects, or the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pem {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl Pem {
    pub(crate) fn load(&self, what: &str) -> Result<Vec<u8>> {
        match self {
            Pem::Bytes(b) => Ok(b.clone()),
            Pem::File(p) => std::fs::read(p).map_err(|e| {
                Error::InvalidArgument(format!("cannot read {what} {}: {e}", p.display()))
            }),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Pem::File(p) => p.display().to_string(),
            Pem::Bytes(_) => "(PEM given in memory)".to_string(),
        }
    }
}

/// The security settings of a [`crate::ClientConfig`]: which protocol,
/// SASL credentials and TLS material. Every connection the client opens
/// (bootstrap, each broker, each lane) uses them.
///
/// - TLS (`SSL`, `SASL_SSL`) needs the CA certificates that signed the
///   brokers' certificates ([`SecurityConfig::tls_ca_file`]): the client
///   does not use the operating system's trust store. By default the
///   broker's certificate must also name the host the client dials (its
///   DNS name or IP address as given in the bootstrap list or advertised
///   by the broker); [`SecurityConfig::verify_hostname`]`(false)` skips
///   only that check, as librdkafka's
///   `ssl.endpoint.identification.algorithm=none`.
/// - A client certificate (for `ssl.client.auth=required` brokers) is a
///   PEM certificate chain and an unencrypted PEM private key (PKCS#8,
///   PKCS#1 or SEC1).
/// - SASL (`SASL_PLAINTEXT`, `SASL_SSL`) authenticates each connection
///   right after ApiVersions (SaslHandshake v1, then SaslAuthenticate at
///   the highest version both sides speak). A refused authentication is
///   [`Error::Authentication`], which is not retried. When the broker
///   limits the session (`connections.max.reauth.ms`, KIP-368), the
///   connection re-authenticates itself before the session ends, on the
///   same socket, holding back new requests for the few round trips it
///   takes.
///
/// Files are read when the client connects ([`crate::Client::connect`]),
/// not afterwards: a renewed certificate takes a new client.
///
/// ```
/// use magnetar_client::{ClientConfig, SaslMechanism, SecurityConfig, SecurityProtocol};
/// let security = SecurityConfig::new(SecurityProtocol::SaslSsl)
///     .sasl(SaslMechanism::ScramSha512, "alice", "alice-secret")
///     .tls_ca_file("/etc/kafka/ca.pem");
/// assert!(security.validate().is_ok());
/// let cfg = ClientConfig::new(["kafka.example.com:9093"]).security(security);
/// assert_eq!(cfg.get_security().protocol(), SecurityProtocol::SaslSsl);
/// // SASL credentials on a protocol without SASL are refused.
/// let bad = SecurityConfig::new(SecurityProtocol::Ssl)
///     .sasl(SaslMechanism::Plain, "alice", "x")
///     .tls_ca_file("/etc/kafka/ca.pem");
/// assert!(bad.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityConfig {
    protocol: SecurityProtocol,
    sasl: Option<SaslCredentials>,
    ca: Option<Pem>,
    cert: Option<Pem>,
    key: Option<Pem>,
    verify_hostname: bool,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig::new(SecurityProtocol::Plaintext)
    }
}

impl SecurityConfig {
    /// Settings for `protocol`, with nothing else set yet.
    pub fn new(protocol: SecurityProtocol) -> SecurityConfig {
        SecurityConfig {
            protocol,
            sasl: None,
            ca: None,
            cert: None,
            key: None,
            verify_hostname: true,
        }
    }

    /// The security protocol.
    pub fn protocol(&self) -> SecurityProtocol {
        self.protocol
    }

    /// SASL credentials (`SASL_PLAINTEXT`, `SASL_SSL`).
    pub fn sasl(
        mut self,
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.sasl = Some(SaslCredentials {
            mechanism,
            username: username.into(),
            password: password.into(),
        });
        self
    }

    /// The SASL mechanism and user name, if SASL credentials are set.
    pub fn sasl_user(&self) -> Option<(SaslMechanism, &str)> {
        self.sasl
            .as_ref()
            .map(|s| (s.mechanism, s.username.as_str()))
    }

    /// A PEM file of CA certificates that brokers' certificates must chain
    /// to (librdkafka's `ssl.ca.location`).
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca = Some(Pem::File(path.into()));
        self
    }

    /// [`SecurityConfig::tls_ca_file`] with the PEM text itself.
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca = Some(Pem::Bytes(pem.into()));
        self
    }

    /// The client's certificate chain and private key, PEM files (one file
    /// may hold both). Brokers with `ssl.client.auth=required` ask for it;
    /// on an `SSL` listener its subject is the client's principal.
    pub fn tls_client_cert_files(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.cert = Some(Pem::File(cert.into()));
        self.key = Some(Pem::File(key.into()));
        self
    }

    /// [`SecurityConfig::tls_client_cert_files`] with the PEM text itself.
    pub fn tls_client_cert_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.cert = Some(Pem::Bytes(cert.into()));
        self.key = Some(Pem::Bytes(key.into()));
        self
    }

    /// Whether the broker's certificate must name the host dialled
    /// (default true). `false` still requires a certificate chaining to the
    /// CA.
    pub fn verify_hostname(mut self, on: bool) -> Self {
        self.verify_hostname = on;
        self
    }

    /// Whether hostname verification is on.
    pub fn hostname_verification(&self) -> bool {
        self.verify_hostname
    }

    /// Checks that the settings fit together (without reading any file):
    /// SASL credentials exactly with a SASL protocol, TLS material only
    /// with a TLS protocol, a CA for TLS, a client key with its
    /// certificate, a user name and a password.
    pub fn validate(&self) -> Result<()> {
        let p = self.protocol;
        let bad = |why: String| Err(Error::InvalidArgument(why));
        match (&self.sasl, p.uses_sasl()) {
            (None, true) => {
                return bad(format!(
                    "security protocol {p} needs SASL credentials (a mechanism, a user name and a password)"
                ))
            }
            (Some(s), false) => {
                return bad(format!(
                    "SASL {} credentials are set but security protocol {p} does not use SASL (SASL_PLAINTEXT or SASL_SSL does)",
                    s.mechanism
                ))
            }
            (Some(s), true) if s.username.is_empty() => {
                return bad("the SASL user name is empty".into())
            }
            (Some(s), true) if s.password.is_empty() => {
                return bad(format!("the SASL password of user {:?} is empty", s.username))
            }
            _ => {}
        }
        let tls_material = self.ca.is_some() || self.cert.is_some() || self.key.is_some();
        if !p.uses_tls() {
            if tls_material {
                return bad(format!(
                    "TLS certificates are set but security protocol {p} does not use TLS (SSL or SASL_SSL does)"
                ));
            }
            return Ok(());
        }
        if self.ca.is_none() {
            return bad(format!(
                "security protocol {p} needs the CA certificate(s) that signed the broker's certificate (a PEM file): this client does not use the system's trust store"
            ));
        }
        if self.cert.is_some() != self.key.is_some() {
            return bad(
                "a client certificate needs its private key, and a key its certificate".into(),
            );
        }
        Ok(())
    }
}

/// The settings resolved for connections: files read, TLS built once.
#[derive(Clone)]
pub(crate) struct Resolved {
    pub protocol: SecurityProtocol,
    pub sasl: Option<Arc<SaslCredentials>>,
    pub tls: Option<tls::Tls>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("protocol", &self.protocol)
            .field("sasl", &self.sasl)
            .finish_non_exhaustive()
    }
}

impl Resolved {
    /// Validates `config`, reads its files and builds the TLS context.
    pub(crate) fn new(config: &SecurityConfig) -> Result<Resolved> {
        config.validate()?;
        let tls = if config.protocol.uses_tls() {
            Some(tls::Tls::new(
                config.ca.as_ref().expect("validated"),
                config.cert.as_ref().zip(config.key.as_ref()),
                config.verify_hostname,
            )?)
        } else {
            None
        };
        Ok(Resolved {
            protocol: config.protocol,
            sasl: config.sasl.clone().map(Arc::new),
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_are_checked() {
        use SecurityProtocol as P;
        let ok = |c: SecurityConfig| c.validate().unwrap();
        let err = |c: SecurityConfig, want: &str| {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        };
        ok(SecurityConfig::default());
        ok(SecurityConfig::new(P::Ssl).tls_ca_file("ca.pem"));
        ok(SecurityConfig::new(P::Ssl)
            .tls_ca_file("ca.pem")
            .tls_client_cert_files("c.pem", "c.key"));
        ok(SecurityConfig::new(P::SaslPlaintext).sasl(SaslMechanism::Plain, "u", "p"));
        err(
            SecurityConfig::new(P::SaslSsl).tls_ca_file("ca.pem"),
            "needs SASL",
        );
        err(
            SecurityConfig::new(P::Plaintext).sasl(SaslMechanism::Plain, "u", "p"),
            "does not use SASL",
        );
        err(
            SecurityConfig::new(P::SaslPlaintext).sasl(SaslMechanism::Plain, "u", ""),
            "password",
        );
        err(
            SecurityConfig::new(P::SaslPlaintext).sasl(SaslMechanism::Plain, "", "p"),
            "user name",
        );
        err(SecurityConfig::new(P::Ssl), "CA certificate");
        err(
            SecurityConfig::new(P::SaslPlaintext)
                .sasl(SaslMechanism::Plain, "u", "p")
                .tls_ca_file("ca.pem"),
            "does not use TLS",
        );
        let half = SecurityConfig {
            key: None,
            ..SecurityConfig::new(P::Ssl)
                .tls_ca_file("ca.pem")
                .tls_client_cert_files("c.pem", "c.key")
        };
        err(half, "private key");
    }

    #[test]
    fn names_parse_in_any_case() {
        for p in ["PLAINTEXT", "ssl", "Sasl_Plaintext", "SASL_SSL"] {
            let parsed: SecurityProtocol = p.parse().unwrap();
            assert!(parsed.name().eq_ignore_ascii_case(p));
        }
        assert!("TLS".parse::<SecurityProtocol>().is_err());
        for m in ["plain", "SCRAM-SHA-256", "scram-sha-512"] {
            let parsed: SaslMechanism = m.parse().unwrap();
            assert!(parsed.name().eq_ignore_ascii_case(m));
        }
        assert_eq!(SaslMechanism::ScramSha256.scram_code(), Some(1));
        assert_eq!(SaslMechanism::Plain.scram_code(), None);
    }

    #[test]
    fn passwords_stay_out_of_debug_output() {
        let c = SecurityConfig::new(SecurityProtocol::SaslPlaintext).sasl(
            SaslMechanism::Plain,
            "alice",
            "hunter2",
        );
        let shown = format!("{c:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
