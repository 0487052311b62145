//! The write side of a client connection, plain TCP or TLS. Fetch
//! responses go from the segment files to a plain socket with
//! `sendfile(2)`; over TLS the stored bytes must be encrypted, so they are
//! read in bounded pieces on the blocking pool and written through the TLS
//! stream.

use tokio::io::{AsyncWrite, AsyncWriteExt, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::response::{Chunk, ResponseFrame};

/// Bytes of a stored region read at once for a TLS connection.
const TLS_READ_CHUNK: usize = 256 * 1024;

/// Where a connection's answers go.
pub(crate) enum ClientWriter {
    /// Plain TCP.
    Plain(OwnedWriteHalf),
    /// TLS over TCP.
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

impl ClientWriter {
    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            ClientWriter::Plain(w) => w.write_all(bytes).await,
            ClientWriter::Tls(w) => w.write_all(bytes).await,
        }
    }

    pub(crate) async fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ClientWriter::Plain(w) => w.flush().await,
            ClientWriter::Tls(w) => w.flush().await,
        }
    }

    pub(crate) async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            ClientWriter::Plain(w) => w.shutdown().await,
            ClientWriter::Tls(w) => w.shutdown().await,
        }
    }

    /// Writes a response frame written in pieces.
    pub(crate) async fn write_frame(&mut self, frame: ResponseFrame) -> std::io::Result<()> {
        match self {
            ClientWriter::Plain(w) => frame.write_to(w).await,
            ClientWriter::Tls(w) => {
                write_through(w, frame).await?;
                w.flush().await
            }
        }
    }
}

async fn write_through(
    w: &mut (impl AsyncWrite + Unpin),
    frame: ResponseFrame,
) -> std::io::Result<()> {
    for chunk in frame.into_chunks() {
        match chunk {
            Chunk::Bytes(b) => w.write_all(&b).await?,
            Chunk::File(region) => {
                let mut at = 0;
                while at < region.len() {
                    let n = TLS_READ_CHUNK.min(region.len() - at);
                    let r = region.clone();
                    let piece = tokio::task::spawn_blocking(move || {
                        let mut buf = vec![0u8; n];
                        r.read_at(at, &mut buf).map(|()| buf)
                    })
                    .await
                    .map_err(std::io::Error::other)?
                    .map_err(std::io::Error::other)?;
                    w.write_all(&piece).await?;
                    at += n;
                }
            }
        }
    }
    Ok(())
}
