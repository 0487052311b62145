//! `magnetar standalone` and `magnetar broker`: configuration, start-up,
//! signals, clean shutdown.

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;

use broker::config::BrokerConfig;
use magnetar::node::Node;
use tracing::info;

use crate::{BrokerArgs, StandaloneArgs};

/// Runs the broker until SIGTERM or SIGINT; exit code 0 after a clean
/// shutdown, 1 on a start-up or shutdown failure, 2 on bad configuration.
pub fn main(args: StandaloneArgs) -> ExitCode {
    // A quorum named in the configuration would make this node join it:
    // that is `magnetar broker`, with a directory of its own.
    let config = build_config(&args).and_then(|c| {
        let voters = c.string_value("controller.quorum.voters");
        if voters.is_empty() {
            Ok(c)
        } else {
            Err(broker::Error::Config {
                key: "controller.quorum.voters".into(),
                reason: format!("{voters}: a standalone node is a quorum of one and joins no other; run magnetar broker to join a cluster"),
            })
        }
    });
    launch(config)
}

/// `magnetar broker`: as [`main`], as a node of the cluster the flags
/// name.
pub fn broker_main(args: BrokerArgs) -> ExitCode {
    let config = build_config(&args.node).and_then(|mut c| {
        if args.controller_quorum.trim().is_empty() {
            return Err(broker::Error::Config {
                key: "--controller-quorum".into(),
                reason: "empty: name the controller voters (id@host:port,...); a node of its own is magnetar standalone".into(),
            });
        }
        c.apply_assignment(&format!("node.id={}", args.node_id))?;
        c.apply_assignment(&format!(
            "controller.quorum.voters={}",
            args.controller_quorum
        ))?;
        match &args.controller_addr {
            Some(a) => {
                c.apply_assignment("process.roles=broker,controller")?;
                c.apply_assignment(&format!("controller.listen.address={a}"))?;
            }
            None => c.apply_assignment("process.roles=broker")?,
        }
        Ok(c)
    });
    launch(config)
}

fn launch(config: Result<BrokerConfig, broker::Error>) -> ExitCode {
    if let Err(e) = init_tracing() {
        eprintln!("magnetar: {e}");
        return ExitCode::from(2);
    }
    let mut config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("magnetar: {e}");
            return ExitCode::from(2);
        }
    };
    config.open_file_limit = raise_open_file_limit();
    // Writes past a file-size limit must fail with EFBIG (an error on that
    // partition) rather than kill the process with SIGXFSZ.
    // SAFETY: setting a signal disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("magnetar: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once, on stderr; every error message here already carries
            // its cause, so the plain form is complete.
            eprintln!("magnetar: {e}");
            ExitCode::from(1)
        }
    }
}

/// The log filter without `MAGNETAR_LOG`: the Raft library's routine
/// lines (elections, log appends) only when something is wrong.
const DEFAULT_LOG_FILTER: &str = "info,openraft=warn";

/// Log output: level filter from `MAGNETAR_LOG` (or `RUST_LOG`), format
/// from `MAGNETAR_LOG_FORMAT` (`text`, the default, or `json`: one JSON
/// object per line). Colours only when stderr is a terminal and `NO_COLOR`
/// is not set.
fn init_tracing() -> Result<(), String> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("MAGNETAR_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let format = std::env::var("MAGNETAR_LOG_FORMAT").unwrap_or_default();
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format.to_ascii_lowercase().as_str() {
        "" | "text" => builder.with_ansi(colour).init(),
        "json" => builder.json().with_current_span(false).init(),
        other => {
            return Err(format!(
                "MAGNETAR_LOG_FORMAT must be text or json, not {other:?}"
            ))
        }
    }
    Ok(())
}

/// Raises the soft open-file limit to the hard one (a broker holds a file
/// per open segment and a socket per client) and returns the limit now in
/// force.
fn raise_open_file_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

fn build_config(args: &StandaloneArgs) -> Result<BrokerConfig, broker::Error> {
    let addr = resolve(&args.kafka_addr).map_err(|reason| broker::Error::Config {
        key: "--kafka-addr".into(),
        reason,
    })?;
    let mut config = BrokerConfig::new(&args.data_dir, addr);
    config.pulsar_addr =
        Some(
            resolve(&args.pulsar_addr).map_err(|reason| broker::Error::Config {
                key: "--pulsar-addr".into(),
                reason,
            })?,
        );
    config.http_addr = Some(
        resolve(&args.http_addr).map_err(|reason| broker::Error::Config {
            key: "--http-addr".into(),
            reason,
        })?,
    );
    if let Some(path) = &args.config {
        config.apply_toml_file(path)?;
    }
    for assignment in &args.set {
        config.apply_assignment(assignment)?;
    }
    let listeners = config.kafka_listeners()?;
    if let Some(l) = listeners.iter().find(|l| l.protocol.tls()) {
        if config.tls_settings().is_none() {
            return Err(broker::Error::Config {
                key: "ssl.keystore.location".into(),
                reason: format!(
                    "listener {} is {} and needs a PEM keystore (certificate chain and key)",
                    l.name, l.protocol
                ),
            });
        }
    }
    Ok(config)
}

fn resolve(addr: &str) -> Result<SocketAddr, String> {
    addr.to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr:?} resolves to no address"))
}

async fn run(config: BrokerConfig) -> anyhow::Result<()> {
    // Before anything is announced: a SIGTERM right after the ready line
    // must shut down cleanly, not kill the process by default action.
    let mut signals = Signals::install()?;
    let start = Node::start(config);
    tokio::pin!(start);
    let node = tokio::select! {
        node = &mut start => node?,
        _ = signals.wait() => {
            // Recovery cannot be cut short safely: finish it, then stop.
            info!("shutting down once start-up (log recovery) has finished");
            let node = start.await?;
            node.shutdown().await?;
            info!("clean shutdown complete");
            return Ok(());
        }
    };
    let broker = node.broker();
    info!(
        kafka = %node.kafka_addr(),
        pulsar = %node.pulsar_addr().map_or("-".to_string(), |a| a.to_string()),
        http = %node.http_addr().map_or("-".to_string(), |a| a.to_string()),
        open_file_limit = broker.config().open_file_limit.unwrap_or(0),
        max_connections = broker.config().max_connections(),
        advertised = %format!("{}:{}", broker.endpoint().host, broker.endpoint().port),
        data_dir = %broker.config().data_dir.display(),
        "magnetar is ready"
    );
    // Lines tests and scripts can wait for, independent of log formatting;
    // the Kafka one comes last and means everything is ready.
    if let Some(a) = node.pulsar_addr() {
        eprintln!("magnetar: pulsar listener on {a}");
    }
    if let Some(a) = node.pulsar_tls_addr() {
        eprintln!("magnetar: pulsar+ssl listener on {a}");
    }
    if let Some(a) = node.http_addr() {
        eprintln!("magnetar: http listener on {a}");
    }
    if let Some(a) = node.https_addr() {
        eprintln!("magnetar: https listener on {a}");
    }
    if let Some(a) = node.controller_addr() {
        eprintln!("magnetar: controller listener on {a}");
    }
    for (name, addr) in node.kafka_listeners().iter().skip(1) {
        eprintln!("magnetar: kafka listener {name} on {addr}");
    }
    eprintln!("magnetar: kafka listener on {}", node.kafka_addr());

    let superseded = tokio::select! {
        _ = signals.wait() => None,
        why = node.superseded() => Some(why),
    };
    info!("shutting down");
    node.shutdown().await?;
    info!("clean shutdown complete");
    match superseded {
        Some(why) => Err(anyhow::anyhow!(
            "stopped: another process registered this node id in this one's place ({why})"
        )),
        None => Ok(()),
    }
}

/// SIGTERM and SIGINT, handled from installation on.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn wait(&mut self) {
        tokio::select! {
            _ = self.term.recv() => info!("received SIGTERM"),
            _ = self.int.recv() => info!("received SIGINT"),
        }
    }
}
