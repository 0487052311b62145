//! A batch's `attributes` field: its bits, and the codec and timestamp
//! type they name.

pub(crate) const COMPRESSION_MASK: i16 = 0x07;
pub(crate) const TIMESTAMP_TYPE_FLAG: i16 = 0x08;
/// The attributes bit of a transactional batch.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
/// The attributes bit of a control batch (transaction markers).
pub const CONTROL_FLAG: i16 = 0x20;

/// The codec of a batch's records (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Uncompressed.
    None,
    /// gzip.
    Gzip,
    /// Snappy (xerial framing or raw).
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// The codec for a Kafka compression id, if known.
    pub fn from_id(id: u8) -> Option<Compression> {
        Some(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }

    /// The codec's Kafka compression id (attribute bits 0-2).
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// What a batch's timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker on append; every record has `maxTimestamp`.
    LogAppendTime,
}
