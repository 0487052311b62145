//! One log segment: a `.log` file of whole v2 batches plus its two sparse
//! indexes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::io::IoSlice;

use model::{LeaderEpoch, Offset, Timestamp};

use crate::batch::{self, BatchHeader, HEADER_LEN};

use crate::error::{IoContext, Result};
use crate::files::CachedFile;
use crate::index::{Entry, Index, OffsetEntry, TimeEntry};
use crate::txn::AbortedTxn;

mod view;

pub use view::FileRegion;
pub(crate) use view::{find_timestamp_in, scan, Located, ScanEnd, SegmentView};

pub(crate) use crate::file_names::{file_name, parse_file_name};

/// Extension of segment data files.
pub(crate) const LOG_EXT: &str = "log";
/// Extension of offset index files.
pub(crate) const INDEX_EXT: &str = "index";
/// Extension of time index files.
pub(crate) const TIME_INDEX_EXT: &str = "timeindex";
/// Suffix of a deleted segment's files waiting out `file.delete.delay.ms`
/// (Kafka's).
pub(crate) const DELETED_SUFFIX: &str = ".deleted";

/// Files of a segment, to fsync outside the log's lock.
#[derive(Debug)]
pub(crate) struct SyncHandle {
    files: Vec<(Arc<File>, PathBuf)>,
}

impl SyncHandle {
    /// fsyncs every file.
    pub fn sync(&self) -> Result<()> {
        for (file, path) in &self.files {
            file.sync_data().at(path)?;
        }
        Ok(())
    }
}

/// What [`Segment::append`] changes in the headers it writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamps<'a> {
    /// CreateTime batches whose `maxTimestamp` is to be corrected:
    /// `(position in the buffer, the right value)`.
    pub fixes: &'a [(usize, Timestamp)],
    /// For a LogAppendTime log: the append time every batch is stamped
    /// with (timestamp type and `maxTimestamp`; `fixes` do not apply).
    pub log_append_time: Option<Timestamp>,
}

/// A segment: base offset, data file and indexes, and what is known about
/// its content.
#[derive(Debug)]
pub(crate) struct Segment {
    base_offset: Offset,
    log_path: PathBuf,
    /// The data file, opened on demand through the open-file cache.
    file: CachedFile,
    size: u64,
    offset_index: Index<OffsetEntry>,
    time_index: Index<TimeEntry>,
    next_offset: Offset,
    max_timestamp: Timestamp,
    offset_of_max_timestamp: Offset,
    bytes_since_index: u64,
    /// The first batch's max timestamp (if it has one): `roll_ms` counts
    /// from it in record time, as Kafka does.
    first_batch_timestamp: Option<Timestamp>,
    /// When this process first appended here: `roll_ms` counts from it in
    /// wall time when the records carry no timestamps.
    first_append_at: Option<Timestamp>,
    /// The transactions aborted by markers in this segment, in offset
    /// order, as its `.txnindex` holds them.
    aborted: Vec<AbortedTxn>,
    /// Test hook: the next append writes only this many bytes, then fails.
    #[cfg(test)]
    pub fail_next_write_after: Option<usize>,
}

/// The result of loading a segment without a full scan.
pub(crate) struct Loaded {
    pub segment: Segment,
    /// Whether an index was missing or malformed and was rebuilt by a scan.
    pub index_rebuilt: bool,
    /// Whether bad bytes were found where the log should be clean.
    pub needs_recovery: bool,
}

/// The size of the file at `path`, without opening it.
fn file_size(path: &Path) -> Result<u64> {
    std::fs::metadata(path).map(|m| m.len()).at(path)
}

impl Segment {
    /// Creates an empty segment at `base` in `dir` (replacing stale files).
    pub fn create(dir: &Path, base: Offset) -> Result<Segment> {
        let log_path = dir.join(file_name(base, LOG_EXT));
        crate::txn::remove_index(&crate::txn::index_path(dir, base))?;
        let file = CachedFile::create(log_path.clone(), true)?;
        Ok(Segment {
            base_offset: base,
            log_path,
            file,
            size: 0,
            offset_index: Index::create(&dir.join(file_name(base, INDEX_EXT)))?,
            time_index: Index::create(&dir.join(file_name(base, TIME_INDEX_EXT)))?,
            next_offset: base,
            max_timestamp: Timestamp(-1),
            offset_of_max_timestamp: base,
            bytes_since_index: 0,
            first_batch_timestamp: None,
            first_append_at: None,
            aborted: Vec::new(),
            #[cfg(test)]
            fail_next_write_after: None,
        })
    }

    /// Opens a segment trusted to be intact, using its index files (rebuilt
    /// if missing or malformed). `next_base` is the next segment's base
    /// offset; for the last segment (`None`) the tail after the last index
    /// entry is walked to find the end offset.
    pub fn load(
        dir: &Path,
        base: Offset,
        next_base: Option<Offset>,
        interval: u32,
    ) -> Result<Loaded> {
        let log_path = dir.join(file_name(base, LOG_EXT));
        let size = file_size(&log_path)?;
        let file = CachedFile::new(log_path.clone());
        let index_path = dir.join(file_name(base, INDEX_EXT));
        let time_path = dir.join(file_name(base, TIME_INDEX_EXT));
        let offset_index =
            Index::<OffsetEntry>::load(&index_path, |e| u64::from(e.position) < size)?;
        let time_index = Index::<TimeEntry>::load(&time_path, |_| true)?;
        let (Some(offset_index), Some(time_index)) = (offset_index, time_index) else {
            let mut segment = Segment {
                base_offset: base,
                log_path,
                file,
                size,
                offset_index: Index::create(&index_path)?,
                time_index: Index::create(&time_path)?,
                next_offset: base,
                max_timestamp: Timestamp(-1),
                offset_of_max_timestamp: base,
                bytes_since_index: 0,
                first_batch_timestamp: None,
                first_append_at: None,
                aborted: Vec::new(),
                #[cfg(test)]
                fail_next_write_after: None,
            };
            let end = segment.rebuild(false, interval)?;
            let needs_recovery = end.invalid.is_some() || end.position != size;
            segment.aborted = crate::txn::read_index(&segment.txn_index_path())?;
            return Ok(Loaded {
                segment,
                index_rebuilt: true,
                needs_recovery,
            });
        };
        let (max_timestamp, offset_of_max_timestamp) = match time_index.last() {
            Some(e) => (
                Timestamp(e.timestamp),
                base.plus(i64::from(e.relative_offset)),
            ),
            None => (Timestamp(-1), base),
        };
        let last_entry = offset_index.last().copied();
        let mut segment = Segment {
            base_offset: base,
            log_path,
            file,
            size,
            offset_index,
            time_index,
            next_offset: next_base.unwrap_or(base),
            max_timestamp,
            offset_of_max_timestamp,
            bytes_since_index: 0,
            first_batch_timestamp: None,
            first_append_at: None,
            aborted: Vec::new(),
            #[cfg(test)]
            fail_next_write_after: None,
        };
        let mut needs_recovery = false;
        if next_base.is_none() {
            let start = last_entry.map_or(0, |e| u64::from(e.position));
            let file = segment.file.get()?;
            let path = segment.log_path.clone();
            let end = scan(&file, &path, start, size, false, |pos, h, _| {
                segment.note_batch(pos, h);
                Ok(true)
            })?;
            segment.bytes_since_index = end.position - start;
            needs_recovery = end.invalid.is_some() || end.position != size;
            segment.first_batch_timestamp = segment.read_first_batch_timestamp()?;
        }
        segment.aborted = crate::txn::read_index(&segment.txn_index_path())?;
        Ok(Loaded {
            segment,
            index_rebuilt: false,
            needs_recovery,
        })
    }

    /// Opens a segment that may have a torn or corrupt tail: walks every
    /// batch verifying length, magic and CRC, truncates the file at the first
    /// bad byte and rebuilds both indexes. Returns the segment and the
    /// number of bytes cut off.
    pub fn recover(dir: &Path, base: Offset, interval: u32) -> Result<(Segment, u64)> {
        let log_path = dir.join(file_name(base, LOG_EXT));
        let size = file_size(&log_path)?;
        let file = CachedFile::new(log_path.clone());
        let mut segment = Segment {
            base_offset: base,
            log_path,
            file,
            size,
            offset_index: Index::create(&dir.join(file_name(base, INDEX_EXT)))?,
            time_index: Index::create(&dir.join(file_name(base, TIME_INDEX_EXT)))?,
            next_offset: base,
            max_timestamp: Timestamp(-1),
            offset_of_max_timestamp: base,
            bytes_since_index: 0,
            first_batch_timestamp: None,
            first_append_at: None,
            aborted: Vec::new(),
            #[cfg(test)]
            fail_next_write_after: None,
        };
        let end = segment.rebuild(true, interval)?;
        let truncated = size - end.position;
        if truncated > 0 {
            segment
                .file
                .get()?
                .set_len(end.position)
                .at(&segment.log_path)?;
            segment.size = end.position;
        }
        segment.first_batch_timestamp = segment.read_first_batch_timestamp()?;
        segment.aborted = crate::txn::read_index(&segment.txn_index_path())?;
        Ok((segment, truncated))
    }

    /// Re-derives indexes and content facts by walking the whole file.
    fn rebuild(&mut self, check_crc: bool, interval: u32) -> Result<ScanEnd> {
        let file = self.file.get()?;
        let path = self.log_path.clone();
        let mut offsets = Vec::new();
        let mut times = Vec::new();
        self.next_offset = self.base_offset;
        let end = scan(&file, &path, 0, self.size, check_crc, |pos, h, _| {
            let relative = h.base_offset.0 - self.base_offset.0;
            if h.base_offset < self.next_offset || relative > i64::from(u32::MAX) {
                // Offsets must grow within a segment; anything else is garbage.
                return Ok(false);
            }
            if let Some((o, t)) = self.track(pos, h, u64::from(interval)) {
                offsets.push(o);
                times.extend(t);
            }
            Ok(true)
        })?;
        self.offset_index.reset(offsets)?;
        self.time_index.reset(times)?;
        Ok(end)
    }

    /// Updates content facts for a batch at `pos`; returns the index entries
    /// due at this batch, if any.
    fn track(
        &mut self,
        pos: u64,
        h: &BatchHeader,
        interval: u64,
    ) -> Option<(OffsetEntry, Option<TimeEntry>)> {
        if h.max_timestamp > self.max_timestamp {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = h.last_offset();
        }
        let mut due = None;
        if self.bytes_since_index >= interval {
            let offset_entry = OffsetEntry {
                relative_offset: self.relative(h.base_offset),
                position: pos as u32,
            };
            due = Some((offset_entry, self.time_entry_due()));
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += h.total_size() as u64;
        self.next_offset = h.next_offset();
        due
    }

    /// Like `track` but only updating facts, for the tail of a loaded segment.
    fn note_batch(&mut self, _pos: u64, h: &BatchHeader) {
        if h.max_timestamp > self.max_timestamp {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = h.last_offset();
        }
        self.next_offset = h.next_offset();
    }

    /// A time index entry for the current maximum if it is newer than the
    /// last entry.
    fn time_entry_due(&self) -> Option<TimeEntry> {
        let newer = match self.time_index.last() {
            Some(last) => self.max_timestamp.0 > last.timestamp,
            None => self.max_timestamp.0 >= 0,
        };
        newer.then(|| TimeEntry {
            timestamp: self.max_timestamp.0,
            relative_offset: self.relative(self.offset_of_max_timestamp),
        })
    }

    fn relative(&self, offset: Offset) -> u32 {
        (offset.0 - self.base_offset.0) as u32
    }

    fn read_first_batch_timestamp(&self) -> Result<Option<Timestamp>> {
        if self.size < HEADER_LEN as u64 {
            return Ok(None);
        }
        let mut head = [0u8; HEADER_LEN];
        self.file
            .get()?
            .read_exact_at(&mut head, 0)
            .at(&self.log_path)?;
        Ok(BatchHeader::parse(&head)
            .ok()
            .map(|h| h.max_timestamp)
            .filter(|t| t.0 >= 0))
    }

    /// Appends validated batches with one vectored write, giving them
    /// offsets from `base` on and the leader epoch `epoch`, and applying
    /// `stamps` (their CRC is recomputed). Each batch's header is written
    /// from a stamped copy, its records straight from `batches`, which is
    /// never copied or changed. On failure the file is cut back to its
    /// previous size, so no torn batch remains.
    pub fn append(
        &mut self,
        batches: &[u8],
        base: Offset,
        epoch: LeaderEpoch,
        stamps: Stamps<'_>,
        interval: u32,
        now: Timestamp,
    ) -> Result<()> {
        let pos = self.size;
        let mut stamped: Vec<(usize, BatchHeader, [u8; HEADER_LEN])> = Vec::with_capacity(1);
        let mut next = base;
        for (at, mut h) in batch::headers(batches) {
            let body = &batches[at + HEADER_LEN..at + h.total_size()];
            let mut head = [0u8; HEADER_LEN];
            head.copy_from_slice(&batches[at..at + HEADER_LEN]);
            batch::set_base_offset(&mut head, next);
            batch::set_partition_leader_epoch(&mut head, epoch);
            if let Some(ts) = stamps.log_append_time {
                batch::set_header_log_append_time(&mut head, body, ts);
                h = BatchHeader::parse(&head).unwrap_or(h);
            } else if let Some(&(_, ts)) = stamps.fixes.iter().find(|(p, _)| *p == at) {
                batch::set_header_max_timestamp(&mut head, body, ts);
                h.max_timestamp = ts;
            }
            h.base_offset = next;
            h.partition_leader_epoch = epoch;
            next = h.next_offset();
            stamped.push((at, h, head));
        }
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(stamped.len() * 2);
        for (at, h, head) in &stamped {
            slices.push(IoSlice::new(head));
            slices.push(IoSlice::new(&batches[at + HEADER_LEN..at + h.total_size()]));
        }
        self.write_or_cut_back(&mut slices, pos)?;
        self.size += batches.len() as u64;
        self.first_append_at.get_or_insert(now);
        for (at, h, _) in &stamped {
            self.note_appended(pos, *at, h, interval);
        }
        Ok(())
    }

    /// Appends batches exactly as they are, with one write: a follower's
    /// copy of its leader's batches, whose offsets, leader epochs and
    /// timestamps are already set. `headers` are theirs with their
    /// positions in `batches`, in order. On failure the file is cut back
    /// as [`Segment::append`] does.
    pub fn append_as_is(
        &mut self,
        batches: &[u8],
        headers: &[(usize, BatchHeader)],
        interval: u32,
        now: Timestamp,
    ) -> Result<()> {
        let pos = self.size;
        self.write_or_cut_back(&mut [IoSlice::new(batches)], pos)?;
        self.size += batches.len() as u64;
        self.first_append_at.get_or_insert(now);
        for (at, h) in headers {
            self.note_appended(pos, *at, h, interval);
        }
        Ok(())
    }

    /// Content facts and index entries for a batch just written at
    /// `pos + at`.
    fn note_appended(&mut self, pos: u64, at: usize, h: &BatchHeader, interval: u32) {
        if pos == 0 && at == 0 && h.max_timestamp.0 >= 0 {
            self.first_batch_timestamp = Some(h.max_timestamp);
        }
        if let Some((o, t)) = self.track(pos + at as u64, h, u64::from(interval)) {
            // The indexes are sparse: a missed entry only costs a longer scan.
            if let Err(e) = self.offset_index.append(o) {
                tracing::warn!(error = %e, "cannot write offset index entry");
            }
            if let Some(t) = t {
                if let Err(e) = self.time_index.append(t) {
                    tracing::warn!(error = %e, "cannot write time index entry");
                }
            }
        }
    }

    /// Cuts the segment before its first batch holding `offset` or a later
    /// one (whole batches only), fsyncs the file, and rebuilds what is
    /// known of the rest: both indexes, the largest timestamp, the aborted
    /// transactions. Returns the new next offset (`offset` itself when it
    /// is a batch boundary, the start of the batch holding it otherwise).
    /// A follower cutting back a log that diverged from its leader's.
    pub fn truncate_to(&mut self, offset: Offset, interval: u32) -> Result<Offset> {
        if offset >= self.next_offset {
            return Ok(self.next_offset);
        }
        let view = self.view_for_offset(offset)?;
        let mut cut = None;
        scan(
            &view.file,
            &view.path,
            view.start,
            view.end,
            false,
            |pos, h, _| {
                if h.last_offset() >= offset {
                    cut = Some(pos);
                    return Ok(false);
                }
                Ok(true)
            },
        )?;
        let Some(cut) = cut else {
            return Ok(self.next_offset);
        };
        let file = self.file.get()?;
        file.set_len(cut).at(&self.log_path)?;
        file.sync_data().at(&self.log_path)?;
        self.size = cut;
        self.max_timestamp = Timestamp(-1);
        self.offset_of_max_timestamp = self.base_offset;
        self.bytes_since_index = 0;
        self.rebuild(false, interval)?;
        self.first_batch_timestamp = self.read_first_batch_timestamp()?;
        let end = self.next_offset;
        self.retain_aborted_below(end)?;
        Ok(end)
    }

    /// Writes `slices` at `pos`; on failure cuts the file back to `pos`, so
    /// no torn batch remains.
    fn write_or_cut_back(&mut self, slices: &mut [IoSlice<'_>], pos: u64) -> Result<()> {
        let file = self.file.get()?;
        if let Err(source) = self.write_at(&file, slices, pos) {
            if let Err(e) = file.set_len(pos) {
                tracing::error!(path = %self.log_path.display(), error = %e,
                    "cannot truncate a failed append; the tail will be recovered at next open");
            }
            return Err(source).at(&self.log_path);
        }
        Ok(())
    }

    fn write_at(
        &mut self,
        file: &File,
        slices: &mut [IoSlice<'_>],
        pos: u64,
    ) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some(n) = self.fail_next_write_after.take() {
            let flat: Vec<u8> = slices.iter().flat_map(|s| s.iter().copied()).collect();
            file.write_all_at(&flat[..n.min(flat.len())], pos)?;
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "injected: disk full",
            ));
        }
        crate::io::write_all_vectored_at(file, slices, pos)
    }

    /// Makes the time index end with the segment's largest timestamp, so a
    /// later clean load knows it without a scan. Called when the segment
    /// stops being active and at clean close.
    pub fn seal_time_index(&mut self) -> Result<()> {
        match self.time_entry_due() {
            Some(t) => self.time_index.append(t),
            None => Ok(()),
        }
    }

    /// fsyncs the data file and both indexes (later, under
    /// [`crate::checkpoint::DeferredSync`]).
    pub fn sync(&self) -> Result<()> {
        if crate::checkpoint::sync_deferred() {
            return Ok(());
        }
        self.sync_handle()?.sync()
    }

    /// Handles needed to fsync this segment without holding the log's lock.
    pub fn sync_handle(&self) -> Result<SyncHandle> {
        let mut files = vec![
            (self.file.get()?, self.log_path.clone()),
            self.offset_index.file()?,
            self.time_index.file()?,
        ];
        if !self.aborted.is_empty() {
            let path = self.txn_index_path();
            files.push((Arc::new(File::open(&path).at(&path)?), path));
        }
        Ok(SyncHandle { files })
    }

    /// Path of this segment's aborted-transaction index.
    pub fn txn_index_path(&self) -> PathBuf {
        self.log_path.with_extension(crate::txn::TXN_INDEX_EXT)
    }

    /// The transactions aborted by markers in this segment.
    pub fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    /// Records a transaction aborted by a marker of this segment (unless it
    /// is recorded already: a replay after a crash meets markers again).
    pub fn add_aborted(&mut self, t: AbortedTxn) -> Result<()> {
        if self.aborted.iter().any(|a| a.last_offset == t.last_offset) {
            return Ok(());
        }
        crate::txn::append_index(&self.txn_index_path(), &t)?;
        self.aborted.push(t);
        Ok(())
    }

    /// Forgets aborted transactions whose marker is at or after `end` (the
    /// log was cut back there).
    pub fn retain_aborted_below(&mut self, end: Offset) -> Result<()> {
        let before = self.aborted.len();
        self.aborted.retain(|a| a.last_offset < end);
        if self.aborted.len() != before {
            crate::txn::write_index(&self.txn_index_path(), &self.aborted)?;
        }
        Ok(())
    }

    /// A reader's view starting at the batch holding `offset` (or earlier).
    pub fn view_for_offset(&self, offset: Offset) -> Result<SegmentView> {
        let rel = offset
            .0
            .saturating_sub(self.base_offset.0)
            .clamp(0, i64::from(u32::MAX)) as u32;
        let start = self
            .offset_index
            .floor_by(|e| e.relative_offset <= rel)
            .map_or(0, |e| u64::from(e.position));
        self.view_from(start)
    }

    /// A reader's view starting where records older than `ts` can be skipped.
    pub fn view_for_timestamp(&self, ts: Timestamp) -> Result<SegmentView> {
        match self.time_index.floor_by(|e| e.timestamp < ts.0) {
            Some(e) => self.view_for_offset(self.base_offset.plus(i64::from(e.relative_offset))),
            None => self.view_from(0),
        }
    }

    fn view_from(&self, start: u64) -> Result<SegmentView> {
        Ok(SegmentView {
            file: self.file.get()?,
            path: self.log_path.clone(),
            start,
            end: self.size,
        })
    }

    /// Deletes the segment's files.
    pub fn delete_files(&self) -> Result<()> {
        let txn_index = self.txn_index_path();
        for path in [
            self.log_path.as_path(),
            self.offset_index.path(),
            self.time_index.path(),
            txn_index.as_path(),
        ] {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(path),
            }
        }
        Ok(())
    }

    /// Renames the segment's files `*.deleted`, for deletion later; returns
    /// the new paths. Handles open on them keep reading.
    pub fn rename_deleted(&self) -> Result<Vec<PathBuf>> {
        let mut renamed = Vec::with_capacity(4);
        let txn_index = self.txn_index_path();
        for path in [
            self.log_path.as_path(),
            self.offset_index.path(),
            self.time_index.path(),
            txn_index.as_path(),
        ] {
            let mut to = path.as_os_str().to_owned();
            to.push(DELETED_SUFFIX);
            let to = PathBuf::from(to);
            match std::fs::rename(path, &to) {
                Ok(()) => renamed.push(to),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(path),
            }
        }
        Ok(renamed)
    }

    /// Offset of the first record (the file name).
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Offset just after the last record (`base_offset` when empty).
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }

    /// Bytes in the data file.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the segment holds no batch.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Largest batch max timestamp, or -1.
    pub fn max_timestamp(&self) -> Timestamp {
        self.max_timestamp
    }

    /// Last offset of the first batch that carries `max_timestamp`.
    pub fn offset_of_max_timestamp(&self) -> Offset {
        self.offset_of_max_timestamp
    }

    /// How long the segment has been open for `roll_ms`, as Kafka measures
    /// it: in record time from the first batch's timestamp to the incoming
    /// batch's, or in wall time since the first append when the first batch
    /// has no timestamp.
    pub fn time_waited_for_roll(
        &self,
        incoming_max_timestamp: Timestamp,
        now: Timestamp,
    ) -> Option<i64> {
        match self.first_batch_timestamp {
            Some(first) => Some(incoming_max_timestamp.0.saturating_sub(first.0)),
            None => self.first_append_at.map(|at| now.0.saturating_sub(at.0)),
        }
    }

    /// Whether the offset or the time index holds as many entries as
    /// `max_index_bytes` allows (Kafka's `segment.index.bytes`: a full index
    /// rolls the segment).
    pub fn index_full(&self, max_index_bytes: u32) -> bool {
        let max = max_index_bytes as usize;
        self.offset_index.len() >= max / OffsetEntry::SIZE
            || self.time_index.len() >= max / TimeEntry::SIZE
    }

    /// The bytes its offset index and its time index take.
    pub(crate) fn index_bytes(&self) -> (u64, u64) {
        (
            (self.offset_index.len() * OffsetEntry::SIZE) as u64,
            (self.time_index.len() * TimeEntry::SIZE) as u64,
        )
    }

    /// The first batch's max timestamp, if it has one.
    #[cfg(test)]
    pub fn first_batch_timestamp(&self) -> Option<Timestamp> {
        self.first_batch_timestamp
    }

    /// The largest timestamp for retention: the max record timestamp, or
    /// the file's modification time when no record has one (as Kafka does).
    pub fn retention_timestamp(&self) -> Timestamp {
        if self.max_timestamp.0 >= 0 {
            return self.max_timestamp;
        }
        let modified = std::fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        Timestamp(modified)
    }

    /// Path of the data file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
}

#[cfg(test)]
mod tests;
