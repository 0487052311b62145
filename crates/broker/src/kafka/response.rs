//! Response frames that are written in pieces: encoded bytes interleaved
//! with stored batches sent from their segment files, so a large Fetch
//! response never sits whole in the heap.

use bytes::{BufMut, Bytes, BytesMut};
use storage::FileRegion;
use tokio::io::{AsyncWrite, AsyncWriteExt};

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
}

/// How much of a file region is read into memory at a time while writing.
const FILE_PIECE: usize = 256 * 1024;

impl ResponseFrame {
    /// A frame made of `chunks`, whose first chunk starts with the size
    /// prefix.
    pub fn new(chunks: Vec<Chunk>) -> ResponseFrame {
        ResponseFrame { chunks }
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

    /// Writes the frame: file pieces are read (off the async workers) into
    /// one buffer of at most 256 KiB at a time.
    pub async fn write_to<W: AsyncWrite + Unpin>(self, w: &mut W) -> std::io::Result<()> {
        let mut buf: Vec<u8> = Vec::new();
        for chunk in self.chunks {
            match chunk {
                Chunk::Bytes(b) => w.write_all(&b).await?,
                Chunk::File(region) => {
                    let region = std::sync::Arc::new(region);
                    let mut at = 0;
                    while at < region.len() {
                        let n = (region.len() - at).min(FILE_PIECE);
                        let r = region.clone();
                        let mut piece = std::mem::take(&mut buf);
                        piece.resize(n, 0);
                        let read = tokio::task::spawn_blocking(move || {
                            r.read_at(at, &mut piece).map(|()| piece)
                        })
                        .await
                        .map_err(std::io::Error::other)?
                        .map_err(std::io::Error::other)?;
                        w.write_all(&read).await?;
                        buf = read;
                        at += n;
                    }
                }
            }
        }
        Ok(())
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
        ResponseFrame {
            chunks: self.chunks,
        }
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
