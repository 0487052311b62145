//! Pulsar frames.
//!
//! A simple command frame:
//!
//! ```text
//! [totalSize u32][commandSize u32][BaseCommand]
//! ```
//!
//! A payload frame (SEND from a producer, MESSAGE to a consumer) goes on:
//!
//! ```text
//! ... [0x0e02 u16][size u32][BrokerEntryMetadata]   optional, PIP-70
//!     [0x0e01 u16][crc32c u32]                      optional on input
//!     [metadataSize u32][MessageMetadata][payload to the end of the frame]
//! ```
//!
//! All integers are big-endian; `totalSize` counts everything after
//! itself; the CRC32C covers everything after the checksum field
//! (metadataSize, metadata and payload). On input the broker-entry-metadata
//! prefix is skipped and a missing checksum is accepted (as upstream does:
//! the checksum is recognised by its magic); on output we never write the
//! prefix and always write the checksum (the Rust `pulsar` client requires
//! it on MESSAGE frames).

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use crate::command::check_consistent;
use crate::error::{FrameError, Result};
use crate::proto::{BaseCommand, MessageMetadata};
use crate::wire::{self, decode_checked};

/// Upstream's default frame limit: `maxMessageSize` (5 MiB) plus 10 KiB of
/// room for the command and metadata.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 5 * 1024 * 1024 + 10 * 1024;

/// Magic number in front of a payload's CRC32C.
pub const CHECKSUM_MAGIC: u16 = 0x0e01;

/// Magic number in front of PIP-70 broker entry metadata.
pub const BROKER_ENTRY_METADATA_MAGIC: u16 = 0x0e02;

/// One decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The command envelope. When its `type` is one this crate declares,
    /// the matching command field is present (checked on decode); required
    /// fields are present at every level.
    pub command: BaseCommand,
    /// The message carried by SEND and MESSAGE frames; `None` when nothing
    /// follows the command.
    pub payload: Option<Payload>,
}

impl Frame {
    /// A frame without payload.
    pub fn new(command: BaseCommand) -> Self {
        Frame {
            command,
            payload: None,
        }
    }
}

/// The message part of a payload frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// The message's metadata, required fields checked.
    pub metadata: MessageMetadata,
    /// The (possibly compressed, possibly batched) payload: a slice of the
    /// buffer the frame was decoded from, not a copy. See
    /// [`crate::payload::decode_payload`].
    pub data: Bytes,
    /// Whether the frame carried a checksum (it was verified if so).
    pub checksum: ChecksumState,
}

/// What was known about a payload frame's checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumState {
    /// The frame carried this CRC32C and the contents match it.
    Verified(u32),
    /// The frame carried no checksum (a peer at protocol < v6 may omit it).
    Absent,
}

/// Cuts complete frames out of a connection's read buffer.
///
/// The decoder never reserves buffer space: the caller's reads grow the
/// buffer by what actually arrives, so a peer announcing a large frame and
/// sending nothing costs nothing; one announcing more than the limit is
/// refused as soon as its 4-byte size has arrived.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_frame_size: u32,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

impl FrameDecoder {
    /// A decoder refusing frames larger than `max_frame_size` bytes, the
    /// 4-byte size field included (as upstream's frame decoder counts).
    pub fn new(max_frame_size: u32) -> Self {
        FrameDecoder { max_frame_size }
    }

    /// The limit this decoder enforces.
    pub fn max_frame_size(&self) -> u32 {
        self.max_frame_size
    }

    /// Takes the next complete frame off the front of `buf`.
    ///
    /// `Ok(None)`: more bytes are needed (nothing was consumed). A frame
    /// whose size fields are valid is consumed even when decoding it fails,
    /// so after [`FrameError::ChecksumMismatch`] the next call reads the
    /// next frame. After size errors ([`FrameError::FrameTooLarge`],
    /// [`FrameError::FrameTooShort`]) nothing is consumed and the stream
    /// cannot be resynchronised: close the connection.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>> {
        let Some(total_size) = read_u32(buf, 0) else {
            return Ok(None);
        };
        let frame_size = 4 + u64::from(total_size);
        if frame_size > u64::from(self.max_frame_size) {
            return Err(FrameError::FrameTooLarge {
                size: frame_size,
                max: u64::from(self.max_frame_size),
            });
        }
        if total_size < 4 {
            return Err(FrameError::FrameTooShort { total_size });
        }
        // Fits in usize: it is at most the u32 limit.
        let frame_size = frame_size as usize;
        if buf.len() < frame_size {
            return Ok(None);
        }
        let mut frame = buf.split_to(frame_size).freeze();
        let _ = frame.split_to(4);
        let decoded = decode_frame_body(frame);
        if let Ok(f) = &decoded {
            tracing::trace!(
                kind = f.command.r#type,
                size = frame_size,
                payload = f.payload.is_some(),
                "pulsar frame decoded"
            );
        }
        decoded.map(Some)
    }
}

/// Decodes one frame given everything after its `totalSize` field.
pub fn decode_frame_body(body: Bytes) -> Result<Frame> {
    let total_size = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let Some(command_size) = read_u32(&body, 0) else {
        return Err(FrameError::FrameTooShort { total_size });
    };
    if command_size == 0 {
        return Err(FrameError::EmptyCommand);
    }
    if 4 + u64::from(command_size) > body.len() as u64 {
        return Err(FrameError::CommandSizeOutOfRange {
            command_size,
            total_size,
        });
    }
    let command_end = 4 + command_size as usize;
    let command: BaseCommand = decode_checked(body.slice(4..command_end), wire::BASE_COMMAND)?;
    check_consistent(&command)?;
    let rest = body.slice(command_end..);
    if rest.is_empty() {
        return Ok(Frame::new(command));
    }
    let payload = decode_payload_part(rest, &command)?;
    Ok(Frame {
        command,
        payload: Some(payload),
    })
}

fn decode_payload_part(mut rest: Bytes, command: &BaseCommand) -> Result<Payload> {
    if read_u16(&rest, 0) == Some(BROKER_ENTRY_METADATA_MAGIC) {
        let size = read_u32(&rest, 2).ok_or(FrameError::TruncatedPayload {
            what: "broker entry metadata size",
            needed: 6,
            available: rest.len(),
        })?;
        let available = rest.len() - 6;
        if u64::from(size) > available as u64 {
            return Err(FrameError::TruncatedPayload {
                what: "broker entry metadata",
                needed: u64::from(size),
                available,
            });
        }
        // Skipped unread: Magnetar has no use for another broker's
        // timestamps or indexes.
        rest = rest.slice(6 + size as usize..);
    }

    let checksum = match read_u16(&rest, 0) {
        Some(CHECKSUM_MAGIC) => {
            let expected = read_u32(&rest, 2).ok_or(FrameError::TruncatedPayload {
                what: "checksum",
                needed: 6,
                available: rest.len(),
            })?;
            rest = rest.slice(6..);
            // Verified before anything else is read, so that any corrupted
            // byte, size fields included, is reported as a checksum error.
            let computed = crc32c::crc32c(&rest);
            if computed != expected {
                return Err(FrameError::ChecksumMismatch {
                    command: Box::new(command.clone()),
                    expected,
                    computed,
                });
            }
            ChecksumState::Verified(expected)
        }
        Some(magic) if magic >> 8 == 0x0e => return Err(FrameError::BadMagic(magic)),
        _ => ChecksumState::Absent,
    };

    let metadata_size = read_u32(&rest, 0).ok_or(FrameError::TruncatedPayload {
        what: "metadata size",
        needed: 4,
        available: rest.len(),
    })?;
    let available = rest.len() - 4;
    if u64::from(metadata_size) > available as u64 {
        return Err(FrameError::TruncatedPayload {
            what: "metadata",
            needed: u64::from(metadata_size),
            available,
        });
    }
    let metadata_end = 4 + metadata_size as usize;
    let metadata = decode_checked(rest.slice(4..metadata_end), wire::MESSAGE_METADATA)?;
    Ok(Payload {
        metadata,
        data: rest.slice(metadata_end..),
        checksum,
    })
}

/// Appends a simple command frame for `cmd` to `dst`.
///
/// Refuses (writing nothing) a command whose `type` names a command it does
/// not carry, which a peer would reject. (prost always writes proto2
/// `required` fields, so those cannot be missing.)
pub fn encode_command(cmd: &BaseCommand, dst: &mut BytesMut) -> Result<()> {
    let start = dst.len();
    let written = write_command(cmd, dst);
    if written.is_err() {
        dst.truncate(start);
    }
    written
}

fn write_command(cmd: &BaseCommand, dst: &mut BytesMut) -> Result<()> {
    check_consistent(cmd)?;
    let command_size = cmd.encoded_len();
    let total_size = to_u32("frame", 4 + command_size as u64)?;
    dst.reserve(4 + total_size as usize);
    dst.put_u32(total_size);
    dst.put_u32(command_size as u32);
    encode_message(cmd, dst)
}

/// Appends a payload frame (a SEND or MESSAGE) to `dst`: the command, the
/// `0x0e01` magic and CRC32C, the metadata, and the payload given in
/// pieces (one piece for a contiguous payload), copied in order.
///
/// `metadata` must already describe the payload (compression,
/// `uncompressed_size`, `num_messages_in_batch`); see
/// [`crate::payload::build_single`] and [`crate::payload::build_batch`].
/// Refuses what [`encode_command`] refuses, writing nothing.
pub fn encode_payload_command<P: AsRef<[u8]>>(
    cmd: &BaseCommand,
    metadata: &MessageMetadata,
    payload: &[P],
    dst: &mut BytesMut,
) -> Result<()> {
    let start = dst.len();
    let written = write_payload_command(cmd, metadata, payload, dst);
    if written.is_err() {
        dst.truncate(start);
    }
    written
}

fn write_payload_command<P: AsRef<[u8]>>(
    cmd: &BaseCommand,
    metadata: &MessageMetadata,
    payload: &[P],
    dst: &mut BytesMut,
) -> Result<()> {
    check_consistent(cmd)?;
    let command_size = cmd.encoded_len();
    let metadata_size = metadata.encoded_len();
    let payload_size: u64 = payload.iter().map(|p| p.as_ref().len() as u64).sum();
    let total_size = to_u32(
        "frame",
        4 + command_size as u64 + 6 + 4 + metadata_size as u64 + payload_size,
    )?;
    dst.reserve(4 + total_size as usize);
    dst.put_u32(total_size);
    dst.put_u32(command_size as u32);
    encode_message(cmd, dst)?;
    dst.put_u16(CHECKSUM_MAGIC);
    let crc_at = dst.len();
    dst.put_u32(0);
    let covered_from = dst.len();
    dst.put_u32(metadata_size as u32);
    encode_message(metadata, dst)?;
    for piece in payload {
        dst.put_slice(piece.as_ref());
    }
    let crc = crc32c::crc32c(&dst[covered_from..]);
    dst[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

fn encode_message(m: &impl Message, dst: &mut BytesMut) -> Result<()> {
    // prost fails only when the buffer has no room; BytesMut grows.
    m.encode(dst).map_err(|_| FrameError::TooLargeToEncode {
        what: "protobuf message",
        size: m.encoded_len() as u64,
    })
}

fn to_u32(what: &'static str, size: u64) -> Result<u32> {
    u32::try_from(size).map_err(|_| FrameError::TooLargeToEncode { what, size })
}

fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    let bytes = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests;
