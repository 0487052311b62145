//! Who may talk to a 3-node quorum on loopback: strangers with no
//! handshake, peers with a wrong secret, and peers with the secret that
//! send Raft RPCs in another node's name are refused; the quorum keeps its
//! leader and its log.

mod common;

use std::time::Duration;

use common::{fast, secret, set, Cluster, DEADLINE};
use controller::probe::{bare_fetch, bare_submit, bare_vote, Probe};
use controller::transport::TcpTransport;
use controller::{
    ClientOptions, ClusterSecret, ControllerClient, ControllerConfig, ControllerError, Fetched,
    KvMap, PeerAuth,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `frame` on a new connection to `addr`; what came back before the
/// node closed it.
async fn answer_to(addr: &str, frame: &[u8]) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The node may close before taking everything: that is a refusal too.
    let _ = s.write_all(frame).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(DEADLINE, s.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "{addr} did not close the connection");
    got
}

fn records(f: Fetched<controller::KvRecord>) -> usize {
    match f {
        Fetched::Records { records, .. } => records.len(),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_cluster_gets_in() {
    let mut c = Cluster::start(3, fast).await;
    let leader = c.leader().await;
    let client = c.client();
    let last = client.submit(set("orders", "live")).await.unwrap().index;
    c.converged(last).await;
    let term = c.node(leader).status().term;
    let addr = |id: u64| c.voters.addr(id).unwrap().to_string();

    // No handshake: a submission, a fetch and votes are answered by
    // nothing but a closed connection.
    let forged = bare_submit::<KvMap>(set("orders", "deleted"));
    for id in 1..=3 {
        assert!(answer_to(&addr(id), &forged).await.is_empty());
        assert!(answer_to(&addr(id), &bare_fetch::<KvMap>(0, 1000))
            .await
            .is_empty());
        for t in 1..20 {
            let vote = bare_vote::<KvMap>(term + t, 3, u64::MAX / 2);
            assert!(answer_to(&addr(id), &vote).await.is_empty());
        }
    }

    // The wrong secret: refused before anything is sent.
    let wrong = PeerAuth::Secret(ClusterSecret::new(vec![0x55; 32]).unwrap());
    for id in 1..=3 {
        let e = Probe::<KvMap>::connect(&TcpTransport, &addr(id), &wrong, Some(2))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("could not prove"), "{e}");
        let e = Probe::<KvMap>::connect(&TcpTransport, &addr(id), &PeerAuth::None, Some(2))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("requires the cluster secret"), "{e}");
    }
    let mut opts = ClientOptions::from(&c.config(1));
    opts.auth = wrong;
    opts.submit_timeout = Duration::from_secs(1);
    let outsider = ControllerClient::<KvMap>::new(c.voters.clone(), opts);
    let e = outsider.submit(set("orders", "deleted")).await.unwrap_err();
    assert!(matches!(e, ControllerError::Timeout { .. }), "{e}");
    let e = outsider
        .fetch(leader, 0, 1000)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("could not prove"), "{e}");

    // The secret, but Raft RPCs in a name the connection is not, or from a
    // node that is no voter: the connection is closed unanswered.
    let follower = (1..=3).find(|&i| i != leader).unwrap();
    let other = (1..=3).find(|&i| i != leader && i != follower).unwrap();
    let auth = secret();
    for (node, candidate) in [
        (Some(9), 9),
        (Some(other), leader),
        (None, other),
        (Some(follower), follower),
    ] {
        let mut p = Probe::<KvMap>::connect(&TcpTransport, &addr(follower), &auth, node)
            .await
            .unwrap();
        let r = p.vote(term + 100, candidate, u64::MAX / 2).await;
        assert!(r.is_err(), "node {node:?} voting for {candidate}: {r:?}");
    }
    // A broker-only node (not a voter) may read the log.
    let mut reader = Probe::<KvMap>::connect(&TcpTransport, &addr(follower), &auth, Some(9))
        .await
        .unwrap();
    assert_eq!(records(reader.fetch(0, 1000).await.unwrap()), 1);

    // Nothing moved: the same leader in the same term, the same log.
    for id in 1..=3 {
        let s = c.node(id).status();
        assert_eq!((s.term, s.leader), (term, Some(leader)), "node {id}");
        assert_eq!(c.node(id).read(|s| s.entries["orders"].clone()), "live");
    }
    let next = client.submit(set("after", "1")).await.unwrap().index;
    c.converged(next).await;
    for id in 1..=3 {
        c.stop(id).await;
    }
}

fn plaintext(cfg: &mut ControllerConfig) {
    fast(cfg);
    cfg.auth = PeerAuth::None;
}

/// Without a secret (and no mutual TLS) a quorum works on loopback only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_secret_only_on_loopback() {
    let mut c = Cluster::start(3, plaintext).await;
    let s = c.client().submit(set("k", "v")).await.unwrap();
    c.converged(s.index).await;
    for id in 1..=3 {
        c.stop(id).await;
    }

    let dir = tempfile::tempdir().unwrap();
    let voters = "1@127.0.0.1:1,2@192.0.2.1:9093".parse().unwrap();
    let cfg = ControllerConfig::new(1, voters, dir.path());
    let err = controller::Controller::start(cfg, KvMap::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, ControllerError::InvalidConfig(ref m) if m.contains("192.0.2.1:9093") && m.contains("cluster secret")),
        "{err}"
    );
}
