//! The byte streams controller nodes talk over: TCP in production, any
//! `AsyncRead + AsyncWrite` (e.g. a simulated network) in tests.

use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A boxed future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A bidirectional byte stream.
pub trait Conn: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static> Conn for T {}

/// A boxed stream.
pub type BoxConn = Box<dyn Conn>;

/// Finishes setting up an accepted stream (a TLS handshake, a peer
/// check); run on the connection's own task.
pub type Handshake =
    std::sync::Arc<dyn Fn(BoxConn) -> BoxFuture<'static, io::Result<BoxConn>> + Send + Sync>;

/// Accepts incoming streams.
pub trait Listener: Send + 'static {
    /// The next incoming stream and its peer's address.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, String)>>;
    /// The address it listens on.
    fn local_addr(&self) -> io::Result<String>;
    /// What each accepted stream goes through before its first request;
    /// `None`: nothing.
    fn handshake(&self) -> Option<Handshake> {
        None
    }
}

/// Opens streams and listeners by address (`host:port`).
pub trait Transport: Send + Sync + 'static {
    /// Connects to `addr`.
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>>;
    /// Listens on `addr`.
    fn bind<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>>;
    /// Whether every stream its listeners accept comes from a peer the
    /// transport authenticated (mutual TLS), or they accept none. Without
    /// it, a controller port that uses no cluster secret may only be on
    /// loopback.
    fn authenticates_peers(&self) -> bool {
        false
    }
}

/// TCP (with `TCP_NODELAY`: the RPCs are small request/response pairs).
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpTransport;

/// A bound TCP listener.
pub struct TcpListener(pub tokio::net::TcpListener);

impl TcpListener {
    /// Binds a listener now (e.g. on port 0, to learn a free port before
    /// the voter set is written).
    pub async fn bind(addr: &str) -> io::Result<Self> {
        tokio::net::TcpListener::bind(addr).await.map(TcpListener)
    }
}

impl Listener for TcpListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, String)>> {
        Box::pin(async move {
            let (s, peer) = self.0.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((Box::new(s) as BoxConn, peer.to_string()))
        })
    }

    fn local_addr(&self) -> io::Result<String> {
        self.0.local_addr().map(|a| a.to_string())
    }
}

impl Transport for TcpTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>> {
        Box::pin(async move {
            let s = tokio::net::TcpStream::connect(addr).await?;
            let _ = s.set_nodelay(true);
            Ok(Box::new(s) as BoxConn)
        })
    }

    fn bind<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move { Ok(Box::new(TcpListener::bind(addr).await?) as Box<dyn Listener>) })
    }
}

/// The address of a voter that runs inside its broker's process and has
/// no network: a quorum of one (`magnetar standalone`), reached only
/// through the node's own [`crate::ControllerHandle`].
pub const IN_PROCESS_ADDR: &str = "in-process:0";

/// No network at all, for a quorum of one inside one process: nothing
/// can connect to it, and it connects to nobody (it has no peers).
#[derive(Clone, Copy, Debug, Default)]
pub struct InProcessTransport;

/// A listener that never accepts anything.
struct NoListener;

impl Listener for NoListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, String)>> {
        Box::pin(std::future::pending())
    }

    fn local_addr(&self) -> io::Result<String> {
        Ok(IN_PROCESS_ADDR.to_string())
    }
}

impl Transport for InProcessTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>> {
        Box::pin(async move {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("an in-process controller has no network (asked to reach {addr})"),
            ))
        })
    }

    fn bind<'a>(&'a self, _addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move { Ok(Box::new(NoListener) as Box<dyn Listener>) })
    }

    fn authenticates_peers(&self) -> bool {
        // Nobody can connect at all.
        true
    }
}
