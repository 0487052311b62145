//! The controller port against hostile peers (issue 33), on 3-node
//! clusters of real `magnetar broker` processes in each authenticated
//! controller mode (SASL_PLAINTEXT, SASL_SSL, SSL): a forged Submit
//! deleting a real topic, an anonymous Fetch of the metadata log from
//! index 0 and a flood of Votes with rising terms, from peers that skip
//! the handshake, know a wrong secret, or (SSL) have no client
//! certificate, are all refused, while a well-behaved CreateTopics is
//! answered in its normal time; the topic survives and the attacker's
//! terms never reach the quorum. And frames announcing 64 MiB, from 40
//! strangers and from peers that know the secret, hold bounded memory.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::metadata_machine::{MetadataBatch, MetadataMachine};
use broker::metadata_records::MetadataRecord;
use common::cluster::{metadata, Cluster, FAST_SETTINGS};
use common::{client_config, RawConn};
use controller::probe::{bare_fetch, bare_submit, bare_vote, Probe};
use controller::tls::TlsTransport;
use controller::transport::{TcpTransport, Transport};
use controller::{ClusterSecret, PeerAuth};
use kafka_protocol::messages::{ApiKey, DescribeQuorumRequest, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DEADLINE: Duration = Duration::from_secs(30);

/// How long the attacks go on.
const ATTACK: Duration = Duration::from_secs(4);

/// What a well-behaved CreateTopics may take, attack or not.
const NORMAL: Duration = Duration::from_secs(5);

/// The controller address of every node, node 1 first.
fn controllers(c: &Cluster) -> Vec<String> {
    c.voters
        .split(',')
        .map(|v| v.split_once('@').unwrap().1.to_string())
        .collect()
}

/// TLS that verifies the server against the test CA and presents no
/// certificate: what anyone who trusts the CA can open.
fn tls_without_certificate(pki: &Path) -> TlsTransport {
    let settings = broker::security::tls::TlsSettings {
        keystore: pki.join("server.pem"),
        key: None,
        truststore: Some(pki.join("ca.pem")),
        client_auth: broker::security::tls::ClientAuth::None,
        tls12: false,
        principal_rules: Default::default(),
    };
    let (server, client) = broker::security::tls::server_only(&settings).unwrap();
    TlsTransport::server_only(server, client)
}

/// Sends `frame` on a new connection over `t` and asserts the node closes
/// it without an answer (or refuses the connection outright). Plain bytes
/// to a TLS port (`tls_port`) may get a TLS alert record (7 bytes,
/// content type 21) back, and nothing else.
async fn unanswered(t: &dyn Transport, addr: &str, frame: &[u8], tls_port: bool) {
    let mut conn = match tokio::time::timeout(DEADLINE, t.connect(addr)).await {
        Ok(Ok(c)) => c,
        // Refused in the TLS handshake.
        Ok(Err(_)) => return,
        Err(_) => panic!("connecting to {addr} hung"),
    };
    // The node may close before taking everything: a refusal too.
    let _ = conn.write_all(frame).await;
    let _ = conn.flush().await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(DEADLINE, conn.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "{addr} did not close the connection");
    let alert = tls_port && got.len() == 7 && got[0] == 0x15;
    assert!(
        got.is_empty() || alert,
        "{addr} answered {} bytes: {got:?}",
        got.len()
    );
}

/// The Raft term of the quorum's leader (DescribeQuorum's leader epoch).
async fn leader_epoch(kafka: &str) -> i32 {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let mut conn = RawConn::connect(kafka.parse().unwrap()).await;
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    match conn.call(ApiKey::DescribeQuorum, 0, req).await {
        ResponseKind::DescribeQuorum(r) => r.topics[0].partitions[0].leader_epoch,
        other => panic!("{other:?}"),
    }
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    client_config(bootstrap).create().unwrap()
}

/// Creates `topic` and waits until every node of `c` lists it; its id.
async fn create_everywhere(c: &Cluster, topic: &str) -> uuid::Uuid {
    let r = admin(&c.addr(1))
        .create_topics(
            &[NewTopic::new(topic, 3, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let mut id = None;
    for n in 1..=3 {
        let addr = c.addr(n);
        let seen = common::eventually(DEADLINE, &format!("{topic} on node {n}"), || {
            let addr = addr.clone();
            async move { topic_id(&addr, topic).await }
        })
        .await;
        assert!(id.is_none_or(|i| i == seen), "one id everywhere");
        id = Some(seen);
    }
    id.unwrap()
}

async fn topic_id(kafka: &str, topic: &str) -> Option<uuid::Uuid> {
    metadata(kafka)
        .await
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic) && t.error_code == 0)
        .map(|t| t.topic_id)
}

/// CreateTopics through a Kafka client every few hundred milliseconds
/// until `stop`: each must succeed within [`NORMAL`]. How many were made.
async fn well_behaved(bootstrap: String, stop: Instant) -> usize {
    let admin = admin(&bootstrap);
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let mut made = 0;
    while Instant::now() < stop {
        let name = format!("meanwhile-{made}");
        let started = Instant::now();
        let r = admin
            .create_topics(
                &[NewTopic::new(&name, 1, TopicReplication::Fixed(1))],
                &opts,
            )
            .await
            .unwrap();
        let took = started.elapsed();
        assert!(r[0].is_ok(), "{name}: {r:?}");
        assert!(took < NORMAL, "{name} took {took:?}");
        made += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    made
}

/// Starts a cluster in `protocol` and runs every attack against it.
async fn hostile_peers_are_refused(protocol: &str) {
    let pki = tempfile::tempdir().unwrap();
    common::pki::make_pki(pki.path());
    let [keystore, truststore] = common::pki::store_settings(pki.path());
    let mode = format!("controller.security.protocol={protocol}");
    let mut settings = FAST_SETTINGS.to_vec();
    settings.push(&mode);
    if protocol != "SASL_PLAINTEXT" {
        settings.extend([keystore.as_str(), truststore.as_str()]);
    }
    let c = Cluster::start(3, &settings);
    let id = create_everywhere(&c, "orders").await;
    let epoch = leader_epoch(&c.addr(1)).await;
    let addrs = controllers(&c);

    // The ways in a stranger has: plain TCP, and where the port speaks
    // TLS, a TLS session of its own (no client certificate).
    let mut ways: Vec<(&str, Arc<dyn Transport>)> = vec![("tcp", Arc::new(TcpTransport))];
    if protocol != "SASL_PLAINTEXT" {
        ways.push(("tls", Arc::new(tls_without_certificate(pki.path()))));
    }
    let wrong = PeerAuth::Secret(ClusterSecret::new(vec![0x5a; 32]).unwrap());

    let forged: MetadataRecord = serde_json::from_value(serde_json::json!(
        {"type": "topic_deleted", "id": id.to_string(), "name": "orders"}
    ))
    .unwrap();
    let forged = bare_submit::<MetadataMachine>(MetadataBatch(vec![forged]));
    let fetch = bare_fetch::<MetadataMachine>(0, 10_000);

    let tls_port = protocol != "SASL_PLAINTEXT";
    let stop = Instant::now() + ATTACK;
    let meanwhile = tokio::spawn(well_behaved(c.addr(2), stop));
    // Votes with terms far above the quorum's, rising, and logs that
    // claim to be far ahead: granted, they would depose every leader.
    let mut term = epoch as u64 + 1000;
    let mut rounds = 0;
    while Instant::now() < stop {
        for (n, addr) in addrs.iter().enumerate() {
            for (how, t) in &ways {
                let t = t.as_ref();
                let candidate = (n as u64 + 1) % 3 + 1;
                let vote = bare_vote::<MetadataMachine>(term, candidate, 1 << 40);
                unanswered(t, addr, &vote, tls_port).await;
                if rounds == 0 {
                    unanswered(t, addr, &forged, tls_port).await;
                    unanswered(t, addr, &fetch, tls_port).await;
                }
                // A peer that speaks the protocol but cannot prove the
                // secret (or, over mutual TLS, has no certificate) gets
                // no further than the handshake.
                for auth in [&wrong, &PeerAuth::None] {
                    let r = Probe::<MetadataMachine>::connect(t, addr, auth, Some(candidate)).await;
                    assert!(r.is_err(), "{protocol} over {how}: {auth:?} got in");
                }
                term += 1;
            }
        }
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let made = meanwhile.await.unwrap();
    assert!(made >= 3, "only {made} CreateTopics during the attack");

    // The topic is still there, with its id, on every node; the attacker's
    // terms never reached the quorum; metadata changes still go through.
    for n in 1..=3 {
        assert_eq!(topic_id(&c.addr(n), "orders").await, Some(id), "node {n}");
        let now = leader_epoch(&c.addr(n)).await;
        assert!(now < epoch + 1000, "node {n}: epoch {epoch} became {now}");
    }
    create_everywhere(&c, "after").await;
    c.wait_for_log(1, "controller: refusing connection", DEADLINE);
}

#[tokio::test(flavor = "multi_thread")]
async fn sasl_plaintext_refuses_hostile_peers() {
    hostile_peers_are_refused("SASL_PLAINTEXT").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sasl_ssl_refuses_hostile_peers() {
    hostile_peers_are_refused("SASL_SSL").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ssl_refuses_hostile_peers() {
    hostile_peers_are_refused("SSL").await;
}

/// Writes a frame header announcing `announced` bytes, then up to `send`
/// bytes of body in 1 MiB pieces, stopping when the node closes the
/// connection or stops reading for 2 s. How much was written.
async fn big_frame(
    conn: &mut controller::transport::BoxConn,
    announced: u32,
    send: usize,
) -> usize {
    let piece = vec![0xabu8; 1 << 20];
    if conn.write_all(&announced.to_be_bytes()).await.is_err() {
        return 0;
    }
    let mut sent = 0;
    while sent < send {
        let n = piece.len().min(send - sent);
        match tokio::time::timeout(Duration::from_secs(2), conn.write_all(&piece[..n])).await {
            Ok(Ok(())) => sent += n,
            Ok(Err(_)) | Err(_) => break,
        }
    }
    sent
}

/// The node's resident set now, in bytes.
fn rss(c: &mut Cluster, n: usize) -> u64 {
    c.node(n).status_kb("VmRSS") * 1024
}

/// 40 strangers announcing 64 MiB frames and sending 60 MB each are cut
/// off at the size prefix; peers that know the secret may send such
/// frames, but all of them together hold at most
/// `controller.queued.max.request.bytes` (here 64 MiB); the cluster keeps
/// answering throughout.
#[tokio::test(flavor = "multi_thread")]
async fn huge_controller_frames_hold_bounded_memory() {
    const BUDGET: u64 = 64 << 20;
    let budget = format!("controller.queued.max.request.bytes={BUDGET}");
    let mut settings = FAST_SETTINGS.to_vec();
    settings.push(&budget);
    let mut c = Cluster::start(3, &settings);
    create_everywhere(&c, "orders").await;
    let addr = controllers(&c)[0].clone();
    let peak_before = c.node(1).peak_rss_bytes();
    let rss_before = rss(&mut c, 1);

    // Strangers: refused at the first 4 bytes, long before 60 MB.
    let strangers: Vec<_> = (0..40)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let mut conn = TcpTransport.connect(&addr).await.unwrap();
                big_frame(&mut conn, 64 << 20, 60_000_000).await
            })
        })
        .collect();
    for s in strangers {
        let sent = s.await.unwrap();
        assert!(sent < 60_000_000, "a stranger sent its whole 60 MB");
    }
    let grown = c.node(1).peak_rss_bytes().saturating_sub(peak_before);
    assert!(
        grown < 32 << 20,
        "40 strangers grew the node's peak RSS by {} MiB",
        grown >> 20
    );

    // Peers with the secret (as broker-only node 9).
    let path = c.secret.split_once('=').unwrap().1.to_string();
    let auth = PeerAuth::Secret(ClusterSecret::from_file(Path::new(&path)).unwrap());
    // Over the frame limit: closed at the size prefix.
    let mut p = Probe::<MetadataMachine>::connect(&TcpTransport, &addr, &auth, Some(9))
        .await
        .unwrap();
    p.send_raw(&(1u32 << 30).to_be_bytes()).await.unwrap();
    let closed = p.fetch(0, 1).await;
    assert!(closed.is_err(), "a 1 GiB frame was read: {closed:?}");

    // Eight 64 MiB frames of which 60 MB arrive, then nothing: 480 MB
    // sent, at most the budget held.
    let stop = Instant::now() + ATTACK + Duration::from_secs(2);
    let meanwhile = tokio::spawn(well_behaved(c.addr(2), stop));
    let mut holders = Vec::new();
    for _ in 0..8 {
        let (addr, auth) = (addr.clone(), auth.clone());
        holders.push(tokio::spawn(async move {
            let mut p = Probe::<MetadataMachine>::connect(&TcpTransport, &addr, &auth, Some(9))
                .await
                .unwrap();
            let piece = vec![0xcdu8; 1 << 20];
            let _ = p.send_raw(&(64u32 << 20).to_be_bytes()).await;
            for _ in 0..57 {
                let w = tokio::time::timeout(Duration::from_secs(2), p.send_raw(&piece)).await;
                if !matches!(w, Ok(Ok(()))) {
                    break;
                }
            }
            // Hold the connection (and whatever the node took) until the end.
            tokio::time::sleep_until((stop + Duration::from_secs(1)).into()).await;
            drop(p);
        }));
    }
    let mut highest = 0;
    while Instant::now() < stop {
        highest = highest.max(rss(&mut c, 1));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let held = highest.saturating_sub(rss_before);
    let peak = c.node(1).peak_rss_bytes().saturating_sub(peak_before);
    assert!(
        held < BUDGET + (32 << 20) && peak < BUDGET + (32 << 20),
        "8 x 60 MB held {} MiB (peak {} MiB more) with a budget of {} MiB",
        held >> 20,
        peak >> 20,
        BUDGET >> 20
    );
    let made = meanwhile.await.unwrap();
    assert!(made >= 3, "only {made} CreateTopics during the attack");
    for h in holders {
        h.await.unwrap();
    }
    create_everywhere(&c, "after").await;
}
