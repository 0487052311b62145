//! What every client subcommand shares: the global options and the
//! `KEY=VALUE` parser.

use std::time::Duration;

use clap::Args;

use crate::error::{CliError, Context};
use crate::security;

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

/// Parses `KEY=VALUE`.
pub(crate) fn key_value(s: &str) -> Result<(String, String), CliError> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| CliError::Usage(format!("expected KEY=VALUE, got {s:?}")))
}
