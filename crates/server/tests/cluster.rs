//! Three `magnetar broker` processes forming one cluster on loopback
//! (issue 10): metadata changes made through any broker are seen by all,
//! partitions and group coordinators spread over the brokers, librdkafka
//! produces and consumes across them, the controller survives a SIGKILL of
//! its leader, and a broker that was down while its topic was deleted and
//! recreated cleans up as KIP-516's Scenario 2 says.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::cluster::{admin, coordinated_by, create, leaders, metadata, wait_brokers, Cluster};
use common::{client_config, polled, RawConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, FetchRequest, FindCoordinatorRequest,
    GroupId, HeartbeatRequest, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{
    AdminOptions, AlterConfig, ConfigSource as RdConfigSource, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;
use uuid::Uuid;

const UNKNOWN_TOPIC_ID: i16 = 100;
const DEADLINE: Duration = Duration::from_secs(30);

use common::cluster::FAST_SETTINGS as SETTINGS;

async fn topic_id(addr: &str, topic: &str) -> Uuid {
    let md = metadata(addr).await;
    md.topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .map(|t| t.topic_id)
        .unwrap_or_else(|| panic!("{topic} unknown to {addr}"))
}

/// DescribeQuorum as `kafka-metadata-quorum describe --status --replication`
/// reads it, from a broker-only node (forwarded to the leader).
async fn describe_quorum(addr: &str, version: i16) -> DescribeQuorumResponse {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let mut conn = RawConn::connect(addr.parse().unwrap()).await;
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![
            PartitionData::default().with_partition_index(0),
            PartitionData::default().with_partition_index(1),
        ])]);
    match conn.call(ApiKey::DescribeQuorum, version, req).await {
        ResponseKind::DescribeQuorum(r) => r,
        other => panic!("{other:?}"),
    }
}

/// Runs `magnetar broker` as node `node` on `dir` (on free ports) until it
/// exits by itself, as a process expected to be refused does.
fn run_node(
    node: &str,
    voters: &str,
    extra: &[&str],
    dir: &std::path::Path,
    settings: &[&str],
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_magnetar"))
        .args(["broker", "--node-id", node, "--controller-quorum", voters])
        .args(extra)
        .arg("--data-dir")
        .arg(dir)
        .args([
            "--kafka-addr",
            "127.0.0.1:0",
            "--pulsar-addr",
            "127.0.0.1:0",
        ])
        .args(["--http-addr", "127.0.0.1:0"])
        .args(settings.iter().flat_map(|s| ["--set", s]))
        .output()
        .unwrap()
}

async fn produce(bootstrap: &str, topic: &str, values: impl IntoIterator<Item = String>) {
    let p: FutureProducer = client_config(bootstrap).create().unwrap();
    for v in values {
        p.send(
            FutureRecord::to(topic).key(&v).payload(&v),
            Duration::from_secs(20),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    }
}

async fn fetch_by_id(addr: &str, id: Uuid) -> (i16, Vec<String>) {
    let mut conn = RawConn::connect(addr.parse().unwrap()).await;
    common::fetch_by_id(&mut conn, id).await
}

/// Reads `values` (in any order) from `topic` with a consumer group
/// bootstrapped from `bootstrap`; returns the consumer.
fn consume_all(bootstrap: &str, group: &str, topic: &str, values: &[String]) -> BaseConsumer {
    let mut cfg = client_config(bootstrap);
    cfg.set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = cfg.create().unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut got = BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while got.len() < values.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "consumed {} of {}",
            got.len(),
            values.len()
        );
        if let Some(m) = polled(consumer.poll(Duration::from_millis(200))) {
            got.insert(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    assert_eq!(got, values.iter().cloned().collect::<BTreeSet<_>>());
    consumer
}

#[tokio::test(flavor = "multi_thread")]
async fn topics_partitions_and_groups_span_the_cluster() {
    let mut c = Cluster::start(3, SETTINGS);
    wait_brokers(&c, &[1, 2, 3], 3).await;

    // Created through node 2 only; every node reports it, its partitions
    // led by all three brokers.
    create(
        &c.addr(2),
        NewTopic::new("orders", 6, TopicReplication::Fixed(1)),
    )
    .await;
    let seen: Vec<BTreeMap<i32, i32>> = futures::future::join_all((1..=3).map(|id| {
        let addr = c.addr(id);
        async move { leaders(&addr, "orders", 6).await }
    }))
    .await;
    assert!(
        seen.iter().all(|l| *l == seen[0]),
        "nodes disagree: {seen:?}"
    );
    let owners: BTreeSet<i32> = seen[0].values().copied().collect();
    assert_eq!(
        owners,
        BTreeSet::from([1, 2, 3]),
        "partitions spread evenly"
    );
    let ids: BTreeSet<Uuid> = futures::future::join_all((1..=3).map(|id| {
        let addr = c.addr(id);
        async move { topic_id(&addr, "orders").await }
    }))
    .await
    .into_iter()
    .collect();
    assert_eq!(ids.len(), 1, "one topic id everywhere");

    // A broker asked for a partition it does not lead says so.
    let (p, leader) = seen[0].iter().find(|(_, l)| **l != 1).unwrap();
    let id = topic_id(&c.addr(1), "orders").await;
    let mut conn = RawConn::connect(c.addr(1).parse().unwrap()).await;
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(*p)
                .with_partition_max_bytes(1 << 20)])]);
    let ResponseKind::Fetch(resp) = conn.call(ApiKey::Fetch, 13, req).await else {
        panic!()
    };
    assert_eq!(
        resp.responses[0].partitions[0].error_code, 6,
        "NOT_LEADER_OR_FOLLOWER from node 1 for a partition of node {leader}"
    );

    // librdkafka producing through one node reaches every partition's
    // leader; a group consuming through another reads everything back.
    let values: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
    produce(&c.addr(1), "orders", values.clone()).await;
    let consumer = consume_all(&c.addr(3), "cluster-group", "orders", &values);
    consumer.commit_consumer_state(CommitMode::Sync).unwrap();
    let committed = consumer
        .committed(Duration::from_secs(10))
        .unwrap()
        .elements()
        .iter()
        .filter(|e| e.offset().to_raw().is_some_and(|o| o > 0))
        .count();
    assert_eq!(committed, 6, "offsets committed for every partition");
    drop(consumer);

    // Batched FindCoordinator: every node gives the same answers, and the
    // groups' coordinators are spread over the brokers.
    let keys: Vec<StrBytes> = (0..40)
        .map(|i| StrBytes::from_string(format!("group-{i}")))
        .collect();
    let mut answers = Vec::new();
    for id in 1..=3 {
        let mut conn = RawConn::connect(c.addr(id).parse().unwrap()).await;
        let req = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(keys.clone());
        let ResponseKind::FindCoordinator(resp) = conn.call(ApiKey::FindCoordinator, 4, req).await
        else {
            panic!()
        };
        assert!(resp.coordinators.iter().all(|x| x.error_code == 0));
        answers.push(
            resp.coordinators
                .iter()
                .map(|x| (x.node_id.0, x.port))
                .collect::<Vec<_>>(),
        );
    }
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    let nodes: BTreeSet<i32> = answers[0].iter().map(|(n, _)| *n).collect();
    assert!(
        nodes.len() >= 2,
        "coordinators on one broker only: {nodes:?}"
    );
    for (node, port) in &answers[0] {
        assert_eq!(c.nodes[*node as usize - 1].addr.port() as i32, *port);
    }
    // A group request sent to another broker than the group's coordinator
    // is refused with NOT_COORDINATOR (16), so clients look it up again.
    let (coordinator, _) = answers[0][0];
    let other = (1..=3).find(|n| *n != coordinator as usize).unwrap();
    let mut conn = RawConn::connect(c.addr(other).parse().unwrap()).await;
    let req = HeartbeatRequest::default()
        .with_group_id(GroupId(keys[0].clone()))
        .with_member_id(StrBytes::from_static_str("m"))
        .with_generation_id(1);
    let ResponseKind::Heartbeat(resp) = conn.call(ApiKey::Heartbeat, 4, req).await else {
        panic!()
    };
    assert_eq!(resp.error_code, 16, "NOT_COORDINATOR from node {other}");

    // Broker keys in layers: broker 2's own (`--entity-name 2`, through
    // librdkafka) reaches broker 2 only; the cluster-wide default (the
    // empty name) every broker, under broker 2's own.
    let a = admin(&c.addr(2));
    let alter = AlterConfig::new(ResourceSpecifier::Broker(2)).set("num.partitions", "6");
    let r = a
        .alter_configs(&[alter], &AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let mut conn = RawConn::connect(c.addr(3).parse().unwrap()).await;
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(""))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_static_str("num.partitions"))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_static_str("4")))]),
    ]);
    let ResponseKind::IncrementalAlterConfigs(resp) =
        conn.call(ApiKey::IncrementalAlterConfigs, 1, req).await
    else {
        panic!()
    };
    assert_eq!(resp.responses[0].error_code, 0, "{resp:?}");
    for (node, want, source) in [
        (1, "4", RdConfigSource::DynamicDefaultBroker),
        (2, "6", RdConfigSource::DynamicBroker),
        (3, "4", RdConfigSource::DynamicDefaultBroker),
    ] {
        let a = admin(&c.addr(node));
        common::eventually(
            DEADLINE,
            &format!("num.partitions on broker {node}"),
            || {
                let (a, source) = (&a, &source);
                async move {
                    let r = a
                        .describe_configs(
                            &[ResourceSpecifier::Broker(node as i32)],
                            &AdminOptions::new(),
                        )
                        .await
                        .ok()?;
                    let res = r[0].as_ref().ok()?;
                    let e = res.get("num.partitions")?;
                    (e.value.as_deref() == Some(want) && e.source == *source).then_some(())
                }
            },
        )
        .await;
    }
    let _ = c.bootstrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_survives_a_sigkill_of_the_controller_leader() {
    let mut c = Cluster::start(3, SETTINGS);
    wait_brokers(&c, &[1, 2, 3], 3).await;
    create(
        &c.bootstrap(),
        NewTopic::new("before", 3, TopicReplication::Fixed(1)),
    )
    .await;
    let values: Vec<String> = (0..60).map(|i| format!("b{i}")).collect();
    produce(&c.bootstrap(), "before", values.clone()).await;

    let leader = metadata(&c.addr(1)).await.controller_id.0 as usize;
    assert!((1..=3).contains(&leader), "controller id {leader}");
    c.node(leader).kill();
    let survivors: Vec<usize> = (1..=3).filter(|i| *i != leader).collect();

    // A new leader is elected and takes changes through either survivor.
    let via = c.addr(survivors[0]);
    common::eventually(DEADLINE, "a topic created after the failover", || {
        let via = via.clone();
        async move {
            let r = admin(&via)
                .create_topics(
                    &[NewTopic::new("after", 2, TopicReplication::Fixed(1))],
                    &AdminOptions::new().operation_timeout(Some(Duration::from_secs(15))),
                )
                .await
                .ok()?;
            match &r[0] {
                Ok(_) => Some(()),
                Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => Some(()),
                Err(_) => None,
            }
        }
    })
    .await;
    for &id in &survivors {
        leaders(&c.addr(id), "after", 2).await;
        let md = metadata(&c.addr(id)).await;
        assert_ne!(
            md.controller_id.0 as usize, leader,
            "a new controller leads"
        );
    }

    // The killed node returns with everything it acknowledged.
    c.node(leader).restart();
    wait_brokers(&c, &[1, 2, 3], 3).await;
    for id in 1..=3 {
        let l = leaders(&c.addr(id), "before", 3).await;
        assert!(
            l.values().all(|n| *n > 0),
            "all partitions led again: {l:?}"
        );
        leaders(&c.addr(id), "after", 2).await;
    }
    consume_all(&c.bootstrap(), "after-failover", "before", &values);
}

/// KIP-516 Scenario 2: node 1 leads `A`-p0 (id0) and is stopped; `A` is
/// deleted and recreated (id1) on node 1, and `B` on node 1 is deleted;
/// node 1 returns and stages both stale directories under `deleting/`,
/// removes them after `log.dir.delete.delay.ms`, serves an empty and
/// writable `A`-p0 of id1, and never returns a record of id0.
#[tokio::test(flavor = "multi_thread")]
async fn a_broker_down_while_its_topic_is_recreated_cleans_up_on_return() {
    let mut settings = SETTINGS.to_vec();
    settings.push("log.dir.delete.delay.ms=3000");
    let mut c = Cluster::start(3, &settings);
    wait_brokers(&c, &[1, 2, 3], 3).await;
    for name in ["A", "B"] {
        create(
            &c.addr(2),
            NewTopic::new(name, 1, TopicReplication::Variable(&[&[1]])),
        )
        .await;
        assert_eq!(leaders(&c.addr(1), name, 1).await[&0], 1);
    }
    let id0 = topic_id(&c.addr(1), "A").await;
    let old: Vec<String> = (0..20).map(|i| format!("old{i}")).collect();
    produce(&c.addr(1), "A", old.clone()).await;
    produce(&c.addr(1), "B", old.clone()).await;
    assert_eq!(fetch_by_id(&c.addr(1), id0).await.1, old);
    // A group coordinated by node 1 has committed offset 15 on A-p0: it is
    // about id0, and must not become the new A's.
    let group = coordinated_by(&c.addr(2), 0, "owner", 1).await;
    let committed = |bootstrap: String, group: String| {
        tokio::task::spawn_blocking(move || {
            let mut cfg = client_config(&bootstrap);
            cfg.set("group.id", &group);
            let consumer: BaseConsumer = cfg.create().unwrap();
            let mut tpl = rdkafka::TopicPartitionList::new();
            tpl.add_partition("A", 0);
            let got = consumer.committed_offsets(tpl, DEADLINE).unwrap();
            got.find_partition("A", 0).unwrap().offset()
        })
    };
    {
        let (bootstrap, group) = (c.addr(2), group.clone());
        tokio::task::spawn_blocking(move || {
            let mut cfg = client_config(&bootstrap);
            cfg.set("group.id", &group);
            let consumer: BaseConsumer = cfg.create().unwrap();
            let mut tpl = rdkafka::TopicPartitionList::new();
            tpl.add_partition_offset("A", 0, rdkafka::Offset::Offset(15))
                .unwrap();
            consumer.commit(&tpl, CommitMode::Sync).unwrap();
        })
        .await
        .unwrap();
    }
    assert_eq!(
        committed(c.addr(3), group.clone()).await.unwrap(),
        rdkafka::Offset::Offset(15)
    );

    assert_eq!(c.node(1).terminate(), Some(0));
    // Node 1 may have led the quorum: the deletes wait for a new leader.
    let via = c.addr(2);
    // With A's only broker down, the CLI's produce and consume give up
    // after their --timeout with exit code 4 instead of waiting for ever.
    common::eventually(DEADLINE, "A without a leader", || async {
        (leaders(&via, "A", 1).await[&0] == -1).then_some(())
    })
    .await;
    // A Pulsar lookup of A is told its broker (node 1) is not available.
    let r = reqwest::get(format!(
        "{}/lookup/v2/topic/persistent/public/default/A",
        c.node(2).http_url()
    ))
    .await
    .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let why = r.text().await.unwrap();
    assert!(why.contains("(node 1) is not available"), "{why}");
    // The group's coordinator was node 1: the group log's partition of
    // the group has another leader now, which serves the commit.
    let (survivor, g) = (c.addr(2), group.clone());
    common::eventually(DEADLINE, "the commit served by a new coordinator", || {
        let (survivor, g) = (survivor.clone(), g.clone());
        async move {
            let got = committed(survivor, g).await.ok()?;
            (got == rdkafka::Offset::Offset(15)).then_some(())
        }
    })
    .await;
    // The group's coordinator is up: what is missing is A's leader.
    let live_group = coordinated_by(&c.addr(2), 0, "owner", 2).await;
    let consume = vec![
        "consume".to_string(),
        "A".into(),
        "--group".into(),
        live_group,
        "--from".into(),
        "earliest".into(),
        "--timeout".into(),
        "2".into(),
    ];
    let produce_args: Vec<String> = ["produce", "A", "--timeout", "2"]
        .map(String::from)
        .to_vec();
    for (args, stdin, says) in [(produce_args, Some("late\n"), ""), (consume, None, "")] {
        let bootstrap = via.clone();
        let started = std::time::Instant::now();
        let shown = args.clone();
        let out = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            common::cli::magnetar(&bootstrap, &args, stdin)
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{shown:?}: {stderr}");
        assert!(
            stderr.contains(says) && !stderr.contains("controller quorum"),
            "{shown:?}: {stderr}"
        );
        assert!(
            started.elapsed() < DEADLINE,
            "{shown:?} took {:?}",
            started.elapsed()
        );
    }
    for name in ["A", "B"] {
        let via = via.clone();
        common::eventually(DEADLINE, &format!("{name} deleted"), || {
            let via = via.clone();
            async move {
                let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(15)));
                let r = admin(&via).delete_topics(&[name], &opts).await.ok()?;
                match &r[0] {
                    Ok(_) => Some(()),
                    // An earlier attempt that timed out on the client
                    // committed after all.
                    Err((_, rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition)) => Some(()),
                    Err(_) => None,
                }
            }
        })
        .await;
    }
    create(
        &via,
        NewTopic::new("A", 1, TopicReplication::Variable(&[&[1]])),
    )
    .await;
    let id1 = topic_id(&via, "A").await;
    assert_ne!(id0, id1);

    c.node(1).restart();
    let a_dir = format!("{id0}_0");
    c.wait_for_log(1, &a_dir, DEADLINE);
    c.wait_for_log(1, "staging a stale partition directory", DEADLINE);
    let node1 = c.nodes[0].dir().to_path_buf();
    let staged = node1.join("deleting");
    let names = |d: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Staged right away (the delay has not passed yet), B's too.
    assert!(names(&staged).contains(&a_dir), "{:?}", names(&staged));
    assert_eq!(
        names(&staged).len(),
        2,
        "A's and B's old directories: {:?}",
        names(&staged)
    );
    wait_brokers(&c, &[1, 2, 3], 3).await;

    // The new A-p0 on node 1 is empty and writable; id0 is fenced.
    assert_eq!(fetch_by_id(&c.addr(1), id1).await, (0, Vec::new()));
    assert_eq!(fetch_by_id(&c.addr(1), id0).await.0, UNKNOWN_TOPIC_ID);
    produce(&c.addr(3), "A", vec!["new".to_string()]).await;
    assert_eq!(
        fetch_by_id(&c.addr(1), id1).await,
        (0, vec!["new".to_string()])
    );
    assert!(!node1.join("B-0").exists(), "B is gone from node 1");
    // The group's coordinator dropped id0's committed offset.
    assert_eq!(
        committed(c.addr(2), group.clone()).await.unwrap(),
        rdkafka::Offset::Invalid
    );

    // Removed once log.dir.delete.delay.ms has passed.
    c.wait_for_log(1, "removed a staged partition", DEADLINE);
    common::eventually(DEADLINE, "the staged directories removed", || {
        let staged = staged.clone();
        async move { names(&staged).is_empty().then_some(()) }
    })
    .await;
    let (code, values) = fetch_by_id(&c.addr(1), id1).await;
    assert_eq!((code, values), (0, vec!["new".to_string()]));
}

/// A broker-only node (not a voter) joins, reads the metadata from the
/// voters and gets partitions; a second process with its node id is
/// refused with a clear error while the first one is alive.
#[tokio::test(flavor = "multi_thread")]
async fn a_broker_only_node_joins_and_its_node_id_cannot_be_taken_twice() {
    let c = Cluster::start(3, SETTINGS);
    let args = vec![
        "--node-id".to_string(),
        "4".to_string(),
        "--controller-quorum".to_string(),
        c.voters.clone(),
    ];
    let settings: Vec<&str> = c.with_secret(SETTINGS);
    let four = common::BrokerProcess::start_node(c.dir().join("node-4"), &args, &settings);
    wait_brokers(&c, &[1, 2, 3], 4).await;
    create(
        &four.bootstrap(),
        NewTopic::new("wide", 8, TopicReplication::Fixed(1)),
    )
    .await;
    let l = leaders(&four.bootstrap(), "wide", 8).await;
    let owners: BTreeSet<i32> = l.values().copied().collect();
    assert_eq!(owners, BTreeSet::from([1, 2, 3, 4]), "{l:?}");
    let values: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    produce(&four.bootstrap(), "wide", values.clone()).await;
    consume_all(&c.addr(1), "wide-group", "wide", &values);

    // The quorum as its leader sees it, asked of the broker-only node: the
    // three voters (all caught up, eventually) and node 4 as an observer.
    let q = common::eventually(DEADLINE, "every voter and observer caught up", || async {
        let q = describe_quorum(&four.bootstrap(), 2).await;
        let p = &q.topics[0].partitions[0];
        let caught_up = |r: &kafka_protocol::messages::describe_quorum_response::ReplicaState| {
            r.log_end_offset >= p.high_watermark && r.last_caught_up_timestamp > 0
        };
        (q.error_code == 0
            && p.current_voters.len() == 3
            && p.current_voters.iter().all(caught_up)
            && p.observers.len() == 1
            && p.observers.iter().all(caught_up))
        .then_some(q)
    })
    .await;
    let p = &q.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert!((1..=3).contains(&p.leader_id.0), "{p:?}");
    assert!(p.leader_epoch >= 1 && p.high_watermark > 0, "{p:?}");
    let voters: BTreeSet<i32> = p.current_voters.iter().map(|r| r.replica_id.0).collect();
    assert_eq!(voters, BTreeSet::from([1, 2, 3]));
    assert_eq!(p.observers[0].replica_id.0, 4);
    assert_eq!(
        q.topics[0].partitions[1].error_code, 3,
        "only partition 0 exists (UNKNOWN_TOPIC_OR_PARTITION)"
    );
    let nodes: Vec<String> = q
        .nodes
        .iter()
        .map(|n| {
            let l = &n.listeners[0];
            format!("{}@{}:{}", n.node_id.0, l.host.as_str(), l.port)
        })
        .collect();
    assert_eq!(
        nodes.join(","),
        c.voters,
        "the voters' controller listeners"
    );
    // Every broker answers the same leader; v0 has no timestamps or nodes.
    for id in 1..=3 {
        let q0 = describe_quorum(&c.addr(id), 0).await;
        assert_eq!(q0.error_code, 0);
        assert!(q0.nodes.is_empty());
        let p0 = &q0.topics[0].partitions[0];
        assert_eq!(p0.leader_id, p.leader_id, "node {id}");
        assert_eq!(p0.current_voters.len(), 3);
    }

    // Node id 4 again, from another process and data directory.
    let out = run_node("4", &c.voters, &[], &c.dir().join("node-4-twin"), &settings);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("refused node 4") && stderr.contains("another live process"),
        "{stderr}"
    );
    // A voter's id as a broker-only node is refused at once.
    let out = run_node(
        "2",
        &c.voters,
        &[],
        &c.dir().join("node-2-twin"),
        &c.with_secret(&[]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is in controller.quorum.voters"),
        "{stderr}"
    );

    // A second process on voter 2's own data directory stops at the
    // directory lock, before its controller could open node 2's Raft
    // files or bind its port; node 2 serves on.
    let two_controller = c
        .voters
        .split(',')
        .find_map(|v| v.strip_prefix("2@"))
        .unwrap()
        .to_string();
    let out = run_node(
        "2",
        &c.voters,
        &["--controller-addr", &two_controller],
        &c.dir().join("node-2"),
        &settings,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("locked")
            && !stderr.contains("cannot listen")
            && !stderr.contains("controller started"),
        "{stderr}"
    );
    consume_all(&c.addr(2), "wide-two", "wide", &values);

    // A clean shutdown fences node 4 at once (controlled shutdown): its
    // partitions are offline rather than pointing at a closed port.
    let mut four = four;
    assert_eq!(four.terminate(), Some(0));
    assert!(
        four.log_text().contains("fenced for shutdown"),
        "{}",
        four.log_text()
    );
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let offline: Vec<i32> = l
        .iter()
        .filter(|(_, leader)| **leader == 4)
        .map(|(p, _)| *p)
        .collect();
    let now = leaders(&c.addr(1), "wide", 8).await;
    for p in &offline {
        assert_eq!(now[p], -1, "partition {p} of the stopped node: {now:?}");
    }
    // Back on its data directory, after the clean stop and after SIGKILL,
    // it registers without waiting for its old session to expire, nor
    // for the killed process to miss its heartbeats (it holds the lock
    // that process held).
    four.restart();
    wait_brokers(&c, &[1, 2, 3], 4).await;
    four.kill();
    four.restart();
    wait_brokers(&c, &[1, 2, 3], 4).await;
    let log = four.log_text();
    assert!(!log.contains("registration refused"), "{log}");
    // (Where the lock proves nothing, e.g. a network filesystem, the
    // restart waits two heartbeats instead, as the node logs.)
    assert!(
        log.contains("lock cannot prove a crashed predecessor gone")
            || !log.contains("waiting for the previous process"),
        "{log}"
    );
    assert_eq!(leaders(&c.addr(1), "wide", 8).await, l);
    consume_all(&four.bootstrap(), "wide-again", "wide", &values);

    // A copy of node 4's data directory (same directory.id) while node 4
    // heartbeats is not its successor: refused once a session has passed.
    let copy = c.dir().join("node-4-copy");
    let cp = std::process::Command::new("cp")
        .arg("-r")
        .arg(c.dir().join("node-4"))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let started = std::time::Instant::now();
    let out = run_node("4", &c.voters, &[], &copy, &settings);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("a copy of a running broker's data directory"),
        "{stderr}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "waited for a session"
    );
    assert!(four.is_running());

    // Node 4 stops heartbeating (SIGSTOP) and the copy takes its place:
    // woken again, node 4 learns it was replaced and stops by itself, so
    // two processes never serve node 4's partitions.
    four.signal("-STOP");
    let twin = common::BrokerProcess::start_node(copy, &args, &settings);
    four.signal("-CONT");
    let code = four.wait_for_exit(DEADLINE);
    assert_eq!(code, Some(1), "{}", four.log_text());
    assert!(
        four.log_text().contains("in this one's place"),
        "{}",
        four.log_text()
    );
    wait_brokers(&c, &[1, 2, 3], 4).await;
    consume_all(&twin.bootstrap(), "wide-twin", "wide", &values);
    drop(twin);
}

/// `controller.security.protocol=SSL`: the nodes' Raft and broker RPCs go
/// over mutual TLS (node certificates of the test CA, host names checked),
/// so metadata made through one node reaches the others; a plaintext
/// client on a controller port is refused and the refusal logged.
#[tokio::test(flavor = "multi_thread")]
async fn the_controller_port_speaks_mutual_tls() {
    let pki = tempfile::tempdir().unwrap();
    common::pki::make_pki(pki.path());
    let [keystore, truststore] = common::pki::store_settings(pki.path());
    let mut settings = SETTINGS.to_vec();
    settings.extend([
        "controller.security.protocol=SSL",
        "http.tls.listen.address=127.0.0.1:0",
        keystore.as_str(),
        truststore.as_str(),
    ]);
    let mut c = Cluster::start(3, &settings);
    wait_brokers(&c, &[1, 2, 3], 3).await;
    create(
        &c.addr(1),
        NewTopic::new("over-tls", 3, TopicReplication::Fixed(1)),
    )
    .await;
    common::eventually(DEADLINE, "node 3 sees the topic", || async {
        let md = metadata(&c.addr(3)).await;
        md.topics
            .iter()
            .any(|t| {
                t.name.as_ref().map(|n| n.as_str()) == Some("over-tls") && t.partitions.len() == 3
            })
            .then_some(())
    })
    .await;
    // Asked over HTTPS about the topic its three brokers lead, node 1 asks
    // the others over HTTPS too, verifying them against the truststore.
    let l = leaders(&c.addr(1), "over-tls", 3).await;
    for id in 2..=3 {
        leaders(&c.addr(id), "over-tls", 3).await;
    }
    assert_eq!(
        l.values().copied().collect::<BTreeSet<_>>().len(),
        3,
        "{l:?}"
    );
    let port = c
        .node(1)
        .logged_listener("https")
        .rsplit_once(':')
        .unwrap()
        .1
        .to_string();
    let script = r#"
import json, ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2])
with urllib.request.urlopen(sys.argv[1], context=ctx, timeout=30) as r:
    s = json.load(r)
print(json.dumps({"count": s["metadata"]["partitions"], "each": sorted(s["partitions"])}))
"#;
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            script,
            &format!(
                "https://localhost:{port}/admin/v2/persistent/public/default/over-tls/partitioned-stats"
            ),
            &pki.path().join("ca.pem").display().to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(got["count"], 3, "{got}");
    assert_eq!(got["each"].as_array().map(Vec::len), Some(3), "{got}");
    // Plaintext on node 1's controller port: no answer, the connection closed.
    let port = c
        .voters
        .split(',')
        .next()
        .unwrap()
        .rsplit_once(':')
        .unwrap()
        .1;
    let mut s = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(&[0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8])
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(DEADLINE, s.read(&mut buf))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert!(
        n == 0 || buf[0] == 0x15,
        "plaintext got an answer: {:?}",
        &buf[..n]
    );
    c.wait_for_log(1, "controller: refusing connection", DEADLINE);
}
