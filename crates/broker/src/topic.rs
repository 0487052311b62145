//! Topics and partitions: the broker's view of the logs it serves.

use std::sync::Arc;

use model::{LeaderEpoch, Offset, PartitionId, Timestamp, TopicId, TopicName, TopicPartition};
use storage::{AppendOutcome, Log, ReadResult};
use tokio::sync::Notify;

use crate::config::{TopicConfig, TopicKind};
use crate::Error;

/// A topic and its partitions. Immutable; a change (more partitions, new
/// configs) publishes a new `Topic` value.
#[derive(Debug)]
pub struct Topic {
    /// Name.
    pub name: TopicName,
    /// Permanent id.
    pub id: TopicId,
    /// Partitioned or non-partitioned.
    pub kind: TopicKind,
    /// Config overrides.
    pub config: TopicConfig,
    /// Partitions in index order.
    pub partitions: Vec<Arc<Partition>>,
}

impl Topic {
    /// Partition `p`, if it exists.
    pub fn partition(&self, p: PartitionId) -> Result<&Arc<Partition>, Error> {
        usize::try_from(p.0)
            .ok()
            .and_then(|i| self.partitions.get(i))
            .ok_or_else(|| Error::UnknownPartition {
                topic: self.name.to_string(),
                partition: p,
            })
    }
}

/// One partition: its log and the waiters for new data.
#[derive(Debug)]
pub struct Partition {
    /// Which partition.
    pub tp: TopicPartition,
    /// The owning topic's id.
    pub topic_id: TopicId,
    log: Arc<Log>,
    appended: Notify,
}

/// The leader epoch of every partition on a single-node broker.
pub const SINGLE_NODE_EPOCH: LeaderEpoch = LeaderEpoch(0);

impl Partition {
    pub(crate) fn new(tp: TopicPartition, topic_id: TopicId, log: Arc<Log>) -> Partition {
        Partition {
            tp,
            topic_id,
            log,
            appended: Notify::new(),
        }
    }

    /// The partition's log.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        SINGLE_NODE_EPOCH
    }

    /// Appends producer batches (validated, offsets assigned by the log) and
    /// wakes fetchers waiting for data.
    pub fn append(&self, batches: &[u8], now: Timestamp) -> Result<AppendOutcome, Error> {
        let out = self
            .log
            .append(batches, self.leader_epoch(), now)
            .map_err(|e| self.storage_error(e))?;
        if matches!(out, AppendOutcome::Appended(_)) {
            self.appended.notify_waiters();
        }
        Ok(out)
    }

    /// [`Partition::append`] leaving the disk work it causes to the caller
    /// (see [`storage::Log::append_deferred`]).
    pub fn append_deferred(
        &self,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<(AppendOutcome, storage::SyncWork), Error> {
        let out = self
            .log
            .append_deferred(batches, self.leader_epoch(), now)
            .map_err(|e| self.storage_error(e))?;
        if matches!(out.0, AppendOutcome::Appended(_)) {
            self.appended.notify_waiters();
        }
        Ok(out)
    }

    /// Reads whole batches from `offset`.
    pub fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<ReadResult, Error> {
        self.log
            .read(offset, max_bytes, min_one)
            .map_err(|e| self.storage_error(e))
    }

    /// Where the batches [`Partition::read`] would return lie in their
    /// segment file, without reading them.
    pub fn read_region(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<storage::RegionRead, Error> {
        self.log
            .read_region(offset, max_bytes, min_one)
            .map_err(|e| self.storage_error(e))
    }

    /// A future that completes at the next append. Call
    /// `Notified::enable` (or create it) *before* checking for data, so an
    /// append in between is not missed.
    pub fn appended(&self) -> tokio::sync::futures::Notified<'_> {
        self.appended.notified()
    }

    /// Wraps a storage error with this partition's name.
    pub fn storage_error(&self, source: storage::Error) -> Error {
        Error::Storage {
            partition: self.tp.to_string(),
            source,
        }
    }
}
