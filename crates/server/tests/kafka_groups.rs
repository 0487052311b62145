//! Consumer groups with real clients against the real broker: librdkafka
//! (classic and KIP-848 protocols) and kafka-python sharing partitions,
//! taking over from members that leave or are killed, regex subscriptions
//! that discover new topics, and offsets that survive a broker SIGKILL.

mod common;
mod groups;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{eventually, BrokerProcess};
use groups::{
    classic_config, consumer_protocol_config, create_topics, delete_topic, produce, GroupConsumer,
};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

fn python_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/python")
        .join(name)
}

/// True when the consumers' assignments are disjoint and cover `total`.
fn covers(consumers: &[&GroupConsumer], total: usize) -> bool {
    let mut seen = BTreeSet::new();
    for c in consumers {
        for tp in c.assignment() {
            if !seen.insert(tp) {
                return false;
            }
        }
    }
    seen.len() == total
}

fn broker_for_groups() -> BrokerProcess {
    BrokerProcess::start(&[
        "group.initial.rebalance.delay.ms=200",
        "group.min.session.timeout.ms=1000",
        "group.consumer.heartbeat.interval.ms=300",
        "group.consumer.session.timeout.ms=6000",
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn members_share_partitions_and_take_over_after_leave_and_kill() {
    let broker = broker_for_groups();
    let b = broker.bootstrap();
    create_topics(&b, &[("six", 6)]).await;
    let c1 = GroupConsumer::start(classic_config(&b, "g6"), &["six"]);
    let c2 = GroupConsumer::start(classic_config(&b, "g6"), &["six"]);
    let c3 = GroupConsumer::start(classic_config(&b, "g6"), &["six"]);
    eventually(
        Duration::from_secs(30),
        "three members with two partitions each",
        || {
            let ok = covers(&[&c1, &c2, &c3], 6)
                && [&c1, &c2, &c3].iter().all(|c| c.assignment().len() == 2);
            async move { ok.then_some(()) }
        },
    )
    .await;

    let values: Vec<String> = (0..60).map(|i| format!("m{i}")).collect();
    produce(&b, "six", &values).await;
    eventually(
        Duration::from_secs(30),
        "every message consumed once",
        || {
            let mut all: Vec<String> = [&c1, &c2, &c3].iter().flat_map(|c| c.values()).collect();
            all.sort();
            let mut want = values.clone();
            want.sort();
            async move { (all == want).then_some(()) }
        },
    )
    .await;

    // A member leaves: the other two take over everything.
    c3.close().await;
    eventually(
        Duration::from_secs(20),
        "two members cover six partitions",
        || {
            let ok = covers(&[&c1, &c2], 6);
            async move { ok.then_some(()) }
        },
    )
    .await;

    // A kafka-python member joins, then is killed without leaving: its
    // session (3 s) expires and the rest take over.
    let mut py = Command::new("python3")
        .arg(python_script("kafka_python_group.py"))
        .args(["member", &b, "g6", "six"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 with kafka-python");
    let stdout = py.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("kafka-python member output");
        if line == "ASSIGNED 2" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kafka-python never got two partitions"
        );
    }
    eventually(
        Duration::from_secs(20),
        "librdkafka members hold the other four",
        || {
            let n = c1.assignment().len() + c2.assignment().len();
            async move { (n == 4).then_some(()) }
        },
    )
    .await;
    py.kill().unwrap();
    let _ = py.wait();
    eventually(
        Duration::from_secs(20),
        "take-over after the killed member's session expires",
        || {
            let ok = covers(&[&c1, &c2], 6);
            async move { ok.then_some(()) }
        },
    )
    .await;

    // The same with a librdkafka member in another process (kcat's balanced
    // consumer), killed with SIGKILL.
    let mut kcat = Command::new("kcat")
        .args([
            "-b",
            &b,
            "-G",
            "g6",
            "-X",
            "session.timeout.ms=3000",
            "-X",
            "heartbeat.interval.ms=300",
            "six",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kcat");
    eventually(Duration::from_secs(30), "kcat takes two partitions", || {
        let n = c1.assignment().len() + c2.assignment().len();
        async move { (n == 4).then_some(()) }
    })
    .await;
    kcat.kill().unwrap();
    let _ = kcat.wait();
    eventually(
        Duration::from_secs(20),
        "take-over after kcat's session expires",
        || {
            let ok = covers(&[&c1, &c2], 6);
            async move { ok.then_some(()) }
        },
    )
    .await;
    c1.close().await;
    c2.close().await;
}

async fn regex_discovery(config: rdkafka::ClientConfig, b: &str) {
    create_topics(b, &[("orders-eu", 2), ("payments", 1)]).await;
    let c = GroupConsumer::start(config, &["^orders-.*"]);
    eventually(Duration::from_secs(10), "orders-eu assigned", || {
        let a = c.assignment();
        async move { (a.len() == 2 && a.iter().all(|(t, _)| t == "orders-eu")).then_some(()) }
    })
    .await;

    // A topic created after subscribing is discovered and consumed.
    create_topics(b, &[("orders-us", 3)]).await;
    let values: Vec<String> = (0..30).map(|i| format!("us-{i}")).collect();
    produce(b, "orders-us", &values).await;
    produce(b, "payments", &["not-for-us".to_string()]).await;
    eventually(Duration::from_secs(30), "orders-us consumed", || {
        let got: BTreeSet<String> = c.values().into_iter().collect();
        let ok = values.iter().all(|v| got.contains(v));
        async move { ok.then_some(()) }
    })
    .await;
    assert!(
        !c.values().contains(&"not-for-us".to_string()),
        "payments does not match"
    );
    assert!(
        c.events()
            .iter()
            .any(|e| e.starts_with("assign:") && e.contains("orders-us-")),
        "the rebalance callback saw the new topic: {:?}",
        c.events()
    );

    // A deleted topic's partitions are revoked.
    delete_topic(b, "orders-eu").await;
    eventually(Duration::from_secs(30), "orders-eu revoked", || {
        let a = c.assignment();
        async move { (a.len() == 3 && a.iter().all(|(t, _)| t == "orders-us")).then_some(()) }
    })
    .await;
    // The callback runs on librdkafka's polling thread right after the
    // assignment changes: wait for it rather than race it.
    eventually(
        Duration::from_secs(10),
        "the callback saw the revocation",
        || {
            let seen = c
                .events()
                .iter()
                .any(|e| e.starts_with("revoke:") && e.contains("orders-eu-"));
            async move { seen.then_some(()) }
        },
    )
    .await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn classic_regex_subscription_discovers_new_topics() {
    let broker = broker_for_groups();
    regex_discovery(
        classic_config(&broker.bootstrap(), "regex-classic"),
        &broker.bootstrap(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn consumer_protocol_regex_subscription_discovers_new_topics() {
    let broker = broker_for_groups();
    regex_discovery(
        consumer_protocol_config(&broker.bootstrap(), "regex-848"),
        &broker.bootstrap(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn committed_offsets_survive_a_broker_sigkill() {
    committed_offsets_survive_restart(true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn committed_offsets_survive_a_clean_restart() {
    committed_offsets_survive_restart(false).await;
}

async fn committed_offsets_survive_restart(kill: bool) {
    let mut broker = broker_for_groups();
    let b = broker.bootstrap();
    create_topics(&b, &[("ledger", 1)]).await;
    let values: Vec<String> = (0..20).map(|i| format!("entry-{i}")).collect();
    produce(&b, "ledger", &values).await;
    for (protocol, config) in [
        ("classic", classic_config(&b, "ledger-classic")),
        ("consumer", consumer_protocol_config(&b, "ledger-848")),
    ] {
        let c = GroupConsumer::start(config, &["ledger"]);
        eventually(Duration::from_secs(30), "ledger assigned", || {
            let n = c.assignment().len();
            async move { (n == 1).then_some(()) }
        })
        .await;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("ledger", 0, Offset::Offset(7))
            .unwrap();
        c.consumer
            .commit(&tpl, CommitMode::Sync)
            .unwrap_or_else(|e| panic!("{protocol}: commit: {e}"));
        c.close().await;
    }

    if kill {
        broker.kill();
    } else {
        assert_eq!(broker.terminate(), Some(0));
    }
    broker.restart();
    let b = broker.bootstrap();
    for (protocol, config) in [
        ("classic", classic_config(&b, "ledger-classic")),
        ("consumer", consumer_protocol_config(&b, "ledger-848")),
    ] {
        let c = GroupConsumer::start(config, &["ledger"]);
        let first = eventually(Duration::from_secs(30), "messages after restart", || {
            let m = c.messages.lock().unwrap().first().cloned();
            async move { m }
        })
        .await;
        assert_eq!(
            first.2, 7,
            "{protocol}: resumes exactly at the committed offset"
        );
        assert_eq!(first.3, "entry-7");
        c.close().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_python_group_consumer_commits_and_resumes() {
    let broker = broker_for_groups();
    let b = broker.bootstrap();
    create_topics(&b, &[("py-group", 2)]).await;
    let first: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    produce(&b, "py-group", &first).await;
    let run = |count: usize| {
        let out = Command::new("python3")
            .arg(python_script("kafka_python_group.py"))
            .args(["consume", &b, "py-g", "py-group", &count.to_string()])
            .output()
            .expect("python3");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut got: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("VALUE ").map(str::to_string))
            .collect();
        got.sort();
        got
    };
    let mut want = first.clone();
    want.sort();
    assert_eq!(run(10), want);
    let second: Vec<String> = (0..5).map(|i| format!("b{i}")).collect();
    produce(&b, "py-group", &second).await;
    let mut want = second.clone();
    want.sort();
    assert_eq!(
        run(5),
        want,
        "the second run starts after the committed offsets"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn static_member_restart_keeps_its_partitions_without_a_rebalance() {
    let broker = broker_for_groups();
    let b = broker.bootstrap();
    create_topics(&b, &[("static", 4)]).await;
    let with_instance = |id: &str| {
        let mut c = classic_config(&b, "static-g");
        c.set("group.instance.id", id)
            .set("session.timeout.ms", "10000");
        c
    };
    let steady = GroupConsumer::start(with_instance("steady"), &["static"]);
    let restarting = GroupConsumer::start(with_instance("restarting"), &["static"]);
    eventually(
        Duration::from_secs(30),
        "two static members with two partitions each",
        || {
            let ok = covers(&[&steady, &restarting], 4) && steady.assignment().len() == 2;
            async move { ok.then_some(()) }
        },
    )
    .await;
    let before = restarting.assignment();
    let steady_events = steady.events().len();
    // A static member closes without LeaveGroup (KIP-345) and comes back
    // with the same instance id inside its session timeout.
    restarting.close().await;
    let back = GroupConsumer::start(with_instance("restarting"), &["static"]);
    eventually(
        Duration::from_secs(30),
        "the restarted member gets its partitions back",
        || {
            let a = back.assignment();
            let ok = a == before;
            async move { ok.then_some(()) }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        steady.events().len(),
        steady_events,
        "the other member was not rebalanced: {:?}",
        steady.events()
    );
    back.close().await;
    steady.close().await;
}
