//! Kafka topic configs through real clients: every key created, described
//! (types, sources, synonyms) and altered with librdkafka's admin client
//! and raw requests, and the enforced ones observed from the outside:
//! `compression.type` recompression, `message.timestamp.type`,
//! the `message.timestamp.*.max.ms` window, `min.insync.replicas`,
//! `file.delete.delay.ms` and `cleanup.policy` in retention.

mod common;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{assign_config, client_config, eventually, BrokerProcess, RawConn};
use futures::StreamExt;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, DescribeConfigsRequest, FetchRequest,
    IncrementalAlterConfigsRequest, ProduceRequest, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigSource, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, Timestamp, TopicPartitionList};

fn admin(b: &BrokerProcess) -> AdminClient<DefaultClientContext> {
    client_config(&b.bootstrap()).create().unwrap()
}

fn opts() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn create(b: &BrokerProcess, topic: &str, configs: &[(&str, &str)]) {
    let mut t = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let r = admin(b).create_topics(&[t], &opts()).await.unwrap();
    assert!(r[0].is_ok(), "create {topic}: {r:?}");
}

fn producer(b: &BrokerProcess, codec: &str) -> FutureProducer {
    client_config(&b.bootstrap())
        .set("compression.type", codec)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "10000")
        .create()
        .unwrap()
}

/// Reads `n` messages of partition 0 from the beginning.
async fn consume(b: &BrokerProcess, topic: &str, n: usize) -> Vec<rdkafka::message::OwnedMessage> {
    let c: StreamConsumer = assign_config(&b.bootstrap()).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut stream = c.stream();
    while out.len() < n {
        let m = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("timed out consuming")
            .expect("stream ended")
            .expect("consume error");
        out.push(m.detach());
    }
    out
}

/// The raw bytes of partition 0 from offset 0 (one Fetch).
async fn fetch_raw(b: &BrokerProcess, topic: &str) -> bytes::Bytes {
    let mut conn = RawConn::connect(b.addr).await;
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let ResponseKind::Fetch(resp) = conn.call(ApiKey::Fetch, 12, req).await else {
        panic!("not a fetch response")
    };
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.records.clone().unwrap()
}

/// The codec id of every stored batch (attribute bits 0-2).
fn stored_codecs(records: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 61 <= records.len() {
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(records[at + 22] & 0x07);
        at += 12 + len;
    }
    out
}

fn produce_request(topic: &str, acks: i16, records: bytes::Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

/// A v2 batch of `values` with the given record timestamps.
fn batch_with_timestamps(timestamps: &[i64]) -> bytes::Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        .map(|(i, ts)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: *ts,
            key: Some(bytes::Bytes::from(format!("k{i}"))),
            value: Some(bytes::Bytes::from(format!("v{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn creatable(topic: &str, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_value(Some(StrBytes::from_string(v.to_string())))
                })
                .collect(),
        )
}

/// Every Kafka 4 topic config is accepted at creation and described back
/// with its value and source (librdkafka's 0081-admin `do_test_CreateTopics`
/// with configs and `do_test_DescribeConfigs`); DescribeConfigs v4 reports
/// Kafka's `config_type` and, when asked, the synonyms in Kafka's order.
#[tokio::test(flavor = "multi_thread")]
async fn every_topic_config_is_created_described_with_types_sources_and_synonyms() {
    let broker = BrokerProcess::start(&["log.retention.bytes=123456", "compression.type=gzip"]);
    let configs = [
        ("cleanup.policy", "compact,delete"),
        ("compression.type", "lz4"),
        ("compression.lz4.level", "12"),
        ("compression.gzip.level", "5"),
        ("compression.zstd.level", "-5"),
        ("delete.retention.ms", "3600000"),
        ("file.delete.delay.ms", "1000"),
        ("flush.messages", "1000000"),
        ("flush.ms", "60000"),
        ("follower.replication.throttled.replicas", "0:1"),
        ("index.interval.bytes", "8192"),
        ("leader.replication.throttled.replicas", "*"),
        ("local.retention.bytes", "-2"),
        ("local.retention.ms", "-2"),
        ("max.compaction.lag.ms", "86400000"),
        ("max.message.bytes", "2097152"),
        ("message.downconversion.enable", "false"),
        ("message.timestamp.after.max.ms", "60000"),
        ("message.timestamp.before.max.ms", "86400000"),
        ("message.timestamp.type", "LogAppendTime"),
        ("min.cleanable.dirty.ratio", "0.3"),
        ("min.compaction.lag.ms", "1000"),
        ("min.insync.replicas", "1"),
        ("preallocate", "true"),
        ("remote.log.copy.disable", "false"),
        ("remote.log.delete.on.disable", "false"),
        ("remote.storage.enable", "false"),
        ("retention.ms", "3600000"),
        ("segment.bytes", "1048576"),
        ("segment.index.bytes", "1048576"),
        ("segment.jitter.ms", "100"),
        ("segment.ms", "3600000"),
        ("unclean.leader.election.enable", "false"),
    ];
    create(&broker, "configured", &configs).await;
    create(&broker, "plain", &[]).await;
    let a = admin(&broker);
    let described = a
        .describe_configs(
            &[
                ResourceSpecifier::Topic("configured"),
                ResourceSpecifier::Topic("plain"),
            ],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    let configured = described[0].as_ref().unwrap();
    for (k, v) in configs {
        let e = configured.get(k).unwrap_or_else(|| panic!("{k} described"));
        assert_eq!(e.value.as_deref(), Some(v), "{k}");
        assert!(matches!(e.source, ConfigSource::DynamicTopic), "{k}");
        assert!(!e.is_read_only, "{k}");
    }
    let plain = described[1].as_ref().unwrap();
    let e = plain.get("compression.type").unwrap();
    assert_eq!(e.value.as_deref(), Some("gzip"));
    assert!(matches!(e.source, ConfigSource::StaticBroker));
    let e = plain.get("message.timestamp.after.max.ms").unwrap();
    assert_eq!(e.value.as_deref(), Some("3600000"), "Kafka 4's default");
    assert!(matches!(e.source, ConfigSource::Default));

    // Types and synonyms, which librdkafka's admin result does not expose.
    let mut conn = RawConn::connect(broker.addr).await;
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_include_documentation(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("configured"))
            .with_configuration_keys(None)]);
    let ResponseKind::DescribeConfigs(resp) = conn.call(ApiKey::DescribeConfigs, 4, req).await
    else {
        panic!()
    };
    let entries: HashMap<String, _> = resp.results[0]
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c))
        .collect();
    for (key, ty) in [
        ("retention.ms", 5),
        ("retention.bytes", 5),
        ("segment.ms", 5),
        ("cleanup.policy", 7),
        ("leader.replication.throttled.replicas", 7),
        ("min.cleanable.dirty.ratio", 6),
        ("preallocate", 1),
        ("compression.type", 2),
        ("message.timestamp.type", 2),
        ("max.message.bytes", 3),
        ("segment.bytes", 3),
        ("min.insync.replicas", 3),
    ] {
        assert_eq!(entries[key].config_type, ty, "{key}");
        assert!(entries[key].documentation.is_some(), "{key}");
    }
    let synonyms = |key: &str| -> Vec<(String, String, i8)> {
        entries[key]
            .synonyms
            .iter()
            .map(|s| {
                (
                    s.name.to_string(),
                    s.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                    s.source,
                )
            })
            .collect()
    };
    let s = |n: &str, v: &str, src| (n.to_string(), v.to_string(), src);
    assert_eq!(
        synonyms("compression.type"),
        vec![
            s("compression.type", "lz4", 1),
            s("compression.type", "gzip", 4),
            s("compression.type", "producer", 5),
        ]
    );
    assert_eq!(
        synonyms("retention.bytes"),
        vec![
            s("log.retention.bytes", "123456", 4),
            s("log.retention.bytes", "-1", 5)
        ]
    );
    assert_eq!(
        synonyms("min.cleanable.dirty.ratio"),
        vec![
            s("min.cleanable.dirty.ratio", "0.3", 1),
            s("log.cleaner.min.cleanable.ratio", "0.5", 5)
        ]
    );
    assert_eq!(entries["retention.bytes"].config_source, 4);
}

/// Invalid values and combinations are INVALID_CONFIG, with a message that
/// names the key (kafka-python's `test_create_topics_with_invalid_configs`
/// style: one request, every topic refused on its own).
#[tokio::test(flavor = "multi_thread")]
async fn invalid_topic_configs_are_refused_naming_the_key() {
    let broker = BrokerProcess::start(&[]);
    let bad: &[(&str, &[(&str, &str)])] = &[
        ("ratio", &[("min.cleanable.dirty.ratio", "1.5")]),
        ("policy", &[("cleanup.policy", "forever")]),
        ("codec", &[("compression.type", "brotli")]),
        ("tstype", &[("message.timestamp.type", "Now")]),
        ("zstd", &[("compression.zstd.level", "23")]),
        ("gzip", &[("compression.gzip.level", "0")]),
        ("isr", &[("min.insync.replicas", "0")]),
        ("before", &[("message.timestamp.before.max.ms", "-1")]),
        (
            "replicas",
            &[("leader.replication.throttled.replicas", "all")],
        ),
        ("removed", &[("message.format.version", "3.0")]),
        (
            "removed2",
            &[("message.timestamp.difference.max.ms", "1000")],
        ),
        ("tiered", &[("remote.storage.enable", "true")]),
        (
            "lags",
            &[
                ("min.compaction.lag.ms", "100"),
                ("max.compaction.lag.ms", "10"),
            ],
        ),
    ];
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(
            bad.iter()
                .map(|(topic, configs)| creatable(topic, configs))
                .collect(),
        );
    let mut conn = RawConn::connect(broker.addr).await;
    let ResponseKind::CreateTopics(resp) = conn.call(ApiKey::CreateTopics, 7, req).await else {
        panic!()
    };
    for ((topic, configs), r) in bad.iter().zip(&resp.topics) {
        assert_eq!(r.name.as_str(), *topic);
        assert_eq!(r.error_code, 40, "{topic}: INVALID_CONFIG");
        let msg = r.error_message.as_ref().unwrap().to_string();
        assert!(msg.contains(configs[0].0), "{topic}: {msg}");
    }
    let c: BaseConsumer = client_config(&broker.bootstrap()).create().unwrap();
    let md = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    assert!(md
        .topics()
        .iter()
        .all(|t| bad.iter().all(|(n, _)| t.name() != *n)));
}

/// IncrementalAlterConfigs SET/DELETE/APPEND/SUBTRACT on the new keys, a
/// dynamic broker default reaching topics without an override, and
/// AlterConfigs replacing the whole set (librdkafka 0081-admin
/// `do_test_AlterConfigs`, kafka-python `test_incremental_alter_configs`).
#[tokio::test(flavor = "multi_thread")]
async fn configs_are_altered_incrementally_and_wholesale() {
    let broker = BrokerProcess::start(&[]);
    create(
        &broker,
        "alter",
        &[
            ("message.timestamp.type", "LogAppendTime"),
            ("leader.replication.throttled.replicas", "0:1,1:1"),
        ],
    )
    .await;
    create(&broker, "alter-2", &[]).await;
    let op = |n: &'static str, op: i8, v: Option<&'static str>| {
        AlterableConfig::default()
            .with_name(StrBytes::from_static_str(n))
            .with_config_operation(op)
            .with_value(v.map(StrBytes::from_static_str))
    };
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("alter"))
            .with_configs(vec![
                op("cleanup.policy", 2, Some("compact")),
                op("compression.type", 0, Some("zstd")),
                op("message.timestamp.type", 1, None),
                op("leader.replication.throttled.replicas", 3, Some("1:1")),
                op("min.cleanable.dirty.ratio", 0, Some("0.9")),
            ]),
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("alter-2"))
            .with_configs(vec![op("compression.type", 2, Some("gzip"))]),
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configs(vec![op(
                "log.message.timestamp.type",
                0,
                Some("LogAppendTime"),
            )]),
    ]);
    let mut conn = RawConn::connect(broker.addr).await;
    let ResponseKind::IncrementalAlterConfigs(resp) =
        conn.call(ApiKey::IncrementalAlterConfigs, 1, req).await
    else {
        panic!()
    };
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 40, 0], "{:?}", resp.responses);
    let a = admin(&broker);
    let get = |r: &rdkafka::admin::ConfigResource, k: &str| {
        let e = r.get(k).unwrap();
        (
            e.value.clone().unwrap_or_default(),
            matches!(e.source, ConfigSource::DynamicTopic),
        )
    };
    let r = a
        .describe_configs(&[ResourceSpecifier::Topic("alter")], &AdminOptions::new())
        .await
        .unwrap();
    let r = r[0].as_ref().unwrap();
    assert_eq!(get(r, "cleanup.policy"), ("delete,compact".into(), true));
    assert_eq!(get(r, "compression.type"), ("zstd".into(), true));
    assert_eq!(
        get(r, "leader.replication.throttled.replicas"),
        ("0:1".into(), true)
    );
    assert_eq!(get(r, "min.cleanable.dirty.ratio"), ("0.9".into(), true));
    // Deleted from the topic: the broker's new dynamic default shows.
    let ts = r.get("message.timestamp.type").unwrap();
    assert_eq!(ts.value.as_deref(), Some("LogAppendTime"));
    assert!(matches!(ts.source, ConfigSource::DynamicBroker));

    // The dynamic default stamps batches of topics without an override.
    create(&broker, "follows-broker", &[]).await;
    let before = now_ms();
    let ResponseKind::Produce(p) = conn
        .call(
            ApiKey::Produce,
            9,
            produce_request("follows-broker", -1, batch_with_timestamps(&[before])),
        )
        .await
    else {
        panic!()
    };
    let p = &p.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    assert!(p.log_append_time_ms >= before, "{}", p.log_append_time_ms);

    // AlterConfigs replaces every override.
    let alter = AlterConfig::new(ResourceSpecifier::Topic("alter")).set("segment.jitter.ms", "5");
    let r = a.alter_configs(&[alter], &opts()).await.unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let r = a
        .describe_configs(&[ResourceSpecifier::Topic("alter")], &AdminOptions::new())
        .await
        .unwrap();
    let r = r[0].as_ref().unwrap();
    assert_eq!(get(r, "segment.jitter.ms"), ("5".into(), true));
    assert_eq!(get(r, "compression.type"), ("producer".into(), false));
    assert_eq!(get(r, "cleanup.policy"), ("delete".into(), false));
}

/// `compression.type=zstd` recompresses what librdkafka sends uncompressed
/// (and `uncompressed` decompresses a gzip producer's batches), as Kafka's
/// LogValidator does (`LogValidatorTest.testRecompression*`); consumers
/// read the records unchanged and the stored batches are in the topic's
/// codec.
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_codec_recompresses_what_the_producer_sent() {
    let broker = BrokerProcess::start(&[]);
    for (topic, topic_codec, producer_codec, stored) in [
        ("to-zstd", "zstd", "none", 4u8),
        ("to-plain", "uncompressed", "gzip", 0),
        ("as-sent", "producer", "snappy", 2),
    ] {
        create(&broker, topic, &[("compression.type", topic_codec)]).await;
        let p = producer(&broker, producer_codec);
        let n = 40;
        let sends: Vec<_> = (0..n)
            .map(|i| {
                let p = p.clone();
                let key = format!("key-{i}");
                let value = format!("value {i} {}", "y".repeat(300));
                async move {
                    let headers = OwnedHeaders::new().insert(Header {
                        key: "i",
                        value: Some(key.as_str()),
                    });
                    p.send(
                        FutureRecord::to(topic)
                            .key(&key)
                            .payload(&value)
                            .headers(headers)
                            .timestamp(1_700_000_000_000 + i as i64),
                        Duration::from_secs(10),
                    )
                    .await
                    .map_err(|(e, _)| e)
                    .unwrap();
                }
            })
            .collect();
        futures::future::join_all(sends).await;
        let got = consume(&broker, topic, n).await;
        let mut seen: Vec<(String, String, i64, String)> = got
            .iter()
            .map(|m| {
                let h = m.headers().unwrap().get(0);
                (
                    String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
                    String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
                    m.timestamp().to_millis().unwrap(),
                    String::from_utf8(h.value.unwrap().to_vec()).unwrap(),
                )
            })
            .collect();
        seen.sort_by_key(|s| s.2);
        for (i, (k, v, ts, h)) in seen.iter().enumerate() {
            assert_eq!(k, &format!("key-{i}"), "{topic}");
            assert_eq!(v, &format!("value {i} {}", "y".repeat(300)), "{topic}");
            assert_eq!(*ts, 1_700_000_000_000 + i as i64, "{topic}");
            assert_eq!(h, k, "{topic}");
        }
        let codecs = stored_codecs(&fetch_raw(&broker, topic).await);
        assert!(!codecs.is_empty());
        assert!(codecs.iter().all(|c| *c == stored), "{topic}: {codecs:?}");
    }
}

/// `message.timestamp.type=LogAppendTime`: consumers get the broker's
/// append time and the LogAppendTime type, whatever the producer set
/// (librdkafka 0052-msg_timestamps, `test_timestamps` on a LogAppendTime
/// topic); a CreateTime topic keeps the producer's.
#[tokio::test(flavor = "multi_thread")]
async fn log_append_time_gives_consumers_the_broker_time() {
    let broker = BrokerProcess::start(&[]);
    create(
        &broker,
        "appended",
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .await;
    create(
        &broker,
        "created",
        &[("message.timestamp.type", "CreateTime")],
    )
    .await;
    let p = producer(&broker, "lz4");
    let before = now_ms();
    for topic in ["appended", "created"] {
        for i in 0..5 {
            p.send(
                FutureRecord::to(topic)
                    .key("k")
                    .payload("v")
                    .timestamp(1_000_000_000_000 + i),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
        }
    }
    let after = now_ms();
    for m in consume(&broker, "appended", 5).await {
        match m.timestamp() {
            Timestamp::LogAppendTime(t) => {
                assert!((before..=after).contains(&t), "{before} <= {t} <= {after}")
            }
            other => panic!("expected LogAppendTime, got {other:?}"),
        }
    }
    for (i, m) in consume(&broker, "created", 5).await.iter().enumerate() {
        assert_eq!(
            m.timestamp(),
            Timestamp::CreateTime(1_000_000_000_000 + i as i64)
        );
    }
}

/// CreateTime records outside `message.timestamp.before.max.ms` /
/// `after.max.ms` fail with INVALID_TIMESTAMP; the refused batch is not
/// stored; Produce v8+ names the record (Kafka's `LogValidatorTest
/// .testRecordWithPastTimestampIsRejected` / `FutureTimestamp`, through
/// librdkafka and raw requests).
#[tokio::test(flavor = "multi_thread")]
async fn timestamps_outside_the_window_are_invalid_timestamp() {
    let broker = BrokerProcess::start(&[]);
    create(
        &broker,
        "window",
        &[
            ("message.timestamp.before.max.ms", "60000"),
            ("message.timestamp.after.max.ms", "60000"),
        ],
    )
    .await;
    create(&broker, "kafka4-default", &[]).await;
    let p = producer(&broker, "none");
    let send = |topic: &'static str, ts: i64| {
        let p = p.clone();
        async move {
            p.send(
                FutureRecord::to(topic).key("k").payload("v").timestamp(ts),
                Duration::from_secs(10),
            )
            .await
            .map(|_| ())
            .map_err(|(e, _)| e)
        }
    };
    let invalid = |r: Result<(), KafkaError>| {
        matches!(
            r,
            Err(KafkaError::MessageProduction(
                RDKafkaErrorCode::InvalidTimestamp
            ))
        )
    };
    assert!(send("window", now_ms()).await.is_ok());
    assert!(invalid(send("window", now_ms() - 3_600_000).await));
    assert!(invalid(send("window", now_ms() + 3_600_000).await));
    // Kafka 4's default after.max.ms is one hour; before.max.ms unbounded.
    assert!(invalid(send("kafka4-default", now_ms() + 7_200_000).await));
    assert!(send("kafka4-default", 1_000_000_000_000).await.is_ok());
    let c: BaseConsumer = client_config(&broker.bootstrap()).create().unwrap();
    let (_, high) = c
        .fetch_watermarks("window", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, 1, "refused batches are not stored");

    let now = now_ms();
    let mut conn = RawConn::connect(broker.addr).await;
    let ResponseKind::Produce(resp) = conn
        .call(
            ApiKey::Produce,
            9,
            produce_request(
                "window",
                -1,
                batch_with_timestamps(&[now, now - 120_000, now, now - 130_000]),
            ),
        )
        .await
    else {
        panic!()
    };
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 32, "INVALID_TIMESTAMP");
    // Every record out of range is named, as Kafka's LogValidator does.
    let indexes: Vec<i32> = p.record_errors.iter().map(|r| r.batch_index).collect();
    assert_eq!(indexes, [1, 3], "{:?}", p.record_errors);
    assert_eq!(
        p.error_message.as_deref(),
        Some("One or more records have been rejected due to invalid timestamp")
    );
    let msg = p.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .unwrap()
        .to_string();
    assert!(msg.contains("is out of range"), "{msg}");
    let (_, high) = c
        .fetch_watermarks("window", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, 1);
}

/// `min.insync.replicas` above the in-sync replicas a partition has (one,
/// on a single node) refuses `acks=all` with NOT_ENOUGH_REPLICAS before
/// appending, as a one-broker Kafka does; `acks=1` is not affected.
#[tokio::test(flavor = "multi_thread")]
async fn min_insync_replicas_refuses_acks_all() {
    let broker = BrokerProcess::start(&[]);
    create(&broker, "isr2", &[("min.insync.replicas", "2")]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    let code = |r: ResponseKind| match r {
        ResponseKind::Produce(p) => p.responses[0].partition_responses[0].error_code,
        _ => panic!(),
    };
    let all = conn
        .call(
            ApiKey::Produce,
            9,
            produce_request("isr2", -1, batch_with_timestamps(&[now_ms()])),
        )
        .await;
    assert_eq!(code(all), 19, "NOT_ENOUGH_REPLICAS");
    let one = conn
        .call(
            ApiKey::Produce,
            9,
            produce_request("isr2", 1, batch_with_timestamps(&[now_ms()])),
        )
        .await;
    assert_eq!(code(one), 0);
    let c: BaseConsumer = client_config(&broker.bootstrap()).create().unwrap();
    let (_, high) = c
        .fetch_watermarks("isr2", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, 1, "only the acks=1 batch was appended");
}

/// Files of segments deleted by DeleteRecords wait as `*.deleted` for
/// `file.delete.delay.ms`, then the broker removes them; with 0 they go at
/// once.
#[tokio::test(flavor = "multi_thread")]
async fn deleted_segment_files_wait_out_file_delete_delay_ms() {
    let broker = BrokerProcess::start(&[]);
    // The slow one last, so the check below comes well within its delay.
    for (topic, delay) in [("fast-delete", "0"), ("slow-delete", "3000")] {
        create(
            &broker,
            topic,
            &[("segment.bytes", "1024"), ("file.delete.delay.ms", delay)],
        )
        .await;
        let p: FutureProducer = client_config(&broker.bootstrap())
            .set("linger.ms", "0")
            .create()
            .unwrap();
        for i in 0..12 {
            p.send(
                FutureRecord::to(topic)
                    .key("k")
                    .payload(&format!("{i} {}", "z".repeat(400))),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(10))
            .unwrap();
        let r = admin(&broker).delete_records(&tpl, &opts()).await.unwrap();
        assert!(r.elements()[0].error().is_ok(), "{r:?}");
    }
    let deleted = |topic: &str| {
        std::fs::read_dir(broker.dir().join(format!("{topic}-0")))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".deleted")
            })
            .count()
    };
    assert_eq!(deleted("fast-delete"), 0);
    assert!(deleted("slow-delete") >= 3, "renamed, waiting");
    eventually(Duration::from_secs(30), "deleted files removed", || {
        let gone = deleted("slow-delete") == 0;
        async move { gone.then_some(()) }
    })
    .await;
}

/// Retention by time belongs to the `delete` policy: a `compact`-only topic
/// keeps its segments while a `delete` topic loses them (Kafka's
/// `UnifiedLog.deleteOldSegments`).
#[tokio::test(flavor = "multi_thread")]
async fn compact_only_topics_are_spared_by_time_retention() {
    let broker = BrokerProcess::start(&["log.retention.check.interval.ms=100"]);
    let base = [("segment.bytes", "1024"), ("retention.ms", "1")];
    create(
        &broker,
        "keep",
        &[base[0], base[1], ("cleanup.policy", "compact")],
    )
    .await;
    create(
        &broker,
        "drop",
        &[base[0], base[1], ("cleanup.policy", "delete")],
    )
    .await;
    let p: FutureProducer = client_config(&broker.bootstrap())
        .set("linger.ms", "0")
        .create()
        .unwrap();
    let fill = |from: i32| {
        let p = p.clone();
        async move {
            for topic in ["keep", "drop"] {
                for i in from..from + 8 {
                    p.send(
                        FutureRecord::to(topic)
                            .key(&format!("key-{i}"))
                            .payload(&"w".repeat(400)),
                        Duration::from_secs(10),
                    )
                    .await
                    .map_err(|(e, _)| e)
                    .unwrap();
                }
            }
        }
    };
    let c: BaseConsumer = client_config(&broker.bootstrap()).create().unwrap();
    let low = |topic: &str| {
        c.fetch_watermarks(topic, 0, Duration::from_secs(10))
            .unwrap()
            .0
    };
    fill(0).await;
    eventually(
        Duration::from_secs(30),
        "retention on the delete topic",
        || {
            let moved = low("drop") > 0;
            async move { moved.then_some(()) }
        },
    )
    .await;
    // A later retention pass (the first one over both logs has ended).
    let first = low("drop");
    fill(8).await;
    eventually(Duration::from_secs(30), "a second retention pass", || {
        let moved = low("drop") > first;
        async move { moved.then_some(()) }
    })
    .await;
    assert_eq!(low("keep"), 0, "the compact topic kept every segment");
}
