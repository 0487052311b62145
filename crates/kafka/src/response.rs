//! Response frames that are written in pieces: encoded bytes interleaved
//! with stored batches sent from their segment files, so a large Fetch
//! response never sits whole in the heap.

use std::os::fd::AsRawFd;

use bytes::{BufMut, Bytes, BytesMut};
use storage::FileRegion;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

/// One piece of a response frame.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// Encoded bytes.
    Bytes(Bytes),
    /// Stored batches, read from their file as they are written.
    File(FileRegion),
}

/// A whole response frame (size prefix included) as pieces.
#[derive(Debug, Clone, Default)]
pub struct ResponseFrame {
    chunks: Vec<Chunk>,
    error_code: i16,
}

impl ResponseFrame {
    /// A frame made of `chunks`, whose first chunk starts with the size
    /// prefix.
    pub fn new(chunks: Vec<Chunk>) -> ResponseFrame {
        ResponseFrame {
            chunks,
            error_code: 0,
        }
    }

    /// Records the first error code the response carries (for metrics).
    pub fn with_error_code(mut self, code: i16) -> ResponseFrame {
        self.error_code = code;
        self
    }

    /// The first error code the response carries (top-level, else the
    /// first partition's), 0 for none.
    pub fn error_code(&self) -> i16 {
        self.error_code
    }

    /// Total bytes, size prefix included.
    pub fn len(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| match c {
                Chunk::Bytes(b) => b.len(),
                Chunk::File(r) => r.len(),
            })
            .sum()
    }

    /// Whether the frame is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the frame to a client socket; stored batches go from their
    /// segment file to the socket with `sendfile(2)`, never through user
    /// space. (Recent data is in the page cache; as in Kafka, older data is
    /// read from the disk by the kernel during the call.)
    pub async fn write_to(self, w: &mut OwnedWriteHalf) -> std::io::Result<()> {
        for chunk in self.chunks {
            match chunk {
                Chunk::Bytes(b) => w.write_all(&b).await?,
                Chunk::File(region) => send_file(w.as_ref(), &region).await?,
            }
        }
        Ok(())
    }

    /// The pieces, in order.
    pub fn into_chunks(self) -> Vec<Chunk> {
        self.chunks
    }

    /// The whole frame in memory (tests, and small responses).
    pub fn to_bytes(&self) -> std::io::Result<Bytes> {
        let mut out = BytesMut::with_capacity(self.len());
        for c in &self.chunks {
            match c {
                Chunk::Bytes(b) => out.put_slice(b),
                Chunk::File(r) => {
                    out.put_slice(&r.read_all().map_err(std::io::Error::other)?);
                }
            }
        }
        Ok(out.freeze())
    }
}

/// Sends a whole file region to a non-blocking socket with `sendfile(2)`,
/// waiting for the socket to drain whenever its buffer is full.
async fn send_file(sock: &TcpStream, region: &FileRegion) -> std::io::Result<()> {
    let (file, start, len) = region.file_range();
    let mut offset = start as libc::off_t;
    let end = start + len as u64;
    while (offset as u64) < end {
        sock.writable().await?;
        let remaining = (end - offset as u64) as usize;
        let sent = sock.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors are open for the call (the socket
            // borrowed, the file held by the region); `offset` is a valid
            // out-parameter the kernel advances by what it sent.
            let n = unsafe {
                libc::sendfile(
                    sock.as_raw_fd(),
                    file.as_raw_fd(),
                    &mut offset,
                    remaining.min(SENDFILE_MAX),
                )
            };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match sent {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "segment file shorter than the region being sent",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Most bytes one `sendfile` call moves, so one response cannot hold a
/// worker for long.
const SENDFILE_MAX: usize = 1 << 20;

/// Builds a frame from encoded bytes and file regions, keeping track of the
/// size prefix.
#[derive(Debug, Default)]
pub struct FrameBuilder {
    chunks: Vec<Chunk>,
    buf: BytesMut,
    len: usize,
}

impl FrameBuilder {
    /// A builder with room for the size prefix.
    pub fn new() -> FrameBuilder {
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        FrameBuilder {
            chunks: Vec::new(),
            buf,
            len: 0,
        }
    }

    /// The buffer encoded bytes go into.
    pub fn buf(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Appends a file region after what was encoded so far.
    pub fn file(&mut self, region: FileRegion) {
        if region.is_empty() {
            return;
        }
        self.flush();
        self.len += region.len();
        self.chunks.push(Chunk::File(region));
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            let b = self.buf.split().freeze();
            self.len += b.len();
            self.chunks.push(Chunk::Bytes(b));
        }
    }

    /// The frame, with its size prefix filled in.
    pub fn finish(mut self) -> ResponseFrame {
        self.flush();
        let body = (self.len - 4) as i32;
        if let Some(Chunk::Bytes(first)) = self.chunks.first_mut() {
            let mut b = BytesMut::from(&first[..]);
            b[..4].copy_from_slice(&body.to_be_bytes());
            *first = b.freeze();
        }
        ResponseFrame::new(self.chunks)
    }
}

/// Kafka's unsigned varint.
pub fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}
