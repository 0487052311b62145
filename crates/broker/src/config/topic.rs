//! Per-topic configuration overrides.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::keys::{topic_key, TOPIC_KEYS};
use super::{BrokerConfig, ConfigSource};
use crate::Error;

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
    ) -> Result<TopicConfig, Error> {
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
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let spec = topic_key(key).ok_or_else(|| Error::InvalidConfig {
            key: key.to_string(),
            reason: "unknown topic configuration key".into(),
        })?;
        let v = spec
            .kind
            .validate(value)
            .map_err(|reason| Error::InvalidConfig {
                key: key.to_string(),
                reason,
            })?;
        self.0.insert(spec.name.to_string(), v);
        Ok(())
    }

    /// Removes an override (falls back to the broker default).
    pub fn remove(&mut self, key: &str) -> Result<(), Error> {
        if topic_key(key).is_none() {
            return Err(Error::InvalidConfig {
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
        let mut c = broker.log_defaults();
        let get = |k: &str| self.0.get(k).or_else(|| inherited.0.get(k));
        let int = |k: &str| get(k).and_then(|v| v.parse::<i64>().ok());
        let limit = |v: i64| (v >= 0).then_some(v as u64);
        if let Some(v) = int("retention.ms") {
            c.retention_ms = limit(v);
        }
        if let Some(v) = int("retention.bytes") {
            c.retention_bytes = limit(v);
        }
        if let Some(v) = int("segment.bytes") {
            c.segment_bytes = v as u64;
        }
        if let Some(v) = int("segment.ms") {
            c.roll_ms = limit(v);
        }
        if let Some(v) = int("max.message.bytes") {
            c.max_message_bytes = v as u32;
        }
        if let Some(v) = int("flush.messages") {
            c.flush_interval_messages = limit(v);
        }
        if let Some(v) = int("flush.ms") {
            c.flush_interval_ms = limit(v);
        }
        if let Some(p) = get("cleanup.policy").and_then(|p| storage::CleanupPolicy::parse(p)) {
            c.cleanup_policy = p;
        }
        // A compacted topic keeps the latest record per key: every record
        // needs one.
        c.require_keys = c.cleanup_policy.compact;
        if let Some(v) = int("delete.retention.ms") {
            c.delete_retention_ms = v.max(0) as u64;
        }
        if let Some(v) = int("min.compaction.lag.ms") {
            c.min_compaction_lag_ms = v.max(0) as u64;
        }
        if let Some(v) = int("max.compaction.lag.ms") {
            c.max_compaction_lag_ms = v.max(1) as u64;
        }
        if let Some(v) = get("min.cleanable.dirty.ratio").and_then(|v| v.parse::<f64>().ok()) {
            c.min_cleanable_dirty_ratio = v;
        }
        c
    }
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

    #[test]
    fn rejects_unknown_and_invalid() {
        assert!(TopicConfig::from_pairs([("retention.mss", Some("1"))]).is_err());
        assert!(TopicConfig::from_pairs([("retention.ms", Some("soon"))]).is_err());
        assert!(TopicConfig::from_pairs([("cleanup.policy", Some("compact"))]).is_ok());
    }
}
