//! Per-topic configuration overrides.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::broker::{BrokerConfig, ConfigSource};
use super::keys::{topic_key, TOPIC_KEYS};
use crate::ConfigError;

/// Whether a topic was created as partitioned or as a single non-partitioned
/// log. Kafka clients see one partition either way; the Pulsar front end
/// reports non-partitioned topics as having 0 partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TopicKind {
    /// Partitioned: `partition-N` sub-logs.
    #[default]
    Partitioned,
    /// A single log with no partition suffix.
    NonPartitioned,
}

impl TopicKind {
    /// The config-value spelling (`partitioned` / `non-partitioned`).
    pub fn as_str(&self) -> &'static str {
        match self {
            TopicKind::Partitioned => "partitioned",
            TopicKind::NonPartitioned => "non-partitioned",
        }
    }
}

impl BrokerConfig {
    /// `auto.create.topics.type`.
    pub fn auto_create_topics_type(&self) -> TopicKind {
        if self.raw("auto.create.topics.type") == "non-partitioned" {
            TopicKind::NonPartitioned
        } else {
            TopicKind::Partitioned
        }
    }

    /// The log settings every topic inherits unless it overrides them.
    pub fn log_defaults(&self) -> storage::LogConfig {
        TopicConfig::default().log_config(self)
    }
}

/// A configuration value in effect, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveValue {
    /// The key.
    pub name: &'static str,
    /// The value in effect.
    pub value: String,
    /// Where it was set.
    pub source: ConfigSource,
}

/// A topic's explicit overrides; everything else falls back to the broker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TopicConfig(BTreeMap<String, String>);

impl TopicConfig {
    /// Validates and collects `(key, value)` overrides.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<TopicConfig, ConfigError> {
        let mut c = TopicConfig::default();
        for (k, v) in pairs {
            match v {
                Some(v) => c.set(k, v)?,
                None => c.remove(k)?,
            }
        }
        Ok(c)
    }

    /// Sets one override after validating it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let spec = topic_key(key).ok_or_else(|| ConfigError::InvalidConfig {
            key: key.to_string(),
            reason: "unknown topic configuration key".into(),
        })?;
        let v = spec
            .kind
            .validate(value)
            .map_err(|reason| ConfigError::InvalidConfig {
                key: key.to_string(),
                reason,
            })?;
        self.0.insert(spec.name.to_string(), v);
        Ok(())
    }

    /// Removes an override (falls back to the broker default).
    pub fn remove(&mut self, key: &str) -> Result<(), ConfigError> {
        if topic_key(key).is_none() {
            return Err(ConfigError::InvalidConfig {
                key: key.to_string(),
                reason: "unknown topic configuration key".into(),
            });
        }
        self.0.remove(key);
        Ok(())
    }

    /// The explicit overrides.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    /// Effective value of every topic key and where it comes from.
    pub fn effective(&self, broker: &BrokerConfig) -> Vec<EffectiveValue> {
        self.effective_in(&TopicConfig::default(), broker)
    }

    /// Effective value of every topic key with `inherited` (the policies of
    /// the topic's namespace) between these overrides and the broker's keys.
    pub fn effective_in(
        &self,
        inherited: &TopicConfig,
        broker: &BrokerConfig,
    ) -> Vec<EffectiveValue> {
        TOPIC_KEYS
            .iter()
            .map(|k| {
                let (value, source) = if let Some(v) = self.0.get(k.name) {
                    (v.clone(), ConfigSource::Topic)
                } else if let Some(v) = inherited.0.get(k.name) {
                    (v.clone(), ConfigSource::Namespace)
                } else if let Some((v, src)) = k.broker_default.and_then(|b| broker.get(b)) {
                    (v.to_string(), src)
                } else {
                    (k.default.to_string(), ConfigSource::Default)
                };
                EffectiveValue {
                    name: k.name,
                    value,
                    source,
                }
            })
            .collect()
    }

    /// The storage settings for this topic's partitions.
    pub fn log_config(&self, broker: &BrokerConfig) -> storage::LogConfig {
        self.log_config_in(&TopicConfig::default(), broker)
    }

    /// The storage settings for this topic's partitions, with `inherited`
    /// (the policies of the topic's namespace) between these overrides and
    /// the broker's keys.
    pub fn log_config_in(
        &self,
        inherited: &TopicConfig,
        broker: &BrokerConfig,
    ) -> storage::LogConfig {
        let value = |k: &'static str| -> String {
            self.0
                .get(k)
                .or_else(|| inherited.0.get(k))
                .cloned()
                .unwrap_or_else(|| effective_default(k, broker))
        };
        let int = |k| value(k).parse::<i64>().unwrap_or(-1);
        let limit = |k| u64::try_from(int(k)).ok();
        let unsigned = |k| u64::try_from(int(k)).unwrap_or(0);
        let cleanup_policy =
            storage::CleanupPolicy::parse(&value("cleanup.policy")).unwrap_or_default();
        storage::LogConfig {
            segment_bytes: unsigned("segment.bytes"),
            roll_ms: limit("segment.ms"),
            retention_ms: limit("retention.ms"),
            retention_bytes: limit("retention.bytes"),
            flush_interval_messages: limit("flush.messages"),
            flush_interval_ms: limit("flush.ms"),
            index_interval_bytes: unsigned("index.interval.bytes") as u32,
            max_message_bytes: unsigned("max.message.bytes") as u32,
            // A compacted topic keeps the latest record per key: every
            // record needs one.
            require_keys: cleanup_policy.compact,
            compression: compression(&value("compression.type")),
            compression_levels: storage::CompressionLevels {
                gzip: int("compression.gzip.level") as i32,
                lz4: int("compression.lz4.level") as i32,
                zstd: int("compression.zstd.level") as i32,
            },
            timestamp_type: if value("message.timestamp.type") == "LogAppendTime" {
                storage::TimestampType::LogAppendTime
            } else {
                storage::TimestampType::CreateTime
            },
            timestamp_before_max_ms: unsigned("message.timestamp.before.max.ms"),
            timestamp_after_max_ms: unsigned("message.timestamp.after.max.ms"),
            segment_jitter_ms: unsigned("segment.jitter.ms"),
            segment_index_bytes: unsigned("segment.index.bytes") as u32,
            file_delete_delay_ms: unsigned("file.delete.delay.ms"),
            cleanup_policy,
            delete_retention_ms: unsigned("delete.retention.ms"),
            min_compaction_lag_ms: unsigned("min.compaction.lag.ms"),
            max_compaction_lag_ms: unsigned("max.compaction.lag.ms"),
            min_cleanable_dirty_ratio: value("min.cleanable.dirty.ratio").parse().unwrap_or(0.5),
            min_insync_replicas: unsigned("min.insync.replicas") as u32,
            ..storage::LogConfig::default()
        }
    }

    /// Checks what no single key's validation can: the combination of these
    /// overrides with `inherited` and the broker's defaults, as Kafka's
    /// `LogConfig.validate` does. [`ConfigError::InvalidConfig`] names the key.
    pub fn validate_in(
        &self,
        inherited: &TopicConfig,
        broker: &BrokerConfig,
    ) -> Result<(), ConfigError> {
        let c = self.log_config_in(inherited, broker);
        if c.min_compaction_lag_ms > c.max_compaction_lag_ms {
            return Err(ConfigError::InvalidConfig {
                key: "min.compaction.lag.ms".into(),
                reason: format!(
                    "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
                    c.min_compaction_lag_ms, c.max_compaction_lag_ms
                ),
            });
        }
        if self.0.get("remote.storage.enable").map(String::as_str) == Some("true") {
            return Err(ConfigError::InvalidConfig {
                key: "remote.storage.enable".into(),
                reason: "Tiered Storage functionality is disabled in the broker. \
                         Topic cannot be configured with remote log storage."
                    .into(),
            });
        }
        Ok(())
    }
}

/// A topic key's value when neither the topic nor its namespace sets it:
/// its broker key's value, else the key's own default.
fn effective_default(key: &str, broker: &BrokerConfig) -> String {
    let spec = topic_key(key);
    spec.and_then(|k| k.broker_default)
        .and_then(|b| broker.get(b))
        .map(|(v, _)| v.to_string())
        .or_else(|| spec.map(|k| k.default.to_string()))
        .unwrap_or_default()
}

/// The codec `compression.type` asks for; `None` for `producer`.
fn compression(v: &str) -> Option<storage::Compression> {
    Some(match v {
        "uncompressed" => storage::Compression::None,
        "gzip" => storage::Compression::Gzip,
        "snappy" => storage::Compression::Snappy,
        "lz4" => storage::Compression::Lz4,
        "zstd" => storage::Compression::Zstd,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_over_broker_defaults() {
        let mut b = BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        b.apply_assignment("log.retention.bytes=5000").unwrap();
        let t = TopicConfig::from_pairs([
            ("retention.ms", Some("1000")),
            ("segment.bytes", Some("4096")),
        ])
        .unwrap();
        let c = t.log_config(&b);
        assert_eq!(c.retention_ms, Some(1000));
        assert_eq!(c.segment_bytes, 4096);
        assert_eq!(c.retention_bytes, Some(5000));
        let eff = t.effective(&b);
        let rb = eff.iter().find(|e| e.name == "retention.bytes").unwrap();
        assert_eq!(
            (rb.value.as_str(), rb.source),
            ("5000", ConfigSource::Static)
        );
        let rm = eff.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!(
            (rm.value.as_str(), rm.source),
            ("1000", ConfigSource::Topic)
        );
        let seg = eff.iter().find(|e| e.name == "segment.ms").unwrap();
        assert_eq!(seg.source, ConfigSource::Default);
    }

    #[test]
    fn namespace_policies_sit_between_topic_and_broker() {
        let mut b = BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        b.apply_assignment("log.retention.bytes=5000").unwrap();
        let ns = TopicConfig::from_pairs([
            ("retention.ms", Some("60000")),
            ("retention.bytes", Some("1048576")),
        ])
        .unwrap();
        let t = TopicConfig::from_pairs([("retention.ms", Some("1000"))]).unwrap();
        let c = t.log_config_in(&ns, &b);
        assert_eq!(c.retention_ms, Some(1000));
        assert_eq!(c.retention_bytes, Some(1048576));
        let eff = t.effective_in(&ns, &b);
        let get = |name: &str| {
            let e = eff.iter().find(|e| e.name == name).unwrap();
            (e.value.clone(), e.source)
        };
        assert_eq!(get("retention.ms"), ("1000".into(), ConfigSource::Topic));
        assert_eq!(
            get("retention.bytes"),
            ("1048576".into(), ConfigSource::Namespace)
        );
        assert_eq!(get("segment.ms").1, ConfigSource::Default);
        // Without a namespace policy the broker's value shows through.
        let plain = TopicConfig::default().log_config_in(&TopicConfig::default(), &b);
        assert_eq!(plain.retention_bytes, Some(5000));
    }

    #[test]
    fn compaction_settings_come_from_the_topic_or_the_cleaner_defaults() {
        let mut b = BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        let d = TopicConfig::default().log_config(&b);
        assert_eq!(
            (d.cleanup_policy.delete, d.cleanup_policy.compact),
            (true, false)
        );
        assert_eq!(d.delete_retention_ms, 86_400_000);
        assert_eq!(d.min_compaction_lag_ms, 0);
        assert_eq!(d.max_compaction_lag_ms, i64::MAX as u64);
        assert_eq!(d.min_cleanable_dirty_ratio, 0.5);
        b.apply_assignment("log.cleaner.min.cleanable.ratio=0.25")
            .unwrap();
        b.apply_assignment("log.cleaner.delete.retention.ms=5000")
            .unwrap();
        let t = TopicConfig::from_pairs([
            ("cleanup.policy", Some("compact,delete")),
            ("min.compaction.lag.ms", Some("1000")),
            ("max.compaction.lag.ms", Some("60000")),
        ])
        .unwrap();
        let c = t.log_config(&b);
        assert!(c.cleanup_policy.delete && c.cleanup_policy.compact);
        assert_eq!(c.delete_retention_ms, 5000);
        assert_eq!(
            (c.min_compaction_lag_ms, c.max_compaction_lag_ms),
            (1000, 60000)
        );
        assert_eq!(c.min_cleanable_dirty_ratio, 0.25);
        let r = TopicConfig::from_pairs([("min.cleanable.dirty.ratio", Some("0.01"))]).unwrap();
        assert_eq!(r.log_config(&b).min_cleanable_dirty_ratio, 0.01);
        for bad in ["1.5", "-0.1", "x"] {
            assert!(TopicConfig::from_pairs([("min.cleanable.dirty.ratio", Some(bad))]).is_err());
        }
        let compact = TopicConfig::from_pairs([("cleanup.policy", Some("compact"))]).unwrap();
        let c = compact.log_config(&b);
        assert!(!c.cleanup_policy.delete && c.cleanup_policy.compact);
        let cleaner = b.log_cleaner();
        assert_eq!(cleaner, storage::CleanerConfig::default());
    }

    #[test]
    fn compacted_topics_require_keys() {
        let b = BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        for (policy, keys) in [
            (None, false),
            (Some("delete"), false),
            (Some("compact"), true),
            (Some("compact,delete"), true),
            (Some("delete,compact"), true),
        ] {
            let t = TopicConfig::from_pairs([("cleanup.policy", policy)]).unwrap();
            assert_eq!(t.log_config(&b).require_keys, keys, "{policy:?}");
        }
    }

    /// Every declared topic key takes a valid value other than its default
    /// and refuses a wrong one with INVALID_CONFIG naming the key.
    #[test]
    fn every_topic_key_is_accepted_and_validated() {
        for k in TOPIC_KEYS {
            let (good, bad) = match k.kind {
                crate::ValueKind::Bool => ("true", "yes"),
                crate::ValueKind::Double { .. } => ("0.75", "2"),
                crate::ValueKind::List(_) => ("compact,delete", "forever"),
                crate::ValueKind::ReplicaList => ("0:1,1:1", "all"),
                crate::ValueKind::Choice(c) => (c[0], "nope"),
                crate::ValueKind::Int { min, max }
                | crate::ValueKind::IntOrMinusOne { min, max }
                | crate::ValueKind::Long { min, max } => (
                    if (min..=max).contains(&1) {
                        "1"
                    } else {
                        "1024"
                    },
                    "soon",
                ),
                _ => ("1024", "soon"),
            };
            let t = TopicConfig::from_pairs([(k.name, Some(good))])
                .unwrap_or_else(|e| panic!("{}={good}: {e}", k.name));
            assert!(t.overrides().contains_key(k.name));
            let e = TopicConfig::from_pairs([(k.name, Some(bad))]).unwrap_err();
            assert!(
                matches!(&e, ConfigError::InvalidConfig { key, .. } if key == k.name),
                "{}: {e}",
                k.name
            );
        }
        // Removed in Kafka 4.0: unknown here as there.
        for gone in [
            "message.format.version",
            "message.timestamp.difference.max.ms",
        ] {
            assert!(
                TopicConfig::from_pairs([(gone, Some("1"))]).is_err(),
                "{gone}"
            );
        }
    }

    #[test]
    fn topic_keys_reach_the_log_config() {
        let b = BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        let t = TopicConfig::from_pairs([
            ("compression.type", Some("zstd")),
            ("compression.zstd.level", Some("9")),
            ("compression.gzip.level", Some("4")),
            ("message.timestamp.type", Some("LogAppendTime")),
            ("message.timestamp.before.max.ms", Some("1000")),
            ("message.timestamp.after.max.ms", Some("2000")),
            ("index.interval.bytes", Some("512")),
            ("segment.index.bytes", Some("4096")),
            ("segment.jitter.ms", Some("77")),
            ("file.delete.delay.ms", Some("0")),
            ("cleanup.policy", Some("compact")),
            ("delete.retention.ms", Some("11")),
            ("min.compaction.lag.ms", Some("12")),
            ("max.compaction.lag.ms", Some("13")),
            ("min.cleanable.dirty.ratio", Some("0.25")),
            ("min.insync.replicas", Some("2")),
            ("retention.bytes", Some("-5")),
        ])
        .unwrap();
        let c = t.log_config(&b);
        assert_eq!(c.compression, Some(storage::Compression::Zstd));
        assert_eq!(
            (c.compression_levels.zstd, c.compression_levels.gzip),
            (9, 4)
        );
        assert_eq!(c.timestamp_type, storage::TimestampType::LogAppendTime);
        assert_eq!(
            (c.timestamp_before_max_ms, c.timestamp_after_max_ms),
            (1000, 2000)
        );
        assert_eq!((c.index_interval_bytes, c.segment_index_bytes), (512, 4096));
        assert_eq!((c.segment_jitter_ms, c.file_delete_delay_ms), (77, 0));
        assert_eq!(
            c.cleanup_policy,
            storage::CleanupPolicy {
                delete: false,
                compact: true
            }
        );
        assert!(c.require_keys);
        assert_eq!(
            (
                c.delete_retention_ms,
                c.min_compaction_lag_ms,
                c.max_compaction_lag_ms
            ),
            (11, 12, 13)
        );
        assert_eq!(c.min_cleanable_dirty_ratio, 0.25);
        assert_eq!(c.min_insync_replicas, 2);
        assert_eq!(c.retention_bytes, None, "negative is no limit, as in Kafka");

        // Kafka's defaults, and `producer` keeps batches as sent.
        let d = TopicConfig::default().log_config(&b);
        assert_eq!(d.compression, None);
        assert_eq!(d.timestamp_type, storage::TimestampType::CreateTime);
        assert_eq!(d.timestamp_before_max_ms, i64::MAX as u64);
        assert_eq!(d.timestamp_after_max_ms, 3_600_000);
        assert_eq!(d.file_delete_delay_ms, 60_000);
        assert_eq!(d.segment_index_bytes, 10 * 1024 * 1024);
        assert!(d.cleanup_policy.delete && !d.cleanup_policy.compact);
        assert_eq!(d.max_compaction_lag_ms, i64::MAX as u64);
        assert_eq!(
            d,
            storage::LogConfig::default(),
            "the storage defaults are Kafka's"
        );
    }

    #[test]
    fn broker_keys_are_the_topic_defaults() {
        let mut b = BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        for a in [
            "compression.type=lz4",
            "log.message.timestamp.type=LogAppendTime",
            "log.cleanup.policy=compact,delete",
            "log.cleaner.min.cleanable.ratio=0.9",
            "log.roll.jitter.hours=1",
            "min.insync.replicas=3",
        ] {
            b.apply_assignment(a).unwrap();
        }
        let c = TopicConfig::default().log_config(&b);
        assert_eq!(c.compression, Some(storage::Compression::Lz4));
        assert_eq!(c.timestamp_type, storage::TimestampType::LogAppendTime);
        assert!(c.cleanup_policy.delete && c.cleanup_policy.compact);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.9);
        assert_eq!(c.segment_jitter_ms, 3_600_000);
        assert_eq!(c.min_insync_replicas, 3);
        let eff = TopicConfig::default().effective(&b);
        let get = |n: &str| eff.iter().find(|e| e.name == n).unwrap().clone();
        assert_eq!(get("compression.type").value, "lz4");
        assert_eq!(get("compression.type").source, ConfigSource::Static);
        // A topic override wins.
        let t = TopicConfig::from_pairs([("compression.type", Some("producer"))]).unwrap();
        assert_eq!(t.log_config(&b).compression, None);
    }

    /// Kafka's `LogConfig.validate`: settings that conflict, and tiered
    /// storage on a broker without it.
    #[test]
    fn combinations_are_validated() {
        let b = BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        let none = TopicConfig::default();
        let lag = TopicConfig::from_pairs([
            ("min.compaction.lag.ms", Some("100")),
            ("max.compaction.lag.ms", Some("10")),
        ])
        .unwrap();
        let e = lag.validate_in(&none, &b).unwrap_err();
        assert!(
            e.to_string()
                .contains("min.compaction.lag.ms (100) > max.compaction.lag.ms (10)"),
            "{e}"
        );
        let remote = TopicConfig::from_pairs([("remote.storage.enable", Some("true"))]).unwrap();
        let e = remote.validate_in(&none, &b).unwrap_err();
        assert!(
            matches!(&e, ConfigError::InvalidConfig { key, .. } if key == "remote.storage.enable")
        );
        let off = TopicConfig::from_pairs([("remote.storage.enable", Some("false"))]).unwrap();
        assert!(off.validate_in(&none, &b).is_ok());
    }

    #[test]
    fn rejects_unknown_and_invalid() {
        assert!(TopicConfig::from_pairs([("retention.mss", Some("1"))]).is_err());
        assert!(TopicConfig::from_pairs([("retention.ms", Some("soon"))]).is_err());
        assert!(TopicConfig::from_pairs([("cleanup.policy", Some("compact"))]).is_ok());
    }
}
