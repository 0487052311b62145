//! The record model: every record applies or is refused whole; random
//! sequences of changes give the state a plain model predicts, survive the
//! codec, and replaying them gives the same state (what replicas rely on).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use magnetar_config::TopicKind;

fn topic(name: &str, partitions: i32) -> TopicRecord {
    TopicRecord {
        name: TopicName::new(name).unwrap(),
        id: TopicId::random(),
        kind: TopicKind::Partitioned,
        partitions,
        config: TopicConfig::default(),
        placements: (0..partitions).map(|_| PartitionState::single(1)).collect(),
    }
}

#[test]
fn records_apply_and_conflicts_change_nothing() {
    let mut m = Metadata::new("c".into());
    let t = topic("orders", 2);
    apply(&mut m, &MetadataRecord::TopicCreated { topic: t.clone() }).unwrap();
    let before = m.clone();
    // The same decision applied twice (a retried submission) is harmless.
    apply(&mut m, &MetadataRecord::TopicCreated { topic: t.clone() }).unwrap();
    assert_eq!(m, before);
    // The same name again, or the same id under another name.
    let mut again = topic("orders", 1);
    assert!(apply(
        &mut m,
        &MetadataRecord::TopicCreated {
            topic: again.clone()
        }
    )
    .is_err());
    again.name = TopicName::new("other").unwrap();
    again.id = t.id;
    assert!(apply(&mut m, &MetadataRecord::TopicCreated { topic: again }).is_err());
    // Placements must match the partition count.
    let mut bad = topic("bad", 2);
    bad.placements.pop();
    assert!(apply(&mut m, &MetadataRecord::TopicCreated { topic: bad }).is_err());
    // A stale id (a deleted and recreated topic) is refused.
    let stale = MetadataRecord::TopicDeleted {
        id: TopicId::random(),
        name: t.name.clone(),
    };
    assert!(apply(&mut m, &stale).is_err());
    assert!(apply(&mut m, &MetadataRecord::ProducerIdsReserved { limit: -5 }).is_err());
    // Two reservations from the same limit: the second gets no block.
    assert!(apply(&mut m, &MetadataRecord::ProducerIdsReserved { limit: 0 }).is_err());
    assert_eq!(m, before);

    apply(
        &mut m,
        &MetadataRecord::PartitionsAdded {
            id: t.id,
            name: t.name.clone(),
            placements: vec![PartitionState::single(2)],
        },
    )
    .unwrap();
    let rec = &m.topics[&t.name];
    assert_eq!((rec.partitions, rec.placements.len()), (3, 3));
    assert_eq!(rec.placements[2].leader, 2);
    apply(
        &mut m,
        &MetadataRecord::TopicDeleted {
            id: t.id,
            name: t.name.clone(),
        },
    )
    .unwrap();
    assert!(m.topics.is_empty());
    // apply_all is all or nothing.
    let recs = [
        MetadataRecord::ProducerIdsReserved { limit: 1000 },
        MetadataRecord::TopicDeleted {
            id: t.id,
            name: t.name.clone(),
        },
    ];
    assert!(apply_all(&m, &recs).is_err());
    assert_eq!(apply_all(&m, &recs[..1]).unwrap().producer_id_limit, 1000);
}

#[test]
fn the_cluster_id_is_set_once() {
    let mut m = Metadata::new(String::new());
    let init = |id: &str| MetadataRecord::ClusterInitialized {
        cluster_id: id.into(),
    };
    assert!(apply(&mut m, &init("")).is_err());
    apply(&mut m, &init("abc")).unwrap();
    // Replaying the same record is harmless; another id is refused.
    apply(&mut m, &init("abc")).unwrap();
    assert!(apply(&mut m, &init("xyz")).is_err());
    assert_eq!(m.cluster_id, "abc");
}

#[derive(Debug, Clone)]
enum Op {
    Create { name: u8, partitions: i32 },
    Grow { name: u8, more: i32 },
    Config { name: u8, retention: i64 },
    Delete { name: u8 },
    Reserve { more: i64 },
    BrokerConfig { value: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..5, 1i32..5).prop_map(|(name, partitions)| Op::Create { name, partitions }),
        2 => (0u8..5, 1i32..3).prop_map(|(name, more)| Op::Grow { name, more }),
        2 => (0u8..5, 1i64..1_000_000).prop_map(|(name, retention)| Op::Config { name, retention }),
        2 => (0u8..5).prop_map(|name| Op::Delete { name }),
        1 => (1i64..2000).prop_map(|more| Op::Reserve { more }),
        1 => any::<u16>().prop_map(|value| Op::BrokerConfig { value }),
    ]
}

proptest! {
    #[test]
    fn random_changes_match_a_model_survive_the_codec_and_replay_the_same(
        ops in prop::collection::vec(op(), 0..60),
    ) {
        let mut m = Metadata::new("c".into());
        // name → (id, partitions, retention override)
        let mut model: BTreeMap<String, (TopicId, i32, Option<i64>)> = BTreeMap::new();
        let mut limit = 0i64;
        let mut log = Vec::new();
        for op in ops {
            let record = match op {
                Op::Create { name, partitions } => {
                    let n = format!("t{name}");
                    if model.contains_key(&n) { continue; }
                    let t = topic(&n, partitions);
                    model.insert(n, (t.id, partitions, None));
                    MetadataRecord::TopicCreated { topic: t }
                }
                Op::Grow { name, more } => {
                    let n = format!("t{name}");
                    let Some(e) = model.get_mut(&n) else { continue };
                    e.1 += more;
                    MetadataRecord::PartitionsAdded {
                        id: e.0,
                        name: TopicName::new(&n).unwrap(),
                        placements: (0..more).map(|_| PartitionState::single(1)).collect(),
                    }
                }
                Op::Config { name, retention } => {
                    let n = format!("t{name}");
                    let Some(e) = model.get_mut(&n) else { continue };
                    e.2 = Some(retention);
                    let mut config = TopicConfig::default();
                    config.set("retention.ms", &retention.to_string()).unwrap();
                    MetadataRecord::TopicConfigSet { id: e.0, name: TopicName::new(&n).unwrap(), config }
                }
                Op::Delete { name } => {
                    let n = format!("t{name}");
                    let Some((id, _, _)) = model.remove(&n) else { continue };
                    MetadataRecord::TopicDeleted { id, name: TopicName::new(&n).unwrap() }
                }
                Op::Reserve { more } => {
                    limit += more;
                    MetadataRecord::ProducerIdsReserved { limit }
                }
                Op::BrokerConfig { value } => MetadataRecord::BrokerConfigsSet {
                    values: [("num.partitions".to_string(), (value % 100 + 1).to_string())].into(),
                },
            };
            let json = serde_json::to_string(&record).unwrap();
            let decoded: MetadataRecord = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&decoded, &record);
            apply(&mut m, &decoded).map_err(|e| TestCaseError::fail(e.to_string()))?;
            log.push(record);
        }
        prop_assert_eq!(m.producer_id_limit, limit);
        let got: BTreeMap<String, (TopicId, i32, Option<i64>)> = m
            .topics
            .iter()
            .map(|(n, t)| {
                let retention = t.config.overrides().get("retention.ms").map(|v| v.parse().unwrap());
                prop_assert_eq!(t.placements.len(), t.partitions as usize);
                Ok((n.to_string(), (t.id, t.partitions, retention)))
            })
            .collect::<Result<_, TestCaseError>>()?;
        prop_assert_eq!(got, model);
        // Another replica replaying the same log reaches the same state.
        prop_assert_eq!(apply_all(&Metadata::new("c".into()), &log).unwrap(), m);
    }
}

#[test]
fn guards_refuse_batches_decided_from_an_older_state() {
    let mut m = Metadata::new("c".into());
    let t = topic("orders", 2);
    apply(&mut m, &MetadataRecord::TopicCreated { topic: t.clone() }).unwrap();
    // Two brokers grow the topic from 2 to 4 at once: both decided
    // against 2 partitions, only the first batch applies.
    let grow = vec![
        MetadataRecord::Expect {
            expect: Expectation::PartitionCount { id: t.id, count: 2 },
        },
        MetadataRecord::PartitionsAdded {
            id: t.id,
            name: t.name.clone(),
            placements: vec![PartitionState::single(1), PartitionState::single(2)],
        },
    ];
    let m = apply_all(&m, &grow).unwrap();
    assert_eq!(m.topics[&t.name].partitions, 4);
    assert!(apply_all(&m, &grow).is_err());
    // Config, broker keys and tenants: a change decided from another
    // value than the current one is refused.
    let mut config = TopicConfig::default();
    config.set("retention.ms", "1").unwrap();
    let expect = |e| MetadataRecord::Expect { expect: e };
    assert!(apply_all(
        &m,
        &[expect(Expectation::TopicConfig {
            id: t.id,
            config: config.clone()
        })]
    )
    .is_err());
    apply_all(
        &m,
        &[expect(Expectation::TopicConfig {
            id: t.id,
            config: TopicConfig::default(),
        })],
    )
    .unwrap();
    let values: BTreeMap<String, String> = [("num.partitions".to_string(), "3".to_string())].into();
    assert!(apply_all(&m, &[expect(Expectation::BrokerConfigs { values })]).is_err());
    let mut tenants = m.tenants.clone();
    apply_all(
        &m,
        &[expect(Expectation::Tenants {
            tenants: tenants.clone(),
        })],
    )
    .unwrap();
    tenants.insert("acme".into(), Default::default());
    assert!(apply_all(&m, &[expect(Expectation::Tenants { tenants })]).is_err());
}
