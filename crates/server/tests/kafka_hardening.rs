//! Requests that could hurt the broker or its other users: acks=0 failures,
//! operations on the internal offsets topic, oversized partition counts and
//! fetch sizes, and stale state after a topic is deleted.

mod common;

use common::{record_batch, BrokerProcess, RawConn};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const ILLEGAL_GENERATION: i16 = 22;
const INVALID_TOPIC: i16 = 17;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn produce(topic: &str, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(record_batch(&[b"x"])))])])
}

async fn create(conn: &mut RawConn, topic: &str, partitions: i32) -> i16 {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)]);
    let ResponseKind::CreateTopics(r) = conn.call(ApiKey::CreateTopics, 7, req).await else {
        panic!()
    };
    r.topics[0].error_code
}

#[tokio::test(flavor = "multi_thread")]
async fn acks_zero_failures_close_the_connection() {
    let broker = BrokerProcess::start(&[]);
    let mut conn = RawConn::connect(broker.addr).await;
    assert_eq!(create(&mut conn, "fire-and-forget", 1).await, 0);
    // A good acks=0 produce gets no answer; the connection goes on.
    conn.send(ApiKey::Produce, 9, produce("fire-and-forget", 0))
        .await;
    let md = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name("fire-and-forget")))
    ]));
    let ResponseKind::Metadata(r) = conn.call(ApiKey::Metadata, 12, md).await else {
        panic!()
    };
    assert_eq!(
        r.topics[0].error_code, 0,
        "the next answer is for the Metadata request"
    );
    // A failed acks=0 produce closes the connection, as Kafka does.
    conn.send(ApiKey::Produce, 9, produce("no-such-topic", 0))
        .await;
    assert!(conn.is_closed_by_peer().await);
    broker.wait_for_log("acks=0 produce to no-such-topic-0 failed");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_offsets_topic_is_protected_but_double_underscore_topics_are_not_internal() {
    let broker = BrokerProcess::start(&[]);
    let mut conn = RawConn::connect(broker.addr).await;
    let req = DeleteRecordsRequest::default().with_topics(vec![DeleteRecordsTopic::default()
        .with_name(name("__consumer_offsets"))
        .with_partitions(vec![DeleteRecordsPartition::default()
            .with_partition_index(0)
            .with_offset(-1)])]);
    let ResponseKind::DeleteRecords(r) = conn.call(ApiKey::DeleteRecords, 2, req).await else {
        panic!()
    };
    assert_eq!(r.topics[0].partitions[0].error_code, INVALID_TOPIC);

    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("__consumer_offsets"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("1000")))]),
    ]);
    let ResponseKind::IncrementalAlterConfigs(r) =
        conn.call(ApiKey::IncrementalAlterConfigs, 1, req).await
    else {
        panic!()
    };
    assert_eq!(r.responses[0].error_code, INVALID_REQUEST);
    let req = CreatePartitionsRequest::default().with_topics(vec![
        create_partitions_request::CreatePartitionsTopic::default()
            .with_name(name("__consumer_offsets"))
            .with_count(5),
    ]);
    let ResponseKind::CreatePartitions(r) = conn.call(ApiKey::CreatePartitions, 3, req).await
    else {
        panic!()
    };
    assert_ne!(r.results[0].error_code, 0);
    let ResponseKind::Produce(r) = conn
        .call(ApiKey::Produce, 9, produce("__consumer_offsets", -1))
        .await
    else {
        panic!()
    };
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        INVALID_TOPIC
    );

    // Only the broker makes internal topics: the group log exists (as on a
    // single Kafka broker), the transaction log is never a client's.
    assert_eq!(create(&mut conn, "__consumer_offsets", 1).await, 36);
    assert_eq!(
        create(&mut conn, "__transaction_state", 1).await,
        INVALID_TOPIC
    );

    // Only Kafka's fixed set is internal: a user topic may start with "__".
    assert_eq!(create(&mut conn, "__debezium-heartbeat.db", 1).await, 0);
    let ResponseKind::Produce(r) = conn
        .call(ApiKey::Produce, 9, produce("__debezium-heartbeat.db", -1))
        .await
    else {
        panic!()
    };
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let ResponseKind::Metadata(r) = conn
        .call(
            ApiKey::Metadata,
            12,
            MetadataRequest::default().with_topics(None),
        )
        .await
    else {
        panic!()
    };
    let flags: Vec<(String, bool)> = r
        .topics
        .iter()
        .map(|t| (t.name.as_ref().unwrap().to_string(), t.is_internal))
        .collect();
    assert!(
        flags.contains(&("__consumer_offsets".into(), true)),
        "{flags:?}"
    );
    assert!(
        flags.contains(&("__debezium-heartbeat.db".into(), false)),
        "{flags:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn partition_counts_and_fetch_sizes_are_bounded() {
    let broker = BrokerProcess::start(&["fetch.max.bytes=10000"]);
    let mut conn = RawConn::connect(broker.addr).await;
    assert_eq!(
        create(&mut conn, "huge", i32::MAX).await,
        INVALID_PARTITIONS
    );
    assert_eq!(create(&mut conn, "huge", 10_001).await, INVALID_PARTITIONS);
    assert_eq!(create(&mut conn, "sized", 1).await, 0);
    let value = vec![b'v'; 3000];
    for _ in 0..10 {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("sized"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(record_batch(&[&value])))])]);
        let ResponseKind::Produce(r) = conn.call(ApiKey::Produce, 9, req).await else {
            panic!()
        };
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    // The request asks for everything; the broker's fetch.max.bytes caps it.
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("sized"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(i32::MAX)])]);
    let ResponseKind::Fetch(r) = conn.call(ApiKey::Fetch, 12, req).await else {
        panic!()
    };
    let got = r.responses[0].partitions[0].records.as_ref().unwrap().len();
    assert!(got > 0 && got <= 10_000, "{got} bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn offsets_do_not_outlive_their_topic_and_unknown_groups_follow_the_version() {
    let broker = BrokerProcess::start(&[]);
    let mut conn = RawConn::connect(broker.addr).await;
    assert_eq!(create(&mut conn, "transient", 1).await, 0);
    let commit = |generation: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(if generation < 0 { "" } else { "m" }))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name("transient"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default().with_committed_offset(42)
                ])])
    };
    let ResponseKind::OffsetCommit(r) = conn.call(ApiKey::OffsetCommit, 8, commit(-1)).await else {
        panic!()
    };
    assert_eq!(r.topics[0].partitions[0].error_code, 0);

    // A generation for a group the broker has never seen.
    let ResponseKind::OffsetCommit(r) = conn
        .call(
            ApiKey::OffsetCommit,
            8,
            commit(5).with_group_id(GroupId(s("nobody"))),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.topics[0].partitions[0].error_code, ILLEGAL_GENERATION);
    let ResponseKind::OffsetCommit(r) = conn
        .call(
            ApiKey::OffsetCommit,
            9,
            commit(5).with_group_id(GroupId(s("nobody"))),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.topics[0].partitions[0].error_code, GROUP_ID_NOT_FOUND);

    // Deleting the topic removes its committed offsets.
    let del = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![name("transient")]);
    let ResponseKind::DeleteTopics(r) = conn.call(ApiKey::DeleteTopics, 5, del).await else {
        panic!()
    };
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(create(&mut conn, "transient", 1).await, 0);
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name("transient"))
            .with_partition_indexes(vec![0])]));
    let ResponseKind::OffsetFetch(r) = conn.call(ApiKey::OffsetFetch, 7, fetch).await else {
        panic!()
    };
    assert_eq!(
        r.topics[0].partitions[0].committed_offset, -1,
        "the recreated topic starts with no offsets"
    );
}
