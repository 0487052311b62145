//! Streaming decompressors for the four Kafka codecs, all behind [`Read`],
//! each holding a bounded amount of state whatever the input claims.

use std::io::{self, Cursor, Read};

use super::snappy::SnappyDecoder;
use crate::attributes::Compression;
use crate::error::RecordError;

/// The decompressed records of one batch, as a stream.
///
/// Memory held: gzip a 32 KiB window; snappy a 64 KiB window; lz4 at most two
/// blocks (≤ 8 MiB each, as the frame header says); zstd its window, which
/// the frame header sets (zstd refuses windows over 128 MiB by default) but
/// which is only touched as far as output is produced, and the reader stops
/// at the decompression limit.
pub(crate) enum Decoder<D: AsRef<[u8]>> {
    /// gzip, possibly several members.
    Gzip(Box<flate2::bufread::MultiGzDecoder<Cursor<D>>>),
    /// Raw or xerial-framed Snappy.
    Snappy(SnappyDecoder<D>),
    /// LZ4 frame format.
    Lz4(Box<lz4_flex::frame::FrameDecoder<Cursor<D>>>),
    /// Zstandard.
    Zstd(Box<zstd::stream::read::Decoder<'static, Cursor<D>>>),
}

impl<D: AsRef<[u8]>> Decoder<D> {
    /// A decoder of `data` (the compressed records section); `None` for
    /// [`Compression::None`].
    pub(crate) fn new(
        compression: Compression,
        data: D,
    ) -> Result<Option<Decoder<D>>, RecordError> {
        Ok(Some(match compression {
            Compression::None => return Ok(None),
            Compression::Gzip => Decoder::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(
                Cursor::new(data),
            ))),
            Compression::Snappy => Decoder::Snappy(SnappyDecoder::new(data)),
            Compression::Lz4 => {
                lz4_single_frame(data.as_ref()).map_err(|source| RecordError::Decompress {
                    compression,
                    source,
                })?;
                Decoder::Lz4(Box::new(lz4_flex::frame::FrameDecoder::new(Cursor::new(
                    data,
                ))))
            }
            Compression::Zstd => Decoder::Zstd(Box::new(
                zstd::stream::read::Decoder::with_buffer(Cursor::new(data)).map_err(|source| {
                    RecordError::Decompress {
                        compression,
                        source,
                    }
                })?,
            )),
        }))
    }
}

impl<D: AsRef<[u8]>> Read for Decoder<D> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Gzip(d) => d.read(buf),
            Decoder::Snappy(d) => d.read(buf),
            Decoder::Lz4(d) => d.read(buf),
            Decoder::Zstd(d) => d.read(buf),
        }
    }
}

const LZ4_MAGIC: u32 = 0x184D_2204;

/// Checks that `data` is exactly one whole LZ4 frame: end mark (and content
/// checksum if flagged) present, nothing after it. `lz4_flex` takes an input
/// ending where a block size is expected as a complete frame, and reports
/// the end of the stream after each frame; other readers (librdkafka, the
/// Java client) fail on such input, so the batch would stop every consumer
/// of the partition. Producers write one frame per batch. Walks the block
/// headers only.
fn lz4_single_frame(data: &[u8]) -> io::Result<()> {
    let bad = |msg| io::Error::new(io::ErrorKind::InvalidData, msg);
    let u32_at = |at: usize| -> io::Result<u32> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| bad("truncated lz4 frame"))
    };
    if u32_at(0)? != LZ4_MAGIC {
        return Err(bad("not an lz4 frame"));
    }
    let flags = *data.get(4).ok_or_else(|| bad("truncated lz4 frame"))?;
    let content_size = if flags & 0x08 != 0 { 8 } else { 0 };
    let dict_id = if flags & 0x01 != 0 { 4 } else { 0 };
    // magic, FLG, BD, the optional fields, the header checksum
    let mut pos = 4 + 2 + content_size + dict_id + 1;
    let block_checksum = if flags & 0x10 != 0 { 4 } else { 0 };
    loop {
        let size = u32_at(pos)?;
        pos += 4;
        if size == 0 {
            break;
        }
        pos += (size & 0x7fff_ffff) as usize + block_checksum;
    }
    if flags & 0x04 != 0 {
        pos += 4;
    }
    match pos.cmp(&data.len()) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Greater => Err(bad("truncated lz4 frame")),
        std::cmp::Ordering::Less => Err(bad("bytes after the lz4 frame")),
    }
}
