//! Poison batches: CRC-valid batches whose records are garbage, lie about
//! their count or offsets, lack keys on a compacted topic, or decompress to
//! a gigabyte, sent raw with Produce v9. Each is refused with INVALID_RECORD
//! (naming the record at fault where there is one) and nothing is stored;
//! the broker's memory stays bounded; librdkafka and kafka-python producers
//! and consumers keep working on the same partition, which reads from
//! offset 0 to its end.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::{assign_config, client_config, BrokerProcess, RawConn};
use futures::StreamExt;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    ApiKey, ListOffsetsRequest, ProduceRequest, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

const INVALID_RECORD: i16 = 87;
const GZIP: i16 = 1;
const ZSTD: i16 = 4;
/// Peak resident memory the broker may reach in these tests.
const MAX_RSS: u64 = 300 << 20;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn varint(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push(raw as u8 | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// A record: offset delta, timestamp delta 0, key, value, no headers.
fn record(offset_delta: i64, key: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    varint(&mut body, 0);
    varint(&mut body, offset_delta);
    match key {
        Some(k) => {
            varint(&mut body, k.len() as i64);
            body.extend_from_slice(k);
        }
        None => varint(&mut body, -1),
    }
    varint(&mut body, value.len() as i64);
    body.extend_from_slice(value);
    varint(&mut body, 0);
    let mut out = Vec::new();
    varint(&mut out, body.len() as i64);
    out.extend_from_slice(&body);
    out
}

/// A v2 batch of `count` records whose records section is `records` as
/// given (compressed or not, per `attributes`), with a valid CRC.
fn batch(
    attributes: i16,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    records: &[u8],
) -> Bytes {
    let mut b = Vec::with_capacity(61 + records.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&(count.max(1) - 1).to_be_bytes());
    b.extend_from_slice(&base_timestamp.to_be_bytes());
    b.extend_from_slice(&max_timestamp.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(records);
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// `prefix`, `zeros` zero bytes and `suffix` through zstd's streaming
/// encoder, a megabyte at a time: the input is never held.
fn zstd_stream(prefix: &[u8], zeros: u64, suffix: &[u8]) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    enc.write_all(prefix).unwrap();
    let chunk = vec![0u8; 1 << 20];
    let mut left = zeros;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        enc.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    enc.write_all(suffix).unwrap();
    enc.finish().unwrap()
}

/// Pseudo-random bytes (fixed seed: the cases are reproducible).
fn junk(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

async fn create(bootstrap: &str, topic: NewTopic<'_>) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let r = admin
        .create_topics(&[topic], &AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

/// Sends `records` to partition 0 of `topic` with Produce v9.
async fn produce_raw(conn: &mut RawConn, topic: &str, records: Bytes) -> PartitionProduceResponse {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let ResponseKind::Produce(resp) = conn.call(ApiKey::Produce, 9, req).await else {
        panic!("not a produce response")
    };
    resp.responses[0].partition_responses[0].clone()
}

/// Asserts `p` is an INVALID_RECORD refusal naming record `index` (or no
/// record, for faults of the batch as a whole).
fn assert_invalid(what: &str, p: &PartitionProduceResponse, index: Option<i32>) {
    assert_eq!(
        p.error_code, INVALID_RECORD,
        "{what}: {:?}",
        p.error_message
    );
    assert_eq!(p.base_offset, -1, "{what}");
    assert!(
        p.error_message.is_some(),
        "{what}: a partition error message"
    );
    match index {
        Some(i) => {
            assert_eq!(p.record_errors.len(), 1, "{what}: {:?}", p.record_errors);
            assert_eq!(p.record_errors[0].batch_index, i, "{what}");
            assert!(
                p.record_errors[0].batch_index_error_message.is_some(),
                "{what}"
            );
        }
        None => assert!(p.record_errors.is_empty(), "{what}: {:?}", p.record_errors),
    }
}

/// A librdkafka producer and a consumer of the same partition that must
/// keep working around every poison batch, losing nothing.
struct Healthy {
    topic: String,
    producer: FutureProducer,
    consumer: StreamConsumer,
    sent: Vec<(i64, String)>,
}

impl Healthy {
    fn new(bootstrap: &str, topic: &str) -> Healthy {
        let consumer: StreamConsumer = assign_config(bootstrap).create().unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        Healthy {
            topic: topic.to_string(),
            producer: client_config(bootstrap).create().unwrap(),
            consumer,
            sent: Vec::new(),
        }
    }

    /// Produces one keyed message after `what` and consumes it: the next
    /// offset, so nothing was appended in between.
    async fn round(&mut self, what: &str) {
        let payload = format!("after {what}");
        let offset = self
            .producer
            .send(
                FutureRecord::to(&self.topic)
                    .partition(0)
                    .key("k")
                    .payload(&payload),
                Duration::from_secs(15),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap_or_else(|e| panic!("producer failed after {what}: {e}"))
            .offset;
        assert_eq!(
            offset,
            self.sent.len() as i64,
            "{what}: nothing appended or lost"
        );
        self.sent.push((offset, payload.clone()));
        let m = tokio::time::timeout(Duration::from_secs(20), self.consumer.stream().next())
            .await
            .unwrap_or_else(|_| panic!("consumer stuck after {what}"))
            .expect("stream ended")
            .unwrap_or_else(|e| panic!("consumer error after {what}: {e}"));
        assert_eq!(
            (m.offset(), m.payload().map(|p| p.to_vec())),
            (offset, Some(payload.into_bytes())),
            "{what}"
        );
    }

    /// A fresh librdkafka consumer and kafka-python both read the partition
    /// from offset 0 to its end.
    async fn read_from_zero(&self, bootstrap: &str) {
        let c: BaseConsumer = assign_config(bootstrap).create().unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, Offset::Beginning)
            .unwrap();
        c.assign(&tpl).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut got = Vec::new();
        while got.len() < self.sent.len() {
            assert!(
                std::time::Instant::now() < deadline,
                "librdkafka stuck at {got:?}"
            );
            if let Some(m) = common::polled(c.poll(Duration::from_millis(200))) {
                got.push((
                    m.offset(),
                    String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
                ));
            }
        }
        assert_eq!(got, self.sent);

        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/python/kafka_python_read_all.py");
        let out = Command::new("python3")
            .arg(script)
            .arg(bootstrap)
            .arg(&self.topic)
            .arg(self.sent.len().to_string())
            .output()
            .expect("python3 with kafka-python (tests/python/requirements.txt)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("OK"),
            "kafka-python could not read {} from 0: {stdout}\n{}",
            self.topic,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_lying_and_misordered_records_are_refused() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create(
        &bootstrap,
        NewTopic::new("poison", 1, TopicReplication::Fixed(1)),
    )
    .await;
    let mut healthy = Healthy::new(&bootstrap, "poison");
    healthy.round("start").await;
    let mut conn = RawConn::connect(broker.addr).await;
    let ts = now_ms();

    let mut gzip_garbage = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff];
    gzip_garbage.extend_from_slice(&junk(2, 500));
    let two = |d0: i64, d1: i64| {
        let mut r = record(d0, Some(b"k"), b"v0");
        r.extend_from_slice(&record(d1, Some(b"k"), b"v1"));
        r
    };
    let three = [0, 1, 1]
        .iter()
        .flat_map(|d| record(*d, Some(b"k"), b"v"))
        .collect::<Vec<u8>>();
    let cases: Vec<(&str, Bytes, Option<Option<i32>>)> = vec![
        // Where random bytes fail is up to the bytes; the batch is refused.
        (
            "a CRC-valid batch of random record bytes",
            batch(0, 3, ts, ts, &junk(1, 300)),
            None,
        ),
        (
            "gzip garbage",
            batch(GZIP, 1, ts, ts, &gzip_garbage),
            Some(Some(0)),
        ),
        (
            "recordCount 2^31-1 holding one record",
            batch(0, i32::MAX, ts, ts, &record(0, Some(b"k"), b"v")),
            Some(None),
        ),
        (
            "a negative offset delta",
            batch(0, 2, ts, ts, &two(0, -1)),
            Some(Some(1)),
        ),
        (
            "a repeated offset delta",
            batch(0, 3, ts, ts, &three),
            Some(Some(2)),
        ),
    ];
    for (what, poison, index) in cases {
        let p = produce_raw(&mut conn, "poison", poison).await;
        match index {
            Some(index) => assert_invalid(what, &p, index),
            None => assert_eq!(
                p.error_code, INVALID_RECORD,
                "{what}: {:?}",
                p.error_message
            ),
        }
        healthy.round(what).await;
    }
    healthy.read_from_zero(&bootstrap).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn keyless_records_are_refused_on_compacted_topics() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create(
        &bootstrap,
        NewTopic::new("compacted", 1, TopicReplication::Fixed(1)).set("cleanup.policy", "compact"),
    )
    .await;
    let mut healthy = Healthy::new(&bootstrap, "compacted");
    healthy.round("start").await;

    let mut conn = RawConn::connect(broker.addr).await;
    let ts = now_ms();
    let mut records = record(0, Some(b"k"), b"keyed");
    records.extend_from_slice(&record(1, None, b"keyless"));
    let p = produce_raw(&mut conn, "compacted", batch(0, 2, ts, ts, &records)).await;
    assert_invalid("a keyless record", &p, Some(1));
    let msg = p.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .unwrap();
    assert_eq!(
        msg.as_str(),
        "Compacted topic cannot accept message without key in topic partition compacted-0."
    );
    healthy.round("a keyless raw record").await;

    // librdkafka gets the same answer for a keyless message.
    let err = healthy
        .producer
        .send(
            FutureRecord::<(), _>::to("compacted")
                .partition(0)
                .payload("no key"),
            Duration::from_secs(15),
        )
        .await
        .expect_err("keyless message refused");
    assert!(
        matches!(
            err.0,
            KafkaError::MessageProduction(RDKafkaErrorCode::InvalidRecord)
        ),
        "{err:?}"
    );
    healthy.round("a keyless librdkafka message").await;
    healthy.read_from_zero(&bootstrap).await;
}

/// librdkafka's own check (test 0011, KIP-467): one batch of 100 messages
/// to a compacted topic, every tenth without a key. The broker names
/// exactly the 10 keyless records in `record_errors`, so librdkafka fails
/// those with INVALID_RECORD and the 90 others of the refused batch with
/// _INVALID_DIFFERENT_RECORD; nothing of the batch is stored.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_keyless_records_of_a_batch_are_named_invalid() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create(
        &bootstrap,
        NewTopic::new("compact-batch", 1, TopicReplication::Fixed(1))
            .set("cleanup.policy", "compact"),
    )
    .await;
    // One batch: every message is queued well within the linger time.
    let producer: FutureProducer = client_config(&bootstrap)
        .set("linger.ms", "2000")
        .set("batch.num.messages", "1000")
        .create()
        .unwrap();
    let keyless = |i: usize| i % 10 == 3;
    let deliveries: Vec<_> = (0..100)
        .map(|i| {
            let payload = format!("m{i}");
            let key = format!("k{i}");
            let record = FutureRecord::to("compact-batch")
                .partition(0)
                .payload(&payload);
            let record = if keyless(i) { record } else { record.key(&key) };
            producer
                .send_result(record)
                .map_err(|(e, _)| e)
                .expect("queued")
        })
        .collect();
    let mut codes = Vec::new();
    for d in deliveries {
        let outcome = tokio::time::timeout(Duration::from_secs(30), d)
            .await
            .expect("a delivery report")
            .expect("not cancelled");
        codes.push(match outcome {
            Err((KafkaError::MessageProduction(code), _)) => code,
            other => panic!("expected a refusal, got {other:?}"),
        });
    }
    for (i, code) in codes.iter().enumerate() {
        let expected = if keyless(i) {
            RDKafkaErrorCode::InvalidRecord
        } else {
            RDKafkaErrorCode::InvalidDifferentRecord
        };
        assert_eq!(*code, expected, "message {i}");
    }
    let invalid = codes
        .iter()
        .filter(|c| **c == RDKafkaErrorCode::InvalidRecord)
        .count();
    assert_eq!((invalid, codes.len() - invalid), (10, 90));
    // Nothing was stored: the next keyed message is offset 0.
    let delivered = producer
        .send(
            FutureRecord::to("compact-batch")
                .partition(0)
                .key("k")
                .payload("after"),
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    assert_eq!(delivered.offset, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zstd_bomb_is_refused_within_bounded_memory() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    create(
        &bootstrap,
        NewTopic::new("bomb", 1, TopicReplication::Fixed(1)),
    )
    .await;
    let mut healthy = Healthy::new(&bootstrap, "bomb");
    healthy.round("start").await;
    let mut conn = RawConn::connect(broker.addr).await;
    let ts = now_ms();
    const GIB: u64 = 1 << 30;

    // 1 GiB of zeros as the records.
    let zeros = zstd_stream(&[], GIB, &[]);
    assert!(zeros.len() < 100_000, "a small bomb: {} bytes", zeros.len());
    let p = produce_raw(&mut conn, "bomb", batch(ZSTD, 1, ts, ts, &zeros)).await;
    assert_invalid("1 GiB of zeros", &p, Some(0));
    healthy.round("1 GiB of zeros").await;

    // One well-formed record whose value is 1 GiB of zeros: only the
    // decompression limit stops it.
    let mut head = Vec::new();
    let body_len = 1 + 1 + 1 + 1 + 5 + GIB as i64 + 1;
    varint(&mut head, body_len);
    head.push(0);
    varint(&mut head, 0);
    varint(&mut head, 0);
    varint(&mut head, -1);
    varint(&mut head, GIB as i64);
    assert_eq!(
        head.len(),
        5 + 4 + 5,
        "length, one-byte fields, value length"
    );
    let bomb = zstd_stream(&head, GIB, &[0]);
    assert!(bomb.len() < 100_000, "a small bomb: {} bytes", bomb.len());
    let p = produce_raw(&mut conn, "bomb", batch(ZSTD, 1, ts, ts, &bomb)).await;
    assert_invalid("a record of 1 GiB of zeros", &p, Some(0));
    let msg = p.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .unwrap();
    assert!(msg.contains("decompress to more than"), "{msg}");
    healthy.round("a record of 1 GiB of zeros").await;

    let rss = broker.peak_rss_bytes();
    eprintln!("broker peak RSS: {} MiB", rss >> 20);
    assert!(rss < MAX_RSS, "broker peak RSS {} MiB", rss >> 20);
    healthy.read_from_zero(&bootstrap).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn list_offsets_over_a_large_compressed_batch_stays_bounded() {
    let broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    // 16 MiB batches may decompress to 512 MiB: the 400 MiB batch is valid.
    create(
        &bootstrap,
        NewTopic::new("large", 1, TopicReplication::Fixed(1)).set("max.message.bytes", "16777216"),
    )
    .await;
    let base = now_ms();
    const RECORDS: i64 = 400;
    const VALUE: i64 = 1 << 20;
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    let zeros = vec![0u8; VALUE as usize];
    for i in 0..RECORDS {
        let mut fields = vec![0u8];
        varint(&mut fields, i); // timestamp delta
        varint(&mut fields, i); // offset delta
        varint(&mut fields, -1); // no key
        varint(&mut fields, VALUE);
        let mut head = Vec::new();
        varint(&mut head, fields.len() as i64 + VALUE + 1);
        head.extend_from_slice(&fields);
        enc.write_all(&head).unwrap();
        enc.write_all(&zeros).unwrap();
        enc.write_all(&[0]).unwrap(); // no headers
    }
    let compressed = enc.finish().unwrap();
    let mut conn = RawConn::connect(broker.addr).await;
    let p = produce_raw(
        &mut conn,
        "large",
        batch(ZSTD, RECORDS as i32, base, base + RECORDS - 1, &compressed),
    )
    .await;
    assert_eq!(
        (p.error_code, p.base_offset),
        (0, 0),
        "{:?}",
        p.error_message
    );

    let lookup = |ts: i64| {
        ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("large")))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(ts)])])
    };
    for (ts, offset, timestamp) in [
        (base + 300, 300, base + 300),
        (-3, RECORDS - 1, base + RECORDS - 1),
    ] {
        let ResponseKind::ListOffsets(r) = conn.call(ApiKey::ListOffsets, 8, lookup(ts)).await
        else {
            panic!()
        };
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.offset, p.timestamp),
            (0, offset, timestamp),
            "lookup {ts}"
        );
    }
    let rss = broker.peak_rss_bytes();
    eprintln!("broker peak RSS: {} MiB", rss >> 20);
    assert!(rss < MAX_RSS, "broker peak RSS {} MiB", rss >> 20);
}
