//! openraft's [`RaftLogStorage`] on [`LogFiles`]: entries are kept in memory
//! for reads (the controller log is small and compacted by snapshots) and
//! written, in order, by one writer thread that syncs before it reports an
//! append flushed or a vote saved.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use crate::error::{ControllerError, Result};
use crate::io::IoMode;
use crate::log_file::{LogFiles, MetaState};
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};
use crate::StateMachine;

/// How many writes may wait for the writer thread.
const WRITER_QUEUE: usize = 64;

/// Options of the log storage.
#[derive(Clone, Debug)]
pub struct LogOptions {
    /// A segment file is sealed once it reaches this size.
    pub segment_bytes: u64,
    /// The largest encoded entry accepted.
    pub max_entry_bytes: usize,
    /// Where the file work runs.
    pub io_mode: IoMode,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_bytes: 16 << 20,
            max_entry_bytes: 16 << 20,
            io_mode: IoMode::Threaded,
        }
    }
}

struct Mem<S: StateMachine> {
    entries: BTreeMap<u64, Entry<S>>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

/// The files plus the first write error: after one, every write fails (the
/// on-disk state is unknown until the log is reopened).
struct Files {
    files: LogFiles,
    failed: Option<String>,
}

impl Files {
    fn run<R>(&mut self, f: impl FnOnce(&mut LogFiles) -> Result<R>) -> Result<R> {
        if let Some(e) = &self.failed {
            return Err(ControllerError::Raft(format!(
                "log storage failed earlier: {e}"
            )));
        }
        let r = f(&mut self.files);
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }
}

type Job = Box<dyn FnOnce(&mut Files) + Send>;

#[derive(Clone)]
enum Writer {
    Thread(mpsc::Sender<Job>),
    Inline(Arc<Mutex<Files>>),
}

impl Writer {
    /// Queues `job`; it runs after every job queued before it.
    async fn submit(&self, job: Job) -> Result<()> {
        match self {
            Writer::Thread(tx) => tx
                .send(job)
                .await
                .map_err(|_| ControllerError::Raft("log writer thread is gone".into())),
            Writer::Inline(files) => {
                job(&mut files.lock());
                Ok(())
            }
        }
    }

    /// Runs `f` in order with the other writes and waits for it.
    async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut LogFiles) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let (tx, rx) = oneshot::channel();
        self.submit(Box::new(move |files: &mut Files| {
            let _ = tx.send(files.run(f));
        }))
        .await?;
        rx.await
            .map_err(|_| ControllerError::Raft("log writer thread is gone".into()))?
    }
}

/// The durable Raft log (entries, vote, committed and purged log ids).
pub struct LogStore<S: StateMachine> {
    mem: Arc<Mutex<Mem<S>>>,
    writer: Writer,
    dir: PathBuf,
}

/// A reader of the log, shared with openraft's replication tasks and the
/// controller's `fetch`.
pub struct LogReader<S: StateMachine> {
    mem: Arc<Mutex<Mem<S>>>,
}

impl<S: StateMachine> Clone for LogReader<S> {
    fn clone(&self) -> Self {
        LogReader {
            mem: self.mem.clone(),
        }
    }
}

fn write_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_logs(AnyError::error(e.to_string())).into()
}

fn vote_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_vote(AnyError::error(e.to_string())).into()
}

impl<S: StateMachine> LogStore<S> {
    /// Opens the log in `dir` (created if missing), cutting off a torn tail.
    pub async fn open(dir: &Path, opts: &LogOptions) -> Result<Self> {
        let (dir2, seg, max) = (dir.to_path_buf(), opts.segment_bytes, opts.max_entry_bytes);
        let (files, records) =
            crate::io::run(opts.io_mode, move || LogFiles::open(&dir2, seg, max + 64))
                .await
                .map_err(|e| ControllerError::io(dir, e))??;
        let meta = files.meta().clone();
        let purged_index = meta.purged.map(|l| l.index);
        let mut entries = BTreeMap::new();
        for rec in records {
            if purged_index.is_some_and(|p| rec.index <= p) {
                continue;
            }
            let entry: Entry<S> = postcard::from_bytes(&rec.payload).map_err(|e| {
                ControllerError::corrupt(dir, format!("log entry {}: {e}", rec.index))
            })?;
            if entry.log_id.index != rec.index {
                return Err(ControllerError::corrupt(
                    dir,
                    format!(
                        "entry at position {} says index {}",
                        rec.index, entry.log_id.index
                    ),
                ));
            }
            entries.insert(rec.index, entry);
        }
        let MetaState {
            vote,
            committed,
            purged,
        } = meta;
        let files = Files {
            files,
            failed: None,
        };
        let writer = match opts.io_mode {
            IoMode::Inline => Writer::Inline(Arc::new(Mutex::new(files))),
            IoMode::Threaded => {
                let (tx, mut rx) = mpsc::channel::<Job>(WRITER_QUEUE);
                let mut files = files;
                std::thread::Builder::new()
                    .name("controller-log".into())
                    .spawn(move || {
                        while let Some(job) = rx.blocking_recv() {
                            job(&mut files);
                        }
                    })
                    .map_err(|e| ControllerError::io(dir, e))?;
                Writer::Thread(tx)
            }
        };
        Ok(LogStore {
            mem: Arc::new(Mutex::new(Mem {
                entries,
                vote,
                committed,
                purged,
            })),
            writer,
            dir: dir.to_path_buf(),
        })
    }

    /// A reader sharing this log.
    pub fn reader(&self) -> LogReader<S> {
        LogReader {
            mem: self.mem.clone(),
        }
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether nothing was ever stored: no vote, no entry, nothing purged.
    pub fn is_pristine(&self) -> bool {
        let m = self.mem.lock();
        m.vote.is_none() && m.entries.is_empty() && m.purged.is_none()
    }
}

/// What [`LogReader::read_from`] finds.
pub(crate) enum ReadFrom<S: StateMachine> {
    /// Entries from the index asked for (possibly none yet).
    Entries(Vec<Entry<S>>),
    /// The index is purged; the last purged index.
    Purged(u64),
}

impl<S: StateMachine> LogReader<S> {
    /// Up to `max` entries with index in `from..=upto`.
    pub(crate) fn read_from(&self, from: u64, upto: u64, max: usize) -> ReadFrom<S> {
        let m = self.mem.lock();
        if let Some(p) = m.purged {
            if from <= p.index {
                return ReadFrom::Purged(p.index);
            }
        }
        if from > upto {
            return ReadFrom::Entries(Vec::new());
        }
        ReadFrom::Entries(
            m.entries
                .range(from..=upto)
                .take(max)
                .map(|(_, e)| e.clone())
                .collect(),
        )
    }
}

impl<S: StateMachine> RaftLogReader<TypeConfig<S>> for LogReader<S> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<S>>, StorageError> {
        let m = self.mem.lock();
        Ok(m.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl<S: StateMachine> RaftLogReader<TypeConfig<S>> for LogStore<S> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<S>>, StorageError> {
        self.reader().try_get_log_entries(range).await
    }
}

impl<S: StateMachine> RaftLogStorage<TypeConfig<S>> for LogStore<S> {
    type LogReader = LogReader<S>;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig<S>>, StorageError> {
        let m = self.mem.lock();
        let last = m
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(m.purged);
        Ok(LogState {
            last_purged_log_id: m.purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let v = *vote;
        self.writer
            .call(move |f| {
                let mut m = f.meta().clone();
                m.vote = Some(v);
                f.save_meta(m)
            })
            .await
            .map_err(vote_err)?;
        self.mem.lock().vote = Some(v);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.mem.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.writer
            .call(move |f| {
                let mut m = f.meta().clone();
                m.committed = committed;
                f.save_meta(m)
            })
            .await
            .map_err(write_err)?;
        self.mem.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.mem.lock().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig<S>>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry<S>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry<S>> = entries.into_iter().collect();
        let Some(first) = entries.first().map(|e| e.log_id.index) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let mut payloads = Vec::with_capacity(entries.len());
        for e in &entries {
            payloads.push(postcard::to_stdvec(e).map_err(write_err)?);
        }
        {
            let mut m = self.mem.lock();
            for e in entries {
                m.entries.insert(e.log_id.index, e);
            }
        }
        self.writer
            .submit(Box::new(move |files: &mut Files| {
                let r = files.run(|f| f.append(first, &payloads));
                callback.log_io_completed(r.map_err(|e| io::Error::other(e.to_string())));
            }))
            .await
            .map_err(write_err)
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let index = log_id.index;
        drop(self.mem.lock().entries.split_off(&index));
        self.writer
            .call(move |f| f.truncate(index))
            .await
            .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        {
            let mut m = self.mem.lock();
            m.purged = Some(log_id);
            let keep = m.entries.split_off(&(log_id.index + 1));
            m.entries = keep;
        }
        self.writer
            .call(move |f| {
                let mut m = f.meta().clone();
                m.purged = Some(log_id);
                f.save_meta(m)?;
                f.purge(log_id.index)
            })
            .await
            .map_err(write_err)
    }
}
