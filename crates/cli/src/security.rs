//! The security options every client command takes: flags, and a Kafka
//! client properties file (`--command-config`) that the flags override.

use std::path::PathBuf;

use clap::Args;
use client::{SaslMechanism, SecurityConfig, SecurityProtocol};

use crate::error::{message, CliError};
use crate::properties::FileSettings;

/// TLS and SASL options (Kafka's client security settings).
#[derive(Debug, Clone, Default, Args)]
pub struct SecurityArgs {
    /// PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (`security.protocol`).
    #[arg(long, global = true, value_name = "PROTOCOL", value_parser = parse_protocol)]
    pub security_protocol: Option<SecurityProtocol>,
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (`sasl.mechanism`).
    #[arg(long, global = true, value_name = "MECHANISM", value_parser = parse_mechanism)]
    pub sasl_mechanism: Option<SaslMechanism>,
    /// SASL user name (`sasl.username`).
    #[arg(long, global = true, value_name = "USER")]
    pub sasl_username: Option<String>,
    /// SASL password (`sasl.password`); prefer the environment variable,
    /// which keeps it out of the process list.
    #[arg(
        long,
        global = true,
        value_name = "PASSWORD",
        env = "MAGNETAR_SASL_PASSWORD",
        hide_env_values = true
    )]
    pub sasl_password: Option<String>,
    /// PEM file of the CA certificate(s) the broker's certificate must chain
    /// to (`ssl.ca.location`); needed for SSL and SASL_SSL.
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// PEM file of this client's certificate chain, for brokers that ask
    /// for one (`ssl.certificate.location`).
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM file of the client certificate's unencrypted private key
    /// (`ssl.key.location`); may be the same file as --tls-cert.
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Accept a broker certificate that does not name the host dialled (it
    /// must still chain to --tls-ca); `ssl.endpoint.identification.algorithm=none`.
    #[arg(long, global = true)]
    pub tls_no_hostname_verification: bool,
    /// A Kafka client properties file with security settings
    /// (`security.protocol`, `sasl.*`, `ssl.*`); the flags above override it.
    #[arg(long, global = true, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
}

fn parse_protocol(s: &str) -> Result<SecurityProtocol, String> {
    s.parse().map_err(message)
}

fn parse_mechanism(s: &str) -> Result<SaslMechanism, String> {
    s.parse().map_err(message)
}

impl SecurityArgs {
    /// The client's security settings: the file's, overridden by the
    /// flags, checked for combinations that cannot work (bad usage, before
    /// anything is dialled).
    pub fn security_config(&self) -> Result<SecurityConfig, CliError> {
        let file = match &self.command_config {
            Some(path) => FileSettings::load(path)?,
            None => FileSettings::default(),
        };
        resolve(self, file)
    }
}

/// Where a setting came from, for messages: the flag, or the file's key.
fn origin(flag: bool, flag_name: &str, key: &str) -> String {
    if flag {
        flag_name.to_string()
    } else {
        format!("{key} (--command-config)")
    }
}

fn resolve(a: &SecurityArgs, f: FileSettings) -> Result<SecurityConfig, CliError> {
    let usage = |s: String| Err(CliError::Usage(s));
    let protocol = a
        .security_protocol
        .or(f.protocol)
        .unwrap_or(SecurityProtocol::Plaintext);
    let mechanism = a.sasl_mechanism.or(f.mechanism);
    let username = a.sasl_username.clone().or(f.username);
    let password = a.sasl_password.clone().or(f.password);
    let ca = a.tls_ca.clone().or(f.ca);
    let cert = a.tls_cert.clone().or(f.cert);
    let key = a.tls_key.clone().or(f.key);
    let verify_hostname = !a.tls_no_hostname_verification && f.verify_hostname.unwrap_or(true);

    if protocol.uses_sasl() {
        let Some(mechanism) = mechanism else {
            return usage(format!(
                "security protocol {protocol} needs --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
            ));
        };
        let Some(username) = username.filter(|u| !u.is_empty()) else {
            return usage(format!("SASL {mechanism} needs --sasl-username"));
        };
        let Some(password) = password.filter(|p| !p.is_empty()) else {
            return usage(format!(
                "SASL {mechanism} needs a password for user {username:?}: set MAGNETAR_SASL_PASSWORD (or --sasl-password, or sasl.password in --command-config)"
            ));
        };
        let mut security = SecurityConfig::new(protocol).sasl(mechanism, username, password);
        if protocol.uses_tls() {
            security = tls(security, ca, cert, key, verify_hostname, protocol, a)?;
        } else {
            no_tls(a, &ca, &cert, &key, protocol)?;
        }
        return Ok(security);
    }
    // A password alone (MAGNETAR_SASL_PASSWORD exported in the shell) is
    // not a mistake; a mechanism or a user name is.
    if mechanism.is_some() || username.is_some() {
        let what = if mechanism.is_some() {
            origin(
                a.sasl_mechanism.is_some(),
                "--sasl-mechanism",
                "sasl.mechanism",
            )
        } else {
            origin(
                a.sasl_username.is_some(),
                "--sasl-username",
                "sasl.username",
            )
        };
        return usage(format!(
            "{what} needs --security-protocol SASL_PLAINTEXT or SASL_SSL (the security protocol is {protocol})"
        ));
    }
    let security = SecurityConfig::new(protocol);
    if protocol.uses_tls() {
        return tls(security, ca, cert, key, verify_hostname, protocol, a);
    }
    no_tls(a, &ca, &cert, &key, protocol)?;
    Ok(security)
}

fn tls(
    mut security: SecurityConfig,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    verify_hostname: bool,
    protocol: SecurityProtocol,
    a: &SecurityArgs,
) -> Result<SecurityConfig, CliError> {
    let Some(ca) = ca else {
        return Err(CliError::Usage(format!(
            "security protocol {protocol} needs --tls-ca FILE: the CA certificate(s) that signed the broker's certificate, PEM (the system's trust store is not used)"
        )));
    };
    security = security.tls_ca_file(ca).verify_hostname(verify_hostname);
    match (cert, key) {
        (Some(c), Some(k)) => Ok(security.tls_client_cert_files(c, k)),
        (None, None) => Ok(security),
        (Some(_), None) => Err(CliError::Usage(format!(
            "{} needs --tls-key (the certificate's private key)",
            origin(
                a.tls_cert.is_some(),
                "--tls-cert",
                "ssl.certificate.location"
            )
        ))),
        (None, Some(_)) => Err(CliError::Usage(format!(
            "{} needs --tls-cert (the key's certificate)",
            origin(a.tls_key.is_some(), "--tls-key", "ssl.key.location")
        ))),
    }
}

fn no_tls(
    a: &SecurityArgs,
    ca: &Option<PathBuf>,
    cert: &Option<PathBuf>,
    key: &Option<PathBuf>,
    protocol: SecurityProtocol,
) -> Result<(), CliError> {
    let what = if ca.is_some() {
        origin(a.tls_ca.is_some(), "--tls-ca", "ssl.ca.location")
    } else if cert.is_some() {
        origin(
            a.tls_cert.is_some(),
            "--tls-cert",
            "ssl.certificate.location",
        )
    } else if key.is_some() {
        origin(a.tls_key.is_some(), "--tls-key", "ssl.key.location")
    } else if a.tls_no_hostname_verification {
        "--tls-no-hostname-verification".to_string()
    } else {
        // The file's ssl.endpoint.identification.algorithm alone is
        // harmless (Java clients set it by default).
        return Ok(());
    };
    Err(CliError::Usage(format!(
        "{what} needs --security-protocol SSL or SASL_SSL (the security protocol is {protocol})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut SecurityArgs)) -> SecurityArgs {
        let mut a = SecurityArgs::default();
        f(&mut a);
        a
    }

    fn err(a: &SecurityArgs, file: FileSettings) -> String {
        match resolve(a, file) {
            Err(CliError::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn flags_override_the_file() {
        let file = FileSettings {
            protocol: Some(SecurityProtocol::SaslSsl),
            mechanism: Some(SaslMechanism::ScramSha256),
            username: Some("file-user".into()),
            password: Some("file-pw".into()),
            ca: Some("/file/ca.pem".into()),
            verify_hostname: Some(true),
            ..FileSettings::default()
        };
        let a = args(|a| {
            a.sasl_mechanism = Some(SaslMechanism::ScramSha512);
            a.sasl_username = Some("flag-user".into());
            a.tls_no_hostname_verification = true;
        });
        let s = resolve(&a, file.clone()).unwrap();
        assert_eq!(s.protocol(), SecurityProtocol::SaslSsl);
        assert_eq!(
            s.sasl_user(),
            Some((SaslMechanism::ScramSha512, "flag-user"))
        );
        assert!(!s.hostname_verification());
        s.validate().unwrap();
        // The file alone is enough.
        let s = resolve(&SecurityArgs::default(), file).unwrap();
        assert_eq!(
            s.sasl_user(),
            Some((SaslMechanism::ScramSha256, "file-user"))
        );
        assert!(s.hostname_verification());
    }

    #[test]
    fn bad_combinations_are_usage_errors() {
        let none = FileSettings::default();
        let m = err(
            &args(|a| a.sasl_mechanism = Some(SaslMechanism::Plain)),
            none.clone(),
        );
        assert!(
            m.contains("--sasl-mechanism needs --security-protocol SASL_PLAINTEXT or SASL_SSL"),
            "{m}"
        );
        let m = err(
            &args(|a| a.security_protocol = Some(SecurityProtocol::SaslPlaintext)),
            none.clone(),
        );
        assert!(m.contains("needs --sasl-mechanism"), "{m}");
        let m = err(
            &args(|a| {
                a.security_protocol = Some(SecurityProtocol::SaslPlaintext);
                a.sasl_mechanism = Some(SaslMechanism::Plain);
                a.sasl_username = Some("u".into());
            }),
            none.clone(),
        );
        assert!(m.contains("MAGNETAR_SASL_PASSWORD"), "{m}");
        let m = err(
            &args(|a| a.security_protocol = Some(SecurityProtocol::Ssl)),
            none.clone(),
        );
        assert!(m.contains("needs --tls-ca"), "{m}");
        let m = err(&args(|a| a.tls_ca = Some("/ca.pem".into())), none.clone());
        assert!(
            m.contains("--tls-ca needs --security-protocol SSL or SASL_SSL"),
            "{m}"
        );
        let m = err(
            &args(|a| a.tls_no_hostname_verification = true),
            none.clone(),
        );
        assert!(m.contains("--tls-no-hostname-verification needs"), "{m}");
        let m = err(
            &args(|a| {
                a.security_protocol = Some(SecurityProtocol::Ssl);
                a.tls_ca = Some("/ca.pem".into());
                a.tls_cert = Some("/c.pem".into());
            }),
            none.clone(),
        );
        assert!(m.contains("--tls-cert needs --tls-key"), "{m}");
        // From the file, the key is named.
        let m = err(
            &SecurityArgs::default(),
            FileSettings {
                username: Some("u".into()),
                ..FileSettings::default()
            },
        );
        assert!(m.contains("sasl.username (--command-config) needs"), "{m}");
        // A password alone does not matter on PLAINTEXT.
        let s = resolve(&args(|a| a.sasl_password = Some("pw".into())), none).unwrap();
        assert_eq!(s.protocol(), SecurityProtocol::Plaintext);
    }
}
