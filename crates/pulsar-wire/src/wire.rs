//! Presence checks for proto2 `required` fields.
//!
//! prost decodes a missing `required uint64` as 0, indistinguishable from
//! a real 0, so before prost decodes a message we walk its wire bytes,
//! guided by a table generated from `proto/pulsar.proto` by
//! `build.rs`, and report the first required field that never appeared
//! (also inside nested messages, e.g. `MessageIdData.ledgerId` of a
//! `CommandMessage`).

use bytes::Bytes;
use prost::Message;

use crate::error::{FrameError, Result};

/// A message's required and message-typed fields, sorted by number.
pub(crate) struct MessageSchema {
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [FieldSchema],
}

/// One field of interest of a message.
pub(crate) struct FieldSchema {
    pub(crate) number: i32,
    pub(crate) name: &'static str,
    pub(crate) required: bool,
    /// Index into [`MESSAGES`] when the field is a message.
    pub(crate) message: Option<usize>,
}

include!(concat!(env!("OUT_DIR"), "/pulsar_schema.rs"));

// prost's own default recursion limit.
const MAX_DEPTH: u32 = 100;

/// Decodes `bytes` as `M` (index `schema` in [`MESSAGES`]) and checks that
/// every required field is present, at every nesting level.
///
/// The walk comes first: it allocates nothing, so a message that would be
/// refused for a missing field (for instance thousands of empty
/// `MessageIdData` entries in an ACK) is refused before prost builds it.
pub(crate) fn decode_checked<M: Message + Default>(bytes: Bytes, schema: usize) -> Result<M> {
    check_required(&bytes, schema, 0)?;
    M::decode(bytes).map_err(|e| FrameError::InvalidProtobuf {
        message: MESSAGES[schema].name,
        reason: e.to_string(),
    })
}

/// Walks one message's wire bytes; errors name the innermost message.
pub(crate) fn check_required(mut buf: &[u8], schema: usize, depth: u32) -> Result<()> {
    let message = &MESSAGES[schema];
    let malformed = |reason: &str| FrameError::InvalidProtobuf {
        message: message.name,
        reason: reason.to_string(),
    };
    if depth > MAX_DEPTH {
        return Err(malformed("nesting too deep"));
    }
    let mut seen = 0u64;
    while !buf.is_empty() {
        let key = read_varint(&mut buf).ok_or_else(|| malformed("bad field key"))?;
        let wire_type = key & 7;
        let number = i32::try_from(key >> 3).map_err(|_| malformed("field number too large"))?;
        let position = message
            .fields
            .binary_search_by_key(&number, |f| f.number)
            .ok();
        match wire_type {
            0 => {
                read_varint(&mut buf).ok_or_else(|| malformed("bad varint"))?;
            }
            1 => buf = skip(buf, 8).ok_or_else(|| malformed("truncated fixed64"))?,
            5 => buf = skip(buf, 4).ok_or_else(|| malformed("truncated fixed32"))?,
            2 => {
                let len = read_varint(&mut buf).ok_or_else(|| malformed("bad length"))?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= buf.len())
                    .ok_or_else(|| malformed("length past the end"))?;
                let (body, rest) = buf.split_at(len);
                if let Some(nested) = position.and_then(|p| message.fields[p].message) {
                    check_required(body, nested, depth + 1)?;
                }
                buf = rest;
            }
            _ => return Err(malformed("unsupported wire type")),
        }
        if let Some(p) = position {
            seen |= 1 << p;
        }
    }
    for (p, field) in message.fields.iter().enumerate() {
        if field.required && seen & (1 << p) == 0 {
            return Err(FrameError::MissingRequiredField {
                message: message.name,
                field: field.name,
            });
        }
    }
    Ok(())
}

fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Some(value);
        }
    }
    None
}

fn skip(buf: &[u8], n: usize) -> Option<&[u8]> {
    buf.get(n..)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{CommandMessage, MessageIdData};

    #[test]
    fn table_names_required_fields() {
        let m = &MESSAGES[MESSAGE_ID_DATA];
        assert_eq!(m.name, "MessageIdData");
        let required: Vec<_> = m
            .fields
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name)
            .collect();
        assert_eq!(required, ["ledgerId", "entryId"]);
        // The recursive first_chunk_message_id points back at MessageIdData.
        let chunk = m.fields.iter().find(|f| f.number == 7).unwrap();
        assert_eq!(chunk.message, Some(MESSAGE_ID_DATA));
        assert!(MESSAGES[BASE_COMMAND].fields.len() <= 64);
    }

    #[test]
    fn nested_missing_field_is_reported() {
        // CommandMessage{consumer_id: 1, message_id: {ledgerId: 5}}: no entryId.
        let bytes = Bytes::from_static(&[0x08, 0x01, 0x12, 0x02, 0x08, 0x05]);
        let err = decode_checked::<CommandMessage>(bytes, COMMAND_MESSAGE).unwrap_err();
        assert_eq!(
            err,
            FrameError::MissingRequiredField {
                message: "MessageIdData",
                field: "entryId"
            }
        );
    }

    #[test]
    fn zero_values_count_as_present() {
        let id = MessageIdData {
            ledger_id: 0,
            entry_id: 0,
            ..Default::default()
        };
        let bytes = Bytes::from(id.encode_to_vec());
        assert_eq!(
            decode_checked::<MessageIdData>(bytes, MESSAGE_ID_DATA).unwrap(),
            id
        );
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bytes in [
            &[0x80][..],                                                   // unterminated key
            &[0x08],                                                       // varint missing
            &[0x0a, 0x05, 0x01],                                           // length past the end
            &[0x0b],                                                       // group start
            &[0x09, 0, 0],                                                 // truncated fixed64
            &[0x0d, 0],                                                    // truncated fixed32
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // huge number
        ] {
            assert!(
                matches!(
                    check_required(bytes, MESSAGE_ID_DATA, 0),
                    Err(FrameError::InvalidProtobuf { .. })
                ),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn depth_is_bounded() {
        // 200 nested first_chunk_message_id fields, innermost empty.
        let mut bytes = Vec::new();
        for _ in 0..200 {
            let mut outer = vec![0x3a];
            prost::encoding::encode_varint(bytes.len() as u64, &mut outer);
            outer.extend_from_slice(&bytes);
            bytes = outer;
        }
        assert!(matches!(
            check_required(&bytes, MESSAGE_ID_DATA, 0),
            Err(FrameError::InvalidProtobuf { .. })
        ));
    }
}
