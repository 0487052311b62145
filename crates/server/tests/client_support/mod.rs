//! Support for the `client` crate's end-to-end tests: reading a partition
//! back through the client's own connection layer, reading with librdkafka,
//! and a frame-aware TCP proxy that counts requests and can cut a
//! connection just before a Produce response.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use client::Client;
use futures::StreamExt;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Headers;
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Every record of `topic`/`partition`, fetched with plain Fetch requests
/// over the client's pipelined connection (the building block a consumer
/// will use).
pub async fn fetch_all(client: &Client, topic: &str, partition: i32) -> Vec<Record> {
    let md = client.refresh_metadata(&[topic]).await.unwrap();
    let leader = md.leader(topic, partition).expect("leader");
    let conn = client.connection(leader).await.unwrap();
    let v = conn.versions().pick::<FetchRequest>().unwrap();
    let mut out = Vec::new();
    let mut offset = 0i64;
    loop {
        let req = FetchRequest::default()
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(4 << 20)])]);
        let resp = conn.send(v, &req).unwrap().await.unwrap();
        let p = &resp.responses[0].partitions[0];
        // Records deleted or expired: start at the log start instead.
        if p.error_code == 1 && p.log_start_offset > offset {
            offset = p.log_start_offset;
            continue;
        }
        assert_eq!(p.error_code, 0, "fetch error");
        let mut records: Bytes = p.records.clone().unwrap_or_default();
        let mut got = false;
        while !records.is_empty() {
            let set = RecordBatchDecoder::decode(&mut records).expect("decode");
            for r in set.records {
                if r.offset >= offset {
                    offset = r.offset + 1;
                    out.push(r);
                    got = true;
                }
            }
        }
        if !got && offset >= p.high_watermark {
            return out;
        }
    }
}

/// One message as librdkafka read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Option<i64>,
}

/// Reads `n` messages from every partition of `topic` with librdkafka.
pub async fn rdkafka_read(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    n: usize,
) -> Vec<Consumed> {
    let c: StreamConsumer = crate::common::assign_config(bootstrap).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let mut stream = c.stream();
    while out.len() < n {
        let m = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("timed out consuming")
            .expect("stream ended")
            .expect("consume error");
        out.push(Consumed {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers: m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                        .collect()
                })
                .unwrap_or_default(),
            timestamp: m.timestamp().to_millis(),
        });
    }
    out
}

/// A TCP proxy in front of a broker that parses frames in both directions.
pub struct Proxy {
    pub addr: SocketAddr,
    counts: Arc<Mutex<HashMap<i16, usize>>>,
    cut_produce: Arc<AtomicUsize>,
    cuts_done: Arc<AtomicUsize>,
    listener: Option<TcpListener>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

impl Proxy {
    /// Binds the proxy's port (give it to the broker as its advertised
    /// listener), without forwarding yet.
    pub async fn bind() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Proxy {
            addr: listener.local_addr().unwrap(),
            counts: Arc::default(),
            cut_produce: Arc::default(),
            cuts_done: Arc::default(),
            listener: Some(listener),
            task: None,
        }
    }

    /// Starts forwarding to `upstream`.
    pub fn start(&mut self, upstream: SocketAddr) {
        let listener = self.listener.take().expect("started once");
        let counts = self.counts.clone();
        let cut = self.cut_produce.clone();
        let cuts_done = self.cuts_done.clone();
        self.task = Some(tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((down, _)) = listener.accept().await else {
                    return;
                };
                let Ok(up) = TcpStream::connect(upstream).await else {
                    continue;
                };
                conns.spawn(relay(
                    down,
                    up,
                    counts.clone(),
                    cut.clone(),
                    cuts_done.clone(),
                ));
            }
        }));
    }

    /// Requests of `key` seen so far.
    pub fn count(&self, key: ApiKey) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(&(key as i16))
            .copied()
            .unwrap_or(0)
    }

    /// The next `n` Produce responses are swallowed and their connections
    /// cut: the broker has written the batch, the client never hears so.
    pub fn cut_next_produce_responses(&self, n: usize) {
        self.cut_produce.store(n, Ordering::SeqCst);
    }

    /// How many connections were cut that way.
    pub fn cuts_done(&self) -> usize {
        self.cuts_done.load(Ordering::SeqCst)
    }
}

async fn read_frame(s: &mut (impl AsyncReadExt + Unpin)) -> Option<Vec<u8>> {
    let len = s.read_i32().await.ok()?;
    let mut buf = vec![0u8; len as usize];
    s.read_exact(&mut buf).await.ok()?;
    Some(buf)
}

async fn relay(
    down: TcpStream,
    up: TcpStream,
    counts: Arc<Mutex<HashMap<i16, usize>>>,
    cut: Arc<AtomicUsize>,
    cuts_done: Arc<AtomicUsize>,
) {
    let (mut dr, mut dw) = down.into_split();
    let (mut ur, mut uw) = up.into_split();
    let keys: Arc<Mutex<HashMap<i32, i16>>> = Arc::default();
    let k2 = keys.clone();
    let requests = tokio::spawn(async move {
        while let Some(f) = read_frame(&mut dr).await {
            let key = i16::from_be_bytes([f[0], f[1]]);
            let corr = i32::from_be_bytes([f[4], f[5], f[6], f[7]]);
            k2.lock().unwrap().insert(corr, key);
            *counts.lock().unwrap().entry(key).or_default() += 1;
            if uw.write_i32(f.len() as i32).await.is_err() || uw.write_all(&f).await.is_err() {
                return;
            }
        }
    });
    while let Some(f) = read_frame(&mut ur).await {
        let corr = i32::from_be_bytes([f[0], f[1], f[2], f[3]]);
        let key = keys.lock().unwrap().remove(&corr);
        if key == Some(ApiKey::Produce as i16)
            && cut
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            cuts_done.fetch_add(1, Ordering::SeqCst);
            break;
        }
        if dw.write_i32(f.len() as i32).await.is_err() || dw.write_all(&f).await.is_err() {
            break;
        }
    }
    requests.abort();
}
