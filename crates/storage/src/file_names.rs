//! How a log directory names its files: `{base offset:020}.{ext}`.

use model::Offset;

/// `{base_offset:020}.{ext}`.
pub(crate) fn file_name(base: Offset, ext: &str) -> String {
    format!("{:020}.{ext}", base.0)
}

/// The base offset encoded in a `{offset:020}.{ext}` file name.
pub(crate) fn parse_file_name(name: &str, ext: &str) -> Option<Offset> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().map(Offset)
}
