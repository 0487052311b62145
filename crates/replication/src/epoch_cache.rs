//! The leader-epoch cache: which leader epoch started at which offset, like
//! Kafka's `leader-epoch-checkpoint` file, and the OffsetForLeaderEpoch rule
//! that finds where two logs diverge.

use model::{LeaderEpoch, Offset};

/// One entry of the cache: `epoch`'s first record is at `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: LeaderEpoch,
    /// The offset of the epoch's first record.
    pub start: Offset,
}

/// The answer Kafka gives when no epoch fits: an undefined epoch and offset.
pub const UNDEFINED: (LeaderEpoch, Offset) = (LeaderEpoch::UNKNOWN, Offset(-1));

/// The epochs of one replica's log, oldest first; epochs and start offsets
/// both strictly increase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<EpochEntry>,
}

impl EpochCache {
    /// An empty cache (an empty log).
    pub fn new() -> Self {
        Self::default()
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
        self.latest().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start`. An epoch equal to or older
    /// than the latest is ignored (returns false); entries starting at or
    /// after `start` are dropped first (they held no records).
    pub fn assign(&mut self, epoch: LeaderEpoch, start: Offset) -> bool {
        if let Some(last) = self.latest() {
            if epoch <= last.epoch {
                return false;
            }
        }
        self.entries.retain(|e| e.start < start);
        self.entries.push(EpochEntry { epoch, start });
        true
    }

    /// Kafka's OffsetForLeaderEpoch: for the requested epoch, the largest
    /// epoch not above it and the offset where that epoch ends (the start of
    /// the next epoch, or `log_end` for the latest epoch). An epoch newer
    /// than the latest, or an empty cache, gives [`UNDEFINED`]; an epoch
    /// older than the first gives the requested epoch with the first start.
    pub fn end_offset_for(&self, epoch: LeaderEpoch, log_end: Offset) -> (LeaderEpoch, Offset) {
        let Some(latest) = self.latest() else {
            return UNDEFINED;
        };
        if epoch == latest.epoch {
            return (epoch, log_end);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > epoch) else {
            return UNDEFINED;
        };
        match self.entries.iter().rev().find(|e| e.epoch <= epoch) {
            Some(floor) => (floor.epoch, higher.start),
            None => (epoch, higher.start),
        }
    }

    /// The epoch of the record at `offset`, if the cache covers it.
    pub fn epoch_at(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start <= offset)
            .map(|e| e.epoch)
    }

    /// Drops every entry starting at or after `offset` (the log was
    /// truncated to end at `offset`).
    pub fn truncate_from_end(&mut self, offset: Offset) {
        self.entries.retain(|e| e.start < offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut c = EpochCache::new();
        for &(e, s) in entries {
            assert!(c.assign(LeaderEpoch(e), Offset(s)));
        }
        c
    }

    #[test]
    fn end_offset_follows_kafka() {
        let c = cache(&[(1, 0), (3, 10), (5, 20)]);
        let end = Offset(25);
        assert_eq!(c.end_offset_for(LeaderEpoch(5), end), (LeaderEpoch(5), end));
        assert_eq!(
            c.end_offset_for(LeaderEpoch(3), end),
            (LeaderEpoch(3), Offset(20))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(4), end),
            (LeaderEpoch(3), Offset(20))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(2), end),
            (LeaderEpoch(1), Offset(10))
        );
        assert_eq!(
            c.end_offset_for(LeaderEpoch(0), end),
            (LeaderEpoch(0), Offset(0))
        );
        assert_eq!(c.end_offset_for(LeaderEpoch(6), end), UNDEFINED);
        assert_eq!(
            EpochCache::new().end_offset_for(LeaderEpoch(1), end),
            UNDEFINED
        );
    }

    proptest::proptest! {
        #[test]
        fn entries_stay_ordered_and_answer_their_own_ends(
            ops in proptest::collection::vec((0i32..30, 0i64..200, proptest::bool::ANY), 0..40),
        ) {
            let mut c = EpochCache::new();
            for (epoch, offset, truncate) in ops {
                if truncate {
                    c.truncate_from_end(Offset(offset));
                } else {
                    c.assign(LeaderEpoch(epoch), Offset(offset));
                }
                let es = c.entries();
                for w in es.windows(2) {
                    proptest::prop_assert!(w[0].epoch < w[1].epoch && w[0].start < w[1].start);
                }
            }
            let es = c.entries().to_vec();
            let log_end = Offset(es.last().map_or(0, |e| e.start.0 + 5));
            for (i, e) in es.iter().enumerate() {
                let end = es.get(i + 1).map_or(log_end, |n| n.start);
                proptest::prop_assert_eq!(c.end_offset_for(e.epoch, log_end), (e.epoch, end));
                proptest::prop_assert_eq!(c.epoch_at(e.start), Some(e.epoch));
            }
        }
    }

    #[test]
    fn assign_and_truncate() {
        let mut c = cache(&[(1, 0), (2, 5)]);
        assert!(!c.assign(LeaderEpoch(2), Offset(7)));
        assert!(!c.assign(LeaderEpoch(1), Offset(9)));
        // Epoch 2 held no records before epoch 3 took over at 5.
        assert!(c.assign(LeaderEpoch(3), Offset(5)));
        assert_eq!(c.entries().len(), 2);
        assert_eq!(c.epoch_at(Offset(4)), Some(LeaderEpoch(1)));
        assert_eq!(c.epoch_at(Offset(6)), Some(LeaderEpoch(3)));
        c.truncate_from_end(Offset(5));
        assert_eq!(c.latest_epoch(), Some(LeaderEpoch(1)));
        c.truncate_from_end(Offset(0));
        assert_eq!(c.latest(), None);
    }
}
