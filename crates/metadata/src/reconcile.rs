//! KIP-516 full-state reconciliation of a broker's disk: given every
//! partition the metadata assigns to this broker (the first state a broker
//! gets is all of them, `is_every_partition` in the KIP's terms) and the
//! partition directories on disk with the topic id each records, which
//! directories are stale. A stale directory is never opened or served; it
//! is staged under `deleting/{topic_id}_{partition}` and removed
//! `log.dir.delete.delay.ms` later.
//!
//! Pure: no I/O, so the decisions are tested on their own.

use std::collections::BTreeMap;

use model::{TopicId, TopicPartition};

/// Why a directory on disk is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// The metadata assigns no such partition to this broker (its topic
    /// was deleted, the partition moved, or it never existed here).
    NotAssigned,
    /// The partition is assigned, but to a topic with another id: the
    /// directory belongs to a deleted topic of the same name.
    OtherTopicId {
        /// The id the directory records.
        on_disk: TopicId,
        /// The id the metadata has.
        expected: TopicId,
    },
    /// The directory records no readable topic id.
    NoTopicId,
}

/// The directories of `on_disk` that must not be served, with why, given
/// `assigned` (every partition this broker holds a replica of, with its
/// topic's id), in `on_disk` order.
pub fn stale_partitions(
    on_disk: &[(TopicPartition, Option<TopicId>)],
    assigned: &BTreeMap<TopicPartition, TopicId>,
) -> Vec<(TopicPartition, Stale)> {
    on_disk
        .iter()
        .filter_map(|(tp, id)| {
            let why = match (assigned.get(tp), id) {
                (None, _) => Stale::NotAssigned,
                (Some(_), None) => Stale::NoTopicId,
                (Some(expected), Some(found)) if found != expected => Stale::OtherTopicId {
                    on_disk: *found,
                    expected: *expected,
                },
                (Some(_), Some(_)) => return None,
            };
            Some((tp.clone(), why))
        })
        .collect()
}

/// An incremental state (not every partition) names `tp` of topic
/// `expected`: the directory is stale only if it records another id.
pub fn stale_after_change(on_disk: Option<TopicId>, expected: TopicId) -> Option<Stale> {
    match on_disk {
        Some(found) if found != expected => Some(Stale::OtherTopicId {
            on_disk: found,
            expected,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use model::{PartitionId, TopicName};

    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(TopicName::new(t).unwrap(), PartitionId(p))
    }

    #[test]
    fn the_seed_cases() {
        let id0 = TopicId::random();
        let id1 = TopicId::random();
        let other = TopicId::random();
        let assigned: BTreeMap<TopicPartition, TopicId> =
            [(tp("a", 0), id1), (tp("b", 0), other)].into();
        let on_disk = vec![
            // Scenario 2: A was deleted and recreated while this broker was
            // away; its directory holds the old id.
            (tp("a", 0), Some(id0)),
            // Up to date.
            (tp("b", 0), Some(other)),
            // Not in the full state at all: deleted, or moved elsewhere.
            (tp("b", 1), Some(other)),
            (tp("gone", 0), Some(id0)),
            // No readable partition.metadata.
            (tp("b", 0), None),
        ];
        assert_eq!(
            stale_partitions(&on_disk, &assigned),
            vec![
                (
                    tp("a", 0),
                    Stale::OtherTopicId {
                        on_disk: id0,
                        expected: id1
                    }
                ),
                (tp("b", 1), Stale::NotAssigned),
                (tp("gone", 0), Stale::NotAssigned),
                (tp("b", 0), Stale::NoTopicId),
            ]
        );
        // An incremental state only judges ids.
        assert_eq!(stale_after_change(Some(id1), id1), None);
        assert_eq!(stale_after_change(None, id1), None);
        assert_eq!(
            stale_after_change(Some(id0), id1),
            Some(Stale::OtherTopicId {
                on_disk: id0,
                expected: id1
            })
        );
    }

    #[test]
    fn nothing_assigned_means_everything_is_stale() {
        let on_disk = vec![(tp("x", 0), Some(TopicId::random()))];
        assert_eq!(stale_partitions(&on_disk, &BTreeMap::new()).len(), 1);
        assert!(stale_partitions(&[], &BTreeMap::new()).is_empty());
    }
}
