//! Replicated partitions on three `magnetar broker` processes (issue 35):
//! librdkafka creates topics with replication factor 3 and produces with
//! `acks=all`; followers fetch from their leaders, the ISR holds all three,
//! and a SIGKILL of a partition's leader loses no acknowledged record: a
//! follower in the ISR takes over, the producer carries on with it, the
//! killed broker returns, truncates to what the new leader has and joins
//! the ISR again. With two of three brokers down and
//! `min.insync.replicas=2`, `acks=all` producers are refused
//! (NOT_ENOUGH_REPLICAS) and nothing is acknowledged.

mod common;

use std::time::Duration;

use common::client_config;
use common::cluster::{create, metadata, wait_brokers, Cluster};
use common::replication::{
    check_exactly_once, elect_preferred, partitions, produce_all, producer, read_all, settings,
    wait_isr, DEADLINE,
};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};

#[tokio::test(flavor = "multi_thread")]
async fn acks_all_records_survive_a_sigkill_of_their_leader() {
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "replicated";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 3, TopicReplication::Fixed(3)),
    )
    .await;
    for id in 1..=3 {
        wait_isr(&c.addr(id), topic, 3, &[1, 2, 3]).await;
    }

    let p = producer(&c.bootstrap());
    let first: Vec<String> = (0..300).map(|i| format!("a{i:04}")).collect();
    produce_all(&p, topic, &first).await;

    // Every follower holds the records: read them through each broker
    // after its partitions' leaders are gone would need them. First, kill
    // the leader of partition 0 while producing goes on.
    let leader = partitions(&c.addr(1), topic).await[&0].0;
    c.node(leader as usize).kill();
    let survivors: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    let second: Vec<String> = (0..300).map(|i| format!("b{i:04}")).collect();
    produce_all(&p, topic, &second).await;
    let via = c.addr(survivors[0] as usize);
    wait_isr(&via, topic, 3, &survivors).await;

    let produced: Vec<String> = first.iter().chain(&second).cloned().collect();
    let read = read_all(&c.bootstrap(), topic, 3, produced.len());
    check_exactly_once(&read, &produced);

    // The killed broker returns, catches up and is in sync again.
    c.node(leader as usize).restart();
    wait_brokers(&c, &[1, 2, 3], 3).await;
    wait_isr(&c.addr(1), topic, 3, &[1, 2, 3]).await;

    // Now without one of the others: the returned broker's copy serves.
    let other = survivors[1];
    c.node(other as usize).kill();
    let live: Vec<i32> = (1..=3).filter(|n| *n != other).collect();
    wait_isr(&c.addr(leader as usize), topic, 3, &live).await;
    let third: Vec<String> = (0..100).map(|i| format!("c{i:04}")).collect();
    produce_all(&p, topic, &third).await;
    let produced: Vec<String> = produced.iter().chain(&third).cloned().collect();
    let read = read_all(&c.bootstrap(), topic, 3, produced.len());
    check_exactly_once(&read, &produced);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_brokers_down_refuses_acks_all_and_recovers() {
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "needs-two";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 1, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 1, &[1, 2, 3]).await;
    let leader = partitions(&c.addr(1), topic).await[&0].0;
    let others: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    c.node(others[0] as usize).kill();
    c.node(others[1] as usize).kill();
    // The leader alone: out of the ISR go the others once they lag (or
    // are fenced; the quorum is lost with two of three controllers, so
    // the ISR shrink may not commit). Either way nothing is acknowledged.
    let p: FutureProducer = client_config(&c.addr(leader as usize))
        .set("acks", "all")
        .set("message.timeout.ms", "8000")
        .create()
        .unwrap();
    let r = p
        .send(
            FutureRecord::to(topic).key("k").payload("lost?"),
            Duration::from_secs(10),
        )
        .await;
    assert!(r.is_err(), "acknowledged with one of three replicas: {r:?}");

    // One returns: the partition takes acks=all again.
    c.node(others[0] as usize).restart();
    let p = producer(&c.bootstrap());
    let values: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    produce_all(&p, topic, &values).await;
    let read = read_all(&c.bootstrap(), topic, 1, values.len());
    // The unacknowledged record may be there (Kafka makes no promise
    // about it), but every acknowledged one is, once, in order.
    let read: Vec<Vec<String>> = read
        .into_iter()
        .map(|p| p.into_iter().filter(|v| v != "lost?").collect())
        .collect();
    check_exactly_once(&read, &values);
}

/// A rolling restart (SIGTERM, which shuts down in a controlled way, then
/// start again, one broker at a time) under a steady `acks=all` load:
/// every record is acknowledged (librdkafka retries the leader changes
/// within its timeout, none fails) and each is read back once, in order.
#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_restart_fails_no_produce() {
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "rolling";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 3, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 3, &[1, 2, 3]).await;

    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let acked = std::sync::Arc::new(AtomicUsize::new(0));
    // Waits until `n` more records than now are acknowledged.
    let more_acked = |n: usize| {
        let acked = acked.clone();
        let target = acked.load(Ordering::Relaxed) + n;
        async move {
            common::eventually(DEADLINE, &format!("{n} more records acknowledged"), || {
                let acked = acked.clone();
                async move { (acked.load(Ordering::Relaxed) >= target).then_some(()) }
            })
            .await
        }
    };
    let load = {
        let p = producer(&c.bootstrap());
        let (stop, acked) = (stop.clone(), acked.clone());
        tokio::spawn(async move {
            let mut values = Vec::new();
            let mut pending = Vec::new();
            let mut i = 0;
            // A steady load: one record every 5 ms.
            let mut pace = tokio::time::interval(Duration::from_millis(5));
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Ordering::Relaxed) {
                pace.tick().await;
                let v = format!("r{i:06}");
                i += 1;
                // Enqueued here, in order (the delivery is awaited
                // apart): the order the partition must keep.
                let delivery = p
                    .send_result(FutureRecord::to("rolling").key(&v).payload(&v))
                    .map_err(|(e, _)| e.to_string());
                let acked = acked.clone();
                pending.push(tokio::spawn(async move {
                    let r = match delivery {
                        Ok(d) => match d.await {
                            Ok(Ok(_)) => Ok(()),
                            Ok(Err((e, _))) => Err(e.to_string()),
                            Err(_) => Err("delivery dropped".to_string()),
                        },
                        Err(e) => Err(e),
                    };
                    acked.fetch_add(1, Ordering::Relaxed);
                    r
                }));
                values.push(v);
            }
            let mut failed = Vec::new();
            for (v, h) in values.iter().zip(pending) {
                if let Err(e) = h.await.unwrap() {
                    failed.push(format!("{v}: {e}"));
                }
            }
            (values, failed)
        })
    };
    for id in 1..=3usize {
        // Records go in before each restart.
        more_acked(50).await;
        let code = c.node(id).terminate();
        assert_eq!(code, Some(0), "node {id} exit code");
        c.node(id).restart();
        wait_brokers(&c, &[1, 2, 3], 3).await;
        wait_isr(&c.addr(1), topic, 3, &[1, 2, 3]).await;
    }
    // Leadership moved with the restarts; a preferred election moves it
    // back to each partition's first replica while producing goes on.
    let codes = elect_preferred(&c.addr(2), topic, &[0, 1, 2]).await;
    assert!(
        codes.iter().all(|c| *c == 0 || *c == 84),
        "elected or ELECTION_NOT_NEEDED: {codes:?}"
    );
    wait_preferred_leaders(&c.addr(3), topic).await;
    assert_eq!(
        elect_preferred(&c.addr(1), topic, &[0, 1, 2]).await,
        [84, 84, 84],
        "ELECTION_NOT_NEEDED once preferred replicas lead"
    );
    // And after the leaders moved back.
    more_acked(50).await;
    stop.store(true, Ordering::Relaxed);
    let (values, failed) = load.await.unwrap();
    assert!(failed.is_empty(), "failed produce requests: {failed:?}");
    assert!(values.len() > 100, "only {} records produced", values.len());
    let read = read_all(&c.bootstrap(), topic, 3, values.len());
    check_exactly_once(&read, &values);
}

/// Records deleted on the leader (DeleteRecords) are deleted on its
/// followers too: after a failover the new leader starts where the old one
/// did, and no reader sees them again.
#[tokio::test(flavor = "multi_thread")]
async fn deleted_records_stay_deleted_after_a_failover() {
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "trimmed";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 1, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 1, &[1, 2, 3]).await;
    let p = producer(&c.bootstrap());
    let first: Vec<String> = (0..100).map(|i| format!("a{i:04}")).collect();
    produce_all(&p, topic, &first).await;

    let mut before = rdkafka::TopicPartitionList::new();
    before
        .add_partition_offset(topic, 0, rdkafka::Offset::Offset(60))
        .unwrap();
    let deleted = common::cluster::admin(&c.bootstrap())
        .delete_records(&before, &rdkafka::admin::AdminOptions::new())
        .await
        .unwrap();
    let low = deleted.elements()[0].offset();
    assert_eq!(low, rdkafka::Offset::Offset(60), "{deleted:?}");
    // Committed on every in-sync replica: each took the new log start
    // from the fetch that brought it these records.
    let second: Vec<String> = (0..20).map(|i| format!("b{i:04}")).collect();
    produce_all(&p, topic, &second).await;

    let leader = partitions(&c.addr(1), topic).await[&0].0;
    c.node(leader as usize).kill();
    let survivors: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    wait_isr(&c.addr(survivors[0] as usize), topic, 1, &survivors).await;
    // Metadata names the killed broker's replica offline.
    let md = metadata(&c.addr(survivors[0] as usize)).await;
    let offline: Vec<i32> = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .map(|t| {
            t.partitions[0]
                .offline_replicas
                .iter()
                .map(|n| n.0)
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(offline, [leader], "offline replicas");
    let described = common::cli::json(&common::cli::magnetar(
        &c.addr(survivors[0] as usize),
        &["topic", "describe", topic, "--json"],
        None,
    ));
    assert_eq!(
        described["partitions"][0]["offline"],
        serde_json::json!([leader]),
        "magnetar topic describe: {described}"
    );
    let reader: BaseConsumer = client_config(&c.bootstrap()).create().unwrap();
    let (start, end) = reader
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!((start, end), (60, 120), "the new leader's log bounds");
    let kept: Vec<String> = first[60..].iter().chain(&second).cloned().collect();
    let read = read_all(&c.bootstrap(), topic, 1, kept.len());
    assert_eq!(read[0], kept, "what a reader from the start sees");
}

/// Waits until `addr` reports every partition of `topic` led by its first
/// replica.
async fn wait_preferred_leaders(addr: &str, topic: &str) {
    common::eventually(DEADLINE, "preferred leaders", || async {
        let md = metadata(addr).await;
        let t = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))?;
        (!t.partitions.is_empty()
            && t.partitions
                .iter()
                .all(|p| p.leader_id.0 == p.replica_nodes[0].0))
        .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn leadership_returns_to_preferred_replicas_by_itself() {
    let mut s = settings();
    s.push("leader.imbalance.check.interval.seconds=1");
    let mut c = Cluster::start(3, &s);
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "balanced";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 6, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 6, &[1, 2, 3]).await;
    wait_preferred_leaders(&c.addr(1), topic).await;
    let p = producer(&c.bootstrap());
    let first: Vec<String> = (0..200).map(|i| format!("a{i:04}")).collect();
    produce_all(&p, topic, &first).await;

    // Broker 2 goes away (its partitions get other leaders) and returns:
    // once in their ISRs again it leads them again, with no ElectLeaders.
    c.node(2).kill();
    wait_isr(&c.addr(1), topic, 6, &[1, 3]).await;
    let led_by_2 = partitions(&c.addr(1), topic)
        .await
        .values()
        .filter(|(leader, _)| *leader == 2)
        .count();
    assert_eq!(led_by_2, 0, "a killed broker leads nothing");
    c.node(2).restart();
    wait_brokers(&c, &[1, 2, 3], 3).await;
    wait_preferred_leaders(&c.addr(3), topic).await;
    let second: Vec<String> = (0..200).map(|i| format!("b{i:04}")).collect();
    produce_all(&p, topic, &second).await;
    let produced: Vec<String> = first.iter().chain(&second).cloned().collect();
    let read = read_all(&c.bootstrap(), topic, 6, produced.len());
    check_exactly_once(&read, &produced);
}

fn run_python(args: &[&str]) {
    common::python("kafka_python_replication.py", args);
}

/// kafka-python produces to a replication-factor-3 topic with `acks=all`,
/// the leader of a partition is SIGKILLed, kafka-python produces again
/// (through the new leaders) and reads every acknowledged record back,
/// once each.
#[tokio::test(flavor = "multi_thread")]
async fn kafka_python_keeps_its_records_across_a_leader_failover() {
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "py-replicated";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 3, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 3, &[1, 2, 3]).await;
    let bootstrap = c.bootstrap();
    tokio::task::spawn_blocking(move || {
        run_python(&[&bootstrap, "produce", "py-replicated", "before", "300"])
    })
    .await
    .unwrap();
    let leader = partitions(&c.addr(1), topic).await[&0].0;
    c.node(leader as usize).kill();
    let bootstrap = c.bootstrap();
    tokio::task::spawn_blocking(move || {
        run_python(&[&bootstrap, "produce", "py-replicated", "after", "300"]);
        run_python(&[
            &bootstrap,
            "consume",
            "py-replicated",
            "before:300",
            "after:300",
        ]);
    })
    .await
    .unwrap();
}

/// A transaction committed on a replication-factor-3 topic: its markers
/// reach the in-sync replicas before the commit is answered, so after the
/// leader's SIGKILL a read_committed consumer of the new leaders sees the
/// records (a marker only the old leader had would hold the last stable
/// offset back forever).
#[tokio::test(flavor = "multi_thread")]
async fn a_committed_transaction_survives_its_leaders_sigkill() {
    use rdkafka::producer::Producer;
    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "txn-replicated";
    create(
        &c.bootstrap(),
        NewTopic::new(topic, 2, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), topic, 2, &[1, 2, 3]).await;
    let p: FutureProducer = client_config(&c.bootstrap())
        .set("transactional.id", "replicated-txn")
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    let values: Vec<String> = (0..50).map(|i| format!("t{i:03}")).collect();
    {
        let p = p.clone();
        tokio::task::spawn_blocking(move || {
            p.init_transactions(Duration::from_secs(30)).unwrap();
            p.begin_transaction().unwrap();
        })
        .await
        .unwrap();
    }
    produce_all(&p, topic, &values).await;
    {
        let p = p.clone();
        tokio::task::spawn_blocking(move || p.commit_transaction(Duration::from_secs(30)).unwrap())
            .await
            .unwrap();
    }
    let leader = partitions(&c.addr(1), topic).await[&0].0;
    c.node(leader as usize).kill();
    let survivors: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    wait_isr(&c.addr(survivors[0] as usize), topic, 2, &survivors).await;
    // read_committed (librdkafka's default isolation).
    let read = read_all(&c.bootstrap(), topic, 2, values.len());
    check_exactly_once(&read, &values);
}
