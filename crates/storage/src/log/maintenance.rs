//! Flushing, retention, log start offset moves and closing.

use model::{Offset, Timestamp};

use super::{Inner, Log, State};
use crate::checkpoint::{self, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT};
use crate::epoch::LeaderEpochCache;
use crate::error::Result;
use crate::producer_state;
use crate::segment::Segment;

impl Log {
    /// fsyncs every segment holding unflushed records and moves the
    /// recovery point to the log end offset. The fsync runs outside the
    /// log's lock, so appends continue meanwhile.
    pub fn flush(&self) -> Result<()> {
        let (handles, upto) = {
            let inner = self.inner.read();
            // A closed log was flushed by close().
            if inner.state == State::Closed {
                return Ok(());
            }
            inner.ensure_open()?;
            if inner.log_end_offset <= inner.recovery_point {
                return Ok(());
            }
            let from = inner.segment_for(inner.recovery_point);
            let handles = inner.segments[from..]
                .iter()
                .map(Segment::sync_handle)
                .collect::<Result<Vec<_>>>()?;
            (handles, inner.log_end_offset)
        };
        for h in &handles {
            h.sync()?;
        }
        {
            let mut inner = self.inner.write();
            if inner.log_end_offset == upto {
                inner.first_unflushed_at = None;
            }
        }
        // Epochs below the recovery point are never rebuilt from the log.
        self.persist_epochs()?;
        self.checkpoint_high_watermark()?;
        self.advance_recovery_point(upto)
    }

    /// Flushes if `flush_interval_ms` has passed since the oldest unflushed
    /// append.
    pub fn flush_due(&self, now: Timestamp) -> Result<()> {
        let due = {
            let inner = self.inner.read();
            if inner.state != State::Open {
                return Ok(());
            }
            match (inner.config.flush_interval_ms, inner.first_unflushed_at) {
                (Some(ms), Some(since)) => now.0.saturating_sub(since.0) >= ms as i64,
                _ => false,
            }
        };
        if due {
            self.flush()?;
        }
        Ok(())
    }

    /// Records that everything below `offset` is on disk. The checkpoint file
    /// is only rewritten when the recovery point enters a newer segment:
    /// recovery works a segment at a time, so finer progress buys nothing.
    pub(super) fn advance_recovery_point(&self, offset: Offset) -> Result<()> {
        let (point, segment_base) = {
            let mut inner = self.inner.write();
            if offset > inner.recovery_point {
                inner.recovery_point = offset;
            }
            let point = inner.recovery_point;
            (
                point,
                inner.segments[inner.segment_for(point)].base_offset(),
            )
        };
        let mut written = self.checkpointed_recovery_point.lock();
        if *written < segment_base {
            checkpoint::write_offset(&self.dir.join(RECOVERY_POINT_CHECKPOINT), point)?;
            *written = point;
        }
        Ok(())
    }

    /// Deletes closed segments (never the active one), oldest first: those
    /// whose newest record is older than `retention_ms`, then those the log
    /// can lose while staying at least `retention_bytes` large (both only
    /// when `cleanup.policy` includes `delete`), then those wholly below the
    /// log start offset. Advances the log start offset, and
    /// forgets producers idle longer than `producer_id_expiration_ms`.
    /// Returns the number of segments deleted.
    pub fn run_retention(&self, now: Timestamp) -> Result<u64> {
        let _swap = self.segment_swap.lock();
        let removed = {
            let mut inner = self.inner.write();
            if inner.state != State::Open {
                return Ok(0);
            }
            // A replicated log keeps what is not committed yet: only
            // segments wholly below the high watermark may go (on a log
            // with one replica that is every closed segment).
            let hw = inner.high_watermark();
            let closed = inner.segments[..inner.segments.len() - 1]
                .iter()
                .take_while(|s| s.next_offset() <= hw)
                .count();
            let mut n = 0;
            // Time and size retention belong to the `delete` policy; a
            // compact-only log loses segments only below its start offset
            // (the cleaner thins the rest).
            let delete = inner.config.cleanup_policy.delete;
            if let Some(ms) = inner.config.retention_ms.filter(|_| delete) {
                while n < closed
                    && now
                        .0
                        .saturating_sub(inner.segments[n].retention_timestamp().0)
                        > ms as i64
                {
                    n += 1;
                }
            }
            if let Some(limit) = inner.config.retention_bytes.filter(|_| delete) {
                let remaining: u64 = inner.segments[n..].iter().map(Segment::size).sum();
                let mut excess = remaining as i128 - limit as i128;
                while n < closed && excess - inner.segments[n].size() as i128 >= 0 {
                    excess -= inner.segments[n].size() as i128;
                    n += 1;
                }
            }
            while n < closed && inner.segments[n].next_offset() <= inner.log_start_offset {
                n += 1;
            }
            if let Some(ms) = inner.config.producer_id_expiration_ms {
                let expired = inner.producers.remove_expired(now, ms);
                if expired > 0 {
                    tracing::debug!(log = %self.topic_partition, expired, "expired idle producers");
                }
            }
            self.remove_oldest(&mut inner, n)?
        };
        let count = removed.len() as u64;
        self.delete_segment_files(removed);
        if count > 0 {
            self.persist_epochs()?;
        }
        Ok(count)
    }

    /// Takes the `n` oldest segments out of the log and moves the log start
    /// offset past them. Their files are deleted by the caller, outside the
    /// lock; readers holding their handles keep reading safely.
    fn remove_oldest(&self, inner: &mut Inner, n: usize) -> Result<Vec<Segment>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let removed: Vec<Segment> = inner.segments.drain(..n).collect();
        let first = inner.segments[0].base_offset();
        if first > inner.log_start_offset {
            self.set_log_start_offset(inner, first)?;
        }
        producer_state::delete_snapshots_before(&self.dir, first)?;
        Ok(removed)
    }

    fn set_log_start_offset(&self, inner: &mut Inner, offset: Offset) -> Result<()> {
        inner.log_start_offset = offset;
        checkpoint::write_offset(&self.dir.join(LOG_START_OFFSET_CHECKPOINT), offset)?;
        // Written by the caller once the lock is released (persist_epochs).
        inner.epochs.truncate_from_start(offset);
        Ok(())
    }

    /// Deletes the files of segments taken out of the log: at once with
    /// `file.delete.delay.ms = 0`, else renamed `*.deleted` now and removed
    /// once the delay has passed ([`Log::delete_expired_files`]), as Kafka
    /// does.
    fn delete_segment_files(&self, removed: Vec<Segment>) {
        if removed.is_empty() {
            return;
        }
        let delay = self.inner.read().config.file_delete_delay_ms;
        let due = std::time::Instant::now() + std::time::Duration::from_millis(delay);
        for segment in removed {
            tracing::info!(log = %self.topic_partition, segment = %segment.log_path().display(), delay_ms = delay, "deleting segment");
            let staged = if delay == 0 {
                Err(None)
            } else {
                segment.rename_deleted().map_err(Some)
            };
            match staged {
                Ok(paths) => self
                    .pending_deletes
                    .lock()
                    .extend(paths.into_iter().map(|p| (due, p))),
                Err(e) => {
                    if let Some(e) = e {
                        tracing::warn!(error = %e, "cannot rename deleted segment files; deleting them now");
                    }
                    if let Err(e) = segment.delete_files() {
                        tracing::warn!(error = %e, "cannot delete segment files");
                    }
                }
            }
        }
    }

    /// Removes the files of deleted segments whose `file.delete.delay.ms`
    /// has passed. Returns how many files were removed.
    pub fn delete_expired_files(&self) -> usize {
        let now = std::time::Instant::now();
        let due: Vec<std::path::PathBuf> = {
            let mut pending = self.pending_deletes.lock();
            if pending.is_empty() {
                return 0;
            }
            let (due, wait): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(at, _)| *at <= now);
            *pending = wait;
            due.into_iter().map(|(_, p)| p).collect()
        };
        let mut removed = 0;
        for path in due {
            match std::fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot delete segment file")
                }
            }
        }
        removed
    }

    /// How many files of deleted segments wait for `file.delete.delay.ms`.
    pub fn pending_file_deletes(&self) -> usize {
        self.pending_deletes.lock().len()
    }

    /// Kafka's DeleteRecords: moves the log start offset up to `offset`
    /// (checkpointed), deleting closed segments wholly below it. Errors if
    /// `offset` is beyond the high watermark. Returns the new log start
    /// offset (unchanged if `offset` is not above it).
    pub fn delete_records_before(&self, offset: Offset) -> Result<Offset> {
        let _swap = self.segment_swap.lock();
        let (removed, start) = {
            let mut inner = self.inner.write();
            inner.ensure_open()?;
            if offset.0 < 0 || offset > inner.high_watermark() {
                return Err(inner.out_of_range(offset));
            }
            if offset <= inner.log_start_offset {
                return Ok(inner.log_start_offset);
            }
            self.set_log_start_offset(&mut inner, offset)?;
            // A replicated log keeps what is not committed yet: only
            // segments wholly below the high watermark may go (on a log
            // with one replica that is every closed segment).
            let hw = inner.high_watermark();
            let closed = inner.segments[..inner.segments.len() - 1]
                .iter()
                .take_while(|s| s.next_offset() <= hw)
                .count();
            let mut n = 0;
            while n < closed && inner.segments[n].next_offset() <= offset {
                n += 1;
            }
            (self.remove_oldest(&mut inner, n)?, inner.log_start_offset)
        };
        self.delete_segment_files(removed);
        self.persist_epochs()?;
        Ok(start)
    }

    /// Clean close: seals and fsyncs the active segment, writes the
    /// checkpoints and a producer snapshot at the log end offset. Further
    /// appends fail with [`crate::Error::LogClosed`].
    pub(crate) fn close(&self) -> Result<()> {
        let mut inner = self.inner.write();
        if inner.state != State::Open {
            return Ok(());
        }
        inner.active_mut().seal_time_index()?;
        let from = inner.segment_for(inner.recovery_point);
        for segment in &inner.segments[from..] {
            segment.sync()?;
        }
        let end = inner.log_end_offset;
        inner.recovery_point = end;
        checkpoint::write_offset(&self.dir.join(RECOVERY_POINT_CHECKPOINT), end)?;
        *self.checkpointed_recovery_point.lock() = end;
        checkpoint::write_offset(
            &self.dir.join(LOG_START_OFFSET_CHECKPOINT),
            inner.log_start_offset,
        )?;
        producer_state::write_snapshot(&self.dir, end, &inner.producers.snapshot_bytes())?;
        inner.state = State::Closed;
        drop(inner);
        self.checkpoint_high_watermark()?;
        self.persist_epochs()
    }

    /// Writes the leader epoch checkpoint if the epochs changed since it was
    /// last written. Writers are serialized and each writes the entries as
    /// they are when its turn comes, so an older text never replaces a
    /// newer one.
    pub(super) fn persist_epochs(&self) -> Result<()> {
        let _turn = self.epoch_checkpoint.lock();
        let (path, text) = {
            let mut inner = self.inner.write();
            match inner.epochs.take_checkpoint() {
                Some(text) => (inner.epochs.path().to_path_buf(), text),
                None => return Ok(()),
            }
        };
        LeaderEpochCache::write(&path, &text).inspect_err(|_| {
            self.inner.write().epochs.mark_dirty();
        })
    }

    /// Marks the log deleted: every later operation fails with
    /// [`crate::Error::LogDeleted`]. Waits for in-flight appends.
    pub(crate) fn mark_deleted(&self) {
        self.inner.write().state = State::Deleted;
    }

    /// Whether the log was deleted.
    pub fn is_deleted(&self) -> bool {
        self.inner.read().state == State::Deleted
    }
}
