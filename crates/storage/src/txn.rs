//! Transactions in the log (KIP-98): the commit and abort markers written
//! as control batches, and the aborted-transaction index each segment keeps
//! beside its data (`{base:020}.txnindex`, Kafka's file and entry format) so
//! that `read_committed` fetches can tell consumers which records to drop.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use model::{Offset, ProducerEpoch, ProducerId, Timestamp};

use crate::batch::{Compression, CONTROL_FLAG, TRANSACTIONAL_FLAG};
use crate::builder::BatchBuilder;
use crate::error::{corrupt, IoContext, Result};
use crate::file_names::file_name;
use crate::records::RecordIter;

/// Extension of a segment's aborted-transaction index.
pub(crate) const TXN_INDEX_EXT: &str = "txnindex";
/// One index entry: version i16, producer id i64, first offset i64, last
/// offset i64, last stable offset i64 (Kafka's `AbortedTxn`).
const ENTRY_LEN: usize = 34;
const ENTRY_VERSION: i16 = 0;
/// Control record key and value version (Kafka's `ControlRecordType` and
/// `EndTransactionMarker` schemas, version 0).
const CONTROL_VERSION: i16 = 0;

/// What a transaction marker ends the transaction with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    /// The transaction's records are dropped by `read_committed` readers.
    Abort,
    /// The transaction's records become visible to `read_committed` readers.
    Commit,
}

impl ControlType {
    fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }

    fn from_code(code: i16) -> Option<ControlType> {
        match code {
            0 => Some(ControlType::Abort),
            1 => Some(ControlType::Commit),
            _ => None,
        }
    }
}

/// A transaction marker for one partition, as the transaction coordinator
/// asks for it (Kafka's WriteTxnMarkers entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    /// The producer whose transaction ends.
    pub producer_id: ProducerId,
    /// Its epoch (at least the epoch of its transactional batches).
    pub producer_epoch: ProducerEpoch,
    /// Commit or abort.
    pub control: ControlType,
    /// The coordinator's epoch: a marker of an older coordinator is fenced.
    pub coordinator_epoch: i32,
}

/// A transaction that ended with an abort: `read_committed` readers drop
/// the producer's records in `[first_offset, last_offset]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer.
    pub producer_id: ProducerId,
    /// The transaction's first record.
    pub first_offset: Offset,
    /// The abort marker's offset.
    pub last_offset: Offset,
    /// The last stable offset once the marker was written.
    pub last_stable_offset: Offset,
}

/// The control batch of `marker` (one record, uncompressed, no sequence).
pub fn control_batch(marker: &TxnMarker, timestamp: Timestamp) -> BytesMut {
    let mut key = [0u8; 4];
    key[..2].copy_from_slice(&CONTROL_VERSION.to_be_bytes());
    key[2..].copy_from_slice(&marker.control.code().to_be_bytes());
    let mut value = [0u8; 6];
    value[..2].copy_from_slice(&CONTROL_VERSION.to_be_bytes());
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut b = BatchBuilder::new(Compression::None)
        .producer(marker.producer_id, marker.producer_epoch, -1)
        .flags(TRANSACTIONAL_FLAG | CONTROL_FLAG);
    b.append(timestamp, Some(&key), Some(&value), &[])
        .expect("a control record always encodes");
    b.build().expect("a control batch has its record")
}

/// The marker a stored control batch holds: its type and coordinator epoch
/// (`None` for a control batch of another kind, which Kafka also skips).
pub fn parse_control(batch: &[u8]) -> Option<(ControlType, i32)> {
    let mut records = RecordIter::new(Bytes::copy_from_slice(batch), 1 << 16).ok()?;
    let record = records.next()?.ok()?;
    let key = record.key?;
    if key.len() < 4 {
        return None;
    }
    let control = ControlType::from_code(i16::from_be_bytes([key[2], key[3]]))?;
    let epoch = match record.value {
        Some(v) if v.len() >= 6 => i32::from_be_bytes([v[2], v[3], v[4], v[5]]),
        _ => -1,
    };
    Some((control, epoch))
}

/// Path of the aborted-transaction index of the segment at `base`.
pub(crate) fn index_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(file_name(base, TXN_INDEX_EXT))
}

fn encode(t: &AbortedTxn, out: &mut Vec<u8>) {
    out.extend_from_slice(&ENTRY_VERSION.to_be_bytes());
    out.extend_from_slice(&t.producer_id.0.to_be_bytes());
    out.extend_from_slice(&t.first_offset.0.to_be_bytes());
    out.extend_from_slice(&t.last_offset.0.to_be_bytes());
    out.extend_from_slice(&t.last_stable_offset.0.to_be_bytes());
}

/// Reads an index; a missing file is an empty index, and a torn last entry
/// (a crash mid-append) is ignored: the replay after a crash writes it again.
pub(crate) fn read_index(path: &Path) -> Result<Vec<AbortedTxn>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).at(path),
    };
    let i64_at = |c: &[u8], at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&c[at..at + 8]);
        i64::from_be_bytes(b)
    };
    let mut out = Vec::with_capacity(bytes.len() / ENTRY_LEN);
    for c in bytes.chunks_exact(ENTRY_LEN) {
        let version = i16::from_be_bytes([c[0], c[1]]);
        if version != ENTRY_VERSION {
            return Err(corrupt(
                path,
                format!("unknown aborted-transaction entry version {version}"),
            ));
        }
        out.push(AbortedTxn {
            producer_id: ProducerId(i64_at(c, 2)),
            first_offset: Offset(i64_at(c, 10)),
            last_offset: Offset(i64_at(c, 18)),
            last_stable_offset: Offset(i64_at(c, 26)),
        });
    }
    Ok(out)
}

/// Appends one entry to the index at `path` (created if needed); made
/// durable with the segment (see [`sync_index`]).
pub(crate) fn append_index(path: &Path, t: &AbortedTxn) -> Result<()> {
    let mut bytes = Vec::with_capacity(ENTRY_LEN);
    encode(t, &mut bytes);
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .at(path)?;
    // A torn earlier append leaves a partial entry: start at a whole one.
    let len = f.metadata().at(path)?.len();
    if len % ENTRY_LEN as u64 != 0 {
        f.set_len(len - len % ENTRY_LEN as u64).at(path)?;
    }
    f.write_all(&bytes).at(path)
}

/// Replaces the index at `path` with `entries` (none: the file is removed).
pub(crate) fn write_index(path: &Path, entries: &[AbortedTxn]) -> Result<()> {
    if entries.is_empty() {
        return remove_index(path);
    }
    let mut bytes = Vec::with_capacity(entries.len() * ENTRY_LEN);
    for t in entries {
        encode(t, &mut bytes);
    }
    crate::checkpoint::write_atomic(path, &bytes)
}

/// Deletes the index at `path`, if there is one.
pub(crate) fn remove_index(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).at(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BatchHeader;

    #[test]
    fn control_batches_round_trip() {
        for control in [ControlType::Abort, ControlType::Commit] {
            let m = TxnMarker {
                producer_id: ProducerId(7),
                producer_epoch: ProducerEpoch(3),
                control,
                coordinator_epoch: 11,
            };
            let b = control_batch(&m, Timestamp(1_000));
            let h = BatchHeader::parse(&b).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(h.producer_id, ProducerId(7));
            assert_eq!(h.producer_epoch, ProducerEpoch(3));
            assert_eq!(h.base_sequence, -1);
            assert_eq!(h.record_count, 1);
            assert_eq!(crate::batch::compute_crc(&b), h.crc);
            assert_eq!(parse_control(&b), Some((control, 11)));
        }
    }

    #[test]
    fn the_index_survives_a_torn_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path(), Offset(0));
        assert!(read_index(&path).unwrap().is_empty());
        let t = |n: i64| AbortedTxn {
            producer_id: ProducerId(n),
            first_offset: Offset(n),
            last_offset: Offset(n + 5),
            last_stable_offset: Offset(n + 6),
        };
        append_index(&path, &t(1)).unwrap();
        append_index(&path, &t(2)).unwrap();
        // A crash in the middle of the third entry.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0u8; 10]).unwrap();
        assert_eq!(read_index(&path).unwrap(), vec![t(1), t(2)]);
        append_index(&path, &t(3)).unwrap();
        assert_eq!(read_index(&path).unwrap(), vec![t(1), t(2), t(3)]);
        write_index(&path, &[t(3)]).unwrap();
        assert_eq!(read_index(&path).unwrap(), vec![t(3)]);
        write_index(&path, &[]).unwrap();
        assert!(!path.exists());
    }
}
