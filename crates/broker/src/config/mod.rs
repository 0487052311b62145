//! Broker and topic configuration.
//!
//! Keys follow Kafka's broker property names wherever one exists, so that
//! people and scripts that know Kafka know Magnetar. Every key is declared
//! once in [`BROKER_KEYS`] / [`TOPIC_KEYS`], which drive parsing, validation,
//! DescribeConfigs answers and the README's reference table.

mod keys;
mod topic;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use keys::{ConfigKey, ValueKind, BROKER_KEYS, TOPIC_KEYS};
pub use topic::{EffectiveValue, TopicConfig, TopicKind};

use crate::Error;

/// Where a broker listens for Kafka clients by default.
pub const DEFAULT_KAFKA_ADDR: &str = "127.0.0.1:9092";
/// Where a broker keeps its data by default (relative to the working dir).
pub const DEFAULT_DATA_DIR: &str = "./data";

/// The broker's whole configuration, parsed and validated.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Directory holding partitions and metadata.
    pub data_dir: PathBuf,
    /// Address the Kafka listener binds.
    pub kafka_addr: SocketAddr,
    /// Every broker key with its effective value (defaults filled in).
    values: BTreeMap<&'static str, String>,
    /// Keys set explicitly (file, `--set` or dynamically), for DescribeConfigs sources.
    explicit: BTreeMap<&'static str, ConfigSource>,
}

/// Where a configuration value came from, as DescribeConfigs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Built-in default.
    Default,
    /// Set at start-up (config file or `--set`).
    Static,
    /// Changed at runtime through IncrementalAlterConfigs (broker level).
    Dynamic,
    /// A topic's own override.
    Topic,
}

impl BrokerConfig {
    /// A configuration with every default, the given data dir and listener.
    pub fn new(data_dir: impl Into<PathBuf>, kafka_addr: SocketAddr) -> BrokerConfig {
        let values = BROKER_KEYS
            .iter()
            .map(|k| (k.name, k.default.to_string()))
            .collect();
        BrokerConfig {
            data_dir: data_dir.into(),
            kafka_addr,
            values,
            explicit: BTreeMap::new(),
        }
    }

    /// Applies a TOML config file: flat or dotted Kafka keys
    /// (`auto.create.topics.enable = false` is read as that key).
    pub fn apply_toml_file(&mut self, path: &Path) -> Result<(), Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            key: path.display().to_string(),
            reason: format!("cannot read config file: {e}"),
        })?;
        self.apply_toml_str(&text)
            .map_err(|e| prefix_config_error(e, path))
    }

    /// Applies TOML text (see [`BrokerConfig::apply_toml_file`]).
    pub fn apply_toml_str(&mut self, text: &str) -> Result<(), Error> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| Error::Config {
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
    pub fn apply_assignment(&mut self, assignment: &str) -> Result<(), Error> {
        let (k, v) = assignment.split_once('=').ok_or_else(|| Error::Config {
            key: assignment.to_string(),
            reason: "expected KEY=VALUE".into(),
        })?;
        self.set(k.trim(), v.trim(), ConfigSource::Static)
    }

    /// Sets one key, validating name and value. `data.dir`-like settings are
    /// flags, not keys, so they are not accepted here.
    pub fn set(&mut self, key: &str, value: &str, source: ConfigSource) -> Result<(), Error> {
        let spec = keys::broker_key(key).ok_or_else(|| Error::Config {
            key: key.to_string(),
            reason: "unknown configuration key".into(),
        })?;
        let normalized = spec.kind.validate(value).map_err(|reason| Error::Config {
            key: key.to_string(),
            reason,
        })?;
        self.values.insert(spec.name, normalized);
        self.explicit.insert(spec.name, source);
        Ok(())
    }

    /// Reverts a key to its default (IncrementalAlterConfigs DELETE).
    pub fn reset(&mut self, key: &str) -> Result<(), Error> {
        let spec = keys::broker_key(key).ok_or_else(|| Error::Config {
            key: key.to_string(),
            reason: "unknown configuration key".into(),
        })?;
        self.values.insert(spec.name, spec.default.to_string());
        self.explicit.remove(spec.name);
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

    /// Keys changed at runtime, to persist across restarts.
    pub fn dynamic_values(&self) -> BTreeMap<String, String> {
        self.explicit
            .iter()
            .filter(|(_, s)| **s == ConfigSource::Dynamic)
            .map(|(k, _)| (k.to_string(), self.values[k].clone()))
            .collect()
    }

    fn raw(&self, key: &str) -> &str {
        // Every key in BROKER_KEYS is present from `new`, and callers only
        // pass names from that table.
        self.values.get(key).map(String::as_str).unwrap_or("")
    }

    fn int(&self, key: &str) -> i64 {
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

    /// `auto.create.topics.type`.
    pub fn auto_create_topics_type(&self) -> TopicKind {
        if self.raw("auto.create.topics.type") == "non-partitioned" {
            TopicKind::NonPartitioned
        } else {
            TopicKind::Partitioned
        }
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

    /// `advertised.listeners`, parsed to host and port, if set.
    pub fn advertised_listener(&self) -> Option<(String, u16)> {
        let v = self.raw("advertised.listeners");
        if v.is_empty() {
            return None;
        }
        keys::parse_listener(v).ok()
    }

    /// The log settings every topic inherits unless it overrides them.
    pub fn log_defaults(&self) -> storage::LogConfig {
        storage::LogConfig {
            segment_bytes: self.int("log.segment.bytes") as u64,
            roll_ms: self.opt_positive("log.roll.ms"),
            retention_ms: self.opt_positive("log.retention.ms"),
            retention_bytes: self.opt_positive("log.retention.bytes"),
            flush_interval_messages: self.opt_positive("log.flush.interval.messages"),
            flush_interval_ms: self.opt_positive("log.flush.interval.ms"),
            max_message_bytes: self.message_max_bytes(),
            ..storage::LogConfig::default()
        }
    }
}

fn prefix_config_error(e: Error, path: &Path) -> Error {
    match e {
        Error::Config { key, reason } => Error::Config {
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
) -> Result<(), Error> {
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
        toml::Value::Boolean(b) => {
            out.push((prefix.to_string(), b.to_string()));
            Ok(())
        }
        other => Err(Error::Config {
            key: prefix.to_string(),
            reason: format!("unsupported value type {}", other.type_str()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn advertised_listener_forms() {
        let mut c = cfg();
        assert_eq!(c.advertised_listener(), None);
        c.apply_assignment("advertised.listeners=PLAINTEXT://broker1:19092")
            .unwrap();
        assert_eq!(c.advertised_listener(), Some(("broker1".into(), 19092)));
        c.apply_assignment("advertised.listeners=10.0.0.1:9093")
            .unwrap();
        assert_eq!(c.advertised_listener(), Some(("10.0.0.1".into(), 9093)));
        assert!(c.apply_assignment("advertised.listeners=nope").is_err());
    }
}
