//! Fetch and ListOffsets details with raw requests: long-polling that
//! honours max_wait/min_bytes and wakes on append, byte limits (KIP-74),
//! sessionless fetch sessions, max-timestamp lookups, and the idempotent
//! producer's duplicate and sequence checks.

mod common;

use std::time::{Duration, Instant};

use common::{decode_values, idempotent_batch, record_batch, BrokerProcess, RawConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const OUT_OF_ORDER_SEQUENCE: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;

fn name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

fn produce(topic: &str, partition: i32, records: bytes::Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

fn fetch(
    topic: &str,
    offset: i64,
    max_wait: i32,
    min_bytes: i32,
    partition_max: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait)
        .with_min_bytes(min_bytes)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(partition_max)])])
}

async fn produce_ok(conn: &mut RawConn, topic: &str, records: bytes::Bytes) -> (i16, i64) {
    let ResponseKind::Produce(r) = conn
        .call(ApiKey::Produce, 9, produce(topic, 0, records))
        .await
    else {
        panic!()
    };
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn setup() -> (BrokerProcess, RawConn) {
    let broker = BrokerProcess::start(&[]);
    let mut conn = RawConn::connect(broker.addr).await;
    // A Metadata request that creates the topic (auto-creation is on).
    let md = MetadataRequest::default()
        .with_allow_auto_topic_creation(true)
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(name("lp")))]));
    let ResponseKind::Metadata(r) = conn.call(ApiKey::Metadata, 12, md).await else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 0);
    (broker, conn)
}

#[tokio::test(flavor = "multi_thread")]
async fn long_poll_waits_for_data_and_wakes_on_append() {
    let (broker, mut conn) = setup().await;

    // Nothing to read: the broker holds the request for max_wait.
    let start = Instant::now();
    let ResponseKind::Fetch(r) = conn
        .call(ApiKey::Fetch, 12, fetch("lp", 0, 400, 1, 1 << 20))
        .await
    else {
        panic!()
    };
    assert!(
        start.elapsed() >= Duration::from_millis(380),
        "held for max_wait_ms"
    );
    assert_eq!(
        r.responses[0].partitions[0]
            .records
            .as_ref()
            .map_or(0, |b| b.len()),
        0
    );

    // A fetch waiting up to 20 s returns as soon as data is appended.
    let mut waiter = RawConn::connect(broker.addr).await;
    let pending = tokio::spawn(async move {
        let start = Instant::now();
        let ResponseKind::Fetch(r) = waiter
            .call(ApiKey::Fetch, 12, fetch("lp", 0, 20_000, 1, 1 << 20))
            .await
        else {
            panic!()
        };
        (start.elapsed(), r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        produce_ok(&mut conn, "lp", record_batch(&[b"wake-up"])).await,
        (0, 0)
    );
    let (elapsed, r) = pending.await.unwrap();
    assert!(
        elapsed < Duration::from_secs(10),
        "woken by the append, not the timeout ({elapsed:?})"
    );
    let values = decode_values(r.responses[0].partitions[0].records.as_ref().unwrap());
    assert_eq!(values, vec![(0, b"wake-up".to_vec())]);

    // min_bytes above what is there: wait out max_wait, then return what exists.
    let start = Instant::now();
    let ResponseKind::Fetch(r) = conn
        .call(ApiKey::Fetch, 12, fetch("lp", 0, 500, 1 << 20, 1 << 20))
        .await
    else {
        panic!()
    };
    assert!(start.elapsed() >= Duration::from_millis(480));
    assert_eq!(
        decode_values(r.responses[0].partitions[0].records.as_ref().unwrap()).len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn byte_limits_and_sessionless_fetch() {
    let (_broker, mut conn) = setup().await;
    let big = vec![b'x'; 4000];
    for _ in 0..5 {
        assert_eq!(
            produce_ok(&mut conn, "lp", record_batch(&[&big])).await.0,
            0
        );
    }
    // A partition limit smaller than one batch still returns that batch (KIP-74).
    let ResponseKind::Fetch(r) = conn
        .call(ApiKey::Fetch, 12, fetch("lp", 0, 0, 1, 100))
        .await
    else {
        panic!()
    };
    assert_eq!(
        decode_values(r.responses[0].partitions[0].records.as_ref().unwrap()).len(),
        1
    );
    // A limit of ~2.5 batches returns whole batches only: two.
    let ResponseKind::Fetch(r) = conn
        .call(ApiKey::Fetch, 12, fetch("lp", 0, 0, 1, 10_000))
        .await
    else {
        panic!()
    };
    assert_eq!(
        decode_values(r.responses[0].partitions[0].records.as_ref().unwrap()).len(),
        2
    );
    // The response-wide max_bytes caps too.
    let ResponseKind::Fetch(r) = conn
        .call(
            ApiKey::Fetch,
            12,
            fetch("lp", 0, 0, 1, 1 << 20).with_max_bytes(9000),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(
        decode_values(r.responses[0].partitions[0].records.as_ref().unwrap()).len(),
        2
    );

    // Fetch sessions: a new-session request is answered sessionless (id 0);
    // an incremental fetch on an unknown session is refused.
    let req = fetch("lp", 0, 0, 1, 1 << 20)
        .with_session_id(0)
        .with_session_epoch(0);
    let ResponseKind::Fetch(r) = conn.call(ApiKey::Fetch, 12, req).await else {
        panic!()
    };
    assert_eq!((r.error_code, r.session_id), (0, 0));
    let req = fetch("lp", 0, 0, 1, 1 << 20)
        .with_session_id(12345)
        .with_session_epoch(1);
    let ResponseKind::Fetch(r) = conn.call(ApiKey::Fetch, 12, req).await else {
        panic!()
    };
    assert_eq!(r.error_code, FETCH_SESSION_ID_NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread")]
async fn list_offsets_special_timestamps() {
    let (_broker, mut conn) = setup().await;
    for v in [&b"a"[..], b"b", b"c"] {
        assert_eq!(produce_ok(&mut conn, "lp", record_batch(&[v])).await.0, 0);
    }
    let lookup = |ts: i64| {
        ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("lp"))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(ts)])])
    };
    let mut got = Vec::new();
    for ts in [-2, -1, -3, -4, -5] {
        let ResponseKind::ListOffsets(r) = conn.call(ApiKey::ListOffsets, 9, lookup(ts)).await
        else {
            panic!()
        };
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        got.push(p.offset);
    }
    // earliest, latest, max-timestamp (all records share a millisecond or
    // increase, so the last record holds the max), earliest-local, latest-tiered.
    assert_eq!(got[0], 0);
    assert_eq!(got[1], 3);
    assert!((0..3).contains(&got[2]));
    assert_eq!((got[3], got[4]), (0, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotent_producer_duplicates_and_sequence_gaps() {
    let (_broker, mut conn) = setup().await;
    let ResponseKind::InitProducerId(r) = conn
        .call(
            ApiKey::InitProducerId,
            4,
            InitProducerIdRequest::default().with_transactional_id(None),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert!(pid >= 0 && epoch == 0);
    let ResponseKind::InitProducerId(r2) = conn
        .call(
            ApiKey::InitProducerId,
            4,
            InitProducerIdRequest::default().with_transactional_id(None),
        )
        .await
    else {
        panic!()
    };
    assert_ne!(r2.producer_id.0, pid, "every producer gets its own id");

    assert_eq!(
        produce_ok(
            &mut conn,
            "lp",
            idempotent_batch(&[b"a", b"b"], pid, epoch, 0)
        )
        .await,
        (0, 0)
    );
    assert_eq!(
        produce_ok(&mut conn, "lp", idempotent_batch(&[b"c"], pid, epoch, 2)).await,
        (0, 2)
    );
    // A retry of an acknowledged batch: same offsets, nothing appended.
    assert_eq!(
        produce_ok(
            &mut conn,
            "lp",
            idempotent_batch(&[b"a", b"b"], pid, epoch, 0)
        )
        .await,
        (0, 0)
    );
    // A gap in the sequence.
    assert_eq!(
        produce_ok(&mut conn, "lp", idempotent_batch(&[b"z"], pid, epoch, 9))
            .await
            .0,
        OUT_OF_ORDER_SEQUENCE
    );
    // An older epoch is fenced.
    assert_eq!(
        produce_ok(
            &mut conn,
            "lp",
            idempotent_batch(&[b"z"], pid, epoch - 1, 3)
        )
        .await
        .0,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        produce_ok(&mut conn, "lp", idempotent_batch(&[b"d"], pid, epoch, 3)).await,
        (0, 3)
    );

    let ResponseKind::Fetch(r) = conn
        .call(ApiKey::Fetch, 12, fetch("lp", 0, 0, 1, 1 << 20))
        .await
    else {
        panic!()
    };
    let values: Vec<Vec<u8>> =
        decode_values(r.responses[0].partitions[0].records.as_ref().unwrap())
            .into_iter()
            .map(|(_, v)| v)
            .collect();
    assert_eq!(
        values,
        vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()],
        "no duplicates"
    );
}
