//! `magnetar standalone` runs a quorum of one; before, it kept its metadata
//! in `cluster-metadata.json`. A data directory of that version (the
//! fixture, made by the previous binary with
//! `fixtures/make_standalone_file_metadata.py`) is imported into the
//! quorum on the first start: everything it held is checked through
//! independent clients (`tests/python/standalone_upgrade.py`), before and
//! after a restart, and the import is safe to interrupt.

mod common;

use std::path::{Path, PathBuf};

use common::BrokerProcess;

/// The fixture's cluster and topic ids, as the old version made them.
const FIXTURE_IDS: &str = r#"{"cluster_id": "mHWrxYN7SR6rZaJfuVEfdQ", "topic_ids": {
 "__consumer_offsets": "8bf7ed1b-33ab-48c4-8b04-9bfcb9a1c029",
 "acme.billing.events": "b6208524-4bd6-4bf5-abac-42947974288b",
 "orders": "7b790e90-4ad0-4ee1-ba7a-3bd516e2017c"}, "producer_id_limit": 1000}"#;
const CLUSTER_ID: &str = "mHWrxYN7SR6rZaJfuVEfdQ";

/// The settings the fixture was made with (an authorizer, for its ACL),
/// and the principal of the unauthenticated Pulsar and HTTP clients that
/// check it (refused under an authorizer otherwise).
const SETTINGS: &[&str] = &[
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found=true",
    "pulsar.anonymous.principal=User:ANONYMOUS",
    "http.anonymous.principal=User:ANONYMOUS",
];

const FILE: &str = "cluster-metadata.json";
const IMPORTED: &str = "cluster-metadata.json.imported";
const IMPORT_LINE: &str = "imported the single-node metadata file";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A fresh copy of the fixture.
fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    copy_dir(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standalone-file-metadata"),
        &dir,
    );
    (tmp, dir)
}

fn check_everything(b: &BrokerProcess) {
    b.run_python_script(
        "standalone_upgrade.py",
        &[
            b.bootstrap().as_ref(),
            b.pulsar_url().as_ref(),
            b.http_url().as_ref(),
            FIXTURE_IDS.as_ref(),
        ],
    );
}

/// The log of a start that must be refused.
fn refused(start: Result<BrokerProcess, String>) -> String {
    match start {
        Ok(b) => panic!("started:\n{}", b.log_text()),
        Err(log) => log,
    }
}

fn imports(b: &BrokerProcess) -> usize {
    b.log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(IMPORT_LINE))
        .count()
}

#[test]
fn a_data_directory_of_the_file_metadata_version_is_imported_whole() {
    let (_tmp, dir) = fixture_copy();
    let mut b = BrokerProcess::try_start_standalone_on(dir.clone(), SETTINGS)
        .unwrap_or_else(|l| panic!("{l}"));
    assert_eq!(imports(&b), 1, "{}", b.log_text());
    assert!(
        !dir.join(FILE).exists(),
        "the file is moved away once imported"
    );
    assert!(dir.join(IMPORTED).exists());
    let props = std::fs::read_to_string(dir.join("meta.properties")).unwrap();
    assert!(
        props.contains(&format!("cluster.id={CLUSTER_ID}")),
        "{props}"
    );
    check_everything(&b);

    // A restart reads the quorum, not the file: no second import.
    assert_eq!(b.stop_with("-TERM"), Some(0));
    b.restart();
    assert_eq!(imports(&b), 1);
    check_everything(&b);

    // A crash after the import committed but before the file was moved:
    // the next start finds its cluster in the quorum and only moves it.
    assert_eq!(b.stop_with("-KILL"), None);
    std::fs::rename(dir.join(IMPORTED), dir.join(FILE)).unwrap();
    b.restart();
    assert_eq!(imports(&b), 1, "imported once only");
    assert!(!dir.join(FILE).exists());
    check_everything(&b);
}

#[test]
fn a_metadata_file_of_another_cluster_is_refused() {
    let (_tmp, dir) = fixture_copy();
    let mut b = BrokerProcess::try_start_standalone_on(dir.clone(), SETTINGS)
        .unwrap_or_else(|l| panic!("{l}"));
    assert_eq!(b.stop_with("-TERM"), Some(0));
    // Another single node's file dropped into the directory.
    let text = std::fs::read_to_string(dir.join(IMPORTED)).unwrap();
    std::fs::write(
        dir.join(FILE),
        text.replace(CLUSTER_ID, "AnotherClusterIdAAAAA"),
    )
    .unwrap();
    let log = refused(BrokerProcess::try_start_standalone_on(
        dir.clone(),
        SETTINGS,
    ));
    assert!(
        log.contains(&format!("is not the metadata file this directory imported: its cluster is AnotherClusterIdAAAAA; this directory's metadata is in its controller quorum (cluster {CLUSTER_ID})")),
        "{log}"
    );
    assert!(dir.join(FILE).exists(), "nothing is moved or lost");
    assert!(dir.join("controller").exists(), "the quorum is kept");

    // The same cluster's file again, beside the one imported: refused too.
    std::fs::copy(dir.join(IMPORTED), dir.join(FILE)).unwrap();
    let log = refused(BrokerProcess::try_start_standalone_on(
        dir.clone(),
        SETTINGS,
    ));
    assert!(log.contains("is left from before"), "{log}");
    assert!(dir.join(FILE).exists());

    // A file that changed after its import (as if the older binary ran
    // between the mark and the move): not the file the mark's digest
    // names, so refused, the quorum kept.
    std::fs::rename(dir.join(IMPORTED), dir.join("imported.bak")).unwrap();
    std::fs::write(
        dir.join(FILE),
        text.replace(
            "7b790e90-4ad0-4ee1-ba7a-3bd516e2017c",
            "7b790e90-4ad0-4ee1-ba7a-3bd516e2017d",
        ),
    )
    .unwrap();
    let log = refused(BrokerProcess::try_start_standalone_on(
        dir.clone(),
        SETTINGS,
    ));
    assert!(
        log.contains(&format!(
            "is not the metadata file this directory imported: its cluster is {CLUSTER_ID};"
        )),
        "{log}"
    );
    std::fs::rename(dir.join("imported.bak"), dir.join(IMPORTED)).unwrap();

    // Without the mark, a file beside the imported one is refused too:
    // the quorum it would discard holds more than an unfinished import.
    let props = std::fs::read(dir.join("meta.properties")).unwrap();
    std::fs::remove_file(dir.join("meta.properties")).unwrap();
    let log = refused(BrokerProcess::try_start_standalone_on(
        dir.clone(),
        SETTINGS,
    ));
    assert!(log.contains("is here beside"), "{log}");
    assert!(dir.join("controller").exists(), "the quorum is kept");
    std::fs::write(dir.join("meta.properties"), props).unwrap();

    // Moved away: the quorum still holds everything, nothing is imported.
    std::fs::remove_file(dir.join(FILE)).unwrap();
    b.restart();
    assert_eq!(imports(&b), 1, "the first start's only");
    check_everything(&b);
}

/// An import that did not finish (here: the mark and the move undone
/// after a whole import, which leaves the most behind) is made again from
/// the file: what the quorum held of it is discarded first.
#[test]
fn an_unfinished_import_is_made_again() {
    let (_tmp, dir) = fixture_copy();
    let mut b = BrokerProcess::try_start_standalone_on(dir.clone(), SETTINGS)
        .unwrap_or_else(|l| panic!("{l}"));
    assert_eq!(imports(&b), 1);
    assert_eq!(b.stop_with("-KILL"), None);
    std::fs::rename(dir.join(IMPORTED), dir.join(FILE)).unwrap();
    std::fs::remove_file(dir.join("meta.properties")).unwrap();
    assert!(dir.join("controller").exists());
    b.restart();
    assert_eq!(imports(&b), 2, "{}", b.log_text());
    assert!(b.log_text().contains("holds an import that did not finish"));
    assert!(!dir.join(FILE).exists());
    assert!(dir.join("meta.properties").exists());
    check_everything(&b);
}

/// A first start that cannot import (here: the file's partitions are
/// another node's) changes nothing that matters: the file stays, the
/// directory is not marked a cluster member's (the older binary still
/// opens it), and a cluster node still refuses it.
#[test]
fn a_refused_import_leaves_the_directory_as_it_was() {
    let (_tmp, dir) = fixture_copy();
    let mut settings = SETTINGS.to_vec();
    settings.push("node.id=2");
    let log = refused(BrokerProcess::try_start_standalone_on(
        dir.clone(),
        &settings,
    ));
    assert!(
        log.contains(
            "places partitions on node 1, not on this node (2); start it with --set node.id=1"
        ),
        "{log}"
    );
    assert!(dir.join(FILE).exists());
    assert!(!dir.join("meta.properties").exists());
    assert!(dir.join("orders-1").exists(), "no partition staged");
    assert!(
        dir.join(".magnetar-clean-shutdown").exists(),
        "the clean shutdown is kept: the next start recovers nothing"
    );
    let port = free_port();
    let log = refused(BrokerProcess::try_start_node(
        dir.clone(),
        &broker_only_flags(port),
        &[],
    ));
    assert!(log.contains("holds a standalone node's data"), "{log}");
    // The right node id imports it.
    let b = BrokerProcess::try_start_standalone_on(dir.clone(), SETTINGS)
        .unwrap_or_else(|l| panic!("{l}"));
    assert_eq!(imports(&b), 1);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `magnetar broker` flags of broker-only node 1 of the quorum of node 2
/// at `port`.
fn broker_only_flags(port: u16) -> Vec<String> {
    vec![
        "--node-id".to_string(),
        "1".into(),
        "--controller-quorum".into(),
        format!("2@127.0.0.1:{port}"),
    ]
}

/// Standalone and cluster data directories are not interchangeable: a
/// node started on the other kind's directory is refused before it
/// touches anything there.
#[test]
fn the_other_kind_of_data_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();

    // A broker-only cluster node's directory: its quorum is elsewhere.
    let broker_only = tmp.path().join("broker-only");
    std::fs::create_dir_all(&broker_only).unwrap();
    std::fs::write(
        broker_only.join("meta.properties"),
        "cluster.id=SomeClusterAAAAAAAAAAAA\ndirectory.id=SomeDirectoryAAAAAAAAA\nnode.id=1\n",
    )
    .unwrap();
    let log = refused(BrokerProcess::try_start_standalone_on(
        broker_only.clone(),
        &[],
    ));
    assert!(log.contains("belongs to a node of a cluster"), "{log}");
    assert!(
        !broker_only.join("controller").exists(),
        "nothing made there"
    );

    // A standalone directory, then started as a combined cluster node:
    // its controller belongs to another quorum.
    let single = tmp.path().join("single");
    let mut b = BrokerProcess::try_start_standalone_on(single.clone(), &[])
        .unwrap_or_else(|l| panic!("{l}"));
    assert_eq!(b.stop_with("-TERM"), Some(0));
    // Nothing binds it: both starts are refused first.
    let port = free_port();
    let args: Vec<String> = [
        "--node-id".to_string(),
        "1".into(),
        "--controller-quorum".into(),
        format!("1@127.0.0.1:{port}"),
        "--controller-addr".into(),
        format!("127.0.0.1:{port}"),
    ]
    .into();
    let log = refused(BrokerProcess::try_start_node(single.clone(), &args, &[]));
    assert!(log.contains("holds a standalone node's data"), "{log}");
    // A broker-only node too, before it registers anywhere.
    let log = refused(BrokerProcess::try_start_node(
        single.clone(),
        &broker_only_flags(port),
        &[],
    ));
    assert!(log.contains("holds a standalone node's data"), "{log}");

    // And a combined node's directory started standalone (the harness
    // starts it again on other ports if one was taken meanwhile).
    let mut cluster = common::cluster::Cluster::start(1, &[]);
    let node = cluster.node(1).data_dir.clone();
    assert_eq!(cluster.node(1).stop_with("-TERM"), Some(0));
    let log = refused(BrokerProcess::try_start_standalone_on(node.clone(), &[]));
    assert!(log.contains("belongs to a node of a cluster"), "{log}");
}
