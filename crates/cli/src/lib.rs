//! The `magnetar` command-line tools, as a library the `magnetar` binary
//! embeds: topic administration, produce, consume (group), read (Reader),
//! group inspection, coordinator lookup and a load generator. They speak the Kafka protocol through the `client` crate, so
//! they work against any Kafka-compatible broker.
//!
//! Output is an aligned table for people or one JSON document for scripts
//! (`--json`); failures print `magnetar: error: ...` naming the broker and
//! the cause, and exit with a code from [`error`].

#![warn(missing_docs)]

mod bench;
mod consume;
pub mod error;
mod group;
pub mod output;
mod produce;
pub mod properties;
pub mod security;
mod topic;

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::error::{CliError, Context};

/// Options every client command takes.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Broker(s) to bootstrap from, `host:port[,host:port...]`.
    #[arg(
        long,
        global = true,
        env = "MAGNETAR_BOOTSTRAP",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap: String,
    /// Print one JSON document instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Seconds to wait for the broker.
    #[arg(long, global = true, default_value_t = 10)]
    pub timeout: u64,
    /// TLS and SASL.
    #[command(flatten)]
    pub security: security::SecurityArgs,
}

impl GlobalArgs {
    /// The client configuration these options describe, or a usage error
    /// if `--bootstrap` is not a list of `host:port` or the security
    /// options do not fit together.
    pub fn client_config(&self) -> Result<client::ClientConfig, CliError> {
        check_bootstrap(&self.bootstrap)?;
        let security = self.security.security_config()?;
        Ok(client::ClientConfig::from_bootstrap_list(&self.bootstrap)
            .client_id("magnetar-cli")
            .connect_timeout(Duration::from_secs(self.timeout))
            .request_timeout(Duration::from_secs(self.timeout))
            .security(security))
    }

    /// A connection pool, or an error naming the broker.
    pub async fn connect(&self) -> Result<client::Client, CliError> {
        client::Client::connect(self.client_config()?)
            .await
            .context("cannot connect", &self.bootstrap)
    }

    /// An admin client, or an error naming the broker.
    pub async fn admin(&self) -> Result<client::Admin, CliError> {
        Ok(client::Admin::new(self.connect().await?))
    }
}

/// Checks a `host:port[,host:port...]` list; a missing or bad port is bad
/// usage, not an unreachable broker.
fn check_bootstrap(list: &str) -> Result<(), CliError> {
    let entries: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(CliError::Usage(
            "--bootstrap is empty; give host:port[,host:port...]".into(),
        ));
    }
    for e in entries {
        let ok = e.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !ok {
            return Err(CliError::Usage(format!(
                "--bootstrap entry {e:?} is not host:port (Kafka brokers usually listen on port 9092)"
            )));
        }
    }
    Ok(())
}

/// The client subcommands of `magnetar`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, list, describe, alter and delete topics.
    Topic(topic::TopicArgs),
    /// Write records read from stdin or a file, one per line.
    Produce(produce::ProduceArgs),
    /// Consume a topic or a regex pattern as a member of a group.
    Consume(consume::ConsumeArgs),
    /// Read a topic from a position without a group (a Reader).
    Read(consume::ReadArgs),
    /// List, describe and reset consumer groups.
    Group(group::GroupArgs),
    /// Find the coordinators of groups (one batched request where supported).
    Coordinator(group::CoordinatorArgs),
    /// Generate load and report throughput and latency (any Kafka-compatible broker).
    Bench(bench::BenchArgs),
}

/// Runs a client subcommand to completion and returns the exit code.
pub fn run(command: Command) -> ExitCode {
    match command {
        Command::Topic(a) => block_on(topic::run(a)),
        Command::Produce(a) => block_on(produce::run(a)),
        Command::Consume(a) => block_on(consume::consume(a)),
        Command::Read(a) => block_on(consume::read(a)),
        Command::Group(a) => block_on(group::run(a)),
        Command::Coordinator(a) => block_on(group::coordinator(a)),
        Command::Bench(a) => block_on(bench::run(a)),
    }
}

fn block_on(f: impl Future<Output = Result<(), CliError>>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return CliError::Io(e).report(),
    };
    match rt.block_on(f) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(),
    }
}

/// Parses `KEY=VALUE`.
pub(crate) fn key_value(s: &str) -> Result<(String, String), CliError> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| CliError::Usage(format!("expected KEY=VALUE, got {s:?}")))
}
