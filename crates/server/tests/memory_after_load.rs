//! Memory taken by connections is given back once they close: the broker's
//! RSS returns to within 50 MB of its idle size after thousands of Pulsar
//! connections open and close.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::BrokerProcess;
use tokio::net::TcpStream;

/// How far above its idle size the RSS may stay once the load is gone.
const SLACK_KB: u64 = 50 * 1024;

/// Raises this process's open-file limit to its hard limit (the test
/// holds thousands of sockets).
fn raise_open_file_limit(need: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    assert!(
        lim.rlim_cur >= need,
        "the open-file limit {} is below the {need} this test needs",
        lim.rlim_cur
    );
}

/// Waits until the broker's count of open descriptors satisfies `done`.
async fn wait_for_fds(broker: &BrokerProcess, what: &str, done: impl Fn(usize) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = broker.open_fds();
        if done(n) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {n} descriptors open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (30 s at most) until the RSS is back within [`SLACK_KB`] of
/// `idle`.
async fn rss_returns(broker: &BrokerProcess, idle: u64, after: &str) -> (u64, Duration) {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    loop {
        let rss = broker.status_kb("VmRSS");
        if rss < idle + SLACK_KB {
            return (rss, started.elapsed());
        }
        assert!(
            Instant::now() < deadline,
            "RSS {rss} kB 30 s after {after} (idle: {idle} kB)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_is_given_back_after_pulsar_connections_close() {
    const OPEN: usize = 3_000;
    const CYCLES: usize = 16_000;
    raise_open_file_limit(OPEN as u64 + 200);
    let broker = BrokerProcess::start(&[]);
    let addr: SocketAddr = broker
        .pulsar_url()
        .trim_start_matches("pulsar://")
        .parse()
        .unwrap();
    // Idle, once a first connection has been served.
    let base = broker.open_fds();
    drop(TcpStream::connect(addr).await.unwrap());
    wait_for_fds(&broker, "the first connection to close", |n| n <= base).await;
    let idle = broker.status_kb("VmRSS");

    // Silent connections: each waits for a frame that never comes.
    let mut open = Vec::with_capacity(OPEN);
    for _ in 0..OPEN {
        open.push(TcpStream::connect(addr).await.unwrap());
    }
    wait_for_fds(&broker, "every connection to be accepted", |n| {
        n >= base + OPEN
    })
    .await;
    let loaded = broker.status_kb("VmRSS");
    drop(open);
    wait_for_fds(&broker, "every connection to close", |n| n <= base + 5).await;
    let (after_close, took) = rss_returns(&broker, idle, "3,000 connections closed").await;

    // Connections opened and closed, 500 open at a time.
    for _ in 0..CYCLES / 500 {
        let mut batch = Vec::with_capacity(500);
        for _ in 0..500 {
            batch.push(TcpStream::connect(addr).await.unwrap());
        }
        drop(batch);
    }
    wait_for_fds(&broker, "every connection to close", |n| n <= base + 5).await;
    let (after_cycles, took_cycles) =
        rss_returns(&broker, idle, "16,000 connect/close cycles").await;
    println!(
        "RSS idle {idle} kB; {OPEN} silent Pulsar connections {loaded} kB; closed {after_close} kB \
         (after {took:?}); after {CYCLES} connect/close cycles {after_cycles} kB (after {took_cycles:?})"
    );
}
