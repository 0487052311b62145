//! The log manager: owns the data directory and every partition log in it.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use model::{PartitionId, Timestamp, TopicId, TopicName, TopicPartition};
use parking_lot::{Mutex, RwLock};

use crate::checkpoint::{
    read_partition_metadata, sync_dir, sync_filesystem, write_atomic, DeferredSync,
};
use crate::config::LogConfig;
use crate::error::{Error, IoContext, Result};
use crate::log::Log;

/// Lock file taken exclusively while a manager has the directory open.
pub const LOCK_FILE: &str = ".lock";
/// Marker written by a clean shutdown and removed at open.
pub const CLEAN_SHUTDOWN_MARKER: &str = ".magnetar-clean-shutdown";
/// Directory where deleted partitions are staged before removal.
pub const DELETING_DIR: &str = "deleting";

/// Owns a data directory holding one `{topic}-{partition}` directory per
/// partition log.
#[derive(Debug)]
pub struct LogManager {
    data_dir: PathBuf,
    /// Held for the manager's lifetime; the OS lock goes with the handle.
    _lock: File,
    /// Which lock this is: see [`LogManager::lock_identity`].
    lock_identity: Option<String>,
    clean_shutdown: bool,
    logs: RwLock<HashMap<TopicPartition, Arc<Log>>>,
    /// One lock per partition being opened, so partitions open in parallel
    /// but never one partition twice at once.
    opening: Mutex<HashMap<TopicPartition, Arc<Mutex<()>>>>,
    /// Whether bulk file work yields the CPU to requests (set once the
    /// broker serves; start-up and shutdown run at normal priority).
    background: AtomicBool,
    /// Directories under `deleting/` waiting for their removal, with when
    /// they were staged (or found there at open).
    staged: Mutex<Vec<(PathBuf, std::time::Instant)>>,
}

/// One log to open or create with [`LogManager::open_logs`].
#[derive(Debug, Clone)]
pub struct LogSpec {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// Its topic's id.
    pub topic_id: TopicId,
    /// Its configuration.
    pub config: LogConfig,
}

/// Parses a `{topic}-{partition}` directory name; topics may contain '-'.
fn parse_partition_dir(name: &str) -> Option<TopicPartition> {
    let (topic, partition) = name.rsplit_once('-')?;
    let id: i32 = partition.parse().ok()?;
    // Only canonical numbers: "orders-03" or "orders-+3" is not ours.
    if id < 0 || id.to_string() != partition {
        return None;
    }
    Some(TopicPartition::new(
        TopicName::new(topic).ok()?,
        PartitionId(id),
    ))
}

/// Whether `data_dir` holds nothing but the lock file: never used by a
/// broker before.
fn is_new_data_dir(data_dir: &Path) -> Result<bool> {
    for entry in fs::read_dir(data_dir).at(data_dir)? {
        let entry = entry.at(data_dir)?;
        if entry.file_name() != LOCK_FILE {
            return Ok(false);
        }
    }
    Ok(true)
}

fn remove_dir_all_if_exists(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).at(path),
    }
}

impl LogManager {
    /// Opens (creating if needed) `data_dir`: takes an exclusive lock on
    /// `{data_dir}/.lock` (failing with [`Error::DataDirLocked`] if another
    /// process holds it), notes and removes the clean-shutdown marker (so a
    /// crash from now on is detected), and purges partitions left
    /// half-deleted under `deleting/`.
    pub fn open(data_dir: &Path) -> Result<LogManager> {
        fs::create_dir_all(data_dir).at(data_dir)?;
        let lock_path = data_dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .at(&lock_path)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::DataDirLocked {
                    path: data_dir.to_path_buf(),
                })
            }
            Err(TryLockError::Error(e)) => return Err(e).at(&lock_path),
        }
        let lock_identity = lock_identity(&lock);
        let marker = data_dir.join(CLEAN_SHUTDOWN_MARKER);
        let clean_shutdown = match fs::remove_file(&marker) {
            Ok(()) => {
                sync_dir(data_dir)?;
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(e).at(&marker),
        };
        // Staged deletions survive a restart: they are removed the delay
        // after this open, as after their staging.
        let mut staged = Vec::new();
        let deleting = data_dir.join(DELETING_DIR);
        if deleting.is_dir() {
            let now = std::time::Instant::now();
            for entry in fs::read_dir(&deleting).at(&deleting)? {
                staged.push((entry.at(&deleting)?.path(), now));
            }
        }
        let fresh = is_new_data_dir(data_dir)?;
        let previous_run = match (fresh, clean_shutdown) {
            (true, _) => "new data directory",
            (false, true) => "the previous run shut down cleanly",
            (false, false) => "the previous run did not shut down cleanly; recovering",
        };
        tracing::info!(data_dir = %data_dir.display(), "opened data directory: {previous_run}");
        Ok(LogManager {
            data_dir: data_dir.to_path_buf(),
            _lock: lock,
            lock_identity,
            clean_shutdown,
            logs: RwLock::new(HashMap::new()),
            opening: Mutex::new(HashMap::new()),
            background: AtomicBool::new(false),
            staged: Mutex::new(staged),
        })
    }

    /// From now on (`true`), bulk file work (opening, creating and
    /// deleting many logs) runs in the scheduler's idle class so requests
    /// on other threads are not held up; `false` restores normal priority.
    pub fn set_background_bulk_work(&self, on: bool) {
        self.background.store(on, Ordering::Relaxed);
    }

    fn bulk_priority(&self) -> crate::parallel::Priority {
        if self.background.load(Ordering::Relaxed) {
            crate::parallel::Priority::Background
        } else {
            crate::parallel::Priority::Normal
        }
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The lock this manager holds, as `{boot id}:{device}:{inode}` of the
    /// lock file (`None` where the kernel's boot id cannot be read). Two
    /// processes with the same identity ran under the same kernel boot and
    /// locked the same file, so they never held the lock at once: a
    /// predecessor that reported this identity is gone. A copy of the
    /// directory (another inode) or another machine (another boot) never
    /// has it.
    pub fn lock_identity(&self) -> Option<&str> {
        self.lock_identity.as_deref()
    }

    /// Whether the previous run shut down cleanly (logs opened by this
    /// manager are then trusted without scanning).
    pub fn had_clean_shutdown(&self) -> bool {
        self.clean_shutdown
    }

    /// The partition directories on disk and the topic id each records
    /// (`None` if it has no readable `partition.metadata`).
    pub fn scan(&self) -> Result<Vec<(TopicPartition, Option<TopicId>)>> {
        let mut found = Vec::new();
        for entry in fs::read_dir(&self.data_dir).at(&self.data_dir)? {
            let entry = entry.at(&self.data_dir)?;
            if !entry.file_type().at(&entry.path())?.is_dir() {
                continue;
            }
            let Some(tp) = entry.file_name().to_str().and_then(parse_partition_dir) else {
                continue;
            };
            let topic_id = match read_partition_metadata(&entry.path()) {
                Ok(id) => id,
                Err(e) => {
                    tracing::warn!(error = %e, "unreadable partition metadata");
                    None
                }
            };
            found.push((tp, topic_id));
        }
        found.sort();
        Ok(found)
    }

    fn partition_dir(&self, tp: &TopicPartition) -> PathBuf {
        self.data_dir.join(tp.to_string())
    }

    /// Opens the log of `tp` (recovering it as needed) or creates it, and
    /// registers it. Returns the already open log if there is one.
    /// [`Error::TopicIdMismatch`] if the directory records another topic id.
    pub fn open_log(
        &self,
        tp: &TopicPartition,
        topic_id: TopicId,
        config: LogConfig,
    ) -> Result<Arc<Log>> {
        let slot = Arc::clone(self.opening.lock().entry(tp.clone()).or_default());
        let _opening = slot.lock();
        if let Some(log) = self.logs.read().get(tp) {
            if log.topic_id() != topic_id {
                return Err(Error::TopicIdMismatch {
                    path: log.dir().to_path_buf(),
                    expected: topic_id,
                    found: log.topic_id(),
                });
            }
            return Ok(Arc::clone(log));
        }
        // Opened without holding the map: other partitions open meanwhile.
        let log = Arc::new(Log::open(
            self.partition_dir(tp),
            tp.clone(),
            topic_id,
            config,
            self.clean_shutdown,
        )?);
        self.logs.write().insert(tp.clone(), Arc::clone(&log));
        drop(_opening);
        self.opening.lock().remove(tp);
        Ok(log)
    }

    /// Opens (or creates) many logs at once, as [`LogManager::open_log`]
    /// does one: on several threads, with their fsyncs replaced by one
    /// `syncfs` at the end, so thousands of partitions open (or are
    /// created) in about the time their file work takes. Results come in
    /// the order of `specs`; everything returned is durable.
    pub fn open_logs(&self, specs: Vec<LogSpec>) -> Vec<Result<Arc<Log>>> {
        let results = crate::parallel::map(
            specs,
            crate::parallel::io_threads(),
            self.bulk_priority(),
            |spec| {
                let _deferred = DeferredSync::new();
                self.open_log(&spec.topic_partition, spec.topic_id, spec.config)
            },
        );
        let wrote = results
            .iter()
            .flatten()
            .any(|log| log.recovery_stats().created || !log.recovery_stats().clean);
        if wrote {
            if let Err(e) = sync_filesystem(&self.data_dir) {
                // Nothing opened here can be trusted to be durable.
                let msg = e.to_string();
                return results
                    .into_iter()
                    .map(|_| {
                        Err(Error::Io {
                            path: self.data_dir.clone(),
                            source: std::io::Error::other(msg.clone()),
                        })
                    })
                    .collect();
            }
        }
        results
    }

    /// The open log of `tp`, if any.
    pub fn get(&self, tp: &TopicPartition) -> Option<Arc<Log>> {
        self.logs.read().get(tp).cloned()
    }

    /// All open logs.
    pub fn logs(&self) -> Vec<Arc<Log>> {
        self.logs.read().values().cloned().collect()
    }

    /// Closes and deletes the log of `tp`: later operations on it fail with
    /// [`Error::LogDeleted`]; its directory is renamed to
    /// `deleting/{topic_id}_{partition}` and removed. A no-op for a partition
    /// that is neither open nor on disk.
    pub fn delete_log(&self, tp: &TopicPartition) -> Result<()> {
        if let Some(staged) = self.stage(tp)? {
            remove_dir_all_if_exists(&staged)?;
            tracing::info!(partition = %tp, "deleted log");
        }
        Ok(())
    }

    /// Closes the log of `tp` (later operations on it fail with
    /// [`Error::LogDeleted`]) and moves its directory to
    /// `deleting/{topic_id}_{partition}`, where it stays until
    /// [`LogManager::purge_staged`] finds it old enough (KIP-516: a stale
    /// partition is never served again, but its files are kept a while).
    /// Returns where it went; `None` for a partition neither open nor on
    /// disk.
    pub fn stage_for_deletion(&self, tp: &TopicPartition) -> Result<Option<PathBuf>> {
        let staged = self.stage(tp)?;
        if let Some(path) = &staged {
            self.staged
                .lock()
                .push((path.clone(), std::time::Instant::now()));
        }
        Ok(staged)
    }

    /// Removes the staged directories staged at least `delay` ago; returns
    /// them.
    pub fn purge_staged(&self, delay: std::time::Duration) -> Vec<PathBuf> {
        let due: Vec<PathBuf> = {
            let mut staged = self.staged.lock();
            let now = std::time::Instant::now();
            let (due, keep): (Vec<_>, Vec<_>) = staged
                .drain(..)
                .partition(|(_, at)| now.saturating_duration_since(*at) >= delay);
            *staged = keep;
            due.into_iter().map(|(p, _)| p).collect()
        };
        let mut removed = Vec::new();
        for path in due {
            match remove_dir_all_if_exists(&path) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "removed a staged partition");
                    removed.push(path);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "cannot remove a staged partition (retried later): {e}");
                    self.staged.lock().push((path, std::time::Instant::now()));
                }
            }
        }
        removed
    }

    /// The directories staged for deletion and not yet removed.
    pub fn staged(&self) -> Vec<PathBuf> {
        self.staged.lock().iter().map(|(p, _)| p.clone()).collect()
    }

    /// Closes `tp`'s log and renames its directory under `deleting/`.
    fn stage(&self, tp: &TopicPartition) -> Result<Option<PathBuf>> {
        // Held throughout so the partition cannot be reopened half-deleted
        // (other partitions open and close meanwhile).
        let slot = Arc::clone(self.opening.lock().entry(tp.clone()).or_default());
        let _deleting = slot.lock();
        let log = self.logs.write().remove(tp);
        let dir = self.partition_dir(tp);
        let topic_id = match &log {
            Some(log) => {
                log.mark_deleted();
                Some(log.topic_id())
            }
            None => read_partition_metadata(&dir).ok().flatten(),
        };
        if !dir.exists() {
            return Ok(None);
        }
        let deleting = self.data_dir.join(DELETING_DIR);
        fs::create_dir_all(&deleting).at(&deleting)?;
        let staged_name = match topic_id {
            Some(id) => format!("{id}_{}", tp.partition),
            None => format!("{}_{}", tp.topic, tp.partition),
        };
        let staged = deleting.join(staged_name);
        remove_dir_all_if_exists(&staged)?;
        fs::rename(&dir, &staged).at(&dir)?;
        if !crate::checkpoint::sync_deferred() {
            sync_dir(&self.data_dir)?;
        }
        Ok(Some(staged))
    }

    /// Deletes many logs as [`LogManager::delete_log`] does one, on several
    /// threads with one `syncfs` at the end instead of a directory fsync
    /// each.
    pub fn delete_logs(&self, tps: Vec<TopicPartition>) -> Vec<(TopicPartition, Result<()>)> {
        let results = crate::parallel::map(
            tps,
            crate::parallel::io_threads(),
            self.bulk_priority(),
            |tp| {
                let _deferred = DeferredSync::new();
                let r = self.delete_log(&tp);
                (tp, r)
            },
        );
        if let Err(e) = sync_filesystem(&self.data_dir) {
            tracing::warn!(error = %e, "cannot sync the data directory after deleting logs");
        }
        results
    }

    /// Applies every log's `flush_interval_ms` policy.
    pub fn flush_due(&self, now: Timestamp) -> Result<()> {
        for log in self.logs() {
            log.flush_due(now)?;
        }
        Ok(())
    }

    /// The data directory's file system: total bytes and bytes available
    /// to this process (`statvfs`), as Kafka's DescribeLogDirs reports them.
    pub fn disk_space(&self) -> Result<(u64, u64)> {
        use std::os::unix::ffi::OsStrExt;
        let path =
            std::ffi::CString::new(self.data_dir().as_os_str().as_bytes()).map_err(|_| {
                crate::error::corrupt(self.data_dir(), "the data directory path holds a NUL byte")
            })?;
        // SAFETY: `path` is a NUL-terminated string and `stat` a plain
        // struct the call fills in.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
            return Err(std::io::Error::last_os_error()).at(self.data_dir());
        }
        let block = stat.f_frsize as u64;
        Ok((
            (stat.f_blocks as u64).saturating_mul(block),
            (stat.f_bavail as u64).saturating_mul(block),
        ))
    }

    /// Removes the files of deleted segments whose `file.delete.delay.ms`
    /// has passed, in every log.
    pub fn delete_expired_files(&self) -> usize {
        self.logs().iter().map(|l| l.delete_expired_files()).sum()
    }

    /// Runs retention on every log; returns the segments deleted in all.
    pub fn run_retention(&self, now: Timestamp) -> Result<u64> {
        let mut deleted = 0;
        for log in self.logs() {
            deleted += log.run_retention(now)?;
        }
        Ok(deleted)
    }

    /// Flushes every log, writes its checkpoints and producer snapshot, and
    /// closes it; then writes the clean-shutdown marker so the next open
    /// trusts every log without scanning. Logs close on several threads
    /// with their fsyncs replaced by one `syncfs` before the marker.
    pub fn shutdown(&self) -> Result<()> {
        let results = crate::parallel::map(
            self.logs(),
            crate::parallel::io_threads(),
            crate::parallel::Priority::Normal,
            |log| {
                let _deferred = DeferredSync::new();
                log.close()
            },
        );
        results.into_iter().collect::<Result<Vec<()>>>()?;
        sync_filesystem(&self.data_dir)?;
        write_atomic(&self.data_dir.join(CLEAN_SHUTDOWN_MARKER), b"")?;
        tracing::info!(data_dir = %self.data_dir.display(), "clean shutdown");
        Ok(())
    }

    /// Unlocks the directory as this manager found it, when nothing was
    /// opened (a start refused after locking): a clean shutdown's marker,
    /// taken by [`LogManager::open`], is put back so the next start does
    /// not scan every log.
    pub fn release(self) {
        if self.clean_shutdown && self.logs.read().is_empty() {
            let marker = self.data_dir.join(CLEAN_SHUTDOWN_MARKER);
            if let Err(e) = write_atomic(&marker, b"") {
                tracing::warn!(path = %marker.display(), "could not restore the clean shutdown marker: {e}");
            }
        }
    }
}

/// Local filesystems whose `flock` the kernel alone arbitrates (a network
/// filesystem can drop a lock while its holder runs): ext2/3/4, XFS,
/// Btrfs, tmpfs, ZFS, F2FS, overlayfs.
const LOCAL_FILESYSTEMS: [u64; 7] = [
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0x2FC1_2FC1,
    0xF2F5_2010,
    0x794C_7630,
];

fn lock_identity(lock: &File) -> Option<String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    // SAFETY: fstatfs writes into the zeroed struct it is given, for an
    // open descriptor this function borrows.
    let mut fs_info: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(lock.as_raw_fd(), &mut fs_info) } != 0 {
        return None;
    }
    // The type's width differs between targets; magic numbers fit 32 bits.
    #[allow(clippy::unnecessary_cast)]
    let kind = fs_info.f_type as u64 & 0xFFFF_FFFF;
    if !LOCAL_FILESYSTEMS.contains(&kind) {
        return None;
    }
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot = boot.trim();
    let meta = lock.metadata().ok()?;
    (!boot.is_empty()).then(|| format!("{boot}:{}:{}", meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests;
