//! The background task that runs retention and time-based flushing.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::{now_ms, Broker};

/// Starts the maintenance loop: time-based flushes are checked every tick
/// (at most a second apart, sooner if `log.flush.interval.ms` is shorter),
/// retention every `log.retention.check.interval.ms`.
pub fn spawn(broker: Arc<Broker>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut last_retention = tokio::time::Instant::now();
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
            let b = broker.clone();
            // Retention deletes files and flushing fsyncs: keep them off the
            // request-serving threads.
            let _ = tokio::task::spawn_blocking(move || b.run_maintenance(now_ms(), run_retention))
                .await;
        }
    })
}
