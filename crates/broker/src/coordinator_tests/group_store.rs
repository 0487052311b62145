//! The group log over a real broker's `__consumer_offsets` partition.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as KCompression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use model::PartitionId;

use crate::config::BrokerConfig;
use crate::group::store::{GroupLog, RecordKey, OFFSETS_TOPIC};
use crate::now_ms;

fn key(group: &str) -> RecordKey {
    RecordKey::Offset {
        group: group.into(),
        topic: "t".into(),
        partition: 0,
    }
}

/// A batch exactly as `GroupLog::append` wrote it before it used
/// `storage`'s builder: kafka-protocol's encoder.
fn old_format(records: &[(RecordKey, Option<Vec<u8>>)], compression: KCompression) -> BytesMut {
    let encoded: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: 1_700_000_000_000,
            key: Some(Bytes::from(serde_json::to_vec(k).unwrap())),
            value: v.as_ref().map(|v| Bytes::copy_from_slice(v)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &encoded,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf
}

/// A standalone node in `dir` and its `__consumer_offsets` partition.
fn offsets_partition(
    dir: &std::path::Path,
) -> (crate::testing::TestNode, std::sync::Arc<crate::Partition>) {
    let broker =
        crate::testing::TestNode::start(BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap()))
            .unwrap();
    let partition = broker
        .topic(OFFSETS_TOPIC)
        .unwrap()
        .partition(PartitionId(0))
        .cloned()
        .unwrap();
    (broker, partition)
}

#[test]
fn records_written_before_the_builder_still_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, partition) = offsets_partition(dir.path());
    let log = GroupLog::new(partition.clone());
    let before = log.replay().unwrap().len();

    let old = vec![
        (key("a"), Some(b"{\"offset\":1}".to_vec())),
        (key("b"), None),
        (RecordKey::Group { group: "g".into() }, Some(vec![1, 2, 3])),
    ];
    for compression in [KCompression::None, KCompression::Gzip, KCompression::Zstd] {
        let buf = old_format(&old, compression);
        partition.append(&buf, now_ms()).unwrap();
    }
    let new = vec![(key("c"), Some(b"new".to_vec()))];
    log.append(&new).unwrap();

    let replayed = log.replay().unwrap();
    let got: Vec<(RecordKey, Option<Vec<u8>>)> = replayed[before..]
        .iter()
        .map(|r| (r.key.clone(), r.value.as_ref().map(|v| v.to_vec())))
        .collect();
    let mut expected = Vec::new();
    for _ in 0..3 {
        expected.extend(old.iter().cloned());
    }
    expected.extend(new);
    assert_eq!(got, expected);
    broker.shutdown().unwrap();
}

/// A new leader of a replicated group log learns the high watermark one
/// fetch late: replay reads to the log end, so a commit its predecessor
/// acknowledged (committed there, above the high watermark here) is
/// loaded.
#[test]
fn replay_reads_past_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, partition) = offsets_partition(dir.path());
    let log = GroupLog::new(partition.clone());
    let start = partition.log().log_end_offset();
    log.append(&[(key("a"), Some(b"{\"offset\":1}".to_vec()))])
        .unwrap();
    log.append(&[(key("b"), Some(b"{\"offset\":2}".to_vec()))])
        .unwrap();
    // The high watermark as a follower had it: below the second record.
    partition
        .log()
        .set_high_watermark(Some(model::Offset(start.0 + 1)))
        .unwrap();
    let replayed = log.replay().unwrap();
    let keys: Vec<&RecordKey> = replayed.iter().map(|r| &r.key).collect();
    assert!(
        keys.contains(&&key("a")) && keys.contains(&&key("b")),
        "{keys:?}"
    );
}
