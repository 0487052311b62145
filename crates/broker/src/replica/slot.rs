//! What a partition holds of its replication (the data; its methods on
//! [`crate::Partition`] are in `hosted.rs`): the replica, the order writes
//! reach it in, and the purgatory of `acks=all` producers.

use std::collections::BTreeMap;
use std::sync::Arc;

use magnetar_replication::ReplicationError;
use model::Offset;
use parking_lot::{Mutex, RwLock};

use super::machine::Replica;

/// An AlterPartition a leader asks of the controller, on its way there.
#[derive(Debug)]
pub struct AlterJob {
    /// The partition's topic.
    pub topic_id: model::TopicId,
    /// The partition.
    pub partition: i32,
    /// The id the replica gave it.
    pub id: u64,
    /// The request.
    pub request: magnetar_replication::AlterPartitionRequest,
}

/// Told the outcome once the high watermark passes its offset, or the
/// epoch changes.
pub(super) type Waiter = Box<dyn FnOnce(Result<(), ReplicationError>) + Send>;

/// The replication part of a partition.
#[derive(Default)]
pub(crate) struct PartitionReplication {
    pub(super) replica: RwLock<Option<Replicated>>,
    /// Held across a leader's write and telling its replica about it.
    pub(super) write_order: Mutex<()>,
    /// `acks=all` producers by the offset the high watermark must reach.
    pub(super) purgatory: Mutex<BTreeMap<Offset, Vec<Waiter>>>,
}

impl std::fmt::Debug for PartitionReplication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionReplication")
            .field("replica", &self.replica.read().is_some())
            .field("waiting", &self.purgatory.lock().len())
            .finish()
    }
}

/// A partition's replica and where its AlterPartition requests go.
#[derive(Debug, Clone)]
pub(super) struct Replicated {
    pub(super) replica: Arc<Replica>,
    pub(super) alter: tokio::sync::mpsc::UnboundedSender<AlterJob>,
}
