//! Controller configuration and the voter set.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::auth::PeerAuth;
use crate::error::{ControllerError, Result};
use crate::log_store::LogOptions;
use crate::types::NodeId;

/// The controller quorum: node id → controller address, parsed from Kafka's
/// `controller.quorum.voters` form `1@host:port,2@host:port,3@host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voters(BTreeMap<NodeId, String>);

impl Voters {
    /// A voter set from (id, address) pairs.
    pub fn new(voters: impl IntoIterator<Item = (NodeId, String)>) -> Result<Self> {
        let map: BTreeMap<NodeId, String> = voters.into_iter().collect();
        let v = Voters(map);
        v.check()?;
        Ok(v)
    }

    fn check(&self) -> Result<()> {
        let bad = |reason: &str| ControllerError::InvalidVoters {
            input: self.to_string(),
            reason: reason.to_string(),
        };
        if self.0.is_empty() {
            return Err(bad("no voters"));
        }
        let mut addrs: Vec<&String> = self.0.values().collect();
        addrs.sort();
        if addrs.windows(2).any(|w| w[0] == w[1]) {
            return Err(bad("two voters share an address"));
        }
        Ok(())
    }

    /// The voters in id order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &str)> {
        self.0.iter().map(|(id, a)| (*id, a.as_str()))
    }

    /// The address of voter `id`.
    pub fn addr(&self, id: NodeId) -> Option<&str> {
        self.0.get(&id).map(String::as_str)
    }

    /// The lowest voter id (the one that bootstraps by default).
    pub fn lowest(&self) -> NodeId {
        self.0.keys().next().copied().unwrap_or_default()
    }

    /// How many voters there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn map(&self) -> &BTreeMap<NodeId, String> {
        &self.0
    }
}

impl FromStr for Voters {
    type Err = ControllerError;

    fn from_str(s: &str) -> Result<Self> {
        let bad = |reason: String| ControllerError::InvalidVoters {
            input: s.to_string(),
            reason,
        };
        let mut map = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, addr) = part
                .split_once('@')
                .ok_or_else(|| bad(format!("{part:?} is not id@host:port")))?;
            let id: NodeId = id
                .trim()
                .parse()
                .map_err(|_| bad(format!("{id:?} is not a node id")))?;
            let addr = addr.trim();
            let port_ok = addr
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !port_ok {
                return Err(bad(format!("{addr:?} is not host:port")));
            }
            if map.insert(id, addr.to_string()).is_some() {
                return Err(bad(format!("node id {id} appears twice")));
            }
        }
        let v = Voters(map);
        v.check()
            .map_err(|_| bad("no voters or a shared address".into()))?;
        Ok(v)
    }
}

impl fmt::Display for Voters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (id, addr)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{id}@{addr}")?;
        }
        Ok(())
    }
}

/// Whether `addr` (`host:port`) is on loopback: `localhost`, 127.0.0.0/8
/// or `::1`. A name other than `localhost` is not (it could resolve to
/// anything).
pub fn is_loopback(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Who initializes a new cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bootstrap {
    /// The lowest voter id initializes when its storage is empty. Others wait.
    #[default]
    Auto,
    /// This node initializes when its storage is empty.
    Always,
    /// Never initialize: join a cluster that exists (e.g. a voter whose data
    /// directory was lost, so it must not start a second cluster).
    Never,
}

/// A controller node's configuration. [`ControllerConfig::new`] gives the
/// defaults.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// This node's id (`node.id`).
    pub node_id: NodeId,
    /// The quorum (`controller.quorum.voters`).
    pub voters: Voters,
    /// Where to listen; defaults to this node's voter address.
    pub listen_addr: Option<String>,
    /// Where the log, snapshots and identity file live.
    pub data_dir: PathBuf,
    /// Who initializes a new cluster.
    pub bootstrap: Bootstrap,
    /// openraft's cluster name (in its logs).
    pub cluster_name: String,
    /// Shortest election timeout.
    pub election_timeout_min: Duration,
    /// Longest election timeout.
    pub election_timeout_max: Duration,
    /// Leader heartbeat interval.
    pub heartbeat_interval: Duration,
    /// A snapshot is taken after this many entries since the last one.
    pub snapshot_after_entries: u64,
    /// Entries kept in the log behind a snapshot (for slow followers and
    /// `fetch` callers).
    pub entries_kept_after_snapshot: u64,
    /// Most entries in one AppendEntries.
    pub max_entries_per_append: u64,
    /// Connecting to a peer.
    pub connect_timeout: Duration,
    /// A client-facing request (fetch, a redirect hop) round trip.
    pub request_timeout: Duration,
    /// How long a submission may wait to be committed and applied.
    pub submit_timeout: Duration,
    /// Sending or installing a snapshot.
    pub snapshot_timeout: Duration,
    /// An inbound connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// First retry delay after a peer is unreachable; doubles per failure.
    pub backoff_min: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// Largest frame sent or accepted (a snapshot travels in one frame);
    /// also what one connection may hold (one request at a time).
    pub max_frame_bytes: usize,
    /// Most request bytes the port holds at once over all its connections
    /// (taken as they arrive, past each frame's first 64 KiB, until the
    /// request is answered; a frame waits while it is reached). At least
    /// `max_frame_bytes`.
    pub queued_max_request_bytes: usize,
    /// A frame that has started arriving and then gets no byte for this
    /// long is dropped with its connection (and every frame must arrive
    /// whole within `snapshot_timeout`).
    pub frame_timeout: Duration,
    /// How peers prove who they are ([`PeerAuth`]). Without a secret, the
    /// transport must authenticate peers (mutual TLS), or this node's
    /// listen address and every voter must be loopback: anything else is
    /// refused at start.
    pub auth: PeerAuth,
    /// Inbound connections served at once; more are closed on accept.
    pub max_connections: usize,
    /// Submissions waiting for their commit at once; more wait for a slot.
    pub max_inflight_submits: usize,
    /// Log storage options.
    pub log: LogOptions,
}

impl ControllerConfig {
    /// Defaults for node `node_id` of `voters`, storing in `data_dir`.
    pub fn new(node_id: NodeId, voters: Voters, data_dir: impl Into<PathBuf>) -> Self {
        ControllerConfig {
            node_id,
            voters,
            listen_addr: None,
            data_dir: data_dir.into(),
            bootstrap: Bootstrap::Auto,
            cluster_name: "magnetar".into(),
            election_timeout_min: Duration::from_millis(1000),
            election_timeout_max: Duration::from_millis(2000),
            heartbeat_interval: Duration::from_millis(200),
            snapshot_after_entries: 10_000,
            entries_kept_after_snapshot: 1_000,
            max_entries_per_append: 300,
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            submit_timeout: Duration::from_secs(10),
            snapshot_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            max_frame_bytes: 64 << 20,
            queued_max_request_bytes: 256 << 20,
            frame_timeout: Duration::from_secs(10),
            auth: PeerAuth::None,
            max_connections: 256,
            max_inflight_submits: 1024,
            log: LogOptions::default(),
        }
    }

    /// This node's share of the election timeouts `min..max` (ms).
    /// openraft draws one timeout for the life of the process, so two
    /// voters that drew nearly the same one would start every election
    /// together and split the vote every time (a livelock seen with two of
    /// three voters up). Each voter draws from its own part of the range,
    /// by its place among the voters, the first half of it: any two differ
    /// by at least half a part.
    fn election_timeouts(&self, min: u64, max: u64) -> (u64, u64) {
        let n = self.voters.len().max(1) as u64;
        let width = max.saturating_sub(min) / n;
        if width < 2 {
            return (min, max);
        }
        let place = self
            .voters
            .iter()
            .position(|(id, _)| id == self.node_id)
            .unwrap_or(0) as u64;
        let low = min + place * width;
        (low, low + width / 2)
    }

    /// The address this node listens on.
    pub(crate) fn listen_addr(&self) -> String {
        self.listen_addr
            .clone()
            .or_else(|| self.voters.addr(self.node_id).map(str::to_string))
            .unwrap_or_default()
    }

    /// Refuses a port nobody authenticates (no secret, and a transport that
    /// does not authenticate peers) anywhere but on loopback.
    pub(crate) fn check_unauthenticated(&self, transport_authenticates: bool) -> Result<()> {
        if !matches!(self.auth, PeerAuth::None) || transport_authenticates {
            return Ok(());
        }
        let listen = self.listen_addr();
        let off = std::iter::once(listen.as_str())
            .chain(self.voters.iter().map(|(_, a)| a))
            .find(|a| !is_loopback(a));
        match off {
            None => Ok(()),
            Some(addr) => Err(ControllerError::InvalidConfig(format!(
                "a controller port that authenticates nobody (no cluster secret, no mutual TLS) must be on loopback with every voter, and {addr} is not: give the nodes a cluster secret"
            ))),
        }
    }

    /// Checks the values and builds openraft's configuration.
    pub(crate) fn raft_config(&self) -> Result<openraft::Config> {
        if self.voters.addr(self.node_id).is_none() {
            return Err(ControllerError::NotAVoter {
                node_id: self.node_id,
                voters: self.voters.to_string(),
            });
        }
        let ms = |d: Duration| d.as_millis().min(u64::MAX as u128) as u64;
        if self.max_connections == 0 || self.max_inflight_submits == 0 {
            return Err(ControllerError::InvalidConfig(
                "max_connections and max_inflight_submits must be positive".into(),
            ));
        }
        if self.max_frame_bytes < 1024 || self.max_frame_bytes > u32::MAX as usize {
            return Err(ControllerError::InvalidConfig(
                "max_frame_bytes must be between 1 KiB and 4 GiB".into(),
            ));
        }
        if self.queued_max_request_bytes < self.max_frame_bytes {
            return Err(ControllerError::InvalidConfig(format!(
                "queued_max_request_bytes ({}) must be at least max_frame_bytes ({}), or the largest frame could never be read",
                self.queued_max_request_bytes, self.max_frame_bytes
            )));
        }
        if self.frame_timeout.is_zero() {
            return Err(ControllerError::InvalidConfig(
                "frame_timeout must be positive".into(),
            ));
        }
        if self.log.max_entry_bytes + 4096 > self.max_frame_bytes {
            return Err(ControllerError::InvalidConfig(
                "log.max_entry_bytes must leave room in max_frame_bytes".into(),
            ));
        }
        let (election_min, election_max) =
            self.election_timeouts(ms(self.election_timeout_min), ms(self.election_timeout_max));
        openraft::Config {
            cluster_name: self.cluster_name.clone(),
            election_timeout_min: election_min,
            election_timeout_max: election_max,
            heartbeat_interval: ms(self.heartbeat_interval),
            install_snapshot_timeout: ms(self.snapshot_timeout),
            max_payload_entries: self.max_entries_per_append,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_after_entries),
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            purge_batch_size: 1,
            ..openraft::Config::default()
        }
        .validate()
        .map_err(|e| ControllerError::InvalidConfig(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_draw_election_timeouts_from_parts_of_the_range_apart() {
        let v: Voters = "1@a:1,2@b:2,3@c:3".parse().unwrap();
        let parts: Vec<(u64, u64)> = [1, 2, 3]
            .into_iter()
            .map(|id| ControllerConfig::new(id, v.clone(), "/tmp").election_timeouts(1000, 2000))
            .collect();
        assert_eq!(parts, [(1000, 1166), (1333, 1499), (1666, 1832)]);
        for id in [1, 2, 3] {
            ControllerConfig::new(id, v.clone(), "/tmp")
                .raft_config()
                .unwrap();
        }
        let one: Voters = "1@a:1".parse().unwrap();
        assert_eq!(
            ControllerConfig::new(1, one, "/tmp").election_timeouts(1000, 2000),
            (1000, 1500)
        );
    }

    #[test]
    fn voters_parse_and_print() {
        let v: Voters = "1@a:1, 2@b:2,3@[::1]:3".parse().unwrap();
        assert_eq!(v.to_string(), "1@a:1,2@b:2,3@[::1]:3");
        assert_eq!(v.lowest(), 1);
        for bad in [
            "",
            "1@a",
            "x@a:1",
            "1@a:1,1@b:2",
            "1@a:1,2@a:1",
            "1a:1",
            "1@:5",
        ] {
            assert!(bad.parse::<Voters>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn loopback_addresses() {
        for a in [
            "127.0.0.1:1",
            "127.3.0.1:1",
            "[::1]:1",
            "localhost:9",
            "LOCALHOST:9",
        ] {
            assert!(is_loopback(a), "{a}");
        }
        for a in [
            "0.0.0.0:1",
            "10.0.0.1:1",
            "[::]:1",
            "example.com:1",
            "n1:9000",
        ] {
            assert!(!is_loopback(a), "{a}");
        }
    }

    #[test]
    fn an_unauthenticated_port_only_on_loopback() {
        let local = ControllerConfig::new(1, "1@127.0.0.1:1,2@[::1]:2".parse().unwrap(), "/tmp");
        local.check_unauthenticated(false).unwrap();
        let mut wide = local.clone();
        wide.listen_addr = Some("0.0.0.0:1".into());
        let e = wide.check_unauthenticated(false).unwrap_err().to_string();
        assert!(
            e.contains("0.0.0.0:1") && e.contains("cluster secret"),
            "{e}"
        );
        wide.check_unauthenticated(true).unwrap();
        let far = ControllerConfig::new(1, "1@127.0.0.1:1,2@10.0.0.2:2".parse().unwrap(), "/tmp");
        assert!(far.check_unauthenticated(false).is_err());
        let mut secret = far.clone();
        secret.auth = PeerAuth::Secret(crate::ClusterSecret::new(vec![7; 32]).unwrap());
        secret.check_unauthenticated(false).unwrap();
    }

    #[test]
    fn the_budget_holds_the_largest_frame() {
        let mut c = ControllerConfig::new(1, "1@a:1".parse().unwrap(), "/tmp");
        c.queued_max_request_bytes = c.max_frame_bytes - 1;
        assert!(matches!(
            c.raft_config(),
            Err(ControllerError::InvalidConfig(_))
        ));
    }

    #[test]
    fn node_not_in_voters() {
        let c = ControllerConfig::new(4, "1@a:1".parse().unwrap(), "/tmp/x");
        assert!(matches!(
            c.raft_config(),
            Err(ControllerError::NotAVoter { node_id: 4, .. })
        ));
    }
}
