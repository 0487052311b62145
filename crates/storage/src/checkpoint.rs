//! Small metadata files, always replaced atomically (tmp + fsync + rename).

use std::cell::Cell;
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::Path;

use model::{Offset, TopicId};

use crate::error::{corrupt, IoContext, Result};

/// Suffix of files being written; leftovers are deleted at open.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

thread_local! {
    static DEFERRED: Cell<bool> = const { Cell::new(false) };
}

/// While alive, this thread's checkpoint writes and segment syncs skip
/// their fsyncs: a bulk operation (opening or creating thousands of logs,
/// a clean shutdown) does its file work that way and then makes all of it
/// durable with one [`sync_filesystem`] before relying on it.
pub(crate) struct DeferredSync {
    was: bool,
}

impl DeferredSync {
    /// Defers fsyncs on this thread until dropped.
    pub fn new() -> DeferredSync {
        DeferredSync {
            was: DEFERRED.with(|d| d.replace(true)),
        }
    }
}

impl Drop for DeferredSync {
    fn drop(&mut self) {
        DEFERRED.with(|d| d.set(self.was));
    }
}

/// Whether fsyncs are deferred on this thread (see [`DeferredSync`]).
pub(crate) fn sync_deferred() -> bool {
    DEFERRED.with(Cell::get)
}

/// Makes everything written to the filesystem holding `dir` durable
/// (`syncfs(2)`): one call instead of an fsync per file.
pub(crate) fn sync_filesystem(dir: &Path) -> Result<()> {
    let d = File::open(dir).at(dir)?;
    // SAFETY: syncfs only takes a file descriptor, valid while `d` lives.
    let rc = unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&d)) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).at(dir);
    }
    Ok(())
}

/// Replaces `path` with `contents` atomically and durably (durable later,
/// under [`DeferredSync`]).
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = Path::new(&tmp);
    let mut file = File::create(tmp).at(tmp)?;
    file.write_all(contents).at(tmp)?;
    let sync = !sync_deferred();
    if sync {
        file.sync_all().at(tmp)?;
    }
    drop(file);
    fs::rename(tmp, path).at(path)?;
    if let (true, Some(dir)) = (sync, path.parent()) {
        sync_dir(dir)?;
    }
    Ok(())
}

/// fsyncs a directory so renames and creations in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// The file's text, or `None` if it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| corrupt(path, "not UTF-8")),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).at(path),
    }
}

/// Name of the file recording a partition's topic id.
pub(crate) const PARTITION_METADATA: &str = "partition.metadata";

/// Writes Kafka's `partition.metadata`.
pub(crate) fn write_partition_metadata(dir: &Path, topic_id: TopicId) -> Result<()> {
    let text = format!("version: 0\ntopic_id: {topic_id}\n");
    write_atomic(&dir.join(PARTITION_METADATA), text.as_bytes())
}

/// Reads `partition.metadata`; `None` if the file does not exist.
pub(crate) fn read_partition_metadata(dir: &Path) -> Result<Option<TopicId>> {
    let path = dir.join(PARTITION_METADATA);
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    let mut version = None;
    let mut topic_id = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "version" => version = Some(value.trim().to_string()),
            "topic_id" => {
                topic_id =
                    Some(TopicId::parse(value.trim()).map_err(|e| corrupt(&path, e.to_string()))?)
            }
            _ => {}
        }
    }
    if version.as_deref() != Some("0") {
        return Err(corrupt(&path, format!("unsupported version {version:?}")));
    }
    topic_id
        .map(Some)
        .ok_or_else(|| corrupt(&path, "no topic_id"))
}

/// File recording the partition's log start offset.
pub(crate) const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// File recording the partition's recovery point (everything below it was
/// flushed).
pub(crate) const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// Name of the file holding a replicated partition's high watermark (one
/// offset, as the other checkpoints; Kafka keeps them all in one
/// `replication-offset-checkpoint` per log directory).
pub(crate) const HIGH_WATERMARK_CHECKPOINT: &str = "high-watermark-checkpoint";

/// Writes a single-offset checkpoint: version line `0`, then the offset.
pub(crate) fn write_offset(path: &Path, offset: Offset) -> Result<()> {
    write_atomic(path, format!("0\n{offset}\n").as_bytes())
}

/// Reads a single-offset checkpoint; `None` if it does not exist.
pub(crate) fn read_offset(path: &Path) -> Result<Option<Offset>> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err(corrupt(path, "unsupported checkpoint version"));
    }
    lines
        .next()
        .and_then(|l| l.trim().parse::<i64>().ok())
        .map(|o| Some(Offset(o)))
        .ok_or_else(|| corrupt(path, "missing or malformed offset"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_offsets_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), None);
        let id = TopicId::random();
        write_partition_metadata(dir.path(), id).unwrap();
        let text = fs::read_to_string(dir.path().join(PARTITION_METADATA)).unwrap();
        assert_eq!(text, format!("version: 0\ntopic_id: {id}\n"));
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), Some(id));

        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        assert_eq!(read_offset(&path).unwrap(), None);
        write_offset(&path, Offset(42)).unwrap();
        assert_eq!(read_offset(&path).unwrap(), Some(Offset(42)));
        fs::write(&path, "7\n1\n").unwrap();
        assert!(read_offset(&path).is_err());
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(TMP_SUFFIX)), "{names:?}");
    }
}
