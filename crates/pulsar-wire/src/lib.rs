//! The Pulsar binary protocol as Magnetar speaks it: wire types generated
//! from our own `proto/pulsar.proto` ([`proto`]), the frame codec
//! ([`frame`]) and the message-payload codec ([`payload`]: compression and
//! batches). Pure codec: no I/O, no async runtime, no broker types.
//!
//! Reading: feed a connection's read buffer to a [`FrameDecoder`]; each
//! [`Frame`] holds the decoded [`proto::BaseCommand`] and, for SEND and
//! MESSAGE frames, a [`Payload`] whose data is a slice of the read buffer
//! (never copied). [`Command::try_from`] turns the envelope into a
//! matchable [`Command`]; [`payload::decode_payload`] decompresses and
//! splits batches.
//!
//! Writing: build a command with [`command`] (which sets `type` for you)
//! and write it with [`encode_command`], or with
//! [`encode_payload_command`] for frames that carry a message, which always
//! get the `0x0e01` magic and CRC32C.
//!
//! Everything returns [`FrameError`] on bad input; nothing panics on what a
//! peer sends, and no buffer is sized from an unchecked length.

#![warn(missing_docs)]

mod command;
mod error;
pub mod frame;
pub mod payload;
pub mod proto;
mod wire;

pub use command::{command, Command};
pub use error::{FrameError, Result};
pub use frame::{
    encode_command, encode_payload_command, ChecksumState, Frame, FrameDecoder, Payload,
    DEFAULT_MAX_FRAME_SIZE,
};
pub use payload::{decode_payload, MessagePayload};
