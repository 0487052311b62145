//! Producer sequence ids for message deduplication (Pulsar's), kept
//! protocol-neutral: per partition, each producer name's highest stored
//! sequence id.
//!
//! Durable without a write per message: the front end stores the producer
//! name and sequence ids in each batch it appends (so the log itself says
//! who stored what), and the group log holds a snapshot of each partition's
//! map ([`RecordKey::ProducerSequences`], value
//! [`SequenceSnapshot::encode`]) with the offset up to which it covers the
//! log. On a partition's first use after a start the front end replays the
//! log from that offset to its end ([`ProducerSequences::partition`]), so
//! the state is exact wherever the previous run stopped, SIGKILL included;
//! snapshots only bound that replay (see [`PartitionSequences::snapshot_due`]).
//!
//! Locks: `persist` (the last persisted snapshot of each partition) is taken
//! before `slots` and before any one slot, and held across every group-log
//! write of snapshots, so a snapshot never lands after its partition's
//! tombstone. Appends take only their partition's slot.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use model::Offset;
use parking_lot::Mutex;

use crate::codec::{put_bytes, put_varint, take_string, take_u8, take_varint, unzigzag, zigzag};
use crate::group::store::{GroupLog, RecordKey};
use crate::Error;

/// A snapshot is due after this many stored batches...
pub const SNAPSHOT_EVERY_BATCHES: u64 = 1000;
/// ...or this long after the previous one (ms), if anything changed.
pub const SNAPSHOT_EVERY_MS: i64 = 10_000;

const RECORD_VERSION: u8 = 1;

/// A partition's producer sequences as the group log stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequenceSnapshot {
    /// Every batch below this offset is reflected in `producers`; replay
    /// starts here.
    pub covered: Offset,
    /// Producer name → highest stored sequence id.
    pub producers: BTreeMap<String, i64>,
}

impl SequenceSnapshot {
    /// The record's bytes: version (1), covered (zigzag varint), producer
    /// count (varint), then per producer its name (length varint + UTF-8)
    /// and its sequence id (zigzag varint), in name order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.producers.len() * 24);
        out.push(RECORD_VERSION);
        put_varint(&mut out, zigzag(self.covered.0));
        put_varint(&mut out, self.producers.len() as u64);
        for (name, seq) in &self.producers {
            put_bytes(&mut out, name.as_bytes());
            put_varint(&mut out, zigzag(*seq));
        }
        out
    }

    /// Parses [`SequenceSnapshot::encode`]'s bytes; `None` if they are not
    /// a valid record.
    pub fn decode(mut buf: &[u8]) -> Option<SequenceSnapshot> {
        let b = &mut buf;
        if take_u8(b)? != RECORD_VERSION {
            return None;
        }
        let covered = Offset(unzigzag(take_varint(b)?));
        let n = take_varint(b)?;
        let mut producers = BTreeMap::new();
        for _ in 0..n {
            let name = take_string(b)?;
            producers.insert(name, unzigzag(take_varint(b)?));
        }
        b.is_empty()
            .then_some(SequenceSnapshot { covered, producers })
    }
}

/// One partition's sequences: a sans-IO state the front end updates as it
/// stores (or replays) batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSequences {
    highest: HashMap<String, i64>,
    covered: Offset,
    /// Batches recorded since the last snapshot.
    since_snapshot: u64,
    /// When the last snapshot was taken (ms).
    snapshot_at: i64,
}

impl PartitionSequences {
    /// The state a snapshot holds, as of `now_ms`; the log from
    /// [`PartitionSequences::covered`] on must still be replayed.
    pub fn restore(snapshot: SequenceSnapshot, now_ms: i64) -> PartitionSequences {
        PartitionSequences {
            highest: snapshot.producers.into_iter().collect(),
            covered: snapshot.covered,
            since_snapshot: 0,
            snapshot_at: now_ms,
        }
    }

    /// The highest sequence id stored by `producer`, or -1.
    pub fn last(&self, producer: &str) -> i64 {
        self.highest.get(producer).copied().unwrap_or(-1)
    }

    /// Whether a batch whose highest sequence id is `highest` was already
    /// stored by `producer`.
    pub fn is_duplicate(&self, producer: &str, highest: i64) -> bool {
        self.highest
            .get(producer)
            .is_some_and(|last| highest <= *last)
    }

    /// A batch of `producer` up to sequence id `highest` is in the log,
    /// ending before `next_offset`.
    pub fn record(&mut self, producer: &str, highest: i64, next_offset: Offset) {
        match self.highest.get_mut(producer) {
            Some(last) => *last = (*last).max(highest),
            None => {
                self.highest.insert(producer.to_string(), highest);
            }
        }
        self.covered = self.covered.max(next_offset);
        self.since_snapshot += 1;
    }

    /// The log was read (replayed) up to `end`: every batch below it is
    /// reflected.
    pub fn replayed_to(&mut self, end: Offset) {
        if end > self.covered {
            self.covered = end;
            self.since_snapshot += 1;
        }
    }

    /// The offset up to which every batch is reflected.
    pub fn covered(&self) -> Offset {
        self.covered
    }

    /// Producers known.
    pub fn len(&self) -> usize {
        self.highest.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.highest.is_empty()
    }

    /// Whether a snapshot should be written at `now_ms`: something changed
    /// and either [`SNAPSHOT_EVERY_BATCHES`] batches were stored or
    /// [`SNAPSHOT_EVERY_MS`] passed since the last one.
    pub fn snapshot_due(&self, now_ms: i64) -> bool {
        self.since_snapshot > 0
            && (self.since_snapshot >= SNAPSHOT_EVERY_BATCHES
                || now_ms - self.snapshot_at >= SNAPSHOT_EVERY_MS)
    }

    /// Whether anything changed since the last snapshot.
    pub fn changed(&self) -> bool {
        self.since_snapshot > 0
    }

    /// The state as a snapshot, taken at `now_ms`.
    pub fn take_snapshot(&mut self, now_ms: i64) -> SequenceSnapshot {
        self.since_snapshot = 0;
        self.snapshot_at = now_ms;
        SequenceSnapshot {
            covered: self.covered,
            producers: self.highest.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }

    /// A snapshot's write failed: it is due again.
    pub fn snapshot_failed(&mut self) {
        self.since_snapshot = self.since_snapshot.max(SNAPSHOT_EVERY_BATCHES);
    }
}

/// A partition's sequences, shared by the front end's producers on it.
pub type SequencesHandle = Arc<Mutex<PartitionSequences>>;

/// Which partition: topic name and partition index.
type PartitionKey = (String, i32);

/// The producer sequences of every partition on this broker.
#[derive(Debug)]
pub struct ProducerSequences {
    /// Last persisted snapshot bytes of each partition.
    persist: Mutex<HashMap<PartitionKey, Vec<u8>>>,
    /// Partitions loaded (snapshot + replay) since the start.
    slots: Mutex<HashMap<PartitionKey, SequencesHandle>>,
    /// Serializes first loads (a replay reads the log).
    loading: Mutex<()>,
    log: GroupLog,
}

impl ProducerSequences {
    /// The snapshots stored in these group-log records (in log order; the
    /// last record of a partition wins, a tombstone deletes).
    pub fn restore(
        log: GroupLog,
        records: impl IntoIterator<Item = (String, i32, Option<Bytes>)>,
    ) -> ProducerSequences {
        let mut persist = HashMap::new();
        for (topic, partition, value) in records {
            match value {
                Some(v) => persist.insert((topic, partition), v.to_vec()),
                None => persist.remove(&(topic, partition)),
            };
        }
        ProducerSequences {
            persist: Mutex::new(persist),
            slots: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
            log,
        }
    }

    /// The sequences of a partition. On first use after the start they are
    /// the persisted snapshot's, brought up to date by `replay`, which is
    /// given the state and must [`PartitionSequences::record`] every batch
    /// stored from [`PartitionSequences::covered`] to the log end, then
    /// call [`PartitionSequences::replayed_to`] with the end.
    pub fn partition(
        &self,
        topic: &str,
        partition: i32,
        now_ms: i64,
        replay: impl FnOnce(&mut PartitionSequences) -> Result<(), Error>,
    ) -> Result<SequencesHandle, Error> {
        let key = (topic.to_string(), partition);
        if let Some(h) = self.slots.lock().get(&key) {
            return Ok(h.clone());
        }
        let _loading = self.loading.lock();
        if let Some(h) = self.slots.lock().get(&key) {
            return Ok(h.clone());
        }
        let stored = self.persist.lock().get(&key).cloned();
        let snapshot = match stored.as_deref().map(SequenceSnapshot::decode) {
            Some(Some(s)) => s,
            Some(None) => {
                tracing::warn!(%topic, partition, "unreadable producer sequence snapshot; replaying the whole log");
                SequenceSnapshot::default()
            }
            None => SequenceSnapshot::default(),
        };
        let mut state = PartitionSequences::restore(snapshot, now_ms);
        replay(&mut state)?;
        tracing::debug!(%topic, partition, producers = state.len(), covered = state.covered().0, "producer sequences recovered");
        let handle = Arc::new(Mutex::new(state));
        self.slots.lock().insert(key, handle.clone());
        Ok(handle)
    }

    /// Writes the snapshots that are due at `now_ms` (all changed ones with
    /// `all`) to the group log; returns how many were written.
    pub fn flush(&self, now_ms: i64, all: bool) -> Result<usize, Error> {
        let mut persisted = self.persist.lock();
        let slots: Vec<(PartitionKey, SequencesHandle)> = self
            .slots
            .lock()
            .iter()
            .map(|(k, h)| (k.clone(), h.clone()))
            .collect();
        let mut due: Vec<(PartitionKey, SequencesHandle, Vec<u8>)> = Vec::new();
        for (key, handle) in slots {
            let mut state = handle.lock();
            if (all && state.changed()) || state.snapshot_due(now_ms) {
                let bytes = state.take_snapshot(now_ms).encode();
                drop(state);
                if persisted.get(&key) != Some(&bytes) {
                    due.push((key, handle, bytes));
                }
            }
        }
        let mut written = 0;
        for chunk in due.chunks(500) {
            let records: Vec<(RecordKey, Option<Vec<u8>>)> = chunk
                .iter()
                .map(|((t, p), _, b)| (record_key(t, *p), Some(b.clone())))
                .collect();
            if let Err(e) = self.log.append(&records) {
                for (_, handle, _) in &due[written..] {
                    handle.lock().snapshot_failed();
                }
                return Err(e);
            }
            for (key, _, bytes) in chunk {
                persisted.insert(key.clone(), bytes.clone());
            }
            written += chunk.len();
        }
        Ok(written)
    }

    /// Drops the sequences of a deleted topic (tombstones for its persisted
    /// snapshots are in the group log before this returns).
    pub fn forget_topic(&self, topic: &str) -> Result<(), Error> {
        let mut persisted = self.persist.lock();
        let stored: Vec<PartitionKey> = persisted
            .keys()
            .filter(|(t, _)| t == topic)
            .cloned()
            .collect();
        let tombstones: Vec<(RecordKey, Option<Vec<u8>>)> = stored
            .iter()
            .map(|(t, p)| (record_key(t, *p), None))
            .collect();
        self.log.append(&tombstones)?;
        for k in &stored {
            persisted.remove(k);
        }
        self.slots.lock().retain(|(t, _), _| t != topic);
        Ok(())
    }

    /// Runs `f` with the persisted snapshots (live records a group-log
    /// compaction must keep), holding off snapshot writes meanwhile.
    pub(crate) fn with_persisted<T>(
        &self,
        f: impl FnOnce(Vec<(RecordKey, Option<Vec<u8>>)>) -> T,
    ) -> T {
        let persisted = self.persist.lock();
        f(persisted
            .iter()
            .map(|((t, p), b)| (record_key(t, *p), Some(b.clone())))
            .collect())
    }
}

fn record_key(topic: &str, partition: i32) -> RecordKey {
    RecordKey::ProducerSequences {
        topic: topic.to_string(),
        partition,
    }
}

#[cfg(test)]
mod tests;
