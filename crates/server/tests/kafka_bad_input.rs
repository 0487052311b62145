//! Bad input gets a clear error (or closes only that connection), nothing is
//! lost, and the broker keeps serving a real client throughout.

mod common;

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use common::{client_config, record_batch, BrokerProcess, RawConn};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, ProduceRequest, ResponseKind, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};

const CORRUPT_MESSAGE: i16 = 2;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_TOPIC: i16 = 17;
const UNSUPPORTED_VERSION: i16 = 35;
const KAFKA_STORAGE_ERROR: i16 = 56;

async fn create(bootstrap: &str, name: &str) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(name, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

/// A long-lived librdkafka producer that must keep working.
async fn still_serving(p: &FutureProducer, what: &str) -> i64 {
    p.send(
        FutureRecord::to("healthy").key("k").payload(what),
        Duration::from_secs(10),
    )
    .await
    .map_err(|(e, _)| e)
    .unwrap_or_else(|e| panic!("healthy client failed after {what}: {e}"))
    .offset
}

fn high_watermark(bootstrap: &str, topic: &str) -> i64 {
    let c: BaseConsumer = client_config(bootstrap).create().unwrap();
    c.fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap()
        .1
}

fn produce_request(topic: &str, records: bytes::Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_frames_close_only_their_connection() {
    let broker = BrokerProcess::start(&["socket.request.max.bytes=65536"]);
    create(&broker.bootstrap(), "healthy").await;
    let healthy: FutureProducer = client_config(&broker.bootstrap()).create().unwrap();
    let mut last = still_serving(&healthy, "start").await;

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("negative length", (-5i32).to_be_bytes().to_vec()),
        ("oversized length", 1_000_000i32.to_be_bytes().to_vec()),
        ("garbage body", {
            let mut b = 12i32.to_be_bytes().to_vec();
            b.extend_from_slice(&[0xff; 12]);
            b
        }),
        ("too short for a header", {
            let mut b = 3i32.to_be_bytes().to_vec();
            b.extend_from_slice(&[1, 2, 3]);
            b
        }),
        ("unknown api key", {
            let mut b = BytesMut::new();
            b.put_i32(10);
            b.put_i16(9999);
            b.put_i16(0);
            b.put_i32(1);
            b.put_i16(-1);
            b.to_vec()
        }),
        ("a 2^31-element array in a 14-byte frame", {
            let mut b = BytesMut::new();
            b.put_i32(14);
            b.put_i16(ApiKey::Metadata as i16);
            b.put_i16(0);
            b.put_i32(1);
            b.put_i16(-1);
            b.put_i32(i32::MAX);
            b.to_vec()
        }),
        ("unsupported produce version", {
            let mut b = BytesMut::new();
            b.put_i32(10);
            b.put_i16(ApiKey::Produce as i16);
            b.put_i16(2);
            b.put_i32(1);
            b.put_i16(-1);
            b.to_vec()
        }),
    ];
    for (what, bytes) in cases {
        let mut conn = RawConn::connect(broker.addr).await;
        conn.send_raw(&bytes).await.unwrap();
        assert!(conn.is_closed_by_peer().await, "{what}: connection closed");
        let offset = still_serving(&healthy, what).await;
        assert_eq!(offset, last + 1, "{what}: nothing lost or duplicated");
        last = offset;
    }

    // A frame cut off mid-way, then the client goes away.
    let mut conn = RawConn::connect(broker.addr).await;
    conn.send_raw(&[0, 0, 0, 100, 1, 2, 3]).await.unwrap();
    drop(conn);
    still_serving(&healthy, "truncated frame").await;
    // Closures are logged.
    broker.wait_for_log("closing connection");
}

#[tokio::test(flavor = "multi_thread")]
async fn future_api_versions_gets_unsupported_version_in_v0_format() {
    let broker = BrokerProcess::start(&[]);
    let mut conn = RawConn::connect(broker.addr).await;
    // A v3-shaped request labelled v9 (kafka-protocol refuses to encode v9).
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(9)
        .with_correlation_id(42)
        .encode(&mut frame, 2)
        .unwrap();
    ApiVersionsRequest::default().encode(&mut frame, 3).unwrap();
    let len = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    conn.send_raw(&frame).await.unwrap();
    let ResponseKind::ApiVersions(resp) = conn.recv(ApiKey::ApiVersions, 0).await.unwrap() else {
        panic!()
    };
    assert_eq!(resp.error_code, UNSUPPORTED_VERSION);
    let av = resp
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .unwrap();
    assert_eq!((av.min_version, av.max_version), (0, 3));
    // The connection stays usable for the retry at a supported version.
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("tests"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let ResponseKind::ApiVersions(resp) = conn.call(ApiKey::ApiVersions, 3, req).await else {
        panic!()
    };
    assert_eq!(resp.error_code, 0);
    assert!(resp
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16 && k.min_version == 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_topic_names_are_rejected_everywhere() {
    let broker = BrokerProcess::start(&[]);
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap()).create().unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new("bad name!", 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(r[0].as_ref().unwrap_err().1, RDKafkaErrorCode::InvalidTopic);

    let mut conn = RawConn::connect(broker.addr).await;
    let bad = || TopicName(StrBytes::from_static_str("bad/name"));
    let md = MetadataRequest::default()
        .with_allow_auto_topic_creation(true)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(bad()))
        ]));
    let ResponseKind::Metadata(resp) = conn.call(ApiKey::Metadata, 12, md).await else {
        panic!()
    };
    assert_eq!(resp.topics[0].error_code, INVALID_TOPIC);
    let ResponseKind::Produce(resp) = conn
        .call(
            ApiKey::Produce,
            9,
            produce_request("bad/name", record_batch(&[b"x"])),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        INVALID_TOPIC
    );
    let long = "x".repeat(250);
    let ResponseKind::Produce(resp) = conn
        .call(
            ApiKey::Produce,
            9,
            produce_request(&long, record_batch(&[b"x"])),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        INVALID_TOPIC
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_batches_are_refused_and_nothing_is_appended() {
    let broker = BrokerProcess::start(&[]);
    create(&broker.bootstrap(), "crc").await;
    let mut conn = RawConn::connect(broker.addr).await;
    let good = record_batch(&[b"one", b"two"]);
    let ResponseKind::Produce(resp) = conn
        .call(ApiKey::Produce, 9, produce_request("crc", good.clone()))
        .await
    else {
        panic!()
    };
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);

    let mut flipped = BytesMut::from(&good[..]);
    let last = flipped.len() - 1;
    flipped[last] ^= 0x55;
    let ResponseKind::Produce(resp) = conn
        .call(ApiKey::Produce, 9, produce_request("crc", flipped.freeze()))
        .await
    else {
        panic!()
    };
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, CORRUPT_MESSAGE, "{:?}", p.error_message);

    let truncated = good.slice(..good.len() - 4);
    let ResponseKind::Produce(resp) = conn
        .call(ApiKey::Produce, 9, produce_request("crc", truncated))
        .await
    else {
        panic!()
    };
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        CORRUPT_MESSAGE
    );
    assert_eq!(
        high_watermark(&broker.bootstrap(), "crc"),
        2,
        "only the good batch was appended"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_batches_get_message_too_large() {
    let broker = BrokerProcess::start(&["message.max.bytes=10000"]);
    create(&broker.bootstrap(), "limits").await;
    // librdkafka would refuse locally under its own limit, so raise it: the
    // broker must be the one that says no.
    let producer: FutureProducer = client_config(&broker.bootstrap())
        .set("message.max.bytes", "1000000")
        .set("message.timeout.ms", "5000")
        .create()
        .unwrap();
    let big = vec![b'x'; 50_000];
    let err = producer
        .send(
            FutureRecord::to("limits").key("k").payload(&big),
            Duration::from_secs(10),
        )
        .await
        .expect_err("too large");
    assert!(
        matches!(
            err.0,
            KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)
        ),
        "{err:?}"
    );
    let offset = producer
        .send(
            FutureRecord::to("limits").key("k").payload("small"),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap()
        .offset;
    assert_eq!(offset, 0, "the refused batch took no offsets");

    let mut conn = RawConn::connect(broker.addr).await;
    let values: Vec<Vec<u8>> = (0..20).map(|_| vec![b'y'; 1000]).collect();
    let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
    let ResponseKind::Produce(resp) = conn
        .call(
            ApiKey::Produce,
            9,
            produce_request("limits", record_batch(&refs)),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        MESSAGE_TOO_LARGE
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn disk_errors_fail_one_partition_not_the_broker() {
    // Every file the broker writes is capped at 256 KiB (RLIMIT_FSIZE), so
    // the big topic's segment runs into EFBIG while the others have room.
    let mut broker =
        BrokerProcess::start_with_file_size_limit(&["log.segment.bytes=104857600"], 256 * 1024);
    create(&broker.bootstrap(), "big").await;
    create(&broker.bootstrap(), "healthy").await;
    let healthy: FutureProducer = client_config(&broker.bootstrap()).create().unwrap();
    still_serving(&healthy, "start").await;

    let mut conn = RawConn::connect(broker.addr).await;
    let chunk: Vec<u8> = vec![b'z'; 16 * 1024];
    let mut acked = 0;
    let mut error = 0;
    for _ in 0..64 {
        let ResponseKind::Produce(resp) = conn
            .call(
                ApiKey::Produce,
                9,
                produce_request("big", record_batch(&[&chunk])),
            )
            .await
        else {
            panic!()
        };
        let p = &resp.responses[0].partition_responses[0];
        if p.error_code == 0 {
            assert_eq!(p.base_offset, acked, "offsets stay contiguous");
            acked += 1;
        } else {
            error = p.error_code;
            break;
        }
    }
    assert_eq!(
        error, KAFKA_STORAGE_ERROR,
        "the full partition reports a storage error"
    );
    assert!(acked > 0);
    assert!(broker.is_running(), "the broker survives a disk error");
    still_serving(&healthy, "disk error").await;
    assert_eq!(
        high_watermark(&broker.bootstrap(), "big"),
        acked,
        "acknowledged data intact, nothing torn"
    );

    // After a restart the partition still holds exactly what was acknowledged.
    broker.kill();
    broker.restart();
    assert_eq!(high_watermark(&broker.bootstrap(), "big"), acked);
}
