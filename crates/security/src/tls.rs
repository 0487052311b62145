//! TLS for listeners, with `rustls`: the server's key and certificate chain
//! from PEM files (`ssl.keystore.location`, `ssl.key.location`), client
//! certificates checked against `ssl.truststore.location` as
//! `ssl.client.auth` asks, and everything re-read when the files change,
//! without a restart (existing connections keep their session).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

pub use magnetar_config::{ClientAuth, TlsSettings};

use super::Principal;

/// The files' identity when last read: a change of any reloads.
type Stamp = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

/// A listener's TLS configuration, reloadable.
pub struct TlsContext {
    settings: TlsSettings,
    current: RwLock<(Stamp, Arc<ServerConfig>)>,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext")
            .field("settings", &self.settings)
            .finish()
    }
}

impl TlsContext {
    /// The principal of a client certificate by `ssl.principal.mapping.rules`:
    /// `Err` (with why) when the certificate's subject cannot be read or no
    /// rule applies to it.
    pub fn principal_of(&self, der: &[u8]) -> Result<Principal, String> {
        let dn = subject_of_certificate(der)
            .ok_or_else(|| "the client certificate's subject cannot be read".to_string())?;
        self.settings
            .principal_rules
            .map(&dn)
            .map(Principal::user)
            .ok_or_else(|| format!("no ssl.principal.mapping.rules rule applies to {dn}"))
    }

    /// Reads the files; a clear error if any is missing or unusable.
    pub fn load(settings: TlsSettings) -> Result<TlsContext, String> {
        let stamp = stamp(&settings);
        let config = build(&settings)?;
        Ok(TlsContext {
            settings,
            current: RwLock::new((stamp, config)),
        })
    }

    /// The configuration new connections use.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.current.read().1.clone()
    }

    /// Re-reads the files if any changed since they were last read: `Ok(true)`
    /// if the new material is now in use, an error (and the old material
    /// kept) if it is unusable. File work: call it off async workers.
    pub fn reload_if_changed(&self) -> Result<bool, String> {
        let now = stamp(&self.settings);
        if self.current.read().0 == now {
            return Ok(false);
        }
        match build(&self.settings) {
            Ok(config) => {
                *self.current.write() = (now, config);
                Ok(true)
            }
            Err(e) => {
                // Not retried until the files change again.
                self.current.write().0 = now;
                Err(e)
            }
        }
    }
}

/// Re-reads `tls`'s certificate files when they change (checked every
/// second, on the blocking pool) until `shutdown` turns true: one loop for
/// every listener (Kafka, Pulsar, HTTPS) sharing the context.
pub async fn reload_loop(tls: Arc<TlsContext>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
            _ = tick.tick() => {}
        }
        let t = tls.clone();
        match tokio::task::spawn_blocking(move || t.reload_if_changed()).await {
            Ok(Ok(true)) => tracing::info!("TLS certificates reloaded"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                tracing::warn!("TLS certificates not reloaded, the previous ones stay in use: {e}")
            }
            Err(_) => return,
        }
    }
}

fn stamp(s: &TlsSettings) -> Stamp {
    [Some(&s.keystore), s.key.as_ref(), s.truststore.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| {
            let meta = std::fs::metadata(p).ok();
            (
                p.clone(),
                meta.and_then(|m| Some((m.modified().ok()?, m.len()))),
            )
        })
        .collect()
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

type ChainAndKey = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The certificate chain and key of `ssl.keystore.location` (and
/// `ssl.key.location`).
fn chain_and_key(s: &TlsSettings) -> Result<ChainAndKey, String> {
    let keystore = read(&s.keystore, "ssl.keystore.location")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&keystore)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: bad PEM certificate: {e:?}", s.keystore.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{} holds no PEM certificate (ssl.keystore.location)",
            s.keystore.display()
        ));
    }
    let (key_bytes, key_path) = match &s.key {
        Some(p) => (read(p, "ssl.key.location")?, p.clone()),
        None => (keystore.clone(), s.keystore.clone()),
    };
    let key = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| {
        format!(
            "{} holds no unencrypted PEM private key ({e:?}); encrypted keys are not supported",
            key_path.display()
        )
    })?;
    Ok((chain, key))
}

/// The CAs of `ssl.truststore.location`.
fn roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    let pem = read(path, "ssl.truststore.location")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("{}: bad PEM certificate: {e:?}", path.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("{}: unusable CA certificate: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{} holds no CA certificate", path.display()));
    }
    Ok(roots)
}

/// TLS 1.3, and 1.2 unless `ssl.enabled.protocols` leaves it out.
static TLS13_12: [&rustls::SupportedProtocolVersion; 2] =
    [&rustls::version::TLS13, &rustls::version::TLS12];
static TLS13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];

fn versions(s: &TlsSettings) -> &'static [&'static rustls::SupportedProtocolVersion] {
    if s.tls12 {
        &TLS13_12
    } else {
        &TLS13
    }
}

fn build(s: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let (chain, key) = chain_and_key(s)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions(s))
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match (s.client_auth, &s.truststore) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => return Err(
            "ssl.client.auth asks for client certificates but ssl.truststore.location is not set"
                .into(),
        ),
        (auth, Some(path)) => {
            let roots = roots(path)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("client certificate verifier: {e}"))?,
            )
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        format!(
            "{}: the key does not fit the certificate: {e}",
            s.keystore.display()
        )
    })?;
    Ok(Arc::new(config))
}

/// Mutual TLS for the controller port: a server configuration requiring
/// client certificates of the truststore's CAs, and a client configuration
/// trusting those CAs and presenting the keystore's certificate (a node
/// is both). Needs `ssl.truststore.location`.
pub fn mutual(s: &TlsSettings) -> Result<(Arc<ServerConfig>, Arc<rustls::ClientConfig>), String> {
    let path = s.truststore.as_ref().ok_or(
        "controller.security.protocol=SSL needs ssl.truststore.location (the CAs node certificates chain to)",
    )?;
    let server = build(&TlsSettings {
        client_auth: ClientAuth::Required,
        ..s.clone()
    })?;
    let (chain, key) = chain_and_key(s)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(s))
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots(path)?)
        .with_client_auth_cert(chain, key)
        .map_err(|e| {
            format!(
                "{}: the key does not fit the certificate: {e}",
                s.keystore.display()
            )
        })?;
    Ok((server, Arc::new(client)))
}

/// TLS for the controller port with `controller.security.protocol=SASL_SSL`:
/// a server configuration asking for no client certificate (the cluster
/// secret authenticates peers) and a client configuration verifying the
/// server's certificate and name against `ssl.truststore.location`.
pub fn server_only(
    s: &TlsSettings,
) -> Result<(Arc<ServerConfig>, Arc<rustls::ClientConfig>), String> {
    let path = s.truststore.as_ref().ok_or(
        "controller.security.protocol=SASL_SSL needs ssl.truststore.location (the CAs node certificates chain to)",
    )?;
    let server = build(&TlsSettings {
        client_auth: ClientAuth::None,
        ..s.clone()
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(s))
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots(path)?)
        .with_no_client_auth();
    Ok((server, Arc::new(client)))
}

/// A client configuration for a broker asking another broker's HTTPS
/// service on a caller's behalf: it trusts the truststore's CAs and
/// presents the keystore's certificate (so a listener requiring client
/// certificates admits it; the HTTP service identifies callers by their
/// `Authorization` header, never by a certificate, so this one grants
/// nothing); `None` without `ssl.truststore.location`.
pub fn trusting(s: &TlsSettings) -> Result<Option<Arc<rustls::ClientConfig>>, String> {
    if s.truststore.is_none() {
        return Ok(None);
    }
    mutual(s).map(|(_, client)| Some(client))
}

/// The principal of a verified client certificate: `User:` and its
/// subject as an RFC 2253 string (`CN=client,O=Example`), Kafka's default
/// `ssl.principal.mapping.rules`.
pub fn principal_of_certificate(der: &[u8]) -> Option<Principal> {
    subject_of_certificate(der).map(Principal::user)
}

/// A client certificate's subject as an RFC 2253 string, most specific
/// part first, as Java writes it; `None` if the certificate does not parse.
pub fn subject_of_certificate(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let oid = attr.attr_type();
            let name = match oid.to_id_string().as_str() {
                "2.5.4.3" => "CN".to_string(),
                "2.5.4.6" => "C".to_string(),
                "2.5.4.7" => "L".to_string(),
                "2.5.4.8" => "ST".to_string(),
                "2.5.4.9" => "STREET".to_string(),
                "2.5.4.10" => "O".to_string(),
                "2.5.4.11" => "OU".to_string(),
                "0.9.2342.19200300.100.1.25" => "DC".to_string(),
                "0.9.2342.19200300.100.1.1" => "UID".to_string(),
                other => other.to_string(),
            };
            let value = attr.as_str().ok()?;
            parts.push(format!("{name}={}", escape_rfc2253(value)));
        }
        rdns.push(parts.join("+"));
    }
    // RFC 2253 writes the most specific RDN first.
    rdns.reverse();
    Some(rdns.join(","))
}

fn escape_rfc2253(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i + 1 == v.chars().count() && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
