//! The open-file cache: segment data and index files are opened on demand
//! and closed when they have not been used for a while, so a broker with
//! tens of thousands of partitions fits under the process's open-file limit.
//!
//! File descriptors are a process-wide resource, so the cache is one
//! per process ([`set_open_file_budget`] sizes it). A file in use (an
//! `Arc<File>` held by a reader or writer) stays open after eviction until
//! its user drops it, so the budget is a target that in-flight operations
//! may briefly exceed.

use std::fs::{File, OpenOptions};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use lru::LruCache;
use parking_lot::Mutex;

use crate::error::{IoContext, Result};

/// Files kept open when nothing set a budget.
const DEFAULT_BUDGET: usize = 4096;

/// The most files the cache keeps open at once.
static BUDGET: AtomicUsize = AtomicUsize::new(DEFAULT_BUDGET);

/// Sets how many segment and index files may stay open at once (at least
/// 16). Takes effect as files are next opened.
pub fn set_open_file_budget(n: usize) {
    BUDGET.store(n.max(16), Ordering::Relaxed);
}

/// The current open-file budget.
pub fn open_file_budget() -> usize {
    BUDGET.load(Ordering::Relaxed)
}

struct Cache {
    open: Mutex<LruCache<u64, Arc<File>>>,
    next_id: AtomicU64,
    opened: AtomicU64,
}

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Cache {
        open: Mutex::new(LruCache::unbounded()),
        next_id: AtomicU64::new(0),
        opened: AtomicU64::new(0),
    })
}

/// Files the cache holds open now.
pub fn cached_open_files() -> usize {
    cache().open.lock().len()
}

/// Times the cache opened a file so far (a measure of churn).
pub fn files_opened() -> u64 {
    cache().opened.load(Ordering::Relaxed)
}

/// A file opened read-write on demand through the cache. Dropping it
/// closes the file (once no operation holds it).
#[derive(Debug)]
pub(crate) struct CachedFile {
    id: u64,
    path: PathBuf,
}

impl CachedFile {
    /// A cached handle to the existing file at `path`.
    pub fn new(path: PathBuf) -> CachedFile {
        CachedFile {
            id: cache().next_id.fetch_add(1, Ordering::Relaxed),
            path,
        }
    }

    /// Creates (or truncates, with `truncate`) the file at `path` and
    /// keeps it open in the cache.
    pub fn create(path: PathBuf, truncate: bool) -> Result<CachedFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(&path)
            .at(&path)?;
        let f = CachedFile::new(path);
        f.insert(Arc::new(file));
        Ok(f)
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, opening it if the cache had closed it.
    pub fn get(&self) -> Result<Arc<File>> {
        let c = cache();
        if let Some(f) = c.open.lock().get(&self.id) {
            return Ok(Arc::clone(f));
        }
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.path)
                .at(&self.path)?,
        );
        self.insert(Arc::clone(&file));
        Ok(file)
    }

    fn insert(&self, file: Arc<File>) {
        let c = cache();
        c.opened.fetch_add(1, Ordering::Relaxed);
        let budget = NonZeroUsize::new(open_file_budget()).unwrap_or(NonZeroUsize::MIN);
        let mut open = c.open.lock();
        while open.len() >= budget.get() {
            // Closing happens when the last Arc goes, possibly right here.
            if open.pop_lru().is_none() {
                break;
            }
        }
        open.put(self.id, file);
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        cache().open.lock().pop(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_reopen_after_eviction_and_close_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        // Other tests share the process-wide cache: count only our files.
        let files: Vec<CachedFile> = (0..40)
            .map(|i| CachedFile::create(dir.path().join(format!("f{i}")), true).unwrap())
            .collect();
        for (i, f) in files.iter().enumerate() {
            use std::os::unix::fs::FileExt;
            f.get().unwrap().write_all_at(&[i as u8], 0).unwrap();
        }
        for (i, f) in files.iter().enumerate() {
            use std::os::unix::fs::FileExt;
            let mut b = [0u8; 1];
            f.get().unwrap().read_exact_at(&mut b, 0).unwrap();
            assert_eq!(b[0], i as u8);
        }
        let ids: Vec<u64> = files.iter().map(|f| f.id).collect();
        drop(files);
        let open = cache().open.lock();
        assert!(ids.iter().all(|id| !open.contains(id)));
    }
}
