//! Reading the records of one batch: offset, timestamp, key, value and
//! headers of each, as [`Bytes`].

use bytes::{Bytes, BytesMut};
use model::{Offset, Timestamp};

use super::decompress::Decoder;
use super::input::{Input, SliceInput, StreamInput, CHUNK_BYTES};
use super::parse::{read_body, read_length, read_record, RecordLayout};
use super::varint::read_varint;
use crate::attributes::TimestampType;
use crate::error::{BatchError, RecordError};
use crate::header::{BatchHeader, HEADER_LEN};

/// One record of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its offset (the batch's base offset plus its offset delta).
    pub offset: Offset,
    /// Its timestamp (the batch's `maxTimestamp` for LogAppendTime batches).
    pub timestamp: Timestamp,
    /// Its key; `None` is a null key.
    pub key: Option<Bytes>,
    /// Its value; `None` is a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Its headers.
    pub headers: Headers,
}

/// A record's headers, decoded as they are iterated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    /// The encoded headers, already checked by the record parser.
    data: Bytes,
    count: u32,
}

/// One record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Its key (never null).
    pub key: Bytes,
    /// Its value; `None` is null.
    pub value: Option<Bytes>,
}

impl Headers {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The count and the headers encoded as the record holds them (each a
    /// varint-length key and value), for re-encoding without decoding.
    pub(crate) fn encoded(&self) -> (i32, &[u8]) {
        (self.count as i32, &self.data)
    }

    /// The headers in order.
    pub fn iter(&self) -> impl Iterator<Item = Header> + '_ {
        let mut pos = 0usize;
        (0..self.count).map_while(move |_| {
            let mut field = || {
                let mut input = SliceInput::new(&self.data[pos..]);
                let len = read_varint(&mut input).ok()?;
                let start = pos + input.position() as usize;
                let len = usize::try_from(len).ok();
                pos = start + len.unwrap_or(0);
                Some(len.map(|l| self.data.slice(start..start + l)))
            };
            let key = field()??;
            let value = field()?;
            Some(Header { key, value })
        })
    }
}

/// Where the records come from.
enum Source {
    /// Uncompressed: slices of the batch itself.
    Slice { records: Bytes, pos: usize },
    /// Compressed: each record read into `buf` through a fixed chunk.
    Stream {
        input: Box<StreamInput<Box<[u8]>, Decoder<Bytes>>>,
        buf: BytesMut,
    },
}

/// The records of one batch, in order. Uncompressed records are zero-copy
/// slices of the batch; compressed ones are streamed through a fixed 64 KiB
/// chunk and copied, one record at a time, into a buffer that grows only
/// with the bytes actually present. At most `max_decompressed_bytes` are
/// decompressed.
///
/// Yields an error (and then nothing) for a malformed record, a batch with
/// fewer records than it claims, or bytes after the last record.
pub struct RecordIter {
    header: BatchHeader,
    source: Source,
    index: i32,
    done: bool,
}

impl RecordIter {
    /// Iterates the records of `batch`, one whole v2 batch (its CRC is not
    /// checked here).
    pub fn new(batch: Bytes, max_decompressed_bytes: u64) -> Result<RecordIter, BatchError> {
        let header = BatchHeader::parse(&batch)?;
        let size = header.total_size();
        if batch.len() < size {
            return Err(BatchError::Truncated {
                position: 0,
                needed: size,
                available: batch.len(),
            });
        }
        let records = batch.slice(HEADER_LEN..size);
        let compression = header.compression();
        let source = match Decoder::new(compression, records.clone()).map_err(|error| {
            BatchError::InvalidRecords {
                position: 0,
                record_index: Some(0),
                error,
            }
        })? {
            None => Source::Slice { records, pos: 0 },
            Some(decoder) => Source::Stream {
                input: Box::new(StreamInput::new(
                    decoder,
                    compression,
                    vec![0u8; CHUNK_BYTES].into_boxed_slice(),
                    max_decompressed_bytes,
                )),
                buf: BytesMut::new(),
            },
        };
        Ok(RecordIter {
            header,
            source,
            index: 0,
            done: false,
        })
    }

    /// The batch's header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    fn at_end(&mut self) -> Result<bool, RecordError> {
        match &mut self.source {
            Source::Slice { records, pos } => Ok(*pos == records.len()),
            Source::Stream { input, .. } => input.at_end(),
        }
    }

    /// The next record's bytes and layout (relative to those bytes).
    fn read_next(&mut self) -> Result<(Bytes, RecordLayout), RecordError> {
        match &mut self.source {
            Source::Slice { records, pos } => {
                let mut input = SliceInput::new(&records[*pos..]);
                let layout = read_record(&mut input)?;
                let bytes = records.slice(*pos..*pos + layout.end as usize);
                *pos += layout.end as usize;
                Ok((bytes, layout))
            }
            Source::Stream { input, buf } => {
                let length = read_length(input.as_mut())?;
                let room = input.limit().saturating_sub(input.position());
                if length as u64 > room {
                    return Err(RecordError::DecompressedTooLarge {
                        limit: input.limit(),
                    });
                }
                // Grow with the bytes actually read, not with what the
                // length prefix claims.
                buf.clear();
                let length = length as usize;
                while buf.len() < length {
                    let at = buf.len();
                    let step = (length - at).min(CHUNK_BYTES);
                    buf.resize(at + step, 0);
                    input.read_exact(&mut buf[at..])?;
                }
                let body = buf.split().freeze();
                let layout = read_body(&mut SliceInput::new(&body), length as i32)?;
                Ok((body, layout))
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<Record>, BatchError> {
        let fault = |record_index, error| BatchError::InvalidRecords {
            position: 0,
            record_index,
            error,
        };
        let i = self.index;
        if i >= self.header.record_count {
            if !self.at_end().map_err(|e| fault(None, e))? {
                return Err(fault(
                    None,
                    RecordError::TrailingBytes {
                        count: self.header.record_count,
                    },
                ));
            }
            return Ok(None);
        }
        let index = Some(i as u32);
        if self.at_end().map_err(|e| fault(index, e))? {
            return Err(fault(
                None,
                RecordError::CountMismatch {
                    claimed: self.header.record_count,
                    found: i,
                },
            ));
        }
        let (bytes, r) = self.read_next().map_err(|e| fault(index, e))?;
        self.index += 1;
        let timestamp = match self.header.timestamp_type() {
            TimestampType::LogAppendTime => self.header.max_timestamp,
            TimestampType::CreateTime => Timestamp(
                self.header
                    .base_timestamp
                    .0
                    .checked_add(r.timestamp_delta)
                    .ok_or_else(|| {
                        fault(
                            index,
                            RecordError::TimestampOverflow {
                                base: self.header.base_timestamp.0,
                                delta: r.timestamp_delta,
                            },
                        )
                    })?,
            ),
        };
        let field = |start: u64, len: i32| {
            usize::try_from(len)
                .ok()
                .map(|l| bytes.slice(start as usize..start as usize + l))
        };
        Ok(Some(Record {
            offset: self.header.base_offset.plus(i64::from(r.offset_delta)),
            timestamp,
            key: field(r.key_start, r.key_len),
            value: field(r.value_start, r.value_len),
            headers: Headers {
                data: bytes.slice(r.headers_start as usize..r.end as usize),
                count: r.header_count as u32,
            },
        }))
    }
}

impl Iterator for RecordIter {
    type Item = Result<Record, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_record();
        if !matches!(next, Ok(Some(_))) {
            self.done = true;
        }
        next.transpose()
    }
}

impl std::fmt::Debug for RecordIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordIter")
            .field("header", &self.header)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}
