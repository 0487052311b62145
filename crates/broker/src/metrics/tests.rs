//! The instrumentation handles and the scrape-time state over a real
//! broker on a temp dir, encoded and read back line by line.

use std::time::Duration;

use model::{Offset, PartitionId, TopicName};
use storage::{BatchBuilder, Compression};

use super::state::{lag, StateSample};
use super::*;
use crate::config::{BrokerConfig, TopicConfig, TopicKind};
use crate::group::store::CommittedOffset;
use crate::limits::Refused;
use crate::subscription::{
    ConsumerId, ConsumerSpec, LogBounds, StartPosition, SubscribeRequest, SubscriptionKey,
    SubscriptionType,
};
use crate::{now_ms, NewTopic};

fn open(dir: &std::path::Path) -> crate::testing::TestNode {
    crate::testing::TestNode::start(BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap()))
        .unwrap()
}

fn create(b: &Broker, name: &str, partitions: i32) {
    b.create_topic(
        NewTopic {
            assignments: Vec::new(),
            name: TopicName::new(name).unwrap(),
            partitions: Some(partitions),
            replication_factor: None,
            kind: TopicKind::Partitioned,
            config: TopicConfig::default(),
        },
        false,
    )
    .unwrap();
}

/// Appends one batch of `n` records to `topic`'s partition `p`; returns
/// the batch's size.
fn append(b: &Broker, topic: &str, p: i32, n: usize) -> u64 {
    let mut batch = BatchBuilder::new(Compression::None);
    for i in 0..n {
        batch
            .append(now_ms(), None, Some(format!("v{i}").as_bytes()), &[])
            .unwrap();
    }
    let bytes = batch.build().unwrap();
    b.partition(topic, PartitionId(p))
        .unwrap()
        .append(&bytes, now_ms())
        .unwrap();
    bytes.len() as u64
}

/// The value of the one sample line `name{labels}` (labels in order).
fn value(text: &str, series: &str) -> f64 {
    let found: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .collect();
    assert_eq!(found.len(), 1, "{series} in:\n{text}");
    found[0][series.len() + 1..].parse().unwrap()
}

#[test]
fn lag_is_never_negative() {
    assert_eq!(lag(3, 10), 7);
    assert_eq!(lag(10, 10), 0);
    assert_eq!(lag(12, 10), 0, "a commit past the end");
    assert_eq!(lag(-1, 5), 6);
}

#[test]
fn requests_are_counted_by_api_and_outcome() {
    let m = Metrics::new();
    let table = m.request_table("kafka", 4);
    table.record(0, "Produce", Outcome::Ok, Duration::from_millis(2));
    table.record(0, "Produce", Outcome::Ok, Duration::from_millis(20));
    table.record(
        0,
        "Produce",
        Outcome::Error("UNKNOWN_TOPIC_OR_PARTITION"),
        Duration::from_micros(30),
    );
    table.record(1, "Fetch", Outcome::Closed, Duration::from_secs(1));
    // Beyond the table: resolved each time, counted all the same.
    table.record(9, "Other", Outcome::Ok, Duration::from_secs(1));
    let mut text = String::new();
    m.encode_instrumentation(&mut text).unwrap();
    let count = |api: &str, outcome: &str| {
        value(
            &text,
            &format!(
                "magnetar_requests_total{{protocol=\"kafka\",api=\"{api}\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(count("Produce", "ok"), 2.0);
    assert_eq!(count("Produce", "UNKNOWN_TOPIC_OR_PARTITION"), 1.0);
    assert_eq!(count("Fetch", "closed"), 1.0);
    assert_eq!(count("Other", "ok"), 1.0);
    let produce = "{protocol=\"kafka\",api=\"Produce\"";
    assert_eq!(
        value(
            &text,
            &format!("magnetar_request_duration_seconds_count{produce}}}")
        ),
        3.0
    );
    assert_eq!(
        value(
            &text,
            "magnetar_request_duration_seconds_bucket{le=\"0.005\",protocol=\"kafka\",api=\"Produce\"}"
        ),
        2.0,
        "cumulative: 30 µs and 2 ms"
    );
    let sum = value(
        &text,
        &format!("magnetar_request_duration_seconds_sum{produce}}}"),
    );
    assert!((sum - 0.02203).abs() < 1e-9, "{sum}");
}

#[test]
fn connections_and_waits_are_counted_while_held() {
    let m = Metrics::new();
    let l = m.listener("kafka");
    let a = l.accepted();
    let b = l.accepted();
    l.refused(&Refused::PerIp(2));
    drop(a);
    let wait = m.fetch_wait_started();
    let mut text = String::new();
    m.encode_instrumentation(&mut text).unwrap();
    let kafka = "{listener=\"kafka\"}";
    assert_eq!(
        value(&text, &format!("magnetar_connections_open{kafka}")),
        1.0
    );
    assert_eq!(
        value(
            &text,
            &format!("magnetar_connections_accepted_total{kafka}")
        ),
        2.0
    );
    let refused = |reason: &str| {
        value(
            &text,
            &format!(
                "magnetar_connections_refused_total{{listener=\"kafka\",reason=\"{reason}\"}}"
            ),
        )
    };
    assert_eq!(refused("max_connections_per_ip"), 1.0);
    assert_eq!(refused("max_connections"), 0.0);
    assert_eq!(value(&text, "magnetar_fetch_waiting_requests"), 1.0);
    assert_eq!(
        value(&text, "magnetar_fetch_wait_duration_seconds_count"),
        0.0
    );
    drop((b, wait));
    let mut text = String::new();
    m.encode_instrumentation(&mut text).unwrap();
    assert_eq!(
        value(&text, &format!("magnetar_connections_open{kafka}")),
        0.0
    );
    assert_eq!(value(&text, "magnetar_fetch_waiting_requests"), 0.0);
    assert_eq!(
        value(&text, "magnetar_fetch_wait_duration_seconds_count"),
        1.0
    );
}

#[test]
fn state_is_sampled_from_partitions_groups_and_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    create(&b, "orders", 2);
    let bytes = append(&b, "orders", 1, 5) + append(&b, "orders", 1, 3);
    let p1 = b.partition("orders", PartitionId(1)).unwrap();
    p1.traffic().record_out(4, 100);
    // A group committed 6 of partition 1's 8 records, and an offset of a
    // partition that does not exist (not lag).
    let committed = |o| CommittedOffset {
        offset: o,
        leader_epoch: -1,
        metadata: None,
        commit_timestamp: now_ms().0,
    };
    b.groups()
        .commit_offsets(
            "billing",
            "",
            None,
            -1,
            vec![
                ("orders".into(), 1, committed(6)),
                ("orders".into(), 7, committed(1)),
            ],
        )
        .unwrap();
    // A subscription at the start of partition 1, with one consumer.
    let key = SubscriptionKey::new("orders", 1, "audit");
    b.subscriptions()
        .subscribe(
            &key,
            SubscribeRequest {
                consumer: ConsumerSpec {
                    id: ConsumerId {
                        connection: 1,
                        consumer: 1,
                    },
                    name: "c".into(),
                    priority_level: 0,
                },
                sub_type: SubscriptionType::Shared,
                durable: true,
                partitioned: true,
                start: StartPosition::Earliest,
            },
            LogBounds {
                start: Offset(0),
                end: p1.log().log_end_offset(),
            },
            now_ms(),
        )
        .unwrap();

    let sample = StateSample::collect(&b);
    let orders1 = sample
        .partitions
        .iter()
        .find(|p| p.topic == "orders" && p.partition == 1)
        .unwrap();
    assert_eq!(orders1.traffic.records_in, 8);
    assert_eq!(orders1.traffic.bytes_in, bytes);
    assert_eq!(orders1.traffic.records_out, 4);
    assert_eq!(orders1.size_bytes, bytes);
    assert_eq!(orders1.segments, 1);
    assert_eq!((orders1.log_start_offset, orders1.log_end_offset), (0, 8));
    assert!(
        sample
            .partitions
            .iter()
            .any(|p| p.topic == "__consumer_offsets"),
        "internal topics too"
    );
    assert_eq!(sample.group_offsets.len(), 1, "{:?}", sample.group_offsets);
    assert_eq!(sample.group_offsets[0].lag, 2);
    assert_eq!(sample.subscriptions.len(), 1);
    assert_eq!(
        (
            sample.subscriptions[0].backlog,
            sample.subscriptions[0].consumers
        ),
        (8, 1)
    );

    let mut text = String::new();
    sample.encode_into(&mut text).unwrap();
    let p = "{topic=\"orders\",partition=\"1\"}";
    assert_eq!(
        value(&text, &format!("magnetar_partition_in_records_total{p}")),
        8.0
    );
    assert_eq!(
        value(&text, &format!("magnetar_partition_in_bytes_total{p}")),
        bytes as f64
    );
    assert_eq!(
        value(&text, &format!("magnetar_partition_out_records_total{p}")),
        4.0
    );
    assert_eq!(
        value(&text, &format!("magnetar_partition_out_bytes_total{p}")),
        100.0
    );
    assert_eq!(
        value(&text, &format!("magnetar_log_size_bytes{p}")),
        bytes as f64
    );
    assert_eq!(value(&text, &format!("magnetar_log_segments{p}")), 1.0);
    assert_eq!(value(&text, &format!("magnetar_log_end_offset{p}")), 8.0);
    assert_eq!(value(&text, &format!("magnetar_log_start_offset{p}")), 0.0);
    let g = "{group=\"billing\",topic=\"orders\",partition=\"1\"}";
    assert_eq!(
        value(&text, &format!("magnetar_consumer_group_lag{g}")),
        2.0
    );
    assert_eq!(
        value(
            &text,
            &format!("magnetar_consumer_group_committed_offset{g}")
        ),
        6.0
    );
    let s = "{topic=\"orders\",partition=\"1\",subscription=\"audit\",type=\"Shared\",durable=\"true\"}";
    assert_eq!(
        value(&text, &format!("magnetar_subscription_backlog{s}")),
        8.0
    );
    assert_eq!(
        value(&text, &format!("magnetar_subscription_consumers{s}")),
        1.0
    );
    assert!(text.contains("# TYPE magnetar_partition_in_records counter"));
    assert!(text.contains("# UNIT magnetar_partition_in_records records"));

    // The whole exposition ends once, with # EOF.
    let all = encode(&b).unwrap();
    assert!(all.ends_with("# EOF\n"));
    assert_eq!(all.matches("# EOF").count(), 1);
}
