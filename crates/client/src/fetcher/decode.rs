//! Turning a Fetch response's record bytes into messages: each batch is
//! decoded once, records before the fetch offset and control batches are
//! skipped, and a trailing partial batch (the response's size cut) is left
//! for the next fetch.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::records::RecordBatchDecoder;

use crate::error::{Error, Result};
use crate::message::Message;

/// Bytes before a v2 batch's `lastOffsetDelta` ends: base offset (8),
/// length (4), leader epoch (4), magic (1), CRC (4), attributes (2),
/// last offset delta (4).
const HEADER_PREFIX: usize = 27;
const CONTROL_BIT: i16 = 1 << 5;

/// Appends the messages in `records` at or after `fetch_offset` to `out`
/// and returns the offset to fetch next (past every complete batch seen,
/// including empty and control batches). Returns the bytes consumed too.
pub(crate) fn absorb(
    topic: &Arc<str>,
    partition: i32,
    mut records: Bytes,
    fetch_offset: i64,
    out: &mut VecDeque<Message>,
) -> Result<(i64, usize)> {
    let mut next = fetch_offset;
    let mut used = 0usize;
    while records.len() >= HEADER_PREFIX {
        let base = (&records[0..8]).get_i64();
        let len = (&records[8..12]).get_i32();
        if len < 0 {
            return Err(Error::Protocol(format!(
                "{topic}-{partition}: negative batch length at offset {base}"
            )));
        }
        let total = 12 + len as usize;
        if records.len() < total {
            break; // cut by the response size limit
        }
        let magic = records[16] as i8;
        if magic != 2 {
            return Err(Error::NotSupported(format!(
                "{topic}-{partition}: record format v{magic} at offset {base} (only v2 is read)"
            )));
        }
        let attributes = (&records[21..23]).get_i16();
        let last = base + i64::from((&records[23..27]).get_i32());
        let mut batch = records.split_to(total);
        used += total;
        if last < next {
            continue;
        }
        if attributes & CONTROL_BIT == 0 {
            let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| {
                Error::protocol(&format!("{topic}-{partition}: batch at offset {base}"), e)
            })?;
            for r in set.records {
                if r.offset >= next && !r.control {
                    out.push_back(Message::from_record(topic, partition, r));
                }
            }
        }
        next = last + 1;
    }
    Ok((next, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn batch(base: i64, n: i64, compression: Compression) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                sequence: (base + i) as i32,
                timestamp: 1000 + i,
                key: None,
                value: Some(Bytes::from(format!("v{}", base + i))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        buf.freeze()
    }

    fn offsets(out: &VecDeque<Message>) -> Vec<i64> {
        out.iter().map(|m| m.offset()).collect()
    }

    #[test]
    fn skips_records_before_the_fetch_offset() {
        let mut all = BytesMut::new();
        all.extend_from_slice(&batch(0, 5, Compression::None));
        all.extend_from_slice(&batch(5, 5, Compression::Lz4));
        let topic: Arc<str> = Arc::from("t");
        let mut out = VecDeque::new();
        let (next, used) = absorb(&topic, 0, all.clone().freeze(), 3, &mut out).unwrap();
        assert_eq!(offsets(&out), [3, 4, 5, 6, 7, 8, 9]);
        assert_eq!((next, used), (10, all.len()));
        assert_eq!(out[0].value(), Some(&b"v3"[..]));
        assert_eq!(out[6].timestamp(), 1004);
    }

    #[test]
    fn leaves_a_partial_batch_for_next_time() {
        let first = batch(0, 3, Compression::None);
        let second = batch(3, 3, Compression::Gzip);
        let mut all = BytesMut::new();
        all.extend_from_slice(&first);
        all.extend_from_slice(&second[..second.len() - 4]);
        let topic: Arc<str> = Arc::from("t");
        let mut out = VecDeque::new();
        let (next, used) = absorb(&topic, 1, all.freeze(), 0, &mut out).unwrap();
        assert_eq!(offsets(&out), [0, 1, 2]);
        assert_eq!((next, used), (3, first.len()));
        // Only a few bytes of a header: nothing, no error.
        let (next, _) = absorb(&topic, 1, second.slice(..10), 3, &mut out).unwrap();
        assert_eq!(next, 3);
    }

    #[test]
    fn control_batches_advance_without_messages() {
        let mut b = BytesMut::from(&batch(7, 1, Compression::None)[..]);
        // Flip the control bit; the CRC check comes after we skip it.
        let attrs = (&b[21..23]).get_i16() | CONTROL_BIT;
        b[21..23].copy_from_slice(&attrs.to_be_bytes());
        let topic: Arc<str> = Arc::from("t");
        let mut out = VecDeque::new();
        let (next, _) = absorb(&topic, 0, b.freeze(), 7, &mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(next, 8);
    }

    #[test]
    fn corrupt_batches_are_errors() {
        let mut b = BytesMut::from(&batch(0, 2, Compression::None)[..]);
        let last = b.len() - 1;
        b[last] ^= 0xff;
        let topic: Arc<str> = Arc::from("t");
        let err = absorb(&topic, 0, b.freeze(), 0, &mut VecDeque::new()).unwrap_err();
        assert!(matches!(err, Error::Protocol(_)), "{err}");
    }
}
