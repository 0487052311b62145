//! Several Magnetar nodes inside the test process (`magnetar::node::Node`,
//! each with its own data directory and free ports): each serves real
//! librdkafka clients and the HTTP service, keeps its own cluster id and
//! data, and a node shut down and started again on its directory has its
//! topics (same ids) and records back.

mod common;

use std::time::Duration;

use broker::config::BrokerConfig;
use common::{assign_config, client_config};
use magnetar::node::Node;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};

const WAIT: Duration = Duration::from_secs(30);

fn config(dir: &std::path::Path) -> BrokerConfig {
    let mut c = BrokerConfig::new(dir, "127.0.0.1:0".parse().unwrap());
    c.pulsar_addr = Some("127.0.0.1:0".parse().unwrap());
    c.http_addr = Some("127.0.0.1:0".parse().unwrap());
    c
}

async fn produce(bootstrap: &str, topic: &str, values: &[String]) {
    let p: FutureProducer = client_config(bootstrap).create().unwrap();
    for v in values {
        p.send(FutureRecord::<(), _>::to(topic).payload(v), WAIT)
            .await
            .unwrap();
    }
}

/// Every value of partition 0 of `topic`, read by a librdkafka consumer on
/// a blocking thread.
async fn read_all(bootstrap: String, topic: &'static str) -> Vec<String> {
    tokio::task::spawn_blocking(move || {
        let c: BaseConsumer = assign_config(&bootstrap).create().unwrap();
        let (_, high) = c.fetch_watermarks(topic, 0, WAIT).unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Beginning)
            .unwrap();
        c.assign(&tpl).unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        let mut out = Vec::new();
        while (out.len() as i64) < high {
            assert!(
                std::time::Instant::now() < deadline,
                "read {} of {high}",
                out.len()
            );
            if let Some(m) = common::polled(c.poll(Duration::from_millis(100))) {
                out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            }
        }
        out
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_in_one_process_serve_clients_and_restart_on_their_data() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Vec::new();
    for d in &dirs {
        nodes.push(Node::start(config(d.path())).await.unwrap());
    }
    let http = reqwest::Client::new();
    for (i, n) in nodes.iter().enumerate() {
        let bootstrap = n.kafka_addr().to_string();
        let values: Vec<String> = (0..10).map(|k| format!("node{i}-{k}")).collect();
        produce(&bootstrap, "events", &values).await;
        assert_eq!(read_all(bootstrap, "events").await, values);
        let ready = http
            .get(format!("http://{}/health/ready", n.http_addr().unwrap()))
            .send()
            .await
            .unwrap();
        assert!(ready.status().is_success(), "node {i}: {}", ready.status());
        assert!(n.pulsar_addr().is_some());
    }
    let ids: Vec<String> = nodes
        .iter()
        .map(|n| n.broker().cluster_id().to_string())
        .collect();
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2],
        "independent nodes: {ids:?}"
    );

    // Node 1 stops; the others keep serving; it comes back on its data.
    let topic_id = nodes[1].broker().topic("events").unwrap().id;
    let stopped = nodes.remove(1);
    stopped.shutdown().await.unwrap();
    let other = nodes[0].kafka_addr().to_string();
    produce(&other, "events", &["after".to_string()]).await;
    assert_eq!(read_all(other, "events").await.len(), 11);
    let again = Node::start(config(dirs[1].path())).await.unwrap();
    assert_eq!(again.broker().cluster_id(), ids[1]);
    assert_eq!(again.broker().topic("events").unwrap().id, topic_id);
    let values: Vec<String> = (0..10).map(|k| format!("node1-{k}")).collect();
    assert_eq!(
        read_all(again.kafka_addr().to_string(), "events").await,
        values
    );
    again.shutdown().await.unwrap();
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
