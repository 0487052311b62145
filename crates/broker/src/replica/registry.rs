//! The broker's replication state (the data; the work on it is in
//! `hub.rs`): the fetchers by leader and the channel of AlterPartition
//! requests.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use model::{NodeId, TopicId};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch, Notify};

use super::slot::AlterJob;
use crate::topic::Partition;

/// Starts a fetcher task for a slot, once replication has started.
pub(super) type Spawner = Box<dyn Fn(NodeId, Arc<FetcherSlot>) + Send + Sync>;

/// The partitions one fetcher task fetches from one leader.
#[derive(Default)]
pub(super) struct FetcherSlot {
    pub(super) partitions: Mutex<BTreeMap<(TopicId, i32), Arc<Partition>>>,
    pub(super) changed: Notify,
}

/// The replication part of a broker.
pub(crate) struct ReplicationHub {
    pub(super) alter_tx: mpsc::UnboundedSender<AlterJob>,
    pub(super) alter_rx: Mutex<Option<mpsc::UnboundedReceiver<AlterJob>>>,
    /// Fetchers by (leader, index).
    pub(super) fetchers: Mutex<HashMap<(NodeId, usize), Arc<FetcherSlot>>>,
    /// Set once the broker can reach others.
    pub(super) started: OnceLock<Spawner>,
    /// Counts role changes of this broker's replicas (front ends watch it
    /// to send their clients of a partition led elsewhere now away).
    pub(super) leadership: watch::Sender<u64>,
    /// Bytes served to followers for throttled replicas.
    pub(super) leader_rate: super::throttle::ByteRate,
    /// Bytes fetched from leaders for throttled replicas.
    pub(super) follower_rate: super::throttle::ByteRate,
}

impl Default for ReplicationHub {
    fn default() -> Self {
        let (alter_tx, alter_rx) = mpsc::unbounded_channel();
        ReplicationHub {
            alter_tx,
            alter_rx: Mutex::new(Some(alter_rx)),
            fetchers: Mutex::new(HashMap::new()),
            started: OnceLock::new(),
            leadership: watch::Sender::new(0),
            leader_rate: Default::default(),
            follower_rate: Default::default(),
        }
    }
}

impl std::fmt::Debug for ReplicationHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicationHub").finish_non_exhaustive()
    }
}
