//! Offsets a group's coordinator keeps for a transaction that another
//! broker coordinates (TxnOffsetCommit in a cluster, as Kafka's group
//! coordinator keeps pending transactional offsets): the broker's side,
//! which checks with the transaction's coordinator and commits or drops
//! them when it writes the marker for the group's slot (the records are
//! kept by [`super::staged_store`]).

use std::collections::BTreeSet;

use super::TxnError;
use crate::group::store::CommittedOffset;
use crate::{Broker, Error};

pub use super::staged_store::{Staged, StagedOffsets};

impl Broker {
    #[cfg(test)]
    fn staged(&self) -> &StagedOffsets {
        &self.groups().front_end().staged_offsets
    }

    /// TxnOffsetCommit with the transaction coordinated by another
    /// broker, the producer and group already checked with it
    /// ([`Broker::check_remote_group`]).
    pub(crate) fn stage_txn_offsets(
        &self,
        id: &str,
        group: &str,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), Error> {
        let c = self.coordinator(group)?;
        c.staged().stage(id, group, producer_id, epoch, offsets)?;
        c.committed_blocking()
    }

    /// Before offsets of `group` are staged here for `id`'s transaction,
    /// whose coordinator is another broker: the group's slot must be in
    /// that producer's open transaction (AddOffsetsToTxn put it there).
    /// A marker for the slot meanwhile cancels the check. Blocking: it
    /// waits for the coordinator.
    pub(crate) fn check_remote_group(
        &self,
        id: &str,
        group: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), Error> {
        let c = self.coordinator(group)?;
        let staged = c.staged();
        let token = super::peers::next_guard_token();
        staged.begin_check(group, producer_id, producer_epoch, token);
        let answer = self.verify_remote_group(id, group, producer_id, producer_epoch);
        if !staged.finish_check(group, producer_id, token, answer.is_ok()) {
            answer?;
            return Err(TxnError::CoordinatorNotAvailable(format!(
                "the transaction of {id:?} ended while {group:?} was checked; retry"
            ))
            .into());
        }
        Ok(())
    }

    /// The partitions of `group` with offsets staged here by a transaction
    /// another broker coordinates.
    pub(crate) fn staged_offsets_of(&self, group: &str) -> BTreeSet<(String, i32)> {
        self.coordinator(group)
            .map(|c| c.staged().partitions_of(group))
            .unwrap_or_default()
    }

    /// The marker for slot `slot` from a transaction's coordinator: the
    /// offsets `producer_id` staged for the groups of that slot become
    /// their committed offsets (`commit`) or are dropped. Offsets staged by
    /// a newer epoch than the marker's are another transaction's and stay.
    pub(crate) fn end_staged_offsets(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        slot: i32,
    ) -> Result<(), Error> {
        let c = self.slot_coordinator(slot)?;
        let staged = c.staged();
        let of_slot = |g: &str| self.group_slot(g).is_ok_and(|s| s == slot);
        let ending = staged.ending(producer_id, epoch, of_slot);
        for (k, s) in ending {
            // Not under `writing`: the group coordinator's lock is taken
            // to commit, and its compaction takes `writing` under it.
            // Offsets of an older epoch are a transaction whose marker
            // never came here: never committed by a later one's.
            if commit && s.producer_epoch == epoch && !s.offsets.is_empty() {
                c.groups()
                    .commit_transactional_offsets(&k.0, s.offsets.clone())?;
            }
            staged.remove_ended(&k, &s)?;
        }
        // On disk before it is answered, as a partition's marker: the
        // coordinator then records the transaction complete.
        staged.flush()?;
        c.committed_blocking()
    }
}

#[cfg(test)]
mod tests {
    use crate::group::store::CommittedOffset;
    use crate::testing::broker_with_topics;

    fn offsets() -> Vec<(String, i32, CommittedOffset)> {
        let o = CommittedOffset {
            offset: 4,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: 0,
        };
        vec![("t".to_string(), 0, o)]
    }

    #[test]
    fn offsets_stage_only_after_a_yes_no_marker_overtook() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker_with_topics(dir.path(), &["t"]);
        let s = b.staged();
        // Never checked: refused.
        assert!(s.stage("tx", "g", 7, 3, offsets()).is_err());
        // Checked, yes: staged once; the check is used up.
        s.begin_check("g", 7, 3, 1);
        assert!(s.finish_check("g", 7, 1, true));
        s.stage("tx", "g", 7, 3, offsets()).unwrap();
        assert_eq!(s.partitions_of("g").len(), 1);
        assert!(s.stage("tx", "g", 7, 3, offsets()).is_err());
        // A marker during the check: its yes stages nothing.
        s.begin_check("g", 7, 3, 2);
        s.cancel_checks(7, |g| g == "g");
        assert!(!s.finish_check("g", 7, 2, true));
        assert!(s.stage("tx", "g", 7, 3, offsets()).is_err());
        // A marker for another group's slot or producer leaves it be.
        s.begin_check("g", 7, 3, 3);
        s.cancel_checks(7, |g| g == "other");
        s.cancel_checks(8, |_| true);
        assert!(s.finish_check("g", 7, 3, true));
        // A yes for another epoch than the stage's does not count.
        assert!(s.stage("tx", "g", 7, 4, offsets()).is_err());
        // A no forgets the check.
        s.begin_check("g", 7, 3, 4);
        assert!(!s.finish_check("g", 7, 4, false));
        assert_eq!(s.checks_in_flight(), 0);
    }
}
