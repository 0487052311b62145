//! Byte sources for the record parser: a slice (uncompressed records, the hot
//! path) or a decompressor read through one fixed, reusable chunk buffer.

use std::io::{self, Read};

use crate::attributes::Compression;
use crate::error::RecordError;

/// Size of the chunk buffer decompressed records are read through.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// A forward-only stream of record bytes.
pub(crate) trait Input {
    /// The next byte, or `None` at the end of the stream.
    fn next_byte(&mut self) -> Result<Option<u8>, RecordError>;
    /// Skips exactly `n` bytes ([`RecordError::Truncated`] if the stream ends first).
    fn skip(&mut self, n: u64) -> Result<(), RecordError>;
    /// Fills `out` exactly ([`RecordError::Truncated`] if the stream ends first).
    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RecordError>;
    /// Bytes consumed since the start of the stream.
    fn position(&self) -> u64;
    /// Whether the stream has no more bytes.
    fn at_end(&mut self) -> Result<bool, RecordError>;
}

/// Records held in memory as they are (uncompressed batches).
#[derive(Debug)]
pub(crate) struct SliceInput<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> SliceInput<'a> {
    /// Reads `buf` from its start.
    pub(crate) fn new(buf: &'a [u8]) -> SliceInput<'a> {
        SliceInput { buf, pos: 0 }
    }
}

impl Input for SliceInput<'_> {
    #[inline]
    fn next_byte(&mut self) -> Result<Option<u8>, RecordError> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(Some(b))
            }
            None => Ok(None),
        }
    }

    #[inline]
    fn skip(&mut self, n: u64) -> Result<(), RecordError> {
        let left = (self.buf.len() - self.pos) as u64;
        if n > left {
            self.pos = self.buf.len();
            return Err(RecordError::Truncated);
        }
        self.pos += n as usize;
        Ok(())
    }

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RecordError> {
        let src = self
            .buf
            .get(self.pos..self.pos + out.len())
            .ok_or(RecordError::Truncated)?;
        out.copy_from_slice(src);
        self.pos += out.len();
        Ok(())
    }

    #[inline]
    fn position(&self) -> u64 {
        self.pos as u64
    }

    #[inline]
    fn at_end(&mut self) -> Result<bool, RecordError> {
        Ok(self.pos == self.buf.len())
    }
}

/// Decompressed records read through a fixed chunk buffer, never more than
/// `limit` bytes in all: the decompressed size is never allocated, and a
/// stream that would exceed the limit fails as soon as it does.
pub(crate) struct StreamInput<C, R> {
    reader: R,
    compression: Compression,
    chunk: C,
    start: usize,
    end: usize,
    /// Bytes taken from the decompressor so far.
    decoded: u64,
    limit: u64,
    done: bool,
}

impl<C: AsMut<[u8]> + AsRef<[u8]>, R: Read> StreamInput<C, R> {
    /// Reads `reader` (a `compression` decompressor) through `chunk`,
    /// refusing more than `limit` decompressed bytes.
    pub(crate) fn new(
        reader: R,
        compression: Compression,
        chunk: C,
        limit: u64,
    ) -> StreamInput<C, R> {
        StreamInput {
            reader,
            compression,
            chunk,
            start: 0,
            end: 0,
            decoded: 0,
            limit,
            done: false,
        }
    }

    /// Makes bytes available in the chunk; `false` at the end of the stream.
    fn fill(&mut self) -> Result<bool, RecordError> {
        if self.start < self.end {
            return Ok(true);
        }
        if self.done {
            return Ok(false);
        }
        // One byte past the limit is enough to know it is exceeded.
        let room = self.limit.saturating_sub(self.decoded).saturating_add(1);
        let want = (self.chunk.as_ref().len() as u64).min(room) as usize;
        loop {
            match self.reader.read(&mut self.chunk.as_mut()[..want]) {
                Ok(0) => {
                    self.done = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.decoded += n as u64;
                    if self.decoded > self.limit {
                        return Err(RecordError::DecompressedTooLarge { limit: self.limit });
                    }
                    self.start = 0;
                    self.end = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(RecordError::Decompress {
                        compression: self.compression,
                        source,
                    })
                }
            }
        }
    }
}

impl<C: AsMut<[u8]> + AsRef<[u8]>, R: Read> Input for StreamInput<C, R> {
    #[inline]
    fn next_byte(&mut self) -> Result<Option<u8>, RecordError> {
        if !self.fill()? {
            return Ok(None);
        }
        let b = self.chunk.as_ref()[self.start];
        self.start += 1;
        Ok(Some(b))
    }

    fn skip(&mut self, mut n: u64) -> Result<(), RecordError> {
        while n > 0 {
            if !self.fill()? {
                return Err(RecordError::Truncated);
            }
            let step = ((self.end - self.start) as u64).min(n);
            self.start += step as usize;
            n -= step;
        }
        Ok(())
    }

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RecordError> {
        let mut at = 0;
        while at < out.len() {
            if !self.fill()? {
                return Err(RecordError::Truncated);
            }
            let step = (self.end - self.start).min(out.len() - at);
            out[at..at + step].copy_from_slice(&self.chunk.as_ref()[self.start..self.start + step]);
            self.start += step;
            at += step;
        }
        Ok(())
    }

    fn position(&self) -> u64 {
        self.decoded - (self.end - self.start) as u64
    }

    fn at_end(&mut self) -> Result<bool, RecordError> {
        Ok(!self.fill()?)
    }
}

impl<C, R> StreamInput<C, R> {
    /// The most decompressed bytes allowed in all.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}
