//! The leader epoch cache: for each leader epoch, the first offset it wrote,
//! persisted in Kafka's `leader-epoch-checkpoint` text format.

use std::path::{Path, PathBuf};

use model::{LeaderEpoch, Offset};

use crate::checkpoint::{read_optional, write_atomic};
use crate::error::{corrupt, Result};

/// Name of the checkpoint file in the partition directory.
pub(crate) const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

pub use model::EpochEntry;
use model::EpochHistory;

/// A log's leader epochs ([`EpochHistory`], where Kafka's rules live) and
/// their checkpoint file. Changes stay in memory until
/// [`LeaderEpochCache::take_checkpoint`] hands out the text to write: an
/// append that starts a new epoch must not wait for a file creation and
/// two fsyncs (Kafka moved that write off its append path too,
/// KAFKA-15046). What a crash loses is rebuilt from the batches recovery
/// scans.
#[derive(Debug)]
pub(crate) struct LeaderEpochCache {
    path: PathBuf,
    history: EpochHistory,
    /// Entries changed since the last checkpoint text was taken.
    dirty: bool,
}

impl LeaderEpochCache {
    /// Loads the checkpoint in `dir` (empty if the file does not exist).
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let entries = match read_optional(&path)? {
            Some(text) => parse(&path, &text)?,
            None => Vec::new(),
        };
        Ok(LeaderEpochCache {
            path,
            history: EpochHistory::from_entries(entries),
            dirty: false,
        })
    }

    /// The checkpoint file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The checkpoint text if entries changed since it was last taken;
    /// marks the cache clean. Whoever takes it writes it (see
    /// [`LeaderEpochCache::write`]) or calls [`LeaderEpochCache::mark_dirty`].
    pub fn take_checkpoint(&mut self) -> Option<String> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let entries = self.history.entries();
        let mut text = format!("0\n{}\n", entries.len());
        for e in entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        Some(text)
    }

    /// Marks the entries as not yet written (a checkpoint write failed).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Writes checkpoint text taken from [`LeaderEpochCache::take_checkpoint`]
    /// atomically and durably.
    pub fn write(path: &Path, text: &str) -> Result<()> {
        write_atomic(path, text.as_bytes())
    }

    /// The epochs themselves.
    pub fn history(&self) -> &EpochHistory {
        &self.history
    }

    /// All entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        self.history.entries()
    }

    /// The latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.history.latest_epoch()
    }

    /// [`EpochHistory::assign`]. Returns whether the cache changed.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        let changed = self.history.assign(epoch, start_offset);
        self.dirty |= changed;
        changed
    }

    /// [`EpochHistory::end_offset_for`].
    pub fn end_offset_for(
        &self,
        epoch: LeaderEpoch,
        log_end_offset: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        self.history.end_offset_for(epoch, log_end_offset)
    }

    /// [`EpochHistory::truncate_from_end`].
    pub fn truncate_from_end(&mut self, end_offset: Offset) {
        self.dirty |= self.history.truncate_from_end(end_offset);
    }

    /// [`EpochHistory::truncate_from_start`].
    pub fn truncate_from_start(&mut self, start_offset: Offset) {
        self.dirty |= self.history.truncate_from_start(start_offset);
    }

    /// [`EpochHistory::clear`].
    pub fn clear(&mut self) {
        self.dirty |= self.history.clear();
    }
}

fn parse(path: &Path, text: &str) -> Result<Vec<EpochEntry>> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err(corrupt(path, "unsupported leader epoch checkpoint version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| corrupt(path, "missing entry count"))?;
    let mut entries = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let line = lines
            .next()
            .ok_or_else(|| corrupt(path, "fewer entries than counted"))?;
        let mut parts = line.split_whitespace();
        let (Some(epoch), Some(offset), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(corrupt(path, format!("malformed entry {line:?}")));
        };
        let epoch = epoch
            .parse()
            .map_err(|_| corrupt(path, format!("bad epoch in {line:?}")))?;
        let offset = offset
            .parse()
            .map_err(|_| corrupt(path, format!("bad offset in {line:?}")))?;
        entries.push(EpochEntry {
            epoch: LeaderEpoch(epoch),
            start_offset: Offset(offset),
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_in_kafka_format() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        assert!(cache.assign(LeaderEpoch(0), Offset(0)));
        assert!(!cache.assign(LeaderEpoch(0), Offset(5)));
        assert!(cache.assign(LeaderEpoch(3), Offset(10)));
        assert!(cache.assign(LeaderEpoch(4), Offset(25)));
        assert!(!dir.path().join(LEADER_EPOCH_CHECKPOINT).exists());
        let taken = cache.take_checkpoint().unwrap();
        assert_eq!(cache.take_checkpoint(), None, "clean once taken");
        LeaderEpochCache::write(cache.path(), &taken).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert_eq!(text, "0\n3\n0 0\n3 10\n4 25\n");
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), cache.entries());
    }

    #[test]
    fn truncation_from_both_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        cache.assign(LeaderEpoch(1), Offset(0));
        cache.assign(LeaderEpoch(2), Offset(10));
        cache.assign(LeaderEpoch(3), Offset(20));
        cache.truncate_from_start(Offset(15));
        assert_eq!(
            cache.entries(),
            &[
                EpochEntry {
                    epoch: LeaderEpoch(2),
                    start_offset: Offset(15)
                },
                EpochEntry {
                    epoch: LeaderEpoch(3),
                    start_offset: Offset(20)
                },
            ]
        );
        cache.truncate_from_end(Offset(20));
        assert_eq!(cache.latest_epoch(), Some(LeaderEpoch(2)));
        let text = cache.take_checkpoint().unwrap();
        LeaderEpochCache::write(cache.path(), &text).unwrap();
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), cache.entries());
    }
}
