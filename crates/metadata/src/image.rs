//! The broker's metadata: cluster id, topics (name, id, kind, partition
//! count, config overrides, placements), tenants and their namespaces
//! (with the namespaces' policies), dynamic broker configs, brokers,
//! coordinators, credentials, ACLs, quotas and the producer-id high-water
//! mark. It is the state the controller quorum's records build
//! (`metadata_records::apply`); every node holds a copy.
//!
//! Before `magnetar standalone` ran a quorum of one it kept this state in
//! one JSON file; [`MetadataStore::read_file`] reads such a file for the
//! quorum to import.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use model::{TopicId, TopicName};
use serde::{Deserialize, Serialize};

use crate::MetadataError as Error;
use magnetar_config::{TopicConfig, TopicKind};

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

/// A broker's node id.
pub type NodeId = i32;

/// No leader: the partition is offline.
pub const NO_LEADER: NodeId = -1;

/// Where a partition lives and who leads it: Kafka's `PartitionRecord`.
/// On a single node every partition has one replica, itself, at epoch 0;
/// the cluster fills in the lists and bumps the epochs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// The brokers holding a replica, preferred leader first.
    pub replicas: Vec<NodeId>,
    /// The replicas in sync with the leader.
    pub isr: Vec<NodeId>,
    /// The leader, or [`NO_LEADER`].
    pub leader: NodeId,
    /// Bumped whenever the leader changes.
    pub leader_epoch: i32,
    /// Bumped on every change of this state.
    pub partition_epoch: i32,
    /// Replicas a reassignment adds (KIP-455): in `replicas`, fetching
    /// until they join the ISR, when the reassignment completes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<NodeId>,
    /// Replicas a reassignment removes once it completes: in `replicas`
    /// until then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<NodeId>,
}

impl PartitionState {
    /// One replica on `node`, which leads it, at epoch 0.
    pub fn single(node: NodeId) -> PartitionState {
        PartitionState::in_sync(vec![node])
    }

    /// A new partition on `replicas` (not empty), led by the first, all in
    /// sync, at epoch 0.
    pub fn in_sync(replicas: Vec<NodeId>) -> PartitionState {
        PartitionState {
            isr: replicas.clone(),
            leader: replicas[0],
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }
    }

    /// Whether `node` holds a replica.
    pub fn has_replica(&self, node: NodeId) -> bool {
        self.replicas.contains(&node)
    }

    /// Whether a reassignment of the partition is under way.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }
}

/// The name of this (single-broker) cluster, as upstream's standalone
/// broker calls its cluster; the only value `allowedClusters` may hold.
pub const CLUSTER_NAME: &str = "standalone";

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
    pub node_configs: BTreeMap<NodeId, BTreeMap<String, String>>,
    /// Tenants by name (files written before tenants existed have none;
    /// `public` and `public/default` are added when a file is opened).
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantRecord>,
    /// The brokers registered with the controller, by node id (a single
    /// node's file has none: it is its own only broker).
    #[serde(default)]
    pub brokers: BTreeMap<NodeId, BrokerRegistration>,
    /// The last broker epoch handed out: every registration gets a higher
    /// one, also after a broker unregistered (as Kafka's epochs, which are
    /// record offsets, always rise), so an old process's epoch never
    /// becomes valid again.
    #[serde(default)]
    pub last_broker_epoch: i64,
    /// The group and transaction coordinators by slot (empty until
    /// placed; a file written before the quorum of one has none).
    #[serde(default)]
    pub coordinators: Vec<NodeId>,
    /// SCRAM credentials by user and mechanism (salted: no password is
    /// stored).
    #[serde(default)]
    pub scram_credentials: BTreeMap<
        String,
        BTreeMap<crate::credentials::ScramMechanism, crate::credentials::ScramCredential>,
    >,
    /// The ACLs (CreateAcls/DeleteAcls).
    #[serde(default)]
    pub acls: std::collections::BTreeSet<crate::acl::AclBinding>,
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
    /// The identity of the directory lock the process holds
    /// (`storage::LogManager::lock_identity`): a new process that holds
    /// the same lock proves this one gone. Empty where unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lock: String,
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
    /// The brokers that may lead or stay in an ISR: registered and
    /// unfenced.
    pub fn live_brokers(&self) -> BTreeSet<NodeId> {
        self.brokers
            .iter()
            .filter(|(_, b)| !b.fenced)
            .map(|(n, _)| *n)
            .collect()
    }

    /// Every partition of every topic: its topic, index and state.
    pub fn partitions(&self) -> impl Iterator<Item = (&TopicRecord, i32, &PartitionState)> {
        self.topics.values().flat_map(|t| {
            t.placements
                .iter()
                .enumerate()
                .map(move |(i, s)| (t, i as i32, s))
        })
    }

    /// The topic named `topic` and the state of its partition
    /// `partition`.
    pub fn partition_named(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<(&TopicRecord, &PartitionState)> {
        let rec = self.topics.values().find(|t| t.name.as_str() == topic)?;
        let state = usize::try_from(partition)
            .ok()
            .and_then(|p| rec.placements.get(p))?;
        Some((rec, state))
    }

    /// `static_config` under the dynamic broker keys broker `node` gets:
    /// the cluster-wide defaults, then its own.
    pub fn dynamic_config(
        &self,
        static_config: &magnetar_config::BrokerConfig,
        node: NodeId,
    ) -> magnetar_config::BrokerConfig {
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

/// A node's copy of the controller quorum's metadata: it changes only by
/// applying the quorum's committed records (see `cluster::apply`).
#[derive(Debug)]
pub struct MetadataStore {
    /// The current content.
    pub data: Metadata,
}

impl MetadataStore {
    /// A copy holding `data`.
    pub fn new(data: Metadata) -> MetadataStore {
        MetadataStore { data }
    }

    /// The content of the metadata file `magnetar standalone` kept in
    /// `data_dir` before it ran a quorum of one, if there is one (a
    /// version 1 file upgraded, every partition placed on `node` when the
    /// file predates placements), without writing anything: what the
    /// quorum imports.
    pub fn read_file(data_dir: &Path, node: NodeId) -> Result<Option<Metadata>, Error> {
        let path = data_dir.join(FILE_NAME);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::MetadataIo { path, source }),
        };
        Self::parse_file(&path, &bytes, node).map(Some)
    }

    /// As [`MetadataStore::read_file`], of the file's bytes read from
    /// `path` already.
    pub fn parse_file(path: &Path, bytes: &[u8], node: NodeId) -> Result<Metadata, Error> {
        let mut data = parse(path, bytes, node)?;
        for rec in data.topics.values_mut() {
            if rec.placements.len() != rec.partitions as usize {
                rec.placements = (0..rec.partitions)
                    .map(|_| PartitionState::single(node))
                    .collect();
            }
        }
        Ok(data)
    }
}

/// The file's content, upgraded from version 1: its dynamic broker keys
/// were the node's own, so they stay `node`'s rather than becoming
/// cluster-wide defaults that the node's resource could not remove.
fn parse(path: &Path, bytes: &[u8], node: NodeId) -> Result<Metadata, Error> {
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
            allowed_clusters: [CLUSTER_NAME.to_string()].into(),
            ..TenantRecord::default()
        });
    public
        .namespaces
        .entry(model::pulsar_name::DEFAULT_NAMESPACE.to_string())
        .or_default();
}

/// A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding.
pub fn new_cluster_id() -> String {
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
    fn no_file_is_none_and_a_file_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(MetadataStore::read_file(dir.path(), 1).unwrap(), None);
        let mut m = Metadata::new("abc".into());
        let name = TopicName::new("t").unwrap();
        m.topics.insert(
            name.clone(),
            TopicRecord {
                name: name.clone(),
                id: TopicId::random(),
                kind: TopicKind::NonPartitioned,
                partitions: 1,
                config: TopicConfig::default(),
                placements: vec![PartitionState::single(1)],
            },
        );
        fs::write(dir.path().join(FILE_NAME), serde_json::to_vec(&m).unwrap()).unwrap();
        assert_eq!(MetadataStore::read_file(dir.path(), 1).unwrap(), Some(m));
    }

    #[test]
    fn old_files_read_with_the_default_namespace_and_placements() {
        let dir = tempfile::tempdir().unwrap();
        // As written before tenants, namespaces and placements were stored.
        fs::write(
            dir.path().join(FILE_NAME),
            br#"{"version":1,"cluster_id":"abc","producer_id_limit":0,"topics":{"t":{"name":"t","id":"64b73ba4-9564-49ed-8475-80be26ebcd98","kind":"partitioned","partitions":2}}}"#,
        )
        .unwrap();
        let m = MetadataStore::read_file(dir.path(), 3).unwrap().unwrap();
        assert_eq!(m.cluster_id, "abc");
        let public = &m.tenants["public"];
        assert!(public.namespaces.contains_key("default"));
        assert_eq!(
            public.allowed_clusters,
            [crate::tenancy::CLUSTER_NAME.to_string()].into()
        );
        let t = &m.topics[&TopicName::new("t").unwrap()];
        assert_eq!(t.placements, vec![PartitionState::single(3); 2]);
    }

    #[test]
    fn version_1_broker_keys_stay_the_nodes_own() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(FILE_NAME),
            br#"{"version":1,"cluster_id":"abc","producer_id_limit":0,"topics":{},"broker_configs":{"log.retention.ms":"60000"}}"#,
        )
        .unwrap();
        let m = MetadataStore::read_file(dir.path(), 3).unwrap().unwrap();
        assert!(m.broker_configs.is_empty());
        assert_eq!(m.node_configs[&3]["log.retention.ms"], "60000");
        assert_eq!(m.version, VERSION);
    }

    #[test]
    fn corrupt_or_future_files_are_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        let e = MetadataStore::read_file(dir.path(), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("corrupt"), "{e}");
        fs::write(
            dir.path().join(FILE_NAME),
            br#"{"version":9,"cluster_id":"abc","producer_id_limit":0,"topics":{}}"#,
        )
        .unwrap();
        let e = MetadataStore::read_file(dir.path(), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unsupported version 9"), "{e}");
    }
}
