//! AlterPartitionReassignments and ListPartitionReassignments: moves
//! decided by [`magnetar_metadata::reassignment`] and committed as
//! partition-change records; the replicas they add fetch like any
//! follower, and the leader's AlterPartition that admits the last of them
//! to the ISR completes the move.

use magnetar_metadata::reassignment::{self, ReassignError};

use crate::metadata_records::{NodeId, PartitionState};
use crate::{Broker, Error};

/// One partition to move: topic name, index and the target replicas
/// (`None`: cancel the reassignment under way).
pub type ReassignRequest = (String, i32, Option<Vec<NodeId>>);

impl Broker {
    /// Starts (or replaces, or cancels) the reassignment of each of
    /// `partitions`; the ones allowed are committed in one change; each
    /// partition's outcome, in order. `Err`: the change could not be
    /// committed (no controller). Blocks on the controller.
    pub fn alter_partition_reassignments(
        &self,
        partitions: &[ReassignRequest],
        allow_replication_factor_change: bool,
    ) -> Result<Vec<Result<(), ReassignError>>, Error> {
        self.change(|b| {
            let store = b.store.lock();
            let mut records = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let outcomes = partitions
                .iter()
                .map(|(topic, p, target)| {
                    // Two changes of one partition in one commit would
                    // conflict: the first one named stands.
                    if !seen.insert((topic.as_str(), *p)) {
                        return Err(ReassignError::InvalidAssignment(format!(
                            "partition {p} of {topic} is named twice in the request"
                        )));
                    }
                    reassignment::reassign(
                        &store.data,
                        topic,
                        *p,
                        target.as_deref(),
                        allow_replication_factor_change,
                    )
                    .map(|r| records.extend(r))
                })
                .collect();
            Ok((records, outcomes))
        })
    }

    /// The partitions being reassigned (topic name, index, state with the
    /// replicas being added and removed).
    pub fn partition_reassignments(&self) -> Vec<(String, i32, PartitionState)> {
        reassignment::ongoing(&self.store.lock().data)
    }
}
