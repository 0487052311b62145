//! The partition leader: appends, answers follower fetches, keeps the ISR
//! and advances the high watermark.
//!
//! ISR changes go to the controller as AlterPartition, at most one in
//! flight. Until one is committed the leader keeps using its committed ISR
//! for `min.insync.replicas`, and the *maximal* ISR (committed plus pending
//! additions) for the high watermark (KIP-497/841): a pending addition can
//! only hold the high watermark back, never push it forward, and a pending
//! removal does not take effect before the controller commits it.

use std::collections::{BTreeMap, BTreeSet};

use model::{LeaderEpoch, NodeId, Offset};

use crate::controller::{AlterPartitionRequest, PartitionState};
use crate::{EpochCache, FetchRequest, PartitionEpoch, ReplicationError};

/// The leader's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderConfig {
    /// `min.insync.replicas` for acks=all appends.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long
    /// leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// How long an unanswered AlterPartition waits before being resent.
    pub alter_partition_retry_ms: u64,
    /// The most records one fetch answer carries.
    pub max_fetch_records: u64,
}

/// A producer's acknowledgement mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=1: answered once the leader has appended.
    Leader,
    /// acks=all: answered once the high watermark passes the records.
    All,
}

/// An accepted append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The first record's offset.
    pub first: Offset,
    /// The last record's offset.
    pub last: Offset,
    /// Whether the producer may be answered now (acks=1); acks=all appends
    /// are answered by a later [`LeaderEffect::HighWatermark`].
    pub answered: bool,
    /// Effects of the append.
    pub effects: Vec<LeaderEffect>,
}

/// What the leader's caller must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderEffect {
    /// The high watermark advanced; answer the acks=all appends listed.
    HighWatermark {
        /// The new high watermark.
        hw: Offset,
        /// Requests now committed, answered with success.
        acked: Vec<u64>,
        /// Requests committed while the ISR was below
        /// `min.insync.replicas`: answered with
        /// [`ReplicationError::NotEnoughReplicasAfterAppend`].
        failed: Vec<u64>,
    },
    /// Send this AlterPartition to the controller.
    AlterPartition {
        /// Identifies the request; pass it back with the answer.
        id: u64,
        /// The request.
        request: AlterPartitionRequest,
    },
}

/// The answer to a follower's fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAnswer {
    /// Send `count` records from `from` and the high watermark.
    Records {
        /// The first offset.
        from: Offset,
        /// How many records.
        count: u64,
        /// The leader's high watermark.
        hw: Offset,
    },
    /// The follower's last fetched epoch is not on the leader's log: the
    /// largest leader epoch not above it ends at `end_offset`.
    Diverging {
        /// The leader's epoch.
        epoch: LeaderEpoch,
        /// Where it ends on the leader.
        end_offset: Offset,
        /// The leader's high watermark.
        hw: Offset,
    },
}

#[derive(Debug, Clone, Copy)]
struct Progress {
    log_end: Offset,
    last_caught_up_ms: u64,
    last_fetch_ms: u64,
    last_fetch_leader_end: Offset,
}

#[derive(Debug, Clone)]
struct Pending {
    id: u64,
    isr: BTreeSet<NodeId>,
    request: AlterPartitionRequest,
    sent_ms: u64,
    /// Refused as stale: not resent, waiting for a metadata update.
    refused: bool,
}

/// The leader's state for one partition.
#[derive(Debug, Clone)]
pub struct LeaderReplica {
    id: NodeId,
    config: LeaderConfig,
    leader_epoch: LeaderEpoch,
    partition_epoch: PartitionEpoch,
    replicas: Vec<NodeId>,
    isr: BTreeSet<NodeId>,
    pending: Option<Pending>,
    next_alter_id: u64,
    followers: BTreeMap<NodeId, Progress>,
    log_end: Offset,
    hw: Offset,
    epoch_start: Offset,
    cache: EpochCache,
    waiters: BTreeMap<Offset, Vec<u64>>,
    fenced: bool,
}

impl LeaderReplica {
    /// Becomes leader of `state` (which must name `id` as leader) over a
    /// log ending at `log_end` with epochs `cache` and high watermark `hw`.
    /// The new epoch starts at `log_end`.
    pub fn new(
        id: NodeId,
        config: LeaderConfig,
        state: &PartitionState,
        log_end: Offset,
        hw: Offset,
        mut cache: EpochCache,
        now: u64,
    ) -> Result<Self, ReplicationError> {
        if state.leader != Some(id) {
            return Err(ReplicationError::NotLeader);
        }
        cache.assign(state.leader_epoch, log_end);
        let isr: BTreeSet<NodeId> = state.isr.iter().copied().collect();
        let followers = state
            .replicas
            .iter()
            .filter(|r| **r != id)
            .map(|r| {
                let t = if isr.contains(r) { now } else { 0 };
                let p = Progress {
                    log_end: Offset(0),
                    last_caught_up_ms: t,
                    last_fetch_ms: t,
                    last_fetch_leader_end: Offset(i64::MAX),
                };
                (*r, p)
            })
            .collect();
        Ok(LeaderReplica {
            id,
            config,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            replicas: state.replicas.clone(),
            isr,
            pending: None,
            next_alter_id: 0,
            followers,
            log_end,
            hw: hw.min(log_end),
            epoch_start: log_end,
            cache,
            waiters: BTreeMap::new(),
            fenced: false,
        })
    }

    /// Appends `n` records in the current epoch. acks=all is refused while
    /// the committed ISR is below `min.insync.replicas`; `request` is
    /// echoed back when the append is committed.
    pub fn append(
        &mut self,
        n: u64,
        acks: Acks,
        request: u64,
        now: u64,
    ) -> Result<Appended, ReplicationError> {
        let _ = now;
        if self.fenced {
            return Err(ReplicationError::NotLeader);
        }
        if n == 0 {
            return Err(ReplicationError::InvalidRequest("an append needs records"));
        }
        if acks == Acks::All && self.isr.len() < self.config.min_insync_replicas {
            return Err(ReplicationError::NotEnoughReplicas {
                isr: self.isr.len(),
                min: self.config.min_insync_replicas,
            });
        }
        let first = self.log_end;
        let last = first.plus(n as i64 - 1);
        self.log_end = last.plus(1);
        if acks == Acks::All {
            self.waiters.entry(last).or_default().push(request);
        }
        let effects = self.maybe_advance_hw().into_iter().collect();
        Ok(Appended {
            first,
            last,
            answered: acks == Acks::Leader,
            effects,
        })
    }

    /// A follower's fetch: checks its epoch and its last fetched epoch,
    /// records its progress (maybe advancing the high watermark or
    /// proposing to add it to the ISR) and says what to send back.
    pub fn fetch_from_follower(
        &mut self,
        req: &FetchRequest,
        now: u64,
    ) -> Result<(FetchAnswer, Vec<LeaderEffect>), ReplicationError> {
        if req.leader_epoch < self.leader_epoch {
            return Err(ReplicationError::FencedLeaderEpoch {
                request: req.leader_epoch,
                current: self.leader_epoch,
            });
        }
        if req.leader_epoch > self.leader_epoch {
            return Err(ReplicationError::UnknownLeaderEpoch {
                request: req.leader_epoch,
                current: self.leader_epoch,
            });
        }
        if !self.followers.contains_key(&req.replica) {
            return Err(ReplicationError::UnknownReplica(req.replica));
        }
        if let Some(diverging) = self.diverging(req) {
            return Ok((diverging, Vec::new()));
        }
        let log_end = self.log_end;
        let p = self.followers.get_mut(&req.replica).expect("checked");
        if req.fetch_offset >= log_end {
            p.last_caught_up_ms = p.last_caught_up_ms.max(now);
        } else if req.fetch_offset >= p.last_fetch_leader_end {
            p.last_caught_up_ms = p.last_caught_up_ms.max(p.last_fetch_ms);
        }
        p.last_fetch_leader_end = log_end;
        p.last_fetch_ms = now;
        p.log_end = req.fetch_offset;
        let mut effects: Vec<LeaderEffect> = self.maybe_advance_hw().into_iter().collect();
        effects.extend(self.maybe_expand(req.replica, req.fetch_offset, now));
        let count = (log_end.0 - req.fetch_offset.0).min(self.config.max_fetch_records as i64);
        Ok((
            FetchAnswer::Records {
                from: req.fetch_offset,
                count: count.max(0) as u64,
                hw: self.hw,
            },
            effects,
        ))
    }

    fn diverging(&self, req: &FetchRequest) -> Option<FetchAnswer> {
        let (epoch, end_offset) = match req.last_fetched_epoch {
            // No record to check: an empty log, perhaps one started afresh
            // at the leader's log start (every record a leader writes has
            // an epoch, so a log with records has one to send).
            None => return None,
            Some(last) => match self.cache.end_offset_for(last, self.log_end) {
                // The follower claims an epoch newer than any here.
                None => (self.leader_epoch, self.log_end),
                Some((epoch, end)) if epoch != last || end < req.fetch_offset => (epoch, end),
                Some(_) => return None,
            },
        };
        Some(FetchAnswer::Diverging {
            epoch,
            end_offset,
            hw: self.hw,
        })
    }

    /// Time passes: followers not caught up for `replica.lag.time.max.ms`
    /// are proposed for removal from the ISR; an unanswered AlterPartition
    /// is resent.
    pub fn tick(&mut self, now: u64) -> Vec<LeaderEffect> {
        if self.fenced {
            return Vec::new();
        }
        if let Some(p) = &mut self.pending {
            if !p.refused && now.saturating_sub(p.sent_ms) >= self.config.alter_partition_retry_ms {
                p.sent_ms = now;
                return vec![LeaderEffect::AlterPartition {
                    id: p.id,
                    request: p.request.clone(),
                }];
            }
            return Vec::new();
        }
        let out = self.shrink_candidates(now);
        if out.is_empty() {
            return Vec::new();
        }
        let isr: BTreeSet<NodeId> = self.isr.difference(&out).copied().collect();
        self.propose(isr, now).into_iter().collect()
    }

    /// ISR members (other than the leader) behind the log end and not
    /// caught up for longer than `replica.lag.time.max.ms`.
    pub fn shrink_candidates(&self, now: u64) -> BTreeSet<NodeId> {
        self.isr
            .iter()
            .filter(|r| **r != self.id)
            .filter(|r| {
                let p = &self.followers[*r];
                p.log_end < self.log_end
                    && now.saturating_sub(p.last_caught_up_ms) > self.config.replica_lag_time_max_ms
            })
            .copied()
            .collect()
    }

    fn maybe_expand(
        &mut self,
        replica: NodeId,
        fetch_offset: Offset,
        now: u64,
    ) -> Option<LeaderEffect> {
        if self.fenced
            || self.pending.is_some()
            || self.isr.contains(&replica)
            || fetch_offset < self.hw
            || fetch_offset < self.epoch_start
        {
            return None;
        }
        let mut isr = self.isr.clone();
        isr.insert(replica);
        self.propose(isr, now)
    }

    fn propose(&mut self, isr: BTreeSet<NodeId>, now: u64) -> Option<LeaderEffect> {
        if isr == self.isr {
            return None;
        }
        let id = self.next_alter_id;
        self.next_alter_id += 1;
        let request = AlterPartitionRequest {
            broker: self.id,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr: self
                .replicas
                .iter()
                .copied()
                .filter(|r| isr.contains(r))
                .collect(),
        };
        self.pending = Some(Pending {
            id,
            isr,
            request: request.clone(),
            sent_ms: now,
            refused: false,
        });
        Some(LeaderEffect::AlterPartition { id, request })
    }

    /// The controller's answer to AlterPartition `id`: on acceptance the
    /// new ISR and partition epoch are adopted; a fenced leader epoch fences
    /// this leader (it stops taking appends); a stale partition epoch keeps
    /// the request pending (unsent) until [`Self::on_partition_update`]
    /// brings the controller's record; other refusals drop the request.
    pub fn on_alter_partition_response(
        &mut self,
        id: u64,
        result: Result<&PartitionState, ReplicationError>,
        now: u64,
    ) -> Vec<LeaderEffect> {
        let _ = now;
        let Some(pending) = self.pending.as_mut().filter(|p| p.id == id && !p.refused) else {
            return Vec::new();
        };
        // An answer to another request (say, one sent by an earlier
        // leadership of this broker under the same id) changes nothing.
        let ours = match &result {
            Ok(state) => state.leader_epoch == self.leader_epoch,
            Err(ReplicationError::FencedLeaderEpoch { request, .. })
            | Err(ReplicationError::UnknownLeaderEpoch { request, .. }) => {
                *request == self.leader_epoch
            }
            Err(ReplicationError::InvalidUpdateVersion { request, .. }) => {
                *request == pending.request.partition_epoch
            }
            Err(_) => true,
        };
        if !ours {
            return Vec::new();
        }
        match result {
            Ok(state) => {
                self.pending = None;
                self.adopt(state)
            }
            // The controller's record moved on: perhaps this very request was
            // accepted and its answer lost. Until the metadata update brings
            // the record, the pending additions may be in the ISR, so they
            // keep counting for the high watermark (Kafka keeps the maximal
            // ISR until then too). A newer leader epoch also fences this
            // leader.
            Err(ReplicationError::FencedLeaderEpoch { .. }) | Err(ReplicationError::NotLeader) => {
                pending.refused = true;
                self.fenced = true;
                Vec::new()
            }
            Err(ReplicationError::InvalidUpdateVersion { .. })
            | Err(ReplicationError::UnknownLeaderEpoch { .. }) => {
                pending.refused = true;
                Vec::new()
            }
            // Refused on its merits (say, an ineligible replica): nothing changed.
            Err(_) => {
                self.pending = None;
                Vec::new()
            }
        }
    }

    /// A metadata update from the controller for this leader epoch: a newer
    /// partition epoch brings the ISR the controller holds (for example
    /// after it fenced a follower).
    pub fn on_partition_update(&mut self, state: &PartitionState, now: u64) -> Vec<LeaderEffect> {
        let _ = now;
        if state.leader_epoch != self.leader_epoch || state.leader != Some(self.id) {
            return Vec::new();
        }
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.request.partition_epoch < state.partition_epoch)
        {
            self.pending = None;
        }
        self.adopt(state)
    }

    fn adopt(&mut self, state: &PartitionState) -> Vec<LeaderEffect> {
        if state.leader_epoch != self.leader_epoch || state.partition_epoch <= self.partition_epoch
        {
            return Vec::new();
        }
        self.partition_epoch = state.partition_epoch;
        self.isr = state.isr.iter().copied().collect();
        self.maybe_advance_hw().into_iter().collect()
    }

    /// The committed ISR plus pending additions.
    pub fn maximal_isr(&self) -> BTreeSet<NodeId> {
        let mut m = self.isr.clone();
        if let Some(p) = &self.pending {
            m.extend(p.isr.iter().copied());
        }
        m
    }

    fn maybe_advance_hw(&mut self) -> Option<LeaderEffect> {
        // The maximal ISR, walked without building it (this runs on every
        // append and fetch); a member in both sets counts once or twice
        // alike for a minimum.
        let pending = self.pending.iter().flat_map(|p| p.isr.iter());
        let candidate = self
            .isr
            .iter()
            .chain(pending)
            .map(|r| {
                if *r == self.id {
                    self.log_end
                } else {
                    self.followers.get(r).map_or(Offset(0), |p| p.log_end)
                }
            })
            .min()
            .unwrap_or(self.log_end);
        // As Kafka's ISR replication (unlike Raft), records of an earlier
        // epoch commit once the ISR has them: a new leader comes only from
        // the ISR, so every future leader holds them; a quiet partition
        // after a failover exposes what the old leader acknowledged.
        if candidate <= self.hw {
            return None;
        }
        self.hw = candidate;
        let later = self.waiters.split_off(&candidate);
        let done = std::mem::replace(&mut self.waiters, later);
        let ids: Vec<u64> = done.into_values().flatten().collect();
        let (acked, failed) = if self.isr.len() >= self.config.min_insync_replicas {
            (ids, Vec::new())
        } else {
            (Vec::new(), ids)
        };
        Some(LeaderEffect::HighWatermark {
            hw: candidate,
            acked,
            failed,
        })
    }

    /// Gives up leadership: the acks=all requests still waiting, to be
    /// answered with [`ReplicationError::NotLeader`].
    pub fn resign(self) -> Vec<u64> {
        self.waiters.into_values().flatten().collect()
    }

    /// The settings it leads with.
    pub fn config(&self) -> &LeaderConfig {
        &self.config
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> Offset {
        self.hw
    }

    /// The log end.
    pub fn log_end(&self) -> Offset {
        self.log_end
    }

    /// The committed ISR.
    pub fn isr(&self) -> &BTreeSet<NodeId> {
        &self.isr
    }

    /// The leader epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    /// The partition epoch of the leader's view.
    pub fn partition_epoch(&self) -> PartitionEpoch {
        self.partition_epoch
    }

    /// The epoch cache (the current epoch included).
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.cache
    }

    /// Whether the controller has fenced this leader's epoch.
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: LeaderConfig = LeaderConfig {
        min_insync_replicas: 2,
        replica_lag_time_max_ms: 100,
        alter_partition_retry_ms: 50,
        max_fetch_records: 100,
    };

    fn n(i: i32) -> NodeId {
        NodeId(i)
    }

    fn leader() -> LeaderReplica {
        let state = PartitionState::new(vec![n(1), n(2), n(3)]);
        LeaderReplica::new(
            n(1),
            CONFIG,
            &state,
            Offset(0),
            Offset(0),
            EpochCache::new(),
            0,
        )
        .unwrap()
    }

    fn fetch(
        l: &mut LeaderReplica,
        r: i32,
        offset: i64,
        now: u64,
    ) -> (FetchAnswer, Vec<LeaderEffect>) {
        let req = FetchRequest {
            replica: n(r),
            leader_epoch: l.leader_epoch(),
            fetch_id: 0,
            fetch_offset: Offset(offset),
            last_fetched_epoch: (offset > 0).then_some(l.leader_epoch()),
        };
        l.fetch_from_follower(&req, now).unwrap()
    }

    fn alter(effects: &[LeaderEffect]) -> (u64, AlterPartitionRequest) {
        effects
            .iter()
            .find_map(|e| match e {
                LeaderEffect::AlterPartition { id, request } => Some((*id, request.clone())),
                _ => None,
            })
            .expect("an AlterPartition")
    }

    #[test]
    fn acks_all_is_answered_once_the_isr_has_it() {
        let mut l = leader();
        let a = l.append(3, Acks::All, 7, 0).unwrap();
        assert_eq!((a.first, a.last, a.answered), (Offset(0), Offset(2), false));
        let (ans, fx) = fetch(&mut l, 2, 0, 1);
        assert_eq!(
            ans,
            FetchAnswer::Records {
                from: Offset(0),
                count: 3,
                hw: Offset(0)
            }
        );
        assert!(fx.is_empty());
        fetch(&mut l, 2, 3, 2);
        let (_, fx) = fetch(&mut l, 3, 3, 3);
        assert_eq!(
            fx,
            vec![LeaderEffect::HighWatermark {
                hw: Offset(3),
                acked: vec![7],
                failed: vec![]
            }]
        );
        assert!(l.append(1, Acks::Leader, 8, 4).unwrap().answered);
    }

    #[test]
    fn isr_shrinks_after_lag_then_refuses_acks_all_then_expands() {
        let mut l = leader();
        l.append(2, Acks::All, 1, 0).unwrap();
        fetch(&mut l, 2, 2, 10);
        assert!(l.tick(50).is_empty());
        assert_eq!(l.shrink_candidates(150), [n(3)].into_iter().collect());
        let fx = l.tick(150);
        let (id, req) = alter(&fx);
        assert_eq!(req.new_isr, vec![n(1), n(2)]);
        // The removal is not effective before it is committed.
        assert_eq!(l.isr().len(), 3);
        assert_eq!(l.high_watermark(), Offset(0));
        let mut state = PartitionState::new(vec![n(1), n(2), n(3)]);
        state.isr = vec![n(1), n(2)];
        state.partition_epoch = PartitionEpoch(1);
        let fx = l.on_alter_partition_response(id, Ok(&state), 151);
        assert!(matches!(
            &fx[..],
            [LeaderEffect::HighWatermark { hw: Offset(2), .. }]
        ));
        // Broker 2 falls behind too; once it leaves, acks=all is refused.
        l.append(1, Acks::All, 2, 160).unwrap();
        let (id, _) = alter(&l.tick(400));
        state.isr = vec![n(1)];
        state.partition_epoch = PartitionEpoch(2);
        l.on_alter_partition_response(id, Ok(&state), 401);
        assert_eq!(
            l.append(1, Acks::All, 3, 402),
            Err(ReplicationError::NotEnoughReplicas { isr: 1, min: 2 })
        );
        // Broker 3 catches up: proposed for the ISR, counted for the HW
        // (holding it back) but not for min.insync.replicas before commit.
        let (_, fx) = fetch(&mut l, 3, 3, 410);
        let (id, req) = alter(&fx);
        assert_eq!(req.new_isr, vec![n(1), n(3)]);
        assert!(l.append(1, Acks::All, 4, 411).is_err());
        state.isr = vec![n(1), n(3)];
        state.partition_epoch = PartitionEpoch(3);
        l.on_alter_partition_response(id, Ok(&state), 412);
        assert!(l.append(1, Acks::All, 5, 413).is_ok());
    }

    #[test]
    fn stale_alter_partition_answers() {
        let mut l = leader();
        l.append(1, Acks::Leader, 1, 0).unwrap();
        let (id, _) = alter(&l.tick(500));
        // Resent until answered.
        assert_eq!(alter(&l.tick(560)).0, id);
        l.on_alter_partition_response(
            id,
            Err(ReplicationError::InvalidUpdateVersion {
                request: PartitionEpoch(0),
                current: PartitionEpoch(1),
            }),
            561,
        );
        assert!(!l.is_fenced());
        // Not resent: it waits for the controller's newer record.
        assert!(l.tick(800).is_empty());
        let mut state = PartitionState::new(vec![n(1), n(2), n(3)]);
        state.partition_epoch = PartitionEpoch(1);
        l.on_partition_update(&state, 801);
        assert_eq!(l.partition_epoch(), PartitionEpoch(1));
        let (id, req) = alter(&l.tick(802));
        assert_eq!(req.partition_epoch, PartitionEpoch(1));
        l.on_alter_partition_response(
            id,
            Err(ReplicationError::FencedLeaderEpoch {
                request: LeaderEpoch(0),
                current: LeaderEpoch(1),
            }),
            803,
        );
        assert!(l.is_fenced());
        assert_eq!(
            l.append(1, Acks::Leader, 2, 602),
            Err(ReplicationError::NotLeader)
        );
    }

    #[test]
    fn diverging_epoch_and_earlier_epochs_commit() {
        // Old log: epoch 0 at 0..4, epoch 2 from 4; the leader of epoch 3
        // has only 0..5 (epoch 0 then epoch 2 at 4).
        let mut cache = EpochCache::new();
        cache.assign(LeaderEpoch(0), Offset(0));
        cache.assign(LeaderEpoch(2), Offset(4));
        let mut state = PartitionState::new(vec![n(1), n(2), n(3)]);
        state.leader_epoch = LeaderEpoch(3);
        let mut l =
            LeaderReplica::new(n(1), CONFIG, &state, Offset(5), Offset(3), cache, 0).unwrap();
        let req = FetchRequest {
            replica: n(2),
            leader_epoch: LeaderEpoch(3),
            fetch_id: 1,
            fetch_offset: Offset(7),
            last_fetched_epoch: Some(LeaderEpoch(1)),
        };
        let (ans, _) = l.fetch_from_follower(&req, 1).unwrap();
        assert_eq!(
            ans,
            FetchAnswer::Diverging {
                epoch: LeaderEpoch(0),
                end_offset: Offset(4),
                hw: Offset(3)
            }
        );
        // Followers at the log end commit the epoch-2 records without any
        // write of epoch 3 (a quiet partition after a failover).
        for r in [2, 3] {
            let req = FetchRequest {
                replica: n(r),
                leader_epoch: LeaderEpoch(3),
                fetch_id: 2,
                fetch_offset: Offset(5),
                last_fetched_epoch: Some(LeaderEpoch(2)),
            };
            l.fetch_from_follower(&req, 2).unwrap();
        }
        assert_eq!(l.high_watermark(), Offset(5));
        l.append(1, Acks::All, 9, 3).unwrap();
        fetch(&mut l, 2, 6, 4);
        let (_, fx) = fetch(&mut l, 3, 6, 4);
        assert!(matches!(
            &fx[..],
            [LeaderEffect::HighWatermark { hw: Offset(6), .. }]
        ));
        // Stale and future epochs are refused.
        let mut old = req_for(2, LeaderEpoch(2));
        assert!(matches!(
            l.fetch_from_follower(&old, 5),
            Err(ReplicationError::FencedLeaderEpoch { .. })
        ));
        old.leader_epoch = LeaderEpoch(4);
        assert!(matches!(
            l.fetch_from_follower(&old, 5),
            Err(ReplicationError::UnknownLeaderEpoch { .. })
        ));
    }

    fn req_for(r: i32, epoch: LeaderEpoch) -> FetchRequest {
        FetchRequest {
            replica: n(r),
            leader_epoch: epoch,
            fetch_id: 0,
            fetch_offset: Offset(0),
            last_fetched_epoch: None,
        }
    }
}
