//! openraft's [`RaftStateMachine`] over a [`StateMachine`]: the state lives in
//! memory; snapshots are written to a temporary file, synced and renamed
//! into place, and restored on open (openraft then re-applies the committed
//! log after them).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::error::{ControllerError, Result};
use crate::io::IoMode;
use crate::log_file::sync_dir;
use crate::types::{Entry, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use crate::StateMachine;

const SNAPSHOT_FILE: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";
const SNAPSHOT_MAGIC: u32 = 0x4d47_5253; // "MGRS"
const SNAPSHOT_HEADER: usize = 16;

#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    data: Vec<u8>,
}

pub(crate) struct SmState<S> {
    pub sm: S,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
}

pub(crate) struct Shared<S> {
    pub state: RwLock<SmState<S>>,
    /// The last applied log index.
    pub applied: watch::Sender<Option<u64>>,
    /// The current snapshot's metadata; held while a snapshot file is written.
    current: tokio::sync::Mutex<Option<SnapshotMeta>>,
    builds: AtomicU64,
    dir: PathBuf,
    io_mode: IoMode,
}

/// The replicated state machine storage.
pub struct SmStore<S: StateMachine> {
    shared: Arc<Shared<S>>,
}

/// Builds snapshots of an [`SmStore`].
pub struct SnapshotBuilder<S: StateMachine> {
    shared: Arc<Shared<S>>,
}

fn sm_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_state_machine(AnyError::error(e.to_string())).into()
}

fn snap_write_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_snapshot(None, AnyError::error(e.to_string())).into()
}

fn snap_read_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::read_snapshot(None, AnyError::error(e.to_string())).into()
}

fn encode_snapshot(meta: &SnapshotMeta, data: &[u8]) -> Result<Vec<u8>> {
    let body = postcard::to_stdvec(&SnapshotFile {
        meta: meta.clone(),
        data: data.to_vec(),
    })
    .map_err(|e| ControllerError::Snapshot(format!("encode: {e}")))?;
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER + body.len());
    out.extend_from_slice(&SNAPSHOT_MAGIC.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

fn decode_snapshot(path: &Path, buf: &[u8]) -> Result<SnapshotFile> {
    let bad = |r: &str| ControllerError::corrupt(path, r.to_string());
    if buf.len() < SNAPSHOT_HEADER {
        return Err(bad("short snapshot file"));
    }
    let magic = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&buf[4..12]);
    let len = u64::from_le_bytes(len8);
    let crc = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]);
    let body = &buf[SNAPSHOT_HEADER..];
    if magic != SNAPSHOT_MAGIC || body.len() as u64 != len || crc32c::crc32c(body) != crc {
        return Err(bad("snapshot header or checksum mismatch"));
    }
    postcard::from_bytes(body).map_err(|e| bad(&format!("snapshot decode: {e}")))
}

/// Writes the snapshot durably: temp file, fsync, rename, fsync the directory.
fn write_snapshot_file(dir: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let dst = dir.join(SNAPSHOT_FILE);
    let mut f = fs::File::create(&tmp).map_err(|e| ControllerError::io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| ControllerError::io(&tmp, e))?;
    drop(f);
    fs::rename(&tmp, &dst).map_err(|e| ControllerError::io(&dst, e))?;
    sync_dir(dir)
}

fn read_snapshot_file(dir: &Path) -> Result<Option<SnapshotFile>> {
    let path = dir.join(SNAPSHOT_FILE);
    match fs::read(&path) {
        Ok(buf) => decode_snapshot(&path, &buf).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ControllerError::io(&path, e)),
    }
}

impl<S: StateMachine> SmStore<S> {
    /// Opens the state machine storage in `dir`: restores `sm` from the last
    /// snapshot there, if any.
    pub async fn open(dir: &Path, mut sm: S, io_mode: IoMode) -> Result<Self> {
        let d = dir.to_path_buf();
        let file = crate::io::run(io_mode, move || {
            fs::create_dir_all(&d).map_err(|e| ControllerError::io(&d, e))?;
            let tmp = d.join(SNAPSHOT_TMP);
            if tmp.exists() {
                fs::remove_file(&tmp).map_err(|e| ControllerError::io(&tmp, e))?;
            }
            read_snapshot_file(&d)
        })
        .await
        .map_err(|e| ControllerError::io(dir, e))??;
        let (last_applied, membership, current) = match file {
            Some(f) => {
                sm.restore(&f.data).map_err(ControllerError::Snapshot)?;
                (
                    f.meta.last_log_id,
                    f.meta.last_membership.clone(),
                    Some(f.meta),
                )
            }
            None => (None, StoredMembership::default(), None),
        };
        let (applied, _) = watch::channel(last_applied.map(|l| l.index));
        Ok(SmStore {
            shared: Arc::new(Shared {
                state: RwLock::new(SmState {
                    sm,
                    last_applied,
                    membership,
                }),
                applied,
                current: tokio::sync::Mutex::new(current),
                builds: AtomicU64::new(0),
                dir: dir.to_path_buf(),
                io_mode,
            }),
        })
    }

    pub(crate) fn shared(&self) -> Arc<Shared<S>> {
        self.shared.clone()
    }
}

impl<S: StateMachine> Shared<S> {
    async fn current_snapshot(&self) -> Result<Option<openraft::Snapshot<TypeConfig<S>>>> {
        let cur = self.current.lock().await;
        if cur.is_none() {
            return Ok(None);
        }
        let dir = self.dir.clone();
        let file = crate::io::run(self.io_mode, move || read_snapshot_file(&dir))
            .await
            .map_err(|e| ControllerError::io(&self.dir, e))??;
        Ok(file.map(|f| openraft::Snapshot {
            meta: f.meta,
            snapshot: Box::new(f.data),
        }))
    }

    /// Persists a snapshot unless a newer one is already current.
    async fn persist(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<bool> {
        let mut cur = self.current.lock().await;
        if cur
            .as_ref()
            .is_some_and(|c| c.last_log_id > meta.last_log_id)
        {
            return Ok(false);
        }
        let bytes = encode_snapshot(meta, data)?;
        let dir = self.dir.clone();
        crate::io::run(self.io_mode, move || write_snapshot_file(&dir, &bytes))
            .await
            .map_err(|e| ControllerError::io(&self.dir, e))??;
        *cur = Some(meta.clone());
        Ok(true)
    }
}

impl<S: StateMachine> RaftSnapshotBuilder<TypeConfig<S>> for SnapshotBuilder<S> {
    async fn build_snapshot(&mut self) -> Result<openraft::Snapshot<TypeConfig<S>>, StorageError> {
        let (meta, data) = {
            let st = self.shared.state.read();
            let n = self.shared.builds.fetch_add(1, Ordering::Relaxed);
            let id = match st.last_applied {
                Some(l) => format!("{}-{}-{n}", l.leader_id.term, l.index),
                None => format!("0-0-{n}"),
            };
            let meta = SnapshotMeta {
                last_log_id: st.last_applied,
                last_membership: st.membership.clone(),
                snapshot_id: id,
            };
            (meta, st.sm.snapshot())
        };
        self.shared
            .persist(&meta, &data)
            .await
            .map_err(snap_write_err)?;
        tracing::debug!(snapshot = %meta.snapshot_id, "controller: snapshot written");
        Ok(openraft::Snapshot {
            meta,
            snapshot: Box::new(data),
        })
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig<S>> for SmStore<S> {
    type SnapshotBuilder = SnapshotBuilder<S>;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let st = self.shared.state.read();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Option<S::Response>>, StorageError>
    where
        I: IntoIterator<Item = Entry<S>> + Send,
        I::IntoIter: Send,
    {
        let mut out = Vec::new();
        let last = {
            let mut st = self.shared.state.write();
            for e in entries {
                st.last_applied = Some(e.log_id);
                out.push(match e.payload {
                    EntryPayload::Blank => None,
                    EntryPayload::Normal(rec) => Some(st.sm.apply(e.log_id.index, &rec)),
                    EntryPayload::Membership(m) => {
                        st.membership = StoredMembership::new(Some(e.log_id), m);
                        None
                    }
                });
            }
            st.last_applied.map(|l| l.index)
        };
        self.shared.applied.send_replace(last);
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Vec<u8>>, StorageError> {
        Ok(Box::default())
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Vec<u8>>,
    ) -> Result<(), StorageError> {
        let index = {
            let mut st = self.shared.state.write();
            st.sm.restore(&snapshot).map_err(sm_err)?;
            st.last_applied = meta.last_log_id;
            st.membership = meta.last_membership.clone();
            meta.last_log_id.map(|l| l.index)
        };
        self.shared.applied.send_replace(index);
        self.shared
            .persist(meta, &snapshot)
            .await
            .map_err(snap_write_err)?;
        tracing::info!(snapshot = %meta.snapshot_id, ?index, "controller: snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<openraft::Snapshot<TypeConfig<S>>>, StorageError> {
        self.shared.current_snapshot().await.map_err(snap_read_err)
    }
}

impl<S: StateMachine> Shared<S> {
    /// The current snapshot, for `fetch_snapshot`.
    pub(crate) async fn snapshot(&self) -> Result<Option<openraft::Snapshot<TypeConfig<S>>>> {
        self.current_snapshot().await
    }
}
