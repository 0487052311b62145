//! The `magnetar` command: runs the broker (`magnetar standalone`) and the
//! client tools (`magnetar topic|produce|group|coordinator ...`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod standalone;

/// jemalloc rather than the system allocator: glibc's malloc keeps memory
/// freed by closed connections and finished requests (its per-thread
/// arenas return little to the system), so the broker's RSS only grew;
/// jemalloc returns unused pages after a few seconds (measured in the
/// README, "Resources a client can take").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options (`_RJEM_MALLOC_CONF` in the environment overrides
/// them): a background thread returns unused pages (freed pages go back
/// to the system within about a second rather than at the next
/// allocation), instead of lazily (`MADV_FREE`, which still counts in the
/// RSS until the kernel reclaims it).
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Magnetar: a Kafka-compatible event-streaming broker.
#[derive(Debug, Parser)]
#[command(name = "magnetar", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a single-node broker.
    Standalone(StandaloneArgs),
    /// Run a node of a cluster: a broker, and with --controller-addr also a
    /// voter of the controller quorum (combined mode).
    Broker(BrokerArgs),
    #[command(flatten)]
    Client(cli::Command),
}

/// Flags of `magnetar standalone`.
#[derive(Debug, clap::Args)]
pub struct StandaloneArgs {
    /// Directory for partitions and metadata.
    #[arg(long, default_value = broker::config::DEFAULT_DATA_DIR, env = "MAGNETAR_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Address of the Kafka listener (port 0 picks a free port).
    #[arg(long, default_value = broker::config::DEFAULT_KAFKA_ADDR, env = "MAGNETAR_KAFKA_ADDR")]
    pub kafka_addr: String,
    /// Address of the Pulsar listener (port 0 picks a free port).
    #[arg(long, default_value = broker::config::DEFAULT_PULSAR_ADDR, env = "MAGNETAR_PULSAR_ADDR")]
    pub pulsar_addr: String,
    /// Address of the HTTP service: lookup, admin REST, health (port 0
    /// picks a free port).
    #[arg(long, default_value = broker::config::DEFAULT_HTTP_ADDR, env = "MAGNETAR_HTTP_ADDR")]
    pub http_addr: String,
    /// A TOML file of configuration keys (Kafka property names).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Set one configuration key, overriding the file (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Flags of `magnetar broker`.
#[derive(Debug, clap::Args)]
pub struct BrokerArgs {
    /// This node's id (`node.id`), unique in the cluster.
    #[arg(long)]
    pub node_id: i32,
    /// The controller quorum, `id@host:port,...` (`controller.quorum.voters`).
    #[arg(long)]
    pub controller_quorum: String,
    /// Run this node's controller, listening here (`process.roles=broker,controller`);
    /// the node must be one of the voters. Without it the node is a broker
    /// only (`process.roles=broker`).
    #[arg(long)]
    pub controller_addr: Option<String>,
    #[command(flatten)]
    pub node: StandaloneArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Standalone(args) => standalone::main(args),
        Command::Broker(args) => standalone::broker_main(args),
        Command::Client(command) => {
            // Output piped into `head` and the like ends quietly when the
            // reader goes, as other command-line tools do, instead of a
            // panic on the broken pipe. (The broker keeps ignoring SIGPIPE:
            // a client closing its socket must not kill it.)
            // SAFETY: setting a signal disposition has no preconditions.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            }
            cli::run(command)
        }
    }
}
