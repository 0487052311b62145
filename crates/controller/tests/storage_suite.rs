//! openraft's storage test suite against the file log and state machine store.

use controller::log_store::{LogOptions, LogStore};
use controller::sm_store::SmStore;
use controller::types::{StorageError, TypeConfig};
use controller::{IoMode, KvMap};
use openraft::testing::{StoreBuilder, Suite};

struct Builder {
    io_mode: IoMode,
}

impl StoreBuilder<TypeConfig<KvMap>, LogStore<KvMap>, SmStore<KvMap>, tempfile::TempDir>
    for Builder
{
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore<KvMap>, SmStore<KvMap>), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let opts = LogOptions {
            // Small segments, so the suite's truncations and purges cross files.
            segment_bytes: 256,
            io_mode: self.io_mode,
            ..LogOptions::default()
        };
        let log = LogStore::open(&dir.path().join("log"), &opts)
            .await
            .expect("open log");
        let sm = SmStore::open(&dir.path().join("sm"), KvMap::default(), self.io_mode)
            .await
            .expect("open state machine");
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite_threaded() {
    if let Err(e) = Suite::test_all(Builder {
        io_mode: IoMode::Threaded,
    }) {
        panic!("storage suite: {e}");
    }
}

#[test]
fn openraft_storage_suite_inline() {
    if let Err(e) = Suite::test_all(Builder {
        io_mode: IoMode::Inline,
    }) {
        panic!("storage suite: {e}");
    }
}
