//! Log compaction, after Kafka's log cleaner: for logs with
//! `cleanup.policy=compact` (or `compact,delete`), keeps the latest record
//! of every key in the closed segments.
//!
//! A cleaning of one log, as Kafka's `Cleaner.clean` does it:
//!
//! 1. The **dirty section** runs from the cleaner checkpoint (where the
//!    previous cleaning stopped, `cleaner-offset-checkpoint` in the partition
//!    directory; the log start at first) to the first uncleanable offset: the
//!    active segment's base, or earlier, the first segment holding a record
//!    newer than `min.compaction.lag.ms`.
//! 2. A map of every key in it to its latest offset is built, within the
//!    thread's share of `log.cleaner.dedupe.buffer.size`; if it fills up, the
//!    section ends at the last batch that fitted.
//! 3. Every closed segment from the log start to the section's end is
//!    rewritten, consecutive segments merged into one while they fit in
//!    `segment.bytes`: a record is dropped if a later one in the section has
//!    its key. A tombstone (a key without a value) that stays gets a delete
//!    horizon, `delete.retention.ms` after the cleaning that first kept it,
//!    and is dropped by the first cleaning after that (Kafka's rule since
//!    3.1, see [`filter`]). Records without a key and records past the
//!    section are kept, and so are control batches and, emptied of its
//!    records if need be, the last batch of every idempotent producer.
//!    Offsets never change; a batch keeps its offsets, producer fields and
//!    codec (see [`filter`]).
//! 4. Each cleaned segment is swapped in crash-safely ([`swap`]), and then
//!    the checkpoint moves to the section's end.
//!
//! A log is taken when its dirty section is more than
//! `min.cleanable.dirty.ratio` of its bytes, or at once when its oldest dirty
//! record is older than `max.compaction.lag.ms`; the dirtiest first. The
//! bytes every cleaner thread reads and writes together stay within
//! `log.cleaner.io.max.bytes.per.second`. No lock of the log is held while
//! reading or writing: appends and reads go on, and the log's lock is taken
//! only to swap the cleaned segment in (renames and the in-memory list).

mod filter;
mod offset_map;
pub(crate) mod swap;
mod throttle;
mod writer;

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use model::{Offset, Timestamp, TopicPartition};
use parking_lot::Mutex;

use crate::batch::{BatchHeader, HEADER_LEN};
use crate::checkpoint::{read_offset, write_offset};
use crate::error::{corrupt, Result};
use crate::log::{CleaningView, Log, SegmentMeta, SwapOutcome};
use crate::records::RecordIter;
use crate::segment::scan;
use filter::{filter_batch, Counts, Filtered, Rules, Standing};
use offset_map::OffsetMap;
use throttle::Throttler;
use writer::CleanedWriter;

/// The file in a partition directory recording how far the log was cleaned:
/// everything below the offset in it has been deduplicated.
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// How long a log whose cleaning failed is left alone.
const FAILED_BACKOFF: Duration = Duration::from_secs(300);

/// The least map memory a cleaner thread gets, whatever the budget says.
const MIN_MAP_BYTES: u64 = 1 << 20;

/// The broker-wide cleaner settings (Kafka's `log.cleaner.*` keys).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`: whether compacted logs are cleaned at all.
    pub enable: bool,
    /// `log.cleaner.threads`: logs cleaned at once.
    pub threads: usize,
    /// `log.cleaner.io.max.bytes.per.second`: bytes read and written per
    /// second by all cleaner threads together.
    pub io_max_bytes_per_second: f64,
    /// `log.cleaner.dedupe.buffer.size`: memory for the key maps of all
    /// threads together.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.backoff.ms`: how long a thread waits when no log needs
    /// cleaning.
    pub backoff_ms: u64,
}

impl Default for CleanerConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            io_max_bytes_per_second: f64::MAX,
            dedupe_buffer_size: 128 * 1024 * 1024,
            backoff_ms: 15_000,
        }
    }
}

/// How dirty a compacted log is: what a cleaning of it now would cover.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cleanable {
    /// Where the dirty section starts (the cleaner checkpoint, or the log
    /// start).
    pub first_dirty: Offset,
    /// Where it ends: nothing from here on may be cleaned yet.
    pub first_uncleanable: Offset,
    /// Bytes of the segments already cleaned.
    pub clean_bytes: u64,
    /// Bytes of the segments of the dirty section.
    pub dirty_bytes: u64,
    /// `dirty / (clean + dirty)`.
    pub dirty_ratio: f64,
    /// By how much the oldest dirty record is past `max.compaction.lag.ms`,
    /// if it is.
    pub overdue_ms: Option<i64>,
}

impl Cleanable {
    /// Whether the log is due a cleaning: dirtier than `min_ratio` (strictly,
    /// as Kafka compares), or holding dirty records past the maximum lag.
    pub fn is_due(&self, min_ratio: f64) -> bool {
        self.dirty_bytes > 0 && (self.overdue_ms.is_some() || self.dirty_ratio > min_ratio)
    }
}

/// What one cleaning did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanSummary {
    /// The log cleaned.
    pub topic_partition: TopicPartition,
    /// Where its dirty section started.
    pub first_dirty: Offset,
    /// The new cleaner checkpoint: everything below it is deduplicated.
    pub cleaned_up_to: Offset,
    /// Segments replaced by cleaned ones.
    pub segments_before: u64,
    /// Cleaned segments that replaced them.
    pub segments_after: u64,
    /// Bytes of the replaced segments.
    pub bytes_before: u64,
    /// Bytes of the cleaned segments.
    pub bytes_after: u64,
    /// Bytes read, key map and rewrite together.
    pub bytes_read: u64,
    /// Records removed because a later record has their key.
    pub records_removed: u64,
    /// Tombstones removed past `delete.retention.ms`.
    pub tombstones_removed: u64,
    /// How long it took.
    pub duration: Duration,
    /// When it ended.
    pub finished_at: Timestamp,
}

/// What the cleaner did since it was created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanerStats {
    /// Cleanings completed.
    pub runs: u64,
    /// Cleanings that failed.
    pub failures: u64,
    /// Segments replaced by cleaned ones.
    pub segments_cleaned: u64,
    /// Bytes of the replaced segments.
    pub bytes_before: u64,
    /// Bytes of the cleaned segments.
    pub bytes_after: u64,
    /// Records and tombstones removed.
    pub records_removed: u64,
    /// The last cleaning completed.
    pub last: Option<CleanSummary>,
}

#[derive(Debug, Default)]
struct Shared {
    in_progress: HashSet<PathBuf>,
    failed: HashMap<PathBuf, Instant>,
    stats: CleanerStats,
}

/// The log cleaner: picks compacted logs that need it and cleans them. Its
/// methods block on file I/O: run them on threads of their own (any number
/// at once; one log is never cleaned twice at the same time).
#[derive(Debug)]
pub struct LogCleaner {
    config: Mutex<CleanerConfig>,
    throttler: Throttler,
    shared: Mutex<Shared>,
    /// Held while a thread picks its log, so that threads starting together
    /// pick different ones.
    selecting: Mutex<()>,
    /// Set by [`LogCleaner::stop`]: cleanings end after the segment group
    /// they are writing.
    stopping: std::sync::atomic::AtomicBool,
}

impl LogCleaner {
    /// A cleaner with `config`.
    pub fn new(config: CleanerConfig) -> Arc<LogCleaner> {
        Arc::new(LogCleaner {
            throttler: Throttler::new(config.io_max_bytes_per_second),
            config: Mutex::new(config),
            shared: Mutex::new(Shared::default()),
            selecting: Mutex::new(()),
            stopping: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Stops cleaning (for shutdown): no new cleaning starts, and running
    /// ones end after the segment group they are writing, without moving
    /// their checkpoint (the next start cleans from it again).
    pub fn stop(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Applies new settings (from the next cleaning on).
    pub fn set_config(&self, config: CleanerConfig) {
        self.throttler.set_rate(config.io_max_bytes_per_second);
        *self.config.lock() = config;
    }

    /// The current settings.
    pub fn config(&self) -> CleanerConfig {
        self.config.lock().clone()
    }

    /// What the cleaner did so far.
    pub fn stats(&self) -> CleanerStats {
        self.shared.lock().stats.clone()
    }

    /// How dirty `log` is; `None` if it is not compacted, not open, or has
    /// nothing cleanable.
    pub fn cleanable(log: &Log, now: Timestamp) -> Result<Option<Cleanable>> {
        let Some(view) = log.cleaning_view() else {
            return Ok(None);
        };
        assess(log, &view, now)
    }

    /// Cleans the compacted log that needs it most among `logs` (see the
    /// module docs for "needs"), if any; `Ok(None)` when none does. A log
    /// whose cleaning fails is left alone for a while, so one broken log
    /// does not take every turn.
    pub fn clean_filthiest(
        &self,
        logs: &[Arc<Log>],
        now: Timestamp,
    ) -> Result<Option<CleanSummary>> {
        if !self.config.lock().enable || self.is_stopping() {
            return Ok(None);
        }
        let Some(log) = self.select(logs, now) else {
            return Ok(None);
        };
        let result = self.clean(&log, now);
        let mut shared = self.shared.lock();
        shared.in_progress.remove(log.dir());
        if result.is_err() {
            shared
                .failed
                .insert(log.dir().to_path_buf(), Instant::now());
        }
        result
    }

    /// Picks the log to clean and marks it in progress.
    fn select(&self, logs: &[Arc<Log>], now: Timestamp) -> Option<Arc<Log>> {
        let _turn = self.selecting.lock();
        let skip: HashSet<PathBuf> = {
            let mut shared = self.shared.lock();
            shared.failed.retain(|_, at| at.elapsed() < FAILED_BACKOFF);
            shared
                .in_progress
                .iter()
                .chain(shared.failed.keys())
                .cloned()
                .collect()
        };
        let mut best: Option<(Arc<Log>, Cleanable)> = None;
        for log in logs {
            if skip.contains(log.dir()) {
                continue;
            }
            let Some(view) = log.cleaning_view() else {
                continue;
            };
            if !view.config.cleanup_policy.compact {
                continue;
            }
            let c = match assess(log, &view, now) {
                Ok(Some(c)) if c.is_due(view.config.min_cleanable_dirty_ratio) => c,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(log = %log.topic_partition(), error = %e, "cannot assess the log for cleaning");
                    continue;
                }
            };
            let better = best.as_ref().is_none_or(|(_, b)| {
                (c.overdue_ms.is_some(), c.dirty_ratio) > (b.overdue_ms.is_some(), b.dirty_ratio)
            });
            if better {
                best = Some((Arc::clone(log), c));
            }
        }
        let (log, _) = best?;
        self.shared
            .lock()
            .in_progress
            .insert(log.dir().to_path_buf());
        Some(log)
    }

    /// Cleans `log` now, whatever its dirty ratio (the lag settings still
    /// apply); `Ok(None)` if it has nothing cleanable. The caller keeps
    /// other threads from cleaning the same log at the same time
    /// ([`LogCleaner::clean_filthiest`] does).
    pub fn clean(&self, log: &Log, now: Timestamp) -> Result<Option<CleanSummary>> {
        let (threads, buffer) = {
            let c = self.config.lock();
            (c.threads.max(1) as u64, c.dedupe_buffer_size)
        };
        let budget = (buffer / threads).max(MIN_MAP_BYTES);
        let result = self.clean_inner(log, now, budget as usize);
        self.record(log, result)
    }

    /// [`LogCleaner::clean`] with a key map of `bytes`, however small.
    #[cfg(test)]
    pub(crate) fn clean_with_map_budget(
        &self,
        log: &Log,
        now: Timestamp,
        bytes: usize,
    ) -> Result<Option<CleanSummary>> {
        let result = self.clean_inner(log, now, bytes);
        self.record(log, result)
    }

    fn record(
        &self,
        log: &Log,
        result: Result<Option<CleanSummary>>,
    ) -> Result<Option<CleanSummary>> {
        let mut shared = self.shared.lock();
        match &result {
            Ok(Some(s)) => {
                let stats = &mut shared.stats;
                stats.runs += 1;
                stats.segments_cleaned += s.segments_before;
                stats.bytes_before += s.bytes_before;
                stats.bytes_after += s.bytes_after;
                stats.records_removed += s.records_removed + s.tombstones_removed;
                stats.last = Some(s.clone());
            }
            Ok(None) => {}
            Err(e) => {
                shared.stats.failures += 1;
                tracing::warn!(log = %log.topic_partition(), error = %e, "log cleaning failed");
            }
        }
        result
    }

    fn clean_inner(
        &self,
        log: &Log,
        now: Timestamp,
        map_bytes: usize,
    ) -> Result<Option<CleanSummary>> {
        let started = Instant::now();
        let Some(view) = log.cleaning_view() else {
            return Ok(None);
        };
        let Some(cleanable) = assess(log, &view, now)? else {
            return Ok(None);
        };
        let dir = log.dir();
        if swap::pending(dir)? {
            // A swap that failed half-way is finished by the next open; until
            // then the log is not cleaned again.
            return Err(corrupt(
                dir,
                "an interrupted segment swap awaits the next open",
            ));
        }
        let mut run = Run {
            log,
            view: &view,
            aborted: AbortedIndex::of(&view.aborted),
            throttler: &self.throttler,
            map: OffsetMap::new(map_bytes),
            map_end: cleanable.first_dirty,
            bytes_read: 0,
        };
        if !run.build_map(cleanable.first_dirty, cleanable.first_uncleanable)? {
            return Ok(None);
        }
        let rules = Rules {
            now: now.0,
            delete_retention_ms: view.config.delete_retention_ms,
        };
        let mut summary = CleanSummary {
            topic_partition: log.topic_partition().clone(),
            first_dirty: cleanable.first_dirty,
            cleaned_up_to: run.map_end,
            segments_before: 0,
            segments_after: 0,
            bytes_before: 0,
            bytes_after: 0,
            bytes_read: 0,
            records_removed: 0,
            tombstones_removed: 0,
            duration: Duration::ZERO,
            finished_at: now,
        };
        for group in groups(&view, run.map_end) {
            if self.is_stopping() {
                return Ok(None);
            }
            match run.clean_group(&group, rules)? {
                GroupOutcome::Unchanged => {}
                GroupOutcome::Swapped { size, counts } => {
                    summary.segments_before += group.len() as u64;
                    summary.segments_after += 1;
                    summary.bytes_before += group.iter().map(|s| s.size).sum::<u64>();
                    summary.bytes_after += size;
                    summary.records_removed += counts.superseded;
                    summary.tombstones_removed += counts.tombstones;
                }
                GroupOutcome::Stale => {
                    // Retention or DeleteRecords got there first; the next
                    // cleaning starts over from the same checkpoint.
                    tracing::debug!(log = %log.topic_partition(), "log changed under the cleaner; stopping this cleaning");
                    return Ok(None);
                }
            }
        }
        if log.is_deleted() {
            return Ok(None);
        }
        write_offset(&dir.join(CLEANER_CHECKPOINT), run.map_end)?;
        summary.bytes_read = run.bytes_read;
        summary.duration = started.elapsed();
        summary.finished_at = Timestamp(wall_ms(SystemTime::now()));
        tracing::info!(
            log = %summary.topic_partition,
            from = %summary.first_dirty,
            to = %summary.cleaned_up_to,
            segments = format!("{} -> {}", summary.segments_before, summary.segments_after),
            bytes = format!("{} -> {}", summary.bytes_before, summary.bytes_after),
            removed = summary.records_removed,
            tombstones_removed = summary.tombstones_removed,
            read = summary.bytes_read,
            ms = summary.duration.as_millis() as u64,
            "cleaned log"
        );
        Ok(Some(summary))
    }
}

/// Milliseconds since the epoch.
fn wall_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The modification time of a file (the epoch if it cannot be read).
fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(UNIX_EPOCH)
}

/// A segment's largest timestamp, its file's modification time when no
/// record has one (Kafka's `largestTimestamp`).
fn largest_timestamp(s: &SegmentMeta) -> i64 {
    if s.max_timestamp.0 >= 0 {
        s.max_timestamp.0
    } else {
        wall_ms(modified(&s.log_path))
    }
}

fn assess(log: &Log, view: &CleaningView, now: Timestamp) -> Result<Option<Cleanable>> {
    let config = &view.config;
    if !config.cleanup_policy.compact {
        return Ok(None);
    }
    let start = view.log_start_offset;
    let checkpoint = read_offset(&log.dir().join(CLEANER_CHECKPOINT))?;
    // A checkpoint outside the log (truncated, or moved past by
    // DeleteRecords) restarts from the log start, as Kafka does.
    let first_dirty = checkpoint
        .filter(|c| *c >= start && *c <= view.log_end_offset)
        .unwrap_or(start);
    let mut first_uncleanable = view.active_base;
    // Nothing from the segment holding the last stable offset on: an
    // ongoing transaction's records may yet be aborted.
    if let Some(s) = view
        .closed
        .iter()
        .find(|s| s.base <= view.last_stable_offset && view.last_stable_offset < s.end)
    {
        first_uncleanable = first_uncleanable.min(s.base);
    }
    if config.min_compaction_lag_ms > 0 {
        let newest_allowed = now.0.saturating_sub(config.min_compaction_lag_ms as i64);
        if let Some(s) = view
            .closed
            .iter()
            .filter(|s| s.end > first_dirty)
            .find(|s| largest_timestamp(s) > newest_allowed)
        {
            first_uncleanable = first_uncleanable.min(s.base);
        }
    }
    if first_uncleanable <= first_dirty {
        return Ok(None);
    }
    let live = view.closed.iter().filter(|s| s.end > start);
    let clean_bytes: u64 = live
        .clone()
        .filter(|s| s.end <= first_dirty)
        .map(|s| s.size)
        .sum();
    let dirty: Vec<&SegmentMeta> = live
        .filter(|s| s.end > first_dirty && s.base < first_uncleanable)
        .collect();
    let dirty_bytes: u64 = dirty.iter().map(|s| s.size).sum();
    let total = clean_bytes + dirty_bytes;
    let dirty_ratio = if total == 0 {
        0.0
    } else {
        dirty_bytes as f64 / total as f64
    };
    let mut overdue_ms = None;
    if let (Some(first), true) = (
        dirty.first(),
        config.max_compaction_lag_ms < i64::MAX as u64,
    ) {
        let earliest = match first_batch_timestamp(log, first)? {
            Some(t) if t >= 0 => t,
            _ => largest_timestamp(first),
        };
        let clean_until = now.0.saturating_sub(config.max_compaction_lag_ms as i64);
        overdue_ms = (earliest < clean_until).then_some(clean_until - earliest);
    }
    Ok(Some(Cleanable {
        first_dirty,
        first_uncleanable,
        clean_bytes,
        dirty_bytes,
        dirty_ratio,
        overdue_ms,
    }))
}

/// The first batch's max timestamp of a closed segment.
fn first_batch_timestamp(log: &Log, s: &SegmentMeta) -> Result<Option<i64>> {
    if s.size < HEADER_LEN as u64 {
        return Ok(None);
    }
    let Some(view) = log.closed_segment_view(s.base, s.size)? else {
        return Ok(None);
    };
    let mut head = [0u8; HEADER_LEN];
    view.file
        .read_exact_at(&mut head, 0)
        .map_err(|e| crate::error::Error::Io {
            path: view.path.clone(),
            source: e,
        })?;
    Ok(BatchHeader::parse(&head).ok().map(|h| h.max_timestamp.0))
}

/// The closed segments to rewrite (those below `end` that hold anything at
/// or above the log start), in runs of consecutive segments that fit one
/// segment: at most `segment.bytes` together, offset and time indexes of at
/// most `segment.index.bytes` each together (as Kafka's
/// `groupSegmentsBySize`), and offsets within the index's 32-bit relative
/// range.
fn groups(view: &CleaningView, end: Offset) -> Vec<Vec<SegmentMeta>> {
    let max_bytes = view.config.effective_segment_bytes();
    let max_index = u64::from(view.config.segment_index_bytes);
    let mut out: Vec<Vec<SegmentMeta>> = Vec::new();
    let (mut size, mut offsets, mut times) = (0u64, 0u64, 0u64);
    for s in view
        .closed
        .iter()
        .filter(|s| s.base < end && s.end > view.log_start_offset)
    {
        let (o, t) = s.index_bytes;
        let fits = out.last().is_some_and(|g| {
            size + s.size <= max_bytes
                && offsets + o <= max_index
                && times + t <= max_index
                && s.end.0 - g[0].base.0 <= i64::from(u32::MAX)
        });
        if let (true, Some(g)) = (fits, out.last_mut()) {
            size += s.size;
            offsets += o;
            times += t;
            g.push(s.clone());
        } else {
            (size, offsets, times) = (s.size, o, t);
            out.push(vec![s.clone()]);
        }
    }
    out
}

/// What became of one group of segments.
enum GroupOutcome {
    /// Nothing to remove and nothing to merge: left as it is.
    Unchanged,
    /// Replaced by a cleaned segment of `size` bytes.
    Swapped { size: u64, counts: Counts },
    /// The log changed under the cleaning.
    Stale,
}

/// One cleaning in progress.
/// The aborted transactions of the log being cleaned, by producer.
#[derive(Default)]
struct AbortedIndex(std::collections::HashMap<model::ProducerId, Vec<(Offset, Offset)>>);

impl AbortedIndex {
    fn of(aborted: &[crate::txn::AbortedTxn]) -> AbortedIndex {
        let mut index = AbortedIndex::default();
        for t in aborted {
            index
                .0
                .entry(t.producer_id)
                .or_default()
                .push((t.first_offset, t.last_offset));
        }
        // Sorted (a producer's transactions never overlap) for a binary
        // search per batch: a long-lived producer may have aborted often.
        for ranges in index.0.values_mut() {
            ranges.sort_unstable();
            ranges.dedup();
        }
        index
    }

    /// Whether `h` is a batch of an aborted transaction: its producer's
    /// transactional batch between that transaction's first offset and its
    /// abort marker (a producer's transactions never interleave).
    fn holds(&self, h: &BatchHeader) -> bool {
        if !h.is_transactional() || h.is_control() {
            return false;
        }
        let Some(ranges) = self.0.get(&h.producer_id) else {
            return false;
        };
        // The last range starting at or before the batch.
        let i = ranges.partition_point(|(first, _)| *first <= h.base_offset);
        i > 0 && h.base_offset <= ranges[i - 1].1
    }
}

struct Run<'a> {
    log: &'a Log,
    view: &'a CleaningView,
    /// The aborted transactions whose records the cleaning removes.
    aborted: AbortedIndex,
    throttler: &'a Throttler,
    map: OffsetMap,
    /// The dirty section mapped so far ends here.
    map_end: Offset,
    bytes_read: u64,
}

impl Run<'_> {
    /// Maps the keys of the dirty section `[first_dirty, first_uncleanable)`
    /// until the map is full. `false` if the log changed meanwhile.
    fn build_map(&mut self, first_dirty: Offset, first_uncleanable: Offset) -> Result<bool> {
        let dirty: Vec<SegmentMeta> = self
            .view
            .closed
            .iter()
            .filter(|s| s.end > first_dirty && s.base < first_uncleanable)
            .cloned()
            .collect();
        let aborted = &self.aborted;
        let is_aborted = |h: &BatchHeader| aborted.holds(h);
        for s in dirty {
            let Some(view) = self.log.closed_segment_view(s.base, s.size)? else {
                return Ok(false);
            };
            let mut full = false;
            let (map, map_end, throttler) = (&mut self.map, &mut self.map_end, self.throttler);
            let mut read = 0u64;
            let scanned = scan(&view.file, &view.path, 0, view.end, true, |_, h, body| {
                read += body.len() as u64;
                throttler.throttle(body.len() as u64);
                if h.next_offset() <= first_dirty {
                    return Ok(true);
                }
                if map.is_full() && *map_end > first_dirty {
                    full = true;
                    return Ok(false);
                }
                // An aborted transaction's records never count as a key's
                // latest value: read_committed readers drop them.
                if !h.is_control() && !is_aborted(h) {
                    let records = RecordIter::new(bytes::Bytes::copy_from_slice(body), u64::MAX)?;
                    for r in records {
                        let r = r?;
                        if let (Some(key), true) = (&r.key, r.offset >= first_dirty) {
                            map.put(key, r.offset.0);
                        }
                    }
                }
                *map_end = h.next_offset();
                Ok(true)
            })?;
            self.bytes_read += read;
            if let Some(e) = scanned.invalid {
                return Err(corrupt(
                    &view.path,
                    format!("bad batch while cleaning: {e}"),
                ));
            }
            if full {
                return Ok(true);
            }
            // The whole segment is mapped (its last batches may be gone).
            self.map_end = s.end.min(first_uncleanable);
        }
        Ok(true)
    }

    /// Rewrites `group` into one cleaned segment and swaps it in.
    fn clean_group(&mut self, group: &[SegmentMeta], rules: Rules) -> Result<GroupOutcome> {
        let dir = self.log.dir();
        let base = group[0].base;
        let mut writer = CleanedWriter::create(dir, base, self.view.config.index_interval_bytes)?;
        match self.write_group(group, rules, &mut writer) {
            Ok(Some((changed, newest, counts))) => {
                if !changed && group.len() == 1 {
                    writer.discard()?;
                    return Ok(GroupOutcome::Unchanged);
                }
                let size = match writer.finish(newest) {
                    Ok(size) => size,
                    Err(e) => {
                        let _ = swap::discard_cleaned(dir, base);
                        return Err(e);
                    }
                };
                let sources: Vec<(Offset, u64)> = group.iter().map(|s| (s.base, s.size)).collect();
                let end = group[group.len() - 1].end;
                // An error from here on may come after the commit: the files
                // stay for the next open to finish or undo the swap.
                match self.log.replace_with_cleaned(&sources, end)? {
                    SwapOutcome::Swapped => Ok(GroupOutcome::Swapped { size, counts }),
                    SwapOutcome::Stale => {
                        swap::discard_cleaned(dir, base)?;
                        Ok(GroupOutcome::Stale)
                    }
                }
            }
            Ok(None) => {
                writer.discard()?;
                Ok(GroupOutcome::Stale)
            }
            Err(e) => {
                let _ = writer.discard();
                Err(e)
            }
        }
    }

    /// Writes the kept batches of `group`; whether anything changed, the
    /// newest modification time among the sources, and the counts. `None`
    /// if a source is gone.
    fn write_group(
        &mut self,
        group: &[SegmentMeta],
        rules: Rules,
        writer: &mut CleanedWriter,
    ) -> Result<Option<(bool, SystemTime, Counts)>> {
        let mut changed = false;
        let mut newest = UNIX_EPOCH;
        let mut total = Counts::default();
        for s in group {
            let Some(view) = self.log.closed_segment_view(s.base, s.size)? else {
                return Ok(None);
            };
            let mtime = view
                .file
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(UNIX_EPOCH);
            newest = newest.max(mtime);
            let (map, map_end, throttler) = (&self.map, self.map_end, self.throttler);
            let aborted = &self.aborted;
            let last_offsets = &self.view.producer_last_offsets;
            let mut read = 0u64;
            let scanned = scan(&view.file, &view.path, 0, view.end, true, |_, h, body| {
                read += body.len() as u64;
                throttler.throttle(body.len() as u64);
                let keep_header = h.has_producer_id()
                    && last_offsets.get(&h.producer_id) == Some(&h.last_offset());
                // An aborted transaction's records go wherever they are, as
                // Kafka's cleaner discards them (its marker stays, and so
                // does an emptied batch's header if it holds the producer's
                // last sequence).
                let batch_aborted = aborted.holds(h);
                let (filtered, counts) = filter_batch(body, h, keep_header, rules, |r| {
                    if batch_aborted {
                        return Standing::Superseded;
                    }
                    if r.offset >= map_end {
                        return Standing::Unmapped;
                    }
                    // Keyless records stay (Kafka drops them from a
                    // compacted log, but nothing supersedes them).
                    let superseded = r
                        .key
                        .as_ref()
                        .is_some_and(|key| map.get(key).is_some_and(|latest| r.offset.0 < latest));
                    if superseded {
                        Standing::Superseded
                    } else {
                        Standing::Latest
                    }
                })?;
                total.kept += counts.kept;
                total.superseded += counts.superseded;
                total.tombstones += counts.tombstones;
                let written = match filtered {
                    Filtered::Unchanged => {
                        writer.append(body, h)?;
                        body.len()
                    }
                    Filtered::Removed => {
                        changed = true;
                        0
                    }
                    Filtered::Rewritten(bytes) => {
                        changed = true;
                        let nh = BatchHeader::parse(&bytes)?;
                        writer.append(&bytes, &nh)?;
                        bytes.len()
                    }
                };
                throttler.throttle(written as u64);
                Ok(true)
            })?;
            self.bytes_read += read;
            if let Some(e) = scanned.invalid {
                return Err(corrupt(
                    &view.path,
                    format!("bad batch while cleaning: {e}"),
                ));
            }
            if scanned.position != view.end {
                return Err(corrupt(&view.path, "segment ended early while cleaning"));
            }
        }
        Ok(Some((changed, newest, total)))
    }
}
