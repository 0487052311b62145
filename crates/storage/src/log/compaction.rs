//! What the cleaner ([`crate::cleaner`]) needs from a log: a picture of its
//! closed segments, a reader's view of one of them, and the swap of a
//! cleaned segment into place.
//!
//! The cleaner reads and writes files without holding the log's lock; the
//! lock is taken only to look at the segment list and, for the swap, to
//! rename files and replace segments in memory. Replacing segments is
//! serialized with removing them (retention, DeleteRecords) by
//! `Log::segment_swap`, so the segments a cleaning read are still there,
//! unchanged, when it commits.

use std::collections::HashMap;
use std::path::PathBuf;

use model::{Offset, ProducerId, Timestamp};

use super::{Log, State};
use crate::cleaner::swap;
use crate::config::LogConfig;
use crate::error::{corrupt, Result};
use crate::segment::{Segment, SegmentView};

/// One closed segment as the cleaner sees it.
#[derive(Debug, Clone)]
pub(crate) struct SegmentMeta {
    /// Its base offset.
    pub base: Offset,
    /// Where it ends: the next segment's base offset.
    pub end: Offset,
    /// Bytes in its data file.
    pub size: u64,
    /// Its largest record timestamp, or -1 if no record has one.
    pub max_timestamp: Timestamp,
    /// Its data file.
    pub log_path: PathBuf,
    /// Bytes of its offset index and of its time index.
    pub index_bytes: (u64, u64),
}

/// The part of a log the cleaner may work on, taken under its lock.
#[derive(Debug, Clone)]
pub(crate) struct CleaningView {
    /// Every segment but the active one, oldest first.
    pub closed: Vec<SegmentMeta>,
    /// The active segment's base offset: nothing at or above it is cleaned.
    pub active_base: Offset,
    /// The log start offset.
    pub log_start_offset: Offset,
    /// The log end offset.
    pub log_end_offset: Offset,
    /// The log's configuration.
    pub config: LogConfig,
    /// The last offset of each idempotent producer's last batch.
    pub producer_last_offsets: HashMap<ProducerId, Offset>,
    /// The last stable offset: the segment holding it and those after it
    /// are not cleaned (a transaction may still end either way).
    pub last_stable_offset: Offset,
    /// The aborted transactions of the closed segments: their records
    /// never shadow a key's committed value.
    pub aborted: Vec<crate::txn::AbortedTxn>,
}

/// How a swap went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SwapOutcome {
    /// The cleaned segment replaced the sources.
    Swapped,
    /// The sources are no longer what was cleaned (retention or
    /// DeleteRecords removed some, or the log closed): nothing was changed
    /// and the cleaned files are to be discarded.
    Stale,
}

impl Log {
    /// The closed segments and what the cleaner decides with; `None` unless
    /// the log is open.
    pub(crate) fn cleaning_view(&self) -> Option<CleaningView> {
        let inner = self.inner.read();
        if inner.state != State::Open {
            return None;
        }
        let n = inner.segments.len();
        let closed = inner.segments[..n - 1]
            .iter()
            .zip(&inner.segments[1..])
            .map(|(s, next)| SegmentMeta {
                base: s.base_offset(),
                end: next.base_offset(),
                size: s.size(),
                max_timestamp: s.max_timestamp(),
                log_path: s.log_path().to_path_buf(),
                index_bytes: s.index_bytes(),
            })
            .collect();
        Some(CleaningView {
            closed,
            active_base: inner.active().base_offset(),
            log_start_offset: inner.log_start_offset,
            log_end_offset: inner.log_end_offset,
            config: inner.config.clone(),
            producer_last_offsets: inner.producers.last_offsets(),
            last_stable_offset: inner.last_stable_offset(),
            // The active segment's too: an abort marker lands at the log
            // end, after the records it aborts in closed segments.
            aborted: inner
                .segments
                .iter()
                .flat_map(|s| s.aborted())
                .copied()
                .collect(),
        })
    }

    /// A reader's view of the whole closed segment based at `base`, if it is
    /// still in the log with `size` bytes.
    pub(crate) fn closed_segment_view(
        &self,
        base: Offset,
        size: u64,
    ) -> Result<Option<SegmentView>> {
        let inner = self.inner.read();
        if inner.state != State::Open {
            return Ok(None);
        }
        let n = inner.segments.len();
        match inner.segments[..n - 1].binary_search_by_key(&base, Segment::base_offset) {
            Ok(i) if inner.segments[i].size() == size => {
                Ok(Some(inner.segments[i].view_for_offset(base)?))
            }
            _ => Ok(None),
        }
    }

    /// Replaces the closed segments `sources` (base offset and size of each,
    /// consecutive, the next segment starting at `end`) with the cleaned
    /// segment written at `sources[0]`'s base (see [`crate::cleaner::swap`]
    /// for the files and the crash-safe order of the steps).
    ///
    /// [`SwapOutcome::Stale`] if the sources changed meanwhile; nothing is
    /// touched then. An error before the commit leaves the log as it was;
    /// after it, the next open finishes the swap.
    pub(crate) fn replace_with_cleaned(
        &self,
        sources: &[(Offset, u64)],
        end: Offset,
    ) -> Result<SwapOutcome> {
        let Some(&(base, _)) = sources.first() else {
            return Ok(SwapOutcome::Stale);
        };
        // Held to the end: retention and DeleteRecords wait, appends and
        // reads do not.
        let _swap = self.segment_swap.lock();
        let position = |inner: &super::Inner| -> Option<usize> {
            let n = inner.segments.len();
            let i = inner.segments[..n - 1]
                .binary_search_by_key(&base, Segment::base_offset)
                .ok()?;
            let same = i + sources.len() < n
                && inner.segments[i + sources.len()].base_offset() == end
                && sources
                    .iter()
                    .zip(&inner.segments[i..])
                    .all(|(&(b, size), s)| s.base_offset() == b && s.size() == size);
            same.then_some(i)
        };
        {
            let inner = self.inner.read();
            let Some(i) = position(&inner).filter(|_| inner.state == State::Open) else {
                return Ok(SwapOutcome::Stale);
            };
            // The cleaned segment keeps every aborted transaction of the
            // segments it replaces (their records may still be there), in
            // the first one's index, written before the commit: a swap
            // undone later leaves copies there, which readers ignore.
            let aborted: Vec<crate::txn::AbortedTxn> = inner.segments[i..i + sources.len()]
                .iter()
                .flat_map(|s| s.aborted())
                .copied()
                .collect();
            if aborted.len() > inner.segments[i].aborted().len() {
                crate::txn::write_index(&crate::txn::index_path(&self.dir, base), &aborted)?;
            }
        }
        swap::commit(&self.dir, base, end)?;
        let replaced = {
            let mut inner = self.inner.write();
            // The state may have changed: to closed (the swap goes on, it
            // is committed) or to deleted (the directory is gone with it).
            if inner.state == State::Deleted {
                return Ok(SwapOutcome::Stale);
            }
            // The sources cannot have changed: retention and DeleteRecords
            // wait on `segment_swap`.
            let Some(i) = position(&inner) else {
                return Err(corrupt(
                    &self.dir,
                    "segments changed under a committed swap; the next open completes it",
                ));
            };
            swap::install(&self.dir, base)?;
            let interval = inner.config.index_interval_bytes;
            let cleaned = Segment::load(&self.dir, base, Some(end), interval)?.segment;
            let replaced: Vec<Segment> = inner
                .segments
                .splice(i..i + sources.len(), [cleaned])
                .collect();
            replaced
        };
        // The replaced segments' files are not deleted through them: the
        // first one's names now belong to the cleaned segment. Readers that
        // still hold their handles keep reading the old files.
        drop(replaced);
        let later: Vec<Offset> = sources[1..].iter().map(|&(b, _)| b).collect();
        swap::remove_replaced(&self.dir, &later)?;
        swap::finish(&self.dir, base, end)?;
        tracing::debug!(log = %self.topic_partition, %base, %end, "swapped in cleaned segment");
        Ok(SwapOutcome::Swapped)
    }
}
