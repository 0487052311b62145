//! Sparse per-segment indexes, kept in memory and mirrored to append-only
//! files.
//!
//! * `.index`: `relative offset u32 | file position u32` of a batch, one entry
//!   every `index_interval_bytes` of log.
//! * `.timeindex`: `max timestamp so far i64 | relative offset u32`, where the
//!   offset is the last offset of the batch that raised the maximum.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{IoContext, Result};
use crate::files::CachedFile;

/// One fixed-size index entry.
pub(crate) trait Entry: Copy {
    /// Encoded size in bytes.
    const SIZE: usize;
    /// Writes the entry into `out` (exactly `SIZE` bytes).
    fn encode(&self, out: &mut [u8]);
    /// Reads an entry from `buf` (exactly `SIZE` bytes).
    fn decode(buf: &[u8]) -> Self;
    /// Whether `next` may follow `self` in a well-formed index.
    fn precedes(&self, next: &Self) -> bool;
}

/// An `.index` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    /// Batch base offset minus the segment base offset.
    pub relative_offset: u32,
    /// Byte position of the batch in the segment's log file.
    pub position: u32,
}

impl Entry for OffsetEntry {
    const SIZE: usize = 8;
    fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        out[4..8].copy_from_slice(&self.position.to_be_bytes());
    }
    fn decode(buf: &[u8]) -> Self {
        OffsetEntry {
            relative_offset: u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]),
            position: u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]),
        }
    }
    fn precedes(&self, next: &Self) -> bool {
        self.relative_offset < next.relative_offset && self.position < next.position
    }
}

/// A `.timeindex` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    /// Largest record timestamp in the segment up to `relative_offset`.
    pub timestamp: i64,
    /// Last offset (relative) of the batch that set `timestamp`.
    pub relative_offset: u32,
}

impl Entry for TimeEntry {
    const SIZE: usize = 12;
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(buf: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&buf[..8]);
        TimeEntry {
            timestamp: i64::from_be_bytes(ts),
            relative_offset: u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]),
        }
    }
    fn precedes(&self, next: &Self) -> bool {
        self.timestamp < next.timestamp && self.relative_offset <= next.relative_offset
    }
}

/// An index: entries in memory, mirrored to an append-only file that is
/// opened (through the open-file cache) only to write.
#[derive(Debug)]
pub(crate) struct Index<E: Entry> {
    file: CachedFile,
    entries: Vec<E>,
}

impl<E: Entry> Index<E> {
    /// Creates (or empties) the index file at `path`.
    pub fn create(path: &Path) -> Result<Self> {
        Ok(Index {
            file: CachedFile::create(path.to_path_buf(), true)?,
            entries: Vec::new(),
        })
    }

    /// Loads the index file at `path`. `Ok(None)` when it is missing or
    /// malformed (the caller then rebuilds it from the log); `accept` vets
    /// each entry against the segment (e.g. positions within the file).
    pub fn load(path: &Path, accept: impl Fn(&E) -> bool) -> Result<Option<Self>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at(path),
        };
        if bytes.len() % E::SIZE != 0 {
            return Ok(None);
        }
        let entries: Vec<E> = bytes.chunks_exact(E::SIZE).map(E::decode).collect();
        let ordered = entries.windows(2).all(|w| w[0].precedes(&w[1]));
        if !ordered || !entries.iter().all(accept) {
            return Ok(None);
        }
        Ok(Some(Index {
            file: CachedFile::new(path.to_path_buf()),
            entries,
        }))
    }

    /// Appends one entry (the caller keeps entries ordered).
    pub fn append(&mut self, entry: E) -> Result<()> {
        let mut buf = [0u8; 16];
        entry.encode(&mut buf[..E::SIZE]);
        let at = (self.entries.len() * E::SIZE) as u64;
        self.file
            .get()?
            .write_all_at(&buf[..E::SIZE], at)
            .at(self.file.path())?;
        self.entries.push(entry);
        Ok(())
    }

    /// Replaces the whole index with `entries`.
    pub fn reset(&mut self, entries: Vec<E>) -> Result<()> {
        let mut buf = vec![0u8; entries.len() * E::SIZE];
        for (e, out) in entries.iter().zip(buf.chunks_exact_mut(E::SIZE)) {
            e.encode(out);
        }
        let file = self.file.get()?;
        file.set_len(0).at(self.file.path())?;
        file.write_all_at(&buf, 0).at(self.file.path())?;
        self.entries = entries;
        Ok(())
    }

    /// All entries, in order.
    #[cfg(test)]
    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The last entry, if any.
    pub fn last(&self) -> Option<&E> {
        self.entries.last()
    }

    /// The last entry for which `before` holds, given that `before` is true
    /// for a prefix of the entries.
    pub fn floor_by(&self, before: impl Fn(&E) -> bool) -> Option<E> {
        let n = self.entries.partition_point(before);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    /// The file handle, to fsync it without holding the log's lock.
    pub fn file(&self) -> Result<(Arc<File>, PathBuf)> {
        Ok((self.file.get()?, self.file.path().to_path_buf()))
    }

    /// The index file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_reload_and_malformed_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = Index::<OffsetEntry>::create(&path).unwrap();
        for i in 0..10u32 {
            idx.append(OffsetEntry {
                relative_offset: i * 10,
                position: i * 100,
            })
            .unwrap();
        }
        let loaded = Index::<OffsetEntry>::load(&path, |_| true)
            .unwrap()
            .unwrap();
        assert_eq!(loaded.entries(), idx.entries());
        let floor = loaded.floor_by(|e| e.relative_offset <= 35).unwrap();
        assert_eq!(floor.relative_offset, 30);
        assert!(loaded.floor_by(|_| false).is_none());

        // A torn entry or an out-of-bounds position makes the file unusable.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[1, 2, 3]))
            .unwrap();
        assert!(Index::<OffsetEntry>::load(&path, |_| true)
            .unwrap()
            .is_none());
        idx.reset(vec![OffsetEntry {
            relative_offset: 0,
            position: 5000,
        }])
        .unwrap();
        assert!(Index::<OffsetEntry>::load(&path, |e| e.position < 4000)
            .unwrap()
            .is_none());
        assert!(
            Index::<TimeEntry>::load(&dir.path().join("missing"), |_| true)
                .unwrap()
                .is_none()
        );
    }
}
