//! One v2 record, field by field, every length checked against the record's
//! own length prefix. No allocation: fields are skipped, their positions
//! noted.
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value |
//! headerCount varint | (headerKeyLength varint | key | headerValueLength varint | value)*
//! ```

use super::input::Input;
use super::varint::{read_varint, read_varlong};
use crate::error::{RecordError, RecordField};

/// Where one record's fields lie, in the coordinates of its [`Input`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordLayout {
    /// The record's timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// The record's offset minus the batch's base offset.
    pub offset_delta: i32,
    /// Where the key starts.
    pub key_start: u64,
    /// Key length; -1 for a null key.
    pub key_len: i32,
    /// Where the value starts.
    pub value_start: u64,
    /// Value length; -1 for a null value.
    pub value_len: i32,
    /// Where the first header starts.
    pub headers_start: u64,
    /// Number of headers.
    pub header_count: i32,
    /// Just after the record.
    pub end: u64,
}

/// Reads a record's length prefix.
#[inline]
pub(crate) fn read_length<I: Input>(input: &mut I) -> Result<i32, RecordError> {
    let length = read_varint(input)?;
    if length < 0 {
        return Err(RecordError::InvalidLength { length });
    }
    Ok(length)
}

/// Reads a whole record: its length prefix and its body.
#[inline]
pub(crate) fn read_record<I: Input>(input: &mut I) -> Result<RecordLayout, RecordError> {
    let length = read_length(input)?;
    read_body(input, length)
}

/// Skips a field of `len` bytes (-1: null) that must end by `end`.
#[inline]
fn skip_field<I: Input>(
    input: &mut I,
    end: u64,
    field: RecordField,
    len: i32,
) -> Result<(), RecordError> {
    let min = if field == RecordField::HeaderKey {
        0
    } else {
        -1
    };
    if len < min {
        return Err(RecordError::InvalidFieldLength { field, length: len });
    }
    if len > 0 {
        if input.position() + len as u64 > end {
            return Err(RecordError::FieldPastRecordEnd { field, length: len });
        }
        input.skip(len as u64)?;
    }
    Ok(())
}

/// Reads the body of a record whose length prefix said `length`, checking
/// that every field lies within it and that together they fill it exactly.
#[inline]
pub(crate) fn read_body<I: Input>(input: &mut I, length: i32) -> Result<RecordLayout, RecordError> {
    let start = input.position();
    let end = start + length as u64;
    let mismatch = |input: &I| RecordError::LengthMismatch {
        declared: length,
        actual: input.position() - start,
    };
    // The attributes byte is unused by every record format so far.
    input.next_byte()?.ok_or(RecordError::Truncated)?;
    let timestamp_delta = read_varlong(input)?;
    let offset_delta = read_varint(input)?;
    let key_len = read_varint(input)?;
    let key_start = input.position();
    skip_field(input, end, RecordField::Key, key_len)?;
    let value_len = read_varint(input)?;
    let value_start = input.position();
    skip_field(input, end, RecordField::Value, value_len)?;
    let header_count = read_varint(input)?;
    if input.position() > end {
        return Err(mismatch(input));
    }
    if header_count < 0 {
        return Err(RecordError::InvalidHeaderCount {
            count: header_count,
        });
    }
    let headers_start = input.position();
    for _ in 0..header_count {
        // Each header takes at least two bytes, so a huge count ends here.
        if input.position() >= end {
            return Err(RecordError::InvalidHeaderCount {
                count: header_count,
            });
        }
        let key_len = read_varint(input)?;
        skip_field(input, end, RecordField::HeaderKey, key_len)?;
        let value_len = read_varint(input)?;
        skip_field(input, end, RecordField::HeaderValue, value_len)?;
    }
    if input.position() != end {
        return Err(mismatch(input));
    }
    Ok(RecordLayout {
        timestamp_delta,
        offset_delta,
        key_start,
        key_len,
        value_start,
        value_len,
        headers_start,
        header_count,
        end,
    })
}
