//! Retention by size and by time removes whole old segments and advances
//! the log start offset; DeleteRecords does so on request. Clients below the
//! log start get OFFSET_OUT_OF_RANGE; everything above is intact.

mod common;

use std::time::Duration;

use common::{assign_config, client_config, eventually, BrokerProcess, RawConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

const OFFSET_OUT_OF_RANGE: i16 = 1;

async fn setup(broker: &BrokerProcess, topic: &str, configs: &[(&str, &str)], n: usize) {
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap()).create().unwrap();
    let mut t = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    assert!(admin
        .create_topics(&[t], &AdminOptions::new())
        .await
        .unwrap()[0]
        .is_ok());
    let producer: FutureProducer = client_config(&broker.bootstrap())
        .set("linger.ms", "0")
        .create()
        .unwrap();
    for i in 0..n {
        producer
            .send(
                FutureRecord::to(topic)
                    .key("k")
                    .payload(&format!("{i:>100}")),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

fn watermarks(bootstrap: &str, topic: &str) -> (i64, i64) {
    let c: BaseConsumer = client_config(bootstrap).create().unwrap();
    c.fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap()
}

fn segment_files(broker: &BrokerProcess, topic: &str) -> usize {
    std::fs::read_dir(broker.dir().join(format!("{topic}-0")))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count()
}

async fn raw_fetch_error(broker: &BrokerProcess, topic: &str, offset: i64) -> i16 {
    let mut conn = RawConn::connect(broker.addr).await;
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 16)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 16)])]);
    let ResponseKind::Fetch(resp) = conn.call(ApiKey::Fetch, 12, req).await else {
        panic!()
    };
    resp.responses[0].partitions[0].error_code
}

/// The first message a fresh consumer gets when it starts at the beginning.
fn first_from_beginning(bootstrap: &str, topic: &str) -> (i64, String) {
    let c: BaseConsumer = assign_config(bootstrap).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    for _ in 0..200 {
        if let Some(m) = common::polled(c.poll(Duration::from_millis(100))) {
            return (
                m.offset(),
                String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
            );
        }
    }
    panic!("no message from the beginning");
}

#[tokio::test(flavor = "multi_thread")]
async fn size_retention_deletes_old_segments() {
    let broker = BrokerProcess::start(&["log.retention.check.interval.ms=100"]);
    setup(
        &broker,
        "by-size",
        &[("segment.bytes", "2048"), ("retention.bytes", "6144")],
        300,
    )
    .await;
    let bootstrap = broker.bootstrap();
    // Retention may first run while the records are still arriving: wait
    // for a pass after the last of them, which leaves at most 5 segments.
    let (low, high) = eventually(Duration::from_secs(20), "size retention", || {
        let w = watermarks(&bootstrap, "by-size");
        let files = segment_files(&broker, "by-size");
        async move { (w.0 > 0 && w.1 == 300 && files <= 5).then_some(w) }
    })
    .await;
    assert_eq!(high, 300);
    assert_eq!(
        raw_fetch_error(&broker, "by-size", 0).await,
        OFFSET_OUT_OF_RANGE
    );
    let (first, value) = first_from_beginning(&bootstrap, "by-size");
    assert!(first >= low, "reading starts at the new log start");
    assert_eq!(
        value.trim(),
        first.to_string(),
        "data after the log start is intact"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn time_retention_keeps_only_the_active_segment() {
    let broker = BrokerProcess::start(&["log.retention.check.interval.ms=100"]);
    setup(
        &broker,
        "by-time",
        &[("segment.bytes", "2048"), ("retention.ms", "1000")],
        100,
    )
    .await;
    let bootstrap = broker.bootstrap();
    eventually(Duration::from_secs(20), "time retention", || {
        let n = segment_files(&broker, "by-time");
        async move { (n == 1).then_some(()) }
    })
    .await;
    let (low, high) = watermarks(&bootstrap, "by-time");
    assert_eq!(high, 100);
    assert!(
        low > 0 && low <= high,
        "log start moved to the active segment: {low}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_records_advances_the_log_start() {
    let broker = BrokerProcess::start(&[]);
    setup(&broker, "trimmed", &[], 20).await;
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap()).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("trimmed", 0, Offset::Offset(12))
        .unwrap();
    let res = admin
        .delete_records(&tpl, &AdminOptions::new())
        .await
        .unwrap();
    let p = res.find_partition("trimmed", 0).unwrap();
    assert!(p.error().is_ok(), "{:?}", p.error());
    assert_eq!(p.offset(), Offset::Offset(12));
    assert_eq!(watermarks(&broker.bootstrap(), "trimmed"), (12, 20));
    assert_eq!(
        raw_fetch_error(&broker, "trimmed", 11).await,
        OFFSET_OUT_OF_RANGE
    );
    assert_eq!(first_from_beginning(&broker.bootstrap(), "trimmed").0, 12);
}
