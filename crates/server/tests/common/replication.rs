//! Helpers of the replication tests (three `magnetar broker` processes):
//! their settings, each partition's leader and ISR as Metadata reports
//! them, an idempotent `acks=all` librdkafka producer, and a reader that
//! checks every acknowledged record comes back exactly once, in order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;

use super::cluster::{metadata, FAST_SETTINGS};
use super::{client_config, polled};

/// How long a replication test waits for a condition.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The cluster's settings: fast fencing and ISR shrinking, two in-sync
/// replicas needed for `acks=all`.
pub fn settings() -> Vec<&'static str> {
    let mut s = FAST_SETTINGS.to_vec();
    s.extend([
        "replica.lag.time.max.ms=3000",
        "min.insync.replicas=2",
        "replica.fetch.wait.max.ms=200",
        "replica.fetch.backoff.ms=200",
    ]);
    s
}

/// Partition → (leader, ISR) of `topic` as `addr` reports it.
pub async fn partitions(addr: &str, topic: &str) -> BTreeMap<i32, (i32, BTreeSet<i32>)> {
    let md = metadata(addr).await;
    md.topics
        .iter()
        .filter(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                (
                    p.leader_id.0,
                    p.isr_nodes.iter().map(|n| n.0).collect::<BTreeSet<_>>(),
                ),
            )
        })
        .collect()
}

/// Waits until `addr` reports every one of `n` partitions of `topic` led
/// by a broker of `live` with exactly `live` in its ISR.
pub async fn wait_isr(addr: &str, topic: &str, n: usize, live: &[i32]) {
    let want: BTreeSet<i32> = live.iter().copied().collect();
    super::eventually(DEADLINE, &format!("ISR {want:?} on {topic}"), || {
        let want = want.clone();
        async move {
            let p = partitions(addr, topic).await;
            (p.len() == n
                && p.values()
                    .all(|(leader, isr)| want.contains(leader) && *isr == want))
            .then_some(())
        }
    })
    .await;
}

pub fn producer(bootstrap: &str) -> FutureProducer {
    client_config(bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

/// Produces `values` (key = value), each acknowledged.
pub async fn produce_all(p: &FutureProducer, topic: &str, values: &[String]) {
    let sends: Vec<_> = values
        .iter()
        .map(|v| {
            p.send(
                FutureRecord::to(topic).key(v).payload(v),
                Duration::from_secs(60),
            )
        })
        .collect();
    for (v, r) in values.iter().zip(futures::future::join_all(sends).await) {
        r.unwrap_or_else(|(e, _)| panic!("{v} not acknowledged: {e}"));
    }
}

/// Every record of `topic` read from the start through `bootstrap`, per
/// partition in offset order, until `n` came.
pub fn read_all(bootstrap: &str, topic: &str, partitions: i32, n: usize) -> Vec<Vec<String>> {
    let c: BaseConsumer = client_config(bootstrap)
        .set("group.id", "replication-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = vec![Vec::new(); partitions as usize];
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut got = 0;
    while got < n {
        assert!(
            std::time::Instant::now() < deadline,
            "read {got} of {n}: {out:?}"
        );
        if let Some(m) = polled(c.poll(Duration::from_millis(200))) {
            out[m.partition() as usize]
                .push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            got += 1;
        }
    }
    // Nothing more than was acknowledged.
    let quiet = std::time::Instant::now() + Duration::from_millis(1500);
    while std::time::Instant::now() < quiet {
        if let Some(m) = polled(c.poll(Duration::from_millis(100))) {
            out[m.partition() as usize]
                .push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    out
}

/// Each acknowledged value exactly once, and each partition's values in
/// the order they were produced.
pub fn check_exactly_once(read: &[Vec<String>], produced: &[String]) {
    let all: Vec<&String> = read.iter().flatten().collect();
    let distinct: BTreeSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), distinct.len(), "a record was read twice");
    let want: BTreeSet<&String> = produced.iter().collect();
    assert_eq!(
        distinct, want,
        "read records differ from the acknowledged ones"
    );
    let order: BTreeMap<&String, usize> =
        produced.iter().enumerate().map(|(i, v)| (v, i)).collect();
    for p in read {
        let idx: Vec<usize> = p.iter().map(|v| order[v]).collect();
        assert!(idx.windows(2).all(|w| w[0] < w[1]), "out of order: {p:?}");
    }
}

/// ElectLeaders (preferred) of `partitions` of `topic` through `addr`: each
/// partition's error code.
pub async fn elect_preferred(addr: &str, topic: &str, partitions: &[i32]) -> Vec<i16> {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ResponseKind, TopicName};
    let mut conn = super::RawConn::connect(addr.parse().unwrap()).await;
    let req = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(5000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(TopicName(topic.to_string().into()))
            .with_partitions(partitions.to_vec())]));
    let ResponseKind::ElectLeaders(r) = conn.call(ApiKey::ElectLeaders, 2, req).await else {
        panic!("ElectLeaders")
    };
    assert_eq!(r.error_code, 0);
    r.replica_election_results[0]
        .partition_result
        .iter()
        .map(|p| p.error_code)
        .collect()
}
