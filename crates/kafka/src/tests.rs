//! Every advertised API at every advertised version: a realistic request is
//! handled by a real broker (temp dir) and the response must encode at that
//! version and decode back. `kafka-protocol` refuses to encode fields a
//! version lacks, so this catches handlers that set them.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::{frame, handle, Outcome, RequestContext, SUPPORTED_APIS};
use broker::config::BrokerConfig;

fn broker(dir: &std::path::Path) -> broker::testing::TestNode {
    let mut config = BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap());
    config
        .apply_assignment("group.initial.rebalance.delay.ms=0")
        .unwrap();
    broker::testing::TestNode::start(config).unwrap()
}

fn batch() -> Bytes {
    let rec = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: 0,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&rec],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// A request for `key` that makes the handler fill in real data.
fn request(key: ApiKey, version: i16, topic_id: uuid::Uuid) -> RequestKind {
    let t = || name("t");
    match key {
        ApiKey::Produce => {
            RequestKind::Produce(ProduceRequest::default().with_acks(-1).with_topic_data(
                vec![TopicProduceData::default()
                    .with_name(t())
                    .with_topic_id(topic_id)
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch()))])],
            ))
        }
        ApiKey::Fetch => {
            RequestKind::Fetch(FetchRequest::default().with_max_bytes(1 << 20).with_topics(
                vec![FetchTopic::default()
                    .with_topic(t())
                    .with_topic_id(topic_id)
                    .with_partitions(vec![
                        FetchPartition::default().with_partition_max_bytes(1 << 20)
                    ])],
            ))
        }
        ApiKey::ListOffsets => {
            RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default().with_name(t()).with_partitions(vec![
                ListOffsetsPartition::default().with_timestamp(-1),
                ListOffsetsPartition::default().with_timestamp(0),
            ]),
        ]))
        }
        ApiKey::Metadata => {
            RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(t())),
                MetadataRequestTopic::default().with_name(Some(name("missing"))),
            ])))
        }
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_key(StrBytes::from_static_str("g"))
                .with_coordinator_keys(vec![StrBytes::from_static_str("g"), StrBytes::new()]),
        ),
        ApiKey::ApiVersions => RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("x"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        ),
        ApiKey::CreateTopics => {
            RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(name(&format!("c{version}")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
                CreatableTopic::default()
                    .with_name(t())
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]))
        }
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(
            DeleteTopicsRequest::default()
                .with_topic_names(vec![name("missing")])
                .with_topics(vec![
                    DeleteTopicState::default().with_name(Some(name("missing")))
                ]),
        ),
        ApiKey::DeleteRecords => {
            RequestKind::DeleteRecords(DeleteRecordsRequest::default().with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(t())
                .with_partitions(vec![DeleteRecordsPartition::default().with_offset(0)]),
        ]))
        }
        ApiKey::InitProducerId => RequestKind::InitProducerId(
            InitProducerIdRequest::default().with_transactional_id(None),
        ),
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default().with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(t())
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default().with_leader_epoch(0)
                    ]),
            ]),
        ),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default()
                .with_include_synonyms(true)
                .with_include_documentation(true)
                .with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str("t")),
                    DescribeConfigsResource::default()
                        .with_resource_type(4)
                        .with_resource_name(StrBytes::from_static_str("1")),
                ]),
        ),
        ApiKey::AlterConfigs => {
            RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t"))
                .with_configs(vec![alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_value(Some(StrBytes::from_static_str("1000")))]),
        ]))
        }
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default().with_topics(vec![
            CreatePartitionsTopic::default().with_name(t()).with_count(2 + version as i32),
        ]))
        }
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(StrBytes::from_static_str("retention.ms"))
                            .with_value(Some(StrBytes::from_static_str("1000"))),
                    ]),
            ]),
        ),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(format!("join-{version}"))))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(Bytes::from_static(b"meta"))]),
        ),
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("join-0")))
                .with_member_id(StrBytes::from_static_str("nobody")),
        ),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("join-0")))
                .with_member_id(StrBytes::from_static_str("nobody")),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("join-0")))
                .with_member_id(StrBytes::from_static_str("nobody"))
                .with_members(vec![leave_group_request::MemberIdentity::default()
                    .with_member_id(StrBytes::from_static_str("nobody"))]),
        ),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("offsets")))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(t())
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_committed_offset(1),
                        ]),
                ]),
        ),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("offsets")))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(t())
                        .with_partition_indexes(vec![0, 1]),
                ]))
                .with_groups(vec![
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("offsets")))
                        .with_topics(None),
                ]),
        ),
        ApiKey::DescribeGroups => {
            RequestKind::DescribeGroups(DescribeGroupsRequest::default().with_groups(vec![
                GroupId(StrBytes::from_static_str("join-0")),
                GroupId(StrBytes::from_static_str("missing")),
            ]))
        }
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(
            DeleteGroupsRequest::default()
                .with_groups_names(vec![GroupId(StrBytes::from_static_str("missing"))]),
        ),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(
            OffsetDeleteRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("offsets")))
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(t())
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default(),
                        ]),
                ]),
        ),
        ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(format!("cg-{version}"))))
                .with_member_id(StrBytes::from_static_str("member-1"))
                .with_rebalance_timeout_ms(5000)
                .with_subscribed_topic_names(Some(vec![t()])),
        ),
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![
                GroupId(StrBytes::from_static_str("cg-0")),
                GroupId(StrBytes::from_static_str("join-0")),
            ]),
        ),
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(
            DescribeLogDirsRequest::default().with_topics(if version % 2 == 0 {
                None
            } else {
                Some(vec![
                    describe_log_dirs_request::DescribableLogDirTopic::default()
                        .with_topic(t())
                        .with_partitions(vec![0, 7]),
                ])
            }),
        ),
        ApiKey::AlterReplicaLogDirs => {
            RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default().with_dirs(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_static_str("/nowhere"))
                    .with_topics(vec![
                        alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                            .with_name(t())
                            .with_partitions(vec![0]),
                    ]),
            ]))
        }
        ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(
            DescribeTopicPartitionsRequest::default()
                .with_response_partition_limit(1)
                .with_topics(vec![
                    describe_topic_partitions_request::TopicRequest::default().with_name(t()),
                    describe_topic_partitions_request::TopicRequest::default()
                        .with_name(name("missing")),
                ]),
        ),
        ApiKey::ListConfigResources => RequestKind::ListConfigResources(
            ListConfigResourcesRequest::default().with_resource_types(if version >= 1 {
                vec![2, 4]
            } else {
                Vec::new()
            }),
        ),
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(
            ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                elect_leaders_request::TopicPartitions::default()
                    .with_topic(t())
                    .with_partitions(vec![0, 9]),
            ])),
        ),
        ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsRequest::default().with_topics(vec![
                alter_partition_reassignments_request::ReassignableTopic::default()
                    .with_name(t())
                    .with_partitions(vec![
                        alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_replicas(Some(vec![BrokerId(1)])),
                        alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_replicas(None),
                    ]),
            ]),
        ),
        ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
            ListPartitionReassignmentsRequest::default().with_topics(None),
        ),
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(
                    "tx",
                )))
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(t())
                        .with_partitions(vec![0]),
                ]),
        ),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx")))
                .with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::EndTxn => RequestKind::EndTxn(
            EndTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx"))),
        ),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx")))
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(t())
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_committed_offset(1),
                        ]),
                ]),
        ),
        ApiKey::WriteTxnMarkers => {
            RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default()
                    .with_producer_id(ProducerId(7))
                    .with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(t())
                            .with_partition_indexes(vec![0, 9]),
                    ]),
            ]))
        }
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(
            DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![TransactionalId(StrBytes::from_static_str("tx"))]),
        ),
        ApiKey::ListTransactions => RequestKind::ListTransactions(
            ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("Ongoing")]),
        ),
        ApiKey::DescribeProducers => {
            RequestKind::DescribeProducers(DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(t())
                    .with_partition_indexes(vec![0, 5]),
            ]))
        }
        ApiKey::DescribeQuorum => {
            RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
                describe_quorum_request::TopicData::default()
                    .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                    .with_partitions(vec![
                        describe_quorum_request::PartitionData::default().with_partition_index(0),
                    ]),
            ]))
        }
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        ),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::from_static(b"\0u\0p")),
        ),
        ApiKey::DescribeUserScramCredentials => {
            RequestKind::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default())
        }
        ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
            AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(StrBytes::from_static_str("alice"))
                    .with_mechanism(2)
                    .with_iterations(4096)
                    .with_salt(bytes::Bytes::from_static(b"salt"))
                    .with_salted_password(bytes::Bytes::from_static(&[7; 64])),
            ]),
        ),
        ApiKey::DescribeClientQuotas => {
            RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default())
        }
        ApiKey::AlterClientQuotas => {
            RequestKind::AlterClientQuotas(AlterClientQuotasRequest::default().with_entries(vec![
                alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![alter_client_quotas_request::EntityData::default()
                        .with_entity_type(StrBytes::from_static_str("user"))
                        .with_entity_name(Some(StrBytes::from_static_str("alice")))])
                    .with_ops(vec![alter_client_quotas_request::OpData::default()
                        .with_key(StrBytes::from_static_str("producer_byte_rate"))
                        .with_value(1024.0)]),
            ]))
        }
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(
            vec![create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t"))
                .with_resource_pattern_type(3)
                .with_principal(StrBytes::from_static_str("User:alice"))
                .with_host(StrBytes::from_static_str("*"))
                .with_operation(3)
                .with_permission_type(3)],
        )),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(
            vec![delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1)],
        )),
        other => panic!("no test request for {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_supported_version_encodes_and_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let timers = broker::groups::spawn_timers(b.clone());
    let topic = b
        .lookup_topic(&model::TopicName::new("t").unwrap(), true)
        .unwrap();
    let mut checked = 0;
    for (key, versions) in SUPPORTED_APIS {
        for version in versions.min..=versions.max {
            let ctx = RequestContext {
                api_key: *key,
                api_version: version,
                correlation_id: 1,
                client_id: None,
                client_host: "/127.0.0.1".into(),
                listener: std::sync::Arc::from("kafka"),
                principal: std::sync::Arc::new(broker::security::Principal::anonymous()),
                request_size: 0,
            };
            let bytes = match handle(&b, &ctx, request(*key, version, topic.id.0)).await {
                Outcome::Reply(resp) => frame::encode_response(&ctx, &resp)
                    .unwrap_or_else(|e| panic!("{key:?} v{version} does not encode: {e:#}")),
                Outcome::Frame(f) => f.to_bytes().unwrap(),
                other => panic!("{key:?} v{version}: {other:?}"),
            };
            let mut body = bytes.slice(4..);
            let _: ResponseHeader = kafka_protocol::protocol::Decodable::decode(
                &mut body,
                key.response_header_version(version),
            )
            .unwrap();
            ResponseKind::decode(*key, &mut body, version)
                .unwrap_or_else(|e| panic!("{key:?} v{version} does not decode: {e:#}"));
            checked += 1;
        }
    }
    timers.abort();
    let expected: i16 = SUPPORTED_APIS.iter().map(|(_, v)| v.max - v.min + 1).sum();
    assert_eq!(checked, expected);
}

/// The README's API table is a contract: it must list exactly what
/// ApiVersions advertises.
#[test]
fn readme_lists_every_advertised_api_and_version_range() {
    let readme = include_str!("../../../README.md");
    for (key, v) in SUPPORTED_APIS {
        let row = format!("| {key:?} | {}–{} |", v.min, v.max);
        assert!(readme.contains(&row), "README lacks the row {row}");
    }
    let rows = readme
        .lines()
        .skip_while(|l| !l.starts_with("## Kafka APIs"))
        .skip_while(|l| !l.starts_with("| API |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .count();
    assert_eq!(rows, SUPPORTED_APIS.len(), "no extra rows either");
}

/// Record-level refusals are INVALID_RECORD, with the offending record's
/// index in `record_errors` from v8 (the field does not exist before), and
/// every version still encodes.
#[tokio::test(flavor = "multi_thread")]
async fn invalid_records_are_reported_per_record_from_v8() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let mut config = broker::config::TopicConfig::default();
    config.set("cleanup.policy", "compact").unwrap();
    let topic = b
        .create_topic(
            broker::NewTopic {
                assignments: Vec::new(),
                name: model::TopicName::new("compacted").unwrap(),
                partitions: Some(1),
                replication_factor: None,
                kind: Default::default(),
                config,
            },
            false,
        )
        .unwrap();
    let mut keyless = storage::BatchBuilder::new(storage::Compression::None);
    let now = model::Timestamp(1_700_000_000_000);
    keyless.append(now, Some(b"k"), Some(b"v"), &[]).unwrap();
    keyless.append(now, None, Some(b"v"), &[]).unwrap();
    let keyless = keyless.build().unwrap().freeze();
    for version in super::produce::VERSIONS.min..=super::produce::VERSIONS.max {
        let ctx = RequestContext {
            api_key: ApiKey::Produce,
            api_version: version,
            correlation_id: 1,
            client_id: None,
            client_host: "/127.0.0.1".into(),
            listener: std::sync::Arc::from("kafka"),
            principal: std::sync::Arc::new(broker::security::Principal::anonymous()),
            request_size: 0,
        };
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("compacted"))
                .with_topic_id(topic.id.0)
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(keyless.clone()))])]);
        let Outcome::Reply(resp) = handle(&b, &ctx, RequestKind::Produce(req)).await else {
            panic!("v{version}: no reply")
        };
        frame::encode_response(&ctx, &resp)
            .unwrap_or_else(|e| panic!("v{version} does not encode: {e:#}"));
        let ResponseKind::Produce(resp) = resp else {
            panic!()
        };
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 87, "v{version}: INVALID_RECORD");
        if version >= 8 {
            assert_eq!(p.record_errors.len(), 1, "v{version}");
            assert_eq!(p.record_errors[0].batch_index, 1);
            let msg = p.record_errors[0]
                .batch_index_error_message
                .as_ref()
                .unwrap();
            assert_eq!(
                msg.as_str(),
                "Compacted topic cannot accept message without key in topic partition compacted-0."
            );
            let whole = p.error_message.as_ref().unwrap();
            assert!(whole.contains("due to 1 record errors"), "{whole}");
            assert!(
                whole.contains("RecordError(batchIndex=1, message='Compacted topic"),
                "{whole}"
            );
        } else {
            assert!(p.record_errors.is_empty());
        }
    }
    assert_eq!(
        topic
            .partition(model::PartitionId(0))
            .unwrap()
            .log()
            .log_end_offset()
            .0,
        0
    );
}
