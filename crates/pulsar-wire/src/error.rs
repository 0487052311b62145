//! The crate's one error type.

use crate::proto::BaseCommand;

/// Everything that can go wrong reading or writing a Pulsar frame: its
/// framing, its protobuf command and metadata, its checksum, and its message
/// payload (compression and batches).
///
/// Only [`FrameError::ChecksumMismatch`] leaves the connection usable: the
/// frame was well formed and has been consumed, so the front end answers the
/// producer with `ChecksumError` and goes on. After any other decoding error
/// the connection should be closed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// The frame (its 4-byte size field included) is larger than allowed.
    #[error("frame of {size} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// The frame's size, counting the 4-byte size field.
        size: u64,
        /// The configured limit.
        max: u64,
    },
    /// `totalSize` is too small to hold even the 4-byte command size.
    #[error("frame total size {total_size} leaves no room for a command size")]
    FrameTooShort {
        /// The frame's `totalSize` field.
        total_size: u32,
    },
    /// `commandSize` is 0.
    #[error("frame has an empty command")]
    EmptyCommand,
    /// `commandSize` runs past the end of the frame (`totalSize < 4 + commandSize`).
    #[error("command size {command_size} does not fit in frame total size {total_size}")]
    CommandSizeOutOfRange {
        /// The frame's `commandSize` field.
        command_size: u32,
        /// The frame's `totalSize` field.
        total_size: u32,
    },
    /// A protobuf message could not be decoded (bad wire format, bad UTF-8,
    /// nesting too deep).
    #[error("undecodable {message}: {reason}")]
    InvalidProtobuf {
        /// Which message: `BaseCommand`, `MessageMetadata`, …
        message: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// A proto2 `required` field is absent, or a `BaseCommand` lacks the
    /// command its `type` names.
    #[error("{message} lacks required field {field}")]
    MissingRequiredField {
        /// The message that lacks it.
        message: &'static str,
        /// The field's name as in the .proto.
        field: &'static str,
    },
    /// `BaseCommand.type` is not a command this crate declares.
    #[error("unknown command type {0}")]
    UnknownCommandType(i32),
    /// The two bytes after the command look like a magic number
    /// (`0x0eXX`) but are neither the checksum magic `0x0e01` nor the
    /// broker-entry-metadata magic `0x0e02`.
    #[error("bad magic number {0:#06x} after the command")]
    BadMagic(u16),
    /// The CRC32C of a payload frame does not match its contents. The
    /// command decoded fine and is kept here so that the front end can
    /// answer the right producer and sequence id.
    #[error(
        "payload checksum mismatch: frame says {expected:#010x}, contents give {computed:#010x}"
    )]
    ChecksumMismatch {
        /// The command of the frame whose payload is corrupt.
        command: Box<BaseCommand>,
        /// The checksum the frame carries.
        expected: u32,
        /// The checksum of what arrived.
        computed: u32,
    },
    /// The payload part of a frame ends before a size field or the section
    /// it announces.
    #[error("truncated payload: {what} needs {needed} bytes, {available} left")]
    TruncatedPayload {
        /// What was being read.
        what: &'static str,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the frame.
        available: usize,
    },
    /// `MessageMetadata.compression` names no known codec.
    #[error("unknown compression type {0}")]
    UnknownCompression(i32),
    /// `uncompressed_size` is over the caller's limit; nothing was allocated.
    #[error("uncompressed size {size} exceeds the limit of {max} bytes")]
    UncompressedSizeTooLarge {
        /// The size the metadata announces.
        size: u32,
        /// The caller's limit.
        max: usize,
    },
    /// Decompressed data is not exactly `uncompressed_size` bytes long.
    /// For output that is too long, counting stops one byte past the
    /// expected size.
    #[error("payload decompressed to {actual} bytes, metadata says {expected}")]
    UncompressedSizeMismatch {
        /// The size the metadata announces.
        expected: u32,
        /// What decompression produced.
        actual: usize,
    },
    /// The codec rejected the data.
    #[error("{codec} decompression failed: {reason}")]
    Decompression {
        /// The codec's name.
        codec: &'static str,
        /// What it said.
        reason: String,
    },
    /// The codec failed to compress (out of memory, or a library error).
    #[error("{codec} compression failed: {reason}")]
    Compression {
        /// The codec's name.
        codec: &'static str,
        /// What it said.
        reason: String,
    },
    /// The payload is encrypted (`encryption_keys` is set); the broker
    /// cannot read it.
    #[error("payload is encrypted")]
    EncryptedPayload,
    /// `num_messages_in_batch` is negative.
    #[error("invalid batch message count {0}")]
    InvalidBatchCount(i32),
    /// A batch entry's size field or payload runs past the batch's end, or
    /// its `payload_size` is negative.
    #[error("batch entry {index}: {what} of {size} bytes exceeds the {available} bytes left")]
    BatchEntryOutOfRange {
        /// The entry's position in the batch.
        index: u32,
        /// What was being read.
        what: &'static str,
        /// The size it announces (negative sizes as announced).
        size: i64,
        /// Bytes left in the batch.
        available: usize,
    },
    /// Bytes remain after the batch's last announced message.
    #[error("{count} bytes after the last of {messages} batched messages")]
    TrailingBatchBytes {
        /// How many bytes remain.
        count: usize,
        /// How many messages the batch announced.
        messages: u32,
    },
    /// Something to encode does not fit its wire field (a size over
    /// `u32::MAX`, a count or payload over `i32::MAX`).
    #[error("{what} of {size} does not fit its wire field")]
    TooLargeToEncode {
        /// What did not fit.
        what: &'static str,
        /// Its size.
        size: u64,
    },
}

impl FrameError {
    /// The command of a frame whose checksum failed, to answer it with
    /// `ChecksumError`; `None` for every other error.
    pub fn command(&self) -> Option<&BaseCommand> {
        match self {
            FrameError::ChecksumMismatch { command, .. } => Some(command),
            _ => None,
        }
    }
}

/// `Result` with [`FrameError`].
pub type Result<T, E = FrameError> = std::result::Result<T, E>;
