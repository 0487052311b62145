//! The durable group log: committed offsets and group metadata as records
//! in the internal `__consumer_offsets` topic, replayed at start-up.
//!
//! Each record's key says what it is about (an offset of one group and
//! partition, a group's metadata, a subscription's cursor, a partition's
//! producer sequences or a topic's schema); a record with no value is a
//! tombstone.
//! The log is kept small by snapshotting: the live state is appended as new
//! records and the log start moves past everything older, so a crash at any
//! point replays to the same state.

use std::sync::Arc;

use bytes::Bytes;
use model::now_ms;
use serde::{Deserialize, Serialize};
use storage::records::RecordIter;
use storage::{AppendOutcome, BatchBuilder, BatchHeader, Compression};

use super::log::StateLog;
use crate::error::CoordError;

/// The internal topic's name.
pub use model::OFFSETS_TOPIC;

/// The internal topic's metadata as node `node` keeps it, with id `id`:
/// one partition, never expired by time or size (the coordinator compacts
/// it itself).
pub fn offsets_topic_record(
    node: magnetar_metadata::records::NodeId,
    id: model::TopicId,
) -> magnetar_metadata::image::TopicRecord {
    let mut config = magnetar_config::TopicConfig::default();
    for (k, v) in [
        ("retention.ms", "-1"),
        ("retention.bytes", "-1"),
        ("segment.bytes", "16777216"),
        ("cleanup.policy", "compact"),
    ] {
        config
            .set(k, v)
            .expect("the offsets topic's settings are valid");
    }
    magnetar_metadata::image::TopicRecord {
        name: model::TopicName::new(OFFSETS_TOPIC).expect("a valid topic name"),
        id,
        kind: magnetar_config::TopicKind::Partitioned,
        partitions: 1,
        config,
        placements: vec![magnetar_metadata::records::PartitionState::single(node)],
    }
}

/// Most bytes read per step while replaying.
const REPLAY_CHUNK: usize = 1 << 20;

/// What a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RecordKey {
    /// A committed offset.
    Offset {
        /// Group id.
        group: String,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
    /// A group's metadata (members, generation, assignments).
    Group {
        /// Group id.
        group: String,
    },
    /// A durable subscription's cursor (value:
    /// [`crate::subscription::CursorRecord::encode`]).
    Subscription {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
        /// Subscription name.
        subscription: String,
    },
    /// A partition's producer sequences (value:
    /// [`crate::sequences::SequenceSnapshot::encode`]).
    ProducerSequences {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
    /// One version of a topic's schema (value:
    /// [`crate::schema::StoredSchema::encode`]).
    Schema {
        /// Topic name.
        topic: String,
        /// Schema version.
        version: u64,
    },
    /// A transactional id's state (value: [`crate::txn::state::TxnMetadata`] as
    /// JSON), as Kafka keeps it in `__transaction_state`.
    Transaction {
        /// The transactional id.
        transactional_id: String,
    },
    /// The id of the topic of this name that the records about it are
    /// about (value: the [`model::TopicId`] as JSON): a topic deleted and
    /// created again while this broker was away has another id, and the
    /// old one's offsets, cursors, sequences and schemas are dropped.
    TopicId {
        /// Topic name.
        topic: String,
    },
    /// Offsets a producer staged for a group in a transaction another
    /// broker coordinates (value: [`crate::txn::staged_store::Staged`] as JSON).
    StagedTxnOffsets {
        /// Group id.
        group: String,
        /// The transaction's producer id.
        producer_id: i64,
    },
}

impl RecordKey {
    /// The topic the record is about, if it is about one.
    pub fn topic(&self) -> Option<&str> {
        match self {
            RecordKey::Offset { topic, .. }
            | RecordKey::Subscription { topic, .. }
            | RecordKey::ProducerSequences { topic, .. }
            | RecordKey::Schema { topic, .. }
            | RecordKey::TopicId { topic } => Some(topic),
            RecordKey::Group { .. }
            | RecordKey::Transaction { .. }
            | RecordKey::StagedTxnOffsets { .. } => None,
        }
    }
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    /// The next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// Client metadata string.
    pub metadata: Option<String>,
    /// When it was committed (ms).
    pub commit_timestamp: i64,
}

/// A record read back from the log.
#[derive(Debug, Clone)]
pub struct StoredRecord {
    /// Its key.
    pub key: RecordKey,
    /// Its value; `None` is a tombstone.
    pub value: Option<Bytes>,
}

/// The `__consumer_offsets` partition.
#[derive(Debug, Clone)]
pub struct GroupLog {
    partition: Arc<dyn StateLog>,
}

impl GroupLog {
    /// Wraps the internal topic's partition.
    pub fn new(partition: Arc<dyn StateLog>) -> GroupLog {
        GroupLog { partition }
    }

    /// Wraps a storage error with the partition's name.
    fn storage_error(&self, source: storage::Error) -> CoordError {
        CoordError::Storage {
            partition: self.partition.name(),
            source,
        }
    }

    /// Appends records as one batch; returns once they are in the log.
    pub fn append(&self, records: &[(RecordKey, Option<Vec<u8>>)]) -> Result<(), CoordError> {
        if records.is_empty() {
            return Ok(());
        }
        let ts = now_ms();
        let mut batch = BatchBuilder::new(Compression::None);
        for (k, v) in records {
            let key = serde_json::to_vec(k).unwrap_or_default();
            batch
                .append(ts, Some(&key), v.as_deref(), &[])
                .map_err(|e| {
                    CoordError::InvalidRequest(format!("cannot encode group records: {e}"))
                })?;
        }
        let buf = batch
            .build()
            .map_err(|e| CoordError::InvalidRequest(format!("cannot encode group records: {e}")))?;
        match self.partition.append_batches(&buf, now_ms())? {
            AppendOutcome::Appended(_) | AppendOutcome::Duplicate(_) => Ok(()),
        }
    }

    /// Makes what was appended durable (fsync).
    pub fn flush(&self) -> Result<(), CoordError> {
        self.partition
            .storage()
            .flush()
            .map_err(|e| self.storage_error(e))
    }

    /// Every record from the log start to the log end, in order (a
    /// replicated log's new leader serves everything it has: records past
    /// its high watermark become committed as its followers catch up).
    pub fn replay(&self) -> Result<Vec<StoredRecord>, CoordError> {
        let log = self.partition.storage();
        let start = log.log_start_offset();
        let mut next = start;
        let end = log.log_end_offset();
        let mut out = Vec::new();
        while next < end {
            // To the log end: a new leader's high watermark may still be
            // behind records its predecessor had committed (it learns the
            // high watermark one fetch late).
            let region = log
                .read_region_to_end(next, REPLAY_CHUNK, true)
                .map_err(|e| self.storage_error(e))?;
            let records = match &region.region {
                Some(r) => r.read_all().map_err(|e| self.storage_error(e))?,
                None => Bytes::new(),
            };
            if records.is_empty() {
                break;
            }
            let corrupt = |e: storage::BatchError| CoordError::MetadataCorrupt {
                path: log.dir().to_path_buf(),
                reason: format!("undecodable group record batch: {e}"),
            };
            let limit = log.config().max_decompressed_bytes();
            let mut rest = records;
            while !rest.is_empty() {
                let size = BatchHeader::parse(&rest).map_err(corrupt)?.total_size();
                let batch = rest.split_to(size.min(rest.len()));
                for r in RecordIter::new(batch, limit).map_err(corrupt)? {
                    let r = r.map_err(corrupt)?;
                    if r.offset < start {
                        // The log start may fall inside a batch.
                        continue;
                    }
                    next = r.offset.plus(1);
                    let Some(key) = r.key.as_ref().and_then(|k| serde_json::from_slice(k).ok())
                    else {
                        tracing::warn!(
                            offset = r.offset.0,
                            "skipping group record with an unreadable key"
                        );
                        continue;
                    };
                    out.push(StoredRecord {
                        key,
                        value: r.value,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Bytes the log holds.
    pub fn size_bytes(&self) -> u64 {
        self.partition.storage().size_bytes()
    }

    /// Replaces the log's history with `live`, in two steps: appends it
    /// and returns where it begins ([`GroupLog::finish_snapshot`] then
    /// moves the log start there, outside the callers' locks).
    pub fn append_snapshot(
        &self,
        live: &[(RecordKey, Option<Vec<u8>>)],
    ) -> Result<model::Offset, CoordError> {
        let start = self.partition.storage().log_end_offset();
        for chunk in live.chunks(1000) {
            self.append(chunk)?;
        }
        Ok(start)
    }

    /// Moves the log start to `start` (from [`GroupLog::append_snapshot`])
    /// once the snapshot is committed, so older segments can be deleted:
    /// a new leader must never find the history gone and the snapshot
    /// missing. Blocking; call it holding no lock the group log's writers
    /// take.
    pub fn finish_snapshot(&self, start: model::Offset) -> Result<(), CoordError> {
        self.partition.wait_committed()?;
        self.partition
            .storage()
            .delete_records_before(start)
            .map_err(|e| self.storage_error(e))?;
        Ok(())
    }
}
