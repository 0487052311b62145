//! Where new partitions go: striped over the usable brokers, each
//! partition's replicas on distinct brokers, the first replica (the
//! preferred leader) rotating so leadership is balanced. A simpler form of
//! Kafka's `StripedReplicaPlacer` without racks: Kafka also reshuffles the
//! broker order every round (so a failed broker's leadership spreads over
//! several others, where here it moves to the next broker in id order) and
//! may put followers on fenced brokers; neither is done here yet.
//!
//! Pure: the controller side of topic creation calls it with the brokers it
//! knows are alive (a standalone node's quorum of one: itself).

use crate::records::{NodeId, PartitionState};

/// Why partitions could not be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementError {
    /// No broker is registered and unfenced.
    NoBrokers,
    /// More replicas were asked for than there are brokers.
    TooFewBrokers {
        /// Replicas per partition asked for.
        replication_factor: usize,
        /// Brokers available.
        brokers: usize,
    },
}

impl std::fmt::Display for PlacementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlacementError::NoBrokers => f.write_str("no broker is available"),
            PlacementError::TooFewBrokers {
                replication_factor,
                brokers,
            } => write!(
                f,
                "replication factor {replication_factor} is larger than the {brokers} available broker{}",
                if *brokers == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Places partitions `first..first + count` with `replication_factor`
/// replicas each on `brokers` (any order; duplicates ignored). `seed`
/// chooses where the stripe starts (the controller passes a random one, as
/// Kafka does, so small topics do not all lead on the same broker); the
/// result depends only on the arguments.
///
/// Partition `p`'s replicas are consecutive brokers in id order starting at
/// `seed + p`, so over `brokers.len()` consecutive partitions every broker
/// leads once and holds `replication_factor` replicas.
pub fn place(
    brokers: &[NodeId],
    first: i32,
    count: i32,
    replication_factor: usize,
    seed: u64,
) -> Result<Vec<PartitionState>, PlacementError> {
    let mut nodes = brokers.to_vec();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.is_empty() {
        return Err(PlacementError::NoBrokers);
    }
    if replication_factor == 0 || replication_factor > nodes.len() {
        return Err(PlacementError::TooFewBrokers {
            replication_factor,
            brokers: nodes.len(),
        });
    }
    let n = nodes.len() as u64;
    Ok((first..first + count)
        .map(|p| {
            let start = (seed % n + p as u64 % n) % n;
            PartitionState::in_sync(
                (0..replication_factor as u64)
                    .map(|r| nodes[((start + r) % n) as usize])
                    .collect(),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn one_broker_holds_everything_and_errors_are_clear() {
        let p = place(&[7], 0, 3, 1, 42).unwrap();
        assert_eq!(p, vec![PartitionState::single(7); 3]);
        assert_eq!(place(&[], 0, 1, 1, 0), Err(PlacementError::NoBrokers));
        let e = place(&[1], 0, 1, 3, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "replication factor 3 is larger than the 1 available broker"
        );
        assert!(place(&[1, 2], 0, 1, 0, 0).is_err());
    }

    #[test]
    fn stripes_rotate_the_leader() {
        let p = place(&[3, 1, 2], 0, 4, 2, 0).unwrap();
        let replicas: Vec<_> = p.iter().map(|s| s.replicas.clone()).collect();
        assert_eq!(
            replicas,
            vec![vec![1, 2], vec![2, 3], vec![3, 1], vec![1, 2]]
        );
        // With the same seed, added partitions continue the stripe (each
        // request draws its own seed, as Kafka's placer does).
        let more = place(&[1, 2, 3], 4, 2, 2, 0).unwrap();
        assert_eq!(more[0].replicas, vec![2, 3]);
    }

    proptest! {
        #[test]
        fn replicas_are_distinct_and_leaders_and_replicas_balanced(
            brokers in prop::collection::btree_set(0i32..50, 1..8),
            count in 1i32..200,
            rf in 1usize..4,
            seed in any::<u64>(),
        ) {
            let brokers: Vec<_> = brokers.into_iter().collect();
            let placed = place(&brokers, 0, count, rf, seed);
            if rf > brokers.len() {
                prop_assert!(placed.is_err());
                return Ok(());
            }
            let placed = placed.unwrap();
            prop_assert_eq!(placed.len(), count as usize);
            let mut leads: BTreeMap<NodeId, usize> = brokers.iter().map(|b| (*b, 0)).collect();
            let mut holds = leads.clone();
            for s in &placed {
                let mut r = s.replicas.clone();
                r.sort_unstable();
                r.dedup();
                prop_assert_eq!(r.len(), rf);
                prop_assert_eq!(s.leader, s.replicas[0]);
                prop_assert_eq!(&s.isr, &s.replicas);
                *leads.get_mut(&s.leader).unwrap() += 1;
                for b in &s.replicas {
                    *holds.get_mut(b).unwrap() += 1;
                }
            }
            let spread = |m: &BTreeMap<NodeId, usize>| {
                m.values().max().unwrap() - m.values().min().unwrap()
            };
            prop_assert!(spread(&leads) <= 1, "leaders {:?}", leads);
            prop_assert!(spread(&holds) <= rf, "replicas {:?}", holds);
        }
    }
}
