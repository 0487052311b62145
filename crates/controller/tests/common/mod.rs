//! Helpers for in-process clusters on loopback.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use controller::transport::{Listener, TcpListener, TcpTransport};
use controller::{
    ClientOptions, ClusterSecret, Controller, ControllerClient, ControllerConfig, KvMap, KvRecord,
    PeerAuth, ServerState, Voters,
};
use tokio::time::Instant;

/// Polls `f` until it gives a value, failing the test after `timeout`.
pub async fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn set(key: &str, value: &str) -> KvRecord {
    KvRecord::Set {
        key: key.into(),
        value: value.into(),
    }
}

pub struct Cluster {
    pub dirs: Vec<tempfile::TempDir>,
    pub voters: Voters,
    pub nodes: Vec<Option<Controller<KvMap>>>,
    pub tweak: fn(&mut ControllerConfig),
}

pub const DEADLINE: Duration = Duration::from_secs(30);

/// The test clusters' secret.
pub fn secret() -> PeerAuth {
    PeerAuth::Secret(ClusterSecret::new(b"a test cluster's secret, 32 bytes+".to_vec()).unwrap())
}

pub fn fast(c: &mut ControllerConfig) {
    c.election_timeout_min = Duration::from_millis(300);
    c.election_timeout_max = Duration::from_millis(600);
    c.heartbeat_interval = Duration::from_millis(60);
    c.backoff_min = Duration::from_millis(20);
    c.backoff_max = Duration::from_millis(200);
    c.connect_timeout = Duration::from_millis(500);
}

impl Cluster {
    /// Starts `n` nodes on free loopback ports, each in its own temp dir.
    pub async fn start(n: usize, tweak: fn(&mut ControllerConfig)) -> Cluster {
        let mut listeners = Vec::new();
        for _ in 0..n {
            listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let voters = Voters::new(
            listeners
                .iter()
                .enumerate()
                .map(|(i, l)| (i as u64 + 1, l.local_addr().unwrap())),
        )
        .unwrap();
        let mut c = Cluster {
            dirs: (0..n).map(|_| tempfile::tempdir().unwrap()).collect(),
            voters,
            nodes: (0..n).map(|_| None).collect(),
            tweak,
        };
        for (i, l) in listeners.into_iter().enumerate() {
            c.start_node(i as u64 + 1, Some(Box::new(l))).await.unwrap();
        }
        c
    }

    pub fn config(&self, id: u64) -> ControllerConfig {
        let mut cfg =
            ControllerConfig::new(id, self.voters.clone(), self.dirs[id as usize - 1].path());
        cfg.auth = secret();
        (self.tweak)(&mut cfg);
        cfg
    }

    pub async fn start_node(
        &mut self,
        id: u64,
        listener: Option<Box<dyn Listener>>,
    ) -> controller::Result<()> {
        let node = Controller::start_with(
            self.config(id),
            KvMap::with_history(),
            Arc::new(TcpTransport),
            listener,
        )
        .await?;
        self.nodes[id as usize - 1] = Some(node);
        Ok(())
    }

    pub fn node(&self, id: u64) -> &Controller<KvMap> {
        self.nodes[id as usize - 1].as_ref().expect("node running")
    }

    pub async fn stop(&mut self, id: u64) {
        if let Some(n) = self.nodes[id as usize - 1].take() {
            n.shutdown().await;
        }
    }

    /// Polls `f` until it gives a value; on timeout, fails with every
    /// running node's status.
    pub async fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {DEADLINE:?} waiting for {what}:\n{}",
                self.statuses()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every running node's status, for failure messages.
    pub fn statuses(&self) -> String {
        self.running()
            .map(|n| format!("{:?}", n.status()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn running(&self) -> impl Iterator<Item = &Controller<KvMap>> {
        self.nodes.iter().flatten()
    }

    pub fn client(&self) -> ControllerClient<KvMap> {
        ControllerClient::new(self.voters.clone(), ClientOptions::from(&self.config(1)))
    }

    /// The one leader all running nodes agree on.
    pub async fn leader(&self) -> u64 {
        eventually("one agreed leader", DEADLINE, || {
            let mut leaders = self.running().map(|n| n.status().leader);
            let first = leaders.next()??;
            let agreed = leaders.all(|l| l == Some(first));
            let is_running = self.nodes[first as usize - 1].is_some();
            let leads = is_running && self.node(first).status().state == ServerState::Leader;
            (agreed && leads).then_some(first)
        })
        .await
    }

    /// Waits until every running node has applied `index` and holds the same
    /// state and history.
    pub async fn converged(&self, index: u64) -> KvMap {
        for n in self.running() {
            n.wait_applied(index, DEADLINE).await.unwrap();
        }
        let states: Vec<KvMap> = self.running().map(|n| n.read(|s| s.clone())).collect();
        for s in &states[1..] {
            assert_eq!(s.entries, states[0].entries);
        }
        states[0].clone()
    }
}
