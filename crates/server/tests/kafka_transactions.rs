//! Transactions (KIP-98) with librdkafka against the real broker: a
//! transactional producer's commits and aborts as read_committed and
//! read_uncommitted consumers see them, consume-transform-produce with
//! `send_offsets_to_transaction`, zombie fencing, timeouts, and a SIGKILL in
//! the middle of a transaction. The scenarios follow librdkafka's
//! transaction tests (0098-consumer-txn, 0103-transactions, 0105).

mod common;

use std::time::Duration;

use common::{client_config, isolated_consumer as consumer, polled, BrokerProcess, RawConn};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ResponseKind, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(20);
const DEADLINE: Duration = Duration::from_secs(30);

async fn create(bootstrap: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
}

fn transactional(bootstrap: &str, id: &str, timeout_ms: u32) -> BaseProducer {
    let p: BaseProducer = client_config(bootstrap)
        .set("transactional.id", id)
        .set("transaction.timeout.ms", timeout_ms.to_string())
        .create()
        .unwrap();
    p.init_transactions(TIMEOUT).unwrap();
    p
}

fn send(p: &BaseProducer, topic: &str, partition: i32, values: &[&str]) {
    for v in values {
        p.send(
            BaseRecord::to(topic)
                .partition(partition)
                .key(v.as_bytes())
                .payload(v.as_bytes()),
        )
        .unwrap();
    }
    p.flush(TIMEOUT).unwrap();
}

/// The values of `topic`'s partition 0 a consumer reads until `n` arrive,
/// or until nothing more comes for a while once `n` are there.
fn read_values(c: &BaseConsumer, topic: &str, n: usize) -> Vec<String> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    common::read_then_quiet(c, n)
}

async fn describe(addr: &str, id: &str) -> DescribeTransactionsResponse {
    let mut conn = RawConn::connect(addr.parse().unwrap()).await;
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(StrBytes::from_string(id.into()))]);
    match conn.call(ApiKey::DescribeTransactions, 0, req).await {
        ResponseKind::DescribeTransactions(r) => r,
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn read_committed_sees_commits_never_aborts_and_stops_at_open_transactions() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "txn-basic", 1).await;
    let p = transactional(&b, "tx-basic", 60_000);
    p.begin_transaction().unwrap();
    send(&p, "txn-basic", 0, &["c1", "c2", "c3"]);
    p.commit_transaction(TIMEOUT).unwrap();
    p.begin_transaction().unwrap();
    send(&p, "txn-basic", 0, &["a1", "a2"]);
    p.abort_transaction(TIMEOUT).unwrap();
    p.begin_transaction().unwrap();
    send(&p, "txn-basic", 0, &["c4"]);
    p.commit_transaction(TIMEOUT).unwrap();

    let committed = consumer(&b, "rc", "read_committed");
    assert_eq!(
        read_values(&committed, "txn-basic", 4),
        ["c1", "c2", "c3", "c4"]
    );
    let uncommitted = consumer(&b, "ru", "read_uncommitted");
    assert_eq!(
        read_values(&uncommitted, "txn-basic", 6),
        ["c1", "c2", "c3", "a1", "a2", "c4"]
    );

    // An open transaction holds read_committed readers back (the last
    // stable offset), and not read_uncommitted ones.
    p.begin_transaction().unwrap();
    send(&p, "txn-basic", 0, &["open"]);
    let d = describe(&b, "tx-basic").await;
    let s = &d.transaction_states[0];
    assert_eq!(s.error_code, 0);
    assert_eq!(s.transaction_state.as_str(), "Ongoing");
    assert_eq!(s.topics[0].topic.as_str(), "txn-basic");
    assert_eq!(s.topics[0].partitions, [0]);
    let (low, high) = committed.fetch_watermarks("txn-basic", 0, TIMEOUT).unwrap();
    assert_eq!(low, 0);
    let fresh = consumer(&b, "rc2", "read_committed");
    assert_eq!(
        read_values(&fresh, "txn-basic", 4),
        ["c1", "c2", "c3", "c4"]
    );
    let fresh_u = consumer(&b, "ru2", "read_uncommitted");
    assert_eq!(
        read_values(&fresh_u, "txn-basic", 7).last().unwrap(),
        "open"
    );
    p.commit_transaction(TIMEOUT).unwrap();
    let after = consumer(&b, "rc3", "read_committed");
    assert_eq!(
        read_values(&after, "txn-basic", 5),
        ["c1", "c2", "c3", "c4", "open"]
    );
    assert!(high > 0);

    let mut conn = RawConn::connect(b.parse().unwrap()).await;
    let req = ListTransactionsRequest::default()
        .with_state_filters(vec![StrBytes::from_static_str("CompleteCommit")]);
    let ResponseKind::ListTransactions(l) = conn.call(ApiKey::ListTransactions, 1, req).await
    else {
        panic!("not a ListTransactions response")
    };
    assert_eq!(l.error_code, 0);
    assert_eq!(l.transaction_states.len(), 1);
    assert_eq!(
        l.transaction_states[0].transactional_id.as_str(),
        "tx-basic"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn consume_transform_produce_commits_offsets_with_the_output_or_not_at_all() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "ctp-in", 1).await;
    create(&b, "ctp-out", 1).await;
    let plain: BaseProducer = client_config(&b).create().unwrap();
    for i in 0..6 {
        let v = format!("in{i}");
        plain
            .send(BaseRecord::to("ctp-in").partition(0).key(&v).payload(&v))
            .unwrap();
    }
    plain.flush(TIMEOUT).unwrap();

    let input = consumer(&b, "ctp", "read_committed");
    input.subscribe(&["ctp-in"]).unwrap();
    let p = transactional(&b, "tx-ctp", 60_000);
    let mut seen = 0;
    let deadline = std::time::Instant::now() + DEADLINE;
    // Two transactions of three: the first commits, the second aborts.
    for round in 0..2 {
        p.begin_transaction().unwrap();
        let mut n = 0;
        while n < 3 {
            assert!(std::time::Instant::now() < deadline);
            if let Some(m) = polled(input.poll(Duration::from_millis(200))) {
                let v = format!("out-{}", String::from_utf8_lossy(m.payload().unwrap()));
                p.send(BaseRecord::to("ctp-out").partition(0).key(&v).payload(&v))
                    .unwrap();
                n += 1;
                seen += 1;
            }
        }
        p.flush(TIMEOUT).unwrap();
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset("ctp-in", 0, Offset::Offset(seen))
            .unwrap();
        p.send_offsets_to_transaction(&offsets, &input.group_metadata().unwrap(), TIMEOUT)
            .unwrap();
        if round == 0 {
            p.commit_transaction(TIMEOUT).unwrap();
        } else {
            p.abort_transaction(TIMEOUT).unwrap();
        }
    }
    // The group's committed offset is the first transaction's.
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition("ctp-in", 0);
    let check = consumer(&b, "ctp", "read_committed");
    let committed = check.committed_offsets(tpl, TIMEOUT).unwrap();
    assert_eq!(
        committed.find_partition("ctp-in", 0).unwrap().offset(),
        Offset::Offset(3)
    );
    let out = consumer(&b, "ctp-reader", "read_committed");
    assert_eq!(
        read_values(&out, "ctp-out", 3),
        ["out-in0", "out-in1", "out-in2"]
    );
    drop(input);
    let _ = CommitMode::Sync;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_producer_fences_the_old_one_and_aborts_its_transaction() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "txn-zombie", 1).await;
    let zombie = transactional(&b, "tx-zombie", 60_000);
    zombie.begin_transaction().unwrap();
    send(&zombie, "txn-zombie", 0, &["zombie"]);
    // Same transactional id: the zombie's transaction is aborted and its
    // epoch fenced.
    let fresh = transactional(&b, "tx-zombie", 60_000);
    fresh.begin_transaction().unwrap();
    send(&fresh, "txn-zombie", 0, &["fresh"]);
    fresh.commit_transaction(TIMEOUT).unwrap();
    let e = zombie.commit_transaction(TIMEOUT).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("fenced") || text.contains("Fenced") || text.contains("epoch"),
        "{text}"
    );
    let c = consumer(&b, "z", "read_committed");
    assert_eq!(read_values(&c, "txn-zombie", 1), ["fresh"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_past_its_timeout_is_aborted_by_the_broker() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "txn-timeout", 1).await;
    let p: BaseProducer = client_config(&b)
        .set("transactional.id", "tx-timeout")
        .set("transaction.timeout.ms", "3000")
        .set("socket.timeout.ms", "3000")
        .set("message.timeout.ms", "3000")
        .create()
        .unwrap();
    p.init_transactions(TIMEOUT).unwrap();
    p.begin_transaction().unwrap();
    send(&p, "txn-timeout", 0, &["stalled"]);
    let plain: BaseProducer = client_config(&b).create().unwrap();
    plain
        .send(
            BaseRecord::to("txn-timeout")
                .partition(0)
                .key("after")
                .payload("after"),
        )
        .unwrap();
    plain.flush(TIMEOUT).unwrap();
    // The broker aborts it: read_committed readers get past it, without it.
    let d = common::eventually(DEADLINE, "the transaction aborted", || async {
        let d = describe(&b, "tx-timeout").await;
        (d.transaction_states[0].transaction_state.as_str() == "CompleteAbort").then_some(d)
    })
    .await;
    assert_eq!(
        d.transaction_states[0].producer_epoch, 1,
        "the producer is fenced"
    );
    let c = consumer(&b, "t", "read_committed");
    assert_eq!(read_values(&c, "txn-timeout", 1), ["after"]);
    assert!(p.commit_transaction(TIMEOUT).is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkill_mid_transaction_leaves_it_open_until_its_producer_returns() {
    let mut broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "txn-crash", 1).await;
    {
        let p = transactional(&b, "tx-crash", 60_000);
        p.begin_transaction().unwrap();
        send(&p, "txn-crash", 0, &["c1"]);
        p.commit_transaction(TIMEOUT).unwrap();
        p.begin_transaction().unwrap();
        send(&p, "txn-crash", 0, &["lost1", "lost2"]);
        broker.kill();
    }
    broker.restart();
    let d = describe(&b, "tx-crash").await;
    assert_eq!(
        d.transaction_states[0].transaction_state.as_str(),
        "Ongoing"
    );
    // The restarted producer aborts what its predecessor left open.
    let p = transactional(&b, "tx-crash", 60_000);
    p.begin_transaction().unwrap();
    send(&p, "txn-crash", 0, &["c2"]);
    p.commit_transaction(TIMEOUT).unwrap();
    let c = consumer(&b, "crash", "read_committed");
    assert_eq!(read_values(&c, "txn-crash", 2), ["c1", "c2"]);
    let u = consumer(&b, "crash-u", "read_uncommitted");
    assert_eq!(
        read_values(&u, "txn-crash", 4),
        ["c1", "lost1", "lost2", "c2"]
    );
}

/// `transaction.max.timeout.ms`: InitProducerId asking for a longer
/// transaction timeout is refused with INVALID_TRANSACTION_TIMEOUT; one
/// within it gets a producer id.
#[tokio::test(flavor = "multi_thread")]
async fn transaction_timeouts_are_bounded_by_the_broker_setting() {
    use kafka_protocol::messages::InitProducerIdRequest;
    let broker = BrokerProcess::start(&["transaction.max.timeout.ms=60000"]);
    let mut c = RawConn::connect(broker.addr).await;
    for (timeout, code) in [(120_000, 50), (60_001, 50), (60_000, 0), (1_000, 0)] {
        let ResponseKind::InitProducerId(r) = c
            .call(
                ApiKey::InitProducerId,
                4,
                InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(
                        "tx-max",
                    ))))
                    .with_transaction_timeout_ms(timeout),
            )
            .await
        else {
            panic!("InitProducerId")
        };
        assert_eq!(r.error_code, code, "a timeout of {timeout} ms");
        assert_eq!(r.producer_id.0 >= 0, code == 0, "{r:?}");
    }
}

/// The producer of `topic`-0 with an open transaction, as DescribeProducers
/// (what `kafka-transactions find-hanging` reads) reports it.
async fn open_producer(
    c: &mut RawConn,
    topic: &str,
) -> Option<kafka_protocol::messages::describe_producers_response::ProducerState> {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::{DescribeProducersRequest, TopicName};
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partition_indexes(vec![0])]);
    let ResponseKind::DescribeProducers(r) = c.call(ApiKey::DescribeProducers, 0, req).await else {
        panic!("DescribeProducers")
    };
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "{p:?}");
    p.active_producers
        .iter()
        .find(|s| s.current_txn_start_offset >= 0)
        .cloned()
}

/// `topic`-0's latest offset for a read_committed reader (the LSO).
async fn stable_offset(c: &mut RawConn, topic: &str) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, TopicName};
    let req = ListOffsetsRequest::default()
        .with_isolation_level(1)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let ResponseKind::ListOffsets(r) = c.call(ApiKey::ListOffsets, 7, req).await else {
        panic!("ListOffsets")
    };
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "{p:?}");
    p.offset
}

/// Answers `kafka-transactions abort` gets: WriteTxnMarkers aborting
/// `producer`'s transaction on `partitions` of `topic`; the error codes.
async fn abort_markers(
    c: &mut RawConn,
    topic: &str,
    producer: (i64, i16, i32),
    partitions: Vec<i32>,
) -> Vec<i16> {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
    let (id, epoch, coordinator_epoch) = producer;
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
        .with_transaction_result(false)
        .with_coordinator_epoch(coordinator_epoch)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_indexes(partitions)])]);
    let ResponseKind::WriteTxnMarkers(r) = c.call(ApiKey::WriteTxnMarkers, 1, req).await else {
        panic!("WriteTxnMarkers")
    };
    assert_eq!(r.markers[0].producer_id.0, id);
    r.markers[0].topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// A hanging transaction ended by hand, as `kafka-transactions abort
/// --topic T --partition 0 --start-offset N` does it: DescribeProducers
/// finds the producer and WriteTxnMarkers writes the abort marker with its
/// epoch and coordinator epoch (Kafka's `Admin.abortTransaction`). A
/// transaction the broker's own coordinator still has open is not ended
/// that way; one it lost (here: its log emptied while the broker was down)
/// is.
#[tokio::test(flavor = "multi_thread")]
async fn an_operator_aborts_a_hanging_transaction_with_write_txn_markers() {
    let mut broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "txn-hang", 1).await;
    // A second InitProducerId: the open transaction is at epoch 1.
    drop(transactional(&b, "tx-hang", 60_000));
    let p = transactional(&b, "tx-hang", 60_000);
    p.begin_transaction().unwrap();
    send(&p, "txn-hang", 0, &["h1", "h2"]);
    let mut c = RawConn::connect(broker.addr).await;
    let open = open_producer(&mut c, "txn-hang")
        .await
        .expect("an open transaction");
    assert_eq!(open.current_txn_start_offset, 0);
    assert_eq!(open.producer_epoch, 1);
    let pid = open.producer_id.0;
    let coordinator_epoch = open.coordinator_epoch;
    // Live in the coordinator: its producer (or its timeout) ends it
    // (INVALID_TXN_STATE); a coordinator epoch above the broker's own is
    // refused (INVALID_REQUEST), as it would fence the coordinator.
    assert_eq!(
        abort_markers(&mut c, "txn-hang", (pid, 1, coordinator_epoch), vec![0]).await,
        [48]
    );
    assert_eq!(
        abort_markers(&mut c, "txn-hang", (pid, 1, 5), vec![0]).await,
        [42]
    );

    // The coordinator loses its state: the transaction hangs.
    broker.kill();
    drop(p);
    let group_log = std::fs::read_dir(&broker.data_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("__consumer_offsets"))
        })
        .expect("the group log's directory");
    for f in std::fs::read_dir(&group_log).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    broker.restart();
    let mut c = RawConn::connect(broker.addr).await;
    assert_eq!(
        describe(&b, "tx-hang").await.transaction_states[0].error_code,
        105,
        "TRANSACTIONAL_ID_NOT_FOUND: the coordinator forgot it"
    );
    assert_eq!(
        stable_offset(&mut c, "txn-hang").await,
        0,
        "the hanging transaction holds read_committed readers back"
    );
    // An older epoch is refused (INVALID_PRODUCER_EPOCH), a newer one than
    // the log knows too (INVALID_REQUEST), and a partition that does not
    // exist is unknown; nothing ends.
    assert_eq!(
        abort_markers(&mut c, "txn-hang", (pid, 0, coordinator_epoch), vec![0, 7]).await,
        [47, 3]
    );
    assert_eq!(
        abort_markers(&mut c, "txn-hang", (pid, 2, coordinator_epoch), vec![0]).await,
        [42]
    );
    assert_eq!(stable_offset(&mut c, "txn-hang").await, 0);
    assert_eq!(
        abort_markers(&mut c, "txn-hang", (pid, 1, coordinator_epoch), vec![0]).await,
        [0]
    );
    // h1, h2 and the marker: nothing holds readers back any more.
    assert_eq!(stable_offset(&mut c, "txn-hang").await, 3);
    assert!(open_producer(&mut c, "txn-hang").await.is_none());
    // Again: nothing open to end, nothing written.
    assert_eq!(
        abort_markers(&mut c, "txn-hang", (pid, 1, coordinator_epoch), vec![0]).await,
        [0]
    );
    assert_eq!(stable_offset(&mut c, "txn-hang").await, 3);
    let rc = consumer(&b, "hang-rc", "read_committed");
    assert!(read_values(&rc, "txn-hang", 0).is_empty());
    let ru = consumer(&b, "hang-ru", "read_uncommitted");
    assert_eq!(read_values(&ru, "txn-hang", 2), ["h1", "h2"]);
}

/// KIP-447: TxnOffsetCommit carries the consumer's group metadata, and a
/// producer whose consumer was rebalanced out (an older generation) cannot
/// commit offsets for it; librdkafka reports the error as abortable, and
/// the next transaction with the current metadata commits (librdkafka's
/// 0105-transactions_mock tests the client side of this).
#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_rebalanced_out_cannot_commit_offsets_in_a_transaction() {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, ProducerId, TopicName, TxnOffsetCommitRequest};
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "k447-in", 2).await;
    let c1 = consumer(&b, "g447", "read_committed");
    c1.subscribe(&["k447-in"]).unwrap();
    let deadline = std::time::Instant::now() + DEADLINE;
    while c1.assignment().unwrap().count() != 2 {
        assert!(std::time::Instant::now() < deadline, "c1 never assigned");
        let _ = c1.poll(Duration::from_millis(100));
    }
    let stale = c1.group_metadata().unwrap();
    let c2 = consumer(&b, "g447", "read_committed");
    c2.subscribe(&["k447-in"]).unwrap();
    while c1.assignment().unwrap().count() != 1 || c2.assignment().unwrap().count() != 1 {
        assert!(std::time::Instant::now() < deadline, "no rebalance");
        let _ = c1.poll(Duration::from_millis(100));
        let _ = c2.poll(Duration::from_millis(100));
    }
    let p = transactional(&b, "tx-447", 60_000);
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("k447-in", 0, Offset::Offset(1))
        .unwrap();
    p.begin_transaction().unwrap();
    let e = p
        .send_offsets_to_transaction(&offsets, &stale, TIMEOUT)
        .unwrap_err();
    assert_eq!(
        e.rdkafka_error_code(),
        Some(rdkafka::types::RDKafkaErrorCode::IllegalGeneration),
        "{e}"
    );
    p.abort_transaction(TIMEOUT).unwrap();
    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&offsets, &c1.group_metadata().unwrap(), TIMEOUT)
        .unwrap();
    p.commit_transaction(TIMEOUT).unwrap();

    // The exact answers, raw: an unknown member, a wrong generation, and a
    // generation for a group that does not exist.
    let mut c = RawConn::connect(broker.addr).await;
    let describe = kafka_protocol::messages::DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_static_str("g447"))]);
    let ResponseKind::DescribeGroups(d) = c.call(ApiKey::DescribeGroups, 5, describe).await else {
        panic!("DescribeGroups")
    };
    let member = d.groups[0].members[0].member_id.to_string();
    let mut codes = Vec::new();
    for (group, member, generation) in [
        ("g447", "ghost", 1),
        ("g447", "", 99),
        ("g447", member.as_str(), 99),
        ("no-such-group", "", 3),
    ] {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx-447")))
            .with_group_id(GroupId(StrBytes::from_static_str(group)))
            .with_producer_id(ProducerId(0))
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(member.to_string()))
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("k447-in")))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(2)])]);
        let ResponseKind::TxnOffsetCommit(r) = c.call(ApiKey::TxnOffsetCommit, 3, req).await else {
            panic!("TxnOffsetCommit")
        };
        codes.push(r.topics[0].partitions[0].error_code);
    }
    // UNKNOWN_MEMBER_ID for a stranger and for no member with a generation
    // (checked as a member first, as Kafka does), ILLEGAL_GENERATION for a
    // member with the wrong generation and for a generation of a group
    // that does not exist.
    assert_eq!(codes, [25, 25, 22, 22]);
}

/// OffsetFetch `require_stable` (KIP-447): offsets staged by a transaction
/// that has not ended are UNSTABLE_OFFSET_COMMIT for `read_committed`
/// consumers, which librdkafka retries until the transaction ends; a
/// `read_uncommitted` consumer reads the committed offset at once. Then
/// ListTransactions v2's id pattern.
#[tokio::test(flavor = "multi_thread")]
async fn offsets_of_an_open_transaction_are_unstable_for_read_committed_consumers() {
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest, TopicName};
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "stable-in", 1).await;
    let p = transactional(&b, "tx-stable", 60_000);
    // A consumer that never joined: generation -1, no member (a "simple"
    // group, as Kafka allows for transactional commits).
    let rc = consumer(&b, "g-stable", "read_committed");
    let md = rc.group_metadata().unwrap();
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("stable-in", 0, Offset::Offset(4))
        .unwrap();
    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&offsets, &md, TIMEOUT)
        .unwrap();

    let mut c = RawConn::connect(broker.addr).await;
    let fetch = |stable: bool| {
        OffsetFetchRequest::default()
            .with_require_stable(stable)
            .with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g-stable")))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(TopicName(StrBytes::from_static_str("stable-in")))
                    .with_partition_indexes(vec![0])]))])
    };
    let mut answers = Vec::new();
    for stable in [true, false] {
        let ResponseKind::OffsetFetch(r) = c.call(ApiKey::OffsetFetch, 8, fetch(stable)).await
        else {
            panic!("OffsetFetch")
        };
        let part = &r.groups[0].topics[0].partitions[0];
        answers.push((part.error_code, part.committed_offset));
    }
    assert_eq!(
        answers,
        [(88, -1), (0, -1)],
        "UNSTABLE_OFFSET_COMMIT, then none"
    );

    let mut tpl = TopicPartitionList::new();
    tpl.add_partition("stable-in", 0);
    // librdkafka retries UNSTABLE_OFFSET_COMMIT until its timeout: no
    // offset either way.
    if let Ok(got) = rc.committed_offsets(tpl.clone(), Duration::from_secs(2)) {
        let e = got.find_partition("stable-in", 0).unwrap();
        assert!(
            e.error().is_err(),
            "a read_committed consumer got an offset its transaction may change: {:?}",
            e.offset()
        );
    }
    let ru = consumer(&b, "g-stable", "read_uncommitted");
    let before = ru.committed_offsets(tpl.clone(), TIMEOUT).unwrap();
    assert_eq!(
        before.find_partition("stable-in", 0).unwrap().offset(),
        Offset::Invalid
    );
    p.commit_transaction(TIMEOUT).unwrap();
    let after = rc.committed_offsets(tpl, TIMEOUT).unwrap();
    assert_eq!(
        after.find_partition("stable-in", 0).unwrap().offset(),
        Offset::Offset(4)
    );

    // ListTransactions v2: the id pattern matches whole ids.
    let mut listed = Vec::new();
    for pattern in ["tx-st.*", "tx-st", "("] {
        let req = ListTransactionsRequest::default()
            .with_transactional_id_pattern(Some(StrBytes::from_static_str(pattern)));
        let ResponseKind::ListTransactions(l) = c.call(ApiKey::ListTransactions, 2, req).await
        else {
            panic!("ListTransactions")
        };
        let ids: Vec<String> = l
            .transaction_states
            .iter()
            .map(|s| s.transactional_id.to_string())
            .collect();
        listed.push((l.error_code, ids));
    }
    assert_eq!(
        listed,
        [
            (0, vec!["tx-stable".to_string()]),
            (0, vec![]),
            (128, vec![])
        ],
        "a match, no partial match, INVALID_REGULAR_EXPRESSION"
    );
}

/// AddPartitionsToTxn v4+ (KIP-890), the brokers' batched form: several
/// transactions in one request, each verified (`verify_only`, what a
/// partition leader asks before a transactional append) or added.
#[tokio::test(flavor = "multi_thread")]
async fn the_brokers_form_of_add_partitions_to_txn_verifies_and_adds() {
    use kafka_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName};
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create(&b, "txn-verify", 2).await;
    let p = transactional(&b, "tx-verify", 60_000);
    p.begin_transaction().unwrap();
    send(&p, "txn-verify", 0, &["v"]);
    let mut c = RawConn::connect(broker.addr).await;
    let open = open_producer(&mut c, "txn-verify")
        .await
        .expect("an open transaction");
    let (pid, epoch) = (open.producer_id.0, open.producer_epoch as i16);
    let txn = |id: &str, pid: i64, epoch: i16, verify: bool, partitions: Vec<i32>| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(id.into())))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(verify)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("txn-verify")))
                .with_partitions(partitions)])
    };
    let mut ask = async |transactions: Vec<AddPartitionsToTxnTransaction>| {
        let req = AddPartitionsToTxnRequest::default().with_transactions(transactions);
        let ResponseKind::AddPartitionsToTxn(r) = c.call(ApiKey::AddPartitionsToTxn, 4, req).await
        else {
            panic!("AddPartitionsToTxn")
        };
        assert_eq!(r.error_code, 0);
        r.results_by_transaction
            .iter()
            .map(|t| {
                t.topic_results[0]
                    .results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
                    .collect::<Vec<i16>>()
            })
            .collect::<Vec<_>>()
    };
    // Partition 0 is in the transaction, 1 is not (INVALID_TXN_STATE); an
    // unknown id is INVALID_PRODUCER_ID_MAPPING, another epoch
    // PRODUCER_FENCED.
    let answers = ask(vec![
        txn("tx-verify", pid, epoch, true, vec![0, 1]),
        txn("tx-nobody", pid, epoch, true, vec![0]),
        txn("tx-verify", pid, epoch + 1, true, vec![0]),
    ])
    .await;
    assert_eq!(answers, [vec![0, 48], vec![49], vec![90]]);
    // Added by the broker's form, then verified.
    assert_eq!(
        ask(vec![txn("tx-verify", pid, epoch, false, vec![1])]).await,
        [vec![0]]
    );
    assert_eq!(
        ask(vec![txn("tx-verify", pid, epoch, true, vec![0, 1])]).await,
        [vec![0, 0]]
    );
    p.commit_transaction(TIMEOUT).unwrap();
    // Ended: nothing is in a transaction any more.
    assert_eq!(
        ask(vec![txn("tx-verify", pid, epoch, true, vec![0])]).await,
        [vec![48]]
    );
}
