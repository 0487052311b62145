//! TLS between controller nodes and the brokers that talk to them.
//!
//! Mutual TLS ([`TlsTransport::new`], `controller.security.protocol=SSL`):
//! each side presents its certificate and verifies the other's against
//! the trusted CAs, the client also the server's name (the host of its
//! address); the serving side then asks `check` whether the peer's
//! certificate may talk to the controller (the broker makes that: super
//! users only, when an authorizer is set).
//!
//! Server-only TLS ([`TlsTransport::server_only`], `SASL_SSL`): the client
//! verifies the server's certificate and name, the server asks for no
//! certificate; the cluster secret ([`crate::PeerAuth`]) authenticates
//! clients inside the TLS session.
//!
//! The handshake runs on the connection's own task, bounded in time, so a
//! slow peer holds up no one else.

use std::io;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ServerConfig};

use crate::transport::{BoxConn, BoxFuture, Handshake, Listener, TcpListener, Transport};

/// Decides whether the peer of a verified certificate (DER) may connect;
/// `Err` says why not.
pub type PeerCheck = Arc<dyn Fn(&[u8]) -> Result<(), String> + Send + Sync>;

/// TCP with TLS: mutual, or the server's certificate only.
#[derive(Clone)]
pub struct TlsTransport {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    /// `None`: clients present no certificate.
    check: Option<PeerCheck>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTransport").finish_non_exhaustive()
    }
}

impl TlsTransport {
    /// A transport serving with `server` (which must require client
    /// certificates), connecting with `client` (which must present one),
    /// and admitting the peers `check` accepts.
    pub fn new(server: Arc<ServerConfig>, client: Arc<ClientConfig>, check: PeerCheck) -> Self {
        TlsTransport {
            server,
            client,
            check: Some(check),
        }
    }

    /// A transport serving with `server` (which asks for no client
    /// certificate) and connecting with `client` (which verifies the
    /// server's): peers must authenticate otherwise (the cluster secret).
    pub fn server_only(server: Arc<ServerConfig>, client: Arc<ClientConfig>) -> Self {
        TlsTransport {
            server,
            client,
            check: None,
        }
    }
}

/// The host part of `host:port` (IPv6 without brackets).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl Transport for TlsTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>> {
        Box::pin(async move {
            let name = ServerName::try_from(host_of(addr).to_string())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            let _ = tcp.set_nodelay(true);
            let tls = tokio_rustls::TlsConnector::from(self.client.clone())
                .connect(name, tcp)
                .await?;
            Ok(Box::new(tls) as BoxConn)
        })
    }

    fn bind<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let inner = TcpListener::bind(addr).await?;
            Ok(Box::new(TlsListener {
                inner,
                acceptor: tokio_rustls::TlsAcceptor::from(self.server.clone()),
                check: self.check.clone(),
            }) as Box<dyn Listener>)
        })
    }

    fn authenticates_peers(&self) -> bool {
        self.check.is_some()
    }
}

/// A TCP listener whose connections are TLS.
pub struct TlsListener {
    inner: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    check: Option<PeerCheck>,
}

impl TlsListener {
    /// TLS on an already bound listener (e.g. on port 0).
    pub fn wrap(inner: TcpListener, transport: &TlsTransport) -> TlsListener {
        TlsListener {
            inner,
            acceptor: tokio_rustls::TlsAcceptor::from(transport.server.clone()),
            check: transport.check.clone(),
        }
    }
}

impl Listener for TlsListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, String)>> {
        self.inner.accept()
    }

    fn local_addr(&self) -> io::Result<String> {
        self.inner.local_addr()
    }

    fn handshake(&self) -> Option<Handshake> {
        let acceptor = self.acceptor.clone();
        let check = self.check.clone();
        Some(Arc::new(move |conn: BoxConn| {
            let acceptor = acceptor.clone();
            let check = check.clone();
            Box::pin(async move {
                let tls = acceptor.accept(conn).await?;
                let Some(check) = check else {
                    return Ok(Box::new(tls) as BoxConn);
                };
                let der = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| c.as_ref().to_vec())
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::PermissionDenied, "no client certificate")
                    })?;
                check(&der).map_err(|why| io::Error::new(io::ErrorKind::PermissionDenied, why))?;
                Ok(Box::new(tls) as BoxConn)
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hosts_of_addresses() {
        assert_eq!(super::host_of("localhost:9093"), "localhost");
        assert_eq!(super::host_of("127.0.0.1:1"), "127.0.0.1");
        assert_eq!(super::host_of("[::1]:1"), "::1");
    }
}
