//! Writing a cleaned segment: the `.cleaned` data file and its two indexes,
//! built as the batches go in with the same rules as a segment's own.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use model::Offset;

use super::swap::{cleaned_path, discard_cleaned};
use crate::batch::BatchHeader;
use crate::error::{IoContext, Result};
use crate::index::{Index, OffsetEntry, TimeEntry};
use crate::segment::{INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};

/// Bytes buffered before a write.
const WRITE_BUFFER: usize = 256 * 1024;

/// A cleaned segment being written.
#[derive(Debug)]
pub(crate) struct CleanedWriter {
    dir: PathBuf,
    base: Offset,
    path: PathBuf,
    file: File,
    /// Bytes written to the file so far.
    flushed: u64,
    /// Bytes waiting to be written after them.
    buf: Vec<u8>,
    interval: u64,
    bytes_since_index: u64,
    offsets: Vec<OffsetEntry>,
    times: Vec<TimeEntry>,
    max_timestamp: i64,
    offset_of_max_timestamp: Offset,
}

impl CleanedWriter {
    /// Starts `{base}.log.cleaned` in `dir` (replacing a leftover one).
    pub fn create(dir: &Path, base: Offset, index_interval_bytes: u32) -> Result<CleanedWriter> {
        let path = cleaned_path(dir, base, LOG_EXT);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .at(&path)?;
        Ok(CleanedWriter {
            dir: dir.to_path_buf(),
            base,
            path,
            file,
            flushed: 0,
            buf: Vec::with_capacity(WRITE_BUFFER),
            interval: u64::from(index_interval_bytes),
            bytes_since_index: 0,
            offsets: Vec::new(),
            times: Vec::new(),
            max_timestamp: -1,
            offset_of_max_timestamp: base,
        })
    }

    /// Bytes of the segment so far.
    pub fn size(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    /// Appends one whole batch whose header is `h`. Batches come in offset
    /// order; their offsets fit the segment's relative offsets (the caller
    /// groups segments so).
    pub fn append(&mut self, batch: &[u8], h: &BatchHeader) -> Result<()> {
        let position = self.size();
        if h.max_timestamp.0 > self.max_timestamp {
            self.max_timestamp = h.max_timestamp.0;
            self.offset_of_max_timestamp = h.last_offset();
        }
        // The same sparse rule as a segment's own appends and rebuilds.
        if self.bytes_since_index >= self.interval {
            self.offsets.push(OffsetEntry {
                relative_offset: self.relative(h.base_offset),
                position: position as u32,
            });
            if let Some(t) = self.time_entry_due() {
                self.times.push(t);
            }
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += batch.len() as u64;
        self.buf.extend_from_slice(batch);
        if self.buf.len() >= WRITE_BUFFER {
            self.write_buffer()?;
        }
        Ok(())
    }

    fn relative(&self, offset: Offset) -> u32 {
        (offset.0 - self.base.0) as u32
    }

    fn time_entry_due(&self) -> Option<TimeEntry> {
        let newer = match self.times.last() {
            Some(last) => self.max_timestamp > last.timestamp,
            None => self.max_timestamp >= 0,
        };
        newer.then(|| TimeEntry {
            timestamp: self.max_timestamp,
            relative_offset: self.relative(self.offset_of_max_timestamp),
        })
    }

    fn write_buffer(&mut self) -> Result<()> {
        self.file
            .write_all_at(&self.buf, self.flushed)
            .at(&self.path)?;
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is buffered and the indexes (the time index sealed with
    /// the segment's largest timestamp, as a closed segment's is), gives the
    /// data file the modification time `modified` (the newest of the
    /// segments it replaces: tombstone expiry and time retention of
    /// timestamp-less records count from it), and fsyncs all three files.
    /// Returns the data file's size.
    pub fn finish(mut self, modified: SystemTime) -> Result<u64> {
        self.write_buffer()?;
        if let Some(t) = self.time_entry_due() {
            self.times.push(t);
        }
        let offsets = std::mem::take(&mut self.offsets);
        let times = std::mem::take(&mut self.times);
        write_index(&cleaned_path(&self.dir, self.base, INDEX_EXT), offsets)?;
        write_index(&cleaned_path(&self.dir, self.base, TIME_INDEX_EXT), times)?;
        self.file.set_modified(modified).at(&self.path)?;
        // Data (and its mtime) durable before anything can commit to it.
        self.file.sync_all().at(&self.path)?;
        Ok(self.flushed)
    }

    /// Gives up: deletes what was written.
    pub fn discard(self) -> Result<()> {
        let (dir, base) = (self.dir.clone(), self.base);
        drop(self);
        discard_cleaned(&dir, base)
    }
}

/// Writes and fsyncs a whole index file.
fn write_index<E: crate::index::Entry>(path: &Path, entries: Vec<E>) -> Result<()> {
    let mut index = Index::<E>::create(path)?;
    index.reset(entries)?;
    let (file, path) = index.file()?;
    file.sync_all().at(&path)
}
