//! The broker's durable metadata: cluster id, topics (name, id, kind,
//! partition count, config overrides), tenants and their namespaces
//! (with the namespaces' policies), dynamic broker configs and the
//! producer-id high-water mark. One JSON file, replaced atomically on every
//! change; it is the commit point for topic creation and deletion.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use model::{TopicId, TopicName};
use serde::{Deserialize, Serialize};

use crate::config::{TopicConfig, TopicKind};
use crate::metadata_records::{apply_all, MetadataRecord, PartitionState};
use crate::Error;

/// File name inside the data directory.
pub const FILE_NAME: &str = "cluster-metadata.json";
/// 2: broker keys in layers (`broker_configs` the cluster-wide defaults,
/// `node_configs` each broker's own); version 1 had one layer, the
/// broker's own, in `broker_configs`.
const VERSION: u32 = 2;

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
    /// Each partition's replicas and leader, in index order (files written
    /// before placements were stored have none: a broker fills them with
    /// itself when it opens the file).
    #[serde(default)]
    pub placements: Vec<PartitionState>,
}

/// A tenant as persisted: upstream Pulsar's `TenantInfo` and the
/// tenant's namespaces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantRecord {
    /// Roles allowed to administer the tenant (recorded; there is no
    /// authorization yet).
    #[serde(default)]
    pub admin_roles: BTreeSet<String>,
    /// Clusters the tenant may use.
    #[serde(default)]
    pub allowed_clusters: BTreeSet<String>,
    /// Namespaces by their name within the tenant.
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespaceRecord>,
}

/// A namespace as persisted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceRecord {
    /// Topic configuration keys the namespace sets for its topics (its
    /// policies, e.g. retention as `retention.ms`/`retention.bytes`);
    /// a topic's own override wins.
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
    /// Broker keys changed at runtime for every broker (the cluster-wide
    /// defaults).
    #[serde(default)]
    pub broker_configs: BTreeMap<String, String>,
    /// Broker keys changed at runtime for one broker, by node; they
    /// override the cluster-wide defaults on that broker only.
    #[serde(default)]
    pub node_configs: BTreeMap<crate::metadata_records::NodeId, BTreeMap<String, String>>,
    /// Tenants by name (files written before tenants existed have none;
    /// `public` and `public/default` are added when a file is opened).
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantRecord>,
    /// The brokers registered with the controller, by node id (a single
    /// node's file has none: it is its own only broker).
    #[serde(default)]
    pub brokers: BTreeMap<crate::metadata_records::NodeId, BrokerRegistration>,
    /// The last broker epoch handed out: every registration gets a higher
    /// one, also after a broker unregistered (as Kafka's epochs, which are
    /// record offsets, always rise), so an old process's epoch never
    /// becomes valid again.
    #[serde(default)]
    pub last_broker_epoch: i64,
    /// The group and transaction coordinators by slot (a cluster's; a
    /// single node coordinates everything itself and has none).
    #[serde(default)]
    pub coordinators: Vec<crate::metadata_records::NodeId>,
    /// SCRAM credentials by user and mechanism (salted: no password is
    /// stored).
    #[serde(default)]
    pub scram_credentials: BTreeMap<
        String,
        BTreeMap<crate::security::ScramMechanism, crate::security::ScramCredential>,
    >,
    /// The ACLs (CreateAcls/DeleteAcls).
    #[serde(default)]
    pub acls: std::collections::BTreeSet<crate::security::acl::AclBinding>,
    /// Client quotas by entity (AlterClientQuotas).
    #[serde(default, with = "crate::quota::serde_quotas")]
    pub client_quotas: crate::quota::Quotas,
}

/// A broker as registered with the controller: Kafka's
/// `RegisterBrokerRecord` and the fencing of `BrokerRegistrationChangeRecord`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// Above every earlier registration's of any broker (each start of a
    /// broker process registers); heartbeats and requests of an older
    /// epoch are refused.
    pub epoch: i64,
    /// A random id of the process incarnation: a second process with the
    /// same node id and another incarnation is refused while this one is
    /// alive.
    pub incarnation: String,
    /// The id of the broker's data directory (Kafka's `directory.id` in
    /// `meta.properties`): a directory is locked by one live process, so
    /// a new process registering from the same one replaces a crashed
    /// predecessor at once. Empty in registrations written before it.
    #[serde(default)]
    pub directory: String,
    /// Listener name → `host:port` the broker advertises.
    pub endpoints: BTreeMap<String, String>,
    /// A fenced broker leads nothing and gets no new partitions; a broker
    /// starts fenced and is unfenced once it has caught up with the
    /// metadata, and is fenced again when its heartbeats stop.
    pub fenced: bool,
    /// The registration ended with a controlled shutdown: fenced for good
    /// (its process is gone; the next one registers anew).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shut_down: bool,
}

impl Metadata {
    /// `static_config` under the dynamic broker keys broker `node` gets:
    /// the cluster-wide defaults, then its own.
    pub fn dynamic_config(
        &self,
        static_config: &crate::config::BrokerConfig,
        node: crate::metadata_records::NodeId,
    ) -> crate::config::BrokerConfig {
        let none = BTreeMap::new();
        let own = self.node_configs.get(&node).unwrap_or(&none);
        static_config.with_dynamic(&self.broker_configs, own)
    }

    /// Empty metadata of a new cluster with `cluster_id`, holding the
    /// `public/default` namespace.
    pub fn new(cluster_id: String) -> Metadata {
        let mut m = Metadata {
            version: VERSION,
            cluster_id,
            producer_id_limit: 0,
            topics: BTreeMap::new(),
            broker_configs: BTreeMap::new(),
            node_configs: BTreeMap::new(),
            tenants: BTreeMap::new(),
            brokers: BTreeMap::new(),
            last_broker_epoch: 0,
            coordinators: Vec::new(),
            scram_credentials: BTreeMap::new(),
            acls: Default::default(),
            client_quotas: Default::default(),
        };
        add_default_namespace(&mut m.tenants);
        m
    }
}

/// The metadata file and its last written content.
#[derive(Debug)]
pub struct MetadataStore {
    path: PathBuf,
    // A cluster member's copy of the quorum's metadata: never written here.
    memory_only: bool,
    /// The current content.
    pub data: Metadata,
}

impl MetadataStore {
    /// Loads the file of node `node`, or makes a new cluster id if there is
    /// none. A version 1 file is upgraded (and rewritten): its dynamic
    /// broker keys were the node's own, so they stay its own rather than
    /// becoming cluster-wide defaults that the node's resource could not
    /// remove.
    pub fn open(
        data_dir: &Path,
        node: crate::metadata_records::NodeId,
    ) -> Result<MetadataStore, Error> {
        let path = data_dir.join(FILE_NAME);
        let io = |source| Error::MetadataIo {
            path: path.clone(),
            source,
        };
        match fs::read(&path) {
            Ok(bytes) => {
                let upgrade = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .is_ok_and(|v| v["version"] == 1);
                let data = parse(&path, &bytes, node)?;
                let mut store = MetadataStore {
                    path,
                    memory_only: false,
                    data,
                };
                if upgrade {
                    store.save()?;
                }
                Ok(store)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut store = MetadataStore {
                    path: path.clone(),
                    memory_only: false,
                    data: Metadata::new(new_cluster_id()),
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

    /// The content of a single node's metadata file in `data_dir`, if
    /// there is one (upgraded as [`MetadataStore::open`] does, every
    /// partition placed on `node` when the file predates placements),
    /// without writing anything: what `magnetar standalone` imports into
    /// its quorum of one.
    pub fn read_file(
        data_dir: &Path,
        node: crate::metadata_records::NodeId,
    ) -> Result<Option<Metadata>, Error> {
        if !data_dir.join(FILE_NAME).exists() {
            return Ok(None);
        }
        let path = data_dir.join(FILE_NAME);
        let bytes = fs::read(&path).map_err(|source| Error::MetadataIo {
            path: path.clone(),
            source,
        })?;
        let mut data = parse(&path, &bytes, node)?;
        for rec in data.topics.values_mut() {
            if rec.placements.len() != rec.partitions as usize {
                rec.placements = (0..rec.partitions)
                    .map(|_| PartitionState::single(node))
                    .collect();
            }
        }
        Ok(Some(data))
    }

    /// A cluster member's metadata, held in memory only: it changes by
    /// applying the controller quorum's committed records.
    pub fn memory_only(data: Metadata) -> MetadataStore {
        MetadataStore {
            path: PathBuf::new(),
            memory_only: true,
            data,
        }
    }

    /// Applies `records` to a copy and persists it; memory is updated only
    /// if every record applies and the write succeeded, so a refused
    /// record or a failed write changes nothing.
    pub fn commit(&mut self, records: &[MetadataRecord]) -> Result<(), Error> {
        if self.memory_only {
            return Err(Error::InvalidRequest(
                "a cluster member's metadata changes through the controller quorum".into(),
            ));
        }
        let next = apply_all(&self.data, records)?;
        write_atomically(&self.path, &next).map_err(|source| Error::MetadataIo {
            path: self.path.clone(),
            source,
        })?;
        self.data = next;
        Ok(())
    }

    fn save(&mut self) -> Result<(), Error> {
        write_atomically(&self.path, &self.data).map_err(|source| Error::MetadataIo {
            path: self.path.clone(),
            source,
        })
    }
}

/// The file's content, upgraded from version 1: its dynamic broker keys
/// were the node's own, so they stay `node`'s rather than becoming
/// cluster-wide defaults that the node's resource could not remove.
fn parse(
    path: &Path,
    bytes: &[u8],
    node: crate::metadata_records::NodeId,
) -> Result<Metadata, Error> {
    let mut data: Metadata = serde_json::from_slice(bytes).map_err(|e| Error::MetadataCorrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if data.version != VERSION && data.version != 1 {
        return Err(Error::MetadataCorrupt {
            path: path.to_path_buf(),
            reason: format!("unsupported version {}", data.version),
        });
    }
    add_default_namespace(&mut data.tenants);
    if data.version == 1 {
        let own = std::mem::take(&mut data.broker_configs);
        if !own.is_empty() {
            data.node_configs.entry(node).or_default().extend(own);
        }
        data.version = VERSION;
    }
    Ok(data)
}

/// `public` and `public/default` always exist (as on an upstream
/// standalone broker); they are written with the next change.
fn add_default_namespace(tenants: &mut BTreeMap<String, TenantRecord>) {
    let public = tenants
        .entry(model::pulsar_name::DEFAULT_TENANT.to_string())
        .or_insert_with(|| TenantRecord {
            allowed_clusters: [crate::tenancy::CLUSTER_NAME.to_string()].into(),
            ..TenantRecord::default()
        });
    public
        .namespaces
        .entry(model::pulsar_name::DEFAULT_NAMESPACE.to_string())
        .or_default();
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
pub(crate) fn new_cluster_id() -> String {
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
        let mut s = MetadataStore::open(dir.path(), 1).unwrap();
        let cluster = s.data.cluster_id.clone();
        assert_eq!(cluster.len(), 22);
        let name = TopicName::new("t").unwrap();
        let id = TopicId::random();
        s.commit(&[MetadataRecord::TopicCreated {
            topic: TopicRecord {
                name: name.clone(),
                id,
                kind: TopicKind::NonPartitioned,
                partitions: 1,
                config: TopicConfig::default(),
                placements: vec![PartitionState::single(1)],
            },
        }])
        .unwrap();
        let s2 = MetadataStore::open(dir.path(), 1).unwrap();
        assert_eq!(s2.data.cluster_id, cluster);
        assert_eq!(s2.data.topics[&name].id, id);
        assert_eq!(s2.data.topics[&name].kind, TopicKind::NonPartitioned);
        assert_eq!(
            s2.data.topics[&name].placements,
            vec![PartitionState::single(1)]
        );
    }

    #[test]
    fn a_refused_record_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = MetadataStore::open(dir.path(), 1).unwrap();
        let before = s.data.clone();
        let e = s
            .commit(&[
                MetadataRecord::ProducerIdsReserved { limit: 1000 },
                MetadataRecord::TopicDeleted {
                    id: TopicId::random(),
                    name: TopicName::new("missing").unwrap(),
                },
            ])
            .unwrap_err();
        assert!(matches!(e, Error::MetadataConflict(_)), "{e}");
        assert_eq!(s.data, before);
        assert_eq!(MetadataStore::open(dir.path(), 1).unwrap().data, before);
    }

    #[test]
    fn files_without_tenants_load_with_the_default_namespace() {
        let dir = tempfile::tempdir().unwrap();
        // As written before tenants and namespaces were stored.
        fs::write(
            dir.path().join(FILE_NAME),
            br#"{"version":1,"cluster_id":"abc","producer_id_limit":0,"topics":{}}"#,
        )
        .unwrap();
        let s = MetadataStore::open(dir.path(), 1).unwrap();
        assert_eq!(s.data.cluster_id, "abc");
        let public = &s.data.tenants["public"];
        assert!(public.namespaces.contains_key("default"));
        assert_eq!(
            public.allowed_clusters,
            [crate::tenancy::CLUSTER_NAME.to_string()].into()
        );
    }

    #[test]
    fn tenants_and_namespace_policies_persist() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = MetadataStore::open(dir.path(), 1).unwrap();
        let mut tenants = s.data.tenants.clone();
        let t = tenants.entry("acme".into()).or_default();
        t.admin_roles.insert("ops".into());
        let mut config = TopicConfig::default();
        config.set("retention.ms", "60000").unwrap();
        t.namespaces
            .insert("billing".into(), NamespaceRecord { config });
        s.commit(&[MetadataRecord::TenantsSet { tenants }]).unwrap();
        let s2 = MetadataStore::open(dir.path(), 1).unwrap();
        assert_eq!(s2.data.tenants, s.data.tenants);
        let ns = &s2.data.tenants["acme"].namespaces["billing"];
        assert_eq!(ns.config.overrides()["retention.ms"], "60000");
    }

    #[test]
    fn version_1_broker_keys_stay_the_nodes_own() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(FILE_NAME),
            br#"{"version":1,"cluster_id":"abc","producer_id_limit":0,"topics":{},"broker_configs":{"log.retention.ms":"60000"}}"#,
        )
        .unwrap();
        let s = MetadataStore::open(dir.path(), 3).unwrap();
        assert!(s.data.broker_configs.is_empty());
        assert_eq!(s.data.node_configs[&3]["log.retention.ms"], "60000");
        // Rewritten as version 2: opened again, nothing moves.
        let again = MetadataStore::open(dir.path(), 3).unwrap();
        assert_eq!(again.data, s.data);
        let text = fs::read(dir.path().join(FILE_NAME)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["version"], 2);
    }

    #[test]
    fn corrupt_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        let e = MetadataStore::open(dir.path(), 1).unwrap_err().to_string();
        assert!(e.contains("corrupt"), "{e}");
    }
}
