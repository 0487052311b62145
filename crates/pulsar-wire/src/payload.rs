//! Message payloads: compression and batches.
//!
//! A payload is compressed as a whole with the codec `MessageMetadata.
//! compression` names, and `uncompressed_size` gives its size before
//! compression. Codecs as the upstream clients use them: LZ4 is a raw LZ4
//! block (not the LZ4 frame format), ZLIB a zlib stream, ZSTD a zstd
//! frame, SNAPPY a raw snappy block (not the framed format).
//!
//! When `num_messages_in_batch` is present the decompressed payload is a
//! batch: that many entries of
//!
//! ```text
//! [u32 size][SingleMessageMetadata (size bytes)][payload_size bytes]
//! ```
//!
//! and nothing else. Otherwise it is one message's value.

use std::io::Read;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use crate::error::{FrameError, Result};
use crate::proto::{CompressionType, MessageMetadata, SingleMessageMetadata};
use crate::wire::{self, decode_checked};

/// zstd's own default level, the one the C++ client uses.
const ZSTD_LEVEL: i32 = 3;

/// A decoded payload: one value, or the messages of a batch.
#[derive(Debug, Clone)]
pub enum MessagePayload {
    /// A non-batched message's value.
    Single(Bytes),
    /// A batch's messages, decoded as they are iterated.
    Batch(BatchIter),
}

/// Decompresses `data` as `metadata` describes it and splits a batch.
///
/// `max_uncompressed_size` bounds what decompression may allocate: a larger
/// `uncompressed_size` is refused before anything is allocated. An
/// uncompressed payload is returned as is (the same bytes, not a copy).
/// Encrypted payloads are refused.
pub fn decode_payload(
    metadata: &MessageMetadata,
    data: Bytes,
    max_uncompressed_size: usize,
) -> Result<MessagePayload> {
    if !metadata.encryption_keys.is_empty() {
        return Err(FrameError::EncryptedPayload);
    }
    let codec = codec_of(metadata)?;
    let data = decompress(
        codec,
        data,
        metadata.uncompressed_size.unwrap_or(0),
        max_uncompressed_size,
    )?;
    Ok(match metadata.num_messages_in_batch {
        Some(count) => MessagePayload::Batch(BatchIter::new(data, count)?),
        None => MessagePayload::Single(data),
    })
}

/// The codec `metadata.compression` names (absent means none).
pub fn codec_of(metadata: &MessageMetadata) -> Result<CompressionType> {
    let value = metadata.compression.unwrap_or(CompressionType::None as i32);
    CompressionType::try_from(value).map_err(|_| FrameError::UnknownCompression(value))
}

/// Compresses `data` with `codec`; `None` returns a copy.
pub fn compress(codec: CompressionType, data: &[u8]) -> Result<Bytes> {
    let failed = |reason: String| FrameError::Compression {
        codec: codec_name(codec),
        reason,
    };
    Ok(match codec {
        CompressionType::None => Bytes::copy_from_slice(data),
        CompressionType::Lz4 => lz4_flex::block::compress(data).into(),
        CompressionType::Zlib => {
            use std::io::Write;
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).map_err(|e| failed(e.to_string()))?;
            e.finish().map_err(|e| failed(e.to_string()))?.into()
        }
        CompressionType::Zstd => zstd::bulk::compress(data, ZSTD_LEVEL)
            .map_err(|e| failed(e.to_string()))?
            .into(),
        CompressionType::Snappy => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| failed(e.to_string()))?
            .into(),
    })
}

/// Decompresses `data`, which must decompress to exactly
/// `uncompressed_size` bytes; `None` returns `data` itself, unchecked.
///
/// Refuses an `uncompressed_size` over `max_uncompressed_size` before
/// allocating, and never produces more than `uncompressed_size + 1` bytes,
/// whatever the input claims.
pub fn decompress(
    codec: CompressionType,
    data: Bytes,
    uncompressed_size: u32,
    max_uncompressed_size: usize,
) -> Result<Bytes> {
    if codec == CompressionType::None {
        return Ok(data);
    }
    let expected = uncompressed_size as usize;
    if expected > max_uncompressed_size {
        return Err(FrameError::UncompressedSizeTooLarge {
            size: uncompressed_size,
            max: max_uncompressed_size,
        });
    }
    let name = codec_name(codec);
    let failed = |reason: String| FrameError::Decompression {
        codec: name,
        reason,
    };
    let mismatch = |actual: usize| FrameError::UncompressedSizeMismatch {
        expected: uncompressed_size,
        actual,
    };
    let out = match codec {
        CompressionType::None => return Ok(data),
        CompressionType::Lz4 => {
            // A raw block does not know its own size: decode into exactly
            // the announced room; a block needing more is an error.
            let mut out = vec![0u8; expected];
            let n = lz4_flex::block::decompress_into(&data, &mut out)
                .map_err(|e| failed(e.to_string()))?;
            if n != expected {
                return Err(mismatch(n));
            }
            out
        }
        CompressionType::Snappy => {
            let claimed = snap::raw::decompress_len(&data).map_err(|e| failed(e.to_string()))?;
            if claimed != expected {
                return Err(mismatch(claimed));
            }
            let mut out = vec![0u8; expected];
            let n = snap::raw::Decoder::new()
                .decompress(&data, &mut out)
                .map_err(|e| failed(e.to_string()))?;
            if n != expected {
                return Err(mismatch(n));
            }
            out
        }
        CompressionType::Zlib => read_bounded(
            flate2::read::ZlibDecoder::new(&data[..]),
            expected,
            failed,
            mismatch,
        )?,
        CompressionType::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(&data[..])
                .map_err(|e| failed(e.to_string()))?;
            read_bounded(decoder, expected, failed, mismatch)?
        }
    };
    Ok(out.into())
}

/// Reads at most `expected + 1` bytes from a streaming decoder; anything
/// but exactly `expected` is a mismatch.
fn read_bounded(
    reader: impl Read,
    expected: usize,
    failed: impl Fn(String) -> FrameError,
    mismatch: impl Fn(usize) -> FrameError,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(expected);
    reader
        .take(expected as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| failed(e.to_string()))?;
    if out.len() != expected {
        return Err(mismatch(out.len()));
    }
    Ok(out)
}

fn codec_name(codec: CompressionType) -> &'static str {
    match codec {
        CompressionType::None => "none",
        CompressionType::Lz4 => "lz4",
        CompressionType::Zlib => "zlib",
        CompressionType::Zstd => "zstd",
        CompressionType::Snappy => "snappy",
    }
}

/// The messages of a decompressed batch, decoded one at a time with every
/// size checked against what is left. Yields exactly the announced number
/// of messages, then an error if bytes remain; after an error it yields
/// nothing more.
#[derive(Debug, Clone)]
pub struct BatchIter {
    rest: Bytes,
    count: u32,
    index: u32,
    done: bool,
}

impl BatchIter {
    /// Splits `data` as a batch of `count` messages (`num_messages_in_batch`).
    pub fn new(data: Bytes, count: i32) -> Result<Self> {
        let count = u32::try_from(count).map_err(|_| FrameError::InvalidBatchCount(count))?;
        Ok(BatchIter {
            rest: data,
            count,
            index: 0,
            done: false,
        })
    }

    /// How many messages the batch announces.
    pub fn message_count(&self) -> u32 {
        self.count
    }

    fn entry(&mut self) -> Result<(SingleMessageMetadata, Bytes)> {
        let index = self.index;
        let out_of_range = |what, size: i64, available| FrameError::BatchEntryOutOfRange {
            index,
            what,
            size,
            available,
        };
        let rest = &self.rest;
        let size = match rest.get(..4) {
            Some(b) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            None => return Err(out_of_range("metadata size field", 4, rest.len())),
        };
        let available = rest.len() - 4;
        if size as usize > available {
            return Err(out_of_range("metadata", i64::from(size), available));
        }
        let metadata_end = 4 + size as usize;
        let metadata: SingleMessageMetadata =
            decode_checked(rest.slice(4..metadata_end), wire::SINGLE_MESSAGE_METADATA)?;
        let available = rest.len() - metadata_end;
        let payload_size = usize::try_from(metadata.payload_size)
            .ok()
            .filter(|&n| n <= available)
            .ok_or_else(|| out_of_range("payload", i64::from(metadata.payload_size), available))?;
        let payload = rest.slice(metadata_end..metadata_end + payload_size);
        self.rest = rest.slice(metadata_end + payload_size..);
        Ok((metadata, payload))
    }
}

impl Iterator for BatchIter {
    type Item = Result<(SingleMessageMetadata, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.index == self.count {
            self.done = true;
            if self.rest.is_empty() {
                return None;
            }
            return Some(Err(FrameError::TrailingBatchBytes {
                count: self.rest.len(),
                messages: self.count,
            }));
        }
        let entry = self.entry();
        self.index += 1;
        if entry.is_err() {
            self.done = true;
        }
        Some(entry)
    }
}

/// Appends a batch payload (uncompressed) to `dst` and returns the number
/// of messages, for `num_messages_in_batch`. Each message's `payload_size`
/// is set from its payload.
pub fn encode_batch<B: AsRef<[u8]>>(
    messages: impl IntoIterator<Item = (SingleMessageMetadata, B)>,
    dst: &mut BytesMut,
) -> Result<i32> {
    let start = dst.len();
    let mut count = 0i32;
    for (metadata, payload) in messages {
        let written = count
            .checked_add(1)
            .ok_or(FrameError::TooLargeToEncode {
                what: "batch message count",
                size: 1 << 31,
            })
            .and_then(|next| {
                count = next;
                write_entry(metadata, payload.as_ref(), dst)
            });
        if let Err(e) = written {
            dst.truncate(start);
            return Err(e);
        }
    }
    Ok(count)
}

fn write_entry(
    mut metadata: SingleMessageMetadata,
    payload: &[u8],
    dst: &mut BytesMut,
) -> Result<()> {
    let too_large = |what, size: usize| FrameError::TooLargeToEncode {
        what,
        size: size as u64,
    };
    metadata.payload_size = i32::try_from(payload.len())
        .map_err(|_| too_large("batched message payload", payload.len()))?;
    let size = metadata.encoded_len();
    let size32 = u32::try_from(size).map_err(|_| too_large("single message metadata", size))?;
    dst.reserve(4 + size + payload.len());
    dst.put_u32(size32);
    metadata
        .encode(dst)
        .map_err(|_| too_large("single message metadata", size))?;
    dst.put_slice(payload);
    Ok(())
}

/// Builds a non-batched payload: compresses `value` with `codec` and sets
/// `metadata`'s compression fields to match (`compression` and
/// `uncompressed_size` only when compressed, as upstream clients do;
/// `num_messages_in_batch` cleared).
pub fn build_single(
    metadata: &mut MessageMetadata,
    value: &[u8],
    codec: CompressionType,
) -> Result<Bytes> {
    let compressed = compress_into_metadata(metadata, value, codec)?;
    metadata.num_messages_in_batch = None;
    Ok(compressed)
}

/// Builds a batch payload from `messages`, compresses it with `codec` and
/// sets `metadata`'s `num_messages_in_batch` and compression fields.
pub fn build_batch<B: AsRef<[u8]>>(
    metadata: &mut MessageMetadata,
    messages: impl IntoIterator<Item = (SingleMessageMetadata, B)>,
    codec: CompressionType,
) -> Result<Bytes> {
    let mut batch = BytesMut::new();
    let count = encode_batch(messages, &mut batch)?;
    let compressed = if codec == CompressionType::None {
        metadata.compression = None;
        metadata.uncompressed_size = None;
        batch.freeze()
    } else {
        compress_into_metadata(metadata, &batch, codec)?
    };
    metadata.num_messages_in_batch = Some(count);
    Ok(compressed)
}

fn compress_into_metadata(
    metadata: &mut MessageMetadata,
    data: &[u8],
    codec: CompressionType,
) -> Result<Bytes> {
    if codec == CompressionType::None {
        metadata.compression = None;
        metadata.uncompressed_size = None;
        return Ok(Bytes::copy_from_slice(data));
    }
    let size = u32::try_from(data.len()).map_err(|_| FrameError::TooLargeToEncode {
        what: "uncompressed payload",
        size: data.len() as u64,
    })?;
    let compressed = compress(codec, data)?;
    metadata.compression = Some(codec as i32);
    metadata.uncompressed_size = Some(size);
    Ok(compressed)
}

#[cfg(test)]
mod tests;
