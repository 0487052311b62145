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
