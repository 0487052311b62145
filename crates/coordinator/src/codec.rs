//! The varint codec the group log's binary record values share
//! (subscription cursors, producer sequences, schemas).

/// Zigzag encoding: small negative numbers stay short.
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Undoes [`zigzag`].
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends `v` as an unsigned LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Takes one byte.
pub(crate) fn take_u8(b: &mut &[u8]) -> Option<u8> {
    let (&first, rest) = b.split_first()?;
    *b = rest;
    Some(first)
}

/// Takes a [`put_varint`] value.
pub(crate) fn take_varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = take_u8(b)?;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Appends `bytes` prefixed by their length (varint).
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Takes a [`put_bytes`] field.
pub(crate) fn take_bytes<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(take_varint(b)?).ok()?;
    if b.len() < len {
        return None;
    }
    let (field, rest) = b.split_at(len);
    *b = rest;
    Some(field)
}

/// Takes a [`put_bytes`] field that must be UTF-8.
pub(crate) fn take_string(b: &mut &[u8]) -> Option<String> {
    std::str::from_utf8(take_bytes(b)?).ok().map(str::to_string)
}
