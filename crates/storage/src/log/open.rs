//! Opening a log: loading trusted segments, recovering the rest after a
//! crash, and rebuilding the epoch cache and producer state.

use std::fs;
use std::path::{Path, PathBuf};

use model::{Offset, TopicId, TopicPartition};
use parking_lot::{Mutex, RwLock};

use super::{Inner, Log, RecoveryStats, State};
use crate::batch::BatchHeader;
use crate::checkpoint::{
    self, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    TMP_SUFFIX,
};
use crate::config::LogConfig;
use crate::epoch::LeaderEpochCache;
use crate::error::{Error, IoContext, Result};
use crate::producer_state::{self, ProducerStateManager};
use crate::segment::{
    file_name, parse_file_name, scan, Segment, DELETED_SUFFIX, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT,
};
use crate::txn::{parse_control, AbortedTxn, ControlType, TXN_INDEX_EXT};

/// What was found in a partition directory.
struct DirListing {
    bases: Vec<Offset>,
}

fn list_dir(dir: &Path) -> Result<DirListing> {
    let mut bases = Vec::new();
    let mut index_files = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.ends_with(TMP_SUFFIX) || name.ends_with(DELETED_SUFFIX) {
            // A metadata write interrupted by a crash (the old file is
            // intact), or a deleted segment's file still waiting out
            // `file.delete.delay.ms` when the broker stopped.
            let path = entry.path();
            fs::remove_file(&path).at(&path)?;
        } else if let Some(base) = parse_file_name(&name, LOG_EXT) {
            bases.push(base);
        } else if let Some(base) = parse_file_name(&name, INDEX_EXT)
            .or_else(|| parse_file_name(&name, TIME_INDEX_EXT))
            .or_else(|| parse_file_name(&name, TXN_INDEX_EXT))
        {
            index_files.push((base, entry.path()));
        }
    }
    bases.sort();
    for (base, path) in index_files {
        if bases.binary_search(&base).is_err() {
            fs::remove_file(&path).at(&path)?;
        }
    }
    Ok(DirListing { bases })
}

fn delete_segment_files(dir: &Path, base: Offset) -> Result<()> {
    for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT, TXN_INDEX_EXT] {
        let path = dir.join(file_name(base, ext));
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).at(&path),
        }
    }
    Ok(())
}

impl Log {
    /// Opens the log in `dir`, creating it if needed. After a clean shutdown
    /// (`clean`) every segment is trusted and loaded from its indexes; after
    /// a crash, segments from the one holding the recovery point onward are
    /// scanned and cut at the first bad byte.
    pub(crate) fn open(
        dir: PathBuf,
        topic_partition: TopicPartition,
        topic_id: TopicId,
        config: LogConfig,
        clean: bool,
    ) -> Result<Log> {
        fs::create_dir_all(&dir).at(&dir)?;
        let created = match checkpoint::read_partition_metadata(&dir)? {
            Some(found) if found != topic_id => {
                return Err(Error::TopicIdMismatch {
                    path: dir,
                    expected: topic_id,
                    found,
                })
            }
            Some(_) => false,
            None => {
                checkpoint::write_partition_metadata(&dir, topic_id)?;
                true
            }
        };
        // A cleaner's swap interrupted by a crash is finished (or undone)
        // before the segments are listed.
        crate::cleaner::swap::recover(&dir)?;
        let listing = list_dir(&dir)?;
        let start_checkpoint = checkpoint::read_offset(&dir.join(LOG_START_OFFSET_CHECKPOINT))?;
        let recovery_checkpoint = checkpoint::read_offset(&dir.join(RECOVERY_POINT_CHECKPOINT))?;
        let interval = config.index_interval_bytes;

        let mut stats = RecoveryStats {
            clean,
            created,
            ..RecoveryStats::default()
        };
        let mut segments = Vec::with_capacity(listing.bases.len().max(1));
        let bases = &listing.bases;
        let recovery_point = recovery_checkpoint.unwrap_or(Offset(0));
        // Segments before this index were flushed and are trusted.
        let mut recover_from = if clean {
            bases.len()
        } else {
            bases
                .partition_point(|b| *b <= recovery_point)
                .saturating_sub(1)
        };
        let mut i = 0;
        while i < bases.len() {
            let base = bases[i];
            if i < recover_from {
                let loaded = Segment::load(&dir, base, bases.get(i + 1).copied(), interval)?;
                stats.indexes_rebuilt += usize::from(loaded.index_rebuilt);
                if loaded.needs_recovery {
                    tracing::warn!(segment = %loaded.segment.log_path().display(),
                        "segment expected to be intact has bad bytes; recovering it");
                    recover_from = i;
                    continue;
                }
                stats.segments_loaded += 1;
                segments.push(loaded.segment);
                i += 1;
                continue;
            }
            let (segment, truncated) = Segment::recover(&dir, base, interval)?;
            stats.segments_recovered += 1;
            let next_base = bases.get(i + 1).copied();
            let broken_chain = next_base.is_some_and(|n| segment.next_offset() > n);
            if truncated > 0 || broken_chain {
                if truncated > 0 {
                    tracing::warn!(segment = %segment.log_path().display(),
                        "truncated {truncated} bytes of torn tail in segment");
                    stats.bytes_truncated += truncated;
                }
                for later in &bases[i + 1..] {
                    tracing::warn!(base = %later, dir = %dir.display(), "deleting segment after a corrupt one");
                    delete_segment_files(&dir, *later)?;
                    stats.segments_deleted += 1;
                }
                segments.push(segment);
                break;
            }
            segments.push(segment);
            i += 1;
        }

        let first_base = segments.first().map(Segment::base_offset);
        let log_start_offset = match (start_checkpoint, first_base) {
            (Some(c), Some(f)) => c.max(f),
            (c, f) => c.or(f).unwrap_or(Offset(0)),
        };
        if segments.is_empty() {
            segments.push(Segment::create(&dir, log_start_offset)?);
        }
        let mut log_end_offset = segments[segments.len() - 1].next_offset();
        if log_start_offset > log_end_offset {
            // Everything left is below the log start: start afresh there so
            // offsets already handed out are never reused.
            tracing::warn!(dir = %dir.display(), %log_start_offset, %log_end_offset,
                "log start offset beyond recovered end; starting an empty segment");
            for s in segments.drain(..) {
                s.delete_files()?;
            }
            segments.push(Segment::create(&dir, log_start_offset)?);
            log_end_offset = log_start_offset;
        }

        let recovery_point = if clean {
            log_end_offset
        } else {
            // What was recovered is made durable so it is not scanned again.
            for s in segments.iter().skip(recover_from.min(segments.len())) {
                s.sync()?;
            }
            checkpoint::write_offset(&dir.join(RECOVERY_POINT_CHECKPOINT), log_end_offset)?;
            log_end_offset
        };
        if start_checkpoint.is_some_and(|c| c != log_start_offset) {
            checkpoint::write_offset(&dir.join(LOG_START_OFFSET_CHECKPOINT), log_start_offset)?;
        }

        let mut epochs = LeaderEpochCache::load(&dir)?;
        if !clean {
            // The checkpoint is only sure to cover what was flushed: the
            // epochs of the scanned segments come from their batches.
            for segment in segments.iter().skip(recover_from).filter(|s| !s.is_empty()) {
                let view = segment.view_for_offset(segment.base_offset())?;
                scan(
                    &view.file,
                    &view.path,
                    view.start,
                    view.end,
                    false,
                    |_, h, _| {
                        epochs.assign(h.partition_leader_epoch, h.base_offset);
                        Ok(true)
                    },
                )?;
            }
        }
        epochs.truncate_from_end(log_end_offset);
        epochs.truncate_from_start(log_start_offset);
        if let Some(text) = epochs.take_checkpoint() {
            LeaderEpochCache::write(epochs.path(), &text)?;
        }

        // Aborts whose markers were cut off with a torn tail are forgotten;
        // those after the producer snapshot are recorded again by the replay.
        for s in &mut segments {
            s.retain_aborted_below(log_end_offset)?;
        }
        let (producers, replayed) = load_producers(&dir, &mut segments, log_end_offset)?;
        // A replicated log's high watermark as last checkpointed: never
        // beyond what the log still holds.
        let high_watermark = checkpoint::read_offset(&dir.join(HIGH_WATERMARK_CHECKPOINT))?
            .map(|h| h.clamp(log_start_offset, log_end_offset));
        stats.producer_batches_replayed = replayed;
        prune_snapshots(&dir, &segments)?;

        tracing::debug!(log = %topic_partition, ?stats, %log_start_offset, %log_end_offset, "opened log");
        Ok(Log {
            dir,
            topic_partition,
            topic_id,
            inner: RwLock::new(Inner {
                config,
                segments,
                log_start_offset,
                log_end_offset,
                high_watermark,
                recovery_point,
                first_unflushed_at: None,
                epochs,
                producers,
                state: State::Open,
            }),
            checkpointed_recovery_point: Mutex::new(recovery_point),
            checkpointed_high_watermark: Mutex::new(high_watermark),
            epoch_checkpoint: Mutex::new(()),
            pending_deletes: Mutex::new(Vec::new()),
            segment_swap: Mutex::new(()),
            stats,
        })
    }
}

/// Keeps the producer snapshots that can still serve: the latest one and
/// those at segment bases (taken at rolls); drops those of deleted segments
/// and older clean-shutdown ones.
fn prune_snapshots(dir: &Path, segments: &[Segment]) -> Result<()> {
    let mut offsets = producer_state::list_snapshots(dir)?;
    offsets.pop();
    for offset in offsets {
        let at_base = segments
            .binary_search_by_key(&offset, Segment::base_offset)
            .is_ok();
        if !at_base {
            producer_state::remove_snapshot(dir, offset)?;
        }
    }
    Ok(())
}

/// Loads the latest producer snapshot and replays the batch headers after it
/// (and the markers of control batches), recording the aborted
/// transactions it meets in their segments' indexes where they are missing.
pub(super) fn load_producers(
    dir: &Path,
    segments: &mut [Segment],
    log_end_offset: Offset,
) -> Result<(ProducerStateManager, u64)> {
    let (mut producers, snapshot) = producer_state::load_latest(dir, log_end_offset)?;
    let from = snapshot.unwrap_or(Offset(0));
    let mut replayed = 0;
    for segment in segments
        .iter_mut()
        .filter(|s| s.next_offset() > from && !s.is_empty())
    {
        let view = segment.view_for_offset(from)?;
        let mut aborted = Vec::new();
        let end = scan(
            &view.file,
            &view.path,
            view.start,
            view.end,
            false,
            |_, h, body| {
                if h.base_offset >= from {
                    let control = if h.is_control() {
                        parse_control(body)
                    } else {
                        None
                    };
                    aborted.extend(replay(&mut producers, h, control));
                    replayed += 1;
                }
                Ok(true)
            },
        )?;
        if let Some(e) = end.invalid {
            tracing::warn!(segment = %view.path.display(), error = %e, "stopped producer state replay at a bad batch");
        }
        for t in aborted {
            segment.add_aborted(t)?;
        }
    }
    Ok((producers, replayed))
}

/// Applies a stored batch (`control`: the marker a control batch holds) to
/// the producer state, as recovery and a follower's copy do; the aborted
/// transaction it ends, if it is an abort marker of an open one.
pub(super) fn replay(
    producers: &mut ProducerStateManager,
    h: &BatchHeader,
    control: Option<(ControlType, i32)>,
) -> Option<AbortedTxn> {
    let first = producers.replay(h, control)?;
    matches!(control, Some((ControlType::Abort, _))).then(|| AbortedTxn {
        producer_id: h.producer_id,
        first_offset: first,
        last_offset: h.base_offset,
        last_stable_offset: producers.first_unstable_offset().unwrap_or(h.next_offset()),
    })
}
