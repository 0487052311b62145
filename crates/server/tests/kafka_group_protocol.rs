//! Group protocol edges with raw requests (what real clients rarely send):
//! batched FindCoordinator, bad JoinGroup/Heartbeat input that must not
//! disturb a live librdkafka member, protocol coexistence, multi-group
//! OffsetFetch, and group administration.

mod common;
mod groups;

use std::time::Duration;

use common::{eventually, BrokerProcess, RawConn};
use groups::{classic_config, consumer_protocol_config, create_topics, GroupConsumer};
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};

const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const INVALID_GROUP_ID: i16 = 24;
const UNKNOWN_MEMBER_ID: i16 = 25;
const ILLEGAL_GENERATION: i16 = 22;
const INVALID_REQUEST: i16 = 42;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const MEMBER_ID_REQUIRED: i16 = 79;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn broker() -> BrokerProcess {
    BrokerProcess::start(&[
        "group.initial.rebalance.delay.ms=100",
        "group.min.session.timeout.ms=1000",
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn find_coordinator_answers_one_hundred_keys_in_one_request() {
    let broker = broker();
    let mut conn = RawConn::connect(broker.addr).await;
    let mut keys: Vec<StrBytes> = (0..100).map(|i| s(&format!("group-{i}"))).collect();
    keys.push(StrBytes::new());
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(keys.clone());
    let ResponseKind::FindCoordinator(resp) = conn.call(ApiKey::FindCoordinator, 4, req).await
    else {
        panic!()
    };
    assert_eq!(resp.coordinators.len(), 101, "one entry per key");
    for (c, k) in resp.coordinators.iter().zip(&keys) {
        assert_eq!(&c.key, k);
        if k.is_empty() {
            assert_eq!(c.error_code, INVALID_REQUEST, "an empty key fails alone");
        } else {
            assert_eq!(c.error_code, 0);
            assert_eq!(c.node_id.0, 1);
            assert_eq!(
                (c.host.as_str(), c.port),
                ("127.0.0.1", broker.addr.port() as i32)
            );
        }
    }
    // Transaction keys are answered too; v3 single-key form still works.
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s("txn-1")]);
    let ResponseKind::FindCoordinator(resp) = conn.call(ApiKey::FindCoordinator, 6, req).await
    else {
        panic!()
    };
    assert_eq!(resp.coordinators[0].error_code, 0);
    let req = FindCoordinatorRequest::default().with_key(s("old-style"));
    let ResponseKind::FindCoordinator(resp) = conn.call(ApiKey::FindCoordinator, 3, req).await
    else {
        panic!()
    };
    assert_eq!((resp.error_code, resp.node_id.0), (0, 1));
}

fn join(group: &str, member: &str, protocol_type: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_session_timeout_ms(6000)
        .with_rebalance_timeout_ms(6000)
        .with_protocol_type(s(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::from_static(&[
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ]))])
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_group_requests_get_their_errors_and_leave_members_undisturbed() {
    let broker = broker();
    let b = broker.bootstrap();
    create_topics(&b, &[("steady", 2)]).await;
    let member = GroupConsumer::start(classic_config(&b, "steady-g"), &["steady"]);
    eventually(Duration::from_secs(30), "live member assigned", || {
        let n = member.assignment().len();
        async move { (n == 2).then_some(()) }
    })
    .await;
    let events_before = member.events();

    let mut conn = RawConn::connect(broker.addr).await;
    // Unknown protocol type for an existing consumer group.
    let ResponseKind::JoinGroup(r) = conn
        .call(ApiKey::JoinGroup, 5, join("steady-g", "", "not-a-consumer"))
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, INCONSISTENT_GROUP_PROTOCOL);
    // Empty group id.
    let ResponseKind::JoinGroup(r) = conn
        .call(ApiKey::JoinGroup, 5, join("", "", "consumer"))
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, INVALID_GROUP_ID);
    // A member id never issued.
    let ResponseKind::JoinGroup(r) = conn
        .call(
            ApiKey::JoinGroup,
            5,
            join("steady-g", "made-up-member", "consumer"),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID);
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("steady-g")))
        .with_member_id(s("made-up-member"))
        .with_generation_id(1);
    let ResponseKind::Heartbeat(r) = conn.call(ApiKey::Heartbeat, 4, hb).await else {
        panic!()
    };
    assert_eq!(r.error_code, UNKNOWN_MEMBER_ID);

    // A wrong generation, from a member that does exist (join properly first
    // in another group so the live one is untouched).
    let ResponseKind::JoinGroup(r) = conn
        .call(ApiKey::JoinGroup, 5, join("side-g", "", "consumer"))
        .await
    else {
        panic!()
    };
    assert_eq!(
        r.error_code, MEMBER_ID_REQUIRED,
        "v4+ joins get a member id first"
    );
    let id = r.member_id.clone();
    let ResponseKind::JoinGroup(r) = conn
        .call(
            ApiKey::JoinGroup,
            5,
            join("side-g", id.as_str(), "consumer"),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("side-g")))
        .with_member_id(id.clone())
        .with_generation_id(r.generation_id + 7);
    let ResponseKind::Heartbeat(r) = conn.call(ApiKey::Heartbeat, 4, hb).await else {
        panic!()
    };
    assert_eq!(r.error_code, ILLEGAL_GENERATION);

    // The live member saw no rebalance and still owns its partitions.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        member.events(),
        events_before,
        "no rebalance for the live member"
    );
    assert_eq!(member.assignment().len(), 2);
    member.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn protocols_coexist_and_refuse_each_others_groups() {
    let broker = broker();
    let b = broker.bootstrap();
    create_topics(&b, &[("mixed", 1)]).await;
    let classic = GroupConsumer::start(classic_config(&b, "classic-g"), &["mixed"]);
    let modern = GroupConsumer::start(consumer_protocol_config(&b, "modern-g"), &["mixed"]);
    eventually(Duration::from_secs(30), "both groups assigned", || {
        let ok = classic.assignment().len() == 1 && modern.assignment().len() == 1;
        async move { ok.then_some(()) }
    })
    .await;
    let mut conn = RawConn::connect(broker.addr).await;
    let hb = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("classic-g")))
        .with_member_id(s("m-1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(5000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("mixed"))]));
    let ResponseKind::ConsumerGroupHeartbeat(r) =
        conn.call(ApiKey::ConsumerGroupHeartbeat, 1, hb).await
    else {
        panic!()
    };
    assert_eq!(r.error_code, GROUP_ID_NOT_FOUND);
    let ResponseKind::JoinGroup(r) = conn
        .call(ApiKey::JoinGroup, 5, join("modern-g", "", "consumer"))
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, INCONSISTENT_GROUP_PROTOCOL);

    // ListGroups / DescribeGroups / ConsumerGroupDescribe see both kinds.
    let ResponseKind::ListGroups(r) = conn
        .call(ApiKey::ListGroups, 5, ListGroupsRequest::default())
        .await
    else {
        panic!()
    };
    let mut listed: Vec<(String, String)> = r
        .groups
        .iter()
        .map(|g| (g.group_id.to_string(), g.group_type.to_string()))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("classic-g".into(), "classic".into()),
            ("modern-g".into(), "consumer".into())
        ]
    );
    let req = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s("modern-g")), GroupId(s("classic-g"))]);
    let ResponseKind::ConsumerGroupDescribe(r) =
        conn.call(ApiKey::ConsumerGroupDescribe, 0, req).await
    else {
        panic!()
    };
    assert_eq!(r.groups[0].error_code, 0);
    assert_eq!(r.groups[0].members.len(), 1);
    assert_eq!(
        r.groups[0].members[0].assignment.topic_partitions[0]
            .topic_name
            .as_str(),
        "mixed"
    );
    assert_eq!(r.groups[1].error_code, GROUP_ID_NOT_FOUND);
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("classic-g"))]);
    let ResponseKind::DescribeGroups(r) = conn.call(ApiKey::DescribeGroups, 5, req).await else {
        panic!()
    };
    assert_eq!(r.groups[0].group_state.as_str(), "Stable");
    assert_eq!(r.groups[0].protocol_type.as_str(), "consumer");
    assert_eq!(r.groups[0].members.len(), 1);
    classic.close().await;
    modern.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn offsets_admin_multi_group_fetch_delete() {
    let broker = broker();
    let b = broker.bootstrap();
    create_topics(&b, &[("acct", 2)]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    // "Simple" commits (no membership) for two groups.
    for (g, off) in [("g-a", 11), ("g-b", 22)] {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(g)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("acct")))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(off),
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(9)
                        .with_committed_offset(1),
                ])]);
        let ResponseKind::OffsetCommit(r) = conn.call(ApiKey::OffsetCommit, 8, req).await else {
            panic!()
        };
        let codes: Vec<i16> = r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, vec![0, 3], "partition 9 does not exist");
    }
    let wanted = || {
        Some(vec![OffsetFetchRequestTopics::default()
            .with_name(TopicName(s("acct")))
            .with_partition_indexes(vec![0, 1])])
    };
    let req = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g-a")))
            .with_topics(wanted()),
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g-b")))
            .with_topics(wanted()),
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g-none")))
            .with_topics(wanted()),
    ]);
    let ResponseKind::OffsetFetch(r) = conn.call(ApiKey::OffsetFetch, 8, req).await else {
        panic!()
    };
    let got: Vec<(String, Vec<i64>)> = r
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.topics[0]
                    .partitions
                    .iter()
                    .map(|p| p.committed_offset)
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("g-a".into(), vec![11, -1]),
            ("g-b".into(), vec![22, -1]),
            ("g-none".into(), vec![-1, -1])
        ]
    );

    // OffsetDelete, then DeleteGroups via librdkafka's admin client.
    let req = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s("g-a")))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(TopicName(s("acct")))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    let ResponseKind::OffsetDelete(r) = conn.call(ApiKey::OffsetDelete, 0, req).await else {
        panic!()
    };
    assert_eq!((r.error_code, r.topics[0].partitions[0].error_code), (0, 0));
    let admin: AdminClient<DefaultClientContext> = common::client_config(&b).create().unwrap();
    let r = admin
        .delete_groups(&["g-b", "g-missing"], &AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    assert!(r[1].is_err());

    // A group with members cannot be deleted.
    let member = GroupConsumer::start(classic_config(&b, "busy-g"), &["acct"]);
    eventually(Duration::from_secs(30), "busy-g assigned", || {
        let n = member.assignment().len();
        async move { (n == 2).then_some(()) }
    })
    .await;
    let ResponseKind::DeleteGroups(r) = conn
        .call(
            ApiKey::DeleteGroups,
            2,
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("busy-g"))]),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.results[0].error_code, NON_EMPTY_GROUP);
    let lister: BaseConsumer = common::client_config(&b).create().unwrap();
    let groups = lister
        .fetch_group_list(None, Duration::from_secs(10))
        .unwrap();
    let names: Vec<&str> = groups.groups().iter().map(|g| g.name()).collect();
    assert!(
        names.contains(&"busy-g") && names.contains(&"g-a") && !names.contains(&"g-b"),
        "{names:?}"
    );
    member.close().await;
}
