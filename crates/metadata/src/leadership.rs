//! The controller's decisions on partition leadership and ISRs (Kafka's
//! `ReplicationControlManager`), as records: an ISR change a leader asks
//! for (AlterPartition), the elections and ISR removals that follow a
//! broker's fencing, and the elections an offline partition gets when a
//! broker of its last ISR returns (KIP-841). The rules themselves are
//! replication's pure ones ([`magnetar_replication::controller`]); this
//! applies them to the metadata image.

use std::collections::BTreeSet;

use magnetar_replication::controller::{
    alter_partition as decide_alter, elect_leader, remove_broker,
};
use magnetar_replication::{
    AlterPartitionRequest, PartitionEpoch, PartitionState as ReplicaState, ReplicationError,
};
use model::{LeaderEpoch, TopicId};

use crate::image::{Metadata, PartitionState, TopicRecord, NO_LEADER};
use crate::reassignment::carried;
use crate::records::{MetadataRecord, NodeId};

/// The key that lets an out-of-sync replica lead (topic override over the
/// cluster default).
const UNCLEAN_KEY: &str = "unclean.leader.election.enable";

/// The replication rules' view of a partition's state.
pub fn replica_state(s: &PartitionState) -> ReplicaState {
    ReplicaState {
        replicas: s.replicas.iter().map(|r| model::NodeId(*r)).collect(),
        isr: s.isr.iter().map(|r| model::NodeId(*r)).collect(),
        leader: (s.leader != NO_LEADER).then_some(model::NodeId(s.leader)),
        leader_epoch: LeaderEpoch(s.leader_epoch),
        partition_epoch: PartitionEpoch(s.partition_epoch),
    }
}

/// The metadata's form of a partition state the replication rules
/// decided.
pub fn partition_state(s: &ReplicaState) -> PartitionState {
    PartitionState {
        replicas: s.replicas.iter().map(|r| r.0).collect(),
        isr: s.isr.iter().map(|r| r.0).collect(),
        leader: s.leader.map_or(NO_LEADER, |l| l.0),
        leader_epoch: s.leader_epoch.0,
        partition_epoch: s.partition_epoch.0,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}

/// The brokers that may lead or stay in an ISR: registered and unfenced.
fn live(m: &Metadata) -> BTreeSet<model::NodeId> {
    m.live_brokers().into_iter().map(model::NodeId).collect()
}

/// Whether `topic` lets an out-of-sync replica lead.
pub fn unclean_allowed(m: &Metadata, topic: &TopicRecord) -> bool {
    topic
        .config
        .overrides()
        .get(UNCLEAN_KEY)
        .or_else(|| m.broker_configs.get(UNCLEAN_KEY))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Why an AlterPartition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlterPartitionError {
    /// No such topic id or partition (UNKNOWN_TOPIC_ID /
    /// UNKNOWN_TOPIC_OR_PARTITION).
    #[error("no partition {partition} of topic id {id}")]
    UnknownPartition {
        /// The topic id asked for.
        id: TopicId,
        /// The partition asked for.
        partition: i32,
    },
    /// Refused by the replication rules (a stale leader or partition
    /// epoch, an ineligible replica…).
    #[error(transparent)]
    Refused(#[from] ReplicationError),
}

/// Decides `partition` of topic `id`'s AlterPartition: the record to
/// commit (a new ISR and partition epoch) and the state it makes.
pub fn alter_partition(
    m: &Metadata,
    id: TopicId,
    partition: i32,
    request: &AlterPartitionRequest,
) -> Result<(MetadataRecord, ReplicaState), AlterPartitionError> {
    let unknown = AlterPartitionError::UnknownPartition { id, partition };
    let topic = m
        .topics
        .values()
        .find(|t| t.id == id)
        .ok_or(unknown.clone())?;
    let current = usize::try_from(partition)
        .ok()
        .and_then(|p| topic.placements.get(p))
        .ok_or(unknown)?;
    let next = decide_alter(&replica_state(current), request, &live(m))?;
    // The ISR change that admits the last target replica completes a
    // reassignment under way (Kafka's maybeCompleteReassignment).
    let state = carried(current, partition_state(&next), &m.live_brokers());
    let next = replica_state(&state);
    let record = MetadataRecord::PartitionChanged {
        id,
        partition,
        state,
    };
    Ok((record, next))
}

/// The partition changes that follow `node`'s fencing in `m` (where it is
/// fenced already): partitions it led get a new leader from their ISR (or
/// go offline; an out-of-sync replica leads only where unclean election
/// is enabled), and it leaves every ISR it was in but the last member's.
pub fn after_fencing(m: &Metadata, node: NodeId) -> Vec<MetadataRecord> {
    let live = live(m);
    let mut out = Vec::new();
    for topic in m.topics.values() {
        let unclean = unclean_allowed(m, topic);
        for (p, state) in topic.placements.iter().enumerate() {
            if state.replicas.len() < 2 || !state.has_replica(node) {
                continue;
            }
            let before = replica_state(state);
            let after = remove_broker(&before, model::NodeId(node), &live, unclean);
            if after != before {
                out.push(MetadataRecord::PartitionChanged {
                    id: topic.id,
                    partition: p as i32,
                    state: carried(state, partition_state(&after), &m.live_brokers()),
                });
            }
        }
    }
    out
}

/// The partition changes that follow `node`'s unfencing in `m` (where it
/// is unfenced already): every offline partition it may lead (it is in
/// the ISR kept for it, or unclean election is enabled) elects a leader.
pub fn after_unfencing(m: &Metadata, node: NodeId) -> Vec<MetadataRecord> {
    let live = live(m);
    let mut out = Vec::new();
    for topic in m.topics.values() {
        let unclean = unclean_allowed(m, topic);
        for (p, state) in topic.placements.iter().enumerate() {
            if state.leader != NO_LEADER || !state.has_replica(node) {
                continue;
            }
            if let Ok(next) = elect_leader(&replica_state(state), &live, unclean) {
                out.push(MetadataRecord::PartitionChanged {
                    id: topic.id,
                    partition: p as i32,
                    state: carried(state, partition_state(&next), &m.live_brokers()),
                });
            }
        }
    }
    out
}

/// `records` (decided by the registry: registrations, fencings,
/// unfencings, shutdowns) followed by the partition changes they call
/// for: for each broker they make unusable, [`after_fencing`]; for each
/// they make usable, [`after_unfencing`]. Committed in one batch, so a
/// broker is never fenced while still leading, and a batch decided from a
/// state that changed meanwhile is refused whole. Records that do not
/// touch brokers come back as they are, without copying the image.
pub fn with_leadership(m: &Metadata, mut records: Vec<MetadataRecord>) -> Vec<MetadataRecord> {
    let mut nodes: Vec<NodeId> = records
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::BrokerFencing { node, .. }
            | MetadataRecord::BrokerRegistered { node, .. }
            | MetadataRecord::BrokerUnregistered { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    if nodes.is_empty() {
        return records;
    }
    nodes.sort_unstable();
    nodes.dedup();
    // A batch that does not apply is refused at commit anyway.
    let Ok(mut next) = crate::records::apply_all(m, &records) else {
        return records;
    };
    let usable = |m: &Metadata, n: NodeId| m.brokers.get(&n).is_some_and(|b| !b.fenced);
    for node in nodes {
        let changes = match (usable(m, node), usable(&next, node)) {
            (true, false) => after_fencing(&next, node),
            (false, true) => after_unfencing(&next, node),
            _ => continue,
        };
        if let Ok(applied) = crate::records::apply_all(&next, &changes) {
            next = applied;
            records.extend(changes);
        }
    }
    records
}

/// The partitions whose preferred leader (first replica) is `broker` and
/// could lead them again (`broker` live and in the ISR) but does not: what
/// automatic leader balancing (`auto.leader.rebalance.enable`) gives back
/// to it with preferred elections. Each broker asks only for its own, so
/// no two brokers ever race for one partition.
pub fn led_elsewhere(m: &Metadata, broker: NodeId) -> Vec<(String, i32)> {
    let up = m.brokers.get(&broker).is_some_and(|b| !b.fenced);
    if !up {
        return Vec::new();
    }
    m.partitions()
        .filter(|(_, _, s)| {
            s.replicas.first() == Some(&broker) && s.leader != broker && s.isr.contains(&broker)
        })
        .map(|(t, i, _)| (t.name.to_string(), i))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;

/// Kafka's ElectLeaders election types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// Move leadership to the first replica (the preferred leader) when it
    /// is live and in sync.
    Preferred,
    /// Give a partition without a live leader one, from the ISR if a
    /// member is live, else any live replica (losing what only the ISR
    /// had).
    Unclean,
}

/// Why a partition's election was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    /// No such partition (UNKNOWN_TOPIC_OR_PARTITION).
    #[error("no partition {partition} of {topic}")]
    UnknownPartition {
        /// The topic asked for.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// The partition already has the leader the election would choose
    /// (ELECTION_NOT_NEEDED).
    #[error("the partition is led by broker {0} already")]
    NotNeeded(NodeId),
    /// The preferred replica is not live or not in sync
    /// (PREFERRED_LEADER_NOT_AVAILABLE).
    #[error("the preferred leader, broker {0}, is not live or not in the ISR")]
    PreferredNotAvailable(NodeId),
    /// No replica may lead (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    #[error("no replica of the partition is live")]
    NoneEligible,
}

/// Decides an election of `kind` for `partition` of `topic`: the record
/// that makes it, with a new leader epoch and partition epoch.
pub fn elect(
    m: &Metadata,
    topic: &str,
    partition: i32,
    kind: ElectionType,
) -> Result<MetadataRecord, ElectionError> {
    let (rec, current) =
        m.partition_named(topic, partition)
            .ok_or_else(|| ElectionError::UnknownPartition {
                topic: topic.to_string(),
                partition,
            })?;
    let live = live(m);
    let state = replica_state(current);
    let led = state.leader.filter(|l| live.contains(l));
    let next = match kind {
        ElectionType::Preferred => {
            let preferred = *state.replicas.first().ok_or(ElectionError::NoneEligible)?;
            if led == Some(preferred) {
                return Err(ElectionError::NotNeeded(preferred.0));
            }
            if !live.contains(&preferred) || !state.isr.contains(&preferred) {
                // An offline partition the preferred replica cannot lead
                // has nobody to elect by preference.
                return Err(match led {
                    Some(_) => ElectionError::PreferredNotAvailable(preferred.0),
                    None => ElectionError::NoneEligible,
                });
            }
            ReplicaState {
                leader: Some(preferred),
                leader_epoch: LeaderEpoch(state.leader_epoch.0 + 1),
                partition_epoch: PartitionEpoch(state.partition_epoch.0 + 1),
                ..state.clone()
            }
        }
        ElectionType::Unclean => {
            if let Some(l) = led {
                return Err(ElectionError::NotNeeded(l.0));
            }
            elect_leader(&state, &live, true).map_err(|_| ElectionError::NoneEligible)?
        }
    };
    Ok(MetadataRecord::PartitionChanged {
        id: rec.id,
        partition,
        state: carried(current, partition_state(&next), &m.live_brokers()),
    })
}
