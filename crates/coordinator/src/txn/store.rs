//! The transactional ids' states as records in the group log: read by the
//! transaction coordinator, changed one decision at a time, each change
//! persisted before it is current.

use std::collections::HashMap;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

use super::state::{TxnError, TxnMetadata};
use crate::error::CoordError;
use crate::group::store::{GroupLog, RecordKey};

/// The transactional ids this broker coordinates.
#[derive(Debug)]
pub struct Transactions {
    log: GroupLog,
    /// Held while a request is decided and its state persisted: one
    /// decision at a time, and none while the group log is compacted.
    deciding: Mutex<()>,
    /// The persisted state. Read without `deciding` (transactional
    /// Produce checks it, holding a read guard across its append so that
    /// no transaction is prepared in between); written only after the
    /// record is in the group log.
    state: RwLock<HashMap<String, TxnMetadata>>,
    /// Held while a transactional id's transaction ends (markers written,
    /// offsets committed): one ending at a time per id, without holding
    /// `deciding` meanwhile; ids are spread over the stripes by hash, so
    /// different ids rarely wait on each other.
    ending: Vec<Mutex<()>>,
}

/// How many locks the transactional ids' endings are spread over.
const ENDING_STRIPES: usize = 64;

fn key(id: &str) -> RecordKey {
    RecordKey::Transaction {
        transactional_id: id.to_string(),
    }
}

/// The right to decide: reads and persists transactional ids' states.
pub struct Decider<'a> {
    txns: &'a Transactions,
    _guard: MutexGuard<'a, ()>,
}

impl Decider<'_> {
    /// `id`'s state as persisted.
    pub fn get(&self, id: &str) -> Option<TxnMetadata> {
        self.txns.state.read().get(id).cloned()
    }

    /// `id`'s state; INVALID_PRODUCER_ID_MAPPING for an id never initialized.
    pub fn known(&self, id: &str) -> Result<TxnMetadata, CoordError> {
        self.txns.known(id)
    }

    /// Persists `m` as `id`'s state, then makes it current.
    pub fn persist(&mut self, id: &str, m: TxnMetadata) -> Result<(), CoordError> {
        let bytes =
            serde_json::to_vec(&m).map_err(|e| CoordError::InvalidRequest(e.to_string()))?;
        self.txns.log.append(&[(key(id), Some(bytes))])?;
        self.txns.state.write().insert(id.to_string(), m);
        Ok(())
    }
}

impl Transactions {
    /// The state the replayed records describe (the last record per id).
    pub(crate) fn restore(log: GroupLog, records: Vec<(String, Option<Bytes>)>) -> Transactions {
        let mut ids = HashMap::new();
        for (id, value) in records {
            match value.map(|v| serde_json::from_slice::<TxnMetadata>(&v)) {
                Some(Ok(m)) => {
                    ids.insert(id, m);
                }
                Some(Err(e)) => {
                    tracing::warn!(transactional_id = %id, "skipping unreadable transaction record: {e}")
                }
                None => {
                    ids.remove(&id);
                }
            }
        }
        Transactions {
            log,
            deciding: Mutex::new(()),
            state: RwLock::new(ids),
            ending: (0..ENDING_STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Runs `f` with every live record (what a group-log compaction keeps),
    /// holding off decisions meanwhile.
    pub(crate) fn with_persisted<T>(
        &self,
        f: impl FnOnce(Vec<(RecordKey, Option<Vec<u8>>)>) -> T,
    ) -> T {
        let _deciding = self.deciding.lock();
        let live = self
            .state
            .read()
            .iter()
            .map(|(id, m)| (key(id), serde_json::to_vec(m).ok()))
            .collect();
        f(live)
    }

    /// Takes the right to end `id`'s transaction.
    pub fn ending(&self, id: &str) -> MutexGuard<'_, ()> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        self.ending[(h.finish() % self.ending.len() as u64) as usize].lock()
    }

    /// Takes the right to decide.
    pub fn decide(&self) -> Decider<'_> {
        Decider {
            txns: self,
            _guard: self.deciding.lock(),
        }
    }

    /// The persisted state, for a check that must not race with a
    /// transaction being prepared (hold the guard across the check and
    /// what it allows).
    pub fn read(&self) -> RwLockReadGuard<'_, HashMap<String, TxnMetadata>> {
        self.state.read()
    }

    /// `id`'s state.
    pub fn get(&self, id: &str) -> Option<TxnMetadata> {
        self.state.read().get(id).cloned()
    }

    /// `id`'s state; INVALID_PRODUCER_ID_MAPPING for an id never initialized.
    pub fn known(&self, id: &str) -> Result<TxnMetadata, CoordError> {
        self.get(id)
            .ok_or_else(|| TxnError::InvalidProducerIdMapping(id.to_string()).into())
    }

    /// The transactional id whose producer is `producer_id`, and its state.
    pub fn of_producer(&self, producer_id: i64) -> Option<(String, TxnMetadata)> {
        self.state
            .read()
            .iter()
            .find(|(_, m)| m.producer_id == producer_id)
            .map(|(id, m)| (id.clone(), m.clone()))
    }

    /// Every id and its state.
    pub fn all(&self) -> Vec<(String, TxnMetadata)> {
        let ids = self.state.read();
        let mut out: Vec<_> = ids.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}
