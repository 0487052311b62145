//! The broker's durable metadata: cluster id, topics (name, id, kind,
//! partition count, config overrides), dynamic broker configs and the
//! producer-id high-water mark. One JSON file, replaced atomically on every
//! change; it is the commit point for topic creation and deletion.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use model::{TopicId, TopicName};
use serde::{Deserialize, Serialize};

use crate::config::{TopicConfig, TopicKind};
use crate::Error;

/// File name inside the data directory.
pub const FILE_NAME: &str = "cluster-metadata.json";
const VERSION: u32 = 1;

/// A topic as persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Name.
    pub name: TopicName,
    /// Permanent id.
    pub id: TopicId,
    /// Partitioned or not.
    pub kind: TopicKind,
    /// Partition count.
    pub partitions: i32,
    /// Config overrides.
    #[serde(default)]
    pub config: TopicConfig,
}

/// Everything persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    version: u32,
    /// This cluster's id, made once.
    pub cluster_id: String,
    /// Producer ids below this may have been handed out.
    pub producer_id_limit: i64,
    /// Topics by name.
    pub topics: BTreeMap<TopicName, TopicRecord>,
    /// Broker keys changed at runtime.
    #[serde(default)]
    pub broker_configs: BTreeMap<String, String>,
}

/// The metadata file and its last written content.
#[derive(Debug)]
pub struct MetadataStore {
    path: PathBuf,
    /// The current content.
    pub data: Metadata,
}

impl MetadataStore {
    /// Loads the file, or makes a new cluster id if there is none.
    pub fn open(data_dir: &Path) -> Result<MetadataStore, Error> {
        let path = data_dir.join(FILE_NAME);
        let io = |source| Error::MetadataIo {
            path: path.clone(),
            source,
        };
        match fs::read(&path) {
            Ok(bytes) => {
                let data: Metadata =
                    serde_json::from_slice(&bytes).map_err(|e| Error::MetadataCorrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                if data.version != VERSION {
                    return Err(Error::MetadataCorrupt {
                        path,
                        reason: format!("unsupported version {}", data.version),
                    });
                }
                Ok(MetadataStore { path, data })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut store = MetadataStore {
                    path: path.clone(),
                    data: Metadata {
                        version: VERSION,
                        cluster_id: new_cluster_id(),
                        producer_id_limit: 0,
                        topics: BTreeMap::new(),
                        broker_configs: BTreeMap::new(),
                    },
                };
                store.save().map_err(|e| match e {
                    Error::MetadataIo { source, .. } => io(source),
                    other => other,
                })?;
                Ok(store)
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Applies `change` to a copy and persists it; memory is updated only if
    /// the write succeeded, so a failed write changes nothing.
    pub fn update<T>(&mut self, change: impl FnOnce(&mut Metadata) -> T) -> Result<T, Error> {
        let mut next = self.data.clone();
        let out = change(&mut next);
        write_atomically(&self.path, &next).map_err(|source| Error::MetadataIo {
            path: self.path.clone(),
            source,
        })?;
        self.data = next;
        Ok(out)
    }

    fn save(&mut self) -> Result<(), Error> {
        write_atomically(&self.path, &self.data).map_err(|source| Error::MetadataIo {
            path: self.path.clone(),
            source,
        })
    }
}

fn write_atomically(path: &Path, data: &Metadata) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(data).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        // The rename is only durable once the directory entry is.
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding.
fn new_cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut out = String::with_capacity(22);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persists_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = MetadataStore::open(dir.path()).unwrap();
        let cluster = s.data.cluster_id.clone();
        assert_eq!(cluster.len(), 22);
        let name = TopicName::new("t").unwrap();
        let id = TopicId::random();
        s.update(|m| {
            m.topics.insert(
                name.clone(),
                TopicRecord {
                    name: name.clone(),
                    id,
                    kind: TopicKind::NonPartitioned,
                    partitions: 1,
                    config: TopicConfig::default(),
                },
            );
        })
        .unwrap();
        let s2 = MetadataStore::open(dir.path()).unwrap();
        assert_eq!(s2.data.cluster_id, cluster);
        assert_eq!(s2.data.topics[&name].id, id);
        assert_eq!(s2.data.topics[&name].kind, TopicKind::NonPartitioned);
    }

    #[test]
    fn corrupt_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        let e = MetadataStore::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("corrupt"), "{e}");
    }
}
