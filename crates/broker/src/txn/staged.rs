//! Offsets a group's coordinator keeps for a transaction that another
//! broker coordinates (TxnOffsetCommit in a cluster, as Kafka's group
//! coordinator keeps pending transactional offsets): one record per group
//! and producer in the group log, committed or dropped when the
//! transaction's coordinator writes the marker for the group's slot.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use super::TxnError;
use crate::group::store::{CommittedOffset, GroupLog, RecordKey};
use crate::{Broker, Error};

/// A producer's offsets for one group, staged in its open transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    /// The transaction's id.
    pub transactional_id: String,
    /// The producer epoch they were staged with.
    pub producer_epoch: i16,
    /// `(topic, partition, offset)`, the last per partition.
    pub offsets: Vec<(String, i32, CommittedOffset)>,
}

/// The staged offsets of the groups this broker coordinates.
#[derive(Debug)]
pub struct StagedOffsets {
    log: GroupLog,
    /// One change at a time, and none while the group log is compacted.
    writing: Mutex<()>,
    state: RwLock<HashMap<(String, i64), Staged>>,
    /// Checks with the transaction's coordinator that a group is in a
    /// producer's transaction, by (group, producer): a marker for the
    /// group's slot cancels them, so a yes the marker overtook stages
    /// nothing (the guard Partition keeps for batches, for offsets).
    checks: Mutex<HashMap<(String, i64), Check>>,
}

/// One check of [`StagedOffsets::checks`].
#[derive(Debug, Clone, Copy)]
struct Check {
    token: u64,
    epoch: i16,
    verified: bool,
}

fn key(group: &str, producer_id: i64) -> RecordKey {
    RecordKey::StagedTxnOffsets {
        group: group.to_string(),
        producer_id,
    }
}

impl StagedOffsets {
    /// The state the replayed records describe.
    pub(crate) fn restore(
        log: GroupLog,
        records: Vec<((String, i64), Option<Bytes>)>,
    ) -> StagedOffsets {
        let mut state = HashMap::new();
        for (k, v) in records {
            match v.map(|v| serde_json::from_slice::<Staged>(&v)) {
                Some(Ok(s)) => {
                    state.insert(k, s);
                }
                Some(Err(e)) => {
                    tracing::warn!(group = %k.0, producer_id = k.1, "skipping unreadable staged offsets: {e}")
                }
                None => {
                    state.remove(&k);
                }
            }
        }
        StagedOffsets {
            log,
            writing: Mutex::new(()),
            state: RwLock::new(state),
            checks: Mutex::new(HashMap::new()),
        }
    }

    /// A check of `group` in `producer_id`'s transaction starts.
    fn begin_check(&self, group: &str, producer_id: i64, epoch: i16, token: u64) {
        let check = Check {
            token,
            epoch,
            verified: false,
        };
        self.checks
            .lock()
            .insert((group.to_string(), producer_id), check);
    }

    /// A marker for `producer_id` ends its transaction in the groups
    /// `ended` picks: their checks in flight no longer count. The caller
    /// holds `writing`, so no staging is between its check and its write.
    fn cancel_checks(&self, producer_id: i64, ended: impl Fn(&str) -> bool) {
        self.checks
            .lock()
            .retain(|(g, p), _| *p != producer_id || !ended(g));
    }

    /// The coordinator answered: a yes counts if no marker (or later check)
    /// came in between; a no forgets the check.
    fn finish_check(&self, group: &str, producer_id: i64, token: u64, yes: bool) -> bool {
        let mut checks = self.checks.lock();
        let k = (group.to_string(), producer_id);
        match checks.get_mut(&k) {
            Some(c) if c.token == token && yes => {
                c.verified = true;
                true
            }
            Some(c) if c.token == token => {
                checks.remove(&k);
                false
            }
            _ => false,
        }
    }

    /// Runs `f` with every live record, holding off changes meanwhile.
    pub(crate) fn with_persisted<T>(
        &self,
        f: impl FnOnce(Vec<(RecordKey, Option<Vec<u8>>)>) -> T,
    ) -> T {
        let _writing = self.writing.lock();
        let live = self
            .state
            .read()
            .iter()
            .map(|((g, p), s)| (key(g, *p), serde_json::to_vec(s).ok()))
            .collect();
        f(live)
    }

    /// Adds `offsets` to what `producer_id` staged for `group` at `epoch`
    /// (a newer epoch replaces what an older one staged; an older one is
    /// fenced), persisted before it returns.
    fn stage(
        &self,
        id: &str,
        group: &str,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), Error> {
        let _writing = self.writing.lock();
        let k = (group.to_string(), producer_id);
        // Only with a check the coordinator said yes to and no marker
        // cancelled: else the transaction may have ended meanwhile, and
        // offsets staged now would wait for a marker that never comes.
        let checked = self.checks.lock().remove(&k);
        if !checked.is_some_and(|c| c.verified && c.epoch == epoch) {
            return Err(TxnError::CoordinatorNotAvailable(format!(
                "the transaction of {id:?} ended while its offsets for {group:?} were checked; retry"
            ))
            .into());
        }
        let mut next = match self.state.read().get(&k) {
            Some(s) if s.producer_epoch > epoch => {
                return Err(TxnError::ProducerFenced {
                    sent: epoch,
                    current: s.producer_epoch,
                }
                .into())
            }
            Some(s) if s.producer_epoch == epoch => s.clone(),
            _ => Staged {
                transactional_id: id.to_string(),
                producer_epoch: epoch,
                offsets: Vec::new(),
            },
        };
        let mut by_partition: BTreeMap<(String, i32), CommittedOffset> = next
            .offsets
            .drain(..)
            .map(|(t, p, o)| ((t, p), o))
            .collect();
        for (t, p, o) in offsets {
            by_partition.insert((t, p), o);
        }
        next.offsets = by_partition
            .into_iter()
            .map(|((t, p), o)| (t, p, o))
            .collect();
        let bytes = serde_json::to_vec(&next).map_err(|e| Error::InvalidRequest(e.to_string()))?;
        self.log.append(&[(key(group, producer_id), Some(bytes))])?;
        self.state.write().insert(k, next);
        Ok(())
    }

    /// The partitions with offsets staged for `group`.
    fn partitions_of(&self, group: &str) -> BTreeSet<(String, i32)> {
        self.state
            .read()
            .iter()
            .filter(|((g, _), _)| g == group)
            .flat_map(|(_, s)| s.offsets.iter().map(|(t, p, _)| (t.clone(), *p)))
            .collect()
    }
}

impl Broker {
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
        self.staged().stage(id, group, producer_id, epoch, offsets)
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
        let staged = self.staged();
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
        self.staged().partitions_of(group)
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
        let staged = self.staged();
        let of_slot = |g: &str| self.group_slot(g).is_ok_and(|s| s == slot);
        let ending: Vec<((String, i64), Staged)> = {
            let _writing = staged.writing.lock();
            // Checks in flight were about the transaction this ends.
            staged.cancel_checks(producer_id, of_slot);
            staged
                .state
                .read()
                .iter()
                .filter(|((g, p), s)| *p == producer_id && s.producer_epoch <= epoch && of_slot(g))
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect()
        };
        for (k, s) in ending {
            // Not under `writing`: the group coordinator's lock is taken
            // to commit, and its compaction takes `writing` under it.
            // Offsets of an older epoch are a transaction whose marker
            // never came here: never committed by a later one's.
            if commit && s.producer_epoch == epoch && !s.offsets.is_empty() {
                self.groups()
                    .commit_transactional_offsets(&k.0, s.offsets.clone())?;
            }
            let _writing = staged.writing.lock();
            if staged.state.read().get(&k) != Some(&s) {
                continue;
            }
            staged.log.append(&[(key(&k.0, k.1), None)])?;
            staged.state.write().remove(&k);
        }
        // On disk before it is answered, as a partition's marker: the
        // coordinator then records the transaction complete.
        Ok(staged.log.flush()?)
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
        assert!(s.checks.lock().is_empty());
    }
}
