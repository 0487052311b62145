//! A cluster member's data directory: locked before the node registers,
//! and its `meta.properties` (Kafka's file and keys): the cluster and node
//! it belongs to, and the directory's own id (`directory.id`, KIP-858),
//! which the node registers with so that a process that replaces a crashed
//! one on the same directory is known to be its successor.

use std::collections::BTreeMap;
use std::path::Path;

use storage::LogManager;

use crate::config::BrokerConfig;
use crate::core::prepare_data_dir;
use crate::Error;
use sha2::Digest;

/// The membership file in a cluster member's data directory.
pub const MEMBERSHIP_FILE: &str = "meta.properties";

/// A cluster member's data directory, locked by this process.
pub struct ClusterDir {
    pub(crate) logs: LogManager,
    directory_id: String,
    /// `meta.properties` to write once an import is done.
    pending: Option<BTreeMap<String, String>>,
}

impl std::fmt::Debug for ClusterDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterDir")
            .field("directory_id", &self.directory_id)
            .finish_non_exhaustive()
    }
}

impl ClusterDir {
    /// Locks `config`'s data directory (another process holding it is
    /// refused) and reads its membership, giving a new directory its id.
    /// A standalone node's directory, or another node's, is refused.
    /// Blocking.
    pub fn open(config: &BrokerConfig) -> Result<ClusterDir, Error> {
        let (logs, props) = lock(config)?;
        let identity = if standalone_dir(&config.data_dir) {
            Err(refuse(format!(
                "{} holds a standalone node's data (magnetar standalone); a cluster node needs its own data directory",
                config.data_dir.display()
            )))
        } else {
            identity(config, props, true)
        };
        Self::locked(logs, identity)
    }

    /// As [`ClusterDir::open`] for the node of a quorum of one (`magnetar
    /// standalone`), which also takes the directory of a version that kept
    /// its metadata in a file: see [`MetadataFile`]. Until an import is
    /// done the directory has no `meta.properties`, so the older binary can
    /// still open it; an import that did not finish is discarded here, to
    /// be made again. A cluster node's directory is refused. Blocking.
    pub fn open_in_process(config: &BrokerConfig) -> Result<(ClusterDir, MetadataFile), Error> {
        let (logs, props) = lock(config)?;
        let mut file = MetadataFile::None;
        let identity = in_process_file(config, &props).and_then(|f| {
            file = f;
            match &file {
                MetadataFile::Import { digest, .. } => {
                    let mut props = props;
                    props.insert(IMPORTED_DIGEST.into(), digest.clone());
                    identity(config, props, false)
                }
                _ => identity(config, props, true),
            }
        });
        Ok((Self::locked(logs, identity)?, file))
    }

    /// The directory, or the refusal with the directory given back as
    /// found.
    fn locked(
        logs: LogManager,
        identity: Result<(String, Option<BTreeMap<String, String>>), Error>,
    ) -> Result<ClusterDir, Error> {
        match identity {
            Ok((directory_id, pending)) => Ok(ClusterDir {
                logs,
                directory_id,
                pending,
            }),
            Err(e) => {
                logs.release();
                Err(e)
            }
        }
    }

    /// The directory's id, as registered with the controller.
    pub fn directory_id(&self) -> &str {
        &self.directory_id
    }

    /// The metadata file in the directory is in the quorum now: the
    /// directory is marked as a cluster member's (durably: from then on
    /// the quorum is the metadata), then the file is renamed out of the
    /// way. A crash in between leaves the file beside the mark, which the
    /// next start only renames ([`MetadataFile::Imported`]). Blocking.
    pub fn import_done(&mut self, data_dir: &Path) -> Result<(), Error> {
        let from = data_dir.join(crate::metadata_store::FILE_NAME);
        let to = imported_path(data_dir);
        let io = |source| Error::MetadataIo {
            path: from.clone(),
            source,
        };
        if to.exists() {
            return Err(refuse(format!(
                "{} is left from before this directory's metadata moved into its controller quorum ({} is the file that was imported); move it away",
                from.display(),
                to.display()
            )));
        }
        if let Some(props) = self.pending.take() {
            write(data_dir, &props)?;
        }
        std::fs::rename(&from, &to).map_err(io)?;
        std::fs::File::open(data_dir)
            .and_then(|f| f.sync_all())
            .map_err(io)
    }

    /// Gives the directory back as this process found it, after a refusal
    /// that touched nothing else: a clean shutdown's mark is kept, so the
    /// next start does not recover every log. Blocking.
    pub fn release(self) {
        self.logs.release();
    }
}

/// A single node's metadata file (`cluster-metadata.json`, written by
/// `magnetar standalone` before it ran a quorum of one) in a standalone
/// directory.
#[derive(Debug)]
pub enum MetadataFile {
    /// None: the quorum holds the metadata.
    None,
    /// Not imported yet, or an import that did not finish (the quorum it
    /// left is already discarded): imported now.
    Import {
        /// The file's content.
        file: Box<crate::metadata_store::Metadata>,
        /// Its SHA-256, recorded with the done-mark.
        digest: String,
    },
    /// The very file the directory's quorum imported (the done-mark
    /// records its digest), not moved away before a crash: moved now.
    Imported,
}

/// The suffix a single node's metadata file gets once its quorum of one
/// has imported it (kept for reference, never read again).
pub const IMPORTED_SUFFIX: &str = ".imported";

/// Locks and prepares the data directory; its `meta.properties`.
fn lock(config: &BrokerConfig) -> Result<(LogManager, BTreeMap<String, String>), Error> {
    let logs = prepare_data_dir(config)?;
    match read(&config.data_dir) {
        Ok(props) => Ok((logs, props)),
        Err(e) => {
            logs.release();
            Err(e)
        }
    }
}

/// Whether `dir` is a standalone node's: its metadata in a file (before it
/// ran a quorum of one), imported from one, or in an in-process quorum.
fn standalone_dir(dir: &Path) -> bool {
    dir.join(crate::metadata_store::FILE_NAME).exists()
        || imported_path(dir).exists()
        || quorum_of(dir).is_ok_and(|q| q.is_some_and(|(_, in_process)| in_process))
}

/// Where the metadata file goes once imported.
fn imported_path(dir: &Path) -> std::path::PathBuf {
    dir.join(format!(
        "{}{IMPORTED_SUFFIX}",
        crate::metadata_store::FILE_NAME
    ))
}

/// The node id the controller state under `dir` was made for, and
/// whether it is that node's in-process quorum of one (`None`: no state).
fn quorum_of(dir: &Path) -> Result<Option<(u64, bool)>, Error> {
    let in_process = |node: u64, voters: String| {
        let ours = format!("{node}@{}", controller::transport::IN_PROCESS_ADDR);
        (node, voters == ours)
    };
    controller::identity_of(&dir.join("controller"))
        .map(|id| id.map(|(node, voters)| in_process(node, voters)))
        .map_err(|e| Error::Startup(e.to_string()))
}

/// The `meta.properties` key recording the SHA-256 of the metadata file
/// an import brought in: only that very file is moved away later.
const IMPORTED_DIGEST: &str = "imported.metadata.sha256";

/// What the metadata file in a standalone directory asks of the start,
/// with `props` its `meta.properties`; an unfinished import's quorum is
/// removed here. Blocking.
fn in_process_file(
    config: &BrokerConfig,
    props: &BTreeMap<String, String>,
) -> Result<MetadataFile, Error> {
    let dir = &config.data_dir;
    if props.contains_key("cluster.id") && !standalone_dir(dir) {
        return Err(refuse(format!(
            "{} belongs to a node of a cluster (start it with magnetar broker); a standalone node needs its own data directory",
            dir.display()
        )));
    }
    check_node(config, props)?;
    let path = dir.join(crate::metadata_store::FILE_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MetadataFile::None),
        Err(source) => return Err(Error::MetadataIo { path, source }),
    };
    let digest: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = crate::metadata_store::MetadataStore::parse_file(&path, &bytes, config.node_id());
    // `meta.properties` is written once the quorum holds the metadata: at
    // once in a new directory, with the file's digest after an import.
    if marked(props) {
        let quorum = dir.join("controller").join("controller.id");
        let named = props.get(IMPORTED_DIGEST) == Some(&digest);
        if named && quorum.exists() {
            return Ok(MetadataFile::Imported);
        }
        let why = if named {
            format!("the controller quorum it was imported into is missing ({} is absent): restore it, or remove meta.properties to import the file again", quorum.display())
        } else {
            let cluster = file.map_or_else(|_| "unreadable".to_string(), |m| m.cluster_id);
            match props.get("cluster.id") {
                Some(ours) => format!("its cluster is {cluster}; this directory's metadata is in its controller quorum (cluster {ours}): move the file away"),
                // The node never ran on what it imported.
                None => format!("its cluster is {cluster}; this directory's quorum holds an earlier import and nothing else: move the file away, or remove meta.properties to import this file instead"),
            }
        };
        return Err(refuse(format!(
            "{} is not the metadata file this directory imported: {why}",
            path.display()
        )));
    }
    let file = file?;
    let imported = imported_path(dir);
    if imported.exists() {
        return Err(refuse(format!(
            "{} is here beside {}, a file imported before; move one of them away",
            path.display(),
            imported.display()
        )));
    }
    check_import(&file, config.node_id(), &path)?;
    // Nothing registers before the import is marked done: a quorum found
    // without the mark holds part of the file and nothing else, unless
    // it is not this node's quorum of one at all.
    let quorum = dir.join("controller");
    if quorum.exists() {
        let node = config.node_id() as u64;
        match quorum_of(dir)? {
            Some((n, true)) if n == node => {}
            None => {}
            Some(_) => {
                return Err(refuse(format!(
                    "{} holds another controller's state beside {}; a standalone node needs its own data directory",
                    quorum.display(),
                    path.display()
                )))
            }
        }
        tracing::warn!(
            "{} holds an import that did not finish; importing the metadata file again",
            quorum.display()
        );
        std::fs::remove_dir_all(&quorum).map_err(|source| Error::MetadataIo {
            path: quorum.clone(),
            source,
        })?;
    }
    Ok(MetadataFile::Import {
        file: Box::new(file),
        digest,
    })
}

/// Whether `meta.properties` marks the directory as the quorum's: it has
/// an id (written at once in a new directory, after an import otherwise).
fn marked(props: &BTreeMap<String, String>) -> bool {
    props.get("directory.id").is_some_and(|id| !id.is_empty())
}

/// Refuses another node's directory.
fn check_node(config: &BrokerConfig, props: &BTreeMap<String, String>) -> Result<(), Error> {
    let node = config.node_id().to_string();
    match props.get("node.id") {
        Some(theirs) if *theirs != node => Err(refuse(format!(
            "{} belongs to node {theirs}, not node {node}",
            config.data_dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Whether node `node` can import `file` from `path`: partitions placed
/// on another node would all be stale here.
pub(crate) fn check_import(
    file: &crate::metadata_store::Metadata,
    node: crate::metadata_records::NodeId,
    path: &Path,
) -> Result<(), Error> {
    let other = file
        .topics
        .values()
        .flat_map(|t| &t.placements)
        .flat_map(|p| p.replicas.iter().chain([&p.leader]))
        .find(|n| **n != node);
    match other {
        Some(other) => Err(Error::Startup(format!(
            "{} places partitions on node {other}, not on this node ({node}); start it with --set node.id={other}",
            path.display()
        ))),
        None => Ok(()),
    }
}

/// The directory's id and, when `write_now` is false, the
/// `meta.properties` to write once an import is done; refused if the
/// directory is another node's. Blocking.
fn identity(
    config: &BrokerConfig,
    mut props: BTreeMap<String, String>,
    write_now: bool,
) -> Result<(String, Option<BTreeMap<String, String>>), Error> {
    let dir = &config.data_dir;
    let node = config.node_id().to_string();
    check_node(config, &props)?;
    let directory_id = match props.get("directory.id") {
        Some(id) if !id.is_empty() => id.clone(),
        _ => {
            let id = crate::metadata_store::new_cluster_id();
            props.insert("node.id".into(), node);
            props.insert("directory.id".into(), id.clone());
            if write_now {
                write(dir, &props)?;
            }
            id
        }
    };
    Ok((directory_id, (!write_now).then_some(props)))
}

fn refuse(reason: String) -> Error {
    Error::Config {
        key: "--data-dir".into(),
        reason,
    }
}

/// The `key=value` lines of `meta.properties` (none if it is absent).
fn read(dir: &Path) -> Result<BTreeMap<String, String>, Error> {
    let path = dir.join(MEMBERSHIP_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(source) => Err(Error::MetadataIo { path, source }),
    }
}

/// Replaces `meta.properties` atomically and durably.
fn write(dir: &Path, props: &BTreeMap<String, String>) -> Result<(), Error> {
    let path = dir.join(MEMBERSHIP_FILE);
    let tmp = dir.join(format!("{MEMBERSHIP_FILE}.tmp"));
    let io = |source| Error::MetadataIo {
        path: path.clone(),
        source,
    };
    let mut text = String::new();
    for (k, v) in props {
        text.push_str(&format!("{k}={v}\n"));
    }
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io)
}

/// Refuses a data directory of another cluster or node, or of a single
/// node (its partitions would all look stale and be deleted); records the
/// cluster in a directory that has none yet.
pub(crate) fn check_membership(dir: &Path, cluster_id: &str, node: i32) -> Result<(), Error> {
    let mut props = read(dir)?;
    if dir.join(crate::metadata_store::FILE_NAME).exists() {
        return Err(refuse(format!(
            "{} holds a single node's data (magnetar standalone); a cluster node needs its own data directory",
            dir.display()
        )));
    }
    let node = node.to_string();
    let theirs_node = props.get("node.id").cloned();
    let theirs_cluster = props.get("cluster.id").cloned();
    let mismatch = theirs_node.as_ref().is_some_and(|n| *n != node)
        || theirs_cluster.as_ref().is_some_and(|c| c != cluster_id);
    if mismatch {
        return Err(refuse(format!(
            "{} belongs to another cluster or node (cluster.id={}, node.id={}), not cluster {cluster_id} node {node}",
            dir.display(),
            theirs_cluster.unwrap_or_default(),
            theirs_node.unwrap_or_default(),
        )));
    }
    if theirs_node.is_none() || theirs_cluster.is_none() {
        std::fs::create_dir_all(dir).map_err(|source| Error::MetadataIo {
            path: dir.to_path_buf(),
            source,
        })?;
        props.insert("cluster.id".into(), cluster_id.to_string());
        props.insert("node.id".into(), node);
        write(dir, &props)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../server/tests/fixtures/standalone-file-metadata/cluster-metadata.json"
    );

    fn config(dir: &Path) -> BrokerConfig {
        BrokerConfig::new(dir, "127.0.0.1:9092".parse().unwrap())
    }

    /// A directory holding the previous version's metadata file.
    fn with_file() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::copy(FIXTURE, tmp.path().join(crate::metadata_store::FILE_NAME)).unwrap();
        tmp
    }

    fn controller_id(dir: &Path, text: &str) {
        std::fs::create_dir_all(dir.join("controller")).unwrap();
        std::fs::write(dir.join("controller").join("controller.id"), text).unwrap();
    }

    #[test]
    fn only_this_nodes_unfinished_import_is_discarded() {
        // Its own quorum of one, without the done-mark: discarded, imported.
        let tmp = with_file();
        controller_id(
            tmp.path(),
            "node.id=1\ncontroller.quorum.voters=1@in-process:0\n",
        );
        let (d, file) = ClusterDir::open_in_process(&config(tmp.path())).unwrap();
        assert!(matches!(file, MetadataFile::Import { .. }));
        assert!(!tmp.path().join("controller").exists());
        assert!(
            !tmp.path().join(MEMBERSHIP_FILE).exists(),
            "marked only once imported"
        );
        drop(d);

        // Another node's or a network quorum's state: refused, kept.
        for other in [
            "node.id=2\ncontroller.quorum.voters=2@in-process:0\n",
            "node.id=1\ncontroller.quorum.voters=1@10.0.0.1:9093\n",
        ] {
            let tmp = with_file();
            controller_id(tmp.path(), other);
            let e = ClusterDir::open_in_process(&config(tmp.path())).unwrap_err();
            assert!(e.to_string().contains("another controller's state"), "{e}");
            assert!(tmp.path().join("controller").exists());
        }

        // Another node's directory is refused before anything is removed.
        let tmp = with_file();
        controller_id(
            tmp.path(),
            "node.id=1\ncontroller.quorum.voters=1@in-process:0\n",
        );
        std::fs::write(tmp.path().join(MEMBERSHIP_FILE), "node.id=2\n").unwrap();
        let e = ClusterDir::open_in_process(&config(tmp.path())).unwrap_err();
        assert!(e.to_string().contains("belongs to node 2"), "{e}");
        assert!(tmp.path().join("controller").exists());
    }

    #[test]
    fn only_the_file_the_mark_names_is_moved_away() {
        let tmp = with_file();
        let (mut d, file) = ClusterDir::open_in_process(&config(tmp.path())).unwrap();
        assert!(matches!(file, MetadataFile::Import { .. }));
        d.import_done(tmp.path()).unwrap();
        drop(d);
        let props = read(tmp.path()).unwrap();
        assert_eq!(props.get(IMPORTED_DIGEST).map(String::len), Some(64));
        let file = tmp.path().join(crate::metadata_store::FILE_NAME);
        let imported = imported_path(tmp.path());
        assert!(!file.exists() && imported.exists());

        // A crash between the mark and the move: the same file is moved,
        // if the quorum it went into is there.
        std::fs::rename(&imported, &file).unwrap();
        let e = ClusterDir::open_in_process(&config(tmp.path())).unwrap_err();
        assert!(
            e.to_string()
                .contains("quorum it was imported into is missing"),
            "{e}"
        );
        controller_id(
            tmp.path(),
            "node.id=1\ncontroller.quorum.voters=1@in-process:0\n",
        );
        let (_d, again) = ClusterDir::open_in_process(&config(tmp.path())).unwrap();
        assert!(matches!(again, MetadataFile::Imported));
        drop(_d);

        // A changed file is refused.
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(
            &file,
            text.replace("\"producer_id_limit\": 1000", "\"producer_id_limit\": 2000"),
        )
        .unwrap();
        assert_ne!(
            std::fs::read_to_string(&file).unwrap(),
            text,
            "the fixture changed"
        );
        let e = ClusterDir::open_in_process(&config(tmp.path())).unwrap_err();
        assert!(
            e.to_string()
                .contains("is not the metadata file this directory imported")
                && e.to_string()
                    .contains("remove meta.properties to import this file instead"),
            "{e}"
        );
    }
}
