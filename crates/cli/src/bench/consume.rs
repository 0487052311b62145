//! The consuming side of a benchmark: group consumers that count messages
//! and measure end-to-end latency from the send time in each payload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{AutoOffsetReset, Client, Consumer};

use super::{now_micros, Report, Workload};
use crate::error::{CliError, Context};

/// What one consumer task ends with: its report and when its first and
/// last messages arrived.
pub type ConsumerResult = Result<(Report, Option<(Instant, Instant)>), CliError>;

/// Running consumers.
pub struct Consumers {
    tasks: Vec<tokio::task::JoinHandle<ConsumerResult>>,
    stop: Arc<tokio::sync::watch::Sender<bool>>,
    /// Messages consumed so far, for the progress bar.
    pub done: Arc<AtomicU64>,
    /// Partitions each consumer holds.
    assigned: Arc<Vec<AtomicU64>>,
}

/// Starts `w.consumers` group consumers on the bench topics.
pub async fn start(
    w: &Workload,
    client: &Client,
    from: AutoOffsetReset,
    group: &str,
    measure_latency: bool,
) -> Result<Consumers, CliError> {
    let b = w.global.bootstrap.as_str();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let done = Arc::new(AtomicU64::new(0));
    let assigned: Arc<Vec<AtomicU64>> =
        Arc::new((0..w.consumers).map(|_| AtomicU64::new(0)).collect());
    let not_before = now_micros();
    let topics = w.topic_names();
    let mut tasks = Vec::new();
    for i in 0..w.consumers {
        let mut c = Consumer::builder()
            .client(client.clone())
            .group_id(group)
            .auto_offset_reset(from)
            .enable_auto_commit(false)
            .fetch_max_wait(Duration::from_millis(100))
            .build()
            .await
            .context("cannot start a consumer", b)?;
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        c.subscribe(&refs).context("cannot subscribe", b)?;
        let mut stop = rx.clone();
        let done = done.clone();
        let assigned = assigned.clone();
        let broker = b.to_string();
        tasks.push(tokio::spawn(async move {
            let mut report = Report::new(if measure_latency { "e2e" } else { "consume" });
            let mut seen: Option<(Instant, Instant)> = None;
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    m = c.poll(Duration::from_millis(200)) => {
                        assigned[i].store(c.assignment().len() as u64, Ordering::Relaxed);
                        if let Some(m) = m.context("consuming failed", &broker)? {
                            let value = m.value().unwrap_or_default();
                            let sent = if value.len() >= 8 {
                                u64::from_be_bytes(value[..8].try_into().unwrap_or([0; 8]))
                            } else {
                                0
                            };
                            // End-to-end runs count only this run's messages.
                            if measure_latency && sent < not_before {
                                continue;
                            }
                            let latency = if measure_latency { now_micros().saturating_sub(sent) } else { 0 };
                            report.record(value.len(), latency);
                            let now = Instant::now();
                            seen = Some((seen.map_or(now, |(first, _)| first), now));
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            let _ = c.close().await;
            Ok((report, seen))
        }));
    }
    Ok(Consumers {
        tasks,
        stop: Arc::new(tx),
        done,
        assigned,
    })
}

impl Consumers {
    /// Consumers running as `tasks`, stopped through `stop`, counting into
    /// `done`, holding `assigned` partitions each.
    pub fn new(
        tasks: Vec<tokio::task::JoinHandle<ConsumerResult>>,
        stop: tokio::sync::watch::Sender<bool>,
        done: Arc<AtomicU64>,
        assigned: Vec<AtomicU64>,
    ) -> Consumers {
        Consumers {
            tasks,
            stop: Arc::new(stop),
            done,
            assigned: Arc::new(assigned),
        }
    }

    /// Waits (up to 60 s) until the group has assigned all `partitions`.
    pub async fn ready(&self, partitions: u64) -> Result<(), CliError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let held: u64 = self
                .assigned
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .sum();
            if held >= partitions {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(CliError::Usage(format!(
                    "the consumers hold {held} of {partitions} partitions after 60 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the consumers and merges their reports. The elapsed time runs
    /// from `started` to the last message received, or, with
    /// `from_first_message`, from the first message to the last (a consume
    /// benchmark should not count joining the group).
    pub async fn finish(
        self,
        started: Instant,
        from_first_message: bool,
    ) -> Result<Report, CliError> {
        let _ = self.stop.send(true);
        let mut total: Option<Report> = None;
        let mut span: Option<(Instant, Instant)> = None;
        for t in self.tasks {
            let (r, seen) = t
                .await
                .map_err(|e| CliError::Usage(format!("consumer task failed: {e}")))??;
            if let Some((first, last)) = seen {
                span = Some(match span {
                    None => (first, last),
                    Some((f, l)) => (f.min(first), l.max(last)),
                });
            }
            match &mut total {
                None => total = Some(r),
                Some(t) => {
                    t.messages += r.messages;
                    t.bytes += r.bytes;
                    t.errors += r.errors;
                    let _ = t.latency.add(&r.latency);
                }
            }
        }
        let mut report = total.unwrap_or_else(|| Report::new("consume"));
        report.elapsed = match span {
            Some((first, last)) if from_first_message => last.saturating_duration_since(first),
            Some((_, last)) => last.saturating_duration_since(started),
            None => Instant::now().saturating_duration_since(started),
        };
        Ok(report)
    }
}
