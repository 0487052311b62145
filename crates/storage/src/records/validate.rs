//! Record-level validation of one batch, as Kafka's `LogValidator` does it:
//! one pass over the records (streamed through a fixed chunk buffer when
//! compressed), no allocation per record.

use model::Timestamp;

use super::decompress::Decoder;
use super::input::{Input, SliceInput, StreamInput, CHUNK_BYTES};
use super::parse::read_record;
use crate::attributes::TimestampType;
use crate::config::LogConfig;
use crate::error::{RecordError, RefusedRecord};
use crate::header::{BatchHeader, HEADER_LEN};

/// The timestamp rules of Kafka's log validator: the topic's
/// `message.timestamp.type` and the window `message.timestamp.before.max.ms`
/// and `message.timestamp.after.max.ms` allow around the append time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampRules {
    /// The topic's `message.timestamp.type`.
    pub topic_type: TimestampType,
    /// The append time the window is measured from.
    pub now: Timestamp,
    /// How much older than `now` a CreateTime record may be.
    pub before_max_ms: u64,
    /// How much newer than `now` a CreateTime record may be.
    pub after_max_ms: u64,
}

impl TimestampRules {
    /// The rules a log with `config` applies at `now`.
    pub fn for_log(config: &LogConfig, now: Timestamp) -> TimestampRules {
        TimestampRules {
            topic_type: config.timestamp_type,
            now,
            before_max_ms: config.timestamp_before_max_ms,
            after_max_ms: config.timestamp_after_max_ms,
        }
    }

    /// Kafka's `validateTimestamp` for one record whose timestamp (the
    /// batch's `maxTimestamp` in a LogAppendTime batch) is `ts`, in a batch
    /// of type `batch_type`, at offset delta `offset`. On a CreateTime topic
    /// a record with a timestamp must lie in the window; a LogAppendTime
    /// batch from a producer is refused otherwise (on a LogAppendTime
    /// topic, or without a timestamp), exactly as Kafka decides.
    pub fn check(
        &self,
        ts: i64,
        batch_type: TimestampType,
        offset: i32,
    ) -> Result<(), RecordError> {
        if self.topic_type == TimestampType::CreateTime && ts != -1 {
            let diff = i128::from(self.now.0) - i128::from(ts);
            if diff > i128::from(self.before_max_ms) || -diff > i128::from(self.after_max_ms) {
                let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
                return Err(RecordError::TimestampOutOfRange {
                    timestamp: ts,
                    offset,
                    min: clamp(i128::from(self.now.0) - i128::from(self.before_max_ms)),
                    max: clamp(i128::from(self.now.0) + i128::from(self.after_max_ms)),
                });
            }
        } else if batch_type == TimestampType::LogAppendTime {
            return Err(RecordError::LogAppendTimeFromProducer);
        }
        Ok(())
    }
}

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
