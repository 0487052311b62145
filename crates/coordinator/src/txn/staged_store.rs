//! Offsets a group's coordinator keeps for a transaction that another
//! broker coordinates (TxnOffsetCommit in a cluster, as Kafka's group
//! coordinator keeps pending transactional offsets): one record per group
//! and producer in the group log, committed or dropped when the
//! transaction's coordinator writes the marker for the group's slot.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use super::state::TxnError;
use crate::error::CoordError;
use crate::group::store::{CommittedOffset, GroupLog, RecordKey};

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
    pub fn begin_check(&self, group: &str, producer_id: i64, epoch: i16, token: u64) {
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
    /// `ended` picks: their checks in flight no longer count.
    pub fn cancel_checks(&self, producer_id: i64, ended: impl Fn(&str) -> bool) {
        let _writing = self.writing.lock();
        self.cancel_checks_locked(producer_id, ended);
    }

    /// [`StagedOffsets::cancel_checks`] by a caller holding `writing`, so
    /// no staging is between its check and its write.
    fn cancel_checks_locked(&self, producer_id: i64, ended: impl Fn(&str) -> bool) {
        self.checks
            .lock()
            .retain(|(g, p), _| *p != producer_id || !ended(g));
    }

    /// The coordinator answered: a yes counts if no marker (or later check)
    /// came in between; a no forgets the check.
    pub fn finish_check(&self, group: &str, producer_id: i64, token: u64, yes: bool) -> bool {
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
    pub fn stage(
        &self,
        id: &str,
        group: &str,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<(String, i32, CommittedOffset)>,
    ) -> Result<(), CoordError> {
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
        let bytes =
            serde_json::to_vec(&next).map_err(|e| CoordError::InvalidRequest(e.to_string()))?;
        self.log.append(&[(key(group, producer_id), Some(bytes))])?;
        self.state.write().insert(k, next);
        Ok(())
    }

    /// The partitions with offsets staged for `group`.
    pub fn partitions_of(&self, group: &str) -> BTreeSet<(String, i32)> {
        self.state
            .read()
            .iter()
            .filter(|((g, _), _)| g == group)
            .flat_map(|(_, s)| s.offsets.iter().map(|(t, p, _)| (t.clone(), *p)))
            .collect()
    }

    /// A marker for `producer_id` at `epoch` ends its transaction in the
    /// groups `ended` picks: their checks in flight are cancelled, and what
    /// it staged for them (at that epoch or an older one) is given back.
    pub fn ending(
        &self,
        producer_id: i64,
        epoch: i16,
        ended: impl Fn(&str) -> bool,
    ) -> Vec<((String, i64), Staged)> {
        let _writing = self.writing.lock();
        // Checks in flight were about the transaction this ends.
        self.cancel_checks_locked(producer_id, &ended);
        self.state
            .read()
            .iter()
            .filter(|((g, p), s)| *p == producer_id && s.producer_epoch <= epoch && ended(g))
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect()
    }

    /// Drops what `k` staged once its transaction ended, if it is still
    /// `s` (its tombstone in the group log first).
    pub fn remove_ended(&self, k: &(String, i64), s: &Staged) -> Result<(), CoordError> {
        let _writing = self.writing.lock();
        if self.state.read().get(k) != Some(s) {
            return Ok(());
        }
        self.log.append(&[(key(&k.0, k.1), None)])?;
        self.state.write().remove(k);
        Ok(())
    }

    /// Makes what was written durable (fsync).
    pub fn flush(&self) -> Result<(), CoordError> {
        self.log.flush()
    }

    /// How many checks are in flight.
    pub fn checks_in_flight(&self) -> usize {
        self.checks.lock().len()
    }
}
