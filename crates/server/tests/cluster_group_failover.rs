//! Replicated group state (issue 35): a cluster keeps consumer groups and
//! their committed offsets in the replicated `__consumer_offsets`, a
//! group's coordinator is the leader of the group's partition of it, and
//! an offset commit is answered once the in-sync replicas have it. A
//! SIGKILL of the coordinator moves the group to another broker, which
//! serves every acknowledged commit: librdkafka's group carries on from
//! exactly where it committed, and kafka-python reads back the offsets it
//! committed. Transactions live there too: the next coordinator of a
//! transactional id ends the transaction its dead one left open.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster::{create, wait_brokers, Cluster};
use common::replication::{produce_all, producer, settings, wait_isr, DEADLINE};
use common::txn::{send_each, transactional};
use common::{client_config, polled, RawConn};
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Message, Offset, TopicPartitionList};

/// The cluster's settings: those of the replication tests, and a group
/// log of 6 partitions (Kafka's 50 would only slow the test down).
fn group_settings() -> Vec<&'static str> {
    let mut s = settings();
    s.push("offsets.topic.num.partitions=6");
    s
}

/// FindCoordinator's key types: a group, a transactional id.
const GROUP: i8 = 0;
const TRANSACTIONAL_ID: i8 = 1;

/// The broker `addr` names as the coordinator of `key` (of `key_type`), if
/// it names a live one.
async fn coordinator_of(addr: &str, key_type: i8, key: &str) -> Option<i32> {
    let mut conn = RawConn::try_connect(addr.parse().unwrap()).await?;
    let req = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![StrBytes::from_string(key.to_string())]);
    let ResponseKind::FindCoordinator(resp) = conn.call(ApiKey::FindCoordinator, 4, req).await
    else {
        return None;
    };
    let x = resp.coordinators.first()?;
    (x.error_code == 0).then_some(x.node_id.0)
}

/// A group member of `group` reading `topic` (offsets committed by hand).
fn member(bootstrap: &str, group: &str) -> BaseConsumer {
    let c: BaseConsumer = client_config(bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .create()
        .unwrap();
    c
}

/// Reads `n` records of `topic` as a member of `group`, commits its
/// position (librdkafka's synchronous commit: answered once the commit is
/// acknowledged) and returns the values read.
fn read_and_commit(bootstrap: &str, topic: &str, group: &str, n: usize) -> Vec<String> {
    let c = member(bootstrap, group);
    c.subscribe(&[topic]).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while got.len() < n {
        assert!(Instant::now() < deadline, "read only {} of {n}", got.len());
        if let Some(m) = polled(c.poll(Duration::from_millis(200))) {
            got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    // Acknowledged commits only: retried until one is.
    let deadline = Instant::now() + DEADLINE;
    loop {
        match c.commit_consumer_state(CommitMode::Sync) {
            Ok(()) => break,
            Err(e) => {
                assert!(Instant::now() < deadline, "no commit acknowledged: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    got
}

/// Reads every record of `topic` a new member of `group` gets from the
/// group's committed offsets on, until `n` came (and a little longer,
/// to see none beyond).
fn read_rest(bootstrap: &str, topic: &str, group: &str, n: usize) -> Vec<String> {
    let c = member(bootstrap, group);
    c.subscribe(&[topic]).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut quiet_until: Option<Instant> = None;
    loop {
        assert!(Instant::now() < deadline, "read only {} of {n}", got.len());
        if quiet_until.is_some_and(|q| Instant::now() > q) {
            break;
        }
        if let Some(m) = polled(c.poll(Duration::from_millis(200))) {
            got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            if got.len() >= n && quiet_until.is_none() {
                quiet_until = Some(Instant::now() + Duration::from_secs(2));
            }
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn committed_offsets_survive_a_sigkill_of_their_coordinator() {
    let mut c = Cluster::start(3, &group_settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "gf-orders";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 3, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 3, &[1, 2, 3]).await;
    let values: Vec<String> = (0..600).map(|i| format!("v{i:04}")).collect();
    produce_all(&producer(&c.bootstrap()), topic, &values).await;

    // A member reads half and commits where it is.
    let group = "gf-group";
    let bootstrap = c.bootstrap();
    let first = tokio::task::spawn_blocking(move || read_and_commit(&bootstrap, topic, group, 300))
        .await
        .unwrap();
    let coord = coordinator_of(&c.addr(1), GROUP, group)
        .await
        .expect("the group has a coordinator");

    // Its coordinator dies; another broker leads the group's slot of the
    // replicated group log and serves the group from there.
    c.node(coord as usize).kill();
    let survivors: Vec<i32> = (1..=3).filter(|n| *n != coord).collect();
    let via = c.addr(survivors[0] as usize);
    let moved = common::eventually(DEADLINE, "a new coordinator", || {
        let via = via.clone();
        async move {
            coordinator_of(&via, GROUP, group)
                .await
                .filter(|n| *n != coord)
        }
    })
    .await;
    assert!(survivors.contains(&moved));

    // A new member carries on from the committed offsets: together the
    // two read every record exactly once.
    let bootstrap = c.bootstrap();
    let rest = tokio::task::spawn_blocking(move || {
        read_rest(&bootstrap, topic, group, 600 - first.len())
            .into_iter()
            .chain(first)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let distinct: BTreeSet<&String> = rest.iter().collect();
    assert_eq!(
        distinct.len(),
        rest.len(),
        "a record was read twice: the commit was lost"
    );
    assert_eq!(distinct, values.iter().collect::<BTreeSet<_>>());

    // kafka-python commits another group's offsets, its coordinator is
    // killed after the first one returned, and they are still there.
    c.node(coord as usize).restart();
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let py_group = "gf-python";
    eprintln!("restarted node {coord}");
    let bootstrap = c.bootstrap();
    let wanted = ["0:11", "1:22", "2:33"];
    let args: Vec<String> = [bootstrap.as_str(), "commit", topic, py_group]
        .iter()
        .map(|s| s.to_string())
        .chain(wanted.iter().map(|s| s.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::python("kafka_python_group_failover.py", &args);
    })
    .await
    .unwrap();
    let py_coord = coordinator_of(&c.addr(1), GROUP, py_group)
        .await
        .expect("the python group has a coordinator");
    eprintln!(
        "python group coordinator: {py_coord}; the group log: {:?}",
        common::replication::partitions(&c.addr(1), "__consumer_offsets").await
    );
    c.node(py_coord as usize).kill();
    let bootstrap = c.bootstrap();
    let args: Vec<String> = [bootstrap.as_str(), "check", topic, py_group]
        .iter()
        .map(|s| s.to_string())
        .chain(wanted.iter().map(|s| s.to_string()))
        .collect();
    let checked = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::python("kafka_python_group_failover.py", &args);
    })
    .await;
    if let Err(e) = checked {
        let live: Vec<i32> = (1..=3).filter(|n| *n != py_coord).collect();
        for n in live {
            eprintln!(
                "node {n}: coordinator {:?}, the group log: {:?}",
                coordinator_of(&c.addr(n as usize), GROUP, py_group).await,
                common::replication::partitions(&c.addr(n as usize), "__consumer_offsets").await
            );
        }
        panic!("{e}");
    }
}

/// A transaction's state is in the replicated group log too: after its
/// coordinator's SIGKILL, the next coordinator knows the transactional id
/// and its open transaction, so a new producer of that id fences the old
/// one and the open transaction is aborted (read_committed consumers are
/// not held back by it forever, and never see its records).
#[tokio::test(flavor = "multi_thread")]
async fn an_open_transaction_is_ended_by_the_next_coordinator() {
    let mut c = Cluster::start(3, &group_settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "gf-txn";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 3, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 3, &[1, 2, 3]).await;
    let id = "gf-txn-id";
    let bootstrap = c.bootstrap();
    // One committed transaction, then one left open (its producer stays
    // alive and idle).
    let old = tokio::task::spawn_blocking(move || {
        let p = transactional(&bootstrap, id, DEADLINE);
        p.begin_transaction().unwrap();
        send_each(&p, topic, "committed", DEADLINE);
        p.commit_transaction(DEADLINE).unwrap();
        p.begin_transaction().unwrap();
        send_each(&p, topic, "open", DEADLINE);
        p
    })
    .await
    .unwrap();
    let coord = coordinator_of(&c.addr(1), TRANSACTIONAL_ID, id)
        .await
        .expect("the transactional id has a coordinator");
    c.node(coord as usize).kill();

    let bootstrap = c.bootstrap();
    let read = tokio::task::spawn_blocking(move || {
        let p = transactional(&bootstrap, id, DEADLINE);
        p.begin_transaction().unwrap();
        send_each(&p, topic, "after", DEADLINE);
        p.commit_transaction(DEADLINE).unwrap();
        let rc: BaseConsumer = client_config(&bootstrap)
            .set("group.id", "gf-txn-reader")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for p in 0..3 {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        rc.assign(&tpl).unwrap();
        common::read_then_quiet(&rc, 6)
    })
    .await
    .unwrap();
    drop(old);
    let got: BTreeSet<String> = read.iter().cloned().collect();
    assert_eq!(got.len(), read.len(), "nothing twice: {read:?}");
    let want: BTreeSet<String> = ["committed", "after"]
        .iter()
        .flat_map(|t| (0..3).map(move |p| format!("{t}-{p}")))
        .collect();
    assert_eq!(got, want);
}

/// The group-log slot of a key, of `slots` (as Kafka hashes it).
fn slot_of(key: &str, slots: i32) -> i32 {
    broker::cluster::coordinator_slot(key, slots as usize) as i32
}

/// Transactional offsets are kept by the group's coordinator, wherever the
/// transaction's is: a transactional id and a group coordinated by one
/// broker (in different slots), the group's slot moved to other brokers
/// before the transaction commits, and the offsets are the group's after
/// the commit (the marker for the group's slot reaches its new leader).
#[tokio::test(flavor = "multi_thread")]
async fn transactional_offsets_follow_their_group_when_its_slot_moves() {
    let mut c = Cluster::start(3, &group_settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "gf-eos";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 3, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 3, &[1, 2, 3]).await;
    let id = common::cluster::coordinated_by(&c.addr(1), TRANSACTIONAL_ID, "gf-eos-tx", 1).await;
    let mut group = String::new();
    for prefix in ["gf-eos-a", "gf-eos-b", "gf-eos-c", "gf-eos-d"] {
        group = common::cluster::coordinated_by(&c.addr(1), GROUP, prefix, 1).await;
        if slot_of(&group, 6) != slot_of(&id, 6) {
            break;
        }
    }
    let slot = slot_of(&group, 6);
    assert_ne!(slot, slot_of(&id, 6), "no group in another slot of node 1");

    let bootstrap = c.bootstrap();
    let (tx_id, g) = (id.clone(), group.clone());
    let p = tokio::task::spawn_blocking(move || {
        let p = transactional(&bootstrap, &tx_id, DEADLINE);
        p.begin_transaction().unwrap();
        send_each(&p, topic, "eos", DEADLINE);
        let member: BaseConsumer = client_config(&bootstrap)
            .set("group.id", &g)
            .create()
            .unwrap();
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(topic, 0, Offset::Offset(1))
            .unwrap();
        p.send_offsets_to_transaction(&offsets, &member.group_metadata().unwrap(), DEADLINE)
            .unwrap();
        p
    })
    .await
    .unwrap();

    // The group's slot moves to brokers 2 and 3; the transaction's stays.
    let bootstrap = c.bootstrap();
    let slot_arg = slot.to_string();
    let moved = tokio::task::spawn_blocking(move || {
        common::cli::magnetar(
            &bootstrap,
            &[
                "topic",
                "reassign",
                "__consumer_offsets",
                "--partition",
                &slot_arg,
                "--replicas",
                "2,3",
                "--wait",
            ],
            None,
        )
    })
    .await
    .unwrap();
    common::cli::ok(&moved);
    let via = c.addr(1);
    let g = group.clone();
    common::eventually(DEADLINE, "the group's new coordinator", || {
        let (via, g) = (via.clone(), g.clone());
        async move { coordinator_of(&via, GROUP, &g).await.filter(|n| *n != 1) }
    })
    .await;
    assert_eq!(
        coordinator_of(&c.addr(1), TRANSACTIONAL_ID, &id).await,
        Some(1)
    );

    let bootstrap = c.bootstrap();
    let committed = tokio::task::spawn_blocking(move || {
        p.commit_transaction(DEADLINE).unwrap();
        let reader: BaseConsumer = client_config(&bootstrap)
            .set("group.id", &group)
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, 0);
        let got = reader.committed_offsets(tpl, DEADLINE).unwrap();
        got.find_partition(topic, 0).unwrap().offset()
    })
    .await
    .unwrap();
    assert_eq!(committed, Offset::Offset(1));
}
