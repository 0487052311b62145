//! Kafka's zig-zag varints: decoding from an [`Input`], encoding into a `Vec`.

use super::input::Input;
use crate::error::RecordError;

/// Reads a zig-zag varint of at most `max_bytes` bytes (5 for 32 bits, 10
/// for 64 bits); the last byte may only carry the bits the type has left.
#[inline]
fn read_raw<I: Input>(input: &mut I, max_bytes: u8) -> Result<u64, RecordError> {
    let first = input.next_byte()?.ok_or(RecordError::Truncated)?;
    if first & 0x80 == 0 {
        return Ok(u64::from(first));
    }
    let mut value = u64::from(first & 0x7f);
    let bits = u32::from(max_bytes) * 7;
    let total_bits = if max_bytes == 5 { 32 } else { 64 };
    let mut shift = 7;
    loop {
        let byte = input.next_byte()?.ok_or(RecordError::Truncated)?;
        let payload = u64::from(byte & 0x7f);
        // The last byte may only fill the bits the type has left.
        if shift + 7 >= bits && (byte & 0x80 != 0 || payload >> (total_bits - shift) != 0) {
            return Err(RecordError::MalformedVarint { max_bytes });
        }
        value |= payload << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
    }
}

/// Reads a 32-bit zig-zag varint.
#[inline]
pub(crate) fn read_varint<I: Input>(input: &mut I) -> Result<i32, RecordError> {
    let raw = read_raw(input, 5)? as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a 64-bit zig-zag varint.
#[inline]
pub(crate) fn read_varlong<I: Input>(input: &mut I) -> Result<i64, RecordError> {
    let raw = read_raw(input, 10)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Appends `v` as a 64-bit zig-zag varint.
pub(crate) fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Appends `v` as a 32-bit zig-zag varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_varlong(out, i64::from(v));
}

/// Bytes [`put_varlong`] writes for `v`.
pub(crate) fn varlong_len(v: i64) -> usize {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while raw >= 0x80 {
        raw >>= 7;
        n += 1;
    }
    n
}

/// Bytes [`put_varint`] writes for `v`.
pub(crate) fn varint_len(v: i32) -> usize {
    varlong_len(i64::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::input::SliceInput;
    use proptest::prelude::*;

    fn int(bytes: &[u8]) -> Result<i32, RecordError> {
        read_varint(&mut SliceInput::new(bytes))
    }

    fn long(bytes: &[u8]) -> Result<i64, RecordError> {
        read_varlong(&mut SliceInput::new(bytes))
    }

    #[test]
    fn decodes_zigzag() {
        assert_eq!(int(&[0x00]).unwrap(), 0);
        assert_eq!(int(&[0x01]).unwrap(), -1);
        assert_eq!(int(&[0x02]).unwrap(), 1);
        assert_eq!(int(&[0xac, 0x02]).unwrap(), 150);
        assert_eq!(int(&[0xfe, 0xff, 0xff, 0xff, 0x0f]).unwrap(), i32::MAX);
        assert_eq!(int(&[0xff, 0xff, 0xff, 0xff, 0x0f]).unwrap(), i32::MIN);
        assert_eq!(
            long(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).unwrap(),
            i64::MIN
        );
    }

    #[test]
    fn refuses_truncated_and_overlong() {
        assert!(matches!(int(&[0x80]), Err(RecordError::Truncated)));
        assert!(matches!(int(&[]), Err(RecordError::Truncated)));
        // A sixth byte, or a fifth with bits beyond 32.
        assert!(matches!(
            int(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
            Err(RecordError::MalformedVarint { max_bytes: 5 })
        ));
        assert!(matches!(
            int(&[0xff, 0xff, 0xff, 0xff, 0x1f]),
            Err(RecordError::MalformedVarint { .. })
        ));
        assert!(matches!(
            long(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            Err(RecordError::MalformedVarint { max_bytes: 10 })
        ));
    }

    proptest! {
        #[test]
        fn round_trips(v in any::<i32>(), w in any::<i64>()) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            prop_assert_eq!(buf.len(), varint_len(v));
            put_varlong(&mut buf, w);
            prop_assert_eq!(buf.len(), varint_len(v) + varlong_len(w));
            let mut input = SliceInput::new(&buf);
            prop_assert_eq!(read_varint(&mut input).unwrap(), v);
            prop_assert_eq!(read_varlong(&mut input).unwrap(), w);
        }
    }
}
