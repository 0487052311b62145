//! How this node talks to the controller port (`controller.security.protocol`):
//! the transport and the proof peers give, from the configuration, with
//! start-up refused where the port would be open to anyone.
//!
//! - `SASL_PLAINTEXT` (the default): TCP; the cluster secret
//!   (`controller.cluster.secret.file`) proven both ways, then every frame
//!   authenticated.
//! - `SASL_SSL`: the same inside TLS (the server's certificate checked).
//! - `SSL`: mutual TLS; with an authorizer, a peer's certificate must map
//!   to a super user.
//! - `PLAINTEXT`: nothing authenticated; only with this node's controller
//!   and every voter on loopback, and loudly.

use std::path::Path;
use std::sync::Arc;

use controller::transport::{TcpTransport, Transport};
use controller::{ClusterSecret, PeerAuth, Voters};
use tracing::warn;

use crate::config::BrokerConfig;
use crate::Error;

type Result<T> = std::result::Result<T, Error>;

/// How to make a secret, for the messages that ask for one.
const HOW_TO_MAKE_ONE: &str = "make one with `head -c 32 /dev/urandom > cluster.secret && chmod 600 cluster.secret`, copy the same file to every node of the cluster (voters and broker-only nodes) and set controller.cluster.secret.file to its path";

/// The transport and proof of `controller.security.protocol` for a node of
/// `voters` whose controller (if it runs one) listens on `listen`.
pub(super) fn controller_security(
    config: &BrokerConfig,
    voters: &Voters,
    listen: Option<&str>,
) -> Result<(Arc<dyn Transport>, PeerAuth)> {
    let protocol = config.string_value("controller.security.protocol");
    match protocol {
        "PLAINTEXT" => {
            let off = listen
                .into_iter()
                .chain(voters.iter().map(|(_, a)| a))
                .find(|a| !controller::is_loopback(a));
            if let Some(addr) = off {
                return Err(Error::Startup(format!(
                    "controller.security.protocol=PLAINTEXT authenticates nobody, so it is allowed only when this node's controller and every voter are on loopback, and {addr} is not: use SASL_PLAINTEXT (the default; {HOW_TO_MAKE_ONE}), or SASL_SSL or SSL on an untrusted network"
                )));
            }
            warn!(
                "controller.security.protocol=PLAINTEXT: the controller port authenticates nobody; any local process can read and change the cluster's metadata (use SASL_PLAINTEXT outside a test)"
            );
            Ok((Arc::new(TcpTransport), PeerAuth::None))
        }
        "SASL_PLAINTEXT" => Ok((Arc::new(TcpTransport), secret(config, protocol)?)),
        "SASL_SSL" => {
            let settings = config.tls_settings().ok_or_else(|| {
                Error::Startup(
                    "controller.security.protocol=SASL_SSL but ssl.keystore.location is not set"
                        .into(),
                )
            })?;
            let (server, client) = crate::security::tls::server_only(&settings)
                .map_err(|e| Error::Startup(format!("controller TLS: {e}")))?;
            let transport = controller::tls::TlsTransport::server_only(server, client);
            Ok((Arc::new(transport), secret(config, protocol)?))
        }
        _ => Ok((mutual_tls(config)?, PeerAuth::None)),
    }
}

/// The cluster secret of `controller.cluster.secret.file`, required by the
/// SASL protocols; warns when the file is readable by group or others.
fn secret(config: &BrokerConfig, protocol: &str) -> Result<PeerAuth> {
    let path = config.string_value("controller.cluster.secret.file");
    if path.is_empty() {
        return Err(Error::Startup(format!(
            "controller.security.protocol={protocol} needs controller.cluster.secret.file, a file of at least {} random bytes that every node of the cluster shares: {HOW_TO_MAKE_ONE}",
            controller::MIN_SECRET_BYTES
        )));
    }
    let path = Path::new(path);
    let secret = ClusterSecret::from_file(path).map_err(|e| {
        Error::Startup(format!(
            "controller.cluster.secret.file: {e} ({HOW_TO_MAKE_ONE})"
        ))
    })?;
    if loosely_readable(path) {
        warn!(
            path = %path.display(),
            "controller.cluster.secret.file is readable by group or others: whoever reads it can join the controller quorum (chmod 600 it)"
        );
    }
    Ok(PeerAuth::Secret(secret))
}

#[cfg(unix)]
fn loosely_readable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o044 != 0)
}

#[cfg(not(unix))]
fn loosely_readable(_: &Path) -> bool {
    false
}

/// Mutual TLS (`controller.security.protocol=SSL`) admitting peers whose
/// certificate maps (`ssl.principal.mapping.rules`) to a super user when
/// an authorizer is set, any certificate of the trusted CAs otherwise.
fn mutual_tls(config: &BrokerConfig) -> Result<Arc<dyn Transport>> {
    let settings = config.tls_settings().ok_or_else(|| {
        Error::Startup(
            "controller.security.protocol=SSL but ssl.keystore.location is not set".into(),
        )
    })?;
    let (server, client) = crate::security::tls::mutual(&settings)
        .map_err(|e| Error::Startup(format!("controller TLS: {e}")))?;
    let rules = settings.principal_rules.clone();
    let supers = if config.string_value("authorizer.class.name").is_empty() {
        None
    } else {
        Some(
            crate::security::acl::AuthorizerConfig::parse_super_users(
                config.string_value("super.users"),
            )
            .map_err(|e| Error::Startup(format!("super.users: {e}")))?,
        )
    };
    let check = Arc::new(move |der: &[u8]| -> std::result::Result<(), String> {
        let dn = crate::security::tls::subject_of_certificate(der)
            .ok_or("the peer certificate's subject cannot be read")?;
        let principal = rules
            .map(&dn)
            .map(crate::security::Principal::user)
            .ok_or_else(|| format!("no ssl.principal.mapping.rules rule applies to {dn}"))?;
        match &supers {
            Some(s) if !s.contains(&principal.to_string()) => Err(format!(
                "{principal} is not a super user (controller peers must be, with an authorizer)"
            )),
            _ => Ok(()),
        }
    });
    Ok(Arc::new(controller::tls::TlsTransport::new(
        server, client, check,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(settings: &[(&str, &str)]) -> BrokerConfig {
        let mut c = BrokerConfig::new(std::env::temp_dir(), "127.0.0.1:9092".parse().unwrap());
        for (k, v) in settings {
            c.set(k, v, crate::config::ConfigSource::Static).unwrap();
        }
        c
    }

    fn voters(s: &str) -> Voters {
        s.parse().unwrap()
    }

    fn refusal(r: Result<(Arc<dyn Transport>, PeerAuth)>) -> String {
        match r {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_default_needs_a_secret_and_says_how_to_make_one() {
        let e = refusal(controller_security(
            &config(&[]),
            &voters("1@127.0.0.1:9093"),
            Some("127.0.0.1:9093"),
        ));
        assert!(
            e.contains("SASL_PLAINTEXT")
                && e.contains("controller.cluster.secret.file")
                && e.contains("head -c 32 /dev/urandom"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short.secret");
        std::fs::write(&short, b"0123456789").unwrap();
        let e = refusal(controller_security(
            &config(&[("controller.cluster.secret.file", short.to_str().unwrap())]),
            &voters("1@127.0.0.1:9093"),
            None,
        ));
        assert!(e.contains("at least 32 bytes"), "{e}");
        let good = dir.path().join("cluster.secret");
        std::fs::write(&good, [7u8; 32]).unwrap();
        let (_, auth) = controller_security(
            &config(&[("controller.cluster.secret.file", good.to_str().unwrap())]),
            &voters("1@10.0.0.1:9093"),
            Some("0.0.0.0:9093"),
        )
        .unwrap();
        assert!(matches!(auth, PeerAuth::Secret(_)));
    }

    #[test]
    fn plaintext_only_on_loopback() {
        let plain = config(&[("controller.security.protocol", "PLAINTEXT")]);
        let (_, auth) = controller_security(
            &plain,
            &voters("1@127.0.0.1:9093,2@localhost:9193"),
            Some("127.0.0.1:9093"),
        )
        .unwrap();
        assert!(matches!(auth, PeerAuth::None));
        for (v, listen) in [
            ("1@127.0.0.1:9093,2@10.0.0.2:9093", Some("127.0.0.1:9093")),
            ("1@127.0.0.1:9093", Some("0.0.0.0:9093")),
            ("1@broker1.example:9093", None),
        ] {
            let e = refusal(controller_security(&plain, &voters(v), listen));
            assert!(
                e.contains("PLAINTEXT authenticates nobody") && e.contains("SASL_PLAINTEXT"),
                "{e}"
            );
        }
    }
}
