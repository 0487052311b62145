//! The leader epoch cache: for each leader epoch, the first offset it wrote,
//! persisted in Kafka's `leader-epoch-checkpoint` text format.

use std::path::{Path, PathBuf};

use model::{LeaderEpoch, Offset};

use crate::checkpoint::{read_optional, write_atomic};
use crate::error::{corrupt, Result};

/// Name of the checkpoint file in the partition directory.
pub(crate) const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// One epoch and the offset of its first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: LeaderEpoch,
    /// The first offset written in that epoch.
    pub start_offset: Offset,
}

/// Epoch entries in increasing epoch and start offset order. Changes stay
/// in memory until [`LeaderEpochCache::take_checkpoint`] hands out the text
/// to write: an append that starts a new epoch must not wait for a file
/// creation and two fsyncs (Kafka moved that write off its append path too,
/// KAFKA-15046). What a crash loses is rebuilt from the batches recovery
/// scans.
#[derive(Debug)]
pub(crate) struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
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
            entries,
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
        let mut text = format!("0\n{}\n", self.entries.len());
        for e in &self.entries {
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

    /// All entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset` if it is newer than the
    /// latest epoch. Returns whether the cache changed.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if epoch.0 < 0 || self.latest_epoch().is_some_and(|l| epoch <= l) {
            return false;
        }
        // A newer epoch cannot start before an older one ended.
        self.entries.retain(|e| e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.dirty = true;
        true
    }

    /// Kafka's OffsetForLeaderEpoch: the largest epoch `<= epoch` and the end
    /// offset of that epoch (the start of the next epoch, or the log end
    /// offset for the latest one). `None` when the epoch is unknown and
    /// newer than the latest, or the cache is empty.
    pub fn end_offset_for(
        &self,
        epoch: LeaderEpoch,
        log_end_offset: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        if epoch.0 < 0 {
            return None;
        }
        if self.latest_epoch() == Some(epoch) {
            return Some((epoch, log_end_offset));
        }
        let higher = self.entries.iter().find(|e| e.epoch > epoch)?;
        match self.entries.iter().rev().find(|e| e.epoch <= epoch) {
            Some(floor) => Some((floor.epoch, higher.start_offset)),
            // Older than anything we know: Kafka answers with the requested
            // epoch and the start of the first known one.
            None => Some((epoch, higher.start_offset)),
        }
    }

    /// Drops entries starting at or after `end_offset` (the log was
    /// truncated there).
    pub fn truncate_from_end(&mut self, end_offset: Offset) {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.dirty = true;
        }
    }

    /// Drops every entry (the log was emptied to start afresh).
    pub fn clear(&mut self) {
        if !self.entries.is_empty() {
            self.entries.clear();
            self.dirty = true;
        }
    }

    /// Drops entries wholly below `start_offset` (the log start moved there);
    /// the epoch covering it is kept, starting at `start_offset`.
    pub fn truncate_from_start(&mut self, start_offset: Offset) {
        let covering = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset);
        let Some(i) = covering else {
            return;
        };
        if i == 0 && self.entries[0].start_offset == start_offset {
            return;
        }
        self.entries.drain(..i);
        self.entries[0].start_offset = start_offset;
        self.dirty = true;
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
    fn end_offsets_follow_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(cache.end_offset_for(LeaderEpoch(0), Offset(0)), None);
        cache.assign(LeaderEpoch(1), Offset(0));
        cache.assign(LeaderEpoch(3), Offset(10));
        cache.assign(LeaderEpoch(5), Offset(20));
        let leo = Offset(30);
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(5), leo),
            Some((LeaderEpoch(5), leo))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(3), leo),
            Some((LeaderEpoch(3), Offset(20)))
        );
        // An epoch that never wrote maps to the previous one.
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(4), leo),
            Some((LeaderEpoch(3), Offset(20)))
        );
        assert_eq!(
            cache.end_offset_for(LeaderEpoch(0), leo),
            Some((LeaderEpoch(0), Offset(0)))
        );
        assert_eq!(cache.end_offset_for(LeaderEpoch(6), leo), None);
        assert_eq!(cache.end_offset_for(LeaderEpoch(-1), leo), None);
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
