//! Topic stats and subscription management over the HTTP service against
//! the real broker: a connected Reader of the official Python client shows
//! as a non-durable `reader-…` subscription and is gone once it closes
//! (plain topics and a partition of a partitioned one), publishers and
//! consumers with their counters, subscriptions created at a position,
//! skipped, peeked, reset by time and by id (consumers disconnected and
//! back at the new position), deleted (forced while connected); Kafka
//! consumer groups appear as `kafka:<group>` with their backlog; bad input
//! gets 4xx with a reason.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{client_config, BrokerProcess};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

fn run_check(check: &str, broker: &BrokerProcess) {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/pulsar_admin_checks.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(check)
        .arg(broker.pulsar_url())
        .arg(broker.http_url())
        .output()
        .expect("python3 is needed for the Pulsar client tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK"),
        "check {check} failed ({}).\nstdout:\n{stdout}\nstderr:\n{}\nbroker log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        broker.log_text()
    );
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

async fn request(method: reqwest::Method, url: &str, body: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let r = req.send().await.expect("http request");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn readers_show_in_topic_stats_while_connected() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    create_topic(&broker.bootstrap(), "stats-parts", 3).await;
    run_check("readers-in-stats", &broker);
}

#[tokio::test(flavor = "multi_thread")]
async fn subscriptions_are_created_skipped_peeked_reset_and_deleted() {
    let broker = BrokerProcess::start(&["auto.create.topics.type=non-partitioned"]);
    run_check("subscription-admin", &broker);
}

/// A Kafka consumer group with committed offsets shows under
/// `kafka:<group>` with the backlog after its offset, and its assigned
/// member as a consumer; the topic's backlogSize counts from the slowest.
#[tokio::test(flavor = "multi_thread")]
async fn kafka_groups_appear_in_stats_with_their_backlog() {
    let broker = BrokerProcess::start(&[]);
    let b = broker.bootstrap();
    create_topic(&b, "kstats", 1).await;
    let producer: FutureProducer = client_config(&b).create().unwrap();
    for i in 0..10 {
        let v = format!("v{i}");
        producer
            .send(
                FutureRecord::<(), _>::to("kstats").payload(&v),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }
    let consumer: BaseConsumer = client_config(&b)
        .set("group.id", "billing")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("kstats", 0, Offset::Offset(4))
        .unwrap();
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
    let url = format!(
        "{}/admin/v2/persistent/public/default/kstats/partitioned-stats",
        broker.http_url()
    );
    let (status, stats) = request(reqwest::Method::GET, &url, None).await;
    assert_eq!(status, 200, "{stats}");
    let group = &stats["subscriptions"]["kafka:billing"];
    assert_eq!(group["type"], "Kafka", "{stats}");
    assert_eq!(group["msgBacklog"], 6, "{stats}");
    assert_eq!(group["isDurable"], true);
    assert!(group["backlogSize"].as_u64().unwrap() > 0);
    assert_eq!(
        stats["backlogSize"], group["backlogSize"],
        "the slowest cursor"
    );
    assert_eq!(stats["msgInCounter"], 10);
    assert!(stats["storageSize"].as_u64().unwrap() > 0);

    // A member of the group assigned the partition shows as its consumer.
    let member: BaseConsumer = client_config(&b)
        .set("group.id", "billing")
        .set("client.id", "billing-member")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    member.subscribe(&["kstats"]).unwrap();
    common::eventually(Duration::from_secs(30), "the member in stats", || {
        let _ = member.poll(Duration::from_millis(100));
        let url = url.clone();
        async move {
            let (_, stats) = request(reqwest::Method::GET, &url, None).await;
            let names: Vec<String> = stats["subscriptions"]["kafka:billing"]["consumers"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|c| c["consumerName"].as_str().unwrap_or("").to_string())
                        .collect()
                })
                .unwrap_or_default();
            names.contains(&"billing-member".to_string()).then_some(())
        }
    })
    .await;
}

/// Bad input to the stats and subscription paths: 4xx with a reason.
#[tokio::test(flavor = "multi_thread")]
async fn bad_stats_and_subscription_requests_get_a_reason() {
    let broker = BrokerProcess::start(&[]);
    create_topic(&broker.bootstrap(), "badreq", 2).await;
    let t = format!(
        "{}/admin/v2/persistent/public/default/badreq",
        broker.http_url()
    );
    use reqwest::Method as M;
    let cases: Vec<(M, String, Option<&str>, u16)> = vec![
        (M::GET, format!("{t}-missing/stats"), None, 404),
        (M::GET, format!("{t}/stats"), None, 404),
        (M::GET, format!("{t}-partition-7/stats"), None, 404),
        (
            M::GET,
            format!("{t}/partitioned-stats?perPartition=maybe"),
            None,
            400,
        ),
        (
            M::PUT,
            format!("{t}/subscription/s"),
            Some("{not json"),
            400,
        ),
        (
            M::PUT,
            format!("{t}/subscription/s"),
            Some(r#"{"ledgerId": "x"}"#),
            400,
        ),
        (M::POST, format!("{t}/subscription/none/skip/3"), None, 404),
        (M::POST, format!("{t}/subscription/none/skip/-3"), None, 400),
        (
            M::POST,
            format!("{t}/subscription/none/resetcursor/soon"),
            None,
            400,
        ),
        (
            M::POST,
            format!("{t}/subscription/none/resetcursor"),
            Some(r#"{"ledgerId": 1, "entryId": 1}"#),
            405,
        ),
        (
            M::GET,
            format!("{t}/subscription/none/position/1"),
            None,
            405,
        ),
        (
            M::GET,
            format!("{t}-partition-0/subscription/none/position/1"),
            None,
            404,
        ),
        (
            M::GET,
            format!("{t}-partition-0/subscription/none/position/0"),
            None,
            400,
        ),
        (M::DELETE, format!("{t}/subscription/none"), None, 404),
        (M::PATCH, format!("{t}/stats"), None, 405),
        (
            M::GET,
            format!(
                "{}/admin/v2/persistent/Bad Tenant!/default/x/stats",
                broker.http_url()
            ),
            None,
            412,
        ),
    ];
    for (method, url, body, want) in cases {
        let (status, answer) = request(method.clone(), &url, body).await;
        assert_eq!(status, want, "{method} {url}: {answer}");
        assert!(
            answer["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{method} {url}: no reason in {answer}"
        );
    }
    // Creating on a partitioned topic creates on every partition.
    let (status, answer) = request(M::PUT, &format!("{t}/subscription/all"), None).await;
    assert_eq!(status, 204, "{answer}");
    for p in 0..2 {
        let (_, subs) = request(M::GET, &format!("{t}-partition-{p}/subscriptions"), None).await;
        assert_eq!(subs, serde_json::json!(["all"]));
    }
    let (status, _) = request(M::PUT, &format!("{t}/subscription/all"), None).await;
    assert_eq!(status, 409);
    assert!(broker.log_text().lines().all(|l| !l.contains("panicked")));
}
