//! The controller side of topic changes (Kafka's
//! `ReplicationControlManager`): each request is validated against the
//! current [`Metadata`] and answered with the records that make the
//! change, or the error the client gets. Pure: the caller commits the
//! records through the controller quorum and each broker then applies
//! them (see
//! [`crate::delta`]).

use model::pulsar_name::Namespace;
use model::{TopicId, TopicName};

use crate::image::{Metadata, TopicRecord};
use crate::placement;
use crate::records::{MetadataRecord, NodeId, PartitionState};
use crate::tenancy;
use crate::MetadataError as Error;
use magnetar_config::{BrokerConfig, TopicConfig, TopicKind};
use model::OFFSETS_TOPIC;

/// Most partitions one topic may have. Like Kafka's cap on the records one
/// admin operation may create, it keeps a single request from exhausting
/// memory or file descriptors.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 10_000;

/// A request to create a topic.
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Name (validated).
    pub name: TopicName,
    /// Partition count; `None` = `num.partitions`.
    pub partitions: Option<i32>,
    /// Replication factor; `None` = the default (1 on a single node).
    pub replication_factor: Option<i16>,
    /// Partitioned or not.
    pub kind: TopicKind,
    /// Overrides.
    pub config: TopicConfig,
    /// A manual placement: each partition's replicas, preferred leader
    /// first (empty: placed by the controller).
    pub assignments: Vec<Vec<crate::records::NodeId>>,
}

/// Who the new partitions may be placed on, and how the stripe starts.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// The usable brokers (registered and unfenced).
    pub brokers: &'a [NodeId],
    /// Where the stripe starts (random per request).
    pub seed: u64,
}

impl Placement<'_> {
    fn place(&self, first: i32, count: i32, rf: usize) -> Result<Vec<PartitionState>, Error> {
        placement::place(self.brokers, first, count, rf, self.seed)
            .map_err(|e| Error::InvalidReplicationFactor(e.to_string()))
    }
}

/// Validates a topic creation; the topic record (its id `id`) to commit
/// in a `TopicCreated`. `namespace`: the Pulsar namespace the client named
/// the topic in, which must still own the name.
pub fn create_topic(
    m: &Metadata,
    config: &BrokerConfig,
    req: &NewTopic,
    namespace: Option<&Namespace>,
    placement: Placement<'_>,
    id: TopicId,
) -> Result<TopicRecord, Error> {
    if let Some(ns) = namespace {
        tenancy::check_topic_namespace(&m.tenants, &req.name, ns)?;
    }
    if m.topics.contains_key(&req.name) {
        return Err(Error::TopicExists(req.name.to_string()));
    }
    let partitions = match req.partitions {
        None => config.num_partitions(),
        Some(n) if (1..=MAX_PARTITIONS_PER_TOPIC).contains(&n) => n,
        Some(n) => {
            return Err(Error::InvalidPartitions(format!(
                "{n} partitions requested; must be 1 to {MAX_PARTITIONS_PER_TOPIC}"
            )))
        }
    };
    if req.kind == TopicKind::NonPartitioned && partitions != 1 {
        return Err(Error::InvalidPartitions(
            "a non-partitioned topic has exactly one partition".into(),
        ));
    }
    let replication_factor = match req.replication_factor {
        None | Some(-1) => config.int_value("default.replication.factor").max(1) as usize,
        Some(n) if n > 0 => n as usize,
        Some(n) => {
            return Err(Error::InvalidReplicationFactor(format!(
                "replication factor must be larger than 0, or -1 for the default, not {n}"
            )))
        }
    };
    let placements = if req.assignments.is_empty() {
        placement.place(0, partitions, replication_factor)?
    } else {
        manual_placements(
            m,
            placement,
            &req.assignments,
            partitions,
            replication_factor,
        )?
    };
    tenancy::validate_topic_config(&m.tenants, config, &req.name, &req.config)?;
    Ok(TopicRecord {
        name: req.name.clone(),
        id,
        kind: req.kind,
        partitions,
        config: req.config.clone(),
        placements,
    })
}

/// A manual assignment as partition states: one list per partition, each
/// of the replication factor, naming registered brokers only (on a single
/// node: itself), the first replica leading.
fn manual_placements(
    m: &Metadata,
    placement: Placement<'_>,
    assignments: &[Vec<NodeId>],
    partitions: i32,
    replication_factor: usize,
) -> Result<Vec<PartitionState>, Error> {
    let bad = |why: String| Err(Error::InvalidReplicaAssignment(why));
    if assignments.len() != partitions as usize {
        return bad(format!(
            "{} partition assignments for {partitions} partitions",
            assignments.len()
        ));
    }
    let mut out = Vec::with_capacity(assignments.len());
    for replicas in assignments {
        if replicas.len() != replication_factor || replicas.is_empty() {
            return bad(format!(
                "a partition has {} replicas, not {replication_factor}",
                replicas.len()
            ));
        }
        for (i, n) in replicas.iter().enumerate() {
            let known = if m.brokers.is_empty() {
                placement.brokers.contains(n)
            } else {
                m.brokers.contains_key(n)
            };
            if !known {
                return bad(format!(
                    "The manual partition assignment includes broker {n}, but no such broker is registered."
                ));
            }
            if replicas[..i].contains(n) {
                return bad(format!(
                    "The manual partition assignment includes the broker {n} more than once."
                ));
            }
        }
        out.push(PartitionState::in_sync(replicas.clone()));
    }
    Ok(out)
}

/// Validates growing `name` to `total` partitions; the `PartitionsAdded`
/// record to commit. New partitions get as many replicas as the topic's
/// first one.
pub fn create_partitions(
    m: &Metadata,
    name: &str,
    total: i32,
    placement: Placement<'_>,
    assignments: &[Vec<NodeId>],
) -> Result<MetadataRecord, Error> {
    let topic = TopicName::new(name)
        .ok()
        .and_then(|n| m.topics.get(&n))
        .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
    let current = topic.partitions;
    if topic.kind == TopicKind::NonPartitioned {
        return Err(Error::InvalidPartitions(format!(
            "topic {name} is non-partitioned"
        )));
    }
    if total > MAX_PARTITIONS_PER_TOPIC {
        return Err(Error::InvalidPartitions(format!(
            "{total} partitions requested; at most {MAX_PARTITIONS_PER_TOPIC}"
        )));
    }
    if topic.name.is_internal() {
        return Err(Error::InvalidRequest(format!(
            "{name} is internal; its partitions are managed by the broker"
        )));
    }
    if total <= current {
        return Err(Error::InvalidPartitions(format!(
            "topic {name} has {current} partitions; the new count {total} must be larger"
        )));
    }
    let replication_factor = topic.placements.first().map_or(1, |s| s.replicas.len());
    let placements = if assignments.is_empty() {
        placement.place(current, total - current, replication_factor)?
    } else {
        manual_placements(
            m,
            placement,
            assignments,
            total - current,
            replication_factor,
        )?
    };
    Ok(MetadataRecord::PartitionsAdded {
        id: topic.id,
        name: topic.name.clone(),
        placements,
    })
}

/// Validates deleting `name` (only if it still has `expected_id`, when
/// given); the `TopicDeleted` record to commit.
pub fn delete_topic(
    m: &Metadata,
    name: &str,
    expected_id: Option<TopicId>,
) -> Result<MetadataRecord, Error> {
    if name == OFFSETS_TOPIC {
        return Err(Error::InvalidRequest(format!(
            "{OFFSETS_TOPIC} is internal and cannot be deleted"
        )));
    }
    let topic = TopicName::new(name)
        .ok()
        .and_then(|n| m.topics.get(&n))
        .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
    if let Some(id) = expected_id.filter(|id| *id != topic.id) {
        // Deleted and recreated since the id was resolved.
        return Err(Error::UnknownTopicId(id));
    }
    Ok(MetadataRecord::TopicDeleted {
        id: topic.id,
        name: topic.name.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::apply;
    use magnetar_config::TopicConfig;

    fn req(name: &str, partitions: Option<i32>, rf: Option<i16>) -> NewTopic {
        NewTopic {
            assignments: Vec::new(),
            name: TopicName::new(name).unwrap(),
            partitions,
            replication_factor: rf,
            kind: TopicKind::Partitioned,
            config: TopicConfig::default(),
        }
    }

    const THREE: Placement<'static> = Placement {
        brokers: &[1, 2, 3],
        seed: 0,
    };

    #[test]
    fn creation_is_validated_then_placed_over_the_brokers() {
        let config = BrokerConfig::new("/nonexistent", "127.0.0.1:0".parse().unwrap());
        let mut m = Metadata::new("c".into());
        let id = TopicId::random();
        let rec = create_topic(
            &m,
            &config,
            &req("orders", Some(6), Some(2)),
            None,
            THREE,
            id,
        )
        .unwrap();
        assert_eq!((rec.id, rec.partitions, rec.placements.len()), (id, 6, 6));
        let leaders: Vec<_> = rec.placements.iter().map(|p| p.leader).collect();
        assert_eq!(leaders, vec![1, 2, 3, 1, 2, 3]);
        assert!(rec.placements.iter().all(|p| p.replicas.len() == 2));
        apply(&mut m, &MetadataRecord::TopicCreated { topic: rec }).unwrap();

        let e = |r: NewTopic, p: Placement| {
            create_topic(&m, &config, &r, None, p, TopicId::random()).unwrap_err()
        };
        assert!(matches!(
            e(req("orders", None, None), THREE),
            Error::TopicExists(_)
        ));
        assert!(matches!(
            e(req("x", Some(0), None), THREE),
            Error::InvalidPartitions(_)
        ));
        assert!(matches!(
            e(req("x", None, Some(4)), THREE),
            Error::InvalidReplicationFactor(_)
        ));
        assert!(matches!(
            e(req("x", None, Some(0)), THREE),
            Error::InvalidReplicationFactor(_)
        ));
        let none = Placement {
            brokers: &[],
            seed: 0,
        };
        assert!(matches!(
            e(req("x", None, None), none),
            Error::InvalidReplicationFactor(_)
        ));

        // Growing continues the stripe with the topic's replication factor.
        let grow = create_partitions(&m, "orders", 8, THREE, &[]).unwrap();
        match &grow {
            MetadataRecord::PartitionsAdded { placements, .. } => {
                assert_eq!(placements.len(), 2);
                assert!(placements.iter().all(|p| p.replicas.len() == 2));
                assert_eq!(placements[0].leader, 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            create_partitions(&m, "orders", 6, THREE, &[]),
            Err(Error::InvalidPartitions(_))
        ));
        assert!(matches!(
            create_partitions(&m, "missing", 6, THREE, &[]),
            Err(Error::UnknownTopic(_))
        ));

        // Deleting by an id that is no longer the topic's is fenced.
        assert!(matches!(
            delete_topic(&m, "orders", Some(TopicId::random())),
            Err(Error::UnknownTopicId(_))
        ));
        assert!(matches!(
            delete_topic(&m, OFFSETS_TOPIC, None),
            Err(Error::InvalidRequest(_))
        ));
        assert_eq!(
            delete_topic(&m, "orders", Some(id)).unwrap(),
            MetadataRecord::TopicDeleted {
                id,
                name: TopicName::new("orders").unwrap()
            }
        );
    }
}
