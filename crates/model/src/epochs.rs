//! Which leader epoch started at which offset of a log (what Kafka keeps in
//! its `leader-epoch-checkpoint` file) and Kafka's OffsetForLeaderEpoch
//! rule, which finds where two replicas' logs part. One definition for the
//! log on disk and for the replication state machines, so both always
//! agree on where a follower must truncate.

use crate::{LeaderEpoch, Offset};

/// One epoch and the offset of its first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: LeaderEpoch,
    /// The first offset written in that epoch.
    pub start_offset: Offset,
}

/// The epochs of one log, oldest first; epochs and start offsets both
/// strictly increase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochHistory {
    entries: Vec<EpochEntry>,
}

impl EpochHistory {
    /// An empty history (an empty log).
    pub fn new() -> Self {
        Self::default()
    }

    /// A history of `entries` as read back from a checkpoint: kept in
    /// order, each entry assigned as a log would (a later entry not newer
    /// than the one before it is dropped).
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Self {
        let mut h = Self::new();
        for e in entries {
            h.assign(e.epoch, e.start_offset);
        }
        h
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The newest epoch.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than
    /// the latest epoch (and not negative: batches without an epoch carry
    /// -1); entries starting at or after `start_offset` are dropped first
    /// (they held no records). Returns whether anything changed.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if epoch.0 < 0 || self.latest_epoch().is_some_and(|l| epoch <= l) {
            return false;
        }
        self.entries.retain(|e| e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// Kafka's OffsetForLeaderEpoch: the largest epoch not above `epoch`
    /// and the offset where that epoch ends (the start of the next epoch,
    /// or `log_end` for the latest one). An epoch older than the first
    /// known one answers with itself and the first start. `None` (Kafka's
    /// undefined epoch and offset) for a negative epoch, one newer than the
    /// latest, or an empty history.
    pub fn end_offset_for(
        &self,
        epoch: LeaderEpoch,
        log_end: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        if epoch.0 < 0 {
            return None;
        }
        if self.latest_epoch() == Some(epoch) {
            return Some((epoch, log_end));
        }
        let higher = self.entries.iter().find(|e| e.epoch > epoch)?;
        match self.entries.iter().rev().find(|e| e.epoch <= epoch) {
            Some(floor) => Some((floor.epoch, higher.start_offset)),
            None => Some((epoch, higher.start_offset)),
        }
    }

    /// The epoch of the record at `offset`, if the history covers it.
    pub fn epoch_at(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Drops entries starting at or after `end_offset` (the log was cut
    /// back to end there). Returns whether anything changed.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        self.entries.len() != before
    }

    /// Drops entries wholly below `start_offset` (the log start moved
    /// there); the epoch covering it is kept, starting at `start_offset`.
    /// Returns whether anything changed.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        let Some(i) = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset)
        else {
            return false;
        };
        if i == 0 && self.entries[0].start_offset == start_offset {
            return false;
        }
        self.entries.drain(..i);
        self.entries[0].start_offset = start_offset;
        true
    }

    /// Drops every entry (the log was emptied). Returns whether anything
    /// changed.
    pub fn clear(&mut self) -> bool {
        let had = !self.entries.is_empty();
        self.entries.clear();
        had
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn history(entries: &[(i32, i64)]) -> EpochHistory {
        EpochHistory::from_entries(entries.iter().map(|&(e, s)| EpochEntry {
            epoch: LeaderEpoch(e),
            start_offset: Offset(s),
        }))
    }

    fn e(i: i32) -> LeaderEpoch {
        LeaderEpoch(i)
    }

    #[test]
    fn end_offsets_follow_kafka() {
        assert_eq!(EpochHistory::new().end_offset_for(e(0), Offset(0)), None);
        let h = history(&[(1, 0), (3, 10), (5, 20)]);
        let leo = Offset(30);
        assert_eq!(h.end_offset_for(e(5), leo), Some((e(5), leo)));
        assert_eq!(h.end_offset_for(e(3), leo), Some((e(3), Offset(20))));
        // An epoch that never wrote maps to the one before it.
        assert_eq!(h.end_offset_for(e(4), leo), Some((e(3), Offset(20))));
        assert_eq!(h.end_offset_for(e(0), leo), Some((e(0), Offset(0))));
        assert_eq!(h.end_offset_for(e(6), leo), None);
        assert_eq!(h.end_offset_for(e(-1), leo), None);
    }

    #[test]
    fn assignments_keep_epochs_and_starts_increasing() {
        let mut h = EpochHistory::new();
        assert!(h.assign(e(0), Offset(0)));
        assert!(!h.assign(e(0), Offset(5)), "the same epoch again");
        assert!(!h.assign(e(-1), Offset(6)), "no epoch");
        assert!(h.assign(e(2), Offset(5)));
        // A newer epoch from an offset an older one started at replaces it.
        assert!(h.assign(e(3), Offset(5)));
        assert_eq!(h, history(&[(0, 0), (3, 5)]));
        assert_eq!(h.epoch_at(Offset(4)), Some(e(0)));
        assert_eq!(h.epoch_at(Offset(9)), Some(e(3)));
    }

    #[test]
    fn truncation_from_both_ends() {
        let mut h = history(&[(1, 0), (2, 10), (3, 20)]);
        assert!(h.truncate_from_start(Offset(15)));
        assert_eq!(h, history(&[(2, 15), (3, 20)]));
        assert!(!h.truncate_from_start(Offset(15)));
        assert!(h.truncate_from_end(Offset(20)));
        assert_eq!(h.latest_epoch(), Some(e(2)));
        assert!(!h.truncate_from_end(Offset(20)));
        assert!(h.clear());
        assert!(!h.clear());
    }

    proptest! {
        /// Whatever is assigned or cut, entries stay strictly increasing and each
        /// entry's epoch answers with its own end.
        #[test]
        fn entries_stay_ordered_and_answer_their_own_ends(
            steps in proptest::collection::vec((0i32..20, 0i64..100, any::<bool>()), 0..40),
        ) {
            let mut h = EpochHistory::new();
            for (epoch, offset, truncate) in steps {
                if truncate {
                    h.truncate_from_end(Offset(offset));
                } else {
                    h.assign(e(epoch), Offset(offset));
                }
            }
            let es = h.entries();
            for w in es.windows(2) {
                prop_assert!(w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
            }
            let log_end = Offset(es.last().map_or(0, |e| e.start_offset.0 + 5));
            for (i, entry) in es.iter().enumerate() {
                let end = es.get(i + 1).map_or(log_end, |n| n.start_offset);
                prop_assert_eq!(h.end_offset_for(entry.epoch, log_end), Some((entry.epoch, end)));
                prop_assert_eq!(h.epoch_at(entry.start_offset), Some(entry.epoch));
            }
        }
    }
}
