//! Coordinator tests against a real broker on a temp dir: offsets survive a
//! reopen, expire after the retention, and the group log compacts.

use crate::config::BrokerConfig;
use crate::group::store::CommittedOffset;
use crate::{now_ms, Broker};

fn open(dir: &std::path::Path) -> crate::testing::TestNode {
    let config = BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap());
    crate::testing::TestNode::start(config).unwrap()
}

/// Creates topic `t` with 3 partitions (offsets of a topic that does not
/// exist are removed at start-up).
fn create_t(b: &Broker) {
    b.create_topic(
        crate::NewTopic {
            assignments: Vec::new(),
            name: model::TopicName::new("t").unwrap(),
            partitions: Some(3),
            replication_factor: None,
            kind: crate::config::TopicKind::Partitioned,
            config: Default::default(),
        },
        false,
    )
    .unwrap();
}

fn offset(o: i64, ts: i64) -> CommittedOffset {
    CommittedOffset {
        offset: o,
        leader_epoch: -1,
        metadata: None,
        commit_timestamp: ts,
    }
}

#[test]
fn offsets_survive_reopen_expire_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    let now = now_ms().0;
    {
        let b = open(dir.path());
        create_t(&b);
        let g = b.groups();
        // Many commits of the same keys: the log grows, the state does not.
        for i in 0..2000 {
            g.commit_offsets(
                "old",
                "",
                None,
                -1,
                vec![("t".into(), 0, offset(i, now - 10 * 86_400_000))],
            )
            .unwrap();
            g.commit_offsets("fresh", "", None, -1, vec![("t".into(), 0, offset(i, now))])
                .unwrap();
        }
        b.shutdown().unwrap();
    }
    let b = open(dir.path());
    let g = b.groups();
    assert_eq!(
        g.fetch_offsets("fresh", None)[0].2.as_ref().unwrap().offset,
        1999,
        "replayed"
    );
    assert_eq!(
        g.fetch_offsets("old", None)[0].2.as_ref().unwrap().offset,
        1999
    );

    // The old group's offsets are past the 7-day retention; the fresh ones are not.
    assert_eq!(g.expire_and_compact(now).unwrap(), 1);
    assert!(g.fetch_offsets("old", None).is_empty());
    assert_eq!(g.fetch_offsets("fresh", None).len(), 1);

    // Expiry is durable too.
    b.shutdown().unwrap();
    drop(b);
    let b = open(dir.path());
    assert!(b.groups().fetch_offsets("old", None).is_empty());
    assert_eq!(
        b.groups().fetch_offsets("fresh", None)[0]
            .2
            .as_ref()
            .unwrap()
            .offset,
        1999
    );
    assert!(b.groups().list().iter().any(|l| l.group_id == "fresh"));
}

#[test]
fn compaction_keeps_the_live_state_and_moves_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path());
    create_t(&b);
    let g = b.groups();
    let now = now_ms().0;
    let big = "m".repeat(4000);
    // ~20 MB of history for three live offsets, past the 16 MiB threshold.
    for i in 0..5000 {
        let mut o = offset(i, now);
        o.metadata = Some(big.clone());
        g.commit_offsets("g", "", None, -1, vec![("t".into(), (i % 3) as i32, o)])
            .unwrap();
    }
    let log = b.topic("__consumer_offsets").unwrap().partitions[0]
        .log()
        .clone();
    assert_eq!(log.log_start_offset().0, 0);
    g.expire_and_compact(now).unwrap();
    assert!(
        log.log_start_offset().0 > 0,
        "history before the snapshot is released"
    );
    b.run_maintenance(now_ms(), true);
    assert!(
        log.size_bytes() < 17 << 20,
        "old segments deleted: {}",
        log.size_bytes()
    );
    let live: Vec<i64> = g
        .fetch_offsets("g", None)
        .iter()
        .map(|r| r.2.as_ref().unwrap().offset)
        .collect();
    assert_eq!(live, vec![4998, 4999, 4997]);
    b.shutdown().unwrap();
    drop(b);
    let b = open(dir.path());
    let again: Vec<i64> = b
        .groups()
        .fetch_offsets("g", None)
        .iter()
        .map(|r| r.2.as_ref().unwrap().offset)
        .collect();
    assert_eq!(again, live, "the snapshot replays to the same state");
}
