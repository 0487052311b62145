//! A deterministic simulation (turmoil) of a 3-node quorum under seeded
//! partitions, message loss and crash/restarts, checking Raft's safety:
//! at most one leader per term, no committed entry lost or changed, and all
//! nodes converging once the network heals.
//!
//! The fault schedule, message delays/loss and election timeouts come from
//! the seed. Storage runs inline (`IoMode::Inline`) so no OS thread takes
//! part. What stays unseeded is tokio's own `select!` branch order (seeded
//! only in `--cfg tokio_unstable` builds), so two runs of a seed may
//! interleave tasks differently; the checks are invariants, not traces.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use controller::transport::{BoxConn, BoxFuture, Listener, Transport};
use controller::{
    ClientOptions, ClusterSecret, Controller, ControllerConfig, IoMode, KvMap, KvRecord, PeerAuth,
    ServerState, Voters,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PORT: u16 = 9000;
const NODES: u64 = 3;

struct SimTransport;

struct SimListener(turmoil::net::TcpListener);

fn host_port(addr: &str) -> io::Result<(String, u16)> {
    let (h, p) = addr
        .rsplit_once(':')
        .ok_or_else(|| io::Error::other("no port"))?;
    let p = p.parse().map_err(|_| io::Error::other("bad port"))?;
    Ok((h.to_string(), p))
}

impl Listener for SimListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, String)>> {
        Box::pin(async move {
            let (s, peer) = self.0.accept().await?;
            Ok((Box::new(s) as BoxConn, peer.to_string()))
        })
    }
    fn local_addr(&self) -> io::Result<String> {
        self.0.local_addr().map(|a| a.to_string())
    }
}

impl Transport for SimTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>> {
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect(host_port(addr)?).await?;
            Ok(Box::new(s) as BoxConn)
        })
    }
    fn bind<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let l = turmoil::net::TcpListener::bind(host_port(addr)?).await?;
            Ok(Box::new(SimListener(l)) as Box<dyn Listener>)
        })
    }
}

/// What the hosts report as they run.
#[derive(Default)]
struct Observed {
    /// term → the nodes seen leading in it.
    leaders: BTreeMap<u64, BTreeSet<u64>>,
    /// index → the record some node applied there.
    applied: BTreeMap<u64, KvRecord>,
    /// node → its applied history as last seen.
    histories: BTreeMap<u64, Vec<(u64, KvRecord)>>,
    /// (index, record) the client had acknowledged.
    acked: Vec<(u64, KvRecord)>,
    /// Set once the faults are over and the client should stop.
    stop_client: bool,
    client_done: bool,
    violations: Vec<String>,
    /// node → its snapshot index as last seen.
    snapshots: BTreeMap<u64, Option<u64>>,
}

fn host(id: u64) -> String {
    format!("n{id}")
}

fn voters() -> Voters {
    Voters::new((1..=NODES).map(|i| (i, format!("{}:{PORT}", host(i))))).unwrap()
}

fn config(id: u64, dir: PathBuf) -> ControllerConfig {
    let mut c = ControllerConfig::new(id, voters(), dir);
    c.listen_addr = Some(format!("0.0.0.0:{PORT}"));
    c.log.io_mode = IoMode::Inline;
    c.election_timeout_min = Duration::from_millis(300);
    c.election_timeout_max = Duration::from_millis(600);
    c.heartbeat_interval = Duration::from_millis(60);
    c.connect_timeout = Duration::from_millis(300);
    c.backoff_min = Duration::from_millis(20);
    c.backoff_max = Duration::from_millis(300);
    c.submit_timeout = Duration::from_secs(3);
    c.snapshot_after_entries = 25;
    c.entries_kept_after_snapshot = 5;
    // The simulated hosts are not loopback: the nodes (and the client)
    // authenticate with a cluster secret, as in production.
    c.auth = PeerAuth::Secret(
        ClusterSecret::new(b"the simulation's cluster secret!!".to_vec()).unwrap(),
    );
    c
}

/// Records what node `id` shows and checks it against what others showed.
fn observe(obs: &RefCell<Observed>, id: u64, node: &Controller<KvMap>) {
    let status = node.status();
    let history = node.read(|s| s.history.clone());
    let mut o = obs.borrow_mut();
    if status.state == ServerState::Leader {
        let set = o.leaders.entry(status.term).or_default();
        set.insert(id);
        if set.len() > 1 {
            let msg = format!("term {} has leaders {set:?}", status.term);
            o.violations.push(msg);
        }
    }
    for (i, r) in &history {
        match o.applied.get(i) {
            Some(seen) if seen != r => {
                let msg = format!("index {i}: node {id} applied {r:?}, another {seen:?}");
                o.violations.push(msg);
            }
            Some(_) => {}
            None => {
                o.applied.insert(*i, r.clone());
            }
        }
    }
    o.histories.insert(id, history);
    o.snapshots.insert(id, status.snapshot_index);
}

async fn run_node(id: u64, dir: PathBuf, obs: Rc<RefCell<Observed>>) -> turmoil::Result {
    let node = Controller::start_with(
        config(id, dir),
        KvMap::with_history(),
        Arc::new(SimTransport),
        None,
    )
    .await?;
    let mut changes = node.status_changes();
    loop {
        observe(&obs, id, &node);
        changes.changed().await?;
    }
}

fn simulate(seed: u64) {
    controller::seed_election_rng(seed);
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .simulation_duration(Duration::from_secs(600))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(15))
        .build();
    let obs = Rc::new(RefCell::new(Observed::default()));
    let dirs: Vec<tempfile::TempDir> = (0..NODES).map(|_| tempfile::tempdir().unwrap()).collect();
    for id in 1..=NODES {
        let dir = dirs[id as usize - 1].path().to_path_buf();
        let obs = obs.clone();
        sim.host(host(id), move || run_node(id, dir.clone(), obs.clone()));
    }
    let client_obs = obs.clone();
    sim.client("client", async move {
        let mut opts = ClientOptions::from(&config(1, PathBuf::new()));
        opts.submit_timeout = Duration::from_secs(4);
        opts.request_timeout = Duration::from_secs(1);
        let client = controller::ControllerClient::<KvMap>::with_transport(
            voters(),
            opts,
            Arc::new(SimTransport),
        );
        let mut n = 0u64;
        while !client_obs.borrow().stop_client {
            let rec = KvRecord::Set {
                key: format!("k{}", n % 40),
                value: format!("v{n}"),
            };
            n += 1;
            if let Ok(s) = client.submit(rec.clone()).await {
                client_obs.borrow_mut().acked.push((s.index, rec));
            }
        }
        client_obs.borrow_mut().client_done = true;
        Ok(())
    });

    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut crashed: Option<u64> = None;
    let mut isolated: Option<u64> = None;
    let mut lossy = false;
    let mut faults = 0;
    let mut restarts = 0;
    // Faults every 400 ms of simulated time for 40 s (ticks are 1 ms).
    for tick in 1..=40_000u64 {
        sim.step().unwrap();
        if tick % 400 != 0 {
            continue;
        }
        faults += 1;
        match rng.gen_range(0..6) {
            0 if isolated.is_none() => {
                let victim = rng.gen_range(1..=NODES);
                for other in (1..=NODES).filter(|&o| o != victim) {
                    sim.partition(host(victim), host(other));
                }
                sim.partition(host(victim), "client");
                isolated = Some(victim);
            }
            1 => {
                if let Some(v) = isolated.take() {
                    for other in (1..=NODES).filter(|&o| o != v) {
                        sim.repair(host(v), host(other));
                    }
                    sim.repair(host(v), "client");
                }
            }
            2 if crashed.is_none() => {
                let victim = rng.gen_range(1..=NODES);
                sim.crash(host(victim));
                crashed = Some(victim);
                restarts += 1;
            }
            3 => {
                if let Some(v) = crashed.take() {
                    sim.bounce(host(v));
                }
            }
            4 => {
                lossy = !lossy;
                sim.set_fail_rate(if lossy { 0.02 } else { 0.0 });
            }
            _ => {}
        }
    }
    // Heal everything, let the client stop, and wait for convergence.
    sim.set_fail_rate(0.0);
    if let Some(v) = isolated.take() {
        for other in (1..=NODES).filter(|&o| o != v) {
            sim.repair(host(v), host(other));
        }
        sim.repair(host(v), "client");
    }
    if let Some(v) = crashed.take() {
        sim.bounce(host(v));
    }
    obs.borrow_mut().stop_client = true;
    let mut converged = false;
    for _ in 0..120_000 {
        sim.step().unwrap();
        let o = obs.borrow();
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
        let top = o.acked.iter().map(|(i, _)| *i).max().unwrap_or(0);
        let hs: Vec<&Vec<(u64, KvRecord)>> = o.histories.values().collect();
        if o.client_done
            && hs.len() == NODES as usize
            && hs.iter().all(|h| h.last().is_some_and(|(i, _)| *i >= top))
            && hs.windows(2).all(|w| w[0] == w[1])
        {
            converged = true;
            break;
        }
    }
    let o = obs.borrow();
    assert!(
        converged,
        "seed {seed}: nodes did not converge: {:?}",
        o.histories.values().map(|h| h.len()).collect::<Vec<_>>()
    );
    assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
    assert!(
        o.acked.len() >= 20,
        "seed {seed}: only {} submissions acknowledged",
        o.acked.len()
    );
    // Every acknowledged record is in the final log at its index.
    let final_log: BTreeMap<u64, &KvRecord> =
        o.histories[&1].iter().map(|(i, r)| (*i, r)).collect();
    for (i, r) in &o.acked {
        assert_eq!(
            final_log.get(i),
            Some(&r),
            "seed {seed}: acknowledged entry {i} lost or changed"
        );
    }
    assert!(o.leaders.len() > 1, "seed {seed}: no failover happened");
    eprintln!(
        "seed {seed}: {} acknowledged, {} entries, leaders by term {:?}, {faults} fault draws, {restarts} crashes, snapshots at {:?}",
        o.acked.len(),
        final_log.len(),
        o.leaders,
        o.snapshots,
    );
}

#[test]
fn raft_stays_safe_under_partitions_loss_and_restarts() {
    for seed in [7, 42, 2024] {
        simulate(seed);
    }
}
