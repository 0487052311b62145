//! ElectLeaders and partition reassignments on a three-broker cluster
//! (issue 11's "really working once the cluster exists"), answered as
//! Kafka's controller answers them for partitions of one replica: nothing
//! to elect while the replica's broker is live, no eligible leader while it
//! is fenced, and a move to an unknown broker refused. And `magnetar read` of a topic with one
//! partition offline prints the others before it gives up.

mod common;

use std::time::Duration;

use common::cluster::{create_spread, metadata, Cluster};
use common::replication::elect_preferred;
use common::RawConn;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const SETTINGS: &[&str] = &[
    "broker.session.timeout.ms=3000",
    "broker.heartbeat.interval.ms=500",
    "auto.create.topics.enable=false",
];

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// AlterPartitionReassignments of one partition: its code and message.
async fn reassign(addr: &str, topic: &str, p: i32, replicas: &[i32]) -> (i16, String) {
    let mut conn = RawConn::connect(addr.parse().unwrap()).await;
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(p)
                .with_replicas(Some(
                    replicas.iter().copied().map(BrokerId).collect(),
                ))])]);
    let ResponseKind::AlterPartitionReassignments(r) =
        conn.call(ApiKey::AlterPartitionReassignments, 0, req).await
    else {
        panic!("AlterPartitionReassignments")
    };
    let part = &r.responses[0].partitions[0];
    (
        part.error_code,
        part.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn elections_and_reassignments_answer_for_the_partitions_brokers() {
    let mut c = Cluster::start(3, SETTINGS);
    let leaders = create_spread(&c.addr(1), "moves", 3).await;
    let on = |node: i32| *leaders.iter().find(|(_, l)| **l == node).unwrap().0;

    // Every partition's one replica leads it, whichever broker is asked.
    for node in 1..=3 {
        assert_eq!(
            elect_preferred(&c.addr(node), "moves", &[0, 1, 2]).await,
            [84, 84, 84],
            "ELECTION_NOT_NEEDED from node {node}"
        );
    }

    // Reassigning to where it is completes at once; to a broker that is
    // not registered, or to one twice, is refused and nothing moves (moves
    // that copy data: cluster_reassignment.rs).
    let p = on(2);
    assert_eq!(reassign(&c.addr(1), "moves", p, &[2]).await.0, 0);
    let (code, message) = reassign(&c.addr(1), "moves", p, &[4]).await;
    assert_eq!(code, 39, "INVALID_REPLICA_ASSIGNMENT: {message}");
    assert!(message.contains("broker 4"), "{message}");
    assert_eq!(reassign(&c.addr(1), "moves", p, &[3, 3]).await.0, 39);
    let md = metadata(&c.addr(3)).await;
    let t = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some("moves"))
        .unwrap();
    let part = t
        .partitions
        .iter()
        .find(|x| x.partition_index == p)
        .unwrap();
    assert_eq!(part.leader_id.0, 2);
    assert_eq!(part.replica_nodes, vec![BrokerId(2)]);

    // One record in each partition, then node 3 down and fenced: its
    // partition has no eligible leader; the others still need no election.
    let producer: rdkafka::producer::FutureProducer =
        common::client_config(&c.addr(1)).create().unwrap();
    for partition in 0..3 {
        let v = format!("r{partition}");
        producer
            .send(
                rdkafka::producer::FutureRecord::to("moves")
                    .partition(partition)
                    .key(&v)
                    .payload(&v),
                Duration::from_secs(20),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
    c.node(3).kill();
    let offline = on(3);
    common::eventually(Duration::from_secs(30), "node 3 fenced", || async {
        let md = metadata(&c.addr(1)).await;
        let t = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some("moves"))?;
        let part = t.partitions.iter().find(|x| x.partition_index == offline)?;
        (part.leader_id.0 == -1).then_some(())
    })
    .await;
    let codes = elect_preferred(&c.addr(1), "moves", &[0, 1, 2]).await;
    for (partition, code) in codes.iter().enumerate() {
        let expect = if partition as i32 == offline { 83 } else { 84 };
        assert_eq!(*code, expect, "partition {partition}: {codes:?}");
    }

    // `magnetar read` prints the live partitions' records, then gives up
    // on the offline one after --timeout with exit code 4.
    let bootstrap = c.addr(1);
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        common::cli::magnetar(
            &bootstrap,
            &["read", "moves", "--from", "earliest", "--timeout", "3"],
            None,
        )
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    for partition in 0..3 {
        let printed = stdout.contains(&format!("r{partition}"));
        assert_eq!(
            printed,
            partition != offline,
            "partition {partition}: {stdout}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
