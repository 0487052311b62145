//! `GET /metrics` against the real broker: Kafka traffic (rdkafka) and
//! Pulsar traffic (the official Python client) are produced and consumed,
//! the exposition is scraped over HTTP and parsed by the official
//! Prometheus client's OpenMetrics parser (`tests/python/metrics_check.py`),
//! and the values are checked against what the clients did: requests by
//! API and outcome, records and bytes in and out per partition, log
//! figures, group lag after a commit, subscription backlog after partial
//! acks, flush waits, Fetch long-poll waits and connections per listener.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assign_config, client_config, eventually, BrokerProcess};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(20);

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/metrics_check.py")
}

/// One parsed sample.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed scrape.
#[derive(Debug)]
struct Scrape {
    /// Family name → (type, unit).
    families: BTreeMap<String, (String, String)>,
    samples: Vec<Sample>,
}

impl Scrape {
    /// The samples named `name` whose labels include `labels`.
    fn matching(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The value of the one sample named `name` with (at least) `labels`;
    /// `None` if there is none.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found = self.matching(name, labels);
        assert!(
            found.len() <= 1,
            "{name} {labels:?} is ambiguous: {found:?}"
        );
        found.first().map(|s| s.value)
    }

    /// [`Scrape::get`], which must exist.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
    }
}

/// Scrapes `/metrics` and parses it with the Prometheus client's parser;
/// `None` if the connection was refused or reset (a test limiting
/// connections per IP can see its previous scrape's connection still
/// counted for a moment).
async fn scrape(broker: &BrokerProcess) -> Option<Scrape> {
    let r = reqwest::get(format!("{}/metrics", broker.http_url()))
        .await
        .ok()?;
    assert_eq!(r.status().as_u16(), 200);
    let content_type = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = r.text().await.ok()?;
    let mut child = Command::new("python3")
        .arg(script())
        .arg("parse")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed for the metrics tests");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the exposition does not parse.\nIf prometheus_client is missing: pip install -r tests/python/requirements.txt\nstderr:\n{}\nexposition:\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut families = BTreeMap::new();
    let mut samples = Vec::new();
    for f in parsed.as_array().unwrap() {
        families.insert(
            f["name"].as_str().unwrap().to_string(),
            (
                f["type"].as_str().unwrap().to_string(),
                f["unit"].as_str().unwrap().to_string(),
            ),
        );
        for s in f["samples"].as_array().unwrap() {
            samples.push(Sample {
                name: s["name"].as_str().unwrap().to_string(),
                labels: s["labels"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect(),
                value: s["value"].as_f64().unwrap(),
            });
        }
    }
    Some(Scrape { families, samples })
}

/// Scrapes until `f` accepts a scrape (or panics after [`DEADLINE`]).
async fn scrape_until(broker: &BrokerProcess, what: &str, f: impl Fn(&Scrape) -> bool) -> Scrape {
    eventually(DEADLINE, what, || async {
        let s = scrape(broker).await?;
        f(&s).then_some(s)
    })
    .await
}

async fn create_topic(bootstrap: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(name, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

fn run_pulsar(broker: &BrokerProcess, topic: &str, n: usize, acked: usize) {
    let out = Command::new("python3")
        .arg(script())
        .arg("pulsar")
        .arg(broker.pulsar_url())
        .arg(topic)
        .arg(n.to_string())
        .arg(acked.to_string())
        .output()
        .expect("python3 is needed for the metrics tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK"),
        "pulsar traffic failed ({}).\nIf `pulsar` is missing: pip install -r tests/python/requirements.txt\nstdout:\n{stdout}\nstderr:\n{}\nbroker log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        broker.log_text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_and_pulsar_traffic_shows_in_the_metrics() {
    // Every append is flushed before it is acknowledged, so produce waits
    // for flushes are measured too.
    let broker = BrokerProcess::start(&[
        "auto.create.topics.enable=false",
        "log.flush.interval.messages=1",
    ]);
    let b = broker.bootstrap();
    create_topic(&b, "km", 2).await;
    create_topic(&b, "pm", 1).await;

    // Kafka: 10 records into each partition of km.
    let producer: FutureProducer = client_config(&b).create().unwrap();
    for i in 0..20 {
        let value = format!("record-{i}");
        producer
            .send(
                FutureRecord::<(), _>::to("km")
                    .partition(i % 2)
                    .payload(&value),
                Duration::from_secs(10),
            )
            .await
            .expect("delivered");
    }
    drop(producer);

    // Read all of it once, then commit 10 on partition 0 and 4 on 1.
    let consumer: BaseConsumer = assign_config(&b)
        .set("group.id", "metrics-group")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("km", 0, Offset::Beginning)
        .unwrap();
    tpl.add_partition_offset("km", 1, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut read = 0;
    let deadline = std::time::Instant::now() + DEADLINE;
    while read < 20 {
        assert!(std::time::Instant::now() < deadline, "read {read} of 20");
        if let Some(m) = common::polled(consumer.poll(Duration::from_millis(200))) {
            m.payload().expect("a value");
            read += 1;
        }
    }
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("km", 0, Offset::Offset(10))
        .unwrap();
    commit
        .add_partition_offset("km", 1, Offset::Offset(4))
        .unwrap();
    consumer.commit(&commit, CommitMode::Sync).unwrap();
    // A Metadata request for a topic that does not exist: an error outcome.
    let md = consumer
        .fetch_metadata(Some("no-such-topic"), Duration::from_secs(10))
        .unwrap();
    assert!(md.topics()[0].error().is_some());
    // The consumer keeps long-polling at the end of the log
    // (fetch.wait.max.ms=100): waits are observed.
    let s = scrape_until(&broker, "a Fetch wait observed", |s| {
        s.get("magnetar_fetch_wait_duration_seconds_count", &[]) >= Some(1.0)
    })
    .await;
    assert!(s.value("magnetar_connections_open", &[("listener", "kafka")]) >= 1.0);
    drop(consumer);

    // Pulsar: 8 messages, one SEND each, received once, 3 acknowledged.
    run_pulsar(&broker, "pm", 8, 3);

    // Every client has gone: the connections close.
    let s = scrape_until(&broker, "every connection closed", |s| {
        ["kafka", "pulsar"]
            .iter()
            .all(|l| s.get("magnetar_connections_open", &[("listener", l)]) == Some(0.0))
    })
    .await;

    // The README's table names exactly the families served.
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let documented: std::collections::BTreeSet<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `magnetar_"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let served: std::collections::BTreeSet<String> = s
        .families
        .iter()
        .map(|(name, (kind, _))| {
            let name = name.trim_start_matches("magnetar_");
            match kind.as_str() {
                "counter" => format!("{name}_total"),
                _ => name.to_string(),
            }
        })
        .collect();
    assert_eq!(
        served,
        documented.iter().map(|n| n.to_string()).collect(),
        "README metrics table vs GET /metrics"
    );

    for (name, kind, unit) in [
        ("magnetar_requests", "counter", ""),
        ("magnetar_request_duration_seconds", "histogram", "seconds"),
        ("magnetar_partition_in_bytes", "counter", "bytes"),
        ("magnetar_partition_out_records", "counter", "records"),
        ("magnetar_log_size_bytes", "gauge", "bytes"),
        ("magnetar_consumer_group_lag", "gauge", ""),
        ("magnetar_subscription_backlog", "gauge", ""),
        ("magnetar_connections_open", "gauge", ""),
    ] {
        assert_eq!(
            s.families.get(name),
            Some(&(kind.to_string(), unit.to_string())),
            "{name}"
        );
    }

    // Requests by API and outcome.
    let requests = |protocol: &str, api: &str, outcome: &str| {
        s.get(
            "magnetar_requests_total",
            &[("protocol", protocol), ("api", api), ("outcome", outcome)],
        )
        .unwrap_or(0.0)
    };
    for api in [
        "ApiVersions",
        "Metadata",
        "Produce",
        "Fetch",
        "OffsetCommit",
    ] {
        assert!(requests("kafka", api, "ok") >= 1.0, "kafka {api}");
    }
    assert!(requests("kafka", "Metadata", "UNKNOWN_TOPIC_OR_PARTITION") >= 1.0);
    assert_eq!(
        requests("pulsar", "SEND", "ok"),
        8.0,
        "one SEND per message"
    );
    assert_eq!(requests("pulsar", "PRODUCER", "ok"), 1.0);
    assert_eq!(requests("pulsar", "SUBSCRIBE", "ok"), 1.0);
    for command in ["CONNECT", "FLOW", "ACK", "CLOSE_CONSUMER"] {
        assert!(requests("pulsar", command, "ok") >= 1.0, "pulsar {command}");
    }
    assert!(requests("pulsar", "PARTITIONED_METADATA", "TopicNotFound") >= 1.0);
    // Every request counted once in its API's latency histogram (Kafka
    // Fetch aside: a closed consumer's last long-poll may still be ending).
    let mut apis: Vec<(String, String)> = s
        .matching("magnetar_requests_total", &[])
        .iter()
        .map(|x| (x.labels["protocol"].clone(), x.labels["api"].clone()))
        .collect();
    apis.sort();
    apis.dedup();
    for (protocol, api) in apis {
        if (protocol.as_str(), api.as_str()) == ("kafka", "Fetch") {
            continue;
        }
        let labels = [("protocol", protocol.as_str()), ("api", api.as_str())];
        let counted: f64 = s
            .matching("magnetar_requests_total", &labels)
            .iter()
            .map(|x| x.value)
            .sum();
        let timed = s.value("magnetar_request_duration_seconds_count", &labels);
        assert_eq!(counted, timed, "{protocol} {api}");
        let inf = [labels[0], labels[1], ("le", "+Inf")];
        assert_eq!(
            s.value("magnetar_request_duration_seconds_bucket", &inf),
            timed
        );
    }

    // Kafka traffic: every record in once and out once, per partition.
    for p in ["0", "1"] {
        let l = [("topic", "km"), ("partition", p)];
        assert_eq!(s.value("magnetar_partition_in_records_total", &l), 10.0);
        assert_eq!(s.value("magnetar_partition_out_records_total", &l), 10.0);
        let size = s.value("magnetar_log_size_bytes", &l);
        assert!(size > 0.0);
        assert_eq!(s.value("magnetar_partition_in_bytes_total", &l), size);
        assert_eq!(
            s.value("magnetar_partition_out_bytes_total", &l),
            size,
            "each stored batch sent once"
        );
        assert_eq!(s.value("magnetar_log_segments", &l), 1.0);
        assert_eq!(s.value("magnetar_log_start_offset", &l), 0.0);
        assert_eq!(s.value("magnetar_log_end_offset", &l), 10.0);
    }
    // Group lag after the commit.
    let group = |p| {
        [
            ("group", "metrics-group"),
            ("topic", "km"),
            ("partition", p),
        ]
    };
    assert_eq!(
        s.value("magnetar_consumer_group_committed_offset", &group("0")),
        10.0
    );
    assert_eq!(s.value("magnetar_consumer_group_lag", &group("0")), 0.0);
    assert_eq!(
        s.value("magnetar_consumer_group_committed_offset", &group("1")),
        4.0
    );
    assert_eq!(s.value("magnetar_consumer_group_lag", &group("1")), 6.0);

    // Pulsar traffic and the subscription's backlog.
    let pm = [("topic", "pm"), ("partition", "0")];
    assert_eq!(s.value("magnetar_partition_in_records_total", &pm), 8.0);
    assert_eq!(s.value("magnetar_partition_out_records_total", &pm), 8.0);
    assert!(
        s.value("magnetar_partition_out_bytes_total", &pm)
            > s.value("magnetar_partition_in_bytes_total", &pm) / 2.0,
        "frames carry the payloads"
    );
    assert_eq!(s.value("magnetar_log_end_offset", &pm), 8.0);
    let sub = [
        ("topic", "pm"),
        ("partition", "0"),
        ("subscription", "metrics-sub"),
        ("type", "Shared"),
        ("durable", "true"),
    ];
    assert_eq!(s.value("magnetar_subscription_backlog", &sub), 5.0);
    assert_eq!(s.value("magnetar_subscription_consumers", &sub), 0.0);

    // Flush waits: every Pulsar SEND, and the Kafka produce requests.
    let flushes = |protocol| {
        s.value(
            "magnetar_produce_flush_wait_duration_seconds_count",
            &[("protocol", protocol)],
        )
    };
    assert_eq!(flushes("pulsar"), 8.0);
    assert!(flushes("kafka") >= 1.0);
    assert!(
        flushes("kafka") <= requests("kafka", "Produce", "ok"),
        "at most one wait per Produce request"
    );

    // Connections: each listener accepted some, refused none.
    for listener in ["kafka", "pulsar"] {
        assert!(
            s.value(
                "magnetar_connections_accepted_total",
                &[("listener", listener)]
            ) >= 1.0
        );
        for reason in ["max_connections", "max_connections_per_ip"] {
            assert_eq!(
                s.value(
                    "magnetar_connections_refused_total",
                    &[("listener", listener), ("reason", reason)]
                ),
                0.0
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_over_a_limit_are_counted_as_refused() {
    let broker = BrokerProcess::start(&["max.connections.per.ip=1"]);
    let pulsar_addr = broker
        .pulsar_url()
        .trim_start_matches("pulsar://")
        .to_string();
    for (listener, addr) in [("kafka", broker.addr.to_string()), ("pulsar", pulsar_addr)] {
        let held = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let l = [("listener", listener)];
        scrape_until(&broker, "the first connection open", |s| {
            s.get("magnetar_connections_open", &l) == Some(1.0)
        })
        .await;
        // Reset at once: the connect itself may already see the reset.
        let refused = tokio::net::TcpStream::connect(&addr).await;
        let per_ip = [("listener", listener), ("reason", "max_connections_per_ip")];
        let s = scrape_until(&broker, "the second connection refused", |s| {
            s.get("magnetar_connections_refused_total", &per_ip) == Some(1.0)
        })
        .await;
        assert_eq!(s.value("magnetar_connections_open", &l), 1.0);
        assert_eq!(s.value("magnetar_connections_accepted_total", &l), 1.0);
        drop((held, refused));
        scrape_until(&broker, "the connection closed", |s| {
            s.get("magnetar_connections_open", &l) == Some(0.0)
        })
        .await;
    }
}
