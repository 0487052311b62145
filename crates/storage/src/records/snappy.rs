//! A streaming Snappy decoder, raw or in the xerial framing Kafka's Java
//! client writes, that never holds more than a 64 KiB window of output.
//!
//! The `snap` crate decodes whole buffers only (the raw format states the
//! decompressed length up front, so a 30-byte input can demand gigabytes).
//! Every Snappy compressor (Google's, librdkafka's port, `snap`) compresses
//! in independent 64 KiB blocks, so no copy reaches further back than 64 KiB;
//! a copy that does is refused as corrupt.

use std::io::{self, Read};

/// The xerial snappy framing used by the Java client (librdkafka reads it
/// and writes raw snappy).
pub(crate) const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\0";
/// Magic + version i32 + compatible-version i32.
pub(crate) const XERIAL_HEADER_LEN: usize = 16;

const WINDOW: usize = 64 * 1024;
const MASK: usize = WINDOW - 1;

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

#[derive(Debug, Clone, Copy)]
enum Pending {
    None,
    Literal { remaining: usize },
    Copy { offset: usize, remaining: usize },
}

/// Decodes the Snappy payload of one batch as a [`Read`] stream.
pub(crate) struct SnappyDecoder<D> {
    data: D,
    pos: usize,
    xerial: bool,
    /// Whether a raw stream (a xerial block, or the whole raw payload) is
    /// being decoded.
    in_stream: bool,
    /// Whether the one raw stream of a non-xerial payload has been started.
    raw_started: bool,
    /// End of the current raw stream in `data`.
    stream_end: usize,
    /// The current stream's declared decompressed length.
    expected: u64,
    /// Bytes the current stream's elements decoded so far (pending included).
    produced: u64,
    /// The last 64 KiB of output, written at `wpos & MASK`.
    window: Box<[u8]>,
    wpos: usize,
    pending: Pending,
}

impl<D: AsRef<[u8]>> SnappyDecoder<D> {
    /// Decodes `data`, xerial-framed if it starts with the xerial header.
    pub(crate) fn new(data: D) -> SnappyDecoder<D> {
        let bytes = data.as_ref();
        let xerial = bytes.len() >= XERIAL_HEADER_LEN && bytes.starts_with(XERIAL_MAGIC);
        SnappyDecoder {
            pos: if xerial { XERIAL_HEADER_LEN } else { 0 },
            data,
            xerial,
            in_stream: false,
            raw_started: false,
            stream_end: 0,
            expected: 0,
            produced: 0,
            window: vec![0u8; WINDOW].into_boxed_slice(),
            wpos: 0,
            pending: Pending::None,
        }
    }

    fn byte(&mut self) -> io::Result<u8> {
        if self.pos >= self.stream_end {
            return Err(invalid("truncated snappy element"));
        }
        let b = self.data.as_ref()[self.pos];
        self.pos += 1;
        Ok(b)
    }

    fn le(&mut self, n: usize) -> io::Result<usize> {
        let mut v = 0usize;
        for i in 0..n {
            v |= usize::from(self.byte()?) << (8 * i);
        }
        Ok(v)
    }

    /// Starts the next raw stream; `false` when there is none.
    fn start_stream(&mut self) -> io::Result<bool> {
        let len = self.data.as_ref().len();
        if self.xerial {
            if self.pos == len {
                return Ok(false);
            }
            let b = self
                .data
                .as_ref()
                .get(self.pos..self.pos + 4)
                .ok_or_else(|| invalid("truncated xerial snappy block length"))?;
            let block = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            self.pos += 4;
            self.stream_end = self
                .pos
                .checked_add(block)
                .filter(|&e| e <= len)
                .ok_or_else(|| invalid("truncated xerial snappy block"))?;
        } else {
            if self.raw_started {
                return Ok(false);
            }
            self.raw_started = true;
            self.stream_end = len;
        }
        // The preamble: the stream's decompressed length, a varint.
        let mut expected = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            expected |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return Err(invalid("malformed snappy length preamble"));
            }
        }
        if expected > u64::from(u32::MAX) {
            return Err(invalid("snappy length preamble over 32 bits"));
        }
        self.expected = expected;
        self.produced = 0;
        self.in_stream = true;
        Ok(true)
    }

    /// Reads the next element into `pending`; `false` at the end of input.
    fn next_element(&mut self) -> io::Result<bool> {
        loop {
            if !self.in_stream && !self.start_stream()? {
                return Ok(false);
            }
            if self.pos < self.stream_end {
                break;
            }
            if self.produced != self.expected {
                return Err(invalid("snappy stream shorter than its declared length"));
            }
            self.in_stream = false;
        }
        let tag = self.byte()?;
        let (len, pending) = match tag & 3 {
            0 => {
                let code = usize::from(tag >> 2);
                let len = if code < 60 {
                    code + 1
                } else {
                    self.le(code - 59)? + 1
                };
                if len > self.stream_end - self.pos {
                    return Err(invalid("snappy literal runs past the input"));
                }
                (len, Pending::Literal { remaining: len })
            }
            kind => {
                let (len, offset) = match kind {
                    1 => (
                        usize::from((tag >> 2) & 7) + 4,
                        (usize::from(tag >> 5) << 8) | usize::from(self.byte()?),
                    ),
                    2 => (usize::from(tag >> 2) + 1, self.le(2)?),
                    _ => (usize::from(tag >> 2) + 1, self.le(4)?),
                };
                if offset == 0 || offset as u64 > self.produced {
                    return Err(invalid("snappy copy before the start of the output"));
                }
                if offset > WINDOW {
                    return Err(invalid("snappy copy beyond the 64 KiB block window"));
                }
                (
                    len,
                    Pending::Copy {
                        offset,
                        remaining: len,
                    },
                )
            }
        };
        self.produced += len as u64;
        if self.produced > self.expected {
            return Err(invalid("snappy stream longer than its declared length"));
        }
        self.pending = pending;
        Ok(true)
    }
}

/// Records `bytes` as the latest output in `window`.
fn remember(window: &mut [u8], wpos: &mut usize, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        let at = *wpos & MASK;
        let n = bytes.len().min(WINDOW - at);
        window[at..at + n].copy_from_slice(&bytes[..n]);
        *wpos = wpos.wrapping_add(n);
        bytes = &bytes[n..];
    }
}

impl<D: AsRef<[u8]>> Read for SnappyDecoder<D> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < out.len() {
            match self.pending {
                Pending::None => {
                    if !self.next_element()? {
                        break;
                    }
                }
                Pending::Literal { remaining } => {
                    let run = remaining.min(out.len() - n);
                    let src = &self.data.as_ref()[self.pos..self.pos + run];
                    out[n..n + run].copy_from_slice(src);
                    remember(&mut self.window, &mut self.wpos, src);
                    self.pos += run;
                    n += run;
                    self.pending = match remaining - run {
                        0 => Pending::None,
                        remaining => Pending::Literal { remaining },
                    };
                }
                Pending::Copy { offset, remaining } => {
                    let src = self.wpos.wrapping_sub(offset) & MASK;
                    let dst = self.wpos & MASK;
                    // Within `offset`, the source bytes all precede this run.
                    let run = remaining
                        .min(out.len() - n)
                        .min(offset)
                        .min(WINDOW - src)
                        .min(WINDOW - dst);
                    self.window.copy_within(src..src + run, dst);
                    out[n..n + run].copy_from_slice(&self.window[dst..dst + run]);
                    self.wpos = self.wpos.wrapping_add(run);
                    n += run;
                    self.pending = match remaining - run {
                        0 => Pending::None,
                        remaining => Pending::Copy { offset, remaining },
                    };
                }
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        // A small read size exercises elements split across reads.
        let mut d = SnappyDecoder::new(data);
        let mut buf = [0u8; 777];
        loop {
            let n = d.read(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    fn xerial(payload: &[u8], block: usize) -> Vec<u8> {
        let mut out = XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&1i32.to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
        for chunk in payload.chunks(block) {
            let c = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            out.extend_from_slice(&(c.len() as u32).to_be_bytes());
            out.extend_from_slice(&c);
        }
        out
    }

    fn compressible(seed: u64, len: usize) -> Vec<u8> {
        let words: [&[u8]; 5] = [b"alpha ", b"beta ", b"gamma-delta ", b"\0\0\0\0", b"x"];
        let mut out = Vec::with_capacity(len);
        let mut s = seed | 1;
        while out.len() < len {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            out.extend_from_slice(words[(s % 5) as usize]);
            if s.is_multiple_of(11) {
                out.push((s >> 8) as u8);
            }
        }
        out.truncate(len);
        out
    }

    #[test]
    fn decodes_raw_and_xerial_like_snap() {
        for len in [0usize, 1, 100, 70_000, 300_000] {
            let payload = compressible(len as u64, len);
            let raw = snap::raw::Encoder::new().compress_vec(&payload).unwrap();
            assert_eq!(decode(&raw).unwrap(), payload, "raw {len}");
            if len > 0 {
                assert_eq!(decode(&xerial(&payload, 32 * 1024)).unwrap(), payload);
            }
        }
    }

    #[test]
    fn refuses_corrupt_streams() {
        let payload = compressible(7, 5000);
        let raw = snap::raw::Encoder::new().compress_vec(&payload).unwrap();
        assert!(decode(&raw[..raw.len() - 3]).is_err(), "cut short");
        let mut longer = raw.clone();
        longer.push(0); // a one-byte literal beyond the declared length, truncated
        assert!(decode(&longer).is_err());
        // Declares 10 bytes, holds a 1-byte literal.
        assert!(decode(&[10, 0, b'a']).is_err());
        // A copy before the start of the output.
        assert!(decode(&[4, 0b0000_0001, 5]).is_err());
        // A copy reaching back past 64 KiB is refused, not buffered.
        assert!(decode(&[8, 0b0001_1111, 0, 0, 2, 0]).is_err());
        assert!(decode(&xerial(&payload, 1000)[..40]).is_err());
    }

    proptest! {
        #[test]
        fn matches_snap_on_any_input(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            // Whatever snap accepts, we decode to the same bytes (or refuse a
            // copy beyond 64 KiB, impossible here); whatever it refuses we refuse.
            let ours = decode(&data);
            match snap::raw::Decoder::new().decompress_vec(&data) {
                Ok(expected) => prop_assert_eq!(ours.unwrap(), expected),
                Err(_) => prop_assert!(ours.is_err() || data.starts_with(XERIAL_MAGIC)),
            }
        }

        #[test]
        fn round_trips_compressible_data(seed in any::<u64>(), len in 0usize..200_000) {
            let payload = compressible(seed, len);
            let raw = snap::raw::Encoder::new().compress_vec(&payload).unwrap();
            prop_assert_eq!(decode(&raw).unwrap(), payload);
        }
    }
}
