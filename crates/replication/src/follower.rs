//! A follower replica: fetches from the leader, appends what it gets,
//! learns the high watermark, and truncates where its log diverges from the
//! leader's.

use model::{LeaderEpoch, NodeId, Offset};

use crate::EpochCache;

/// A fetch from a follower to the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// The fetching replica.
    pub replica: NodeId,
    /// The leader epoch the follower believes current.
    pub leader_epoch: LeaderEpoch,
    /// Identifies the fetch, so stale or duplicate answers are ignored.
    pub fetch_id: u64,
    /// The follower's log end: the first offset it wants.
    pub fetch_offset: Offset,
    /// The epoch of the follower's last record (`None` for an empty log).
    pub last_fetched_epoch: Option<LeaderEpoch>,
}

/// One fetched batch, as the follower's state needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSpan {
    /// Its first offset.
    pub base: Offset,
    /// The offset after its last.
    pub next: Offset,
    /// The leader epoch it was written in.
    pub epoch: LeaderEpoch,
}

/// What the follower's caller must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowerEffect {
    /// Append the fetched batches: the log, ending at `from`, then ends at
    /// `to`.
    Append {
        /// The log end before.
        from: Offset,
        /// The log end after.
        to: Offset,
    },
    /// Drop every record at or after `to`.
    Truncate {
        /// The new log end.
        to: Offset,
    },
    /// Drop every record and start the log afresh at `offset`.
    StartAt {
        /// The new log start and end.
        offset: Offset,
    },
}

/// A follower's state for one partition.
#[derive(Debug, Clone)]
pub struct FollowerReplica {
    id: NodeId,
    leader: Option<NodeId>,
    leader_epoch: LeaderEpoch,
    log_end: Offset,
    hw: Offset,
    cache: EpochCache,
    in_flight: Option<(u64, u64)>,
    next_fetch_id: u64,
    fetch_timeout_ms: u64,
}

impl FollowerReplica {
    /// A follower over a log that ends at `log_end` with epochs `cache`. Its
    /// high watermark is `hw` (0 after a restart: it learns it again).
    /// Fetch ids start at `first_fetch_id`.
    pub fn new(
        id: NodeId,
        log_end: Offset,
        hw: Offset,
        cache: EpochCache,
        fetch_timeout_ms: u64,
        first_fetch_id: u64,
    ) -> Self {
        let mut cache = cache;
        // Epochs starting at the log end hold no record.
        cache.truncate_from_end(log_end);
        FollowerReplica {
            id,
            leader: None,
            leader_epoch: LeaderEpoch::UNKNOWN,
            log_end,
            hw: hw.min(log_end),
            cache,
            in_flight: None,
            next_fetch_id: first_fetch_id,
            fetch_timeout_ms,
        }
    }

    /// A new leader (or none) for `epoch`; older epochs are ignored.
    pub fn on_leader_change(&mut self, leader: Option<NodeId>, epoch: LeaderEpoch) {
        if epoch > self.leader_epoch {
            self.leader = leader;
            self.leader_epoch = epoch;
            self.in_flight = None;
        }
    }

    /// The fetch to send now, if any: one at a time, resent after the fetch
    /// timeout. Returns the leader to send it to.
    pub fn poll_fetch(&mut self, now: u64) -> Option<(NodeId, FetchRequest)> {
        let leader = self.leader?;
        if let Some((_, sent)) = self.in_flight {
            if now.saturating_sub(sent) < self.fetch_timeout_ms {
                return None;
            }
        }
        let fetch_id = self.next_fetch_id;
        self.next_fetch_id += 1;
        self.in_flight = Some((fetch_id, now));
        Some((
            leader,
            FetchRequest {
                replica: self.id,
                leader_epoch: self.leader_epoch,
                fetch_id,
                fetch_offset: self.log_end,
                last_fetched_epoch: self.cache.latest_epoch(),
            },
        ))
    }

    fn take_answer(&mut self, fetch_id: u64, leader_epoch: LeaderEpoch) -> bool {
        match self.in_flight {
            Some((id, _)) if id == fetch_id && leader_epoch == self.leader_epoch => {
                self.in_flight = None;
                true
            }
            _ => false,
        }
    }

    /// Batches from the leader, oldest first (offsets grow; the first may
    /// start past the log end where the leader's log is compacted), and
    /// the leader's high watermark. Answers to other fetches, and batches
    /// that do not continue the log, are ignored.
    pub fn on_fetch_batches(
        &mut self,
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        batches: &[BatchSpan],
        leader_hw: Offset,
    ) -> Vec<FollowerEffect> {
        if !self.take_answer(fetch_id, leader_epoch) {
            return Vec::new();
        }
        let (Some(first), Some(last)) = (batches.first(), batches.last()) else {
            self.hw = leader_hw.min(self.log_end);
            return Vec::new();
        };
        if first.base < self.log_end {
            return Vec::new();
        }
        for b in batches {
            self.cache.assign(b.epoch, b.base);
        }
        let from = self.log_end;
        self.log_end = last.next;
        self.hw = leader_hw.min(self.log_end);
        vec![FollowerEffect::Append {
            from,
            to: self.log_end,
        }]
    }

    /// The leader found the follower's last epoch not on its log: its log
    /// has `epoch` ending at `end_offset`. The follower truncates to the
    /// smaller of that and its own end of that epoch (Kafka's rule); the
    /// next fetch checks the new end again.
    pub fn on_fetch_diverging(
        &mut self,
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
        end_offset: Offset,
    ) -> Vec<FollowerEffect> {
        if !self.take_answer(fetch_id, leader_epoch) {
            return Vec::new();
        }
        let own_end = self
            .cache
            .end_offset_for(epoch, self.log_end)
            .map_or(self.log_end, |(_, end)| end);
        let to = end_offset.min(own_end).min(self.log_end).max(Offset(0));
        // Also drops epochs that hold no record (a leader's epoch that never
        // appended): the next fetch's last epoch must be a record's epoch.
        self.cache.truncate_from_end(to);
        if to == self.log_end {
            return Vec::new();
        }
        self.log_end = to;
        self.hw = self.hw.min(to);
        vec![FollowerEffect::Truncate { to }]
    }

    /// The leader no longer has the follower's fetch offset: its log now
    /// starts at `leader_log_start` (retention or DeleteRecords removed
    /// what the follower still needs). A follower whose log ends before
    /// that empties its log and starts there (Kafka's
    /// `truncateFullyAndStartAt`); its high watermark and epochs go with
    /// it.
    pub fn on_fetch_out_of_range(
        &mut self,
        fetch_id: u64,
        leader_epoch: LeaderEpoch,
        leader_log_start: Offset,
    ) -> Vec<FollowerEffect> {
        if !self.take_answer(fetch_id, leader_epoch) || self.log_end >= leader_log_start {
            return Vec::new();
        }
        self.log_end = leader_log_start;
        self.hw = leader_log_start;
        self.cache = EpochCache::new();
        vec![FollowerEffect::StartAt {
            offset: leader_log_start,
        }]
    }

    /// The leader refused the fetch (or it was lost): fetch again.
    pub fn on_fetch_error(&mut self, fetch_id: u64) {
        if matches!(self.in_flight, Some((id, _)) if id == fetch_id) {
            self.in_flight = None;
        }
    }

    /// The end of what readers may see: never beyond the learned high
    /// watermark.
    pub fn readable_end(&self) -> Offset {
        self.hw.min(self.log_end)
    }

    /// The high watermark learned from the leader.
    pub fn high_watermark(&self) -> Offset {
        self.hw
    }

    /// The log end.
    pub fn log_end(&self) -> Offset {
        self.log_end
    }

    /// The leader epoch the follower follows.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    /// The leader it fetches from.
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }

    /// The epoch cache.
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(i: i32) -> LeaderEpoch {
        LeaderEpoch(i)
    }

    fn span(base: i64, next: i64, epoch: i32) -> BatchSpan {
        BatchSpan {
            base: Offset(base),
            next: Offset(next),
            epoch: e(epoch),
        }
    }

    #[test]
    fn fetches_appends_and_never_exposes_past_the_hw() {
        let mut f =
            FollowerReplica::new(NodeId(2), Offset(0), Offset(0), EpochCache::new(), 100, 0);
        assert!(f.poll_fetch(0).is_none());
        f.on_leader_change(Some(NodeId(1)), e(1));
        let (to, req) = f.poll_fetch(0).unwrap();
        assert_eq!(
            (to, req.fetch_offset, req.last_fetched_epoch),
            (NodeId(1), Offset(0), None)
        );
        assert!(f.poll_fetch(50).is_none(), "one fetch in flight");
        let fx = f.on_fetch_batches(
            req.fetch_id,
            e(1),
            &[span(0, 2, 1), span(2, 3, 1)],
            Offset(2),
        );
        assert_eq!(
            fx,
            vec![FollowerEffect::Append {
                from: Offset(0),
                to: Offset(3)
            }]
        );
        assert_eq!((f.log_end(), f.readable_end()), (Offset(3), Offset(2)));
        // A duplicate answer is ignored.
        assert!(f
            .on_fetch_batches(req.fetch_id, e(1), &[span(0, 1, 1)], Offset(3))
            .is_empty());
        let (_, req) = f.poll_fetch(60).unwrap();
        assert_eq!(req.last_fetched_epoch, Some(e(1)));
    }

    #[test]
    fn diverging_epoch_truncates() {
        // Follower: epoch 1 at 0..5, epoch 2 at 5..8 (never committed).
        let mut cache = EpochCache::new();
        cache.assign(e(1), Offset(0));
        cache.assign(e(2), Offset(5));
        let mut f = FollowerReplica::new(NodeId(2), Offset(8), Offset(4), cache, 100, 0);
        f.on_leader_change(Some(NodeId(3)), e(3));
        let (_, req) = f.poll_fetch(0).unwrap();
        // The leader (epoch 3 from 6) never saw epoch 2: epoch 1 ends at 6.
        let fx = f.on_fetch_diverging(req.fetch_id, e(3), e(1), Offset(6));
        assert_eq!(fx, vec![FollowerEffect::Truncate { to: Offset(5) }]);
        assert_eq!(f.epoch_cache().latest_epoch(), Some(e(1)));
        assert_eq!(f.readable_end(), Offset(4));
        let (_, req) = f.poll_fetch(1).unwrap();
        assert_eq!(
            (req.fetch_offset, req.last_fetched_epoch),
            (Offset(5), Some(e(1)))
        );
    }
}

#[cfg(test)]
mod out_of_range_tests {
    use super::*;

    #[test]
    fn a_follower_behind_the_leaders_log_start_starts_there() {
        let mut cache = EpochCache::new();
        cache.assign(LeaderEpoch(1), Offset(0));
        let mut f = FollowerReplica::new(NodeId(2), Offset(10), Offset(8), cache, 100, 0);
        f.on_leader_change(Some(NodeId(1)), LeaderEpoch(2));
        let (_, req) = f.poll_fetch(0).unwrap();
        // An answer to another fetch changes nothing.
        assert!(f
            .on_fetch_out_of_range(req.fetch_id + 1, LeaderEpoch(2), Offset(50))
            .is_empty());
        let fx = f.on_fetch_out_of_range(req.fetch_id, LeaderEpoch(2), Offset(50));
        assert_eq!(fx, vec![FollowerEffect::StartAt { offset: Offset(50) }]);
        assert_eq!((f.log_end(), f.readable_end()), (Offset(50), Offset(50)));
        assert_eq!(f.epoch_cache().latest_epoch(), None);
        let (_, req) = f.poll_fetch(1).unwrap();
        assert_eq!(
            (req.fetch_offset, req.last_fetched_epoch),
            (Offset(50), None)
        );
        // One already past the leader's start keeps its log.
        assert!(f
            .on_fetch_out_of_range(req.fetch_id, LeaderEpoch(2), Offset(20))
            .is_empty());
    }
}

#[cfg(test)]
mod empty_epoch_tests {
    use super::*;

    #[test]
    fn an_epoch_without_records_is_not_the_last_fetched_epoch() {
        // A former leader of epoch 2 that never appended in it.
        let mut cache = EpochCache::new();
        cache.assign(LeaderEpoch(0), Offset(0));
        cache.assign(LeaderEpoch(2), Offset(89));
        let mut f = FollowerReplica::new(NodeId(1), Offset(89), Offset(0), cache.clone(), 100, 0);
        f.on_leader_change(Some(NodeId(3)), LeaderEpoch(5));
        let (_, req) = f.poll_fetch(0).unwrap();
        assert_eq!(req.last_fetched_epoch, Some(LeaderEpoch(0)));
        // And a diverging answer that keeps the log end still drops it.
        let mut f =
            FollowerReplica::new(NodeId(1), Offset(89), Offset(0), EpochCache::new(), 100, 0);
        f.cache = cache;
        f.on_leader_change(Some(NodeId(3)), LeaderEpoch(5));
        let (_, req) = f.poll_fetch(0).unwrap();
        assert!(f
            .on_fetch_diverging(req.fetch_id, LeaderEpoch(5), LeaderEpoch(0), Offset(89))
            .is_empty());
        assert_eq!(f.epoch_cache().latest_epoch(), Some(LeaderEpoch(0)));
    }
}
