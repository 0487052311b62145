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
use crate::error::CoordError;
use crate::group::store::{GroupLog, RecordKey};

/// A snapshot is due after this many stored batches...
pub const SNAPSHOT_EVERY_BATCHES: u64 = 1000;
/// ...or this long after the previous one (ms), if anything changed.
pub const SNAPSHOT_EVERY_MS: i64 = 10_000;
/// Inactive producers are looked for at most this often (ms).
pub const EXPIRY_CHECK_MS: i64 = 60_000;

/// Snapshots written now: each producer also carries when it was last
/// active. Version 1 (without it) is still read.
const RECORD_VERSION: u8 = 2;
const RECORD_VERSION_1: u8 = 1;

/// One producer name's entry in a partition's sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerEntry {
    /// Highest stored sequence id.
    pub sequence_id: i64,
    /// When it last stored a batch or detached (ms; 0 = unknown, read from
    /// a version-1 snapshot: counted from the restore).
    pub last_active_ms: i64,
}

/// A partition's producer sequences as the group log stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequenceSnapshot {
    /// Every batch below this offset is reflected in `producers`; replay
    /// starts here.
    pub covered: Offset,
    /// Producer name → its entry.
    pub producers: BTreeMap<String, ProducerEntry>,
}

impl SequenceSnapshot {
    /// The record's bytes: version (2), covered (zigzag varint), producer
    /// count (varint), then per producer its name (length varint + UTF-8),
    /// its sequence id and its last activity in ms (zigzag varints), in
    /// name order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.producers.len() * 32);
        out.push(RECORD_VERSION);
        put_varint(&mut out, zigzag(self.covered.0));
        put_varint(&mut out, self.producers.len() as u64);
        for (name, entry) in &self.producers {
            put_bytes(&mut out, name.as_bytes());
            put_varint(&mut out, zigzag(entry.sequence_id));
            put_varint(&mut out, zigzag(entry.last_active_ms));
        }
        out
    }

    /// Parses [`SequenceSnapshot::encode`]'s bytes (or a version-1
    /// record's); `None` if they are not a valid record.
    pub fn decode(mut buf: &[u8]) -> Option<SequenceSnapshot> {
        let b = &mut buf;
        let version = take_u8(b)?;
        if version != RECORD_VERSION && version != RECORD_VERSION_1 {
            return None;
        }
        let covered = Offset(unzigzag(take_varint(b)?));
        let n = take_varint(b)?;
        let mut producers = BTreeMap::new();
        for _ in 0..n {
            let name = take_string(b)?;
            let sequence_id = unzigzag(take_varint(b)?);
            let last_active_ms = if version == RECORD_VERSION {
                unzigzag(take_varint(b)?)
            } else {
                0
            };
            producers.insert(
                name,
                ProducerEntry {
                    sequence_id,
                    last_active_ms,
                },
            );
        }
        b.is_empty()
            .then_some(SequenceSnapshot { covered, producers })
    }
}

/// One partition's sequences: a sans-IO state the front end updates as it
/// stores (or replays) batches and as producers attach and detach.
///
/// An entry is forgotten once its producer has been detached and inactive
/// for the configured time ([`PartitionSequences::expire`]), as upstream's
/// `brokerDeduplicationProducerInactivityTimeoutMinutes`: a resend after
/// that is stored again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSequences {
    entries: HashMap<String, ProducerEntry>,
    /// Producer names attached now, with how many attachments each.
    attached: HashMap<String, u32>,
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
            entries: snapshot
                .producers
                .into_iter()
                .map(|(name, mut e)| {
                    if e.last_active_ms == 0 {
                        e.last_active_ms = now_ms;
                    }
                    (name, e)
                })
                .collect(),
            attached: HashMap::new(),
            covered: snapshot.covered,
            since_snapshot: 0,
            snapshot_at: now_ms,
        }
    }

    /// The highest sequence id stored by `producer`, or -1.
    pub fn last(&self, producer: &str) -> i64 {
        self.entries.get(producer).map_or(-1, |e| e.sequence_id)
    }

    /// Whether a batch whose highest sequence id is `highest` was already
    /// stored by `producer`.
    pub fn is_duplicate(&self, producer: &str, highest: i64) -> bool {
        self.entries
            .get(producer)
            .is_some_and(|e| highest <= e.sequence_id)
    }

    /// A batch of `producer` up to sequence id `highest`, stored at
    /// `at_ms`, is in the log, ending before `next_offset`.
    pub fn record(&mut self, producer: &str, highest: i64, next_offset: Offset, at_ms: i64) {
        match self.entries.get_mut(producer) {
            Some(e) => {
                e.sequence_id = e.sequence_id.max(highest);
                e.last_active_ms = e.last_active_ms.max(at_ms);
            }
            None => {
                self.entries.insert(
                    producer.to_string(),
                    ProducerEntry {
                        sequence_id: highest,
                        last_active_ms: at_ms,
                    },
                );
            }
        }
        self.covered = self.covered.max(next_offset);
        self.since_snapshot += 1;
    }

    /// A producer of this name attached: its entry does not expire while
    /// it is attached.
    pub fn attach(&mut self, producer: &str) {
        *self.attached.entry(producer.to_string()).or_default() += 1;
    }

    /// A producer of this name detached at `now_ms`: its inactivity counts
    /// from now.
    pub fn detach(&mut self, producer: &str, now_ms: i64) {
        if let Some(n) = self.attached.get_mut(producer) {
            *n -= 1;
            if *n == 0 {
                self.attached.remove(producer);
            }
        }
        if let Some(e) = self.entries.get_mut(producer) {
            e.last_active_ms = e.last_active_ms.max(now_ms);
        }
    }

    /// Forgets the entries of producers detached and inactive for at least
    /// `inactivity_ms` at `now_ms`; returns how many. The next snapshot
    /// leaves them out.
    pub fn expire(&mut self, now_ms: i64, inactivity_ms: i64) -> usize {
        let before = self.entries.len();
        let attached = &self.attached;
        self.entries.retain(|name, e| {
            attached.contains_key(name) || now_ms.saturating_sub(e.last_active_ms) < inactivity_ms
        });
        let expired = before - self.entries.len();
        if expired > 0 {
            self.since_snapshot += 1;
        }
        expired
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
        self.entries.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
            producers: self.entries.iter().map(|(k, v)| (k.clone(), *v)).collect(),
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
    /// When [`ProducerSequences::expire`] last ran (ms).
    last_expiry: Mutex<i64>,
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
            last_expiry: Mutex::new(i64::MIN),
            log,
        }
    }

    /// The sequences of a partition. On first use after the start they are
    /// the persisted snapshot's, brought up to date by `replay`, which is
    /// given the state and must [`PartitionSequences::record`] every batch
    /// stored from [`PartitionSequences::covered`] to the log end, then
    /// call [`PartitionSequences::replayed_to`] with the end.
    pub fn partition<E>(
        &self,
        topic: &str,
        partition: i32,
        now_ms: i64,
        replay: impl FnOnce(&mut PartitionSequences) -> Result<(), E>,
    ) -> Result<SequencesHandle, E> {
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
    pub fn flush(&self, now_ms: i64, all: bool) -> Result<usize, CoordError> {
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

    /// Forgets, in every loaded partition, the producers detached and
    /// inactive for `inactivity_ms()` ([`PartitionSequences::expire`]);
    /// runs at most once per [`EXPIRY_CHECK_MS`] (earlier calls do nothing).
    /// Returns how many entries were forgotten.
    pub fn expire(&self, now_ms: i64, inactivity_ms: impl FnOnce() -> i64) -> usize {
        {
            let mut last = self.last_expiry.lock();
            if now_ms.saturating_sub(*last) < EXPIRY_CHECK_MS {
                return 0;
            }
            *last = now_ms;
        }
        let inactivity_ms = inactivity_ms();
        let slots: Vec<SequencesHandle> = self.slots.lock().values().cloned().collect();
        let expired: usize = slots
            .iter()
            .map(|h| h.lock().expire(now_ms, inactivity_ms))
            .sum();
        if expired > 0 {
            tracing::debug!(expired, "forgot the sequences of inactive producers");
        }
        expired
    }

    /// Drops the sequences of a deleted topic (tombstones for its persisted
    /// snapshots are in the group log before this returns).
    pub fn forget_topic(&self, topic: &str) -> Result<(), CoordError> {
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
