//! The admin APIs a single-node Kafka answers, through raw requests (the
//! `rdkafka` crate wraps none of them; kafka-python's admin client drives
//! the same APIs in `python_clients.rs`): DescribeLogDirs,
//! AlterReplicaLogDirs, DescribeTopicPartitions paging, ListConfigResources,
//! ElectLeaders, Alter/ListPartitionReassignments, DescribeProducers,
//! DescribeCluster's endpoint type, and manual replica assignments.

mod common;

use std::time::Duration;

use common::{client_config, idempotent_batch, BrokerProcess, RawConn};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::describe_producers_request::TopicRequest as ProducersTopic;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn create(b: &BrokerProcess, topics: &[(&str, i32)]) {
    let a: AdminClient<DefaultClientContext> = client_config(&b.bootstrap()).create().unwrap();
    let new: Vec<_> = topics
        .iter()
        .map(|(t, n)| NewTopic::new(t, *n, TopicReplication::Fixed(1)))
        .collect();
    let r = a
        .create_topics(
            &new,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .unwrap();
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
}

async fn describe_partitions(
    conn: &mut RawConn,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default()
                .with_topic_name(name(t))
                .with_partition_index(p)
        }));
    let ResponseKind::DescribeTopicPartitions(r) =
        conn.call(ApiKey::DescribeTopicPartitions, 0, req).await
    else {
        panic!()
    };
    r
}

/// (topic, partitions, error) of a page, and where the next one starts.
type Page = (Vec<(String, Vec<i32>, i16)>, Option<(String, i32)>);

fn page(r: &DescribeTopicPartitionsResponse) -> Page {
    (
        r.topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                    t.error_code,
                )
            })
            .collect(),
        r.next_cursor
            .as_ref()
            .map(|c| (c.topic_name.to_string(), c.partition_index)),
    )
}

/// KIP-966 paging as Kafka's `DescribeTopicPartitionsRequestHandlerTest`
/// walks it: name order, the cursor's topic resumed at its partition, the
/// next cursor at the first partition not answered, unknown topics named
/// with UNKNOWN_TOPIC_OR_PARTITION, a cursor outside the list refused.
#[tokio::test(flavor = "multi_thread")]
async fn describe_topic_partitions_pages_with_a_cursor() {
    let broker = BrokerProcess::start(&[]);
    create(&broker, &[("pa", 3), ("pb", 2), ("pc", 1)]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    let topics = ["pc", "pa", "missing", "pb"];
    let s = |n: &str| n.to_string();
    let r = describe_partitions(&mut conn, &topics, 2, None).await;
    assert_eq!(
        page(&r),
        (
            vec![(s("missing"), vec![], 3), (s("pa"), vec![0, 1], 0)],
            Some((s("pa"), 2))
        )
    );
    let t = &r.topics[1];
    assert!(!t.topic_id.is_nil() && !t.is_internal);
    let p = &t.partitions[0];
    assert_eq!((p.leader_id.0, p.leader_epoch), (1, 0));
    assert_eq!(p.replica_nodes, vec![BrokerId(1)]);
    assert_eq!(p.isr_nodes, vec![BrokerId(1)]);
    assert_eq!(p.eligible_leader_replicas, Some(vec![]));
    let r = describe_partitions(&mut conn, &topics, 2, Some(("pa", 2))).await;
    assert_eq!(
        page(&r),
        (
            vec![(s("pa"), vec![2], 0), (s("pb"), vec![0], 0)],
            Some((s("pb"), 1))
        )
    );
    let r = describe_partitions(&mut conn, &topics, 2, Some(("pb", 1))).await;
    assert_eq!(
        page(&r),
        (vec![(s("pb"), vec![1], 0), (s("pc"), vec![0], 0)], None)
    );
    // The limit reached at a topic's end: the cursor points at the next one.
    let r = describe_partitions(&mut conn, &["pa", "pb"], 3, None).await;
    assert_eq!(
        page(&r),
        (vec![(s("pa"), vec![0, 1, 2], 0)], Some((s("pb"), 0)))
    );
    // Every topic (none named): unknown names never appear.
    let r = describe_partitions(&mut conn, &[], 2000, Some(("pb", 0))).await;
    assert_eq!(
        page(&r),
        (vec![(s("pb"), vec![0, 1], 0), (s("pc"), vec![0], 0)], None)
    );
    // A cursor topic that is not in the list.
    let r = describe_partitions(&mut conn, &["pa", "pc"], 10, Some(("pb", 0))).await;
    assert!(
        r.topics.iter().all(|t| t.error_code == 42),
        "{:?}",
        page(&r)
    );
}

/// Manual replica assignments naming a broker that does not exist, twice
/// the same broker, or too few assignments are INVALID_REPLICA_ASSIGNMENT,
/// as Kafka's controller answers (CreateTopics and CreatePartitions).
#[tokio::test(flavor = "multi_thread")]
async fn manual_assignments_are_checked_against_the_brokers() {
    let broker = BrokerProcess::start(&[]);
    create(&broker, &[("grow", 1)]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    let grow = |count: i32, assignments: Option<Vec<Vec<i32>>>| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(name("grow"))
                .with_count(count)
                .with_assignments(assignments.map(|a| {
                    a.into_iter()
                        .map(|ids| {
                            CreatePartitionsAssignment::default()
                                .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                        })
                        .collect()
                }))])
    };
    for (count, assignments, code) in [
        (2, Some(vec![vec![2]]), 39),
        (2, Some(vec![vec![1, 1]]), 39),
        (2, Some(vec![vec![]]), 39),
        (3, Some(vec![vec![1]]), 39),
        (1, Some(vec![vec![1]]), 37),
        (3, Some(vec![vec![1], vec![1]]), 0),
        (4, None, 0),
    ] {
        let ResponseKind::CreatePartitions(r) = conn
            .call(
                ApiKey::CreatePartitions,
                3,
                grow(count, assignments.clone()),
            )
            .await
        else {
            panic!()
        };
        let res = &r.results[0];
        assert_eq!(
            res.error_code, code,
            "{count} {assignments:?}: {:?}",
            res.error_message
        );
    }
    let ResponseKind::CreatePartitions(r) = conn
        .call(ApiKey::CreatePartitions, 3, grow(5, Some(vec![vec![7]])))
        .await
    else {
        panic!()
    };
    let msg = r.results[0].error_message.as_ref().unwrap().to_string();
    assert!(msg.contains("broker 7"), "{msg}");

    let topic = |assignments: Vec<(i32, Vec<i32>)>| {
        CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name("assigned"))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(
                    assignments
                        .into_iter()
                        .map(|(p, ids)| {
                            CreatableReplicaAssignment::default()
                                .with_partition_index(p)
                                .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                        })
                        .collect(),
                )])
    };
    for (assignments, code) in [
        (vec![(0, vec![3])], 39),
        (vec![(0, vec![1]), (0, vec![1])], 39),
        (vec![(1, vec![1])], 39),
        (vec![(0, vec![1]), (1, vec![1])], 0),
    ] {
        let ResponseKind::CreateTopics(r) = conn
            .call(ApiKey::CreateTopics, 7, topic(assignments.clone()))
            .await
        else {
            panic!()
        };
        assert_eq!(r.topics[0].error_code, code, "{assignments:?}");
    }
}

/// ElectLeaders, reassignments and log dirs answered as a one-broker Kafka
/// does (kafka-python's `test_elect_leaders`,
/// `test_alter_partition_reassignments`, `test_describe_log_dirs` against a
/// single broker).
#[tokio::test(flavor = "multi_thread")]
async fn single_node_elections_reassignments_and_log_dirs() {
    let broker = BrokerProcess::start(&[]);
    create(&broker, &[("ops", 2)]).await;
    let mut conn = RawConn::connect(broker.addr).await;

    let elect = |partitions: Option<Vec<(&str, Vec<i32>)>>| {
        ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(5000)
            .with_topic_partitions(partitions.map(|tp| {
                tp.into_iter()
                    .map(|(t, p)| {
                        TopicPartitions::default()
                            .with_topic(name(t))
                            .with_partitions(p)
                    })
                    .collect()
            }))
    };
    let ResponseKind::ElectLeaders(r) = conn
        .call(
            ApiKey::ElectLeaders,
            2,
            elect(Some(vec![("ops", vec![0, 1, 5]), ("nope", vec![0])])),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    let codes: Vec<Vec<i16>> = r
        .replica_election_results
        .iter()
        .map(|t| t.partition_result.iter().map(|p| p.error_code).collect())
        .collect();
    assert_eq!(codes, vec![vec![84, 84, 3], vec![3]], "ELECTION_NOT_NEEDED");
    let ResponseKind::ElectLeaders(r) = conn.call(ApiKey::ElectLeaders, 2, elect(None)).await
    else {
        panic!()
    };
    let ops = r
        .replica_election_results
        .iter()
        .find(|t| t.topic.as_str() == "ops")
        .expect("every topic listed");
    assert!(ops.partition_result.is_empty(), "no partition needed one");

    let reassign = |replicas: Option<Vec<i32>>, topic: &str| {
        AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![ReassignableTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(1)
                    .with_replicas(
                        replicas.map(|r| r.into_iter().map(BrokerId).collect()),
                    )])])
    };
    for (replicas, topic, code) in [
        (Some(vec![1]), "ops", 0),
        (Some(vec![2]), "ops", 39),
        (Some(vec![1, 1]), "ops", 39),
        (None, "ops", 85),
        (Some(vec![1]), "nope", 3),
    ] {
        let ResponseKind::AlterPartitionReassignments(r) = conn
            .call(
                ApiKey::AlterPartitionReassignments,
                0,
                reassign(replicas.clone(), topic),
            )
            .await
        else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        assert_eq!(
            r.responses[0].partitions[0].error_code, code,
            "{replicas:?} {topic}"
        );
    }
    let ResponseKind::ListPartitionReassignments(r) = conn
        .call(
            ApiKey::ListPartitionReassignments,
            0,
            ListPartitionReassignmentsRequest::default().with_topics(None),
        )
        .await
    else {
        panic!()
    };
    assert_eq!((r.error_code, r.topics.len()), (0, 0));

    // Log dirs: the data directory, with the partitions' sizes.
    let producer: rdkafka::producer::FutureProducer =
        client_config(&broker.bootstrap()).create().unwrap();
    producer
        .send(
            rdkafka::producer::FutureRecord::to("ops")
                .partition(1)
                .key("k")
                .payload("v"),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    let ResponseKind::DescribeLogDirs(r) = conn
        .call(
            ApiKey::DescribeLogDirs,
            4,
            DescribeLogDirsRequest::default().with_topics(None),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(r.results.len(), 1);
    let dir = &r.results[0];
    assert_eq!(dir.error_code, 0);
    let data_dir = std::fs::canonicalize(broker.dir()).unwrap();
    assert_eq!(
        std::fs::canonicalize(dir.log_dir.as_str()).unwrap(),
        data_dir
    );
    assert!(dir.total_bytes > 0 && dir.usable_bytes > 0 && dir.usable_bytes <= dir.total_bytes);
    let ops = dir
        .topics
        .iter()
        .find(|t| t.name.as_str() == "ops")
        .unwrap();
    let sizes: Vec<(i32, i64)> = ops
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.partition_size))
        .collect();
    assert_eq!(sizes.len(), 2);
    assert_eq!(sizes[0], (0, 0));
    assert!(sizes[1].0 == 1 && sizes[1].1 > 0, "{sizes:?}");

    let move_to = |path: String, partitions: Vec<i32>| {
        AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
            .with_path(StrBytes::from_string(path))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(name("ops"))
                .with_partitions(partitions)])])
    };
    for (path, codes) in [
        (data_dir.display().to_string(), vec![0, 0, 9]),
        ("/tmp/not-a-log-dir".to_string(), vec![57, 57, 57]),
    ] {
        let ResponseKind::AlterReplicaLogDirs(r) = conn
            .call(
                ApiKey::AlterReplicaLogDirs,
                2,
                move_to(path.clone(), vec![0, 1, 4]),
            )
            .await
        else {
            panic!()
        };
        let got: Vec<i16> = r.results[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(got, codes, "{path}");
    }
}

/// DescribeProducers reports an idempotent producer's id, epoch, last
/// sequence and time per partition (kafka-python's
/// `test_describe_producers`), UNKNOWN_TOPIC_OR_PARTITION for a partition
/// that does not exist.
#[tokio::test(flavor = "multi_thread")]
async fn describe_producers_reports_idempotent_producer_state() {
    let broker = BrokerProcess::start(&[]);
    create(&broker, &[("idem", 2)]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    let ResponseKind::InitProducerId(init) = conn
        .call(
            ApiKey::InitProducerId,
            4,
            InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await
    else {
        panic!()
    };
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    for seq in [0, 3] {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("idem"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(1)
                    .with_records(Some(idempotent_batch(
                        &[b"a", b"b", b"c"],
                        pid,
                        epoch,
                        seq,
                    )))])]);
        let ResponseKind::Produce(r) = conn.call(ApiKey::Produce, 9, req).await else {
            panic!()
        };
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    let ResponseKind::DescribeProducers(r) = conn
        .call(
            ApiKey::DescribeProducers,
            0,
            DescribeProducersRequest::default().with_topics(vec![
                ProducersTopic::default()
                    .with_name(name("idem"))
                    .with_partition_indexes(vec![0, 1, 9]),
                ProducersTopic::default()
                    .with_name(name("nope"))
                    .with_partition_indexes(vec![0]),
            ]),
        )
        .await
    else {
        panic!()
    };
    let parts = &r.topics[0].partitions;
    assert_eq!(
        (parts[0].error_code, parts[0].active_producers.len()),
        (0, 0)
    );
    assert_eq!(parts[1].error_code, 0);
    let p = &parts[1].active_producers;
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].producer_id.0, p[0].producer_epoch),
        (pid, i32::from(epoch))
    );
    assert_eq!(p[0].last_sequence, 5);
    assert!(p[0].last_timestamp > 0);
    assert_eq!(
        (p[0].coordinator_epoch, p[0].current_txn_start_offset),
        (-1, -1)
    );
    assert_eq!(parts[2].error_code, 3);
    assert_eq!(r.topics[1].partitions[0].error_code, 3);
}

/// ListConfigResources (KIP-1142): v1 lists every topic and this broker,
/// filtered by type; a type Kafka does not define is UNSUPPORTED_VERSION;
/// v0 (client-metrics subscriptions) lists none. DescribeCluster answers
/// brokers and refuses the controllers endpoint type (KIP-919) as a broker.
#[tokio::test(flavor = "multi_thread")]
async fn config_resources_and_cluster_endpoint_types() {
    let broker = BrokerProcess::start(&[]);
    create(&broker, &[("cfg-a", 1), ("cfg-b", 1)]).await;
    let mut conn = RawConn::connect(broker.addr).await;
    let list = |types: Vec<i8>| ListConfigResourcesRequest::default().with_resource_types(types);
    let names = |r: &ListConfigResourcesResponse| -> Vec<(i8, String)> {
        r.config_resources
            .iter()
            .map(|c| (c.resource_type, c.resource_name.to_string()))
            .filter(|(_, n)| !n.starts_with("__"))
            .collect()
    };
    let ResponseKind::ListConfigResources(r) = conn
        .call(ApiKey::ListConfigResources, 1, list(vec![]))
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(
        names(&r),
        vec![(4, "1".into()), (2, "cfg-a".into()), (2, "cfg-b".into())]
    );
    let ResponseKind::ListConfigResources(r) = conn
        .call(ApiKey::ListConfigResources, 1, list(vec![2, 32]))
        .await
    else {
        panic!()
    };
    assert_eq!(names(&r), vec![(2, "cfg-a".into()), (2, "cfg-b".into())]);
    let ResponseKind::ListConfigResources(r) = conn
        .call(ApiKey::ListConfigResources, 1, list(vec![3]))
        .await
    else {
        panic!()
    };
    assert_eq!(r.error_code, 35, "UNSUPPORTED_VERSION");
    let ResponseKind::ListConfigResources(r) = conn
        .call(ApiKey::ListConfigResources, 0, list(vec![]))
        .await
    else {
        panic!()
    };
    assert_eq!((r.error_code, r.config_resources.len()), (0, 0));

    for (endpoint_type, code, brokers) in [(1i8, 0i16, 1usize), (2, 115, 0)] {
        let ResponseKind::DescribeCluster(r) = conn
            .call(
                ApiKey::DescribeCluster,
                2,
                DescribeClusterRequest::default().with_endpoint_type(endpoint_type),
            )
            .await
        else {
            panic!()
        };
        assert_eq!((r.error_code, r.brokers.len()), (code, brokers));
        assert_eq!(r.endpoint_type, endpoint_type);
    }
}

/// A standalone node is a quorum of one inside its process.
#[tokio::test]
async fn describe_quorum_on_a_standalone_node_describes_a_quorum_of_one() {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let b = BrokerProcess::start(&[]);
    let mut conn = RawConn::connect(b.addr).await;
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(name("__cluster_metadata"))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let ResponseKind::DescribeQuorum(r) = conn.call(ApiKey::DescribeQuorum, 2, req).await else {
        panic!("not a DescribeQuorum response")
    };
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.error_code, p.leader_id.0), (0, 1), "node 1 leads");
    assert!(p.leader_epoch >= 1);
    let voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
    assert_eq!(voters, [1], "the only voter");
    assert!(p.observers.is_empty());
    assert!(p.high_watermark > 0);
    assert_eq!(p.current_voters[0].log_end_offset, p.high_watermark);
    // In-process: no controller listener to report.
    let nodes: Vec<(i32, usize)> = r
        .nodes
        .iter()
        .map(|n| (n.node_id.0, n.listeners.len()))
        .collect();
    assert_eq!(nodes, [(1, 0)]);
}
