//! The durable group log: committed offsets and group metadata as records
//! in the internal `__consumer_offsets` topic, replayed at start-up.
//!
//! Each record's key says what it is about (an offset of one group and
//! partition, or a group's metadata); a record with no value is a tombstone.
//! The log is kept small by snapshotting: the live state is appended as new
//! records and the log start moves past everything older, so a crash at any
//! point replays to the same state.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use model::Offset;
use serde::{Deserialize, Serialize};
use storage::AppendOutcome;

use crate::{now_ms, Error, Partition};

/// The internal topic's name.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

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
    partition: Arc<Partition>,
}

impl GroupLog {
    /// Wraps the internal topic's partition.
    pub fn new(partition: Arc<Partition>) -> GroupLog {
        GroupLog { partition }
    }

    /// Appends records as one batch; returns once they are in the log.
    pub fn append(&self, records: &[(RecordKey, Option<Vec<u8>>)]) -> Result<(), Error> {
        if records.is_empty() {
            return Ok(());
        }
        let ts = now_ms().0;
        let encoded: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, (k, v))| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // Equal offset and sequence keep every record in one batch.
                sequence: i as i32,
                timestamp: ts,
                key: Some(Bytes::from(serde_json::to_vec(k).unwrap_or_default())),
                value: v.as_ref().map(|v| Bytes::copy_from_slice(v)),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &encoded,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .map_err(|e| Error::InvalidRequest(format!("cannot encode group records: {e}")))?;
        match self.partition.append(&buf, now_ms())? {
            AppendOutcome::Appended(_) | AppendOutcome::Duplicate(_) => Ok(()),
        }
    }

    /// Every record from the log start, in order.
    pub fn replay(&self) -> Result<Vec<StoredRecord>, Error> {
        let log = self.partition.log();
        let mut next = log.log_start_offset();
        let end = log.high_watermark();
        let mut out = Vec::new();
        while next < end {
            let chunk = self.partition.read(next, REPLAY_CHUNK, true)?;
            if chunk.records.is_empty() {
                break;
            }
            let mut buf = chunk.records.clone();
            let sets =
                RecordBatchDecoder::decode_all(&mut buf).map_err(|e| Error::MetadataCorrupt {
                    path: log.dir().to_path_buf(),
                    reason: format!("undecodable group record batch: {e}"),
                })?;
            for set in sets {
                for r in set.records {
                    next = Offset(r.offset + 1);
                    let Some(key) = r.key.as_ref().and_then(|k| serde_json::from_slice(k).ok())
                    else {
                        tracing::warn!(
                            offset = r.offset,
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
        self.partition.log().size_bytes()
    }

    /// Replaces the log's history with `live`: appends it, then moves the log
    /// start to where it begins, so older segments can be deleted.
    pub fn snapshot(&self, live: &[(RecordKey, Option<Vec<u8>>)]) -> Result<(), Error> {
        let start = self.partition.log().log_end_offset();
        for chunk in live.chunks(1000) {
            self.append(chunk)?;
        }
        self.partition
            .log()
            .delete_records_before(start)
            .map_err(|e| self.partition.storage_error(e))?;
        Ok(())
    }
}
