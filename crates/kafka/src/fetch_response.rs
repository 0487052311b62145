//! The Fetch response (v4–v16), encoded by hand so that each partition's
//! records go out straight from their segment file rather than through a
//! buffer holding the whole response. Everything else is encoded exactly as
//! `kafka-protocol` would (a test compares the two byte for byte).

use bytes::{BufMut, BytesMut};
use storage::FileRegion;

use super::response::{put_uvarint, FrameBuilder, ResponseFrame};

/// One partition's answer.
#[derive(Debug, Clone)]
pub struct PartitionAnswer {
    /// Partition index.
    pub index: i32,
    /// Kafka error code.
    pub error_code: i16,
    /// High watermark (-1 on error).
    pub high_watermark: i64,
    /// Last stable offset (-1 on error).
    pub last_stable_offset: i64,
    /// Log start offset (-1 on error).
    pub log_start_offset: i64,
    /// `aborted_transactions` as (producer id, first offset): `None` is
    /// null (read_uncommitted), `Some` the list (read_committed).
    pub aborted: Option<Vec<(i64, i64)>>,
    /// The records; `None` sends an empty records field.
    pub records: Option<FileRegion>,
    /// To a follower whose log diverged (v12+): the leader's epoch and
    /// where it ends.
    pub diverging: Option<(i32, i64)>,
}

/// One topic's answer.
#[derive(Debug, Clone)]
pub struct TopicAnswer {
    /// Name as the request gave it (up to v12).
    pub name: String,
    /// Topic id (v13+).
    pub id: uuid::Uuid,
    /// Partitions.
    pub partitions: Vec<PartitionAnswer>,
}

/// A whole Fetch response.
#[derive(Debug, Clone, Default)]
pub struct FetchAnswer {
    /// How long the client is throttled (its quota).
    pub throttle_time_ms: i32,
    /// Top-level error (v7+).
    pub error_code: i16,
    /// Fetch session id (v7+); always 0 here.
    pub session_id: i32,
    /// Topics in request order.
    pub topics: Vec<TopicAnswer>,
}

fn put_array_len(buf: &mut BytesMut, flexible: bool, n: usize) {
    if flexible {
        put_uvarint(buf, n as u32 + 1);
    } else {
        buf.put_i32(n as i32);
    }
}

/// A Fetch v`version` response frame refusing the whole request with
/// `error`.
pub fn refusal(
    error: kafka_protocol::error::ResponseError,
    correlation_id: i32,
    version: i16,
) -> ResponseFrame {
    let answer = FetchAnswer {
        error_code: error.code(),
        ..FetchAnswer::default()
    };
    encode(&answer, correlation_id, version)
}

/// Encodes `answer` as a Fetch v`version` response frame (size prefix and
/// response header included).
pub fn encode(answer: &FetchAnswer, correlation_id: i32, version: i16) -> ResponseFrame {
    let flexible = version >= 12;
    let mut f = FrameBuilder::new();
    let b = f.buf();
    b.put_i32(correlation_id);
    if flexible {
        // Response header v1: no tagged fields.
        put_uvarint(b, 0);
    }
    b.put_i32(answer.throttle_time_ms);
    if version >= 7 {
        b.put_i16(answer.error_code);
        b.put_i32(answer.session_id);
    }
    put_array_len(b, flexible, answer.topics.len());
    for t in &answer.topics {
        let b = f.buf();
        if version <= 12 {
            if flexible {
                put_uvarint(b, t.name.len() as u32 + 1);
            } else {
                b.put_i16(t.name.len() as i16);
            }
            b.put_slice(t.name.as_bytes());
        }
        if version >= 13 {
            b.put_slice(t.id.as_bytes());
        }
        put_array_len(b, flexible, t.partitions.len());
        for p in &t.partitions {
            let b = f.buf();
            b.put_i32(p.index);
            b.put_i16(p.error_code);
            b.put_i64(p.high_watermark);
            b.put_i64(p.last_stable_offset);
            if version >= 5 {
                b.put_i64(p.log_start_offset);
            }
            match (&p.aborted, flexible) {
                (None, true) => put_uvarint(b, 0),
                (None, false) => b.put_i32(-1),
                (Some(list), _) => {
                    put_array_len(b, flexible, list.len());
                    for (producer_id, first_offset) in list {
                        b.put_i64(*producer_id);
                        b.put_i64(*first_offset);
                        if flexible {
                            put_uvarint(b, 0);
                        }
                    }
                }
            }
            if version >= 11 {
                b.put_i32(-1); // preferred_read_replica
            }
            let len = p.records.as_ref().map_or(0, FileRegion::len);
            if flexible {
                put_uvarint(b, len as u32 + 1);
            } else {
                b.put_i32(len as i32);
            }
            if let Some(r) = &p.records {
                f.file(r.clone());
            }
            if flexible {
                let b = f.buf();
                match p.diverging {
                    // One tagged field: tag 0, DivergingEpoch (epoch,
                    // end offset, no tagged fields of its own).
                    Some((epoch, end_offset)) => {
                        put_uvarint(b, 1);
                        put_uvarint(b, 0);
                        put_uvarint(b, 13);
                        b.put_i32(epoch);
                        b.put_i64(end_offset);
                        put_uvarint(b, 0);
                    }
                    None => put_uvarint(b, 0),
                }
            }
        }
        if flexible {
            put_uvarint(f.buf(), 0);
        }
    }
    if flexible {
        put_uvarint(f.buf(), 0);
    }
    let first_error = std::iter::once(answer.error_code)
        .chain(
            answer
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        )
        .find(|&c| c != 0)
        .unwrap_or(0);
    f.finish().with_error_code(first_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{
        ApiKey, BrokerId, FetchResponse, ProducerId, ResponseHeader, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    /// A region of a real file holding `content`.
    fn region(dir: &std::path::Path, content: &[u8]) -> FileRegion {
        use model::{TopicId, TopicPartition};
        let tp = TopicPartition::new(
            model::TopicName::new(&format!("r{}", rand_suffix())).unwrap(),
            model::PartitionId(0),
        );
        let mgr = storage::LogManager::open(&dir.join(tp.to_string())).unwrap();
        let log = mgr
            .open_log(&tp, TopicId::random(), storage::LogConfig::default())
            .unwrap();
        let batch = one_record_batch(content);
        log.append(&batch, model::LeaderEpoch(0), model::Timestamp(1))
            .unwrap();
        let r = log
            .read_region(model::Offset(0), usize::MAX, true)
            .unwrap()
            .region
            .unwrap();
        drop(mgr);
        r
    }

    fn one_record_batch(value: &[u8]) -> BytesMut {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 1,
            key: None,
            value: Some(Bytes::copy_from_slice(value)),
            headers: Default::default(),
        };
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &[record],
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf
    }

    fn rand_suffix() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::Relaxed)
    }

    fn reference(answer: &FetchAnswer, correlation: i32, version: i16) -> Bytes {
        let resp = FetchResponse::default()
            .with_error_code(if version >= 7 { answer.error_code } else { 0 })
            .with_session_id(if version >= 7 { answer.session_id } else { 0 })
            .with_responses(
                answer
                    .topics
                    .iter()
                    .map(|t| {
                        FetchableTopicResponse::default()
                            .with_topic(TopicName(StrBytes::from_string(if version <= 12 {
                                t.name.clone()
                            } else {
                                String::new()
                            })))
                            .with_topic_id(if version >= 13 {
                                t.id
                            } else {
                                uuid::Uuid::nil()
                            })
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        PartitionData::default()
                                            .with_partition_index(p.index)
                                            .with_error_code(p.error_code)
                                            .with_high_watermark(p.high_watermark)
                                            .with_last_stable_offset(p.last_stable_offset)
                                            .with_log_start_offset(if version >= 5 {
                                                p.log_start_offset
                                            } else {
                                                -1
                                            })
                                            .with_aborted_transactions(p.aborted.as_ref().map(
                                                |l| {
                                                    l.iter()
                                                        .map(|(pid, first)| {
                                                            AbortedTransaction::default()
                                                                .with_producer_id(ProducerId(*pid))
                                                                .with_first_offset(*first)
                                                        })
                                                        .collect()
                                                },
                                            ))
                                            .with_preferred_read_replica(BrokerId(-1))
                                            .with_records(Some(match &p.records {
                                                Some(r) => r.read_all().unwrap(),
                                                None => Bytes::new(),
                                            }))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(correlation)
            .encode(&mut buf, ApiKey::Fetch.response_header_version(version))
            .unwrap();
        resp.encode(&mut buf, version).unwrap();
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        buf.freeze()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Byte for byte what kafka-protocol encodes, for every version.
        #[test]
        fn matches_kafka_protocol(
            topics in proptest::collection::vec(
                (
                    "[a-z]{1,12}",
                    proptest::collection::vec(
                        (0i32..100, 0i16..3, -1i64..1000, any::<bool>(), proptest::option::of(1usize..300)),
                        0..4,
                    ),
                ),
                0..3,
            ),
            correlation in any::<i32>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let answer = FetchAnswer {
                throttle_time_ms: 0,
                error_code: 0,
                session_id: 0,
                topics: topics
                    .iter()
                    .map(|(name, parts)| TopicAnswer {
                        name: name.clone(),
                        id: uuid::Uuid::new_v4(),
                        partitions: parts
                            .iter()
                            .map(|(index, err, hw, aborted, records)| PartitionAnswer {
                                index: *index,
                                error_code: *err,
                                high_watermark: *hw,
                                last_stable_offset: *hw,
                                log_start_offset: 0,
                                aborted: aborted.then(|| vec![(*index as i64, *hw), (7, 0)]),
                                records: records.map(|n| region(dir.path(), &vec![7u8; n])),
                                diverging: None,
                            })
                            .collect(),
                    })
                    .collect(),
            };
            for version in 4..=16 {
                let ours = encode(&answer, correlation, version).to_bytes().unwrap();
                prop_assert_eq!(&ours[..], &reference(&answer, correlation, version)[..], "v{}", version);
            }
        }
    }
}
