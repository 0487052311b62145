//! Chaos on three `magnetar broker` processes (issue 35): replication
//! factor 3, `min.insync.replicas=2`, an idempotent librdkafka producer
//! with `acks=all` and a librdkafka consumer group committing its offsets
//! run while a random broker (leaders and group coordinators included) is
//! SIGKILLed and started again, round after round. At the end every
//! acknowledged record is read back exactly once per partition, in order,
//! no produce request failed, and the group's committed offsets are at
//! least every commit the broker acknowledged and reach the end of the log.
//!
//! The suite runs a short round (`MAGNETAR_CHAOS_SECS`, 20 s by default);
//! the long run is `MAGNETAR_CHAOS_SECS=300 cargo test --release -p
//! magnetar --test cluster_chaos -- --nocapture` (nextest's profile stops
//! a test after 5 minutes). The brokers killed follow
//! `MAGNETAR_CHAOS_SEED` (printed; random unless given).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::{create, wait_brokers, Cluster};
use common::replication::{check_exactly_once, producer, read_all, settings, wait_isr, DEADLINE};
use common::{client_config, polled};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "chaos";
const GROUP: &str = "chaos-group";
const PARTITIONS: i32 = 3;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A small seeded generator (xorshift64*): which broker dies next.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// What the consumer group's member saw: the offsets each acknowledged
/// commit stored (the highest per partition) and how many records it read.
#[derive(Default)]
struct Commits {
    acknowledged: BTreeMap<i32, i64>,
    read: usize,
    failed_commits: usize,
}

/// A member of `GROUP` reading `TOPIC` and committing what it read every
/// 100 ms until `stop`, then once more.
fn run_member(bootstrap: String, stop: Arc<AtomicBool>, commits: Arc<Mutex<Commits>>) {
    let c: BaseConsumer = client_config(&bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .create()
        .unwrap();
    c.subscribe(&[TOPIC]).unwrap();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let mut last_commit = Instant::now();
    let commit = |next: &BTreeMap<i32, i64>| {
        if next.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for (p, o) in next {
            tpl.add_partition_offset(TOPIC, *p, Offset::Offset(*o))
                .unwrap();
        }
        let result = c.commit(&tpl, CommitMode::Sync);
        let mut seen = commits.lock().unwrap();
        match result {
            Ok(()) => {
                for (p, o) in next {
                    let e = seen.acknowledged.entry(*p).or_insert(*o);
                    *e = (*e).max(*o);
                }
            }
            // The coordinator may be the broker just killed: the commit
            // is not acknowledged, and promises nothing.
            Err(_) => seen.failed_commits += 1,
        }
    };
    while !stop.load(Ordering::Relaxed) {
        if let Some(m) = polled(c.poll(Duration::from_millis(100))) {
            use rdkafka::Message;
            next.insert(m.partition(), m.offset() + 1);
            commits.lock().unwrap().read += 1;
        }
        if last_commit.elapsed() >= Duration::from_millis(100) {
            commit(&next);
            last_commit = Instant::now();
        }
    }
    commit(&next);
}

/// The offsets `GROUP` has committed, as a fresh client of it reads them.
fn committed(bootstrap: &str) -> BTreeMap<i32, i64> {
    let c: BaseConsumer = client_config(bootstrap)
        .set("group.id", GROUP)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    c.committed_offsets(tpl, Duration::from_secs(10))
        .unwrap()
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
}

/// Each partition's log end offset, as `bootstrap` reports it.
fn log_ends(bootstrap: &str) -> BTreeMap<i32, i64> {
    let c: BaseConsumer = client_config(bootstrap).create().unwrap();
    (0..PARTITIONS)
        .map(|p| {
            let (_, high) = c
                .fetch_watermarks(TOPIC, p, Duration::from_secs(10))
                .unwrap();
            (p, high)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn random_sigkills_lose_no_acknowledged_record_or_committed_offset() {
    let secs = env_u64("MAGNETAR_CHAOS_SECS").unwrap_or(20);
    let seed = env_u64("MAGNETAR_CHAOS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("chaos for {secs} s, MAGNETAR_CHAOS_SEED={seed}");
    let mut rng = Rng(seed | 1);

    let mut c = Cluster::start(3, &settings());
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let bootstrap = c.bootstrap();
    create(
        &bootstrap,
        NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(3)),
    )
    .await;
    wait_isr(&c.addr(1), TOPIC, PARTITIONS as usize, &[1, 2, 3]).await;

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
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
        let p = producer(&bootstrap);
        let (stop, acked) = (stop.clone(), acked.clone());
        tokio::spawn(async move {
            let mut values = Vec::new();
            let mut pending = Vec::new();
            // A steady load: one record every 4 ms.
            let mut pace = tokio::time::interval(Duration::from_millis(4));
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Ordering::Relaxed) {
                pace.tick().await;
                let v = format!("r{:07}", values.len());
                // Enqueued here, in order; deliveries are awaited apart.
                let delivery = p
                    .send_result(FutureRecord::to(TOPIC).key(&v).payload(&v))
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
            let mut ok = Vec::new();
            let mut failed = Vec::new();
            for (v, h) in values.into_iter().zip(pending) {
                match h.await.unwrap() {
                    Ok(()) => ok.push(v),
                    Err(e) => failed.push(format!("{v}: {e}")),
                }
            }
            (ok, failed)
        })
    };
    let commits = Arc::new(Mutex::new(Commits::default()));
    let member = {
        let (b, stop, commits) = (
            bootstrap.clone(),
            Arc::new(AtomicBool::new(false)),
            commits.clone(),
        );
        let handle = {
            let stop = stop.clone();
            std::thread::spawn(move || run_member(b, stop, commits))
        };
        (stop, handle)
    };

    let started = Instant::now();
    let mut rounds = 0;
    while started.elapsed() < Duration::from_secs(secs) || rounds == 0 {
        more_acked(100).await;
        let victim = 1 + rng.below(3) as usize;
        eprintln!("round {rounds}: SIGKILL broker {victim}");
        c.node(victim).kill();
        // The two others carry on: leaders move, acks=all keeps working.
        more_acked(100).await;
        c.node(victim).restart();
        wait_brokers(&c, &[1, 2, 3], 3).await;
        wait_isr(&c.addr(1), TOPIC, PARTITIONS as usize, &[1, 2, 3]).await;
        rounds += 1;
    }
    more_acked(100).await;
    stop.store(true, Ordering::Relaxed);
    let (acknowledged, failed) = load.await.unwrap();
    assert!(failed.is_empty(), "failed produce requests: {failed:?}");

    // The group reads to the end and commits it.
    let ends = log_ends(&bootstrap);
    common::eventually(DEADLINE, "the group committed the whole log", || {
        let commits = commits.clone();
        let ends = ends.clone();
        async move { (commits.lock().unwrap().acknowledged == ends).then_some(()) }
    })
    .await;
    member.0.store(true, Ordering::Relaxed);
    member.1.join().unwrap();

    let seen = commits.lock().unwrap();
    let stored = committed(&bootstrap);
    for (p, o) in &seen.acknowledged {
        let s = stored.get(p).copied().unwrap_or(-1);
        assert!(
            s >= *o,
            "partition {p}: committed offset {s}, but a commit of {o} was acknowledged"
        );
    }
    assert_eq!(stored, ends, "committed offsets are the log ends");
    eprintln!(
        "{rounds} rounds, {} records acknowledged, the group read {} and {} commits were refused",
        acknowledged.len(),
        seen.read,
        seen.failed_commits
    );
    let read = read_all(&bootstrap, TOPIC, PARTITIONS, acknowledged.len());
    check_exactly_once(&read, &acknowledged);
}
