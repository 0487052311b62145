use model::{LeaderEpoch, Offset};

use super::*;
use crate::test_util::{batch, simple_records};

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(TopicName::new(topic).unwrap(), PartitionId(partition))
}

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        ..LogConfig::default()
    }
}

fn append(log: &Log, n: usize) {
    let b = batch(&simple_records(0, n, 1000));
    log.append(&b, LeaderEpoch(0), Timestamp(1000)).unwrap();
}

#[test]
fn the_data_directory_is_locked_exclusively() {
    let tmp = tempfile::tempdir().unwrap();
    let first = LogManager::open(tmp.path()).unwrap();
    assert!(matches!(
        LogManager::open(tmp.path()),
        Err(Error::DataDirLocked { .. })
    ));
    drop(first);
    LogManager::open(tmp.path()).unwrap();
}

#[test]
fn the_lock_identity_is_the_same_file_and_boot_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node");
    let first = LogManager::open(&dir).unwrap();
    let Some(id) = first.lock_identity().map(str::to_string) else {
        // No readable boot id here: callers then fall back to waiting.
        return;
    };
    drop(first);
    let again = LogManager::open(&dir).unwrap();
    assert_eq!(again.lock_identity(), Some(id.as_str()));
    drop(again);
    // A copy of the directory locks another file.
    let copy = tmp.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(dir.join(LOCK_FILE), copy.join(LOCK_FILE)).unwrap();
    let copied = LogManager::open(&copy).unwrap();
    assert_ne!(copied.lock_identity(), Some(id.as_str()));
}

#[test]
fn a_release_without_opening_keeps_the_clean_shutdown() {
    let tmp = tempfile::tempdir().unwrap();
    LogManager::open(tmp.path()).unwrap().shutdown().unwrap();
    let refused = LogManager::open(tmp.path()).unwrap();
    assert!(refused.had_clean_shutdown());
    refused.release();
    let again = LogManager::open(tmp.path()).unwrap();
    assert!(again.had_clean_shutdown(), "still clean after a release");
    drop(again);
    // Dropped without a release or shutdown: a crash, as before.
    assert!(!LogManager::open(tmp.path()).unwrap().had_clean_shutdown());
}

#[test]
fn clean_shutdown_is_detected_once() {
    let tmp = tempfile::tempdir().unwrap();
    let id = TopicId::random();
    let orders = tp("orders", 0);
    {
        let mgr = LogManager::open(tmp.path()).unwrap();
        assert!(!mgr.had_clean_shutdown());
        let log = mgr.open_log(&orders, id, small()).unwrap();
        for _ in 0..40 {
            append(&log, 3);
        }
        mgr.shutdown().unwrap();
        assert!(tmp.path().join(CLEAN_SHUTDOWN_MARKER).exists());
        assert!(matches!(
            log.append(
                &batch(&simple_records(0, 1, 0)),
                LeaderEpoch(0),
                Timestamp(0)
            ),
            Err(Error::LogClosed)
        ));
    }
    {
        let mgr = LogManager::open(tmp.path()).unwrap();
        assert!(mgr.had_clean_shutdown());
        // The marker is gone, so a crash from here on is noticed.
        assert!(!tmp.path().join(CLEAN_SHUTDOWN_MARKER).exists());
        let log = mgr.open_log(&orders, id, small()).unwrap();
        let stats = log.recovery_stats();
        assert!(stats.clean);
        assert_eq!(stats.segments_recovered, 0);
        assert_eq!(stats.producer_batches_replayed, 0);
        assert_eq!(log.log_end_offset(), Offset(120));
        append(&log, 1);
        // Dropped without shutdown: a crash.
    }
    let mgr = LogManager::open(tmp.path()).unwrap();
    assert!(!mgr.had_clean_shutdown());
    let log = mgr.open_log(&orders, id, small()).unwrap();
    assert!(!log.recovery_stats().clean);
    assert_eq!(log.recovery_stats().segments_recovered, 1);
    assert_eq!(log.log_end_offset(), Offset(121));
}

#[test]
fn scan_finds_partitions_with_dashes_in_topic_names() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path()).unwrap();
    let a = TopicId::random();
    let b = TopicId::random();
    mgr.open_log(&tp("my-topic-name", 12), a, small()).unwrap();
    mgr.open_log(&tp("plain", 0), b, small()).unwrap();
    fs::create_dir(tmp.path().join("no-metadata-1")).unwrap();
    fs::create_dir(tmp.path().join("junk")).unwrap();
    fs::create_dir(tmp.path().join("padded-01")).unwrap();
    fs::write(tmp.path().join("file-3"), b"").unwrap();
    let found = mgr.scan().unwrap();
    assert_eq!(
        found,
        vec![
            (tp("my-topic-name", 12), Some(a)),
            (tp("no-metadata", 1), None),
            (tp("plain", 0), Some(b)),
        ]
    );
}

#[test]
fn topic_ids_must_match() {
    let tmp = tempfile::tempdir().unwrap();
    let id = TopicId::random();
    {
        let mgr = LogManager::open(tmp.path()).unwrap();
        let log = mgr.open_log(&tp("t", 0), id, small()).unwrap();
        assert_eq!(log.topic_id(), id);
        assert!(Arc::ptr_eq(
            &log,
            &mgr.open_log(&tp("t", 0), id, small()).unwrap()
        ));
        assert!(matches!(
            mgr.open_log(&tp("t", 0), TopicId::random(), small()),
            Err(Error::TopicIdMismatch { .. })
        ));
    }
    let mgr = LogManager::open(tmp.path()).unwrap();
    assert!(matches!(
        mgr.open_log(&tp("t", 0), TopicId::random(), small()),
        Err(Error::TopicIdMismatch { .. })
    ));
    let text = fs::read_to_string(tmp.path().join("t-0").join("partition.metadata")).unwrap();
    assert_eq!(text, format!("version: 0\ntopic_id: {id}\n"));
}

#[test]
fn deleted_logs_refuse_work_and_leave_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let id = TopicId::random();
    let t = tp("gone", 2);
    {
        let mgr = LogManager::open(tmp.path()).unwrap();
        let log = mgr.open_log(&t, id, small()).unwrap();
        append(&log, 5);
        mgr.delete_log(&t).unwrap();
        assert!(mgr.get(&t).is_none());
        assert!(log.is_deleted());
        assert!(matches!(
            log.append(
                &batch(&simple_records(0, 1, 0)),
                LeaderEpoch(0),
                Timestamp(0)
            ),
            Err(Error::LogDeleted)
        ));
        assert!(matches!(
            log.read(Offset(0), 100, true),
            Err(Error::LogDeleted)
        ));
        assert!(!tmp.path().join("gone-2").exists());
        assert_eq!(
            fs::read_dir(tmp.path().join(DELETING_DIR)).unwrap().count(),
            0
        );
        // The topic can be created again under a new id.
        let again = mgr.open_log(&t, TopicId::random(), small()).unwrap();
        assert_eq!(again.log_end_offset(), Offset(0));
        mgr.delete_log(&t).unwrap();
        // Deleting what does not exist is fine.
        mgr.delete_log(&t).unwrap();
    }
    // Leftovers of an interrupted deletion survive the restart staged, and
    // go once the delay has passed since the open.
    let leftover = tmp.path().join(DELETING_DIR).join(format!("{id}_2"));
    fs::create_dir_all(&leftover).unwrap();
    fs::write(leftover.join("00000000000000000000.log"), b"x").unwrap();
    let mgr = LogManager::open(tmp.path()).unwrap();
    assert_eq!(mgr.staged(), vec![leftover.clone()]);
    assert!(mgr
        .purge_staged(std::time::Duration::from_secs(3600))
        .is_empty());
    assert!(leftover.exists());
    assert_eq!(
        mgr.purge_staged(std::time::Duration::ZERO),
        vec![leftover.clone()]
    );
    assert!(!leftover.exists() && mgr.staged().is_empty());
}

#[test]
fn a_staged_partition_is_closed_kept_and_removed_after_the_delay() {
    let tmp = tempfile::tempdir().unwrap();
    let t = TopicPartition::new(TopicName::new("stale").unwrap(), PartitionId(0));
    let id = TopicId::random();
    let mgr = LogManager::open(tmp.path()).unwrap();
    let log = mgr.open_log(&t, id, small()).unwrap();
    log.append(
        &batch(&simple_records(0, 3, 0)),
        LeaderEpoch(0),
        Timestamp(0),
    )
    .unwrap();
    let staged = mgr.stage_for_deletion(&t).unwrap().unwrap();
    assert_eq!(
        staged,
        tmp.path().join(DELETING_DIR).join(format!("{id}_0"))
    );
    assert!(
        staged.join("00000000000000000000.log").exists(),
        "files kept"
    );
    assert!(!tmp.path().join("stale-0").exists());
    assert!(mgr.get(&t).is_none());
    assert!(matches!(
        log.read(Offset(0), 100, true),
        Err(Error::LogDeleted)
    ));
    // A new log of the name starts empty, never with the staged data.
    let fresh = mgr.open_log(&t, TopicId::random(), small()).unwrap();
    assert_eq!(fresh.log_end_offset(), Offset(0));
    assert!(mgr
        .purge_staged(std::time::Duration::from_secs(3600))
        .is_empty());
    assert_eq!(
        mgr.purge_staged(std::time::Duration::ZERO),
        vec![staged.clone()]
    );
    assert!(!staged.exists());
}

#[test]
fn retention_and_flushing_run_over_all_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let mgr = LogManager::open(tmp.path()).unwrap();
    let config = LogConfig {
        retention_ms: Some(1000),
        flush_interval_ms: Some(500),
        ..small()
    };
    let a = mgr
        .open_log(&tp("a", 0), TopicId::random(), config.clone())
        .unwrap();
    let b = mgr
        .open_log(&tp("b", 0), TopicId::random(), config)
        .unwrap();
    for _ in 0..30 {
        append(&a, 3);
        append(&b, 3);
    }
    let segments = a.segment_count() + b.segment_count();
    mgr.flush_due(Timestamp(1499)).unwrap();
    assert!(a.recovery_point() < a.log_end_offset());
    mgr.flush_due(Timestamp(1500)).unwrap();
    assert_eq!(a.recovery_point(), a.log_end_offset());
    assert_eq!(b.recovery_point(), b.log_end_offset());
    assert_eq!(mgr.run_retention(Timestamp(1500)).unwrap(), 0);
    let deleted = mgr.run_retention(Timestamp(10_000)).unwrap();
    assert_eq!(deleted as usize, segments - 2);
    assert_eq!(a.segment_count(), 1);
    assert!(matches!(
        mgr.open_log(&tp("a", 0), b.topic_id(), LogConfig::default()),
        Err(Error::TopicIdMismatch { .. })
    ));
}
