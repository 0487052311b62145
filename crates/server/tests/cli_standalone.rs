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
        .args(["--kafka-addr", "127.0.0.1:0"])
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
        assert!(broker.log_text().contains("clean shutdown complete"));
    }
}

#[test]
fn a_data_directory_serves_one_broker_at_a_time() {
    let broker = BrokerProcess::start(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_magnetar"))
        .arg("standalone")
        .arg("--data-dir")
        .arg(broker.dir())
        .args(["--kafka-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("locked"), "{err}");
}
