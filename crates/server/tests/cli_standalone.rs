//! `magnetar standalone`: configuration errors name the key, config files
//! and `--set` apply, signals shut down cleanly, and a data directory is
//! never shared by two brokers.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{client_config, BrokerProcess};
use rdkafka::consumer::{BaseConsumer, Consumer};

fn run_with(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_magnetar"))
        .arg("standalone")
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--kafka-addr",
            "127.0.0.1:0",
            "--pulsar-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_configuration_fails_start_up_naming_the_key() {
    let (code, err) = run_with(&["--set", "no.such.key=1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no.such.key"), "{err}");

    let (code, err) = run_with(&["--set", "num.partitions=many"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("num.partitions"), "{err}");

    let (code, err) = run_with(&["--set", "auto.create.topics.type=sharded"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("auto.create.topics.type") && err.contains("non-partitioned"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.toml");
    std::fs::write(
        &file,
        "log.retention.ms = 1000\nlog.segment.bytes = \"huge\"\n",
    )
    .unwrap();
    let (code, err) = run_with(&["--config", file.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("log.segment.bytes") && err.contains("broker.toml"),
        "{err}"
    );

    let (code, err) = run_with(&["--config", "/nonexistent/magnetar.toml"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("/nonexistent/magnetar.toml"), "{err}");

    // Near misses name the key meant.
    let (code, err) = run_with(&["--set", "retention.ms=1000"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("log.retention.ms"), "{err}");
    let (code, err) = run_with(&["--set", "num.partiton=3"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("did you mean num.partitions?"), "{err}");
    // Errors are printed once.
    assert_eq!(err.matches("num.partiton").count(), 1, "{err}");

    // A standalone node joins no quorum, and a cluster node needs one.
    let (code, err) = run_with(&["--set", "controller.quorum.voters=1@127.0.0.1:1"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("controller.quorum.voters") && err.contains("magnetar broker"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_magnetar"))
        .args(["broker", "--node-id", "1", "--controller-quorum", ""])
        .args(["--kafka-addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--controller-quorum"), "{err}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing made"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_spellings_in_hours_and_minutes_are_accepted() {
    let broker = BrokerProcess::start(&["log.retention.hours=2", "log.roll.hours=1"]);
    let admin = client::Admin::connect(client::ClientConfig::new([broker.bootstrap()]))
        .await
        .unwrap();
    let configs = admin
        .describe_configs(&[client::ConfigResource::Broker(1)])
        .await
        .unwrap()
        .remove(0)
        .1
        .unwrap();
    let value = |k: &str| {
        configs
            .iter()
            .find(|c| c.name == k)
            .and_then(|c| c.value.clone())
    };
    assert_eq!(value("log.retention.ms").as_deref(), Some("7200000"));
    assert_eq!(value("log.roll.ms").as_deref(), Some("3600000"));
}

#[test]
fn the_log_is_plain_when_piped_and_quiet_about_normal_negotiation() {
    let mut broker = BrokerProcess::start(&[]);
    broker.wait_for_log("opened data directory: new data directory");
    // Our own CLI negotiates ApiVersions from its newest version down.
    let out = common::cli::magnetar(&broker.bootstrap(), &["topic", "list"], None);
    assert!(out.status.success());
    assert_eq!(broker.terminate(), Some(0));
    let log = broker.log_text();
    assert!(
        !log.contains('\u{1b}'),
        "no ANSI colour codes in a piped log"
    );
    assert!(
        !log.contains("ApiVersions version we do not implement"),
        "normal negotiation is not logged at INFO:\n{log}"
    );
    broker.restart();
    broker.wait_for_log("opened data directory: the previous run shut down cleanly");
    broker.kill();
    broker.restart();
    broker.wait_for_log("the previous run did not shut down cleanly");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let mut broker = BrokerProcess::start_with_env(&[("MAGNETAR_LOG_FORMAT", "json")], &[]);
    broker.wait_for_log("opened data directory");
    assert_eq!(broker.terminate(), Some(0));
    broker.wait_for_log("clean shutdown complete");
    let log = broker.log.lock().unwrap().clone();
    let json_lines: Vec<serde_json::Value> = log
        .iter()
        .filter(|l| !l.starts_with("magnetar: "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(json_lines.len() >= 3, "{log:?}");
    assert!(json_lines
        .iter()
        .all(|v| v["level"].is_string() && v["fields"]["message"].is_string()));

    let (code, err) = {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_magnetar"))
            .args(["standalone", "--kafka-addr", "127.0.0.1:0"])
            .args(["--pulsar-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(dir.path())
            .env("MAGNETAR_LOG_FORMAT", "xml")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(2));
    assert!(err.contains("MAGNETAR_LOG_FORMAT"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_file_and_set_flags_apply_with_set_winning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.toml");
    std::fs::write(
        &file,
        "num.partitions = 5\nauto.create.topics.enable = false\n",
    )
    .unwrap();
    let path = file.to_str().unwrap().to_string();
    // --set overrides the file: creation is re-enabled, partitions come from the file.
    let broker =
        BrokerProcess::start_with_args(&["--config", &path], &["auto.create.topics.enable=true"]);
    let c: BaseConsumer = client_config(&broker.bootstrap())
        .set("allow.auto.create.topics", "true")
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some("from-file"), Duration::from_secs(10))
        .unwrap();
    assert_eq!(md.topics()[0].partitions().len(), 5);
}

#[test]
fn sigterm_and_sigint_shut_down_cleanly() {
    for signal in ["-TERM", "-INT"] {
        let mut broker = BrokerProcess::start(&[]);
        assert_eq!(broker.stop_with(signal), Some(0), "{signal}: exit code 0");
        assert!(
            broker.dir().join(".magnetar-clean-shutdown").exists(),
            "{signal}: clean shutdown recorded"
        );
        broker.wait_for_log("clean shutdown complete");
    }
}

#[test]
fn a_data_directory_serves_one_broker_at_a_time() {
    let broker = BrokerProcess::start(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_magnetar"))
        .arg("standalone")
        .arg("--data-dir")
        .arg(broker.dir())
        .args([
            "--kafka-addr",
            "127.0.0.1:0",
            "--pulsar-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("locked"), "{err}");
    // Said once, plainly.
    assert_eq!(err.matches("locked").count(), 1, "{err}");
}
