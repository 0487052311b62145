//! A follower's side of replication in the log: appending its leader's
//! batches exactly as they are, and cutting the log back where it diverged
//! from the leader's (or emptying it to start at the leader's log start).

use std::path::PathBuf;

use model::{Offset, Timestamp};

use super::{Inner, Log, RegionRead, SyncWork};
use crate::batch::{check_stored_batch, BatchHeader};
use crate::checkpoint::{
    self, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use crate::error::{BatchError, Error, IoContext, Result};
use crate::producer_state::{self, ProducerStateManager};
use crate::segment::Segment;
use crate::txn::parse_control;

/// What [`Log::append_as_follower`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerAppend {
    /// The first batch's base offset.
    pub first_offset: Offset,
    /// The log end offset after the append: the offset after the last
    /// batch's last offset.
    pub log_end_offset: Offset,
    /// How many batches.
    pub batch_count: usize,
}

impl Log {
    /// Sets a replicated log's high watermark (`None`: the log is not
    /// replicated and its high watermark is its log end offset). Consumers
    /// read below it, the last stable offset never passes it and
    /// DeleteRecords cannot go past it; a follower reads on to the log end
    /// ([`Log::read_region_to_end`]). Kept at most the log end offset
    /// (and cut back with the log by [`Log::truncate_to`]); written to a
    /// checkpoint when first set, at each flush and at close, so a restart
    /// starts from it (or from an older, lower value).
    /// The caller's replication logic decides when it moves: this only
    /// keeps it. Returns the high watermark now in effect.
    pub fn set_high_watermark(&self, hw: Option<Offset>) -> Result<Offset> {
        let (now, was) = {
            let mut inner = self.inner.write();
            inner.ensure_open()?;
            let was = inner.high_watermark.is_some();
            inner.high_watermark =
                hw.map(|h| h.clamp(inner.log_start_offset, inner.log_end_offset));
            (inner.high_watermark(), was)
        };
        // Written at once when the log starts or stops being replicated, so
        // a crash before the next flush cannot make a replicated log look
        // like one whose every record is committed.
        if hw.is_some() != was {
            self.checkpoint_high_watermark()?;
        }
        Ok(now)
    }

    /// Whether the log is replicated: its high watermark is set apart from
    /// its log end offset.
    pub fn is_replicated(&self) -> bool {
        self.inner.read().high_watermark.is_some()
    }

    /// [`Log::read_region`] for a follower replica: batches up to the log
    /// end offset, not only below the high watermark.
    pub fn read_region_to_end(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<RegionRead> {
        self.read_region_bounded(offset, max_bytes, min_one_batch, super::ReadBound::LogEnd)
    }

    /// Writes the high watermark checkpoint if it changed since last
    /// written (removes it for a log no longer replicated).
    pub(super) fn checkpoint_high_watermark(&self) -> Result<()> {
        let hw = {
            let inner = self.inner.read();
            inner.high_watermark.map(|_| inner.high_watermark())
        };
        let mut written = self.checkpointed_high_watermark.lock();
        if *written == hw {
            return Ok(());
        }
        let path = self.dir.join(HIGH_WATERMARK_CHECKPOINT);
        match hw {
            Some(h) => checkpoint::write_offset(&path, h)?,
            None => match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(&path),
            },
        }
        *written = hw;
        Ok(())
    }

    /// Appends batches copied from the partition's leader exactly as they
    /// are: their offsets, leader epochs, timestamps and producer fields
    /// were set by the leader's append and are kept. Each batch is checked
    /// (complete, magic 2, CRC, a record count that fits its offsets) and
    /// offsets must grow: the first batch starts at or after the log end
    /// offset (after it when the leader's log is compacted), each next one
    /// after the previous one's last offset; otherwise nothing is written
    /// and [`Error::UnexpectedAppendOffset`] says where. Timestamp, key and
    /// size rules are the leader's to apply, not the copy's.
    ///
    /// The producer state, aborted-transaction index and leader epoch cache
    /// follow the batches as recovery replays them. The disk work is left
    /// to the caller as for [`Log::append_deferred`].
    pub fn append_as_follower(
        &self,
        batches: &[u8],
        now: Timestamp,
    ) -> Result<(FollowerAppend, SyncWork)> {
        let headers = check_copied(batches)?;
        let first = headers[0].1.base_offset;
        let next = headers[headers.len() - 1].1.next_offset();
        let max_timestamp = headers
            .iter()
            .map(|(_, h)| h.max_timestamp)
            .max()
            .unwrap_or(Timestamp(-1));
        let mut after = SyncWork::default();
        let mut inner = self.inner.write();
        inner.ensure_open()?;
        if first < inner.log_end_offset {
            return Err(Error::UnexpectedAppendOffset {
                offset: first,
                expected: inner.log_end_offset,
            });
        }
        self.maybe_roll(
            &mut inner,
            batches.len(),
            max_timestamp,
            first,
            next,
            now,
            &mut after,
        )?;
        let interval = inner.config.index_interval_bytes;
        inner
            .active_mut()
            .append_as_is(batches, &headers, interval, now)?;
        inner.log_end_offset = next;
        let Inner {
            producers,
            epochs,
            segments,
            ..
        } = &mut *inner;
        let mut aborted = Vec::new();
        for (at, h) in &headers {
            let control = if h.is_control() {
                parse_control(&batches[*at..*at + h.total_size()])
            } else {
                None
            };
            aborted.extend(super::open::replay(producers, h, control));
            after.epochs |= epochs.assign(h.partition_leader_epoch, h.base_offset);
        }
        let active = segments.len() - 1;
        for t in aborted {
            segments[active].add_aborted(t)?;
        }
        inner.first_unflushed_at.get_or_insert(now);
        if let Some(n) = inner.config.flush_interval_messages {
            after.flush = (next.0 - inner.recovery_point.0) as u64 >= n;
        }
        Ok((
            FollowerAppend {
                first_offset: first,
                log_end_offset: next,
                batch_count: headers.len(),
            },
            after,
        ))
    }

    /// Cuts the log back so that it ends at or before `offset` (Kafka's
    /// `truncateTo`, what a follower does where its log diverged from the
    /// new leader's): whole segments from `offset` on are removed, the one
    /// holding `offset` is cut before its batch holding `offset` (whole
    /// batches only) and fsynced, and the leader epoch cache, producer
    /// state (the latest snapshot at or below the new end, replayed),
    /// aborted-transaction index, recovery point and their checkpoints
    /// follow. At or below the log start offset the log is emptied and
    /// starts at `offset` (see [`Log::truncate_fully_and_start_at`]).
    /// Returns the new log end offset; nothing changes if `offset` is at or
    /// past it.
    ///
    /// A crash part-way leaves a prefix of the log as it was, never shorter
    /// than the new end: a follower then finds the divergence again and
    /// truncates again.
    pub fn truncate_to(&self, offset: Offset) -> Result<Offset> {
        {
            let inner = self.inner.read();
            inner.ensure_open()?;
            if offset >= inner.log_end_offset {
                return Ok(inner.log_end_offset);
            }
            if offset <= inner.log_start_offset {
                drop(inner);
                self.truncate_fully_and_start_at(offset)?;
                return Ok(offset);
            }
        }
        let _swap = self.segment_swap.lock();
        let (staged, delay, end) = {
            let mut inner = self.inner.write();
            inner.ensure_open()?;
            if offset >= inner.log_end_offset {
                return Ok(inner.log_end_offset);
            }
            // Segments starting at or after `offset` go whole (never the
            // first: the log start is below `offset`).
            let keep = inner
                .segments
                .partition_point(|s| s.base_offset() < offset)
                .max(1);
            let removed: Vec<Segment> = inner.segments.drain(keep..).collect();
            // Renamed before the kept segment is cut, so a crash in
            // between cannot bring them back after a shorter segment.
            let staged = match stage_removed(&removed) {
                Ok(staged) => staged,
                Err(e) => {
                    inner.segments.extend(removed);
                    return Err(e);
                }
            };
            if !removed.is_empty() {
                checkpoint::sync_dir(&self.dir)?;
            }
            let interval = inner.config.index_interval_bytes;
            let end = inner.active_mut().truncate_to(offset, interval)?;
            inner.log_end_offset = end;
            inner.high_watermark = inner.high_watermark.map(|h| h.min(end));
            inner.epochs.truncate_from_end(end);
            if inner.recovery_point > end {
                inner.recovery_point = end;
            }
            let (producers, _) = super::open::load_producers(&self.dir, &mut inner.segments, end)?;
            inner.producers = producers;
            (staged, inner.config.file_delete_delay_ms, end)
        };
        self.lower_recovery_checkpoint(end)?;
        self.checkpoint_high_watermark()?;
        self.persist_epochs()?;
        self.schedule_removal(staged, delay);
        tracing::info!(log = %self.topic_partition, requested = %offset, log_end_offset = %end, "truncated log");
        Ok(end)
    }

    /// Empties the log and makes it start, and end, at `offset` (Kafka's
    /// `truncateFullyAndStartAt`: a follower whose log ends below its
    /// leader's log start, or that must drop everything it has). Every
    /// segment is removed, a new empty one starts at `offset`, the leader
    /// epochs and producer state are cleared, and the checkpoints say so.
    pub fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<()> {
        let _swap = self.segment_swap.lock();
        let (staged, delay) = {
            let mut inner = self.inner.write();
            inner.ensure_open()?;
            let removed: Vec<Segment> = inner.segments.drain(..).collect();
            // Renamed first: the new segment may take one's name.
            let staged = stage_removed(&removed);
            let staged =
                match staged.and_then(|s| Segment::create(&self.dir, offset).map(|n| (s, n))) {
                    Ok((staged, segment)) => {
                        inner.segments.push(segment);
                        staged
                    }
                    Err(e) => {
                        // Never leave the log without a segment: what is left
                        // on disk is found again at the next open.
                        inner.segments = removed;
                        return Err(e);
                    }
                };
            checkpoint::sync_dir(&self.dir)?;
            inner.log_start_offset = offset;
            inner.log_end_offset = offset;
            inner.high_watermark = inner.high_watermark.map(|_| offset);
            inner.recovery_point = offset;
            inner.first_unflushed_at = None;
            inner.epochs.clear();
            inner.producers = ProducerStateManager::default();
            producer_state::delete_snapshots_before(&self.dir, Offset(i64::MAX))?;
            checkpoint::write_offset(&self.dir.join(LOG_START_OFFSET_CHECKPOINT), offset)?;
            (staged, inner.config.file_delete_delay_ms)
        };
        checkpoint::write_offset(&self.dir.join(RECOVERY_POINT_CHECKPOINT), offset)?;
        *self.checkpointed_recovery_point.lock() = offset;
        self.checkpoint_high_watermark()?;
        self.persist_epochs()?;
        self.schedule_removal(staged, delay);
        tracing::info!(log = %self.topic_partition, %offset, "emptied log to start afresh");
        Ok(())
    }

    /// Writes the recovery point checkpoint if it names an offset past the
    /// log's new end `end`.
    fn lower_recovery_checkpoint(&self, end: Offset) -> Result<()> {
        let mut written = self.checkpointed_recovery_point.lock();
        if *written > end {
            checkpoint::write_offset(&self.dir.join(RECOVERY_POINT_CHECKPOINT), end)?;
            *written = end;
        }
        Ok(())
    }

    /// Removes the files of segments renamed `*.deleted` now, or after
    /// `file.delete.delay.ms` ([`Log::delete_expired_files`]).
    fn schedule_removal(&self, staged: Vec<PathBuf>, delay_ms: u64) {
        if delay_ms == 0 {
            for path in staged {
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot delete truncated segment file");
                }
            }
            return;
        }
        let due = std::time::Instant::now() + std::time::Duration::from_millis(delay_ms);
        self.pending_deletes
            .lock()
            .extend(staged.into_iter().map(|p| (due, p)));
    }
}

/// Renames the files of `removed` segments `*.deleted`; their new paths.
fn stage_removed(removed: &[Segment]) -> Result<Vec<PathBuf>> {
    let mut staged = Vec::with_capacity(removed.len() * 4);
    for segment in removed {
        staged.extend(segment.rename_deleted()?);
    }
    Ok(staged)
}

/// The headers of copied batches, with their positions, after checking
/// each one and that offsets grow.
fn check_copied(buf: &[u8]) -> Result<Vec<(usize, BatchHeader)>> {
    if buf.is_empty() {
        return Err(Error::Batch(BatchError::Empty));
    }
    let mut headers = Vec::with_capacity(1);
    let mut position = 0;
    let mut next: Option<Offset> = None;
    while position < buf.len() {
        let rest = &buf[position..];
        let header = BatchHeader::parse_at(rest, position).map_err(Error::Batch)?;
        let size = header.total_size();
        if size > rest.len() {
            return Err(Error::Batch(BatchError::Truncated {
                position,
                needed: size,
                available: rest.len(),
            }));
        }
        check_stored_batch(&rest[..size], &header, position).map_err(Error::Batch)?;
        if header.base_offset.0 < 0 || next.is_some_and(|n| header.base_offset < n) {
            return Err(Error::UnexpectedAppendOffset {
                offset: header.base_offset,
                expected: next.unwrap_or(Offset(0)),
            });
        }
        next = Some(header.next_offset());
        headers.push((position, header));
        position += size;
    }
    Ok(headers)
}
