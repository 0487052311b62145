//! One partition's log: ordered segments (the last one active), the leader
//! epoch cache, idempotent producer state and the partition's checkpoints.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use model::{LeaderEpoch, Offset, Timestamp, TopicId, TopicPartition};
use parking_lot::{Mutex, RwLock};

use crate::batch::{self, BatchesSummary};
use crate::config::LogConfig;
use crate::epoch::{EpochEntry, LeaderEpochCache};
use crate::error::{Error, Result};
use crate::producer_state::{ProducerEntry, ProducerStateManager, StagedProducers, Verdict};
use crate::records;
use crate::segment::{find_timestamp_in, FileRegion, Segment, SegmentView, SyncHandle};
use crate::txn::{AbortedTxn, ControlType, TxnMarker};

mod compaction;
mod maintenance;
mod open;
mod read;
mod replica;

pub(crate) use compaction::{CleaningView, SegmentMeta, SwapOutcome};
use read::ReadBound;
pub use replica::FollowerAppend;

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod record_proptests;
#[cfg(test)]
mod replica_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;

/// The result of [`Log::append`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Appended; offsets assigned.
    Appended(AppendInfo),
    /// An idempotent retry of one of the producer's last 5 batches: nothing
    /// written, the original offsets are reported.
    Duplicate(AppendInfo),
}

impl AppendOutcome {
    /// The offsets, whether appended now or before.
    pub fn info(&self) -> &AppendInfo {
        match self {
            AppendOutcome::Appended(i) | AppendOutcome::Duplicate(i) => i,
        }
    }
}

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Offset of the last record.
    pub last_offset: Offset,
    /// Number of records.
    pub record_count: u64,
    /// The log start offset after the append.
    pub log_start_offset: Offset,
    /// The time the batches were stamped with, for a log whose
    /// `message.timestamp.type` is LogAppendTime (Produce's
    /// `log_append_time_ms`); `None` for CreateTime.
    pub log_append_time: Option<Timestamp>,
    /// The leader epoch the append was made in (for a duplicate, the
    /// epoch it was refused in).
    pub leader_epoch: LeaderEpoch,
}

/// The result of [`Log::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole v2 batches exactly as stored (possibly empty).
    pub records: Bytes,
    /// The log start offset when the read happened.
    pub log_start_offset: Offset,
    /// The high watermark (== log end offset on a single node).
    pub high_watermark: Offset,
    /// The last stable offset: below it, every transaction has ended.
    pub last_stable_offset: Offset,
}

/// The result of [`Log::read_region`].
#[derive(Debug, Clone)]
pub struct RegionRead {
    /// Where the batches are; `None` when there are none to return.
    pub region: Option<FileRegion>,
    /// The offset after the region's last batch (the offset read from when
    /// there is no region): the region covers offsets up to it.
    pub next_offset: Offset,
    /// The log start offset when the read happened.
    pub log_start_offset: Offset,
    /// The high watermark (== log end offset on a single node).
    pub high_watermark: Offset,
    /// The last stable offset: below it, every transaction has ended.
    pub last_stable_offset: Offset,
}

/// What opening the log had to do; lets callers and tests see that a clean
/// restart did no scanning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Whether the log was opened after a clean shutdown.
    pub clean: bool,
    /// Whether the partition directory was new (created by this open).
    pub created: bool,
    /// Segments opened from their index files without a scan.
    pub segments_loaded: usize,
    /// Segments fully scanned (length, magic, CRC) because they may hold
    /// unflushed data.
    pub segments_recovered: usize,
    /// Segments whose index files were missing or malformed and rebuilt.
    pub indexes_rebuilt: usize,
    /// Bytes cut off torn or corrupt segment tails.
    pub bytes_truncated: u64,
    /// Segments deleted because they followed a corrupt one.
    pub segments_deleted: usize,
    /// Batch headers replayed into the producer state.
    pub producer_batches_replayed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Closed,
    Deleted,
}

#[derive(Debug)]
struct Inner {
    config: LogConfig,
    /// Never empty; the last one is active.
    segments: Vec<Segment>,
    log_start_offset: Offset,
    log_end_offset: Offset,
    /// A replicated log's high watermark, set by its partition's leader
    /// logic ([`Log::set_high_watermark`]); `None`: the log end offset.
    high_watermark: Option<Offset>,
    /// Everything below it has been fsynced.
    recovery_point: Offset,
    /// When the oldest unflushed append happened (for `flush_interval_ms`).
    first_unflushed_at: Option<Timestamp>,
    epochs: LeaderEpochCache,
    producers: ProducerStateManager,
    state: State,
}

impl Inner {
    /// What consumers may read up to: every record below it is on every
    /// in-sync replica.
    fn high_watermark(&self) -> Offset {
        self.high_watermark
            .map_or(self.log_end_offset, |h| h.min(self.log_end_offset))
    }

    // Never below the log start: retention or DeleteRecords may have
    // removed an open transaction's first records (as Kafka bounds it).
    fn last_stable_offset(&self) -> Offset {
        let hw = self.high_watermark();
        self.producers
            .first_unstable_offset()
            .map_or(hw, |o| o.min(hw).max(self.log_start_offset))
    }

    fn ensure_open(&self) -> Result<()> {
        match self.state {
            State::Open => Ok(()),
            State::Closed => Err(Error::LogClosed),
            State::Deleted => Err(Error::LogDeleted),
        }
    }

    fn ensure_readable(&self) -> Result<()> {
        match self.state {
            State::Deleted => Err(Error::LogDeleted),
            _ => Ok(()),
        }
    }

    fn active(&self) -> &Segment {
        // `segments` is never empty.
        &self.segments[self.segments.len() - 1]
    }

    fn active_mut(&mut self) -> &mut Segment {
        let last = self.segments.len() - 1;
        &mut self.segments[last]
    }

    /// Index of the segment holding `offset` (the first one ending after it).
    fn segment_for(&self, offset: Offset) -> usize {
        let mut i = self
            .segments
            .partition_point(|s| s.base_offset() <= offset)
            .saturating_sub(1);
        while i + 1 < self.segments.len() && self.segments[i].next_offset() <= offset {
            i += 1;
        }
        i
    }

    fn out_of_range(&self, offset: Offset) -> Error {
        Error::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        }
    }

    fn size_bytes(&self) -> u64 {
        self.segments.iter().map(Segment::size).sum()
    }
}

/// Disk work an append leaves for after it: fsyncing a segment closed by a
/// roll, writing the producer snapshot taken at the roll, and the flush a
/// `flush_interval_messages` policy asks for. [`Log::append`] does it at
/// once; [`Log::append_deferred`] hands it back so the caller can run it
/// where waiting on the disk stalls nobody ([`Log::complete`]).
#[derive(Debug, Default)]
#[must_use = "the work must be completed with Log::complete"]
pub struct SyncWork {
    /// The segment closed by a roll, to fsync; then the recovery point may
    /// move to the offset given.
    sealed: Option<(SyncHandle, Offset)>,
    /// Producer state snapshot taken at the roll.
    snapshot: Option<(Offset, Vec<u8>)>,
    /// The `flush_interval_messages` threshold was reached.
    flush: bool,
    /// A new leader epoch started: its checkpoint is to be written.
    epochs: bool,
}

impl SyncWork {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.sealed.is_none() && self.snapshot.is_none() && !self.flush && !self.epochs
    }

    /// Whether the work includes a flush the log's policy requires before
    /// the append is acknowledged (`flush_interval_messages`).
    pub fn flush_required(&self) -> bool {
        self.flush
    }
}

/// One partition's log. Internally synchronized: every method takes `&self`.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    topic_partition: TopicPartition,
    topic_id: TopicId,
    inner: RwLock<Inner>,
    /// Recovery point last written to the checkpoint file.
    checkpointed_recovery_point: Mutex<Offset>,
    /// High watermark last written to its checkpoint file (`None`: no file).
    checkpointed_high_watermark: Mutex<Option<Offset>>,
    /// Serializes leader epoch checkpoint writes (see `persist_epochs`).
    epoch_checkpoint: Mutex<()>,
    /// Files of deleted segments, renamed `*.deleted`, and when they are
    /// to be removed (`file.delete.delay.ms`).
    pending_deletes: Mutex<Vec<(std::time::Instant, PathBuf)>>,
    /// Serializes the cleaner's swap of segments with their removal by
    /// retention and DeleteRecords (see `compaction`).
    segment_swap: Mutex<()>,
    stats: RecoveryStats,
}

impl Log {
    /// Validates `batches` (concatenated v2 batches: headers, CRCs and every
    /// record, see [`batch::validate`], with the log's timestamp rules;
    /// nothing is written if any batch is refused), checks idempotent
    /// producer state, assigns offsets from the log end offset and writes
    /// the batches with them and `leader_epoch` stamped (a wrong
    /// `maxTimestamp` corrected; with `message.timestamp.type=LogAppendTime`
    /// the type and `maxTimestamp = now`), with one vectored write to the
    /// active segment (rolling it first if due). `batches` itself is not
    /// copied or changed, unless `compression.type` names a codec the
    /// batches are not in: then they are recompressed first, as Kafka does.
    ///
    /// Nothing is written for a duplicate of one of a producer's last five
    /// batches. If the write fails part-way the segment is cut back and
    /// [`Error::Io`] returned; the log stays usable.
    pub fn append(
        &self,
        batches: &[u8],
        leader_epoch: LeaderEpoch,
        now: Timestamp,
    ) -> Result<AppendOutcome> {
        let (outcome, work) = self.append_deferred(batches, leader_epoch, now)?;
        self.complete(work)?;
        Ok(outcome)
    }

    /// [`Log::append`], leaving the disk work it may cause (fsyncs after a
    /// roll or for a flush policy) to the caller: run it with
    /// [`Log::complete`], before acknowledging if
    /// [`SyncWork::flush_required`].
    pub fn append_deferred(
        &self,
        batches: &[u8],
        leader_epoch: LeaderEpoch,
        now: Timestamp,
    ) -> Result<(AppendOutcome, SyncWork)> {
        self.append_checked(batches, leader_epoch, now, false)
    }

    /// [`Log::append_deferred`] accepting transactional batches: for a
    /// caller that has verified with the transaction coordinator that each
    /// batch's producer has this partition in its ongoing transaction (an
    /// unverified transactional batch would hold back the last stable
    /// offset until a marker that may never come).
    pub fn append_transactional_deferred(
        &self,
        batches: &[u8],
        leader_epoch: LeaderEpoch,
        now: Timestamp,
    ) -> Result<(AppendOutcome, SyncWork)> {
        self.append_checked(batches, leader_epoch, now, true)
    }

    fn append_checked(
        &self,
        batches: &[u8],
        leader_epoch: LeaderEpoch,
        now: Timestamp,
        transactional: bool,
    ) -> Result<(AppendOutcome, SyncWork)> {
        let (rules, target, levels, log_append) = {
            let inner = self.inner.read();
            let c = &inner.config;
            let log_append = c.timestamp_type == batch::TimestampType::LogAppendTime;
            (
                batch::ValidationConfig::for_log(c, now),
                c.compression,
                c.compression_levels,
                log_append.then_some(now),
            )
        };
        let summary = batch::validate(batches, &rules)?;
        if summary.has_transactional && !transactional {
            return Err(Error::TransactionsNotSupported);
        }
        let mut work = SyncWork::default();
        let outcome = match target {
            Some(codec) if !summary.only_codec(codec) => {
                let (rewritten, summary) = crate::builder::recompress(
                    batches,
                    &summary,
                    codec,
                    levels,
                    rules.max_decompressed_bytes,
                )?;
                check_sizes(&rewritten, rules.max_batch_bytes)?;
                self.append_locked(
                    &rewritten,
                    &summary,
                    leader_epoch,
                    now,
                    log_append,
                    &mut work,
                )?
            }
            _ => self.append_locked(batches, &summary, leader_epoch, now, log_append, &mut work)?,
        };
        Ok((outcome, work))
    }

    fn append_locked(
        &self,
        batches: &[u8],
        summary: &BatchesSummary,
        leader_epoch: LeaderEpoch,
        now: Timestamp,
        log_append_time: Option<Timestamp>,
        after: &mut SyncWork,
    ) -> Result<AppendOutcome> {
        let mut inner = self.inner.write();
        inner.ensure_open()?;
        let base = inner.log_end_offset;

        let mut staged = StagedProducers::default();
        if summary.has_producer_id || summary.has_transactional {
            let mut next = base;
            for (_, mut h) in batch::headers(batches) {
                h.base_offset = next;
                if let Some(ts) = log_append_time {
                    h.max_timestamp = ts;
                }
                if let Verdict::Duplicate(dup) = inner.producers.check(&mut staged, &h, now)? {
                    return Ok(AppendOutcome::Duplicate(AppendInfo {
                        base_offset: dup.first_offset,
                        last_offset: dup.last_offset,
                        record_count: (dup.last_offset.0 - dup.first_offset.0 + 1) as u64,
                        log_start_offset: inner.log_start_offset,
                        // The original append time is not kept per batch.
                        log_append_time: None,
                        leader_epoch,
                    }));
                }
                next = h.next_offset();
            }
        }

        let next = base.plus(summary.record_count as i64);
        let max_timestamp = log_append_time.unwrap_or(summary.max_timestamp);
        self.maybe_roll(
            &mut inner,
            summary.size_bytes,
            max_timestamp,
            base,
            next,
            now,
            after,
        )?;
        let interval = inner.config.index_interval_bytes;
        inner.active_mut().append(
            batches,
            base,
            leader_epoch,
            crate::segment::Stamps {
                fixes: &summary.max_timestamp_fixes,
                log_append_time,
            },
            interval,
            now,
        )?;
        inner.log_end_offset = next;
        let Inner { producers, .. } = &mut *inner;
        producers.commit(staged);
        after.epochs = inner.epochs.assign(leader_epoch, base);
        inner.first_unflushed_at.get_or_insert(now);
        if let Some(n) = inner.config.flush_interval_messages {
            after.flush = (next.0 - inner.recovery_point.0) as u64 >= n;
        }
        Ok(AppendOutcome::Appended(AppendInfo {
            base_offset: base,
            last_offset: next.plus(-1),
            record_count: summary.record_count,
            log_start_offset: inner.log_start_offset,
            log_append_time,
            leader_epoch,
        }))
    }

    /// Rolls the active segment if the append would overfill it, it has been
    /// open longer than `roll_ms` less its jitter (see
    /// [`Segment::time_waited_for_roll`], `segment.jitter.ms`), one of its
    /// indexes is full (`segment.index.bytes`), or the new offsets would not
    /// fit its relative offsets.
    ///
    /// `first` is the appended records' first offset and `next` the one
    /// after their last: the log end offset and beyond for a leader's
    /// append, perhaps further on for a follower's copy of a compacted log
    /// (a new segment starts at `first`).
    #[allow(clippy::too_many_arguments)]
    fn maybe_roll(
        &self,
        inner: &mut Inner,
        len: usize,
        max_timestamp: Timestamp,
        first: Offset,
        next: Offset,
        now: Timestamp,
        after: &mut SyncWork,
    ) -> Result<()> {
        let len = len as u64;
        let active = inner.active();
        let offsets_overflow = next.0 - 1 - active.base_offset().0 > i64::from(u32::MAX);
        if active.is_empty() && !offsets_overflow {
            return Ok(());
        }
        let config = &inner.config;
        let too_big = active.size() + len > config.effective_segment_bytes();
        let too_old = match (
            config.effective_roll_ms(),
            active.time_waited_for_roll(max_timestamp, now),
        ) {
            (Some(ms), Some(waited)) => {
                let jitter = config.roll_jitter_ms(active.base_offset(), self.jitter_seed());
                waited > ms.saturating_sub(jitter) as i64
            }
            _ => false,
        };
        let index_full = active.index_full(config.segment_index_bytes);
        if !(too_big || too_old || index_full || offsets_overflow) {
            return Ok(());
        }
        self.roll(inner, first, after)
    }

    /// Starts a new active segment at `new_base` (at or after the log end).
    fn roll(&self, inner: &mut Inner, new_base: Offset, after: &mut SyncWork) -> Result<()> {
        let created = Segment::create(&self.dir, new_base)?;
        let old = inner.active_mut();
        if let Err(e) = old.seal_time_index() {
            tracing::warn!(segment = %old.log_path().display(), error = %e, "cannot seal time index");
        }
        after.sealed = Some((old.sync_handle()?, new_base));
        after.snapshot = Some((new_base, inner.producers.snapshot_bytes()));
        inner.segments.push(created);
        tracing::debug!(log = %self.topic_partition, base = %new_base, "rolled segment");
        Ok(())
    }

    /// Does the disk work an append left (see [`SyncWork`]).
    pub fn complete(&self, after: SyncWork) -> Result<()> {
        if after.epochs {
            if let Err(e) = self.persist_epochs() {
                // The records are in; the epochs are written again at the next flush.
                tracing::warn!(log = %self.topic_partition, error = %e, "cannot write leader epoch checkpoint");
            }
        }
        if let Some((offset, bytes)) = after.snapshot {
            if let Err(e) = crate::producer_state::write_snapshot(&self.dir, offset, &bytes) {
                tracing::warn!(log = %self.topic_partition, error = %e, "cannot write producer snapshot");
            }
        }
        if let Some((handle, upto)) = after.sealed {
            match handle.sync() {
                Ok(()) => {
                    self.persist_epochs()?;
                    self.advance_recovery_point(upto)?
                }
                Err(e) => {
                    tracing::warn!(log = %self.topic_partition, error = %e, "cannot flush rolled segment")
                }
            }
        }
        if after.flush {
            self.flush()?;
        }
        Ok(())
    }

    /// The last stable offset: the first offset of the oldest ongoing
    /// transaction, or the high watermark when none is open.
    pub fn last_stable_offset(&self) -> Offset {
        self.inner.read().last_stable_offset()
    }

    /// The ongoing transactions, oldest first: (first offset, producer).
    pub fn ongoing_transactions(&self) -> Vec<(Offset, model::ProducerId)> {
        self.inner.read().producers.ongoing().collect()
    }

    /// The aborted transactions a `read_committed` reader of `[from,
    /// upto)` must know of: those with records in that range (their marker
    /// at or after `from`, their first record before `upto`), as Fetch's
    /// `aborted_transactions` lists them.
    pub fn aborted_transactions(&self, from: Offset, upto: Offset) -> Vec<AbortedTxn> {
        let inner = self.inner.read();
        let i = inner.segment_for(from);
        let mut out: Vec<AbortedTxn> = inner.segments[i..]
            .iter()
            .flat_map(|s| s.aborted())
            .filter(|t| t.last_offset >= from && t.first_offset < upto)
            .copied()
            .collect();
        // A cleaned segment may repeat an entry of one it replaced.
        out.sort_by_key(|t| (t.last_offset, t.producer_id));
        out.dedup_by_key(|t| (t.last_offset, t.producer_id));
        out
    }

    /// Writes a transaction marker (a control batch) ending `marker`'s
    /// producer's transaction here, as the transaction coordinator asks
    /// (WriteTxnMarkers): a commit makes the transaction's records visible
    /// to `read_committed` readers, an abort records it in the segment's
    /// aborted-transaction index. A marker of an older producer epoch or
    /// an older coordinator epoch is refused. The disk work is left to the
    /// caller, as for [`Log::append_deferred`].
    pub fn write_marker(
        &self,
        marker: &TxnMarker,
        leader_epoch: LeaderEpoch,
        now: Timestamp,
    ) -> Result<(AppendInfo, SyncWork)> {
        let batch = crate::txn::control_batch(marker, now);
        let mut after = SyncWork::default();
        let mut inner = self.inner.write();
        inner.ensure_open()?;
        inner.producers.check_marker(marker)?;
        let base = inner.log_end_offset;
        let next = base.plus(1);
        self.maybe_roll(&mut inner, batch.len(), now, base, next, now, &mut after)?;
        let interval = inner.config.index_interval_bytes;
        inner.active_mut().append(
            &batch,
            base,
            leader_epoch,
            crate::segment::Stamps {
                fixes: &[],
                log_append_time: None,
            },
            interval,
            now,
        )?;
        inner.log_end_offset = next;
        let first = inner
            .producers
            .get(marker.producer_id)
            .and_then(|e| e.txn_first_offset);
        if let (ControlType::Abort, Some(first)) = (marker.control, first) {
            // Recorded before the transaction is ended here: if the index
            // cannot be written, the transaction stays open and the
            // coordinator's next marker records it (a marker twice is
            // harmless), rather than the abort being lost.
            let last_stable_offset = inner
                .producers
                .ongoing()
                .map(|(o, _)| o)
                .find(|o| *o != first)
                .unwrap_or(next)
                .min(next);
            inner.active_mut().add_aborted(AbortedTxn {
                producer_id: marker.producer_id,
                first_offset: first,
                last_offset: base,
                last_stable_offset,
            })?;
        }
        inner.producers.complete_txn(marker, now);
        after.epochs = inner.epochs.assign(leader_epoch, base);
        inner.first_unflushed_at.get_or_insert(now);
        Ok((
            AppendInfo {
                base_offset: base,
                last_offset: base,
                record_count: 1,
                log_start_offset: inner.log_start_offset,
                log_append_time: None,
                leader_epoch,
            },
            after,
        ))
    }

    /// The log start offset: the first offset that can be read.
    pub fn log_start_offset(&self) -> Offset {
        self.inner.read().log_start_offset
    }

    /// The log end offset: the offset the next record will get.
    pub fn log_end_offset(&self) -> Offset {
        self.inner.read().log_end_offset
    }

    /// The high watermark: consumers read below it. The log end offset
    /// unless the log is replicated (see [`Log::set_high_watermark`]).
    pub fn high_watermark(&self) -> Offset {
        self.inner.read().high_watermark()
    }

    /// The recovery point: every offset below it has been fsynced.
    pub fn recovery_point(&self) -> Offset {
        self.inner.read().recovery_point
    }

    /// Total bytes over all segments.
    pub fn size_bytes(&self) -> u64 {
        self.inner.read().size_bytes()
    }

    /// Bytes stored from the batch holding `offset` to the log end: what a
    /// reader at `offset` has left to read (the whole log below the log
    /// start, 0 at or past the end). Walks batch headers of one segment.
    pub fn size_from(&self, offset: Offset) -> Result<u64> {
        let (view, segment_size, later) = {
            let inner = self.inner.read();
            inner.ensure_readable()?;
            if offset >= inner.log_end_offset {
                return Ok(0);
            }
            if offset <= inner.log_start_offset {
                return Ok(inner.size_bytes());
            }
            let i = inner.segment_for(offset);
            let later: u64 = inner.segments[i + 1..].iter().map(Segment::size).sum();
            let segment = &inner.segments[i];
            (segment.view_for_offset(offset)?, segment.size(), later)
        };
        let position = match view.locate(offset, 1, true)? {
            Some((region, _)) => region.file_range().1,
            None => segment_size,
        };
        Ok(segment_size.saturating_sub(position) + later)
    }

    /// Number of segments, the active one included.
    pub fn segment_count(&self) -> usize {
        self.inner.read().segments.len()
    }

    /// Base offsets of all segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        self.inner
            .read()
            .segments
            .iter()
            .map(Segment::base_offset)
            .collect()
    }

    /// The topic's id, as recorded in `partition.metadata`.
    pub fn topic_id(&self) -> TopicId {
        self.topic_id
    }

    /// The partition this log holds.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What opening the log had to do.
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.stats
    }

    /// The first record at or after the log start offset with a timestamp
    /// `>= ts`, and that timestamp (Kafka's ListOffsets by timestamp).
    pub fn offset_for_timestamp(&self, ts: Timestamp) -> Result<Option<(Offset, Timestamp)>> {
        let (views, start) = {
            let inner = self.inner.read();
            inner.ensure_readable()?;
            let start = inner.log_start_offset;
            let views: Vec<SegmentView> = inner
                .segments
                .iter()
                .filter(|s| s.next_offset() > start && s.max_timestamp() >= ts)
                .map(|s| s.view_for_timestamp(ts))
                .collect::<Result<_>>()?;
            (views, start)
        };
        for view in &views {
            if let Some(r) = find_timestamp_in(view, ts, start)? {
                return Ok(Some((r.offset, r.timestamp)));
            }
        }
        Ok(None)
    }

    /// The first record holding the largest timestamp in the log (Kafka's
    /// ListOffsets `MAX_TIMESTAMP`); `None` if no record has a timestamp.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<(Offset, Timestamp)>> {
        let (fast, all, start) = {
            let inner = self.inner.read();
            inner.ensure_readable()?;
            let start = inner.log_start_offset;
            let live: Vec<&Segment> = inner
                .segments
                .iter()
                .filter(|s| s.next_offset() > start)
                .collect();
            let mut best: Option<&Segment> = None;
            for s in &live {
                if best.is_none_or(|b| s.max_timestamp() > b.max_timestamp()) {
                    best = Some(s);
                }
            }
            let Some(best) = best.filter(|b| b.max_timestamp().0 >= 0) else {
                return Ok(None);
            };
            let fast = if best.offset_of_max_timestamp() >= start {
                Some((
                    best.view_for_offset(best.offset_of_max_timestamp())?,
                    best.max_timestamp(),
                ))
            } else {
                None
            };
            let all: Vec<SegmentView> = live
                .iter()
                .map(|s| s.view_for_offset(start))
                .collect::<Result<_>>()?;
            (fast, all, start)
        };
        if let Some((view, max)) = fast {
            let found = view.find_in_batches(
                start,
                |h| h.max_timestamp == max,
                |body| Ok(records::max_timestamp_record(body, start)?),
            )?;
            // The batch may straddle the log start with its maximum below it.
            if let Some(r) = found.filter(|r| r.timestamp == max) {
                return Ok(Some((r.offset, r.timestamp)));
            }
        }
        // The maximum lies below the log start offset (or the headers were
        // inconsistent): look at every remaining record.
        let mut best: Option<records::RecordTimestamp> = None;
        for view in &all {
            view.find_in_batches(
                start,
                |_| true,
                |body| {
                    if let Some(r) = records::max_timestamp_record(body, start)? {
                        if best.is_none_or(|b| r.timestamp > b.timestamp) {
                            best = Some(r);
                        }
                    }
                    Ok(None::<()>)
                },
            )?;
        }
        Ok(best
            .filter(|b| b.timestamp.0 >= 0)
            .map(|r| (r.offset, r.timestamp)))
    }

    /// The latest leader epoch that appended to this log.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.inner.read().epochs.latest_epoch()
    }

    /// Kafka's OffsetForLeaderEpoch: the largest known epoch `<= epoch` and
    /// where it ended (the next epoch's start offset, or the log end offset
    /// for the latest epoch). `None` if `epoch` is newer than every known one.
    pub fn end_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
        let inner = self.inner.read();
        inner.epochs.end_offset_for(epoch, inner.log_end_offset)
    }

    /// The leader epoch cache's entries, oldest first.
    pub fn epoch_entries(&self) -> Vec<EpochEntry> {
        self.inner.read().epochs.entries().to_vec()
    }

    /// The leader epochs of the log, as replication's state machines take
    /// them.
    pub fn epoch_history(&self) -> model::EpochHistory {
        self.inner.read().epochs.history().clone()
    }

    /// What is known about an idempotent producer.
    pub fn producer_state(&self, producer_id: model::ProducerId) -> Option<ProducerEntry> {
        self.inner.read().producers.get(producer_id).cloned()
    }

    /// Every idempotent producer the log knows (Kafka's DescribeProducers),
    /// ordered by producer id.
    pub fn producer_states(&self) -> Vec<(model::ProducerId, ProducerEntry)> {
        let mut all: Vec<_> = self
            .inner
            .read()
            .producers
            .all()
            .map(|(id, e)| (id, e.clone()))
            .collect();
        all.sort_by_key(|(id, _)| id.0);
        all
    }

    /// Replaces the log's configuration (takes effect at the next append,
    /// flush check or retention run).
    pub fn update_config(&self, config: LogConfig) {
        self.inner.write().config = config;
    }

    /// The log's configuration.
    pub fn config(&self) -> LogConfig {
        self.inner.read().config.clone()
    }

    /// `min.insync.replicas` of the log's configuration.
    pub fn min_insync_replicas(&self) -> u32 {
        self.inner.read().config.min_insync_replicas
    }

    /// A number that differs between partitions, for per-segment roll
    /// jitter.
    fn jitter_seed(&self) -> u64 {
        let (hi, lo) = self.topic_id.0.as_u64_pair();
        hi ^ lo ^ (self.topic_partition.partition.0 as u64).rotate_left(32)
    }
}

/// Refuses a recompressed batch larger than `max.message.bytes`, as Kafka
/// does after its log validator changed a batch's size.
fn check_sizes(batches: &[u8], max: u32) -> Result<()> {
    for (_, h) in batch::headers(batches) {
        if h.total_size() > max as usize {
            return Err(Error::RecordBatchTooLarge {
                size: h.total_size(),
                max,
            });
        }
    }
    Ok(())
}
