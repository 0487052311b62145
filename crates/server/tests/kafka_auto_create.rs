//! The topic auto-creation table, one broker configuration per row, judged
//! by librdkafka's metadata requests (its `allow.auto.create.topics` sets
//! the request's `allow_auto_topic_creation`), plus raw Produce/Fetch
//! requests that must never create a topic.

mod common;

use std::time::Duration;

use common::{client_config, record_batch, BrokerProcess, RawConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, MetadataRequest, ProduceRequest, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaRespErr;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// librdkafka's view of `topic`: its partition count, or the error code.
fn lookup(bootstrap: &str, topic: &str, allow_auto_create: bool) -> Result<usize, RDKafkaRespErr> {
    let c: BaseConsumer = client_config(bootstrap)
        .set(
            "allow.auto.create.topics",
            if allow_auto_create { "true" } else { "false" },
        )
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .expect("topic entry in response");
    match t.error() {
        Some(e) => Err(e),
        None => Ok(t.partitions().len()),
    }
}

/// Every topic the broker lists.
fn all_topics(bootstrap: &str) -> Vec<String> {
    let c: BaseConsumer = client_config(bootstrap).create().unwrap();
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    md.topics().iter().map(|t| t.name().to_string()).collect()
}

fn assert_not_created(broker: &BrokerProcess, topic: &str) {
    assert!(
        !all_topics(&broker.bootstrap()).contains(&topic.to_string()),
        "{topic} must not exist"
    );
    let stray = std::fs::read_dir(broker.dir())
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{topic}-"))
        });
    assert!(!stray, "no partition directory for {topic}");
}

/// The kind a topic was stored with, as Pulsar's partitioned-topic
/// metadata reports it (0 partitions: non-partitioned).
async fn stored_kind(broker: &BrokerProcess, topic: &str) -> String {
    let url = format!(
        "{}/admin/v2/persistent/public/default/{topic}/partitions",
        broker.http_url()
    );
    let v: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let kind = if v["partitions"].as_i64().unwrap() > 0 {
        "partitioned"
    } else {
        "non-partitioned"
    };
    kind.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn row_existing_topic_is_returned_whatever_the_flags() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap()).create().unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new("exists", 4, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok());
    assert_eq!(lookup(&broker.bootstrap(), "exists", false), Ok(4));
    assert_eq!(lookup(&broker.bootstrap(), "exists", true), Ok(4));
}

#[tokio::test(flavor = "multi_thread")]
async fn row_request_forbids_creation() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=true", "num.partitions=3"]);
    assert_eq!(
        lookup(&broker.bootstrap(), "not-asked", false),
        Err(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    );
    assert_not_created(&broker, "not-asked");
}

#[tokio::test(flavor = "multi_thread")]
async fn row_allowed_and_asked_creates_partitioned() {
    let broker = BrokerProcess::start(&[
        "auto.create.topics.enable=true",
        "auto.create.topics.type=partitioned",
        "num.partitions=3",
    ]);
    assert_eq!(lookup(&broker.bootstrap(), "auto-part", true), Ok(3));
    assert_eq!(
        lookup(&broker.bootstrap(), "auto-part", false),
        Ok(3),
        "created for good"
    );
    assert_eq!(stored_kind(&broker, "auto-part").await, "partitioned");
}

#[tokio::test(flavor = "multi_thread")]
async fn row_allowed_and_asked_creates_non_partitioned() {
    let broker = BrokerProcess::start(&[
        "auto.create.topics.enable=true",
        "auto.create.topics.type=non-partitioned",
        "num.partitions=3",
    ]);
    assert_eq!(lookup(&broker.bootstrap(), "auto-single", true), Ok(1));
    assert_eq!(stored_kind(&broker, "auto-single").await, "non-partitioned");
}

#[tokio::test(flavor = "multi_thread")]
async fn row_broker_forbids_creation() {
    let mut broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    assert_eq!(
        lookup(&broker.bootstrap(), "refused", true),
        Err(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    );
    assert_not_created(&broker, "refused");

    // A producer (which asks for creation) gets a clear error, not a topic.
    let producer: FutureProducer = client_config(&broker.bootstrap())
        .set("message.timeout.ms", "3000")
        .create()
        .unwrap();
    let err = producer
        .send(
            FutureRecord::to("refused").key("k").payload("v"),
            Duration::from_secs(5),
        )
        .await
        .expect_err("produce to a missing topic must fail");
    assert!(
        matches!(
            err.0,
            KafkaError::MessageProduction(RDKafkaErrorCode::UnknownTopicOrPartition)
                | KafkaError::MessageProduction(RDKafkaErrorCode::UnknownTopic)
                | KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)
        ),
        "{err:?}"
    );
    assert_not_created(&broker, "refused");

    // The policy survives a restart.
    assert_eq!(broker.terminate(), Some(0));
    broker.restart();
    assert_eq!(
        lookup(&broker.bootstrap(), "refused", true),
        Err(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn produce_and_fetch_never_create() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=true"]);
    let mut conn = RawConn::connect(broker.addr).await;
    let name = || TopicName(StrBytes::from_static_str("ghost"));
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(record_batch(&[b"boo"])))])]);
    let ResponseKind::Produce(resp) = conn.call(ApiKey::Produce, 9, produce).await else {
        panic!()
    };
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );

    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1024)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name())
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1024)])]);
    let ResponseKind::Fetch(resp) = conn.call(ApiKey::Fetch, 12, fetch).await else {
        panic!()
    };
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_not_created(&broker, "ghost");

    // Metadata v3 has no flag; Kafka treats it as allowing creation.
    let md = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name()))
    ]));
    let ResponseKind::Metadata(resp) = conn.call(ApiKey::Metadata, 3, md).await else {
        panic!()
    };
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), 1);
}
