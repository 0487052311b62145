//! A cluster of `magnetar broker` processes on loopback: combined nodes
//! (each a broker and a controller voter), each with its own data
//! directory and ports, so clusters of parallel tests never meet.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::Duration;

use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, MetadataRequest, MetadataResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic};
use rdkafka::client::DefaultClientContext;

use super::{client_config, BrokerProcess, RawConn};

/// How long a cluster's brokers get to agree on a change.
const SEEN_WITHIN: Duration = Duration::from_secs(30);

/// A key of `key_type` (0 group, 1 transactional id), `prefix`-N, whose
/// coordinator is node `node` (a live one), as FindCoordinator at `addr`
/// answers. Keys whose coordinator is answered unavailable
/// (COORDINATOR_NOT_AVAILABLE: its broker is down) are another broker's and
/// skipped.
pub async fn coordinated_by(addr: &str, key_type: i8, prefix: &str, node: i32) -> String {
    let mut conn = RawConn::connect(addr.parse().unwrap()).await;
    for i in 0..1000 {
        let key = format!("{prefix}-{i}");
        let req = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![StrBytes::from_string(key.clone())]);
        let ResponseKind::FindCoordinator(resp) = conn.call(ApiKey::FindCoordinator, 4, req).await
        else {
            panic!("no FindCoordinator answer from {addr}")
        };
        let x = &resp.coordinators[0];
        match x.error_code {
            0 if x.node_id.0 == node => return key,
            0 | 15 => {}
            _ => panic!("{resp:?}"),
        }
    }
    panic!("no key coordinated by node {node}")
}

/// Creates `topic` with one partition per broker of a cluster of `nodes`
/// (placement is round robin) and returns partition → leader once `addr`
/// reports every one, led by all the brokers.
pub async fn create_spread(
    addr: &str,
    topic: &str,
    nodes: i32,
) -> std::collections::BTreeMap<i32, i32> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        super::client_config(addr).create().unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(topic, nodes, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
    let placed = format!("{topic} placed");
    let leaders = super::eventually(Duration::from_secs(30), &placed, || async {
        let md = metadata(addr).await;
        let t = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))?;
        (t.error_code == 0 && t.partitions.len() == nodes as usize).then(|| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect::<std::collections::BTreeMap<_, _>>()
        })
    })
    .await;
    let owners: std::collections::BTreeSet<i32> = leaders.values().copied().collect();
    assert_eq!(
        owners,
        (1..=nodes).collect(),
        "{topic}'s partitions on every broker"
    );
    leaders
}

/// Metadata v12 for every topic, as the broker at `addr` answers it.
pub async fn metadata(addr: &str) -> MetadataResponse {
    let mut conn = RawConn::connect(addr.parse().unwrap()).await;
    let ResponseKind::Metadata(resp) = conn
        .call(
            ApiKey::Metadata,
            12,
            MetadataRequest::default().with_topics(None),
        )
        .await
    else {
        panic!("no metadata answer from {addr}")
    };
    resp
}

/// Fast failure detection, so tests do not wait out Kafka's 9 s session;
/// 12 coordinator slots; topics only by request.
pub const FAST_SETTINGS: &[&str] = &[
    "broker.session.timeout.ms=4000",
    "broker.heartbeat.interval.ms=500",
    "offsets.topic.num.partitions=12",
    "auto.create.topics.enable=false",
];

/// Writes a cluster secret (32 random bytes, readable by its owner only)
/// to `dir/cluster.secret`; the `--set` assignment naming it.
pub fn write_secret(dir: &std::path::Path) -> String {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("cluster.secret");
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("random bytes");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("a new secret file");
    std::io::Write::write_all(&mut f, &bytes).expect("write the secret");
    format!("controller.cluster.secret.file={}", path.display())
}

/// Nodes 1..=n of one cluster.
pub struct Cluster {
    /// The nodes, node `i` at index `i - 1`.
    pub nodes: Vec<BrokerProcess>,
    /// `controller.quorum.voters`.
    pub voters: String,
    /// The `--set` assignment of the cluster's secret file
    /// (`controller.cluster.secret.file=...`), for nodes started besides.
    pub secret: String,
    tmp: tempfile::TempDir,
}

impl Cluster {
    /// Starts `n` combined nodes with the `--set` assignments `settings`
    /// (and the cluster's own secret file, unless `settings` name one)
    /// and waits until each serves Kafka (registered and caught up).
    pub fn start(n: usize, settings: &[&str]) -> Cluster {
        // The controller ports are reserved and released before the nodes
        // bind them, so another test's listener can take one in between:
        // then the cluster starts again on other free ports.
        for _ in 0..5 {
            match Self::try_start(n, settings) {
                Ok(c) => return c,
                Err(log) if log.contains("cannot listen") => continue,
                Err(log) => panic!("a node did not start; its log:\n{log}"),
            }
        }
        panic!("no free controller ports after 5 attempts");
    }

    fn try_start(n: usize, settings: &[&str]) -> Result<Cluster, String> {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Controller ports must be known before any node starts (each names
        // all voters): reserve free ones, then hand them over.
        let reserved: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("reserve a port"))
            .collect();
        let ports: Vec<u16> = reserved
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        drop(reserved);
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let secret = write_secret(tmp.path());
        let mut settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
        if !settings
            .iter()
            .any(|s| s.starts_with("controller.cluster.secret.file="))
        {
            settings.push(secret.clone());
        }
        // Started together: each waits for a quorum before it is ready.
        let handles: Vec<_> = (1..=n)
            .map(|id| {
                let dir = tmp.path().join(format!("node-{id}"));
                let args = vec![
                    "--node-id".to_string(),
                    id.to_string(),
                    "--controller-quorum".to_string(),
                    voters.clone(),
                    "--controller-addr".to_string(),
                    format!("127.0.0.1:{}", ports[id - 1]),
                ];
                let settings = settings.clone();
                std::thread::spawn(move || {
                    let s: Vec<&str> = settings.iter().map(String::as_str).collect();
                    BrokerProcess::try_start_node(dir, &args, &s)
                })
            })
            .collect();
        let mut nodes = Vec::new();
        let mut failed = None;
        for h in handles {
            match h.join().expect("node start thread") {
                Ok(node) => nodes.push(node),
                Err(log) => failed = failed.or(Some(log)),
            }
        }
        match failed {
            // The others are stopped when dropped.
            Some(log) => Err(log),
            None => Ok(Cluster {
                nodes,
                voters,
                secret,
                tmp,
            }),
        }
    }

    /// Node `id` (1-based).
    pub fn node(&mut self, id: usize) -> &mut BrokerProcess {
        &mut self.nodes[id - 1]
    }

    /// The Kafka address of node `id`.
    pub fn addr(&self, id: usize) -> String {
        self.nodes[id - 1].bootstrap()
    }

    /// Every running node's Kafka address, for clients' bootstrap lists.
    pub fn bootstrap(&mut self) -> String {
        let mut out = Vec::new();
        for n in &mut self.nodes {
            if n.is_running() {
                out.push(n.bootstrap());
            }
        }
        out.join(",")
    }

    /// `settings` and the cluster's secret, for a node started besides.
    pub fn with_secret<'a>(&'a self, settings: &[&'a str]) -> Vec<&'a str> {
        let mut all = settings.to_vec();
        all.push(&self.secret);
        all
    }

    /// Where the data directories live.
    pub fn dir(&self) -> &std::path::Path {
        self.tmp.path()
    }

    /// Waits until node `id` logged a line containing `needle`.
    pub fn wait_for_log(&self, id: usize, needle: &str, timeout: Duration) {
        self.nodes[id - 1]
            .wait_for_log_line(&format!("{needle:?}"), timeout, |l| l.contains(needle));
    }
}

/// Partition → leader of `topic` as `addr` reports it, once it reports
/// `partitions` of them.
pub async fn leaders(addr: &str, topic: &str, partitions: usize) -> BTreeMap<i32, i32> {
    super::eventually(SEEN_WITHIN, &format!("{topic} on {addr}"), || async {
        let md = metadata(addr).await;
        let t = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))?;
        (t.error_code == 0 && t.partitions.len() == partitions).then(|| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect()
        })
    })
    .await
}

/// Waits until every node reports `n` live brokers.
pub async fn wait_brokers(c: &Cluster, nodes: &[usize], n: usize) {
    for &id in nodes {
        let addr = c.addr(id);
        super::eventually(
            SEEN_WITHIN,
            &format!("{n} brokers seen by node {id}"),
            || {
                let addr = addr.clone();
                async move { (metadata(&addr).await.brokers.len() == n).then_some(()) }
            },
        )
        .await;
    }
}

/// An admin client of `bootstrap`.
pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    client_config(bootstrap).create().unwrap()
}

/// Creates `topic` through `bootstrap`; it must succeed.
pub async fn create(bootstrap: &str, topic: NewTopic<'_>) {
    let r = admin(bootstrap)
        .create_topics(&[topic], &AdminOptions::new())
        .await
        .unwrap();
    r[0].as_ref().unwrap_or_else(|e| panic!("create: {e:?}"));
}
