//! A cluster member applying committed metadata: the start-up full state
//! (KIP-516 reconciliation) and the deltas after it, on a real data
//! directory, with no controller behind the link.

use std::sync::Arc;
use std::time::Duration;

use model::{PartitionId, TopicId, TopicName};

use super::ClusterLink;
use crate::config::{BrokerConfig, TopicConfig, TopicKind};
use crate::metadata_machine::MetadataBatch;
use crate::metadata_records::{apply_all, MetadataRecord, PartitionState};
use crate::metadata_store::{Metadata, TopicRecord};
use crate::{Broker, Endpoint, Error};

fn topic(name: &str, id: TopicId, on: &[i32]) -> TopicRecord {
    TopicRecord {
        name: TopicName::new(name).unwrap(),
        id,
        kind: TopicKind::Partitioned,
        partitions: on.len() as i32,
        config: TopicConfig::default(),
        placements: on.iter().map(|n| PartitionState::single(*n)).collect(),
    }
}

fn state(topics: &[TopicRecord]) -> Metadata {
    let mut records = vec![MetadataRecord::ClusterInitialized {
        cluster_id: "c1".into(),
    }];
    records.extend(
        topics
            .iter()
            .map(|t| MetadataRecord::TopicCreated { topic: t.clone() }),
    );
    apply_all(&Metadata::new(String::new()), &records).unwrap()
}

fn open(rt: &tokio::runtime::Runtime, dir: &std::path::Path, m: Metadata) -> Arc<Broker> {
    let mut config = BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap());
    config
        .set("node.id", "1", crate::config::ConfigSource::Static)
        .unwrap();
    let voters: controller::Voters = "1@127.0.0.1:1".parse().unwrap();
    let client = controller::ControllerClient::new(
        voters,
        controller::ClientOptions::from(&controller::ControllerConfig::new(
            1,
            "1@127.0.0.1:1".parse().unwrap(),
            dir.join("unused"),
        )),
    );
    let link = Arc::new(ClusterLink::new(
        client,
        None,
        vec![1],
        rt.handle().clone(),
        Duration::from_secs(1),
    ));
    let endpoint = Endpoint {
        host: "127.0.0.1".into(),
        port: 9092,
    };
    let dir = super::ClusterDir::open(&config).unwrap();
    Broker::open_cluster(config, dir, endpoint, link, m, 7).unwrap()
}

fn staged(b: &Broker) -> Vec<String> {
    let mut v: Vec<String> = b
        .staged_deletions()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn the_first_state_reconciles_the_disk_and_deltas_follow() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (old_a, x) = (TopicId::random(), TopicId::random());
    // A former life: A (another id) and X on this node, with data.
    {
        let b = open(
            &rt,
            dir.path(),
            state(&[topic("A", old_a, &[1]), topic("X", x, &[1])]),
        );
        assert_eq!(b.applied_metadata_index(), 7);
        let p = b.partition("A", PartitionId(0)).unwrap();
        let mut batch = storage::BatchBuilder::new(storage::Compression::None);
        batch
            .append(crate::now_ms(), Some(b"k"), Some(b"old"), &[])
            .unwrap();
        p.append(&batch.build().unwrap(), crate::now_ms()).unwrap();
        b.shutdown().unwrap();
    }

    // The full state now: A recreated (new id) with p0 here and p1 on
    // node 2, B only on node 2; X is gone.
    let (a, bid) = (TopicId::random(), TopicId::random());
    let m = state(&[topic("A", a, &[1, 2]), topic("B", bid, &[2])]);
    let b = open(&rt, dir.path(), m.clone());
    let mut want = vec![format!("{old_a}_0"), format!("{x}_0")];
    want.sort();
    assert_eq!(staged(&b), want);
    let t = b.topic("A").unwrap();
    assert_eq!(t.id, a);
    assert_eq!(
        t.partition(PartitionId(0))
            .unwrap()
            .log()
            .log_end_offset()
            .0,
        0
    );
    assert!(matches!(
        t.partition(PartitionId(1)),
        Err(Error::PartitionNotHosted { leader: 2, .. })
    ));
    assert!(b.topic("B").unwrap().partitions.is_empty());
    assert!(b.topic("X").is_none());
    assert!(b.resolve_topic_id(old_a).is_err());

    // Deltas: C created here, A grown (p2 here) and reconfigured, then a
    // batch that conflicts (changes nothing), then A deleted.
    let c = TopicId::random();
    let mut retention = TopicConfig::default();
    retention.set("retention.ms", "1000").unwrap();
    b.apply_committed(&[
        (
            8,
            MetadataBatch(vec![MetadataRecord::TopicCreated {
                topic: topic("C", c, &[1]),
            }]),
        ),
        (
            9,
            MetadataBatch(vec![
                MetadataRecord::PartitionsAdded {
                    id: a,
                    name: TopicName::new("A").unwrap(),
                    placements: vec![PartitionState::single(1)],
                },
                MetadataRecord::TopicConfigSet {
                    id: a,
                    name: TopicName::new("A").unwrap(),
                    config: retention.clone(),
                },
            ]),
        ),
        (
            10,
            MetadataBatch(vec![MetadataRecord::TopicCreated {
                topic: topic("C", TopicId::random(), &[1]),
            }]),
        ),
    ]);
    assert_eq!(b.applied_metadata_index(), 10);
    assert_eq!(b.topic("C").unwrap().id, c);
    assert_eq!(b.topic("C").unwrap().partitions.len(), 1);
    let t = b.topic("A").unwrap();
    assert_eq!(t.partition_count(), 3);
    let hosted: Vec<i32> = t.partitions.iter().map(|p| p.tp.partition.0).collect();
    assert_eq!(hosted, vec![0, 2]);
    assert_eq!(t.config, retention);
    assert_eq!(
        t.partition(PartitionId(0))
            .unwrap()
            .log()
            .config()
            .retention_ms,
        Some(1000)
    );

    b.apply_committed(&[(
        11,
        MetadataBatch(vec![MetadataRecord::TopicDeleted {
            id: a,
            name: TopicName::new("A").unwrap(),
        }]),
    )]);
    assert!(b.topic("A").is_none());
    assert!(b.resolve_topic_id(a).is_err());
    let s = staged(&b);
    assert!(
        s.contains(&format!("{a}_0")) && s.contains(&format!("{a}_2")),
        "{s:?}"
    );
    // An older snapshot changes nothing.
    b.apply_snapshot(5, m);
    assert!(b.topic("A").is_none());
    assert_eq!(b.applied_metadata_index(), 11);
    b.shutdown().unwrap();
}

#[test]
fn a_data_directory_of_another_cluster_or_a_single_node_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    super::dir::check_membership(dir.path(), "c1", 1).unwrap();
    super::dir::check_membership(dir.path(), "c1", 1).unwrap();
    assert!(super::dir::check_membership(dir.path(), "c2", 1).is_err());
    assert!(super::dir::check_membership(dir.path(), "c1", 2).is_err());
    // A single node's metadata file (before the quorum of one): even of
    // the same cluster, its partitions would all look stale.
    let single = tempfile::tempdir().unwrap();
    std::fs::write(single.path().join(crate::metadata_store::FILE_NAME), b"{}").unwrap();
    let e = super::dir::check_membership(single.path(), "c1", 1).unwrap_err();
    assert!(e.to_string().contains("single node's data"), "{e}");
    // And a single node refuses a cluster node's directory.
    let refused = crate::testing::TestNode::start(BrokerConfig::new(
        dir.path(),
        "127.0.0.1:9092".parse().unwrap(),
    ));
    let Err(e) = refused else {
        panic!("a standalone node started on a cluster node's directory")
    };
    assert!(e.to_string().contains("magnetar broker"), "{e}");
}

#[test]
fn a_data_directory_keeps_its_id_and_is_locked_before_registration() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::new(dir.path(), "127.0.0.1:9092".parse().unwrap());
    config
        .set("node.id", "3", crate::config::ConfigSource::Static)
        .unwrap();
    let first = super::ClusterDir::open(&config).unwrap();
    let id = first.directory_id().to_string();
    assert!(!id.is_empty());
    let e = super::ClusterDir::open(&config).unwrap_err();
    assert!(
        e.to_string().contains("lock") || e.to_string().contains("use"),
        "{e}"
    );
    drop(first);
    // The id survives, and joining the cluster keeps it.
    super::dir::check_membership(dir.path(), "c1", 3).unwrap();
    let again = super::ClusterDir::open(&config).unwrap();
    assert_eq!(again.directory_id(), id);
    drop(again);
    let text = std::fs::read_to_string(dir.path().join(super::MEMBERSHIP_FILE)).unwrap();
    assert!(
        text.contains("cluster.id=c1") && text.contains("node.id=3"),
        "{text}"
    );
    // Another node id on this directory is refused before it registers.
    config
        .set("node.id", "4", crate::config::ConfigSource::Static)
        .unwrap();
    let e = super::ClusterDir::open(&config).unwrap_err();
    assert!(e.to_string().contains("belongs to node 3"), "{e}");
    // A directory written before directory ids gets one.
    let old = tempfile::tempdir().unwrap();
    std::fs::write(
        old.path().join(super::MEMBERSHIP_FILE),
        "cluster.id=c1\nnode.id=4\n",
    )
    .unwrap();
    let mut c = BrokerConfig::new(old.path(), "127.0.0.1:9092".parse().unwrap());
    c.set("node.id", "4", crate::config::ConfigSource::Static)
        .unwrap();
    let d = super::ClusterDir::open(&c).unwrap();
    assert!(!d.directory_id().is_empty());
    drop(d);
    super::dir::check_membership(old.path(), "c1", 4).unwrap();
    assert!(super::dir::check_membership(old.path(), "c2", 4).is_err());
}

/// KIP-516 Scenario 2 for what the group log keeps: a broker that was down
/// while a topic was deleted and created again (so its first state has the
/// name with another id, and no delete record) drops the old topic's
/// committed offsets and subscription cursors, while another topic's stay;
/// the new topic's, kept after that, survive a restart.
#[test]
fn state_kept_about_a_topic_recreated_while_away_is_dropped() {
    use crate::group::store::CommittedOffset;
    use crate::subscription::{LogBounds, StartPosition, SubscriptionKey};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (old, other) = (TopicId::random(), TopicId::random());
    let commit = |b: &Broker, topic: &str, offset: i64| {
        let o = CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: 1,
        };
        b.groups()
            .commit_offsets("g", "", None, -1, vec![(topic.into(), 0, o)])
            .unwrap();
    };
    let committed = |b: &Broker, topic: &str| {
        b.groups()
            .fetch_offsets("g", Some(&[(topic.to_string(), 0)]))
            .into_iter()
            .next()
            .and_then(|(_, _, o)| o)
            .map(|o| o.offset)
    };
    let cursor = |b: &Broker, topic: &str| {
        b.subscriptions()
            .cursor(&SubscriptionKey::new(topic, 0, "s"))
            .is_some()
    };
    // Topic `a` is led by another broker: only the group state is here.
    let b = open(
        &rt,
        dir.path(),
        state(&[topic("a", old, &[2]), topic("b", other, &[2])]),
    );
    for t in ["a", "b"] {
        commit(&b, t, 500);
        b.subscriptions()
            .create(
                &SubscriptionKey::new(t, 0, "s"),
                StartPosition::Offset(model::Offset(3)),
                LogBounds {
                    start: model::Offset(0),
                    end: model::Offset(10),
                },
                model::Timestamp(1),
            )
            .unwrap();
    }
    b.subscriptions().flush_cursors().unwrap();
    b.shutdown().unwrap();
    drop(b);

    let new = TopicId::random();
    let b = open(
        &rt,
        dir.path(),
        state(&[topic("a", new, &[2]), topic("b", other, &[2])]),
    );
    assert_eq!(committed(&b, "a"), None, "the old topic's offset is gone");
    assert!(!cursor(&b, "a"), "the old topic's cursor is gone");
    assert_eq!(committed(&b, "b"), Some(500));
    assert!(cursor(&b, "b"));
    commit(&b, "a", 7);
    b.shutdown().unwrap();
    drop(b);

    let b = open(
        &rt,
        dir.path(),
        state(&[topic("a", new, &[2]), topic("b", other, &[2])]),
    );
    assert_eq!(committed(&b, "a"), Some(7), "the new topic's offset stays");
    assert_eq!(committed(&b, "b"), Some(500));
    b.shutdown().unwrap();
}
