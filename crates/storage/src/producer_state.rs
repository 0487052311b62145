//! Idempotent producer state, with Kafka's ProducerStateManager semantics:
//! per producer, its epoch and its last five batches, used to fence zombie
//! producers, detect retries and reject sequence gaps; and each producer's
//! ongoing transaction, whose first offset bounds the last stable offset.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use model::{Offset, ProducerEpoch, ProducerId, Timestamp};

use crate::batch::{increment_sequence, BatchHeader};
use crate::checkpoint::write_atomic;
use crate::error::{corrupt, Error, IoContext, Result};
use crate::segment::{file_name, parse_file_name};
use crate::txn::{ControlType, TxnMarker};

/// Extension of producer snapshot files, `{offset:020}.snapshot`.
pub(crate) const SNAPSHOT_EXT: &str = "snapshot";
/// How many recent batches are remembered per producer (Kafka's limit of in-flight requests).
pub const MAX_CACHED_BATCHES: usize = 5;
/// 2 adds each producer's coordinator epoch and ongoing transaction.
const SNAPSHOT_VERSION: u16 = 2;

/// One remembered batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_seq: i32,
    /// Sequence of the last record.
    pub last_seq: i32,
    /// Offset of the first record.
    pub first_offset: Offset,
    /// Offset of the last record.
    pub last_offset: Offset,
}

/// What is known about one producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The producer's current epoch.
    pub epoch: ProducerEpoch,
    /// Its last batches, oldest first (at most [`MAX_CACHED_BATCHES`]).
    pub batches: VecDeque<BatchMetadata>,
    /// When it last appended (wall clock; the batch's max timestamp when
    /// rebuilt from the log). Drives producer id expiration.
    pub last_timestamp: Timestamp,
    /// The first offset of its ongoing transaction, if one is open here.
    pub txn_first_offset: Option<Offset>,
    /// The epoch of the transaction coordinator that wrote its last marker
    /// (-1: none yet).
    pub coordinator_epoch: i32,
}

impl ProducerEntry {
    fn new(epoch: ProducerEpoch, at: Timestamp) -> ProducerEntry {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            last_timestamp: at,
            txn_first_offset: None,
            coordinator_epoch: -1,
        }
    }

    /// The sequence of its last record, if it has appended in this epoch.
    pub fn last_sequence(&self) -> Option<i32> {
        self.last_seq()
    }

    fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }

    fn find_duplicate(&self, h: &BatchHeader) -> Option<BatchMetadata> {
        if h.producer_epoch != self.epoch {
            return None;
        }
        let last_seq = h.last_sequence();
        self.batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
            .copied()
    }

    fn push(&mut self, h: &BatchHeader, at: Timestamp) {
        if h.producer_epoch != self.epoch {
            self.epoch = h.producer_epoch;
            self.batches.clear();
        }
        if self.batches.len() == MAX_CACHED_BATCHES {
            self.batches.pop_front();
        }
        self.batches.push_back(BatchMetadata {
            first_seq: h.base_sequence,
            last_seq: h.last_sequence(),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
        });
        self.last_timestamp = at;
        if h.is_transactional() && self.txn_first_offset.is_none() {
            self.txn_first_offset = Some(h.base_offset);
        }
    }

    /// Ends its ongoing transaction with `marker` (at `at`): the epoch can
    /// only rise (a bumped epoch starts its sequences afresh).
    fn end_txn(&mut self, marker: &TxnMarker, at: Timestamp) {
        if marker.producer_epoch != self.epoch {
            self.epoch = marker.producer_epoch;
            self.batches.clear();
        }
        self.coordinator_epoch = marker.coordinator_epoch;
        self.txn_first_offset = None;
        self.last_timestamp = at;
    }
}

/// The verdict on one batch of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// In sequence (or not idempotent): append it.
    Append,
    /// A retry of a batch already in the log.
    Duplicate(BatchMetadata),
}

/// All producers of one partition.
#[derive(Debug, Default)]
pub(crate) struct ProducerStateManager {
    producers: HashMap<ProducerId, ProducerEntry>,
    /// The ongoing transactions by first offset: the first one is the last
    /// stable offset.
    ongoing: BTreeMap<Offset, ProducerId>,
}

/// Updates staged by one append, applied only once the write succeeded.
#[derive(Debug, Default)]
pub(crate) struct StagedProducers {
    entries: Vec<(ProducerId, ProducerEntry)>,
}

impl StagedProducers {
    fn get<'a>(
        &'a self,
        mgr: &'a ProducerStateManager,
        pid: ProducerId,
    ) -> Option<&'a ProducerEntry> {
        self.entries
            .iter()
            .rev()
            .find(|(p, _)| *p == pid)
            .map(|(_, e)| e)
            .or_else(|| mgr.producers.get(&pid))
    }
}

impl ProducerStateManager {
    /// The entry of one producer.
    pub fn get(&self, pid: ProducerId) -> Option<&ProducerEntry> {
        self.producers.get(&pid)
    }

    /// The first offset of the oldest ongoing transaction: records from it
    /// on are not stable yet (`None`: every record is).
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.ongoing.keys().next().copied()
    }

    /// The ongoing transactions, oldest first: (first offset, producer).
    pub fn ongoing(&self) -> impl Iterator<Item = (Offset, ProducerId)> + '_ {
        self.ongoing.iter().map(|(o, p)| (*o, *p))
    }

    fn insert(&mut self, pid: ProducerId, entry: ProducerEntry) {
        let old = self.producers.insert(pid, entry);
        if let Some(o) = old.and_then(|e| e.txn_first_offset) {
            self.ongoing.remove(&o);
        }
        if let Some(o) = self.producers[&pid].txn_first_offset {
            self.ongoing.insert(o, pid);
        }
    }

    /// Checks `marker` against the producer's state: a marker of an older
    /// producer epoch, or of an older coordinator, is fenced.
    pub fn check_marker(&self, marker: &TxnMarker) -> Result<()> {
        let Some(e) = self.producers.get(&marker.producer_id) else {
            return Ok(());
        };
        if marker.producer_epoch < e.epoch {
            return Err(Error::InvalidProducerEpoch {
                producer_id: marker.producer_id,
                epoch: marker.producer_epoch,
                current_epoch: e.epoch,
            });
        }
        if marker.coordinator_epoch < e.coordinator_epoch {
            return Err(Error::TransactionCoordinatorFenced {
                producer_id: marker.producer_id,
                coordinator_epoch: marker.coordinator_epoch,
                current: e.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Ends the producer's transaction with `marker` (checked), returning
    /// the first offset of the transaction it ended, if one was open.
    pub fn complete_txn(&mut self, marker: &TxnMarker, at: Timestamp) -> Option<Offset> {
        let mut entry = self
            .producers
            .get(&marker.producer_id)
            .cloned()
            .unwrap_or_else(|| ProducerEntry::new(marker.producer_epoch, at));
        let first = entry.txn_first_offset;
        entry.end_txn(marker, at);
        self.insert(marker.producer_id, entry);
        first
    }

    /// Every producer known, by id (unordered).
    pub fn all(&self) -> impl Iterator<Item = (ProducerId, &ProducerEntry)> {
        self.producers.iter().map(|(id, e)| (*id, e))
    }

    /// Checks a batch (with its offsets already assigned) against the state
    /// including earlier batches of the same append, and stages its update.
    pub fn check(
        &self,
        staged: &mut StagedProducers,
        h: &BatchHeader,
        now: Timestamp,
    ) -> Result<Verdict> {
        if !h.has_producer_id() {
            if h.is_transactional() {
                return Err(Error::InvalidTxnState(
                    "a transactional batch without a producer id".into(),
                ));
            }
            return Ok(Verdict::Append);
        }
        let pid = h.producer_id;
        let mut entry = match staged.get(self, pid) {
            None => ProducerEntry::new(h.producer_epoch, h.max_timestamp),
            Some(e) => {
                if h.producer_epoch < e.epoch {
                    return Err(Error::InvalidProducerEpoch {
                        producer_id: pid,
                        epoch: h.producer_epoch,
                        current_epoch: e.epoch,
                    });
                }
                if e.txn_first_offset.is_some() && h.producer_epoch > e.epoch {
                    // The coordinator ends the older epoch's transaction
                    // (an abort marker) before handing out a newer epoch:
                    // its records must never join the new transaction.
                    return Err(Error::InvalidTxnState(format!(
                        "producer {pid} epoch {} has an open transaction of epoch {}",
                        h.producer_epoch, e.epoch
                    )));
                }
                if e.txn_first_offset.is_some() && !h.is_transactional() {
                    // Kafka's "expected transactional write" check.
                    return Err(Error::InvalidTxnState(format!(
                        "producer {pid} has an ongoing transaction; its batches must be transactional"
                    )));
                }
                if let Some(dup) = e.find_duplicate(h) {
                    return Ok(Verdict::Duplicate(dup));
                }
                if h.producer_epoch != e.epoch {
                    if h.base_sequence != 0 {
                        return Err(Error::OutOfOrderSequence {
                            producer_id: pid,
                            producer_epoch: h.producer_epoch,
                            expected_sequence: 0,
                            sequence: h.base_sequence,
                        });
                    }
                } else if let Some(last) = e.last_seq() {
                    let expected = increment_sequence(last, 1);
                    if h.base_sequence != expected {
                        return Err(Error::OutOfOrderSequence {
                            producer_id: pid,
                            producer_epoch: h.producer_epoch,
                            expected_sequence: expected,
                            sequence: h.base_sequence,
                        });
                    }
                }
                e.clone()
            }
        };
        entry.push(h, now);
        staged.entries.push((pid, entry));
        Ok(Verdict::Append)
    }

    /// Applies the staged updates of a successful append.
    pub fn commit(&mut self, staged: StagedProducers) {
        for (pid, entry) in staged.entries {
            self.insert(pid, entry);
        }
    }

    /// Forgets producers idle for at least `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`), so the state does not grow without
    /// bound; a producer with an ongoing transaction is kept. Returns how
    /// many were removed.
    pub fn remove_expired(&mut self, now: Timestamp, expiration_ms: u64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some()
                || now.0.saturating_sub(e.last_timestamp.0) < expiration_ms as i64
        });
        before - self.producers.len()
    }

    /// The last offset of each producer's last batch: the compactor keeps
    /// that batch (emptied if need be) so the state can be rebuilt from the
    /// log.
    pub fn last_offsets(&self) -> HashMap<ProducerId, Offset> {
        self.producers
            .iter()
            .filter_map(|(pid, e)| e.batches.back().map(|b| (*pid, b.last_offset)))
            .collect()
    }

    /// Applies a batch read back from the log, without checks (recovery);
    /// `control` is the marker a control batch holds. Returns the first
    /// offset of the transaction a marker ended, if one was open.
    pub fn replay(
        &mut self,
        h: &BatchHeader,
        control: Option<(ControlType, i32)>,
    ) -> Option<Offset> {
        if !h.has_producer_id() {
            return None;
        }
        if h.is_control() {
            let (control, coordinator_epoch) = control?;
            let marker = TxnMarker {
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                control,
                coordinator_epoch,
            };
            return self.complete_txn(&marker, h.max_timestamp);
        }
        let mut entry = self
            .producers
            .get(&h.producer_id)
            .cloned()
            .unwrap_or_else(|| ProducerEntry::new(h.producer_epoch, h.max_timestamp));
        entry.push(h, h.max_timestamp);
        self.insert(h.producer_id, entry);
        None
    }

    /// Serializes the state: version u16, CRC-32C u32 of the rest, count u32,
    /// then per producer `id i64, epoch i16, last timestamp i64, coordinator
    /// epoch i32, transaction first offset i64 (-1: none), n u8` and `n`
    /// times `first seq i32, last seq i32, first offset i64, last offset i64`
    /// (version 1 had neither the coordinator epoch nor the transaction).
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(4 + self.producers.len() * 64);
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut pids: Vec<_> = self.producers.keys().copied().collect();
        pids.sort();
        for pid in pids {
            let e = &self.producers[&pid];
            body.extend_from_slice(&pid.0.to_be_bytes());
            body.extend_from_slice(&e.epoch.0.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.0.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&e.txn_first_offset.map_or(-1, |o| o.0).to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.0.to_be_bytes());
                body.extend_from_slice(&b.last_offset.0.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(6 + body.len());
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parses [`Self::snapshot_bytes`] output.
    pub fn from_snapshot(path: &Path, bytes: &[u8]) -> Result<Self> {
        let bad = |reason: &str| corrupt(path, reason.to_string());
        let mut r = Reader { buf: bytes, pos: 0 };
        let version = r.u16().ok_or_else(|| bad("truncated header"))?;
        if version != SNAPSHOT_VERSION && version != 1 {
            return Err(bad("unsupported snapshot version"));
        }
        let crc = r.u32().ok_or_else(|| bad("truncated header"))?;
        if crc32c::crc32c(&bytes[r.pos..]) != crc {
            return Err(bad("CRC mismatch"));
        }
        let count = r.u32().ok_or_else(|| bad("truncated"))?;
        let mut state = ProducerStateManager::default();
        for _ in 0..count {
            let entry = (|| {
                let pid = ProducerId(r.i64()?);
                let epoch = ProducerEpoch(r.u16()? as i16);
                let last_timestamp = Timestamp(r.i64()?);
                let (coordinator_epoch, txn_first_offset) = if version >= 2 {
                    let c = r.u32()? as i32;
                    let t = r.i64()?;
                    (c, (t >= 0).then_some(Offset(t)))
                } else {
                    (-1, None)
                };
                let n = r.u8()?;
                let mut batches = VecDeque::with_capacity(usize::from(n));
                for _ in 0..n {
                    batches.push_back(BatchMetadata {
                        first_seq: r.u32()? as i32,
                        last_seq: r.u32()? as i32,
                        first_offset: Offset(r.i64()?),
                        last_offset: Offset(r.i64()?),
                    });
                }
                Some((
                    pid,
                    ProducerEntry {
                        epoch,
                        batches,
                        last_timestamp,
                        txn_first_offset,
                        coordinator_epoch,
                    },
                ))
            })()
            .ok_or_else(|| bad("truncated entry"))?;
            state.insert(entry.0, entry.1);
        }
        Ok(state)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let bytes = self.buf.get(self.pos..self.pos + N)?;
        self.pos += N;
        bytes.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}

/// Path of the snapshot taken at `offset`.
pub(crate) fn snapshot_path(dir: &Path, offset: Offset) -> PathBuf {
    dir.join(file_name(offset, SNAPSHOT_EXT))
}

/// Offsets of the snapshots in `dir`, ascending.
pub(crate) fn list_snapshots(dir: &Path) -> Result<Vec<Offset>> {
    let mut offsets = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        if let Some(o) = entry
            .file_name()
            .to_str()
            .and_then(|n| parse_file_name(n, SNAPSHOT_EXT))
        {
            offsets.push(o);
        }
    }
    offsets.sort();
    Ok(offsets)
}

/// Writes the state as of `offset` (all batches below it applied).
pub(crate) fn write_snapshot(dir: &Path, offset: Offset, bytes: &[u8]) -> Result<()> {
    write_atomic(&snapshot_path(dir, offset), bytes)
}

fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).at(path),
    }
}

/// Deletes the snapshot taken at `offset`, if any.
pub(crate) fn remove_snapshot(dir: &Path, offset: Offset) -> Result<()> {
    remove(&snapshot_path(dir, offset))
}

/// Deletes snapshots taken below `offset` (their segments are gone).
pub(crate) fn delete_snapshots_before(dir: &Path, offset: Offset) -> Result<()> {
    for o in list_snapshots(dir)? {
        if o < offset {
            remove(&snapshot_path(dir, o))?;
        }
    }
    Ok(())
}

/// Loads the newest usable snapshot at or below `log_end_offset`, deleting
/// snapshots beyond it (the log was truncated) and corrupt ones. Returns the
/// state and the offset replay must start from (`None`: no snapshot).
pub(crate) fn load_latest(
    dir: &Path,
    log_end_offset: Offset,
) -> Result<(ProducerStateManager, Option<Offset>)> {
    let mut offsets = list_snapshots(dir)?;
    while let Some(offset) = offsets.pop() {
        let path = snapshot_path(dir, offset);
        if offset > log_end_offset {
            remove(&path)?;
            continue;
        }
        let bytes = fs::read(&path).at(&path)?;
        match ProducerStateManager::from_snapshot(&path, &bytes) {
            Ok(state) => return Ok((state, Some(offset))),
            Err(e) => {
                tracing::warn!(error = %e, "ignoring unreadable producer snapshot");
                remove(&path)?;
            }
        }
    }
    Ok((ProducerStateManager::default(), None))
}

#[cfg(test)]
mod tests;
