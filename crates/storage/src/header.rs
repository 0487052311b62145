//! The v2 batch header: where each field sits, and [`BatchHeader`], parsed
//! in place (the layout is drawn in [`crate::batch`]).

use model::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Timestamp};

use crate::attributes::{
    Compression, TimestampType, COMPRESSION_MASK, CONTROL_FLAG, TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
};
use crate::error::BatchError;

/// Size of the v2 batch header, up to and including `recordCount`.
pub const HEADER_LEN: usize = 61;
/// Bytes before the part that `batchLength` counts: `baseOffset` + `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// The only supported magic value.
pub const MAGIC_V2: i8 = 2;

pub(crate) const LENGTH_OFFSET: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub(crate) const MAGIC_OFFSET: usize = 16;
pub(crate) const CRC_OFFSET: usize = 17;
pub(crate) const ATTRIBUTES_OFFSET: usize = 21;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub(crate) const BASE_TIMESTAMP_OFFSET: usize = 27;
pub(crate) const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
pub(crate) const RECORD_COUNT_OFFSET: usize = 57;

/// A parsed v2 batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Bytes after the `batchLength` field.
    pub batch_length: i32,
    /// Epoch of the leader that appended the batch.
    pub partition_leader_epoch: LeaderEpoch,
    /// Format version; always 2 once parsed.
    pub magic: i8,
    /// CRC-32C over `attributes` to the end of the batch.
    pub crc: u32,
    /// Compression, timestamp type, transactional and control flags.
    pub attributes: i16,
    /// Offset of the last record minus `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: Timestamp,
    /// Largest record timestamp in the batch.
    pub max_timestamp: Timestamp,
    /// Idempotent producer id, or -1.
    pub producer_id: ProducerId,
    /// Idempotent producer epoch, or -1.
    pub producer_epoch: ProducerEpoch,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub record_count: i32,
}

pub(crate) fn i16_at(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

impl BatchHeader {
    /// Parses the header at the start of `buf` (only the first
    /// [`HEADER_LEN`] bytes are read). Checks the magic, the length field and
    /// the codec, but not the CRC or the record count.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        Self::parse_at(buf, 0)
    }

    /// Like [`BatchHeader::parse`], reporting `position` in errors.
    pub(crate) fn parse_at(buf: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_LEN {
            // A buffer too short to say its own length: report what we know.
            let needed = if buf.len() >= LOG_OVERHEAD {
                (i32_at(buf, LENGTH_OFFSET).max(0) as usize + LOG_OVERHEAD).max(HEADER_LEN)
            } else {
                HEADER_LEN
            };
            return Err(BatchError::Truncated {
                position,
                needed,
                available: buf.len(),
            });
        }
        let batch_length = i32_at(buf, LENGTH_OFFSET);
        if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(BatchError::InvalidLength {
                position,
                length: batch_length,
            });
        }
        let magic = buf[MAGIC_OFFSET] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic { position, magic });
        }
        let attributes = i16_at(buf, ATTRIBUTES_OFFSET);
        let codec = (attributes & COMPRESSION_MASK) as u8;
        if Compression::from_id(codec).is_none() {
            return Err(BatchError::UnsupportedCompression { position, codec });
        }
        Ok(BatchHeader {
            base_offset: Offset(i64_at(buf, 0)),
            batch_length,
            partition_leader_epoch: LeaderEpoch(i32_at(buf, PARTITION_LEADER_EPOCH_OFFSET)),
            magic,
            crc: u32_at(buf, CRC_OFFSET),
            attributes,
            last_offset_delta: i32_at(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: Timestamp(i64_at(buf, BASE_TIMESTAMP_OFFSET)),
            max_timestamp: Timestamp(i64_at(buf, MAX_TIMESTAMP_OFFSET)),
            producer_id: ProducerId(i64_at(buf, PRODUCER_ID_OFFSET)),
            producer_epoch: ProducerEpoch(i16_at(buf, PRODUCER_EPOCH_OFFSET)),
            base_sequence: i32_at(buf, BASE_SEQUENCE_OFFSET),
            record_count: i32_at(buf, RECORD_COUNT_OFFSET),
        })
    }

    /// The records' codec.
    pub fn compression(&self) -> Compression {
        // parse() rejected unknown ids, so this cannot fall through.
        Compression::from_id((self.attributes & COMPRESSION_MASK) as u8)
            .unwrap_or(Compression::None)
    }

    /// What the timestamps mean.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_FLAG != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch is part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    /// Whether the batch holds control records (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }

    /// Whether the batch comes from an idempotent producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id.0 >= 0
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(i64::from(self.last_offset_delta))
    }

    /// Offset just after the batch.
    pub fn next_offset(&self) -> Offset {
        self.last_offset().plus(1)
    }

    /// Bytes the whole batch occupies, `baseOffset` field included.
    pub fn total_size(&self) -> usize {
        self.batch_length.max(0) as usize + LOG_OVERHEAD
    }

    /// Sequence number of the last record (wraps to 0 after `i32::MAX`).
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// `seq + n`, wrapping from `i32::MAX` to 0 as Kafka's sequences do.
pub fn increment_sequence(seq: i32, n: i32) -> i32 {
    if seq < 0 {
        return seq;
    }
    ((i64::from(seq) + i64::from(n)) % (i64::from(i32::MAX) + 1)) as i32
}
