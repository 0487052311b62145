//! Transactions across a three-broker cluster (issues 10 and 11): the
//! transaction's coordinator, the leaders of the partitions it writes and
//! the coordinator of the group whose offsets it commits are different
//! brokers, so the markers, the produce-path verification (KIP-890) and the
//! transactional offsets all cross brokers. librdkafka's transactional
//! producer and read_committed consumers judge, in the scenarios of
//! `kafka_transactions.rs` (librdkafka's 0098-consumer-txn and
//! 0103-transactions).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::{coordinated_by, create_spread, Cluster};
use common::txn::{send_each, transactional};
use common::{client_config, isolated_consumer as consumer, polled, RawConn};
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, ResponseKind, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(20);
const DEADLINE: Duration = Duration::from_secs(30);

use common::cluster::FAST_SETTINGS as SETTINGS;

/// DescribeTransactions of `id` as the broker at `addr` answers it.
async fn describe(addr: &str, id: &str) -> TransactionState {
    let mut conn = RawConn::connect(addr.parse().unwrap()).await;
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(StrBytes::from_string(id.into()))]);
    match conn.call(ApiKey::DescribeTransactions, 0, req).await {
        ResponseKind::DescribeTransactions(mut r) => r.transaction_states.remove(0),
        other => panic!("{other:?}"),
    }
}

/// Every value of `topic`'s three partitions a consumer reads, once `n`
/// have come and nothing more arrives for a while.
fn read_all(c: &BaseConsumer, topic: &str, n: usize) -> BTreeSet<String> {
    read_partitions(c, topic, &[0, 1, 2], n)
}

/// The same from some partitions of `topic` only.
fn read_partitions(c: &BaseConsumer, topic: &str, parts: &[i32], n: usize) -> BTreeSet<String> {
    let mut tpl = TopicPartitionList::new();
    for p in parts {
        tpl.add_partition_offset(topic, *p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let out = common::read_then_quiet(c, n);
    let set: BTreeSet<String> = out.iter().cloned().collect();
    assert_eq!(set.len(), out.len(), "nothing twice: {out:?}");
    set
}

fn values(tags: &[&str]) -> BTreeSet<String> {
    tags.iter()
        .flat_map(|t| (0..3).map(move |p| format!("{t}-{p}")))
        .collect()
}

/// The group's committed offset of each partition of `topic`, as a
/// read_uncommitted consumer reads it (a read_committed one waits while a
/// transaction's offsets are pending).
fn committed(bootstrap: &str, group: &str, topic: &str) -> Vec<Offset> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition(topic, p);
    }
    let c = consumer(bootstrap, group, "read_uncommitted");
    let got = c.committed_offsets(tpl, TIMEOUT).unwrap();
    (0..3)
        .map(|p| got.find_partition(topic, p).unwrap().offset())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn transactions_span_brokers_with_their_markers_and_offsets() {
    let mut c = Cluster::start(3, SETTINGS);
    let b = c.bootstrap();
    create_spread(&c.addr(1), "ctx-out", 3).await;
    create_spread(&c.addr(1), "ctx-in", 3).await;
    // The transaction is coordinated by node 1, the group by node 2; the
    // partitions are led by all three.
    let txn_id = coordinated_by(&c.addr(3), 1, "ctx", 1).await;
    let group = coordinated_by(&c.addr(3), 0, "ctx-group", 2).await;

    // Commit, abort, commit: a read_committed consumer sees the committed
    // records of every partition and none of the aborted ones; a
    // read_uncommitted one sees all, so the aborted records were written
    // and the abort markers reached the other brokers.
    let p = transactional(&b, &txn_id, TIMEOUT);
    for (tag, commit) in [("c1", true), ("a1", false), ("c2", true)] {
        p.begin_transaction().unwrap();
        send_each(&p, "ctx-out", tag, TIMEOUT);
        if commit {
            p.commit_transaction(TIMEOUT).unwrap();
        } else {
            p.abort_transaction(TIMEOUT).unwrap();
        }
    }
    // An open transaction holds read_committed consumers back on every
    // partition it wrote to, whichever broker leads it.
    p.begin_transaction().unwrap();
    send_each(&p, "ctx-out", "open", TIMEOUT);
    // Its coordinator describes it, with partitions of all three brokers;
    // another broker sends the client to the coordinator.
    let d = describe(&c.addr(1), &txn_id).await;
    assert_eq!(d.error_code, 0);
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!(d.topics[0].partitions.len(), 3, "{d:?}");
    assert_eq!(describe(&c.addr(2), &txn_id).await.error_code, 16);
    let rc = consumer(&b, "ctx-rc", "read_committed");
    assert_eq!(read_all(&rc, "ctx-out", 6), values(&["c1", "c2"]));
    let ru = consumer(&b, "ctx-ru", "read_uncommitted");
    assert_eq!(
        read_all(&ru, "ctx-out", 12),
        values(&["c1", "a1", "c2", "open"])
    );
    p.commit_transaction(TIMEOUT).unwrap();
    let rc = consumer(&b, "ctx-rc2", "read_committed");
    assert_eq!(read_all(&rc, "ctx-out", 9), values(&["c1", "c2", "open"]));

    // Consume-transform-produce: the group's offsets (on node 2) are
    // committed with the output of a committed transaction (coordinated on
    // node 1) and not at all with an aborted one.
    let plain: BaseProducer = client_config(&b).create().unwrap();
    let input = consumer(&b, &group, "read_committed");
    let mut tpl = TopicPartitionList::new();
    for partition in 0..3 {
        tpl.add_partition_offset("ctx-in", partition, Offset::Beginning)
            .unwrap();
    }
    input.assign(&tpl).unwrap();
    let mut next = [0i64; 3];
    let deadline = std::time::Instant::now() + DEADLINE;
    for (round, commit) in [(0, true), (1, false)] {
        // One input per partition for each round, produced as it starts.
        for partition in 0..3 {
            let v = format!("in{round}-{partition}");
            plain
                .send(
                    BaseRecord::to("ctx-in")
                        .partition(partition)
                        .key(&v)
                        .payload(&v),
                )
                .unwrap();
        }
        plain.flush(TIMEOUT).unwrap();
        p.begin_transaction().unwrap();
        let mut n = 0;
        while n < 3 {
            assert!(std::time::Instant::now() < deadline, "input round {round}");
            if let Some(m) = polled(input.poll(Duration::from_millis(200))) {
                let v = format!("out-{}", String::from_utf8_lossy(m.payload().unwrap()));
                p.send(
                    BaseRecord::to("ctx-out")
                        .partition(m.partition())
                        .key(&v)
                        .payload(&v),
                )
                .unwrap();
                next[m.partition() as usize] = m.offset() + 1;
                n += 1;
            }
        }
        p.flush(TIMEOUT).unwrap();
        let mut offsets = TopicPartitionList::new();
        for (partition, offset) in next.iter().enumerate() {
            offsets
                .add_partition_offset("ctx-in", partition as i32, Offset::Offset(*offset))
                .unwrap();
        }
        p.send_offsets_to_transaction(&offsets, &input.group_metadata().unwrap(), TIMEOUT)
            .unwrap();
        // Staged on the group's coordinator, not committed yet.
        let before = if round == 0 {
            Offset::Invalid
        } else {
            Offset::Offset(1)
        };
        assert_eq!(
            committed(&b, &group, "ctx-in"),
            vec![before; 3],
            "round {round}: offsets visible before the transaction ended"
        );
        if commit {
            p.commit_transaction(TIMEOUT).unwrap();
            assert_eq!(
                committed(&b, &group, "ctx-in"),
                vec![Offset::Offset(1); 3],
                "committed with the transaction"
            );
        } else {
            p.abort_transaction(TIMEOUT).unwrap();
        }
    }
    assert_eq!(
        committed(&b, &group, "ctx-in"),
        vec![Offset::Offset(1); 3],
        "the aborted transaction's offsets were dropped"
    );
    // Nothing is left pending either: a read_committed consumer (which
    // waits out pending transactional offsets) reads them at once.
    let mut tpl = TopicPartitionList::new();
    for partition in 0..3 {
        tpl.add_partition("ctx-in", partition);
    }
    let stable = consumer(&b, &group, "read_committed")
        .committed_offsets(tpl, TIMEOUT)
        .unwrap();
    for partition in 0..3 {
        assert_eq!(
            stable.find_partition("ctx-in", partition).unwrap().offset(),
            Offset::Offset(1)
        );
    }
    let rc = consumer(&b, "ctx-rc3", "read_committed");
    let mut expect = values(&["c1", "c2", "open"]);
    expect.extend((0..3).map(|p| format!("out-in0-{p}")));
    assert_eq!(read_all(&rc, "ctx-out", 12), expect);

    // Zombie fencing: a second producer with the same transactional id
    // aborts the first one's transaction on every broker and fences it.
    p.begin_transaction().unwrap();
    send_each(&p, "ctx-out", "zombie", TIMEOUT);
    let fresh = transactional(&b, &txn_id, TIMEOUT);
    // The zombie's later batches are refused everywhere: the leaders of the
    // other brokers check them with the coordinator, which fenced it.
    for partition in 0..3 {
        let v = format!("late-{partition}");
        let _ = p.send(
            BaseRecord::to("ctx-out")
                .partition(partition)
                .key(v.as_bytes())
                .payload(v.as_bytes()),
        );
    }
    let _ = p.flush(TIMEOUT);
    fresh.begin_transaction().unwrap();
    send_each(&fresh, "ctx-out", "fresh", TIMEOUT);
    fresh.commit_transaction(TIMEOUT).unwrap();
    let text = p.commit_transaction(TIMEOUT).unwrap_err().to_string();
    assert!(
        text.contains("fenced") || text.contains("Fenced") || text.contains("epoch"),
        "{text}"
    );
    let rc = consumer(&b, "ctx-rc4", "read_committed");
    expect.extend(values(&["fresh"]));
    assert_eq!(read_all(&rc, "ctx-out", 15), expect);
    // Everything written, aborted or not: none of the zombie's late ones.
    let ru = consumer(&b, "ctx-ru2", "read_uncommitted");
    let mut all = values(&["c1", "a1", "c2", "open", "zombie", "fresh"]);
    all.extend((0..2).flat_map(|r| (0..3).map(move |p| format!("out-in{r}-{p}"))));
    assert_eq!(read_all(&ru, "ctx-out", 24), all);
}

/// A partition's leader is SIGKILLed after the transaction wrote to it and
/// before the commit: the commit cannot finish without its marker, so it
/// stays prepared (read_committed consumers see none of it, anywhere) and
/// completes once that broker is back; nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_completes_when_a_killed_partition_leader_returns() {
    let mut c = Cluster::start(3, SETTINGS);
    let b = c.addr(1);
    create_spread(&b, "ctx-crash", 3).await;
    let leaders = create_spread(&b, "ctx-crash-2", 3).await;
    let txn_id = coordinated_by(&b, 1, "ctx-crash", 1).await;
    let p = transactional(&b, &txn_id, TIMEOUT);
    p.begin_transaction().unwrap();
    send_each(&p, "ctx-crash", "before", TIMEOUT);
    send_each(&p, "ctx-crash-2", "before", TIMEOUT);
    let (down, _) = leaders.iter().find(|(_, l)| **l == 3).unwrap();
    c.node(3).kill();

    // librdkafka's commit gives up with a retriable error while a marker
    // cannot be written.
    let e = p
        .commit_transaction(Duration::from_secs(5))
        .expect_err("committed without the marker of a partition whose broker is down");
    match &e {
        rdkafka::error::KafkaError::Transaction(r) => {
            assert!(r.is_retriable() && !r.txn_requires_abort(), "{e}")
        }
        other => panic!("{other}"),
    }
    // The commit is decided: the partitions of the live brokers got their
    // markers and read_committed consumers read them already.
    let live: Vec<i32> = leaders
        .iter()
        .filter(|(_, l)| **l != 3)
        .map(|(p, _)| *p)
        .collect();
    let rc = consumer(&b, "ctx-crash-live", "read_committed");
    assert_eq!(
        read_partitions(&rc, "ctx-crash-2", &live, 2),
        live.iter().map(|p| format!("before-{p}")).collect(),
        "(commit refused with: {e})"
    );
    c.node(3).restart();
    let e2 = p.commit_transaction(TIMEOUT);
    assert!(
        e2.is_ok(),
        "commit after the broker returned: {e2:?} (first: {e})"
    );
    let rc = consumer(&b, "ctx-crash-rc", "read_committed");
    assert_eq!(read_all(&rc, "ctx-crash", 3), values(&["before"]));
    let rc = consumer(&b, "ctx-crash-rc2", "read_committed");
    assert_eq!(
        read_all(&rc, "ctx-crash-2", 3),
        values(&["before"]),
        "partition {down} of ctx-crash-2 lost its records or its marker"
    );
    // The producer goes on with its next transaction.
    p.begin_transaction().unwrap();
    send_each(&p, "ctx-crash", "after", TIMEOUT);
    p.commit_transaction(TIMEOUT).unwrap();
    let rc = consumer(&b, "ctx-crash-rc3", "read_committed");
    assert_eq!(read_all(&rc, "ctx-crash", 6), values(&["before", "after"]));
}
