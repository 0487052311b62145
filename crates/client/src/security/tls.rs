//! TLS for broker connections (rustls with the ring provider): CA
//! certificates from PEM, an optional client certificate, and the broker's
//! certificate checked against the host dialled unless that check is off.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::Pem;
use crate::error::{Error, Result};

/// A TLS context built once per client and shared by its connections.
#[derive(Clone)]
pub(crate) struct Tls {
    connector: TlsConnector,
    verify_hostname: bool,
}

impl Tls {
    /// Reads the PEM material and builds the rustls configuration.
    pub(crate) fn new(
        ca: &Pem,
        client: Option<(&Pem, &Pem)>,
        verify_hostname: bool,
    ) -> Result<Tls> {
        let bad = |why: String| Error::InvalidArgument(why);
        let ca_pem = ca.load("TLS CA file")?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&ca_pem) {
            let cert =
                cert.map_err(|e| bad(format!("{}: bad PEM certificate: {e:?}", ca.describe())))?;
            roots
                .add(cert)
                .map_err(|e| bad(format!("{}: unusable CA certificate: {e}", ca.describe())))?;
        }
        if roots.is_empty() {
            return Err(bad(format!(
                "{} holds no PEM CA certificate",
                ca.describe()
            )));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(format!("TLS: {e}")))?;
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| bad(format!("TLS: {e}")))?;
        let builder = if verify_hostname {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostname(webpki)))
        };
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let cert_pem = cert.load("TLS client certificate")?;
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| bad(format!("{}: bad PEM certificate: {e:?}", cert.describe())))?;
                if chain.is_empty() {
                    return Err(bad(format!("{} holds no PEM certificate", cert.describe())));
                }
                let key_pem = key.load("TLS client key")?;
                let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
                    bad(format!(
                        "{} holds no unencrypted PEM private key ({e:?}); encrypted keys are not supported",
                        key.describe()
                    ))
                })?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| bad(format!("TLS client certificate: {e}")))?
            }
        };
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            verify_hostname,
        })
    }

    /// The TLS handshake over `tcp` to `addr` (`host:port`), within
    /// `timeout`.
    pub(crate) async fn connect(
        &self,
        addr: &str,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<TlsStream<TcpStream>> {
        let name = server_name(addr, self.verify_hostname)?;
        match tokio::time::timeout(timeout, self.connector.connect(name, tcp)).await {
            Err(_) => Err(Error::Timeout(timeout)),
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(handshake_error(addr, e)),
        }
    }
}

/// The name the broker's certificate must carry: the host part of `addr`
/// (a DNS name or an IP address).
pub(crate) fn server_name(addr: &str, verify: bool) -> Result<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match ServerName::try_from(host.to_string()) {
        Ok(n) => Ok(n),
        // Without hostname verification any name will do (it is only sent
        // as SNI).
        Err(_) if !verify => Ok(ServerName::try_from("kafka.invalid").expect("a valid DNS name")),
        Err(e) => Err(Error::InvalidArgument(format!(
            "{host:?} is not a DNS name or IP address a certificate can be checked against: {e}"
        ))),
    }
}

/// An error from the handshake: a TLS failure, or a connection the broker
/// closed in the middle (typically a port that does not speak TLS).
fn handshake_error(addr: &str, e: std::io::Error) -> Error {
    if is_tls(&e) {
        return io_error(addr, e);
    }
    let message = match e.kind() {
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::BrokenPipe => {
            "the broker closed the connection during the TLS handshake: is this a TLS listener (security protocol SSL or SASL_SSL)?".to_string()
        }
        _ => format!("{e} during the TLS handshake"),
    };
    Error::Io {
        broker: addr.to_string(),
        source: Arc::new(std::io::Error::new(e.kind(), message)),
    }
}

fn is_tls(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

/// A socket error as this crate reports it: a TLS failure (an untrusted
/// certificate, an alert from the broker) is [`Error::Tls`], with a hint at
/// the usual cause; anything else [`Error::Io`].
pub(crate) fn io_error(addr: &str, e: std::io::Error) -> Error {
    let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return Error::Io {
            broker: addr.to_string(),
            source: Arc::new(e),
        };
    };
    use rustls::AlertDescription as A;
    let hint = match tls {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "; the broker's certificate does not name the host dialled (turn hostname verification off to accept it)",
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature) => {
            "; the broker's certificate is not signed by the configured CA"
        }
        rustls::Error::AlertReceived(
            A::CertificateRequired | A::BadCertificate | A::UnknownCA | A::CertificateUnknown,
        ) => "; the broker refused the client certificate (or wants one)",
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "; does the broker speak TLS on this port?"
        }
        _ => "",
    };
    Error::Tls {
        broker: addr.to_string(),
        reason: format!("{tls}{hint}"),
    }
}

/// Checks the certificate chain as webpki does and accepts any name
/// (hostname verification off). webpki checks the name last, after the
/// chain, its validity and its usage, so only that check is skipped.
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A CA's PEM and a server's certificate chain and key, for `names`.
    fn pki(names: &[&str]) -> (String, String, String) {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "test CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let server =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap()
                .signed_by(&key, &ca_cert, &ca_key)
                .unwrap();
        (ca_cert.pem(), server.pem(), key.serialize_pem())
    }

    /// A one-shot TLS echo server for `cert`; its address.
    async fn server(cert: &str, key: &str) -> String {
        let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<std::result::Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(mut s) = acceptor.accept(s).await {
                        let mut b = [0u8; 4];
                        if s.read_exact(&mut b).await.is_ok() {
                            let _ = s.write_all(&b).await;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn dial(tls: &Tls, addr: &str) -> Result<()> {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let mut s = tls.connect(addr, tcp, Duration::from_secs(5)).await?;
        s.write_all(b"ping").await.map_err(|e| io_error(addr, e))?;
        let mut b = [0u8; 4];
        s.read_exact(&mut b).await.map_err(|e| io_error(addr, e))?;
        assert_eq!(&b, b"ping");
        Ok(())
    }

    #[tokio::test]
    async fn hostname_verification_and_its_opt_out() {
        // The certificate names localhost only; the client dials 127.0.0.1.
        let (ca, cert, key) = pki(&["localhost"]);
        let addr = server(&cert, &key).await;
        let ca = Pem::Bytes(ca.into_bytes());
        let strict = Tls::new(&ca, None, true).unwrap();
        let err = dial(&strict, &addr).await.unwrap_err();
        assert!(
            matches!(&err, Error::Tls { reason, .. } if reason.contains("does not name the host")),
            "{err}"
        );
        let lax = Tls::new(&ca, None, false).unwrap();
        dial(&lax, &addr).await.unwrap();
        // A certificate naming the address passes the strict check.
        let (ca2, cert2, key2) = pki(&["127.0.0.1"]);
        let addr2 = server(&cert2, &key2).await;
        let strict2 = Tls::new(&Pem::Bytes(ca2.into_bytes()), None, true).unwrap();
        dial(&strict2, &addr2).await.unwrap();
        // Skipping the name check never skips the chain: another CA's
        // certificate is refused.
        let err = dial(&lax, &addr2).await.unwrap_err();
        assert!(
            matches!(&err, Error::Tls { reason, .. } if reason.contains("not signed by the configured CA")),
            "{err}"
        );
        assert!(!err.is_retriable());
    }

    #[tokio::test]
    async fn a_plaintext_port_fails_the_handshake_without_hanging() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // Reads the ClientHello and closes, as a Kafka listener does with a
        // frame size it cannot accept.
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut b = [0u8; 4];
            let _ = s.read_exact(&mut b).await;
        });
        let (ca, _, _) = pki(&["localhost"]);
        let tls = Tls::new(&Pem::Bytes(ca.into_bytes()), None, true).unwrap();
        let err = dial(&tls, &addr).await.unwrap_err();
        assert!(err.to_string().contains("is this a TLS listener"), "{err}");
    }

    #[test]
    fn bad_material_is_refused_up_front() {
        let err = |r: Result<Tls>| match r {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted"),
        };
        let e = err(Tls::new(&Pem::Bytes(b"nothing".to_vec()), None, true));
        assert!(e.contains("no PEM CA certificate"), "{e}");
        let e = err(Tls::new(
            &Pem::File("/nonexistent/ca.pem".into()),
            None,
            true,
        ));
        assert!(e.contains("cannot read TLS CA file"), "{e}");
        let (ca, cert, _) = pki(&["localhost"]);
        let ca = Pem::Bytes(ca.into_bytes());
        let cert = Pem::Bytes(cert.into_bytes());
        let e = err(Tls::new(&ca, Some((&cert, &Pem::Bytes(Vec::new()))), true));
        assert!(e.contains("no unencrypted PEM private key"), "{e}");
        assert!(server_name("[::1]:9093", true).is_ok());
        assert!(server_name("not a host:9093", true).is_err());
        assert!(server_name("not a host:9093", false).is_ok());
    }
}
