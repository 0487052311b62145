//! Batching and encoding, without a broker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::accumulator::{take_sendable, Ack, SharedAccumulator};
use super::builder::ProducerConfig;
use super::partitioner::partition_for_key;
use super::sender::encode;
use super::{Acks, Compression, ProducerBuilder, ProducerRecord};
use crate::error::Error;

fn config(batch_size: usize, idempotence: bool) -> Arc<ProducerConfig> {
    let mut c = ProducerBuilder::default()
        .batch_size(batch_size)
        .idempotence(idempotence)
        .config()
        .unwrap();
    c.linger = Duration::from_millis(50);
    Arc::new(c)
}

fn acc_with_topic(batch_size: usize, partitions: i32) -> SharedAccumulator {
    let acc = SharedAccumulator::new(config(batch_size, true));
    // A first send creates the topic's queue and waits for metadata.
    let f = acc.append(ProducerRecord::new("t").partition(0).value("first"));
    acc.state
        .lock()
        .unwrap()
        .resolve_topic("t", partitions, batch_size);
    drop(f);
    acc
}

#[test]
fn records_with_a_key_go_where_java_puts_them() {
    let acc = acc_with_topic(1 << 20, 6);
    for i in 0..50 {
        let key = format!("key-{i}");
        drop(acc.append(ProducerRecord::new("t").key(key.clone()).value("v")));
        let want = partition_for_key(key.as_bytes(), 6) as usize;
        let st = acc.state.lock().unwrap();
        let b = st.topics["t"].parts[want].open.as_ref().unwrap();
        assert_eq!(
            b.records.last().unwrap().key.as_deref(),
            Some(key.as_bytes())
        );
    }
}

#[test]
fn batches_split_by_size_and_keep_call_order() {
    let acc = acc_with_topic(1000, 1);
    for i in 0..100 {
        drop(
            acc.append(
                ProducerRecord::new("t")
                    .partition(0)
                    .value(vec![i as u8; 90]),
            ),
        );
    }
    let mut st = acc.state.lock().unwrap();
    let tq = st.topics.get_mut("t").unwrap();
    let pq = &tq.parts[0];
    // ~111 bytes per record: 9 fit under 1000 bytes.
    assert!(pq.ready.len() >= 10, "{} sealed", pq.ready.len());
    assert!(pq.ready.iter().all(|b| b.bytes <= 1000 + 111));
    let mut deadline = None;
    let now = Instant::now();
    let mut values = Vec::new();
    while let Some(b) = take_sendable(tq, 0, now, Duration::from_secs(60), true, &mut deadline) {
        values.extend(b.records.iter().map(|r| r.value.clone().unwrap()[0]));
    }
    // "first" (b'f') came before the 100 numbered records.
    assert_eq!(values[0], b'f');
    assert_eq!(&values[1..], (0..100).map(|i| i as u8).collect::<Vec<_>>());
}

#[test]
fn linger_holds_an_open_batch_until_due() {
    let acc = acc_with_topic(1 << 20, 1);
    let mut st = acc.state.lock().unwrap();
    let tq = st.topics.get_mut("t").unwrap();
    let mut deadline = None;
    let now = Instant::now();
    assert!(take_sendable(tq, 0, now, Duration::from_secs(60), false, &mut deadline).is_none());
    assert!(deadline.unwrap() > now + Duration::from_secs(59));
    let later = now + Duration::from_secs(61);
    assert!(take_sendable(tq, 0, later, Duration::from_secs(60), false, &mut deadline).is_some());
}

#[test]
fn keyless_records_stick_to_a_partition_until_its_batch_fills() {
    let acc = acc_with_topic(500, 8);
    let mut partitions = Vec::new();
    for _ in 0..40 {
        drop(acc.append(ProducerRecord::new("t").value(vec![0u8; 80])));
        let st = acc.state.lock().unwrap();
        let tq = &st.topics["t"];
        let p = (0..8)
            .max_by_key(|&p| {
                let pq = &tq.parts[p];
                pq.ready.len() * 1000 + pq.open.as_ref().map_or(0, |b| b.records.len())
            })
            .unwrap();
        partitions.push(p);
    }
    let st = acc.state.lock().unwrap();
    let tq = &st.topics["t"];
    let total: usize = tq
        .parts
        .iter()
        .map(|pq| {
            pq.ready.iter().map(|b| b.len()).sum::<usize>()
                + pq.open.as_ref().map_or(0, |b| b.len())
        })
        .sum();
    assert_eq!(total, 41);
    // Full batches hold several records each: records were not sprayed one
    // per partition.
    for pq in &tq.parts {
        for b in &pq.ready {
            assert!(b.len() >= 4, "a sealed batch of {}", b.len());
        }
    }
    // And more than one partition got used over time.
    let used = tq
        .parts
        .iter()
        .filter(|pq| !pq.ready.is_empty() || pq.open.is_some())
        .count();
    assert!(used >= 2, "{used}");
    drop(partitions);
}

#[tokio::test]
async fn waiting_records_resolve_in_order_with_their_own_offsets() {
    let acc = SharedAccumulator::new(config(1 << 20, true));
    let futs: Vec<_> = (0..3)
        .map(|i| acc.append(ProducerRecord::new("w").partition(0).value(format!("{i}"))))
        .collect();
    let bad = acc.append(ProducerRecord::new("w").partition(9).value("x"));
    {
        let mut st = acc.state.lock().unwrap();
        let failed = st.resolve_topic("w", 2, 1 << 20);
        assert_eq!(failed, 1);
        let tq = st.topics.get_mut("w").unwrap();
        let mut deadline = None;
        let mut b =
            take_sendable(tq, 0, Instant::now(), Duration::ZERO, true, &mut deadline).unwrap();
        assert_eq!(b.len(), 3);
        b.completion.complete(Ok(Ack {
            partition: 0,
            base_offset: 100,
            log_append_time: -1,
        }));
    }
    for (i, f) in futs.into_iter().enumerate() {
        let md = f.await.unwrap();
        assert_eq!((md.partition, md.offset), (0, 100 + i as i64));
    }
    assert!(matches!(bad.await, Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn dropping_a_batch_fails_its_futures() {
    let acc = acc_with_topic(1 << 20, 1);
    let f = acc.append(ProducerRecord::new("t").partition(0).value("v"));
    acc.state.lock().unwrap().topics.clear();
    assert!(matches!(f.await, Err(Error::Closed)));
}

#[test]
fn encoding_makes_one_batch_with_sequences() {
    for (compression, code) in [
        (Compression::None, 0),
        (Compression::Gzip, 1),
        (Compression::Snappy, 2),
        (Compression::Lz4, 3),
        (Compression::Zstd, 4),
    ] {
        let acc = acc_with_topic(1 << 20, 1);
        for i in 0..50 {
            drop(
                acc.append(
                    ProducerRecord::new("t")
                        .partition(0)
                        .key(format!("k{i}"))
                        .value(Bytes::from(vec![i as u8; 100]))
                        .header("h", "x"),
                ),
            );
        }
        let mut st = acc.state.lock().unwrap();
        let tq = st.topics.get_mut("t").unwrap();
        let mut deadline = None;
        let mut b =
            take_sendable(tq, 0, Instant::now(), Duration::ZERO, true, &mut deadline).unwrap();
        let mut cfg = (*config(1 << 20, true)).clone();
        cfg.compression = compression;
        // With a producer id: base sequence 7.
        b.sequence = Some((42, 3, 7));
        let bytes = encode(&mut b, &cfg).unwrap();
        let again = encode(&mut b, &cfg).unwrap();
        assert_eq!(bytes.as_ptr(), again.as_ptr(), "encoded once");
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(info.len(), 1, "{compression:?}: one batch");
        assert_eq!(info[0].record_count, 51);
        assert_eq!(info[0].base_sequence, 7);
        assert_eq!(info[0].producer_id, 42);
        assert_eq!(info[0].producer_epoch, 3);
        assert_eq!(info[0].compression as i32, code);
        let set = RecordBatchDecoder::decode(&mut bytes.clone()).unwrap();
        assert_eq!(set.records.len(), 51);
        assert_eq!(set.records[50].value.as_ref().unwrap()[..], [49u8; 100]);
        assert_eq!(set.records[50].headers.len(), 1);
        // Without a producer id the base sequence is -1 and still one batch.
        b.sequence = None;
        b.encoded = None;
        let bytes = encode(&mut b, &cfg).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(info.len(), 1);
        assert_eq!((info[0].base_sequence, info[0].producer_id), (-1, -1));
    }
}

#[test]
fn builder_rules_for_idempotence() {
    let c = ProducerBuilder::default()
        .acks(Acks::Leader)
        .config()
        .unwrap();
    assert!(!c.idempotence, "the default quietly gives way to acks=1");
    assert!(ProducerBuilder::default()
        .acks(Acks::Leader)
        .idempotence(true)
        .config()
        .is_err());
    assert!(ProducerBuilder::default()
        .max_in_flight(6)
        .idempotence(true)
        .config()
        .is_err());
    let c = ProducerBuilder::default().config().unwrap();
    assert!(c.idempotence && c.acks == Acks::All && c.max_in_flight == 5);
}

#[test]
fn compression_names_parse() {
    for (s, c) in [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("LZ4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        assert_eq!(s.parse::<Compression>().unwrap(), c);
    }
    assert!("brotli".parse::<Compression>().is_err());
}

#[tokio::test]
async fn apis_the_broker_lacks_are_not_supported_errors() {
    use crate::testing::{FakeBroker, FakeSpec};
    let fake = FakeBroker::start(FakeSpec::new(3, 12, 6).topic("t", 2)).await;
    // Default idempotence gives way quietly; Produce itself is missing.
    let p = super::Producer::builder()
        .bootstrap(&fake.addr)
        .build()
        .await
        .unwrap();
    let err = p
        .send(ProducerRecord::new("t").value("v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err}");
    // Explicit idempotence without InitProducerId fails every record.
    let p = super::Producer::builder()
        .bootstrap(&fake.addr)
        .idempotence(true)
        .build()
        .await
        .unwrap();
    let err = p
        .send(ProducerRecord::new("t").value("v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err}");
    let err = p
        .send(ProducerRecord::new("t").value("v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err}");
}

#[tokio::test]
async fn records_for_a_topic_that_never_appears_time_out() {
    use crate::testing::{FakeBroker, FakeSpec};
    let mut spec = FakeSpec::new(3, 12, 6);
    spec.auto_create = false;
    let fake = FakeBroker::start(spec).await;
    let p = super::Producer::builder()
        .bootstrap(&fake.addr)
        .delivery_timeout(Duration::from_millis(300))
        .retry_backoff(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    let start = Instant::now();
    let err = p
        .send(ProducerRecord::new("ghost").value("v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
    p.flush().await.unwrap();
}

/// A partition without a leader (its broker down, in a cluster): the
/// records wait, and fail once the delivery timeout has passed instead of
/// waiting for ever.
#[tokio::test]
async fn records_for_a_partition_without_a_leader_time_out() {
    use crate::testing::{FakeBroker, FakeSpec};
    let mut spec = FakeSpec::new(3, 12, 6).topic("t", 1);
    spec.leaderless = true;
    let fake = FakeBroker::start(spec).await;
    let p = super::Producer::builder()
        .bootstrap(&fake.addr)
        .idempotence(false)
        .delivery_timeout(Duration::from_millis(300))
        .retry_backoff(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    let start = Instant::now();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        p.send(ProducerRecord::new("t").value("v")),
    )
    .await
    .expect("the send ends")
    .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
    p.flush().await.unwrap();
}
