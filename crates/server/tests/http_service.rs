//! The HTTP service against the real broker: PIP-344's REST partition
//! metadata (every case of the seed's table), lookup, namespace listings,
//! health checks, and bad input answered with 4xx and a reason.

mod common;

use common::{client_config, BrokerProcess};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::Value;
use std::time::Duration;

async fn get(url: &str) -> (u16, Value) {
    let r = reqwest::get(url).await.expect("http request");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
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

/// The partition count Kafka Metadata reports, or None if the topic does
/// not exist.
fn kafka_partitions(bootstrap: &str, topic: &str) -> Option<usize> {
    let c: BaseConsumer = client_config(bootstrap).create().unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let t = &md.topics()[0];
    t.error().is_none().then(|| t.partitions().len())
}

fn partitions_url(http: &str, topic: &str, check: Option<bool>) -> String {
    let base = format!("{http}/admin/v2/persistent/public/default/{topic}/partitions");
    match check {
        Some(c) => format!("{base}?checkAllowAutoCreation={c}"),
        None => base,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pip344_rest_partitions_follow_the_seed_table() {
    // Auto-creation on, non-partitioned topics (cases 1, 3, 5).
    let broker = BrokerProcess::start(&[
        "auto.create.topics.enable=true",
        "auto.create.topics.type=non-partitioned",
    ]);
    let (http, b) = (broker.http_url(), broker.bootstrap());
    // Case 5: the parameter is false (and by default): not found, not created.
    for check in [Some(false), None] {
        let (status, body) = get(&partitions_url(&http, "case5", check)).await;
        assert_eq!(status, 404, "{body}");
        assert!(body["reason"].as_str().is_some(), "{body}");
    }
    assert_eq!(kafka_partitions(&b, "case5"), None, "not created");
    // Case 3: true and allowed: created non-partitioned, 0.
    let (status, body) = get(&partitions_url(&http, "case3", Some(true))).await;
    assert_eq!((status, &body["partitions"]), (200, &Value::from(0)));
    assert_eq!(kafka_partitions(&b, "case3"), Some(1), "created");
    // Case 1: an existing non-partitioned topic, either way: 0.
    for check in [Some(true), Some(false), None] {
        let (status, body) = get(&partitions_url(&http, "case3", check)).await;
        assert_eq!((status, &body["partitions"]), (200, &Value::from(0)));
    }
    // Case 2: an existing partitioned topic, either way: its count.
    create_topic(&b, "case2", 2).await;
    for check in [Some(true), Some(false), None] {
        let (status, body) = get(&partitions_url(&http, "case2", check)).await;
        assert_eq!((status, &body["partitions"]), (200, &Value::from(2)));
    }
    drop(broker);

    // Case 4: partitioned auto-creation with 2 partitions.
    let broker = BrokerProcess::start(&[
        "auto.create.topics.enable=true",
        "auto.create.topics.type=partitioned",
        "num.partitions=2",
    ]);
    let (http, b) = (broker.http_url(), broker.bootstrap());
    let (status, body) = get(&partitions_url(&http, "case4", Some(true))).await;
    assert_eq!((status, &body["partitions"]), (200, &Value::from(2)));
    assert_eq!(kafka_partitions(&b, "case4"), Some(2));
    drop(broker);

    // Case 6: true, but the broker does not allow it: not found.
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let (http, b) = (broker.http_url(), broker.bootstrap());
    let (status, body) = get(&partitions_url(&http, "case6", Some(true))).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(kafka_partitions(&b, "case6"), None, "not created");
}

#[tokio::test(flavor = "multi_thread")]
async fn lookup_namespace_listing_and_health() {
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false"]);
    let (http, b) = (broker.http_url(), broker.bootstrap());
    create_topic(&b, "looked-up", 2).await;

    let (status, body) = get(&format!(
        "{http}/lookup/v2/topic/persistent/public/default/looked-up"
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["brokerUrl"], Value::from(broker.pulsar_url()));
    assert_eq!(body["nativeUrl"], Value::from(broker.pulsar_url()));
    assert_eq!(body["httpUrl"], Value::from(http.clone()));
    assert_eq!(body["brokerUrlTls"], Value::from(""));
    // A missing topic that may not be created: not found, as a binary lookup.
    let (status, body) = get(&format!(
        "{http}/lookup/v2/topic/persistent/public/default/missing"
    ))
    .await;
    assert_eq!(status, 404, "{body}");

    let (status, body) = get(&format!(
        "{http}/admin/v2/namespaces/public/default/topics?mode=PERSISTENT"
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        serde_json::json!([
            "persistent://public/default/looked-up-partition-0",
            "persistent://public/default/looked-up-partition-1"
        ])
    );

    for path in ["/health/live", "/health/ready", "/admin/v2/brokers/health"] {
        let (status, body) = get(&format!("{http}{path}")).await;
        assert_eq!((status, body), (200, Value::from("ok")), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_4xx_with_a_reason() {
    let broker = BrokerProcess::start(&[]);
    let http = broker.http_url();
    let cases: Vec<(&str, String, u16)> = vec![
        ("unknown path", format!("{http}/no/such/thing"), 404),
        (
            "bad query value",
            format!("{http}/admin/v2/persistent/public/default/t/partitions?checkAllowAutoCreation=maybe"),
            400,
        ),
        (
            "non-persistent domain",
            format!("{http}/admin/v2/non-persistent/public/default/t/partitions"),
            404,
        ),
        (
            "unknown domain",
            format!("{http}/lookup/v2/topic/weird/public/default/t"),
            404,
        ),
        (
            "namespace that does not exist",
            format!("{http}/admin/v2/persistent/nobody/nothing/t/partitions?checkAllowAutoCreation=true"),
            404,
        ),
        (
            "bad topic name",
            format!("{http}/admin/v2/persistent/public/default/bad%20name/partitions?checkAllowAutoCreation=true"),
            412,
        ),
        (
            "bad listing mode",
            format!("{http}/admin/v2/namespaces/public/default/topics?mode=SOME"),
            400,
        ),
        (
            "listing a namespace that does not exist",
            format!("{http}/admin/v2/namespaces/nobody/nothing/topics"),
            404,
        ),
    ];
    for (what, url, want) in cases {
        let (status, body) = get(&url).await;
        assert_eq!(status, want, "{what}: {body}");
        assert!(
            body["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{what}: {body}"
        );
    }
    // A method a path does not serve.
    let r = reqwest::Client::new()
        .post(format!("{http}/health/live"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let body: Value = r.json().await.unwrap();
    assert!(body["reason"].as_str().is_some(), "{body}");
    // The broker kept serving.
    let (status, _) = get(&format!("{http}/health/ready")).await;
    assert_eq!(status, 200);
}

/// The HTTP listener shares the broker's connection limits: over
/// `max.connections.per.ip` a connection is reset at once (and counted),
/// the one already open keeps being served, and once it closes a new one
/// is accepted. A refusal with a non-JSON body (a body over the limit)
/// still answers `{"reason"}`.
#[tokio::test(flavor = "multi_thread")]
async fn http_connections_are_limited_like_the_other_listeners() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let broker = BrokerProcess::start(&["max.connections.per.ip=1"]);
    let addr = broker.http_url().trim_start_matches("http://").to_string();
    let request = b"GET /health/live HTTP/1.1\r\nhost: x\r\n\r\n";
    let mut held = tokio::net::TcpStream::connect(&addr).await.unwrap();
    held.write_all(request).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = held.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    // A second connection from the same address is reset without an
    // answer (the connect itself may already see the reset).
    let second = tokio::net::TcpStream::connect(&addr).await;
    if let Ok(mut second) = second {
        let _ = second.write_all(request).await;
        let got = tokio::time::timeout(Duration::from_secs(10), second.read(&mut buf))
            .await
            .expect("the refused connection is closed at once");
        assert!(matches!(got, Ok(0) | Err(_)), "answered: {got:?}");
    }
    // The first is still served.
    held.write_all(request).await.unwrap();
    let n = held.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    // An oversized body on it: 413 with a JSON reason.
    let big = format!(
        "PUT /admin/v2/persistent/public/default/t/subscription/s HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        2 << 20
    );
    // Only announced: the limit refuses by the announced length, before
    // any of the body is sent (so no reset can race the answer).
    held.write_all(big.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), held.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(
        text.contains("application/json") && text.contains("\"reason\""),
        "{text}"
    );
    drop(held);
    // Once closed, a new connection is served (the broker notices the
    // close asynchronously: retry on a reset until it has).
    let (status, _) = common::eventually(
        Duration::from_secs(20),
        "a new connection served",
        || async {
            reqwest::get(format!("{}/health/live", broker.http_url()))
                .await
                .ok()
                .map(|r| (r.status().as_u16(), ()))
        },
    )
    .await;
    assert_eq!(status, 200);
}
