//! The Raft log on files: segment files of CRC-checked records and a small
//! two-slot metadata file (vote, committed, purged). Synchronous; the log
//! store runs it on its writer thread.
//!
//! A record is `len: u32 LE | crc32c(payload): u32 LE | payload`; the entry
//! index is the segment's first index (in its name) plus the record's
//! position. Every write is followed by `fdatasync` before it is reported
//! done. On open, a torn or corrupt tail of the last segment (a crash in the
//! middle of an append) is cut off; damage anywhere else is an error.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ControllerError, Result};
use crate::types::{LogId, Vote};

const RECORD_HEADER: usize = 8;
const SEGMENT_SUFFIX: &str = ".seg";
const META_FILE: &str = "meta";
const META_MAGIC: u32 = 0x4d47_524d; // "MGRM"
const META_SLOT: u64 = 4096;
const META_HEADER: usize = 20;

/// What the metadata file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MetaState {
    /// The last saved vote.
    pub vote: Option<Vote>,
    /// The last saved committed log id.
    pub committed: Option<LogId>,
    /// The last purged log id: entries up to it are gone.
    pub purged: Option<LogId>,
}

struct Segment {
    first: u64,
    path: PathBuf,
    file: File,
    len: u64,
    /// File offset of each record; record `k` holds index `first + k`.
    offsets: Vec<u64>,
}

impl Segment {
    /// The index the next appended record gets.
    fn next_index(&self) -> u64 {
        self.first + self.offsets.len() as u64
    }
}

/// The segment files and metadata file of one log directory.
pub(crate) struct LogFiles {
    dir: PathBuf,
    segment_bytes: u64,
    max_record: usize,
    segments: Vec<Segment>,
    meta_file: File,
    meta_seq: u64,
    meta: MetaState,
}

/// An entry payload read back on open, with its index.
pub(crate) struct StoredRecord {
    pub index: u64,
    pub payload: Vec<u8>,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ControllerError + '_ {
    move |e| ControllerError::io(path, e)
}

/// Fsyncs a directory so that creations, renames and removals in it last.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

fn segment_name(first: u64) -> String {
    format!("{first:020}{SEGMENT_SUFFIX}")
}

/// Splits `buf` into valid records; returns their (offset, payload range)
/// and the length of the valid prefix.
fn scan_records(buf: &[u8], max_record: usize) -> (Vec<(u64, std::ops::Range<usize>)>, usize) {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while buf.len() - pos >= RECORD_HEADER {
        let len = u32::from_le_bytes([buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]]) as usize;
        let crc = u32::from_le_bytes([buf[pos + 4], buf[pos + 5], buf[pos + 6], buf[pos + 7]]);
        let start = pos + RECORD_HEADER;
        if len > max_record || buf.len() - start < len {
            break;
        }
        if crc32c::crc32c(&buf[start..start + len]) != crc {
            break;
        }
        records.push((pos as u64, start..start + len));
        pos = start + len;
    }
    (records, pos)
}

impl LogFiles {
    /// Opens (creating if needed) the log in `dir`, repairs a torn tail, and
    /// returns the files, the stored records in index order and the metadata.
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
        max_record: usize,
    ) -> Result<(LogFiles, Vec<StoredRecord>)> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let (meta_file, meta_seq, meta) = open_meta(dir)?;
        let mut firsts = Vec::new();
        for item in fs::read_dir(dir).map_err(io_err(dir))? {
            let item = item.map_err(io_err(dir))?;
            let name = item.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(SEGMENT_SUFFIX) {
                let first = stem.parse::<u64>().map_err(|_| {
                    ControllerError::corrupt(item.path(), "segment name is not an index")
                })?;
                firsts.push(first);
            }
        }
        firsts.sort_unstable();
        let mut segments: Vec<Segment> = Vec::new();
        let mut records = Vec::new();
        let count = firsts.len();
        for (i, first) in firsts.into_iter().enumerate() {
            let path = dir.join(segment_name(first));
            if let Some(prev) = segments.last() {
                if prev.next_index() != first {
                    return Err(ControllerError::corrupt(
                        &path,
                        format!("segment starts at {first}, expected {}", prev.next_index()),
                    ));
                }
            }
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(io_err(&path))?;
            let mut buf = Vec::new();
            file.read_to_end(&mut buf).map_err(io_err(&path))?;
            let (found, valid) = scan_records(&buf, max_record);
            if valid < buf.len() {
                if i + 1 != count {
                    return Err(ControllerError::corrupt(
                        &path,
                        format!("bad record at offset {valid} of a sealed segment"),
                    ));
                }
                tracing::warn!(
                    path = %path.display(),
                    offset = valid,
                    dropped = buf.len() - valid,
                    "controller log: cutting off a torn tail"
                );
                file.set_len(valid as u64).map_err(io_err(&path))?;
                file.sync_data().map_err(io_err(&path))?;
            }
            let mut offsets = Vec::with_capacity(found.len());
            for (k, (offset, range)) in found.into_iter().enumerate() {
                offsets.push(offset);
                records.push(StoredRecord {
                    index: first + k as u64,
                    payload: buf[range].to_vec(),
                });
            }
            segments.push(Segment {
                first,
                path,
                file,
                len: valid as u64,
                offsets,
            });
        }
        Ok((
            LogFiles {
                dir: dir.to_path_buf(),
                segment_bytes,
                max_record,
                segments,
                meta_file,
                meta_seq,
                meta,
            },
            records,
        ))
    }

    /// The metadata as last saved.
    pub(crate) fn meta(&self) -> &MetaState {
        &self.meta
    }

    /// Appends records for `first_index..` and syncs them.
    pub(crate) fn append(&mut self, first_index: u64, payloads: &[Vec<u8>]) -> Result<()> {
        if payloads.is_empty() {
            return Ok(());
        }
        let roll = match self.segments.last() {
            None => true,
            Some(s) if s.next_index() != first_index => {
                if !s.offsets.is_empty() || s.first != first_index {
                    return Err(ControllerError::corrupt(
                        &s.path,
                        format!("append at {first_index}, log ends at {}", s.next_index()),
                    ));
                }
                false
            }
            Some(s) => s.len >= self.segment_bytes,
        };
        if roll {
            self.new_segment(first_index)?;
        }
        let max_record = self.max_record;
        let Some(seg) = self.segments.last_mut() else {
            return Err(ControllerError::corrupt(
                &self.dir,
                "no segment to append to",
            ));
        };
        let mut buf = Vec::with_capacity(payloads.iter().map(|p| p.len() + RECORD_HEADER).sum());
        let mut offsets = Vec::with_capacity(payloads.len());
        for p in payloads {
            if p.len() > max_record {
                return Err(ControllerError::InvalidConfig(format!(
                    "log entry of {} bytes over the limit of {max_record}",
                    p.len()
                )));
            }
            offsets.push(seg.len + buf.len() as u64);
            buf.extend_from_slice(&(p.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32c::crc32c(p).to_le_bytes());
            buf.extend_from_slice(p);
        }
        seg.file
            .write_all_at(&buf, seg.len)
            .and_then(|()| seg.file.sync_data())
            .map_err(io_err(&seg.path))?;
        seg.len += buf.len() as u64;
        seg.offsets.extend(offsets);
        Ok(())
    }

    fn new_segment(&mut self, first: u64) -> Result<()> {
        let path = self.dir.join(segment_name(first));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io_err(&path))?;
        sync_dir(&self.dir)?;
        self.segments.push(Segment {
            first,
            path,
            file,
            len: 0,
            offsets: Vec::new(),
        });
        Ok(())
    }

    /// Removes every record from `index` on. Later segments go first, so a
    /// crash part-way leaves a contiguous prefix.
    pub(crate) fn truncate(&mut self, index: u64) -> Result<()> {
        let mut removed = false;
        while let Some(seg) = self.segments.last() {
            if seg.first < index {
                break;
            }
            fs::remove_file(&seg.path).map_err(io_err(&seg.path))?;
            self.segments.pop();
            removed = true;
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        if let Some(seg) = self.segments.last_mut() {
            if index < seg.next_index() {
                let k = (index - seg.first) as usize;
                let len = seg.offsets[k];
                seg.file
                    .set_len(len)
                    .and_then(|()| seg.file.sync_data())
                    .map_err(io_err(&seg.path))?;
                seg.offsets.truncate(k);
                seg.len = len;
            }
        }
        Ok(())
    }

    /// Deletes the segments whose records are all at or below `upto`; the
    /// caller has saved `purged` in the metadata first.
    pub(crate) fn purge(&mut self, upto: u64) -> Result<()> {
        let mut removed = 0;
        for seg in &self.segments {
            if seg.next_index() > upto + 1 {
                break;
            }
            fs::remove_file(&seg.path).map_err(io_err(&seg.path))?;
            removed += 1;
        }
        if removed > 0 {
            self.segments.drain(..removed);
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Saves the metadata durably: the slot not holding the latest copy is
    /// overwritten and synced, so a torn write leaves the other one intact.
    pub(crate) fn save_meta(&mut self, meta: MetaState) -> Result<()> {
        let path = self.dir.join(META_FILE);
        let payload = postcard::to_stdvec(&meta)
            .map_err(|e| ControllerError::corrupt(&path, format!("encode: {e}")))?;
        let seq = self.meta_seq + 1;
        let mut buf = Vec::with_capacity(META_HEADER + payload.len());
        buf.extend_from_slice(&META_MAGIC.to_le_bytes());
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let mut crc = crc32c::crc32c(&buf[4..16]);
        crc = crc32c::crc32c_append(crc, &payload);
        buf.extend_from_slice(&crc.to_le_bytes());
        buf.extend_from_slice(&payload);
        if buf.len() as u64 > META_SLOT {
            return Err(ControllerError::corrupt(
                &path,
                "metadata over its slot size",
            ));
        }
        self.meta_file
            .write_all_at(&buf, (seq % 2) * META_SLOT)
            .and_then(|()| self.meta_file.sync_data())
            .map_err(io_err(&path))?;
        self.meta_seq = seq;
        self.meta = meta;
        Ok(())
    }
}

fn parse_meta_slot(slot: &[u8]) -> Option<(u64, MetaState)> {
    if slot.len() < META_HEADER {
        return None;
    }
    let magic = u32::from_le_bytes(slot[0..4].try_into().ok()?);
    let seq = u64::from_le_bytes(slot[4..12].try_into().ok()?);
    let len = u32::from_le_bytes(slot[12..16].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(slot[16..20].try_into().ok()?);
    if magic != META_MAGIC || slot.len() - META_HEADER < len {
        return None;
    }
    let payload = &slot[META_HEADER..META_HEADER + len];
    if crc32c::crc32c_append(crc32c::crc32c(&slot[4..16]), payload) != crc {
        return None;
    }
    postcard::from_bytes(payload).ok().map(|m| (seq, m))
}

fn open_meta(dir: &Path) -> Result<(File, u64, MetaState)> {
    let path = dir.join(META_FILE);
    let existed = path.exists();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err(&path))?;
    if !existed {
        sync_dir(dir)?;
        return Ok((file, 0, MetaState::default()));
    }
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).map_err(io_err(&path))?;
    let slot = META_SLOT as usize;
    let a = parse_meta_slot(&buf[..buf.len().min(slot)]);
    let b = buf.get(slot..).and_then(parse_meta_slot);
    match (a, b) {
        (Some(a), Some(b)) => Ok(if a.0 >= b.0 {
            (file, a.0, a.1)
        } else {
            (file, b.0, b.1)
        }),
        (Some((seq, m)), None) | (None, Some((seq, m))) => Ok((file, seq, m)),
        (None, None) if buf.iter().all(|&b| b == 0) => {
            // Created, then a crash before the first save reached the disk.
            Ok((file, 0, MetaState::default()))
        }
        (None, None) => Err(ControllerError::corrupt(&path, "no valid metadata slot")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payloads(n: std::ops::Range<u64>) -> Vec<Vec<u8>> {
        n.map(|i| format!("entry-{i}").into_bytes()).collect()
    }

    #[test]
    fn append_truncate_purge_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, recs) = LogFiles::open(dir.path(), 64, 1 << 20).unwrap();
        assert!(recs.is_empty());
        log.append(1, &payloads(1..6)).unwrap();
        log.append(6, &payloads(6..11)).unwrap();
        log.append(11, &payloads(11..21)).unwrap();
        log.truncate(15).unwrap();
        log.save_meta(MetaState {
            purged: Some(LogId::new(openraft::CommittedLeaderId::new(1, 1), 7)),
            ..MetaState::default()
        })
        .unwrap();
        log.purge(7).unwrap();
        drop(log);
        let (log, recs) = LogFiles::open(dir.path(), 64, 1 << 20).unwrap();
        let idx: Vec<u64> = recs.iter().map(|r| r.index).collect();
        // Segments of whole purged records are gone; a partly purged one stays.
        assert_eq!(idx.last(), Some(&14));
        assert!(idx.first().copied().unwrap() <= 8);
        assert!(idx.windows(2).all(|w| w[1] == w[0] + 1));
        assert_eq!(recs.last().unwrap().payload, b"entry-14");
        assert_eq!(log.meta().purged.unwrap().index, 7);
    }

    #[test]
    fn torn_tail_is_cut_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = LogFiles::open(dir.path(), 1 << 20, 1 << 20).unwrap();
        log.append(1, &payloads(1..4)).unwrap();
        drop(log);
        let seg = dir.path().join(segment_name(1));
        let len = fs::metadata(&seg).unwrap().len();
        // A crash mid-append: half a record, then garbage in the last byte.
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(&[9, 0, 0, 0, 1, 2], len).unwrap();
        f.set_len(len - 1).unwrap();
        drop(f);
        let (mut log, recs) = LogFiles::open(dir.path(), 1 << 20, 1 << 20).unwrap();
        assert_eq!(recs.len(), 2);
        log.append(3, &payloads(3..5)).unwrap();
        drop(log);
        let (_, recs) = LogFiles::open(dir.path(), 1 << 20, 1 << 20).unwrap();
        assert_eq!(
            recs.iter().map(|r| r.index).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
    }

    #[test]
    fn corruption_in_a_sealed_segment_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = LogFiles::open(dir.path(), 16, 1 << 20).unwrap();
        log.append(1, &payloads(1..3)).unwrap();
        log.append(3, &payloads(3..5)).unwrap();
        drop(log);
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(segment_name(1)))
            .unwrap();
        f.write_all_at(b"X", 9).unwrap();
        drop(f);
        assert!(matches!(
            LogFiles::open(dir.path(), 16, 1 << 20),
            Err(ControllerError::Corrupt { .. })
        ));
    }

    #[test]
    fn meta_survives_a_torn_slot() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = LogFiles::open(dir.path(), 1 << 20, 1 << 20).unwrap();
        let vote = |t| MetaState {
            vote: Some(Vote::new(t, 1)),
            ..MetaState::default()
        };
        log.save_meta(vote(1)).unwrap();
        log.save_meta(vote(2)).unwrap();
        drop(log);
        // Tear the newest slot (seq 2 lives in slot 0).
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(META_FILE))
            .unwrap();
        f.write_all_at(&[0xff; 8], 8).unwrap();
        drop(f);
        let (log, _) = LogFiles::open(dir.path(), 1 << 20, 1 << 20).unwrap();
        assert_eq!(log.meta(), &vote(1));
    }
}
