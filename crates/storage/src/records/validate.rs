//! Record-level validation of one batch, as Kafka's `LogValidator` does it:
//! one pass over the records (streamed through a fixed chunk buffer when
//! compressed), no allocation per record.

use model::Timestamp;

use super::decompress::Decoder;
use super::input::{Input, SliceInput, StreamInput, CHUNK_BYTES};
use super::parse::read_record;
use crate::batch::{BatchHeader, TimestampRules, TimestampType, HEADER_LEN};
use crate::error::{RecordError, RefusedRecord};

/// A record-level fault: the index of the record at fault (if one is) and
/// what is wrong.
pub(crate) type Fault = (Option<u32>, RecordError);

/// Checks the records of `batch` (one whole batch whose header and CRC are
/// already checked): exactly `recordCount` well-formed records, offset deltas
/// `0..n`, timestamps that do not overflow, keys if `require_keys`, nothing
/// after the last record, at most `max_decompressed_bytes` of
/// decompressed records, and timestamps `timestamps` accepts (if given).
/// `chunk` is the reusable buffer compressed records are streamed through
/// (allocated on first use).
///
/// A malformed record ends the walk (the batch is corrupt). A well-formed
/// record the topic's rules refuse (no key, a timestamp out of range) is
/// pushed to `refused` and the walk goes on, so that every such record is
/// reported, as Kafka's `LogValidator` does; `refused` allocates only then.
///
/// Returns the largest record timestamp for CreateTime batches (-1 if none
/// is larger), the header's `maxTimestamp` for LogAppendTime ones.
pub(crate) fn check_records(
    batch: &[u8],
    header: &BatchHeader,
    max_decompressed_bytes: u64,
    require_keys: bool,
    timestamps: Option<&TimestampRules>,
    chunk: &mut Option<Box<[u8]>>,
    refused: &mut Vec<RefusedRecord>,
) -> Result<Timestamp, Fault> {
    let data = &batch[HEADER_LEN..header.total_size()];
    let compression = header.compression();
    match Decoder::new(compression, data).map_err(|e| (Some(0), e))? {
        None => walk(
            &mut SliceInput::new(data),
            header,
            require_keys,
            timestamps,
            refused,
        ),
        Some(decoder) => {
            let chunk = chunk.get_or_insert_with(|| vec![0u8; CHUNK_BYTES].into_boxed_slice());
            let mut input =
                StreamInput::new(decoder, compression, &mut chunk[..], max_decompressed_bytes);
            walk(&mut input, header, require_keys, timestamps, refused)
        }
    }
}

fn walk<I: Input>(
    input: &mut I,
    header: &BatchHeader,
    require_keys: bool,
    timestamps: Option<&TimestampRules>,
    refused: &mut Vec<RefusedRecord>,
) -> Result<Timestamp, Fault> {
    let batch_type = header.timestamp_type();
    let create_time = batch_type == TimestampType::CreateTime;
    let base = header.base_timestamp.0;
    // Kafka's NO_TIMESTAMP: the maximum is never below it.
    let mut max = -1i64;
    for i in 0..header.record_count {
        let at = |e| (Some(i as u32), e);
        if input.at_end().map_err(at)? {
            return Err((
                None,
                RecordError::CountMismatch {
                    claimed: header.record_count,
                    found: i,
                },
            ));
        }
        let r = read_record(input).map_err(at)?;
        if r.offset_delta != i {
            return Err(at(RecordError::OffsetDelta {
                expected: i,
                found: r.offset_delta,
            }));
        }
        let ts = if create_time {
            let ts = base.checked_add(r.timestamp_delta).ok_or_else(|| {
                at(RecordError::TimestampOverflow {
                    base,
                    delta: r.timestamp_delta,
                })
            })?;
            max = max.max(ts);
            ts
        } else {
            header.max_timestamp.0
        };
        // One refusal per record, the key's first, as in Kafka.
        let refusal = if require_keys && r.key_len < 0 {
            Err(RecordError::MissingKey)
        } else if let Some(rules) = timestamps {
            rules.check(ts, batch_type, i)
        } else {
            Ok(())
        };
        if let Err(error) = refusal {
            refused.push(RefusedRecord {
                index: i as u32,
                error,
            });
        }
    }
    if !input.at_end().map_err(|e| (None, e))? {
        return Err((
            None,
            RecordError::TrailingBytes {
                count: header.record_count,
            },
        ));
    }
    Ok(if create_time {
        Timestamp(max)
    } else {
        header.max_timestamp
    })
}
