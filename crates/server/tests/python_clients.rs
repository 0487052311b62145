//! Python clients (independent implementations) against the real broker.
//! They are installed by `scripts/test` from `tests/python/requirements.txt`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::BrokerProcess;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/python")
        .join(name)
}

fn run_python(script_name: &str, bootstrap: &str) {
    let out = Command::new("python3")
        .arg(script(script_name))
        .arg(bootstrap)
        .output()
        .expect("python3 is needed for the client interop tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script_name} failed ({}).\nIf a module is missing, run: pip install -r tests/python/requirements.txt\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("OK"), "{stdout}");
}

#[test]
fn kafka_python_produces_with_idempotence_consumes_and_lists() {
    let broker = BrokerProcess::start(&[]);
    run_python("kafka_python_smoke.py", &broker.bootstrap());
}

/// kafka-python's admin client: Kafka 4 topic configs (created, described
/// with types and synonyms, altered incrementally), recompression read
/// back, and the single-node admin APIs (DescribeProducers,
/// DescribeLogDirs, DescribeTopicPartitions paging, ListConfigResources,
/// ElectLeaders, reassignments, an assignment to an unknown broker).
#[test]
fn kafka_python_admin_configs_and_cluster_apis() {
    let broker = BrokerProcess::start(&[]);
    run_python("kafka_python_admin.py", &broker.bootstrap());
}

/// kafka-python's transactional producer: commit, abort, and offsets sent
/// to a group in a transaction, read back with read_committed and
/// read_uncommitted consumers.
#[test]
fn kafka_python_transactions_commit_abort_and_send_offsets() {
    let broker = BrokerProcess::start(&[]);
    run_python("kafka_python_txn.py", &broker.bootstrap());
}
