//! Stalled large requests cannot stop anyone else's: while many
//! connections each announce a 100 MB request, send 60 MB of it and stop
//! (reopened as soon as the broker cuts them off), another client's
//! Metadata on the same address is answered at once, a client on another
//! address still gets its large requests read, and memory stays within the
//! attacking address's share of `queued.max.request.bytes`.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::healthy::Healthy;
use common::{record_batch, BrokerProcess, RawConn};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, ProduceRequest, RequestHeader, ResponseKind, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const ROUND_TRIP: Duration = Duration::from_secs(15);
/// The attack's read timeout: each stalled request is cut off (and
/// reopened) every 3 s.
const READ_TIMEOUT: &str = "socket.request.read.timeout.ms=3000";
/// What each attacking connection announces (`socket.request.max.bytes`).
const ANNOUNCED: i32 = 104_857_600;
/// What it sends of it before stopping.
const SENT: usize = 60 << 20;

/// Connections that each announce a 100 MB Produce, send 60 MB of it and
/// stop, reopened whenever the broker closes them, until dropped.
struct StalledRequests {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Connections opened so far.
    opened: Arc<AtomicU64>,
    /// Request bytes written so far.
    written: Arc<AtomicU64>,
}

impl StalledRequests {
    fn start(broker: SocketAddr, from: IpAddr, connections: usize) -> StalledRequests {
        let opened = Arc::new(AtomicU64::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let chunk: Arc<[u8]> = vec![0x5a; 1 << 20].into();
        let tasks = (0..connections)
            .map(|_| {
                let (opened, written, chunk) = (opened.clone(), written.clone(), chunk.clone());
                tokio::spawn(async move {
                    loop {
                        let Ok(mut s) = connect_from(from, broker).await else {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        };
                        opened.fetch_add(1, Ordering::Relaxed);
                        if stall(&mut s, &chunk, &written).await.is_ok() {
                            // All sent: wait for the broker to cut it off.
                            let mut b = [0u8; 64];
                            while matches!(s.read(&mut b).await, Ok(n) if n > 0) {}
                        }
                    }
                })
            })
            .collect();
        StalledRequests {
            tasks,
            opened,
            written,
        }
    }

    fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

impl Drop for StalledRequests {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A connection to `to` from the local address `from` (any 127.0.0.0/8
/// address is the loopback interface on Linux).
async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// Sends the size prefix, a Produce header and `SENT` bytes of the body.
async fn stall(s: &mut TcpStream, chunk: &[u8], written: &AtomicU64) -> std::io::Result<()> {
    let mut head = ANNOUNCED.to_be_bytes().to_vec();
    let mut header = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(9)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("stalled")))
        .encode(&mut header, ApiKey::Produce.request_header_version(9))
        .unwrap();
    head.extend_from_slice(&header);
    s.write_all(&head).await?;
    let mut sent = 0;
    while sent < SENT {
        s.write_all(chunk).await?;
        sent += chunk.len();
        written.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
    Ok(())
}

fn local(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// Milliseconds, sorted, and their median.
fn summary(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], samples[samples.len() - 1])
}

/// `stalled` connections from 127.0.0.1 attack with the default budget
/// (512 MiB, more than 12 x 60 MB hold) while another client on
/// 127.0.0.1 asks for Metadata every 50 ms; the attack runs until every
/// attacking connection was cut off and reopened twice.
async fn metadata_is_answered_during(stalled: usize) {
    let broker = BrokerProcess::start(&[READ_TIMEOUT]);
    let b = broker.bootstrap();
    let mut healthy = Healthy::start(&b, "healthy").await;
    healthy.round_trip("start", ROUND_TRIP).await;
    let mut probe = RawConn::connect(broker.addr).await;
    let metadata = || MetadataRequest::default().with_topics(Some(vec![]));
    probe.call(ApiKey::Metadata, 12, metadata()).await;
    let rss_before = broker.status_kb("VmRSS");

    let attack = StalledRequests::start(broker.addr, local(1), stalled);
    // The attack has taken all it can (the address's share, 224 MiB)
    // before the measurement starts.
    common::eventually(
        Duration::from_secs(60),
        "the attack to send 224 MiB",
        || {
            let done = attack.written() >= 224 << 20;
            async move { done.then_some(()) }
        },
    )
    .await;
    let mut samples = Vec::new();
    let mut fresh = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let rounds = 3 * stalled as u64;
    while attack.opened() < rounds || samples.len() < 100 {
        assert!(
            Instant::now() < deadline,
            "the attack did not reconnect: {} connections",
            attack.opened()
        );
        let t = Instant::now();
        let ResponseKind::Metadata(r) = probe.call(ApiKey::Metadata, 12, metadata()).await else {
            panic!("not a Metadata response")
        };
        samples.push(t.elapsed());
        assert!(r.brokers.len() == 1, "{r:?}");
        if samples.len() % 10 == 0 {
            // A new connection is let in and served too.
            let t = Instant::now();
            let mut c = RawConn::connect(broker.addr).await;
            c.call(ApiKey::Metadata, 12, metadata()).await;
            fresh.push(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    healthy
        .round_trip("while stalled requests reconnect", ROUND_TRIP)
        .await;
    let peak = broker.status_kb("VmHWM");
    let opened = attack.opened();
    drop(attack);
    healthy.round_trip("after the attack", ROUND_TRIP).await;

    let n = samples.len();
    let (median, max) = summary(&mut samples);
    let (fresh_median, fresh_max) = summary(&mut fresh);
    println!(
        "{stalled} stalled requests, {opened} connections: Metadata median {median:?}, max {max:?} \
         over {n}; on new connections median {fresh_median:?}, max {fresh_max:?}; \
         RSS {rss_before} kB before, peak {peak} kB"
    );
    // The bound is 100 ms; answers take under 1 ms here. The
    // median must meet it. Single answers can lose their core to the
    // attack's bursts (every 3 s, up to 50 connections reopen and push up
    // to 224 MiB, on the same 2 cores as this test): up to ~300 ms was
    // seen, so the slowest gets 10x the bound. Before the fix answers
    // waited for stalled requests to be cut off (up to the 3 s read
    // timeout).
    let bound = Duration::from_millis(100);
    assert!(median < bound, "median Metadata answer {median:?}");
    assert!(
        fresh_median < bound,
        "median on a new connection {fresh_median:?}"
    );
    assert!(max < 10 * bound, "slowest Metadata answer {max:?}");
    assert!(
        fresh_max < 10 * bound,
        "slowest on a new connection {fresh_max:?}"
    );
    // The attacking address holds at most its share (half of 7/8 of 512
    // MiB) of the request budget.
    assert!(
        peak < rss_before + 300 * 1024,
        "peak RSS {peak} kB (was {rss_before} kB before the attack)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn twelve_stalled_100mb_requests_do_not_delay_metadata() {
    metadata_is_answered_during(12).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_stalled_100mb_requests_do_not_delay_metadata() {
    metadata_is_answered_during(50).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_address_gets_its_large_requests_read() {
    let broker = BrokerProcess::start(&[READ_TIMEOUT]);
    let b = broker.bootstrap();
    let _topic = Healthy::start(&b, "big").await;
    let attack = StalledRequests::start(broker.addr, local(2), 50);
    common::eventually(
        Duration::from_secs(60),
        "the attack to send 224 MiB",
        || {
            let done = attack.written() >= 224 << 20;
            async move { done.then_some(()) }
        },
    )
    .await;
    // 900 KiB produce requests (large: read in the shared pool) from
    // 127.0.0.1 while 127.0.0.2 stalls 50 of them.
    let value = vec![7u8; 900 << 10];
    let mut conn = RawConn::connect(broker.addr).await;
    let mut samples = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while attack.opened() < 100 || samples.len() < 20 {
        assert!(Instant::now() < deadline, "the attack did not reconnect");
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("big")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(record_batch(&[&value])))])]);
        let t = Instant::now();
        let ResponseKind::Produce(r) = conn.call(ApiKey::Produce, 9, req).await else {
            panic!("not a Produce response")
        };
        samples.push(t.elapsed());
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let n = samples.len();
    let (median, max) = summary(&mut samples);
    println!("900 KiB produce from another address: median {median:?}, max {max:?} over {n}");
    // Before, they waited for the stalled requests to be cut off (3 s).
    assert!(median < Duration::from_millis(200), "median {median:?}");
    assert!(max < Duration::from_secs(1), "slowest {max:?}");
}
