//! The background tasks that run retention, time-based flushing and the
//! log cleaner.

use std::sync::Arc;
use std::time::Duration;

use storage::{Log, LogCleaner};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::{now_ms, Broker};

/// Starts the maintenance loop: time-based flushes are checked every tick
/// (at most a second apart, sooner if `log.flush.interval.ms` is shorter),
/// and so are deleted segments' files due for removal
/// (`file.delete.delay.ms`); retention runs every
/// `log.retention.check.interval.ms`; and the log cleaner runs alongside
/// (see [`spawn_cleaner`]). [`Maintenance::stop`] ends them.
pub fn spawn(broker: Arc<Broker>) -> Maintenance {
    let (stop, mut stopped) = watch::channel(false);
    let timers = crate::groups::spawn_timers(broker.clone());
    let slots = broker.spawn_group_slot_keeper();
    let cleaner = spawn_cleaner(broker.clone(), stop.subscribe());
    let recovery = spawn_transaction_recovery(broker.clone(), stop.subscribe());
    let task = tokio::spawn(async move {
        // Dropping a JoinHandle does not stop its task; this guard does.
        let _timers = AbortOnDrop(timers);
        let _slots = AbortOnDrop(slots);
        let mut cleaner = AbortOnDrop(cleaner);
        let mut recovery = AbortOnDrop(recovery);
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
            // Blocking work below is awaited before the next wait, so once
            // stopped here none is left running.
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                // (The guard `wait_for` answers is not Send: drop it here.)
                _ = async { stopped.wait_for(|s| *s).await.map(|_| ()) } => {
                    let _ = (&mut cleaner.0).await;
                    let _ = (&mut recovery.0).await;
                    return;
                }
            }
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
                    for groups in b.coordinators_with_home() {
                        match groups.expire_and_compact(now_ms().0) {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(offsets = n, "expired committed offsets"),
                            Err(e) => tracing::warn!("offset expiry failed: {e}"),
                        }
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
    });
    Maintenance { stop, task }
}

/// Every second, aborts transactions past their timeout and finishes those
/// left prepared (by a crash, or a broker that could not be reached), on
/// its own blocking thread: waiting for another broker never holds up
/// flushes and retention.
fn spawn_transaction_recovery(
    broker: Arc<Broker>,
    mut stopped: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = async { stopped.wait_for(|s| *s).await.map(|_| ()) } => return,
            }
            let b = broker.clone();
            let stop = stopped.clone();
            let _ = tokio::task::spawn_blocking(move || {
                b.complete_prepared_transactions_while(|| !*stop.borrow())
            })
            .await;
        }
    })
}

/// The running maintenance tasks.
pub struct Maintenance {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Maintenance {
    /// Stops every maintenance task and waits until none of their file
    /// work is running (a cleaning ends after the segment group it is
    /// writing), so the logs can be closed after it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// The partitions the log cleaner looks after: those of topics with
/// `cleanup.policy` including `compact`. `__consumer_offsets` is not among
/// them: the group coordinator compacts it by snapshotting its live state.
fn compacted_logs(broker: &Broker) -> Vec<Arc<Log>> {
    broker
        .topics()
        .iter()
        .filter(|t| !t.name.is_internal())
        .flat_map(|t| t.partitions.iter().map(|p| Arc::clone(p.log())))
        .filter(|log| log.config().cleanup_policy.compact)
        .collect()
}

/// Starts the log cleaner (Kafka's `log.cleaner.*` settings, read anew each
/// round): up to `log.cleaner.threads` cleanings at a time, each on a
/// blocking thread (the file work never runs on the async workers; the
/// logs' locks are taken only to swap cleaned segments in), each taking the
/// compacted partition that needs it most. When none does, the cleaner waits
/// `log.cleaner.backoff.ms`. Each cleaning is logged (`cleaned log`: offsets,
/// segments and bytes before and after, records removed, duration).
///
/// Once `stop` turns true, no cleaning starts and the task ends when the
/// running ones have.
pub fn spawn_cleaner(broker: Arc<Broker>, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let cleaner = LogCleaner::new(broker.config().log_cleaner());
        let mut running = JoinSet::new();
        let mut idle_until: Option<tokio::time::Instant> = None;
        // A dropped sender means stop too.
        let mut stopping = false;
        loop {
            if stopping || *stop.borrow() {
                cleaner.stop();
                while running.join_next().await.is_some() {}
                return;
            }
            let config = broker.config().log_cleaner();
            if config != cleaner.config() {
                cleaner.set_config(config.clone());
            }
            let backoff = Duration::from_millis(config.backoff_ms);
            let may_start = config.enable
                && running.len() < config.threads
                && idle_until.is_none_or(|t| tokio::time::Instant::now() >= t);
            if may_start {
                idle_until = None;
                let (b, c) = (broker.clone(), cleaner.clone());
                running.spawn_blocking(move || c.clean_filthiest(&compacted_logs(&b), now_ms()));
                continue;
            }
            let wake = idle_until.unwrap_or_else(|| tokio::time::Instant::now() + backoff);
            tokio::select! {
                Some(done) = running.join_next() => {
                    match done {
                        // More may be due: look again at once.
                        Ok(Ok(Some(_))) => {}
                        Ok(Ok(None)) => {
                            idle_until = Some(tokio::time::Instant::now() + backoff);
                        }
                        Ok(Err(e)) => {
                            // The log is left alone for a while (the
                            // cleaner says which and why).
                            tracing::debug!("log cleaning failed: {e}");
                        }
                        Err(e) => {
                            tracing::warn!("log cleaner thread failed: {e}");
                            idle_until = Some(tokio::time::Instant::now() + backoff);
                        }
                    }
                }
                _ = tokio::time::sleep_until(wake) => {}
                changed = stop.changed() => stopping |= changed.is_err(),
            }
        }
    })
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
