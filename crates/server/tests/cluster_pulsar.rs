//! Three `magnetar broker` processes on loopback, as Pulsar clients and
//! the HTTP service see them: lookups (binary and HTTP) send each client to
//! the broker leading its partition, admin requests about a partition are
//! redirected to its broker, and partitioned stats, subscriptions and
//! deletes gather every broker's part.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::FAST_SETTINGS as SETTINGS;
use common::cluster::{create, leaders, wait_brokers, Cluster};
use common::{client_config, polled};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};

/// GET `url` and its JSON answer, which must be a success.
async fn get_json(http: &reqwest::Client, url: &str) -> serde_json::Value {
    let r = http.get(url).send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{url}: {status}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Runs a check of the Python Pulsar client suite against `service_url`.
fn pulsar_check(check: &str, service_url: &str, extra: &[&str]) -> String {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/python/pulsar_client_suite.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(check)
        .arg(service_url)
        .arg("-")
        .args(extra)
        .output()
        .expect("python3 with pulsar-client (tests/python/requirements.txt)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("OK"),
        "pulsar check {check} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The Python Pulsar client, given one broker's URL, is sent by Lookup to
/// the broker leading each partition: what it produces through one
/// broker's HTTP lookup service (`http://`) lands on every partition
/// (Kafka reads it back), and a consumer connected through another broker's
/// binary lookup (`pulsar://`) reads it all. An admin request about a
/// partition is redirected (307) to its broker, as upstream's are.
#[tokio::test(flavor = "multi_thread")]
async fn pulsar_clients_follow_lookups_to_each_partitions_broker() {
    let mut c = Cluster::start(3, SETTINGS);
    wait_brokers(&c, &[1, 2, 3], 3).await;
    create(
        &c.addr(1),
        NewTopic::new("spread", 3, TopicReplication::Fixed(1)),
    )
    .await;
    let l = leaders(&c.addr(1), "spread", 3).await;
    assert_eq!(
        l.values().copied().collect::<BTreeSet<_>>().len(),
        3,
        "{l:?}"
    );
    for id in 1..=3 {
        leaders(&c.addr(id), "spread", 3).await;
    }
    let topic = "persistent://public/default/spread";
    pulsar_check(
        "interop-write",
        &c.node(1).http_url(),
        &[topic, "30", "LZ4"],
    );
    let out = pulsar_check("interop-read", &c.node(2).pulsar_url(), &[topic, "30"]);
    let partitions: BTreeSet<i64> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["partition"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(partitions, BTreeSet::from([0, 1, 2]), "{out}");
    let mut got = 0;
    let consumer = {
        let mut cfg = client_config(&c.bootstrap());
        cfg.set("group.id", "pulsar-spread")
            .set("auto.offset.reset", "earliest");
        let consumer: BaseConsumer = cfg.create().unwrap();
        consumer.subscribe(&["spread"]).unwrap();
        consumer
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while got < 30 {
        assert!(std::time::Instant::now() < deadline, "read {got} of 30");
        if polled(consumer.poll(Duration::from_millis(200))).is_some() {
            got += 1;
        }
    }

    // Admin requests about partition 0 asked of another broker.
    let owner = l[&0] as usize;
    let other = (1..=3).find(|n| *n != owner).unwrap();
    let path = "/admin/v2/persistent/public/default/spread-partition-0/stats";
    let no_follow = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_follow
        .get(format!("{}{path}", c.node(other).http_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        format!("{}{path}?authoritative=true", c.node(owner).http_url())
    );
    let stats: serde_json::Value = reqwest::get(format!("{}{path}", c.node(other).http_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(stats["msgInCounter"].as_i64().unwrap() > 0, "{stats}");
    // Subscriptions live with the partition: listed through the redirect.
    let subs: Vec<String> = reqwest::get(format!(
        "{}/admin/v2/persistent/public/default/spread-partition-0/subscriptions",
        c.node(other).http_url()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(subs, ["interop"]);
    // The whole topic is led by three brokers: asked of one, it asks each
    // partition's broker and adds their answers up, as upstream does.
    let base = format!(
        "{}/admin/v2/persistent/public/default/spread",
        c.node(other).http_url()
    );
    let http = reqwest::Client::new();
    let stats = get_json(&http, &format!("{base}/partitioned-stats")).await;
    assert_eq!(stats["msgInCounter"], 30, "{stats}");
    assert_eq!(stats["metadata"]["partitions"], 3, "{stats}");
    let names: BTreeSet<String> = stats["partitions"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        names,
        (0..3)
            .map(|n| format!("persistent://public/default/spread-partition-{n}"))
            .collect()
    );
    assert!(stats["subscriptions"]["interop"].is_object(), "{stats}");
    let lean = get_json(
        &http,
        &format!("{base}/partitioned-stats?perPartition=false"),
    )
    .await;
    assert_eq!(lean["partitions"], serde_json::json!({}), "{lean}");
    let subs = get_json(&http, &format!("{base}/subscriptions")).await;
    assert_eq!(subs, serde_json::json!(["interop"]));
    // A subscription made on the partitioned topic is made on every
    // partition, wherever it is led; cursor moves and deletes reach them all.
    let status = |r: reqwest::Response| r.status().as_u16();
    // A name the admin clients percent-encode.
    let sub = format!("{base}/subscription/fan%3Aout");
    assert_eq!(status(http.put(&sub).send().await.unwrap()), 204);
    assert_eq!(status(http.put(&sub).send().await.unwrap()), 409);
    for n in 0..3 {
        let listed = get_json(
            &http,
            &format!(
                "{}/admin/v2/persistent/public/default/spread-partition-{n}/subscriptions",
                c.node(other).http_url()
            ),
        )
        .await;
        assert_eq!(
            listed,
            serde_json::json!(["fan:out", "interop"]),
            "partition {n}"
        );
    }
    let backlog = || async {
        let s = get_json(&http, &format!("{base}/partitioned-stats")).await;
        s["subscriptions"]["fan:out"]["msgBacklog"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(backlog().await, 0);
    let reset = http
        .post(format!("{sub}/resetcursor/0"))
        .send()
        .await
        .unwrap();
    assert_eq!(status(reset), 204);
    assert_eq!(backlog().await, 30);
    // A message id is one partition's position: refused on the
    // partitioned topic (as on one broker and upstream), nothing moved.
    let by_id = http
        .post(format!("{sub}/resetcursor"))
        .json(&serde_json::json!({"ledgerId": 0, "entryId": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(status(by_id), 405);
    assert_eq!(backlog().await, 30);
    assert_eq!(
        status(http.post(format!("{sub}/skip_all")).send().await.unwrap()),
        204
    );
    assert_eq!(backlog().await, 0);
    assert_eq!(
        status(
            http.post(format!("{base}/subscription/nope/skip_all"))
                .send()
                .await
                .unwrap()
        ),
        404
    );
    assert_eq!(status(http.delete(&sub).send().await.unwrap()), 204);
    assert_eq!(status(http.delete(&sub).send().await.unwrap()), 404);
    let subs = get_json(&http, &format!("{base}/subscriptions")).await;
    assert_eq!(subs, serde_json::json!(["interop"]));

    // Asked authoritatively, a broker that does not lead it says so.
    let r = no_follow
        .get(format!(
            "{}{path}?authoritative=true",
            c.node(other).http_url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);

    // Only Pulsar producers and consumers hold a topic (not the Kafka
    // group above, which has committed offsets).
    drop(consumer);
    // A consumer attached through another broker keeps the topic from a
    // delete without force, whichever broker is asked; force deletes it.
    let pulsar: pulsar::Pulsar<pulsar::TokioExecutor> =
        pulsar::Pulsar::builder(c.node(owner).pulsar_url(), pulsar::TokioExecutor)
            .build()
            .await
            .unwrap();
    let held_consumer: pulsar::Consumer<Vec<u8>, pulsar::TokioExecutor> = pulsar
        .consumer()
        .with_topic("persistent://public/default/spread-partition-0")
        .with_subscription("held")
        .build()
        .await
        .unwrap();
    let held = get_json(&http, &format!("{base}-partition-0/stats")).await;
    assert_eq!(
        held["subscriptions"]["held"]["consumers"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{held}"
    );
    let r = http
        .delete(format!("{base}/partitions"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 412, "{}", r.text().await.unwrap());
    let r = http
        .delete(format!("{base}/partitions?force=true"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204, "{}", r.text().await.unwrap());
    drop(held_consumer);
}

/// How many messages `tests/python/pulsar_failover.py` reported
/// acknowledged.
fn acknowledged(progress: &std::path::Path) -> usize {
    std::fs::read_to_string(progress)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until the script has `n` more messages acknowledged than now.
async fn more_acknowledged(progress: &std::path::Path, n: usize) {
    let target = acknowledged(progress) + n;
    common::eventually(
        Duration::from_secs(90),
        &format!("{target} Pulsar messages acknowledged"),
        || async move { (acknowledged(progress) >= target).then_some(()) },
    )
    .await;
}

/// The Python Pulsar client keeps producing and consuming one partition of
/// a replication-factor-3 topic while its leader shuts down (leadership
/// moves away before the process stops), returns, and gets the partition
/// back by automatic leader balancing while the other leader is still
/// running: that broker closes the client's producer and consumer
/// (CloseProducer, CloseConsumer), the client looks the new leader up, and
/// no send fails and no acknowledged message goes missing.
#[tokio::test(flavor = "multi_thread")]
async fn pulsar_clients_follow_their_partition_across_leader_moves() {
    let mut s = SETTINGS.to_vec();
    s.extend([
        "replica.lag.time.max.ms=3000",
        "min.insync.replicas=2",
        "replica.fetch.wait.max.ms=200",
        "replica.fetch.backoff.ms=200",
        "leader.imbalance.check.interval.seconds=1",
    ]);
    let mut c = Cluster::start(3, &s);
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "moving";
    create(
        &c.addr(1),
        NewTopic::new(topic, 1, TopicReplication::Fixed(3)),
    )
    .await;
    let leader = leaders(&c.addr(1), topic, 1).await[&0] as usize;
    let other = (1..=3).find(|n| *n != leader).unwrap();
    for id in 1..=3 {
        leaders(&c.addr(id), topic, 1).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let progress = dir.path().join("progress");
    let stop = dir.path().join("stop");
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/python/pulsar_failover.py");
    let child = std::process::Command::new("python3")
        .arg(script)
        .arg(c.node(other).pulsar_url())
        .arg(format!("persistent://public/default/{topic}"))
        .arg(&progress)
        .arg(&stop)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with pulsar-client (tests/python/requirements.txt)");
    let output = tokio::task::spawn_blocking(move || child.wait_with_output());

    more_acknowledged(&progress, 100).await;
    // A controlled shutdown: leadership moves away first.
    assert_eq!(
        c.node(leader).terminate(),
        Some(0),
        "node {leader} exit code"
    );
    more_acknowledged(&progress, 100).await;
    let interim = leaders(&c.addr(other), topic, 1).await[&0] as usize;
    assert_ne!(interim, leader, "leadership moved at the shutdown");
    // It returns and, in sync again, takes its partition back while the
    // broker leading it meanwhile keeps running.
    c.node(leader).restart();
    wait_brokers(&c, &[1, 2, 3], 3).await;
    common::eventually(
        Duration::from_secs(90),
        "the first leader leads again",
        || async { (leaders(&c.addr(other), topic, 1).await[&0] as usize == leader).then_some(()) },
    )
    .await;
    more_acknowledged(&progress, 100).await;
    // The interim leader, still running, sent the clients away.
    for what in ["producer", "consumer"] {
        let line = format!("{what} closed: its partition is led elsewhere");
        c.wait_for_log(interim, &line, Duration::from_secs(30));
    }
    std::fs::write(&stop, b"").unwrap();
    let out = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("the Pulsar client script ends")
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("OK"),
        "pulsar failover check failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Python Pulsar client keeps 3,000 sends in flight on one connection
/// to a replication-factor-3 partition: each waits for the in-sync
/// replicas without holding the connection's next sends, and the receipts
/// still come in the order of the sends (the client matches them in
/// order); a consumer reads every message once, in order. Then 300 sends
/// of 200 KiB, whose frames span several reads while receipts become
/// ready: no frame is cut.
#[tokio::test(flavor = "multi_thread")]
async fn pipelined_pulsar_sends_to_a_replicated_partition_are_answered_in_order() {
    let mut s = SETTINGS.to_vec();
    s.extend(["min.insync.replicas=2", "replica.fetch.wait.max.ms=200"]);
    let mut c = Cluster::start(3, &s);
    wait_brokers(&c, &[1, 2, 3], 3).await;
    let topic = "pipelined";
    for name in [topic, "pipelined-large"] {
        create(
            &c.addr(1),
            NewTopic::new(name, 1, TopicReplication::Fixed(3)),
        )
        .await;
    }
    let leader = leaders(&c.addr(1), topic, 1).await[&0] as usize;
    let url = c.node(leader).pulsar_url();
    tokio::task::spawn_blocking(move || {
        pulsar_check(
            "pipelined",
            &url,
            &[&format!("persistent://public/default/{topic}"), "3000"],
        );
        pulsar_check(
            "pipelined",
            &url,
            &[
                &format!("persistent://public/default/{topic}-large"),
                "300",
                "204800",
            ],
        )
    })
    .await
    .unwrap();
}
