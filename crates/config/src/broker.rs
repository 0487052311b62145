//! The broker's configuration: every broker key's effective value and where
//! it came from, read from a file, `--set` and the dynamic layers, and the
//! typed views of the broker keys (the security and topic views are in
//! `security.rs` and `topic.rs`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::authorizer::AuthorizerConfig;
use crate::error::ConfigError;
use crate::key_spec;
use crate::keys::{self, broker_keys, ACCEPTED_BROKER_KEYS};

/// Where a broker listens for Kafka clients by default.
pub const DEFAULT_KAFKA_ADDR: &str = "127.0.0.1:9092";
/// Where the Pulsar listener binds unless told otherwise.
pub const DEFAULT_PULSAR_ADDR: &str = "127.0.0.1:6650";
/// Where the HTTP service binds unless told otherwise.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8080";
/// Where a broker keeps its data by default (relative to the working dir).
pub const DEFAULT_DATA_DIR: &str = "./data";

/// The broker's whole configuration, parsed and validated.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Directory holding partitions and metadata.
    pub data_dir: PathBuf,
    /// Address the Kafka listener binds.
    pub kafka_addr: SocketAddr,
    /// Address the Pulsar listener binds, if it runs.
    pub pulsar_addr: Option<SocketAddr>,
    /// Address the HTTP service binds, if it runs.
    pub http_addr: Option<SocketAddr>,
    /// The process's open-file limit (soft RLIMIT_NOFILE), when known; sizes
    /// `max.connections = -1` and the open-file cache.
    pub open_file_limit: Option<u64>,
    /// Every broker key with its effective value (defaults filled in).
    values: BTreeMap<&'static str, String>,
    /// Keys set explicitly (file, `--set` or dynamically), for DescribeConfigs sources.
    explicit: BTreeMap<&'static str, ConfigSource>,
    /// For keys also settable through a coarser alias (`log.retention.hours`),
    /// the unit factor of the form that set them: a finer form wins, as in
    /// Kafka, whatever the order.
    set_with_factor: BTreeMap<&'static str, i64>,
}

/// Kafka's coarser spellings of millisecond keys: `(alias, key, ms per unit)`.
/// As in Kafka, `*.ms` wins over `*.minutes`, which wins over `*.hours`.
pub const KEY_ALIASES: &[(&str, &str, i64)] = &[
    ("log.retention.minutes", "log.retention.ms", 60_000),
    ("log.retention.hours", "log.retention.ms", 3_600_000),
    ("log.roll.hours", "log.roll.ms", 3_600_000),
    ("log.roll.jitter.hours", "log.roll.jitter.ms", 3_600_000),
];

/// Where a configuration value came from, as DescribeConfigs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Built-in default.
    Default,
    /// Set at start-up (config file or `--set`).
    Static,
    /// Changed at runtime for this broker (AlterConfigs and
    /// IncrementalAlterConfigs on the broker resource named by its id).
    Dynamic,
    /// Changed at runtime for every broker: the cluster-wide default
    /// (the broker resource with an empty name, `--entity-default`).
    DynamicDefault,
    /// A topic's own override.
    Topic,
    /// A policy of the topic's namespace (e.g. its retention), inherited by
    /// every topic of the namespace that does not override the key.
    Namespace,
}

impl BrokerConfig {
    /// A configuration with every default, the given data dir and listener.
    pub fn new(data_dir: impl Into<PathBuf>, kafka_addr: SocketAddr) -> BrokerConfig {
        let values = broker_keys()
            .map(|k| (k.name, k.default.to_string()))
            .collect();
        BrokerConfig {
            data_dir: data_dir.into(),
            kafka_addr,
            pulsar_addr: None,
            http_addr: None,
            open_file_limit: None,
            values,
            explicit: BTreeMap::new(),
            set_with_factor: BTreeMap::new(),
        }
    }

    /// Applies a TOML config file: flat or dotted Kafka keys
    /// (`auto.create.topics.enable = false` is read as that key).
    pub fn apply_toml_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Config {
            key: path.display().to_string(),
            reason: format!("cannot read config file: {e}"),
        })?;
        self.apply_toml_str(&text)
            .map_err(|e| prefix_config_error(e, path))
    }

    /// Applies TOML text (see [`BrokerConfig::apply_toml_file`]).
    pub fn apply_toml_str(&mut self, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Config {
                    key: "<config file>".into(),
                    reason: e.to_string(),
                })?;
        let mut flat = Vec::new();
        flatten_toml("", &toml::Value::Table(table), &mut flat)?;
        for (k, v) in flat {
            self.set(&k, &v, ConfigSource::Static)?;
        }
        Ok(())
    }

    /// Sets one key from a `KEY=VALUE` string (the `--set` flag).
    pub fn apply_assignment(&mut self, assignment: &str) -> Result<(), ConfigError> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| ConfigError::Config {
                key: assignment.to_string(),
                reason: "expected KEY=VALUE".into(),
            })?;
        self.set(k.trim(), v.trim(), ConfigSource::Static)
    }

    /// Sets one key, validating name and value. `data.dir`-like settings are
    /// flags, not keys, so they are not accepted here.
    pub fn set(&mut self, key: &str, value: &str, source: ConfigSource) -> Result<(), ConfigError> {
        if let Some(&(_, target, factor)) = KEY_ALIASES.iter().find(|(a, _, _)| *a == key) {
            return self.set_alias(key, target, factor, value, source);
        }
        let spec = keys::broker_key(key).ok_or_else(|| ConfigError::Config {
            key: key.to_string(),
            reason: unknown_key_reason(key),
        })?;
        let normalized = spec
            .kind
            .validate(value)
            .map_err(|reason| ConfigError::Config {
                key: key.to_string(),
                reason,
            })?;
        self.values.insert(spec.name, normalized);
        self.explicit.insert(spec.name, source);
        self.set_with_factor.insert(spec.name, 1);
        Ok(())
    }

    /// Sets `target` (a millisecond key) from `alias` in coarser units,
    /// unless a finer form already set it.
    fn set_alias(
        &mut self,
        alias: &str,
        target: &'static str,
        factor: i64,
        value: &str,
        source: ConfigSource,
    ) -> Result<(), ConfigError> {
        let bad = |reason: String| ConfigError::Config {
            key: alias.to_string(),
            reason,
        };
        let n: i64 = value
            .trim()
            .parse()
            .map_err(|_| bad(format!("expected an integer, got {value:?}")))?;
        let ms = if n == -1 {
            -1
        } else {
            n.checked_mul(factor)
                .ok_or_else(|| bad(format!("{n} is too large")))?
        };
        if self
            .set_with_factor
            .get(target)
            .is_some_and(|f| *f < factor)
        {
            return Ok(());
        }
        let spec = keys::broker_key(target).expect("alias targets are declared keys");
        let normalized = spec.kind.validate(&ms.to_string()).map_err(bad)?;
        self.values.insert(spec.name, normalized);
        self.explicit.insert(spec.name, source);
        self.set_with_factor.insert(spec.name, factor);
        Ok(())
    }

    /// Reverts a key to its default (IncrementalAlterConfigs DELETE).
    pub fn reset(&mut self, key: &str) -> Result<(), ConfigError> {
        let spec = keys::broker_key(key).ok_or_else(|| ConfigError::Config {
            key: key.to_string(),
            reason: "unknown configuration key".into(),
        })?;
        self.values.insert(spec.name, spec.default.to_string());
        self.explicit.remove(spec.name);
        self.set_with_factor.remove(spec.name);
        Ok(())
    }

    /// Effective value of a key and where it came from.
    pub fn get(&self, key: &str) -> Option<(&str, ConfigSource)> {
        let spec = keys::broker_key(key)?;
        let v = self.values.get(spec.name)?;
        let src = self
            .explicit
            .get(spec.name)
            .copied()
            .unwrap_or(ConfigSource::Default);
        Some((v.as_str(), src))
    }

    /// Kafka's keys set at start-up (file or `--set`) to other than their
    /// default that Magnetar accepts but does not act on, with why: worth
    /// a line in the log (the value is not given: it may be a secret).
    pub fn unenforced_settings(&self) -> Vec<(&'static str, &'static str)> {
        ACCEPTED_BROKER_KEYS
            .iter()
            .filter(|k| {
                self.get(k.name)
                    .is_some_and(|(v, s)| s == ConfigSource::Static && v != k.default)
            })
            .map(|k| (k.name, k.not_enforced.unwrap_or_default()))
            .collect()
    }

    /// Keys changed at runtime for this broker, to persist across restarts.
    pub fn dynamic_values(&self) -> BTreeMap<String, String> {
        self.values_from(ConfigSource::Dynamic)
    }

    /// The keys whose effective value comes from `source`, with it.
    pub fn values_from(&self, source: ConfigSource) -> BTreeMap<String, String> {
        self.explicit
            .iter()
            .filter(|(_, s)| **s == source)
            .map(|(k, _)| (k.to_string(), self.values[k].clone()))
            .collect()
    }

    /// This configuration (defaults and start-up values) under the dynamic
    /// layers, as Kafka layers them: the cluster-wide defaults, then this
    /// broker's own. Removing a key from a layer brings back the value
    /// below it (another layer's, the start-up one or the default). A
    /// stored key that is no longer valid is skipped with a warning.
    pub fn with_dynamic(
        &self,
        defaults: &BTreeMap<String, String>,
        own: &BTreeMap<String, String>,
    ) -> BrokerConfig {
        let mut c = self.clone();
        for (source, layer) in [
            (ConfigSource::DynamicDefault, defaults),
            (ConfigSource::Dynamic, own),
        ] {
            for (k, v) in layer {
                if let Err(e) = c.set(k, v, source) {
                    tracing::warn!("ignoring a stored dynamic broker config: {e}");
                }
            }
        }
        c
    }

    /// The value of a string key (`controller.quorum.voters`, ...), empty
    /// when unset.
    pub fn string_value(&self, key: &str) -> &str {
        self.raw(key)
    }

    pub(crate) fn raw(&self, key: &str) -> &str {
        // Every broker key is present from `new`, and callers only
        // pass names from that table.
        self.values.get(key).map(String::as_str).unwrap_or("")
    }

    pub(crate) fn int(&self, key: &str) -> i64 {
        self.raw(key).parse().unwrap_or(-1)
    }

    fn opt_positive(&self, key: &str) -> Option<u64> {
        let v = self.int(key);
        (v >= 0).then_some(v as u64)
    }

    /// `node.id`.
    pub fn node_id(&self) -> i32 {
        self.int("node.id") as i32
    }

    /// `auto.create.topics.enable`.
    pub fn auto_create_topics_enable(&self) -> bool {
        self.raw("auto.create.topics.enable") == "true"
    }

    /// `num.partitions`.
    pub fn num_partitions(&self) -> i32 {
        self.int("num.partitions") as i32
    }

    /// `message.max.bytes`.
    pub fn message_max_bytes(&self) -> u32 {
        self.int("message.max.bytes") as u32
    }

    /// `fetch.max.bytes`.
    pub fn fetch_max_bytes(&self) -> usize {
        self.int("fetch.max.bytes") as usize
    }

    /// `socket.request.max.bytes`.
    pub fn socket_request_max_bytes(&self) -> usize {
        self.int("socket.request.max.bytes") as usize
    }

    /// `queued.max.request.bytes`, or `None` for no limit.
    pub fn queued_max_request_bytes(&self) -> Option<u64> {
        self.opt_positive("queued.max.request.bytes")
    }

    /// `socket.request.read.timeout.ms`, or `None` for no limit.
    pub fn request_read_timeout(&self) -> Option<std::time::Duration> {
        self.opt_positive("socket.request.read.timeout.ms")
            .map(std::time::Duration::from_millis)
    }

    /// `connections.max.idle.ms`, or `None` to never close idle connections.
    pub fn connections_max_idle(&self) -> Option<std::time::Duration> {
        self.opt_positive("connections.max.idle.ms")
            .map(std::time::Duration::from_millis)
    }

    /// `max.connections`; -1 means half the open-file limit (unlimited if
    /// that is unknown).
    pub fn max_connections(&self) -> usize {
        match self.opt_positive("max.connections") {
            Some(n) => n as usize,
            None => self
                .open_file_limit
                .map_or(usize::MAX, |l| (l / 2).max(1) as usize),
        }
    }

    /// `max.connections.per.ip`.
    pub fn max_connections_per_ip(&self) -> usize {
        self.int("max.connections.per.ip").max(1) as usize
    }

    /// `log.retention.check.interval.ms`.
    pub fn retention_check_interval_ms(&self) -> u64 {
        self.int("log.retention.check.interval.ms") as u64
    }

    /// `log.flush.interval.ms`, or `None` to leave flushing to the OS.
    pub fn flush_interval_ms(&self) -> Option<u64> {
        self.opt_positive("log.flush.interval.ms")
    }

    /// A key's value as an integer (for keys declared with an integer kind).
    pub fn int_value(&self, key: &str) -> i64 {
        self.int(key)
    }

    /// `pulsar.advertised.address`, parsed to host and port, if set.
    pub fn pulsar_advertised_address(&self) -> Option<(String, u16)> {
        let v = self.raw("pulsar.advertised.address");
        if v.is_empty() {
            return None;
        }
        key_spec::parse_listener(v).ok()
    }

    /// `pulsar.max.message.size`.
    pub fn pulsar_max_message_size(&self) -> usize {
        self.int("pulsar.max.message.size") as usize
    }

    /// `pulsar.deduplication.producer.inactivity.timeout.minutes`, in ms.
    pub fn pulsar_dedup_inactivity_ms(&self) -> i64 {
        self.int("pulsar.deduplication.producer.inactivity.timeout.minutes")
            .saturating_mul(60_000)
    }

    /// `pulsar.keep.alive.interval.seconds`.
    pub fn pulsar_keep_alive(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.int("pulsar.keep.alive.interval.seconds") as u64)
    }

    /// The Kafka listeners (`listeners`, or one PLAINTEXT listener on
    /// `kafka_addr`), with their protocols and advertised addresses.
    pub fn kafka_listeners(&self) -> Result<Vec<crate::listeners::KafkaListener>, ConfigError> {
        crate::listeners::resolve(
            self.raw("listeners"),
            self.raw("advertised.listeners"),
            self.raw("listener.security.protocol.map"),
            self.kafka_addr,
        )
        .map_err(|reason| ConfigError::Config {
            key: "listeners".into(),
            reason,
        })
    }

    /// `transaction.max.timeout.ms`.
    pub fn transaction_max_timeout_ms(&self) -> i64 {
        self.int("transaction.max.timeout.ms")
    }

    /// The authorizer's settings, if `authorizer.class.name` is set.
    pub fn authorizer(&self) -> Option<AuthorizerConfig> {
        if self.raw("authorizer.class.name").is_empty() {
            return None;
        }
        Some(AuthorizerConfig {
            super_users: AuthorizerConfig::parse_super_users(self.raw("super.users"))
                .unwrap_or_default(),
            allow_if_no_acl: self.raw("allow.everyone.if.no.acl.found") == "true",
        })
    }

    /// `connections.max.reauth.ms`, or `None` for sessions without limit.
    pub fn max_reauth(&self) -> Option<std::time::Duration> {
        let ms = self.int("connections.max.reauth.ms");
        (ms > 0).then(|| std::time::Duration::from_millis(ms as u64))
    }

    /// `connection.failed.authentication.delay.ms`.
    pub fn failed_authentication_delay(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.int("connection.failed.authentication.delay.ms").max(0) as u64,
        )
    }

    fn double(&self, key: &str) -> f64 {
        self.raw(key).parse().unwrap_or(0.0)
    }

    /// The log cleaner's settings (`log.cleaner.*`).
    pub fn log_cleaner(&self) -> storage::CleanerConfig {
        storage::CleanerConfig {
            enable: self.raw("log.cleaner.enable") == "true",
            threads: self.int("log.cleaner.threads").max(1) as usize,
            io_max_bytes_per_second: self.double("log.cleaner.io.max.bytes.per.second"),
            dedupe_buffer_size: self.int("log.cleaner.dedupe.buffer.size").max(1) as u64,
            backoff_ms: self.int("log.cleaner.backoff.ms").max(1) as u64,
        }
    }
}

/// "unknown configuration key", with the declared key the user most likely
/// meant.
fn unknown_key_reason(key: &str) -> String {
    let mut reason = "unknown configuration key".to_string();
    if let Some(spec) = keys::topic_key(key) {
        if let Some(b) = spec.broker_default {
            reason.push_str(&format!(
                " ({key} is a topic-level key; the broker-wide default is {b})"
            ));
            return reason;
        }
    }
    let best = broker_keys()
        .map(|k| k.name)
        .chain(KEY_ALIASES.iter().map(|(a, _, _)| *a))
        .map(|name| (edit_distance(key, name), name))
        .min();
    if let Some((d, name)) = best {
        if d <= 3.max(key.len() / 4) {
            reason.push_str(&format!(" (did you mean {name}?)"));
        } else if let Some(name) = broker_keys()
            .map(|k| k.name)
            .find(|n| n.ends_with(&format!(".{key}")))
        {
            reason.push_str(&format!(" (did you mean {name}?)"));
        }
    }
    reason
}

/// Levenshtein distance between two short ASCII-ish strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn prefix_config_error(e: ConfigError, path: &Path) -> ConfigError {
    match e {
        ConfigError::Config { key, reason } => ConfigError::Config {
            key,
            reason: format!("{reason} (in {})", path.display()),
        },
        other => other,
    }
}

fn flatten_toml(
    prefix: &str,
    v: &toml::Value,
    out: &mut Vec<(String, String)>,
) -> Result<(), ConfigError> {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_toml(&key, v, out)?;
            }
            Ok(())
        }
        toml::Value::String(s) => {
            out.push((prefix.to_string(), s.clone()));
            Ok(())
        }
        toml::Value::Integer(i) => {
            out.push((prefix.to_string(), i.to_string()));
            Ok(())
        }
        toml::Value::Float(f) => {
            out.push((prefix.to_string(), f.to_string()));
            Ok(())
        }
        toml::Value::Boolean(b) => {
            out.push((prefix.to_string(), b.to_string()));
            Ok(())
        }
        other => Err(ConfigError::Config {
            key: prefix.to_string(),
            reason: format!("unsupported value type {}", other.type_str()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientAuth, KafkaType, TopicKind};

    fn cfg() -> BrokerConfig {
        BrokerConfig::new("/tmp/x", DEFAULT_KAFKA_ADDR.parse().unwrap())
    }

    #[test]
    fn defaults_match_kafka() {
        let c = cfg();
        assert!(c.auto_create_topics_enable());
        assert_eq!(c.num_partitions(), 1);
        assert_eq!(c.auto_create_topics_type(), TopicKind::Partitioned);
        let log = c.log_defaults();
        assert_eq!(log.segment_bytes, 1 << 30);
        assert_eq!(log.retention_ms, Some(7 * 24 * 3600 * 1000));
        assert_eq!(log.retention_bytes, None);
        assert_eq!(log.flush_interval_messages, None);
        assert_eq!(c.get("num.partitions"), Some(("1", ConfigSource::Default)));
    }

    #[test]
    fn toml_floats_are_accepted_for_double_keys() {
        let mut c = cfg();
        c.apply_toml_str(
            "log.cleaner.min.cleanable.ratio = 0.25\n\"log.cleaner.io.max.bytes.per.second\" = 1e6",
        )
        .unwrap();
        let cleaner = c.log_cleaner();
        assert_eq!(cleaner.io_max_bytes_per_second, 1e6);
        assert_eq!(c.log_defaults().min_cleanable_dirty_ratio, 0.25);
        assert!(c
            .apply_toml_str("log.cleaner.min.cleanable.ratio = 1.5")
            .is_err());
    }

    #[test]
    fn toml_dotted_and_quoted_keys() {
        let mut c = cfg();
        c.apply_toml_str(
            "auto.create.topics.enable = false\n\"num.partitions\" = 4\nauto.create.topics.type = \"non-partitioned\"\n[log]\nretention.ms = -1\n",
        )
        .unwrap();
        assert!(!c.auto_create_topics_enable());
        assert_eq!(c.num_partitions(), 4);
        assert_eq!(c.auto_create_topics_type(), TopicKind::NonPartitioned);
        assert_eq!(c.log_defaults().retention_ms, None);
        assert_eq!(c.get("num.partitions"), Some(("4", ConfigSource::Static)));
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let mut c = cfg();
        let e = c.apply_assignment("no.such.key=1").unwrap_err().to_string();
        assert!(e.contains("no.such.key"), "{e}");
        let e = c
            .apply_assignment("num.partitions=zero")
            .unwrap_err()
            .to_string();
        assert!(e.contains("num.partitions"), "{e}");
        let e = c
            .apply_assignment("num.partitions=0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("num.partitions"), "{e}");
        let e = c
            .apply_assignment("auto.create.topics.type=sharded")
            .unwrap_err()
            .to_string();
        assert!(e.contains("auto.create.topics.type"), "{e}");
        let e = c
            .apply_toml_str("log.segment.bytes = \"big\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("log.segment.bytes"), "{e}");
        assert!(c.apply_assignment("missing-equals").is_err());
    }

    #[test]
    fn unknown_keys_suggest_the_key_meant() {
        let mut c = cfg();
        let e = c
            .apply_assignment("retention.ms=1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("log.retention.ms"), "{e}");
        let e = c
            .apply_assignment("num.partition=3")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean num.partitions?"), "{e}");
        let e = c
            .apply_assignment("auto.create.topic.enable=false")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean auto.create.topics.enable?"), "{e}");
        let e = c
            .apply_assignment("completely.unrelated.thing=1")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn hours_and_minutes_aliases_with_kafka_precedence() {
        let mut c = cfg();
        c.apply_assignment("log.retention.hours=2").unwrap();
        assert_eq!(c.log_defaults().retention_ms, Some(7_200_000));
        c.apply_assignment("log.retention.minutes=3").unwrap();
        assert_eq!(c.log_defaults().retention_ms, Some(180_000));
        // A coarser unit never overrides a finer one, whatever the order.
        c.apply_assignment("log.retention.hours=5").unwrap();
        assert_eq!(c.log_defaults().retention_ms, Some(180_000));
        c.apply_assignment("log.retention.ms=1234").unwrap();
        c.apply_assignment("log.retention.minutes=9").unwrap();
        assert_eq!(c.log_defaults().retention_ms, Some(1234));
        let mut c = cfg();
        c.apply_assignment("log.retention.hours=-1").unwrap();
        assert_eq!(c.log_defaults().retention_ms, None);
        c.apply_assignment("log.roll.hours=1").unwrap();
        assert_eq!(c.log_defaults().roll_ms, Some(3_600_000));
        assert!(c.apply_assignment("log.retention.hours=x").is_err());
        assert_eq!(
            c.get("log.retention.ms"),
            Some(("-1", ConfigSource::Static))
        );
    }

    /// Kafka's broker keys Magnetar does not act on load from a Kafka
    /// configuration, typed and checked as Kafka checks them; those set to
    /// other than their default are named for the start-up log.
    #[test]
    fn kafka_keys_not_acted_on_are_accepted_and_checked() {
        let mut c = cfg();
        c.apply_toml_str(
            "\"log.dirs\" = \"/var/lib/kafka\"\n\
             \"num.io.threads\" = 8\n\
             \"sasl.kerberos.min.time.before.relogin\" = 120000\n\
             \"ssl.keystore.password\" = \"secret\"\n\
             \"group.consumer.migration.policy\" = \"UPGRADE\"\n\
             \"metric.reporters\" = \"a.B, c.D\"\n",
        )
        .unwrap();
        assert_eq!(
            c.get("group.consumer.migration.policy"),
            Some(("upgrade", ConfigSource::Static))
        );
        assert_eq!(c.get("metric.reporters").unwrap().0, "a.B,c.D");
        let named: Vec<&str> = c.unenforced_settings().iter().map(|(k, _)| *k).collect();
        assert_eq!(
            named,
            [
                "group.consumer.migration.policy",
                "log.dirs",
                "metric.reporters",
                "sasl.kerberos.min.time.before.relogin",
                "ssl.keystore.password",
            ],
            "num.io.threads is set to its default"
        );
        for bad in [
            "num.io.threads=0",
            "sasl.kerberos.min.time.before.relogin=soon",
            "group.share.max.groups=101",
            "offsets.topic.replication.factor=40000",
            "principal.builder.class=com.example.Builder",
            "security.inter.broker.protocol=TLS",
        ] {
            let e = c.apply_assignment(bad).unwrap_err().to_string();
            let key = bad.split('=').next().unwrap();
            assert!(e.contains(key), "{bad}: {e}");
        }
        let spec = keys::broker_key("sasl.kerberos.min.time.before.relogin").unwrap();
        assert!(spec.dynamic && spec.per_broker && spec.not_enforced.is_some());
        assert_eq!(spec.kind.kafka_type(), KafkaType::Long);
        assert_eq!(
            keys::broker_key("offsets.topic.replication.factor")
                .unwrap()
                .kind
                .kafka_type(),
            KafkaType::Short
        );
    }

    /// A front end's clients without credentials are `User:ANONYMOUS` only
    /// when nothing depends on who they are; otherwise the named principal,
    /// or none (refused).
    #[test]
    fn anonymous_principals_per_front_end() {
        use model::Principal;
        let mut c = cfg();
        assert_eq!(c.pulsar_anonymous_principal(), Some(Principal::anonymous()));
        assert_eq!(c.http_anonymous_principal(), Some(Principal::anonymous()));
        c.apply_assignment("pulsar.authentication.enabled=true")
            .unwrap();
        assert_eq!(c.pulsar_anonymous_principal(), None);
        assert_eq!(c.http_anonymous_principal(), Some(Principal::anonymous()));
        let mut c = cfg();
        c.apply_assignment(
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .unwrap();
        c.apply_assignment("super.users=User:ANONYMOUS").unwrap();
        assert_eq!(c.pulsar_anonymous_principal(), None);
        assert_eq!(c.http_anonymous_principal(), None);
        c.apply_assignment("pulsar.anonymous.principal=User:guest")
            .unwrap();
        c.apply_assignment("http.anonymous.principal=User:ANONYMOUS")
            .unwrap();
        assert_eq!(
            c.pulsar_anonymous_principal(),
            Some(Principal::user("guest"))
        );
        assert_eq!(c.http_anonymous_principal(), Some(Principal::anonymous()));
        for bad in ["guest", "Group:x", "User:"] {
            let e = c
                .apply_assignment(&format!("pulsar.anonymous.principal={bad}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("User:name"), "{bad}: {e}");
        }
    }

    #[test]
    fn listener_settings() {
        let mut c = cfg();
        assert_eq!(c.kafka_listeners().unwrap().len(), 1);
        c.apply_assignment("advertised.listeners=PLAINTEXT://broker1:19092")
            .unwrap();
        assert_eq!(
            c.kafka_listeners().unwrap()[0].advertised,
            Some(("broker1".into(), 19092))
        );
        assert!(c.apply_assignment("advertised.listeners=nope").is_err());
        c.apply_assignment("listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0")
            .unwrap();
        c.apply_assignment("advertised.listeners=").unwrap();
        let l = c.kafka_listeners().unwrap();
        assert_eq!(l[1].protocol, crate::listeners::SecurityProtocol::SaslSsl);
        assert!(c
            .apply_assignment("listener.security.protocol.map=A:B")
            .is_err());
        assert!(c.tls_settings().is_none());
        c.apply_assignment("ssl.keystore.location=/k.pem").unwrap();
        c.apply_assignment("ssl.client.auth=REQUIRED").unwrap();
        let t = c.tls_settings().unwrap();
        assert_eq!(t.client_auth, ClientAuth::Required);
        assert!(t.tls12);
        assert!(c
            .apply_assignment("sasl.enabled.mechanisms=GSSAPI")
            .is_err());
    }
}
