//! Partition reassignment with data movement (issue 35, KIP-455) on three
//! `magnetar broker` processes: kafka-python moves a partition holding
//! data from broker 1 to brokers 2 and 3 while librdkafka keeps producing
//! with `acks=all`; the new replicas copy the log, the move completes once
//! they are in sync, leadership moves into the target, broker 1 stages its
//! directory under `deleting/`, and every acknowledged record is read back
//! once, in order. A move throttled by `follower.replication.throttled.rate`
//! takes the time its rate allows, and `magnetar topic reassign` and
//! `magnetar topic reassignments` drive and show it.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster::{admin, create, metadata, wait_brokers, Cluster};
use common::replication::{
    check_exactly_once, produce_all, producer, read_all, settings, wait_isr, DEADLINE,
};
use kafka_protocol::messages::MetadataResponse;
use rdkafka::admin::{AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication};

/// `topic`'s replicas, as `addr` reports them, and its topic id.
async fn replicas(addr: &str, topic: &str) -> (Vec<i32>, String) {
    let md: MetadataResponse = metadata(addr).await;
    let t = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .unwrap_or_else(|| panic!("no {topic} in {md:?}"));
    let replicas = t.partitions[0].replica_nodes.iter().map(|n| n.0).collect();
    (replicas, t.topic_id.to_string())
}

/// Creates `topic`, one partition on broker 1 alone, needing one in-sync
/// replica for `acks=all` (the cluster default is two).
async fn create_on_broker_1(c: &mut Cluster, topic: &str) {
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 1, TopicReplication::Variable(&[&[1]]))
            .set("min.insync.replicas", "1"),
    )
    .await;
    wait_isr(&c.addr(1), topic, 1, &[1]).await;
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:05}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partition_moves_to_other_brokers_while_it_is_written() {
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "moving";
    create_on_broker_1(&mut c, topic).await;
    let p = producer(&c.bootstrap());
    let before = values("a", 400);
    produce_all(&p, topic, &before).await;

    // Writes go on, in small acknowledged rounds, during the move.
    let during = values("b", 600);
    let writer = {
        let (p, during) = (p.clone(), during.clone());
        tokio::spawn(async move {
            for chunk in during.chunks(20) {
                produce_all(&p, "moving", chunk).await;
            }
        })
    };
    let bootstrap = c.bootstrap();
    let seen = tokio::task::spawn_blocking(move || {
        common::python(
            "kafka_python_reassign.py",
            &[&bootstrap, "move", "moving", "0", "2,3"],
        );
        // A second move of the same partition elsewhere is refused while
        // its target names an unknown broker.
        common::python(
            "kafka_python_reassign.py",
            &[
                &bootstrap,
                "refused",
                "moving",
                "0",
                "2,9",
                "InvalidReplicationAssignmentError",
            ],
        );
        common::python(
            "kafka_python_reassign.py",
            &[&bootstrap, "wait", "moving", "0", "2,3", "60"],
        )
    })
    .await
    .unwrap();
    writer.await.unwrap();
    assert!(
        seen.contains("OK kafka-python saw moving-0 on [2, 3]"),
        "{seen}"
    );

    wait_isr(&c.addr(2), topic, 1, &[2, 3]).await;
    let (now, id) = replicas(&c.addr(3), topic).await;
    assert_eq!(now, [2, 3], "the target replicas, in order");
    // Broker 1 staged its copy for deletion.
    let node1 = c.nodes[0].dir().to_path_buf();
    assert!(
        !node1.join("moving-0").exists(),
        "broker 1 still has moving-0"
    );
    let staged: BTreeSet<String> = std::fs::read_dir(node1.join("deleting"))
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        staged.contains(&format!("{id}_0")),
        "moving-0 of {id} is not staged under deleting/: {staged:?}"
    );

    let all: Vec<String> = before.iter().chain(&during).cloned().collect();
    let read = read_all(&c.bootstrap(), topic, 1, all.len());
    check_exactly_once(&read, &all);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_throttled_move_takes_the_time_its_rate_allows() {
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "slow";
    create_on_broker_1(&mut c, topic).await;
    // 6 MB of records.
    let p = producer(&c.bootstrap());
    let payload = "x".repeat(10_000);
    let big: Vec<String> = (0..600).map(|i| format!("{i:05}{payload}")).collect();
    produce_all(&p, topic, &big).await;

    // Broker 2 fetches the throttled replicas at 1 MB/s.
    let throttle = AlterConfig::new(ResourceSpecifier::Broker(2))
        .set("follower.replication.throttled.rate", "1000000");
    let r = admin(&c.bootstrap())
        .alter_configs(&[throttle], &AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let b = c.addr(1);
    common::cli::ok(&common::cli::magnetar(
        &b,
        &[
            "topic",
            "alter",
            topic,
            "--set",
            "follower.replication.throttled.replicas=*",
        ],
        None,
    ));

    let started = Instant::now();
    let mover = {
        let b = b.clone();
        std::thread::spawn(move || {
            common::cli::json(&common::cli::magnetar(
                &b,
                &[
                    "topic",
                    "reassign",
                    "slow",
                    "--partition",
                    "0",
                    "--replicas",
                    "1,2",
                    "--wait",
                    "--json",
                ],
                None,
            ))
        })
    };
    // Listed while it copies: broker 2 is being added.
    let listed = common::eventually(DEADLINE, "the move listed", || {
        let b = b.clone();
        async move {
            let out = tokio::task::spawn_blocking(move || {
                common::cli::json(&common::cli::magnetar(
                    &b,
                    &["topic", "reassignments", "--json"],
                    None,
                ))
            })
            .await
            .unwrap();
            let r = out["reassignments"].as_array()?.first()?.clone();
            Some(r)
        }
    })
    .await;
    assert_eq!(listed["topic"], "slow", "{listed}");
    assert_eq!(listed["replicas"], serde_json::json!([1, 2]), "{listed}");
    assert_eq!(listed["adding"], serde_json::json!([2]), "{listed}");
    let done = tokio::task::spawn_blocking(move || mover.join().unwrap())
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(done["completed"], true, "{done}");
    // 6 MB at 1 MB/s, less a one-second burst and one fetch (1 MB) over
    // the rate: four seconds at least.
    assert!(
        took >= Duration::from_secs(3),
        "a 6 MB move throttled to 1 MB/s completed in {took:?}"
    );
    wait_isr(&c.addr(2), topic, 1, &[1, 2]).await;
    let read = read_all(&c.bootstrap(), topic, 1, big.len());
    assert_eq!(read[0].len(), big.len());
    let listed = common::cli::json(&common::cli::magnetar(
        &b,
        &["topic", "reassignments", "--json"],
        None,
    ));
    assert_eq!(listed["reassignments"], serde_json::json!([]), "{listed}");
}
