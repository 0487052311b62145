//! Idempotent producer state, with Kafka's ProducerStateManager semantics:
//! per producer, its epoch and its last five batches, used to fence zombie
//! producers, detect retries and reject sequence gaps.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use model::{Offset, ProducerEpoch, ProducerId, Timestamp};

use crate::batch::{increment_sequence, BatchHeader};
use crate::checkpoint::write_atomic;
use crate::error::{corrupt, Error, IoContext, Result};
use crate::segment::{file_name, parse_file_name};

/// Extension of producer snapshot files, `{offset:020}.snapshot`.
pub(crate) const SNAPSHOT_EXT: &str = "snapshot";
/// How many recent batches are remembered per producer (Kafka's limit of in-flight requests).
pub const MAX_CACHED_BATCHES: usize = 5;
const SNAPSHOT_VERSION: u16 = 1;

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
}

impl ProducerEntry {
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
            return Ok(Verdict::Append);
        }
        let pid = h.producer_id;
        let mut entry = match staged.get(self, pid) {
            None => ProducerEntry {
                epoch: h.producer_epoch,
                batches: VecDeque::new(),
                last_timestamp: h.max_timestamp,
            },
            Some(e) => {
                if h.producer_epoch < e.epoch {
                    return Err(Error::InvalidProducerEpoch {
                        producer_id: pid,
                        epoch: h.producer_epoch,
                        current_epoch: e.epoch,
                    });
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
            self.producers.insert(pid, entry);
        }
    }

    /// Forgets producers idle for at least `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`), so the state does not grow without
    /// bound. Returns how many were removed.
    pub fn remove_expired(&mut self, now: Timestamp, expiration_ms: u64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, e| now.0.saturating_sub(e.last_timestamp.0) < expiration_ms as i64);
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

    /// Applies a batch read back from the log, without checks (recovery).
    pub fn replay(&mut self, h: &BatchHeader) {
        if !h.has_producer_id() {
            return;
        }
        self.producers
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: h.producer_epoch,
                batches: VecDeque::new(),
                last_timestamp: h.max_timestamp,
            })
            .push(h, h.max_timestamp);
    }

    /// Serializes the state: version u16, CRC-32C u32 of the rest, count u32,
    /// then per producer `id i64, epoch i16, last timestamp i64, n u8` and `n`
    /// times `first seq i32, last seq i32, first offset i64, last offset i64`.
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
        if version != SNAPSHOT_VERSION {
            return Err(bad("unsupported snapshot version"));
        }
        let crc = r.u32().ok_or_else(|| bad("truncated header"))?;
        if crc32c::crc32c(&bytes[r.pos..]) != crc {
            return Err(bad("CRC mismatch"));
        }
        let count = r.u32().ok_or_else(|| bad("truncated"))?;
        let mut producers = HashMap::new();
        for _ in 0..count {
            let entry = (|| {
                let pid = ProducerId(r.i64()?);
                let epoch = ProducerEpoch(r.u16()? as i16);
                let last_timestamp = Timestamp(r.i64()?);
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
                    },
                ))
            })()
            .ok_or_else(|| bad("truncated entry"))?;
            producers.insert(entry.0, entry.1);
        }
        Ok(ProducerStateManager { producers })
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
