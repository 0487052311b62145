//! `magnetar bench`: an OpenMessaging-style load generator that works against
//! any Kafka-compatible broker, so results can be compared side by side.
//!
//! Every payload starts with its send time (µs since the Unix epoch), so a
//! consumer can measure end-to-end latency without clock sync beyond the one
//! machine running the benchmark.

mod consume;
mod produce;
mod pulsar;
mod pulsar_conn;
mod report;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand, ValueEnum};
use client::{Admin, NewTopic};

use crate::error::{CliError, Context};
use crate::GlobalArgs;

pub use report::Report;

/// `magnetar bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    mode: BenchMode,
}

#[derive(Debug, Subcommand)]
enum BenchMode {
    /// Producers only: throughput and acknowledgement latency.
    Produce(Workload),
    /// Consumers only, reading what the topics hold: throughput, timed from
    /// the first message to the last (stops once the backlog is read).
    Consume(Workload),
    /// Producers and consumers together: throughput and end-to-end latency.
    E2e(Workload),
}

/// The protocol the benchmark's producers and consumers speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// The Kafka protocol, with Magnetar's own client (`--bootstrap`).
    Kafka,
    /// The Pulsar binary protocol (`--service-url`); topics are still
    /// created, measured and deleted through the Kafka listener.
    Pulsar,
}

/// The workload, shared by every mode.
#[derive(Debug, Clone, Args)]
pub struct Workload {
    /// Protocol of the producers and consumers.
    #[arg(long, value_enum, default_value = "kafka")]
    pub protocol: Protocol,
    /// Pulsar service URL (with `--protocol pulsar`).
    #[arg(
        long,
        env = "MAGNETAR_PULSAR_URL",
        default_value = "pulsar://127.0.0.1:6650"
    )]
    pub service_url: String,
    /// Number of topics (named PREFIX-0, PREFIX-1, ...; created if missing).
    #[arg(long, default_value_t = 1)]
    pub topics: usize,
    /// Partitions per topic (when created).
    #[arg(long, default_value_t = 8)]
    pub partitions: i32,
    /// Replication factor of the topics it creates (-1: the broker's
    /// `default.replication.factor`).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub replication_factor: i16,
    /// Payload size in bytes (at least 8: the send time is embedded).
    #[arg(long, default_value_t = 1024)]
    pub message_size: usize,
    /// Target messages per second over all producers; 0 = as fast as possible.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Producer instances.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Consumer instances (consume and e2e modes).
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// 0, 1 or all (Kafka; a Pulsar broker acknowledges once stored).
    #[arg(long, default_value = "all")]
    pub acks: String,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// Producer linger (Pulsar: batching delay), in milliseconds.
    #[arg(long, default_value_t = 1)]
    pub linger_ms: u64,
    /// Topic name prefix.
    #[arg(long, default_value = "bench")]
    pub topic_prefix: String,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Keep the topics (and consumer group) this run created; by default
    /// they are deleted at the end. Use it to `bench consume` what
    /// `bench produce` wrote.
    #[arg(long)]
    pub keep: bool,
    #[command(flatten)]
    pub global: GlobalArgs,
}

impl Workload {
    /// The topic names.
    pub fn topic_names(&self) -> Vec<String> {
        (0..self.topics)
            .map(|i| format!("{}-{i}", self.topic_prefix))
            .collect()
    }

    fn validate(&self) -> Result<(), CliError> {
        if self.message_size < 8 {
            return Err(CliError::Usage(
                "--message-size must be at least 8 bytes".into(),
            ));
        }
        if self.topics == 0 || self.producers == 0 || self.duration == 0 {
            return Err(CliError::Usage(
                "--topics, --producers and --duration must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// Creates missing topics; returns the ones it created.
    async fn ensure_topics(&self, admin: &Admin) -> Result<Vec<String>, CliError> {
        let b = self.global.bootstrap.as_str();
        let names = self.topic_names();
        let new: Vec<NewTopic> = names
            .iter()
            .map(|n| NewTopic::new(n, self.partitions).replication_factor(self.replication_factor))
            .collect();
        let res = admin
            .create_topics(&new, false)
            .await
            .context("cannot create bench topics", b)?;
        let mut created = Vec::new();
        for (name, r) in res {
            match r {
                Ok(_) => created.push(name),
                Err(e) if e.kafka_error() == Some(client::ResponseError::TopicAlreadyExists) => {}
                Err(e) => return Err(e).context(format!("cannot create {name}"), b),
            }
        }
        Ok(created)
    }

    /// Deletes what this run created (topics, the group), unless `--keep`.
    async fn clean_up(&self, admin: &Admin, topics: &[String], group: Option<&str>) {
        if self.keep {
            return;
        }
        if let Some(g) = group {
            // The consumers have closed; the group is empty.
            match self.protocol {
                Protocol::Kafka => {
                    if let Err(e) = admin.delete_groups(&[g]).await {
                        eprintln!("magnetar: could not delete bench group {g}: {e}");
                    }
                }
                Protocol::Pulsar => {
                    if let Err(e) = pulsar::unsubscribe(self, g).await {
                        eprintln!("magnetar: could not remove bench subscription {g}: {e}");
                    }
                }
            }
        }
        if topics.is_empty() {
            return;
        }
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        match admin.delete_topics(&refs).await {
            Ok(results) => {
                for (t, r) in results {
                    if let Err(e) = r {
                        eprintln!("magnetar: could not delete bench topic {t}: {e}");
                    }
                }
            }
            Err(e) => eprintln!("magnetar: could not delete bench topics: {e}"),
        }
    }
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_micros() as u64
}

/// Runs `magnetar bench`.
pub async fn run(args: BenchArgs) -> Result<(), CliError> {
    match args.mode {
        BenchMode::Produce(w) => {
            w.validate()?;
            let admin = w.global.admin().await?;
            let created = w.ensure_topics(&admin).await?;
            let report = run_producers(&w, &admin).await;
            w.clean_up(&admin, &created, None).await;
            report?.print(w.global.json);
            Ok(())
        }
        BenchMode::Consume(w) => {
            w.validate()?;
            let admin = w.global.admin().await?;
            let created = w.ensure_topics(&admin).await?;
            let group = format!("magnetar-bench-{}", now_micros());
            let consumers = start_consumers(&w, &admin, true, &group, false).await?;
            let backlog = backlog(&w, &admin).await?;
            let progress = produce::progress_bar(&w, consumers.done.clone());
            let started = std::time::Instant::now();
            // Until the backlog is read, or --duration at most.
            let until = started + Duration::from_secs(w.duration);
            while consumers.done.load(std::sync::atomic::Ordering::Relaxed) < backlog
                && std::time::Instant::now() < until
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let report = consumers.finish(started, true).await;
            if let Some(p) = progress {
                p.finish_and_clear();
            }
            w.clean_up(&admin, &created, Some(&group)).await;
            report?.print(w.global.json);
            Ok(())
        }
        BenchMode::E2e(w) => {
            w.validate()?;
            let admin = w.global.admin().await?;
            let created = w.ensure_topics(&admin).await?;
            let group = format!("magnetar-bench-{}", now_micros());
            let result = e2e(&w, &admin, &group).await;
            w.clean_up(&admin, &created, Some(&group)).await;
            result
        }
    }
}

/// Runs the producers in the workload's protocol.
async fn run_producers(w: &Workload, admin: &Admin) -> Result<Report, CliError> {
    match w.protocol {
        Protocol::Kafka => produce::run(w, admin.client().clone()).await,
        Protocol::Pulsar => {
            let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let progress = produce::progress_bar(w, done.clone());
            let report = pulsar::produce(w, done).await;
            if let Some(p) = progress {
                p.finish_and_clear();
            }
            report
        }
    }
}

/// Starts the consumers in the workload's protocol: a Kafka group, or a
/// Pulsar Shared subscription, named `group`; from the earliest message or
/// only new ones.
async fn start_consumers(
    w: &Workload,
    admin: &Admin,
    earliest: bool,
    group: &str,
    measure_latency: bool,
) -> Result<consume::Consumers, CliError> {
    match w.protocol {
        Protocol::Kafka => {
            let from = if earliest {
                client::AutoOffsetReset::Earliest
            } else {
                client::AutoOffsetReset::Latest
            };
            consume::start(w, admin.client(), from, group, measure_latency).await
        }
        Protocol::Pulsar => pulsar::start_consumers(w, earliest, group, measure_latency).await,
    }
}

/// Messages the bench topics hold now (log end minus log start, summed).
async fn backlog(w: &Workload, admin: &Admin) -> Result<u64, CliError> {
    let b = w.global.bootstrap.as_str();
    let names = w.topic_names();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut parts = Vec::new();
    for (name, t) in admin
        .describe_topics(&refs)
        .await
        .context("cannot describe bench topics", b)?
    {
        let t = t.context(format!("cannot describe {name}"), b)?;
        parts.extend(t.partitions.iter().map(|p| (name.clone(), p.partition)));
    }
    let asked: Vec<(&str, i32)> = parts.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    let mut total = 0i64;
    let ends = admin
        .list_offsets(&asked, client::OffsetSpec::Latest)
        .await
        .context("cannot look up offsets", b)?;
    let starts = admin
        .list_offsets(&asked, client::OffsetSpec::Earliest)
        .await
        .context("cannot look up offsets", b)?;
    for (k, end) in ends {
        let what = format!("cannot look up {}-{}", k.0, k.1);
        let end = end.context(what.clone(), b)?;
        let start = starts
            .iter()
            .find(|(sk, _)| *sk == k)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| Err(client::Error::NotFound(what.clone())))
            .context(what, b)?;
        total += (end.offset - start.offset).max(0);
    }
    Ok(total as u64)
}

/// `bench e2e`: produces and consumes at once, then prints both reports.
async fn e2e(w: &Workload, admin: &Admin, group: &str) -> Result<(), CliError> {
    let names = w.topic_names();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let described = admin
        .describe_topics(&refs)
        .await
        .context("cannot describe bench topics", &w.global.bootstrap)?;
    let partitions: u64 = described
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .map(|t| t.partitions.len() as u64)
        .sum();
    let consumers = start_consumers(w, admin, false, group, true).await?;
    consumers.ready(partitions).await?;
    let produced = run_producers(w, admin).await?;
    // Let the last messages arrive.
    let drain_until = std::time::Instant::now() + Duration::from_secs(5);
    while consumers.done.load(std::sync::atomic::Ordering::Relaxed) < produced.messages
        && std::time::Instant::now() < drain_until
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut e2e = consumers
        .finish(std::time::Instant::now() - produced.elapsed, false)
        .await?;
    e2e.elapsed = produced.elapsed;
    if w.global.json {
        crate::output::print_json(
            &serde_json::json!({"produce": produced.to_json(), "e2e": e2e.to_json()}),
        );
    } else {
        produced.print(false);
        e2e.print(false);
    }
    Ok(())
}
