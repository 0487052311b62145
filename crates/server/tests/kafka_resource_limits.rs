//! A hostile client cannot take more than its share: unfinished requests,
//! connection floods and idle connections are bounded, their warnings are
//! rate-limited, and a well-behaved client keeps producing and consuming
//! throughout with nothing lost.

mod common;

use std::time::{Duration, Instant};

use common::healthy::Healthy;
use common::{BrokerProcess, RawConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, FetchRequest, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const ROUND_TRIP: Duration = Duration::from_secs(15);

/// Whether the broker answers ApiVersions on `conn`.
async fn answers(conn: &mut RawConn) -> bool {
    if conn
        .try_send(ApiKey::ApiVersions, 2, ApiVersionsRequest::default())
        .await
        .is_err()
    {
        return false;
    }
    matches!(
        conn.recv(ApiKey::ApiVersions, 2).await,
        Some(ResponseKind::ApiVersions(r)) if r.error_code == 0
    )
}

/// Whether a new connection is admitted and answered.
async fn new_connection_served(addr: std::net::SocketAddr) -> bool {
    match RawConn::try_connect(addr).await {
        Some(mut c) => answers(&mut c).await,
        None => false,
    }
}

/// True if the peer closes (or resets) `stream` within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut b = [0u8; 16];
    matches!(
        tokio::time::timeout(within, stream.read(&mut b)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn unfinished_requests_hold_bounded_memory_and_time_out() {
    let broker = BrokerProcess::start(&[
        "queued.max.request.bytes=67108864",
        "socket.request.read.timeout.ms=3000",
    ]);
    let b = broker.bootstrap();
    let mut healthy = Healthy::start(&b, "healthy").await;
    healthy.round_trip("start", ROUND_TRIP).await;
    let rss_before = broker.status_kb("VmRSS");

    // Twelve connections each announce a 90 MB request, send 1 MB of it
    // and stop: 1.1 GB if the broker reserved what they announced.
    let mut stalled = Vec::new();
    let chunk = vec![7u8; 1 << 20];
    for _ in 0..12 {
        let mut c = RawConn::connect(broker.addr).await;
        c.send_raw(&(90i32 << 20).to_be_bytes()).await.unwrap();
        let _ = c.send_raw(&chunk).await;
        stalled.push(c);
    }
    // The broker keeps serving others meanwhile (they may wait for the
    // request budget until the stalled requests time out, not longer).
    healthy
        .round_trip("twelve stalled 90 MB requests", ROUND_TRIP)
        .await;
    for c in &mut stalled {
        assert!(c.is_closed_by_peer().await, "a stalled request is cut off");
    }
    broker.wait_for_log("did not arrive within");
    healthy
        .round_trip("after the stalled requests", ROUND_TRIP)
        .await;
    let peak = broker.status_kb("VmHWM");
    assert!(
        peak < rss_before + 200 * 1024,
        "peak RSS {peak} kB (was {rss_before} kB before the attack)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_floods_are_refused_and_existing_connections_served() {
    let broker = BrokerProcess::start(&["max.connections=40", "max.connections.per.ip=1000"]);
    let b = broker.bootstrap();
    let mut healthy = Healthy::start(&b, "healthy").await;
    healthy.round_trip("start", ROUND_TRIP).await;
    let mut kept = RawConn::connect(broker.addr).await;
    assert!(answers(&mut kept).await);

    // Fill every remaining slot, then keep knocking.
    let mut flood = Vec::new();
    let mut refused = 0;
    for _ in 0..200 {
        // A refusal may already show as a reset of the connect itself.
        let Ok(mut s) = TcpStream::connect(broker.addr).await else {
            refused += 1;
            continue;
        };
        if closed_within(&mut s, Duration::from_millis(300)).await {
            refused += 1;
        } else {
            flood.push(s);
        }
    }
    assert!(refused >= 150, "only {refused} of 200 refused");
    assert!(
        broker.open_fds() < 40 + 100,
        "{} descriptors open",
        broker.open_fds()
    );
    // Connections made before the flood are served as before.
    assert!(answers(&mut kept).await);
    healthy.round_trip("a connection flood", ROUND_TRIP).await;
    broker.wait_for_log("refusing connection");
    // Once the flood leaves, new clients get in again.
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if new_connection_served(broker.addr).await {
            break;
        }
        assert!(Instant::now() < deadline, "new clients never got in again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_per_address_are_capped() {
    let broker = BrokerProcess::start(&["max.connections.per.ip=3"]);
    let mut first = Vec::new();
    for _ in 0..3 {
        let mut c = RawConn::connect(broker.addr).await;
        assert!(answers(&mut c).await);
        first.push(c);
    }
    // The fourth is refused (the reset may already fail the connect).
    if let Ok(mut fourth) = TcpStream::connect(broker.addr).await {
        assert!(closed_within(&mut fourth, Duration::from_secs(5)).await);
    }
    for c in &mut first {
        assert!(answers(c).await, "the first three are served");
    }
    first.pop();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if new_connection_served(broker.addr).await {
            break;
        }
        assert!(Instant::now() < deadline, "a freed place is never reused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_are_closed_busy_ones_are_not() {
    let broker = BrokerProcess::start(&["connections.max.idle.ms=1000"]);
    let mut idle = RawConn::connect(broker.addr).await;
    let mut busy = RawConn::connect(broker.addr).await;
    let started = Instant::now();
    // The busy one sends a request every 300 ms for 3 s.
    while started.elapsed() < Duration::from_secs(3) {
        assert!(answers(&mut busy).await, "a busy connection stays open");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(idle.is_closed_by_peer().await, "the idle one was closed");
}

#[tokio::test(flavor = "multi_thread")]
async fn warnings_about_bad_connections_are_rate_limited() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    let mut healthy = Healthy::start(&b, "healthy").await;
    // 500 connections each sending a negative size prefix.
    for _ in 0..500 {
        let mut c = RawConn::connect(broker.addr).await;
        c.send_raw(&(-5i32).to_be_bytes()).await.unwrap();
        assert!(c.is_closed_by_peer().await);
    }
    healthy.round_trip("500 bad connections", ROUND_TRIP).await;
    // The next warning let through (in a later period) says how many were
    // held back.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !broker.log_text().contains("suppressed") {
        assert!(Instant::now() < deadline, "no count of suppressed warnings");
        let mut c = RawConn::connect(broker.addr).await;
        c.send_raw(&(-5i32).to_be_bytes()).await.unwrap();
        assert!(c.is_closed_by_peer().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lines = broker
        .log_text()
        .lines()
        .filter(|l| l.contains("negative frame size"))
        .count();
    assert!(lines < 150, "{lines} warning lines for 501 bad connections");
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_fetch_readers_do_not_hold_responses_in_memory() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    let mut healthy = Healthy::start(&b, "healthy").await;
    // 48 MiB of incompressible data in one partition.
    let _ = Healthy::start(&b, "big").await;
    let producer: FutureProducer = common::client_config(&b)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .create()
        .unwrap();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let producer = &producer;
    let mut sends = Vec::new();
    for i in 0..768 {
        let payload: Vec<u8> = (0..65536)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let key = i.to_string();
        sends.push(async move {
            producer
                .send(
                    FutureRecord::to("big").key(&key).payload(&payload),
                    ROUND_TRIP,
                )
                .await
                .map_err(|(e, _)| e)
                .unwrap();
        });
    }
    futures::future::join_all(sends).await;
    let before = broker.status_kb("VmRSS");

    // Eight readers ask for everything and never read the answer.
    let mut readers = Vec::new();
    for _ in 0..8 {
        let mut c = RawConn::connect(broker.addr).await;
        let req = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(55 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("big")))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(55 << 20)])]);
        c.send(ApiKey::Fetch, 12, req).await;
        readers.push(c);
    }
    healthy
        .round_trip("eight stalled fetch readers", ROUND_TRIP)
        .await;
    let grown = broker.status_kb("VmHWM").saturating_sub(before);
    assert!(
        grown < 64 * 1024,
        "peak RSS grew by {grown} kB for 8 readers of 48 MiB"
    );
    // A reader that does read gets all of it.
    let mut reader = readers.pop().unwrap();
    let frame = reader.recv_frame().await.expect("the fetch response");
    assert!(frame.len() > 48 << 20, "{} bytes", frame.len());
}
