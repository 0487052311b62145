//! The background task that runs retention and time-based flushing.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::{now_ms, Broker};

/// Starts the maintenance loop: time-based flushes are checked every tick
/// (at most a second apart, sooner if `log.flush.interval.ms` is shorter),
/// and so are deleted segments' files due for removal
/// (`file.delete.delay.ms`); retention runs every
/// `log.retention.check.interval.ms`.
pub fn spawn(broker: Arc<Broker>) -> JoinHandle<()> {
    let timers = crate::group::coordinator::spawn_timers(broker.clone());
    tokio::spawn(async move {
        // Dropping a JoinHandle does not stop its task; this guard does.
        let _timers = AbortOnDrop(timers);
        let mut last_retention = tokio::time::Instant::now();
        let mut last_offsets_expiry = tokio::time::Instant::now();
        loop {
            let config = broker.config();
            let retention_every = Duration::from_millis(config.retention_check_interval_ms());
            let tick = config
                .flush_interval_ms()
                .map(Duration::from_millis)
                .unwrap_or(Duration::from_secs(1))
                .min(retention_every)
                .clamp(Duration::from_millis(10), Duration::from_secs(1));
            tokio::time::sleep(tick).await;
            let run_retention = last_retention.elapsed() >= retention_every;
            if run_retention {
                last_retention = tokio::time::Instant::now();
            }
            let offsets_every = Duration::from_millis(
                config.int_value("offsets.retention.check.interval.ms") as u64,
            );
            if last_offsets_expiry.elapsed() >= offsets_every {
                last_offsets_expiry = tokio::time::Instant::now();
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    match b.groups().expire_and_compact(now_ms().0) {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(offsets = n, "expired committed offsets"),
                        Err(e) => tracing::warn!("offset expiry failed: {e}"),
                    }
                })
                .await;
            }
            let b = broker.clone();
            // Retention deletes files and flushing fsyncs: keep them off the
            // request-serving threads.
            let _ = tokio::task::spawn_blocking(move || b.run_maintenance(now_ms(), run_retention))
                .await;
        }
    })
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
