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
    /// broker, the producer and group already checked with it.
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
        let ending: Vec<((String, i64), Staged)> = staged
            .state
            .read()
            .iter()
            .filter(|((g, p), s)| {
                *p == producer_id
                    && s.producer_epoch <= epoch
                    && self.group_slot(g).is_ok_and(|s| s == slot)
            })
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        for (k, s) in ending {
            // Not under `writing`: the group coordinator's lock is taken
            // to commit, and its compaction takes `writing` under it.
            if commit && !s.offsets.is_empty() {
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
        Ok(())
    }
}
