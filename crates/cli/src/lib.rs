//! The `magnetar` command-line tools, as a library the `magnetar` binary
//! embeds: topic administration, produce, consume (group), read (Reader),
//! group inspection, coordinator lookup and a load generator. They speak the Kafka protocol through the `client` crate, so
//! they work against any Kafka-compatible broker.
//!
//! Output is an aligned table for people or one JSON document for scripts
//! (`--json`); failures print `magnetar: error: ...` naming the broker and
//! the cause, and exit with a code from [`error`].

#![warn(missing_docs)]

mod args;
mod bench;
mod consume;
pub mod error;
mod group;
pub mod output;
mod produce;
pub mod properties;
mod reassign;
pub mod security;
mod topic;

use std::future::Future;
use std::process::ExitCode;

use clap::Subcommand;

use crate::error::CliError;

pub(crate) use crate::args::key_value;
pub use crate::args::GlobalArgs;

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
