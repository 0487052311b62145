//! Every Kafka API under the authorizer, through raw requests so each error
//! code is the one asserted: a SASL user without ACLs is refused on each
//! API with Kafka's error (TOPIC_, GROUP_, CLUSTER_ or
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED), sees no topic or group, and
//! learns nothing about what exists; then ACLs granted by the admin (the
//! PLAINTEXT listener's `User:ANONYMOUS`, a super user) open exactly what
//! they name, `authorized_operations` reports them, and a DENY for every
//! principal closes it again. `kafka_acls.rs` drives the same through real
//! clients; a broker without an authorizer answers SECURITY_DISABLED.

mod common;

use std::net::SocketAddr;

use broker::security::ScramMechanism;
use bytes::Bytes;
use common::{record_batch, BrokerProcess, RawConn};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC_AUTH: i16 = 29;
const GROUP_AUTH: i16 = 30;
const CLUSTER_AUTH: i16 = 31;
const TXN_AUTH: i16 = 53;
const SECURITY_DISABLED: i16 = 54;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

fn group(v: &str) -> GroupId {
    GroupId(s(v))
}

fn txn(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

fn sasl_addr(b: &BrokerProcess) -> SocketAddr {
    b.listener("SASL_PLAINTEXT").parse().unwrap()
}

fn broker() -> BrokerProcess {
    BrokerProcess::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",
        "group.initial.rebalance.delay.ms=0",
    ])
}

/// A SASL/PLAIN connection as `user` (password `pw`).
async fn login(addr: SocketAddr, user: &str) -> RawConn {
    let mut c = RawConn::connect(addr).await;
    let ResponseKind::SaslHandshake(h) = c
        .call(
            ApiKey::SaslHandshake,
            1,
            SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
        )
        .await
    else {
        panic!("SaslHandshake")
    };
    assert_eq!(h.error_code, 0);
    let token = format!("\0{user}\0pw");
    let ResponseKind::SaslAuthenticate(a) = c
        .call(
            ApiKey::SaslAuthenticate,
            2,
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
        )
        .await
    else {
        panic!("SaslAuthenticate")
    };
    assert_eq!(a.error_code, 0, "{user} logs in: {:?}", a.error_message);
    c
}

/// The admin's set-up: user `carol`, topic `t` with a record, group `g`
/// with a committed offset.
async fn set_up(admin: &mut RawConn) {
    let salt = b"carol-salt".to_vec();
    let salted = ScramMechanism::Sha512.salted_password(b"pw", &salt, 4096);
    let ResponseKind::AlterUserScramCredentials(r) = admin
        .call(
            ApiKey::AlterUserScramCredentials,
            0,
            AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(s("carol"))
                    .with_mechanism(2)
                    .with_iterations(4096)
                    .with_salt(Bytes::from(salt))
                    .with_salted_password(Bytes::from(salted)),
            ]),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.results[0].error_code, 0);
    let ResponseKind::CreateTopics(r) = admin
        .call(
            ApiKey::CreateTopics,
            7,
            CreateTopicsRequest::default()
                .with_topics(vec![create_topics_request::CreatableTopic::default()
                    .with_name(topic("t"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)])
                .with_timeout_ms(10_000),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 0);
    let ResponseKind::Produce(r) = admin.call(ApiKey::Produce, 9, produce("t")).await else {
        panic!()
    };
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let ResponseKind::OffsetCommit(r) = admin
        .call(ApiKey::OffsetCommit, 8, offset_commit("g", "t"))
        .await
    else {
        panic!()
    };
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
}

fn produce(t: &str) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(topic(t))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(record_batch(&[b"v"]))),
            ])])
}

fn offset_commit(g: &str, t: &str) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group(g))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ])
}

fn metadata(names: Option<&[&str]>) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(names.map(|ns| {
            ns.iter()
                .map(|n| {
                    metadata_request::MetadataRequestTopic::default().with_name(Some(topic(n)))
                })
                .collect()
        }))
        .with_allow_auto_topic_creation(true)
        .with_include_topic_authorized_operations(true)
}

fn acl(op: i8, permission: i8, principal: &str) -> CreateAclsRequest {
    CreateAclsRequest::default().with_creations(vec![create_acls_request::AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(s("t"))
        .with_resource_pattern_type(3)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(permission)])
}

/// Asserts `$conn`'s answer to `$req` matches `$pat` and yields `$code`.
macro_rules! code {
    ($conn:expr, $key:ident, $v:expr, $req:expr, $resp:ident, |$r:ident| $code:expr) => {{
        let ResponseKind::$resp($r) = $conn.call(ApiKey::$key, $v, $req).await else {
            panic!(concat!("a ", stringify!($key), " response"))
        };
        $code
    }};
}

#[tokio::test(flavor = "multi_thread")]
async fn a_principal_without_acls_is_refused_on_every_api() {
    let b = broker();
    let mut admin = RawConn::connect(b.addr).await;
    set_up(&mut admin).await;
    let mut c = login(sasl_addr(&b), "carol").await;

    // Metadata: nothing listed, a named topic refused whether it exists or
    // not, and a missing one not auto-created.
    let md = code!(c, Metadata, 12, metadata(None), Metadata, |r| r);
    assert!(md.topics.is_empty(), "carol lists {:?}", md.topics);
    let md = code!(
        c,
        Metadata,
        12,
        metadata(Some(&["t", "new-one"])),
        Metadata,
        |r| r
    );
    assert_eq!(
        md.topics.iter().map(|t| t.error_code).collect::<Vec<_>>(),
        [TOPIC_AUTH, TOPIC_AUTH]
    );
    let all = code!(admin, Metadata, 12, metadata(None), Metadata, |r| r);
    assert!(
        !all.topics.iter().any(|t| t.name == Some(topic("new-one"))),
        "auto-created without Create"
    );

    let p = code!(c, Produce, 9, produce("t"), Produce, |r| r.responses[0]
        .partition_responses[0]
        .error_code);
    assert_eq!(p, TOPIC_AUTH, "Produce");
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(topic("t"))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let f = code!(c, Fetch, 12, fetch, Fetch, |r| r.responses[0].partitions[0]
        .error_code);
    assert_eq!(f, TOPIC_AUTH, "Fetch");
    let missing = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(topic("missing"))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let f = code!(c, Fetch, 12, missing, Fetch, |r| r.responses[0].partitions
        [0]
    .error_code);
    assert_eq!(f, TOPIC_AUTH, "Fetch of a missing topic tells nothing");
    let lo = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1),
            ])]);
    let l = code!(c, ListOffsets, 7, lo, ListOffsets, |r| r.topics[0]
        .partitions[0]
        .error_code);
    assert_eq!(l, TOPIC_AUTH, "ListOffsets");
    let ofe = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                .with_topic(topic("t"))
                .with_partitions(vec![
                    offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(-1)
                        .with_leader_epoch(0),
                ]),
        ]);
    let e = code!(c, OffsetForLeaderEpoch, 4, ofe, OffsetForLeaderEpoch, |r| r
        .topics[0]
        .partitions[0]
        .error_code);
    assert_eq!(e, TOPIC_AUTH, "OffsetForLeaderEpoch");

    // Groups.
    let oc = code!(
        c,
        OffsetCommit,
        8,
        offset_commit("g", "t"),
        OffsetCommit,
        |r| r.topics[0].partitions[0].error_code
    );
    assert_eq!(oc, GROUP_AUTH, "OffsetCommit");
    let of = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(group("g"))
            .with_topics(None),
    ]);
    let o = code!(c, OffsetFetch, 8, of, OffsetFetch, |r| r.groups[0]
        .error_code);
    assert_eq!(o, GROUP_AUTH, "OffsetFetch");
    let fc = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("g")]);
    let f = code!(c, FindCoordinator, 4, fc, FindCoordinator, |r| r
        .coordinators[0]
        .error_code);
    assert_eq!(f, GROUP_AUTH, "FindCoordinator (group)");
    let fc = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s("tx")]);
    let f = code!(c, FindCoordinator, 4, fc, FindCoordinator, |r| r
        .coordinators[0]
        .error_code);
    assert_eq!(f, TXN_AUTH, "FindCoordinator (transaction)");
    let join = JoinGroupRequest::default()
        .with_group_id(group("g"))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))]);
    let j = code!(c, JoinGroup, 6, join, JoinGroup, |r| r.error_code);
    assert_eq!(j, GROUP_AUTH, "JoinGroup");
    let sync = SyncGroupRequest::default().with_group_id(group("g"));
    assert_eq!(
        code!(c, SyncGroup, 5, sync, SyncGroup, |r| r.error_code),
        GROUP_AUTH
    );
    let hb = HeartbeatRequest::default().with_group_id(group("g"));
    assert_eq!(
        code!(c, Heartbeat, 4, hb, Heartbeat, |r| r.error_code),
        GROUP_AUTH
    );
    let leave = LeaveGroupRequest::default().with_group_id(group("g"));
    assert_eq!(
        code!(c, LeaveGroup, 5, leave, LeaveGroup, |r| r.error_code),
        GROUP_AUTH
    );
    let dg = DescribeGroupsRequest::default().with_groups(vec![group("g")]);
    assert_eq!(
        code!(c, DescribeGroups, 5, dg, DescribeGroups, |r| r.groups[0]
            .error_code),
        GROUP_AUTH
    );
    let lg = code!(
        c,
        ListGroups,
        4,
        ListGroupsRequest::default(),
        ListGroups,
        |r| r
    );
    assert!(lg.groups.is_empty(), "carol lists groups {:?}", lg.groups);
    let delg = DeleteGroupsRequest::default().with_groups_names(vec![group("g")]);
    assert_eq!(
        code!(c, DeleteGroups, 2, delg, DeleteGroups, |r| r.results[0]
            .error_code),
        GROUP_AUTH
    );
    let od = OffsetDeleteRequest::default()
        .with_group_id(group("g"))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(topic("t"))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    assert_eq!(
        code!(c, OffsetDelete, 0, od, OffsetDelete, |r| r.error_code),
        GROUP_AUTH
    );
    let cgh = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group("g"))
        .with_member_id(s("m-1"))
        .with_rebalance_timeout_ms(10_000)
        .with_subscribed_topic_names(Some(vec![topic("t")]));
    assert_eq!(
        code!(
            c,
            ConsumerGroupHeartbeat,
            1,
            cgh,
            ConsumerGroupHeartbeat,
            |r| r.error_code
        ),
        GROUP_AUTH
    );
    let cgd = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group("g")]);
    assert_eq!(
        code!(
            c,
            ConsumerGroupDescribe,
            1,
            cgd,
            ConsumerGroupDescribe,
            |r| r.groups[0].error_code
        ),
        GROUP_AUTH
    );

    // Topic administration.
    let ct = CreateTopicsRequest::default()
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(topic("carols"))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(10_000);
    assert_eq!(
        code!(c, CreateTopics, 7, ct, CreateTopics, |r| r.topics[0]
            .error_code),
        TOPIC_AUTH
    );
    let dt = DeleteTopicsRequest::default()
        .with_topics(vec![
            delete_topics_request::DeleteTopicState::default().with_name(Some(topic("t")))
        ])
        .with_timeout_ms(10_000);
    assert_eq!(
        code!(c, DeleteTopics, 6, dt, DeleteTopics, |r| r.responses[0]
            .error_code),
        TOPIC_AUTH
    );
    let dr = DeleteRecordsRequest::default()
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(topic("t"))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(-1),
            ])])
        .with_timeout_ms(10_000);
    assert_eq!(
        code!(c, DeleteRecords, 2, dr, DeleteRecords, |r| r.topics[0]
            .partitions[0]
            .error_code),
        TOPIC_AUTH
    );
    let cp = CreatePartitionsRequest::default()
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic("t"))
                .with_count(2),
        ])
        .with_timeout_ms(10_000);
    assert_eq!(
        code!(c, CreatePartitions, 3, cp, CreatePartitions, |r| r.results
            [0]
        .error_code),
        TOPIC_AUTH
    );
    let dtp = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            describe_topic_partitions_request::TopicRequest::default().with_name(topic("t")),
        ])
        .with_response_partition_limit(100);
    assert_eq!(
        code!(
            c,
            DescribeTopicPartitions,
            0,
            dtp,
            DescribeTopicPartitions,
            |r| r.topics[0].error_code
        ),
        TOPIC_AUTH
    );
    let dp = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(topic("t"))
            .with_partition_indexes(vec![0]),
    ]);
    assert_eq!(
        code!(c, DescribeProducers, 0, dp, DescribeProducers, |r| r.topics
            [0]
        .partitions[0]
            .error_code),
        TOPIC_AUTH
    );

    // Configs: a topic's on the topic, the broker's on the cluster.
    let dc = |t: i8, n: &str| {
        DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(t)
                .with_resource_name(s(n)),
        ])
    };
    assert_eq!(
        code!(c, DescribeConfigs, 4, dc(2, "t"), DescribeConfigs, |r| r
            .results[0]
            .error_code),
        TOPIC_AUTH
    );
    assert_eq!(
        code!(c, DescribeConfigs, 4, dc(4, "1"), DescribeConfigs, |r| r
            .results[0]
            .error_code),
        CLUSTER_AUTH
    );
    let ac = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t")),
    ]);
    assert_eq!(
        code!(c, AlterConfigs, 2, ac, AlterConfigs, |r| r.responses[0]
            .error_code),
        TOPIC_AUTH
    );
    let iac = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("1")),
    ]);
    assert_eq!(
        code!(
            c,
            IncrementalAlterConfigs,
            1,
            iac,
            IncrementalAlterConfigs,
            |r| r.responses[0].error_code
        ),
        CLUSTER_AUTH
    );
    let lcr = ListConfigResourcesRequest::default();
    assert_eq!(
        code!(c, ListConfigResources, 1, lcr, ListConfigResources, |r| r
            .error_code),
        CLUSTER_AUTH
    );

    // Producers and transactions.
    let idem = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    assert_eq!(
        code!(c, InitProducerId, 4, idem.clone(), InitProducerId, |r| r
            .error_code),
        CLUSTER_AUTH,
        "an idempotent producer needs IdempotentWrite or Write on a topic"
    );
    let tx = idem
        .with_transactional_id(Some(txn("tx")))
        .with_transaction_timeout_ms(10_000);
    assert_eq!(
        code!(c, InitProducerId, 4, tx, InitProducerId, |r| r.error_code),
        TXN_AUTH
    );
    let apt = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn("tx"))
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic("t"))
                .with_partitions(vec![0]),
        ]);
    assert_eq!(
        code!(c, AddPartitionsToTxn, 3, apt, AddPartitionsToTxn, |r| r
            .results_by_topic_v3_and_below[0]
            .results_by_partition[0]
            .partition_error_code),
        TXN_AUTH
    );
    let aot = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn("tx"))
        .with_group_id(group("g"));
    assert_eq!(
        code!(c, AddOffsetsToTxn, 3, aot, AddOffsetsToTxn, |r| r
            .error_code),
        TXN_AUTH
    );
    let end = EndTxnRequest::default().with_transactional_id(txn("tx"));
    assert_eq!(code!(c, EndTxn, 3, end, EndTxn, |r| r.error_code), TXN_AUTH);
    let toc = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn("tx"))
        .with_group_id(group("g"))
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic("t"))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    assert_eq!(
        code!(c, TxnOffsetCommit, 3, toc, TxnOffsetCommit, |r| r.topics[0]
            .partitions[0]
            .error_code),
        TXN_AUTH
    );
    let dtx = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn("tx")]);
    assert_eq!(
        code!(c, DescribeTransactions, 0, dtx, DescribeTransactions, |r| r
            .transaction_states[0]
            .error_code),
        TXN_AUTH
    );

    // The cluster.
    let cluster =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    assert_eq!(
        code!(c, DescribeCluster, 1, cluster, DescribeCluster, |r| r
            .cluster_authorized_operations),
        0,
        "no cluster operation is authorized"
    );
    let dl = DescribeLogDirsRequest::default().with_topics(None);
    assert_eq!(
        code!(c, DescribeLogDirs, 4, dl, DescribeLogDirs, |r| r.error_code),
        CLUSTER_AUTH
    );
    let el = ElectLeadersRequest::default().with_topic_partitions(None);
    assert_eq!(
        code!(c, ElectLeaders, 2, el, ElectLeaders, |r| r.error_code),
        CLUSTER_AUTH
    );
    let apr = AlterPartitionReassignmentsRequest::default();
    assert_eq!(
        code!(
            c,
            AlterPartitionReassignments,
            0,
            apr,
            AlterPartitionReassignments,
            |r| r.error_code
        ),
        CLUSTER_AUTH
    );
    let lpr = ListPartitionReassignmentsRequest::default();
    assert_eq!(
        code!(
            c,
            ListPartitionReassignments,
            0,
            lpr,
            ListPartitionReassignments,
            |r| r.error_code
        ),
        CLUSTER_AUTH
    );
    // ClusterAction: what a transaction coordinator (or an operator's
    // abort) needs to write markers.
    let wtm = kafka_protocol::messages::WriteTxnMarkersRequest::default().with_markers(vec![
        kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker::default()
            .with_producer_id(kafka_protocol::messages::ProducerId(1))
            .with_topics(vec![
                kafka_protocol::messages::write_txn_markers_request::WritableTxnMarkerTopic::default()
                    .with_name(topic("t"))
                    .with_partition_indexes(vec![0]),
            ]),
    ]);
    assert_eq!(
        code!(c, WriteTxnMarkers, 1, wtm, WriteTxnMarkers, |r| r.markers
            [0]
        .topics[0]
            .partitions[0]
            .error_code),
        CLUSTER_AUTH
    );
    let apt = kafka_protocol::messages::AddPartitionsToTxnRequest::default().with_transactions(vec![
        kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn("tx"))
            .with_verify_only(true),
    ]);
    assert_eq!(
        code!(c, AddPartitionsToTxn, 4, apt, AddPartitionsToTxn, |r| r
            .error_code),
        CLUSTER_AUTH,
        "the brokers' form of AddPartitionsToTxn"
    );
    let dq = DescribeQuorumRequest::default();
    assert_eq!(
        code!(c, DescribeQuorum, 1, dq, DescribeQuorum, |r| r.error_code),
        CLUSTER_AUTH
    );
    let dus = DescribeUserScramCredentialsRequest::default();
    assert_eq!(
        code!(
            c,
            DescribeUserScramCredentials,
            0,
            dus,
            DescribeUserScramCredentials,
            |r| r.error_code
        ),
        CLUSTER_AUTH
    );
    let aus = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
            .with_name(s("carol"))
            .with_mechanism(2),
    ]);
    assert_eq!(
        code!(
            c,
            AlterUserScramCredentials,
            0,
            aus,
            AlterUserScramCredentials,
            |r| r.results[0].error_code
        ),
        CLUSTER_AUTH
    );
    assert_eq!(
        code!(c, CreateAcls, 3, acl(3, 3, "User:carol"), CreateAcls, |r| r
            .results[0]
            .error_code),
        CLUSTER_AUTH
    );
    let any = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    assert_eq!(
        code!(c, DescribeAcls, 3, any.clone(), DescribeAcls, |r| r
            .error_code),
        CLUSTER_AUTH
    );
    let del = DeleteAclsRequest::default().with_filters(vec![
        delete_acls_request::DeleteAclsFilter::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1),
    ]);
    assert_eq!(
        code!(c, DeleteAcls, 3, del, DeleteAcls, |r| r.filter_results[0]
            .error_code),
        CLUSTER_AUTH
    );

    // Nothing carol did changed anything.
    let all = code!(admin, Metadata, 12, metadata(None), Metadata, |r| r);
    let names: Vec<_> = all.topics.iter().filter_map(|t| t.name.clone()).collect();
    assert!(
        names.contains(&topic("t")) && !names.contains(&topic("carols")),
        "{names:?}"
    );
    let ac = code!(admin, DescribeAcls, 3, any.clone(), DescribeAcls, |r| r);
    assert_eq!((ac.error_code, ac.resources.len()), (0, 0));

    // Read on `t` (which implies Describe): listed, with exactly those
    // operations; still no Write.
    assert_eq!(
        code!(
            admin,
            CreateAcls,
            3,
            acl(3, 3, "User:carol"),
            CreateAcls,
            |r| r.results[0].error_code
        ),
        0
    );
    let md = code!(c, Metadata, 12, metadata(None), Metadata, |r| r);
    assert_eq!(md.topics.len(), 1);
    assert_eq!(md.topics[0].name, Some(topic("t")));
    assert_eq!(
        md.topics[0].topic_authorized_operations,
        (1 << 3) | (1 << 8),
        "Read and the Describe it implies"
    );
    let p = code!(c, Produce, 9, produce("t"), Produce, |r| r.responses[0]
        .partition_responses[0]
        .error_code);
    assert_eq!(p, TOPIC_AUTH, "Read does not allow Produce");
    // A DENY of Describe for every principal wins over carol's Read (for
    // Describe; the DENY does not reach Read itself).
    assert_eq!(
        code!(admin, CreateAcls, 3, acl(8, 2, "User:*"), CreateAcls, |r| r
            .results[0]
            .error_code),
        0
    );
    let md = code!(c, Metadata, 12, metadata(None), Metadata, |r| r);
    assert!(
        md.topics.is_empty(),
        "DENY Describe hides t: {:?}",
        md.topics
    );
    let ac = code!(admin, DescribeAcls, 3, any, DescribeAcls, |r| r);
    assert_eq!(ac.resources.len(), 1, "one resource pattern");
    assert_eq!(ac.resources[0].acls.len(), 2, "two ACLs on it");

    // A regex subscription is assigned only topics carol may Describe: `u`
    // (granted), never `t` (denied to everyone).
    let ResponseKind::CreateTopics(r) = admin
        .call(
            ApiKey::CreateTopics,
            7,
            CreateTopicsRequest::default()
                .with_topics(vec![create_topics_request::CreatableTopic::default()
                    .with_name(topic("u"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)])
                .with_timeout_ms(10_000),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 0);
    let u_id = r.topics[0].topic_id;
    let mut grant = acl(8, 3, "User:carol");
    grant.creations[0].resource_name = s("u");
    let mut group_read = acl(3, 3, "User:carol");
    group_read.creations[0].resource_type = 3;
    group_read.creations[0].resource_name = s("rg");
    for req in [grant, group_read] {
        assert_eq!(
            code!(admin, CreateAcls, 3, req, CreateAcls, |r| r.results[0]
                .error_code),
            0
        );
    }
    let t_id = code!(admin, Metadata, 12, metadata(Some(&["t"])), Metadata, |r| r
        .topics[0]
        .topic_id);
    let mut epoch = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let hb = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group("rg"))
            .with_member_id(s("carol-member"))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(10_000)
            .with_subscribed_topic_regex(Some(s(".*")));
        let r = code!(
            c,
            ConsumerGroupHeartbeat,
            1,
            hb,
            ConsumerGroupHeartbeat,
            |r| r
        );
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        epoch = r.member_epoch;
        let assigned: Vec<_> = r
            .assignment
            .iter()
            .flat_map(|a| a.topic_partitions.iter().map(|tp| tp.topic_id))
            .collect();
        assert!(
            !assigned.contains(&t_id),
            "a regex assigned the hidden topic t"
        );
        if assigned.contains(&u_id) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "u never assigned to the regex subscription"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Without `authorizer.class.name` the ACL APIs answer SECURITY_DISABLED,
/// as Kafka does, and every client may do everything.
#[tokio::test(flavor = "multi_thread")]
async fn without_an_authorizer_acl_requests_answer_security_disabled() {
    let b = BrokerProcess::start(&[]);
    let mut c = RawConn::connect(b.addr).await;
    assert_eq!(
        code!(c, CreateAcls, 3, acl(3, 3, "User:carol"), CreateAcls, |r| r
            .results[0]
            .error_code),
        SECURITY_DISABLED
    );
    let any = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    assert_eq!(
        code!(c, DescribeAcls, 3, any, DescribeAcls, |r| r.error_code),
        SECURITY_DISABLED
    );
    let cluster =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let ops = code!(c, DescribeCluster, 1, cluster, DescribeCluster, |r| r
        .cluster_authorized_operations);
    assert_ne!(
        ops & (1 << 7),
        0,
        "Alter on the cluster is allowed: {ops:#b}"
    );
}

/// `allow.everyone.if.no.acl.found=true`: a resource no ACL names is open,
/// one with ACLs is closed to principals they do not name.
#[tokio::test(flavor = "multi_thread")]
async fn allow_everyone_if_no_acl_found_opens_only_unnamed_resources() {
    let b = BrokerProcess::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:ANONYMOUS",
        "allow.everyone.if.no.acl.found=true",
    ]);
    let mut admin = RawConn::connect(b.addr).await;
    set_up(&mut admin).await;
    let mut c = login(sasl_addr(&b), "carol").await;
    let p = code!(c, Produce, 9, produce("t"), Produce, |r| r.responses[0]
        .partition_responses[0]
        .error_code);
    assert_eq!(p, 0, "no ACL names t: open");
    assert_eq!(
        code!(
            admin,
            CreateAcls,
            3,
            acl(4, 3, "User:dave"),
            CreateAcls,
            |r| r.results[0].error_code
        ),
        0
    );
    let p = code!(c, Produce, 9, produce("t"), Produce, |r| r.responses[0]
        .partition_responses[0]
        .error_code);
    assert_eq!(p, TOPIC_AUTH, "t has an ACL for dave only");
}
