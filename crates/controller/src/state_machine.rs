//! The application state machine the controller replicates, and a key/value
//! map implementing it for tests and examples.

use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A deterministic state machine driven by the committed Raft log.
///
/// Every node applies the same records in the same order, so `apply` must be
/// pure: no I/O, no clocks, no randomness, no iteration over hash maps whose
/// order differs between processes. The controller keeps the state in memory,
/// persists it through [`snapshot`](Self::snapshot) and replays the log after
/// the last snapshot on restart.
pub trait StateMachine: Send + Sync + 'static {
    /// One log entry's payload.
    type Record: Serialize + DeserializeOwned + Clone + Debug + Send + Sync + 'static;
    /// What applying a record answers to the submitter.
    type Response: Serialize + DeserializeOwned + Clone + Debug + Send + Sync + 'static;

    /// Applies the committed `record` at log `index`.
    fn apply(&mut self, index: u64, record: &Self::Record) -> Self::Response;

    /// Serializes the whole state.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the whole state with a [`snapshot`](Self::snapshot)'s bytes.
    /// On error `self` must be left unchanged (decode before replacing).
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String>;
}

/// A command of the test key/value state machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvRecord {
    /// Sets `key` to `value`.
    Set {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: String,
    },
}

/// A key/value map: the state machine the crate's tests replicate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvMap {
    /// The current entries.
    pub entries: BTreeMap<String, String>,
    /// Every applied (index, record), when `keep_history` is set: lets tests
    /// compare the exact applied sequences of nodes.
    pub history: Vec<(u64, KvRecord)>,
    /// Whether to fill `history`.
    pub keep_history: bool,
}

#[derive(Serialize, Deserialize)]
struct KvSnapshot {
    entries: BTreeMap<String, String>,
    history: Vec<(u64, KvRecord)>,
}

impl KvMap {
    /// A map that records the applied history.
    pub fn with_history() -> Self {
        KvMap {
            keep_history: true,
            ..KvMap::default()
        }
    }
}

impl StateMachine for KvMap {
    type Record = KvRecord;
    /// The previous value of the key.
    type Response = Option<String>;

    fn apply(&mut self, index: u64, record: &KvRecord) -> Option<String> {
        if self.keep_history {
            self.history.push((index, record.clone()));
        }
        match record {
            KvRecord::Set { key, value } => self.entries.insert(key.clone(), value.clone()),
            KvRecord::Delete { key } => self.entries.remove(key),
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        let snap = KvSnapshot {
            entries: self.entries.clone(),
            history: self.history.clone(),
        };
        // A BTreeMap and Vec of strings always serialize.
        postcard::to_stdvec(&snap).unwrap_or_default()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        let snap: KvSnapshot = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
        self.entries = snap.entries;
        self.history = snap.history;
        Ok(())
    }
}
