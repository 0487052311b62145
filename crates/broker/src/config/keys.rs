//! The declared configuration keys: one row per key, with its default,
//! value type and documentation.

/// The type of a configuration value, used to validate and normalize it.
#[derive(Debug, Clone, Copy)]
pub enum ValueKind {
    /// `true` or `false`.
    Bool,
    /// An integer in `min..=max`.
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// `-1` (unlimited / unset) or an integer `>= min`.
    Limit {
        /// Smallest accepted value other than -1.
        min: i64,
    },
    /// A floating-point number in `min..=max`.
    Double {
        /// Smallest accepted value.
        min: f64,
        /// Largest accepted value.
        max: f64,
    },
    /// One of a fixed set of strings.
    Choice(&'static [&'static str]),
    /// A Kafka listener, `PLAINTEXT://host:port` or `host:port`; empty = unset.
    Listener,
}

impl ValueKind {
    /// Checks `v` and returns its normalized form, or why it is invalid.
    pub fn validate(&self, v: &str) -> Result<String, String> {
        let v = v.trim();
        match *self {
            ValueKind::Bool => match v.to_ascii_lowercase().as_str() {
                "true" => Ok("true".into()),
                "false" => Ok("false".into()),
                _ => Err(format!("expected true or false, got {v:?}")),
            },
            ValueKind::Int { min, max } => {
                let n: i64 = v
                    .parse()
                    .map_err(|_| format!("expected an integer, got {v:?}"))?;
                if n < min || n > max {
                    return Err(format!("{n} is outside {min}..={max}"));
                }
                Ok(n.to_string())
            }
            ValueKind::Limit { min } => {
                let n: i64 = v
                    .parse()
                    .map_err(|_| format!("expected an integer, got {v:?}"))?;
                if n != -1 && n < min {
                    return Err(format!("expected -1 or a value >= {min}, got {n}"));
                }
                Ok(n.to_string())
            }
            ValueKind::Double { min, max } => {
                let n: f64 = v
                    .parse()
                    .map_err(|_| format!("expected a number, got {v:?}"))?;
                if !(n >= min && n <= max) {
                    return Err(format!("{v} is outside {min}..={max}"));
                }
                // Kept as written: `1.7976931348623157E308` stays readable.
                Ok(v.to_string())
            }
            ValueKind::Choice(options) => {
                let lower = v.to_ascii_lowercase();
                options
                    .iter()
                    .find(|o| **o == lower)
                    .map(|o| o.to_string())
                    .ok_or_else(|| format!("expected one of {}, got {v:?}", options.join(" | ")))
            }
            ValueKind::Listener => {
                if v.is_empty() {
                    return Ok(String::new());
                }
                parse_listener(v)?;
                Ok(v.to_string())
            }
        }
    }
}

/// Parses `PLAINTEXT://host:port` or `host:port`.
pub fn parse_listener(v: &str) -> Result<(String, u16), String> {
    let rest = match v.split_once("://") {
        Some((scheme, rest))
            if scheme.eq_ignore_ascii_case("PLAINTEXT")
                || scheme.eq_ignore_ascii_case("pulsar") =>
        {
            rest
        }
        Some((scheme, _)) => return Err(format!("unsupported listener scheme {scheme:?}")),
        None => v,
    };
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("expected host:port, got {v:?}"))?;
    let port: u16 = port.parse().map_err(|_| format!("invalid port in {v:?}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("missing host in {v:?}"));
    }
    Ok((host.to_string(), port))
}

/// One declared configuration key.
#[derive(Debug, Clone, Copy)]
pub struct ConfigKey {
    /// The key, as users write it.
    pub name: &'static str,
    /// Default value, normalized.
    pub default: &'static str,
    /// Value type.
    pub kind: ValueKind,
    /// Whether IncrementalAlterConfigs may change it at runtime.
    pub dynamic: bool,
    /// For topic keys: the broker key that provides the default.
    pub broker_default: Option<&'static str>,
    /// One-line documentation (README and DescribeConfigs).
    pub doc: &'static str,
}

const DAY_MS: &str = "604800000";

/// Every broker-level key.
pub const BROKER_KEYS: &[ConfigKey] = &[
    ConfigKey {
        name: "node.id",
        default: "1",
        kind: ValueKind::Int { min: 0, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "This broker's node id, reported in Metadata.",
    },
    ConfigKey {
        name: "advertised.listeners",
        default: "",
        kind: ValueKind::Listener,
        dynamic: false,
        broker_default: None,
        doc: "Address given to clients (PLAINTEXT://host:port); defaults to the listen address.",
    },
    ConfigKey {
        name: "auto.create.topics.enable",
        default: "true",
        kind: ValueKind::Bool,
        dynamic: true,
        broker_default: None,
        doc: "Create a missing topic when a Metadata request asks for it (allow_auto_topic_creation).",
    },
    ConfigKey {
        name: "auto.create.topics.type",
        default: "partitioned",
        kind: ValueKind::Choice(&["partitioned", "non-partitioned"]),
        dynamic: true,
        broker_default: None,
        doc: "Auto-created topics get num.partitions partitions (partitioned) or one partition recorded as non-partitioned.",
    },
    ConfigKey {
        name: "num.partitions",
        default: "1",
        kind: ValueKind::Int { min: 1, max: 10_000 },
        dynamic: true,
        broker_default: None,
        doc: "Partition count of auto-created partitioned topics and of CreateTopics requests that leave it at -1.",
    },
    ConfigKey {
        name: "log.retention.ms",
        default: DAY_MS,
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: None,
        doc: "Delete closed segments whose newest record is older than this; -1 keeps them forever.",
    },
    ConfigKey {
        name: "log.retention.bytes",
        default: "-1",
        kind: ValueKind::Limit { min: 0 },
        dynamic: true,
        broker_default: None,
        doc: "Delete the oldest closed segments while a partition is larger than this; -1 = no limit.",
    },
    ConfigKey {
        name: "log.segment.bytes",
        default: "1073741824",
        kind: ValueKind::Int { min: 1024, max: i32::MAX as i64 },
        dynamic: true,
        broker_default: None,
        doc: "Roll to a new segment file when the active one reaches this size.",
    },
    ConfigKey {
        name: "log.roll.ms",
        default: DAY_MS,
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: None,
        doc: "Roll to a new segment when the active one is older than this; -1 = never by time.",
    },
    ConfigKey {
        name: "message.max.bytes",
        default: "1048588",
        kind: ValueKind::Int { min: 0, max: i32::MAX as i64 },
        dynamic: true,
        broker_default: None,
        doc: "Largest record batch a producer may send (MESSAGE_TOO_LARGE above it).",
    },
    ConfigKey {
        name: "fetch.max.bytes",
        default: "57671680",
        kind: ValueKind::Int { min: 1024, max: i32::MAX as i64 },
        dynamic: true,
        broker_default: None,
        doc: "Most bytes one Fetch response carries, whatever the request asks (at least one batch is returned).",
    },
    ConfigKey {
        name: "socket.request.max.bytes",
        default: "104857600",
        kind: ValueKind::Int { min: 1024, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Largest request frame accepted; a larger length prefix closes the connection.",
    },
    ConfigKey {
        name: "queued.max.request.bytes",
        default: "536870912",
        kind: ValueKind::Limit { min: 1024 },
        dynamic: false,
        broker_default: None,
        doc: "Most bytes of requests being read or handled at once over all connections; reading waits while it is reached; -1 = no limit.",
    },
    ConfigKey {
        name: "socket.request.read.timeout.ms",
        default: "30000",
        kind: ValueKind::Limit { min: 1 },
        dynamic: false,
        broker_default: None,
        doc: "A request must arrive whole within this long of its size prefix, or the connection is closed; -1 = no limit.",
    },
    ConfigKey {
        name: "connections.max.idle.ms",
        default: "600000",
        kind: ValueKind::Limit { min: 1 },
        dynamic: false,
        broker_default: None,
        doc: "Close connections that sent no request for this long; -1 = never.",
    },
    ConfigKey {
        name: "max.connections",
        default: "-1",
        kind: ValueKind::Limit { min: 1 },
        dynamic: false,
        broker_default: None,
        doc: "Most client connections at once; more are closed on accept. -1 = half the process's open-file limit.",
    },
    ConfigKey {
        name: "max.connections.per.ip",
        default: "2147483647",
        kind: ValueKind::Int { min: 1, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Most client connections at once from one IP address; more are closed on accept.",
    },
    ConfigKey {
        name: "log.flush.interval.messages",
        default: "-1",
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: None,
        doc: "fsync a partition after this many unflushed records; -1 leaves flushing to the OS.",
    },
    ConfigKey {
        name: "log.flush.interval.ms",
        default: "-1",
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: None,
        doc: "fsync a partition whose oldest unflushed record is older than this; -1 leaves flushing to the OS.",
    },
    ConfigKey {
        name: "log.retention.check.interval.ms",
        default: "300000",
        kind: ValueKind::Int { min: 1, max: i64::MAX },
        dynamic: false,
        broker_default: None,
        doc: "How often retention runs over all partitions.",
    },
    ConfigKey {
        name: "log.cleaner.enable",
        default: "true",
        kind: ValueKind::Bool,
        dynamic: true,
        broker_default: None,
        doc: "Whether the log cleaner compacts topics with cleanup.policy=compact.",
    },
    ConfigKey {
        name: "log.cleaner.threads",
        default: "1",
        kind: ValueKind::Int { min: 1, max: 64 },
        dynamic: true,
        broker_default: None,
        doc: "Partitions the log cleaner compacts at once.",
    },
    ConfigKey {
        name: "log.cleaner.io.max.bytes.per.second",
        default: "1.7976931348623157E308",
        kind: ValueKind::Double { min: 1.0, max: f64::MAX },
        dynamic: true,
        broker_default: None,
        doc: "Bytes per second all cleaner threads together read and write at most.",
    },
    ConfigKey {
        name: "log.cleaner.dedupe.buffer.size",
        default: "134217728",
        kind: ValueKind::Int { min: 1, max: i64::MAX },
        dynamic: true,
        broker_default: None,
        doc: "Memory for the cleaner threads' key maps together (at least 1 MiB per thread is used).",
    },
    ConfigKey {
        name: "log.cleaner.backoff.ms",
        default: "15000",
        kind: ValueKind::Int { min: 1, max: i64::MAX },
        dynamic: true,
        broker_default: None,
        doc: "How long the cleaner waits when no partition needs compacting.",
    },
    ConfigKey {
        name: "log.cleaner.delete.retention.ms",
        default: "86400000",
        kind: ValueKind::Int { min: 0, max: i64::MAX },
        dynamic: true,
        broker_default: None,
        doc: "How long a tombstone stays after the cleaning that first kept it (default of delete.retention.ms).",
    },
    ConfigKey {
        name: "log.cleaner.min.compaction.lag.ms",
        default: "0",
        kind: ValueKind::Int { min: 0, max: i64::MAX },
        dynamic: true,
        broker_default: None,
        doc: "A record is not compacted before it is this old (default of min.compaction.lag.ms).",
    },
    ConfigKey {
        name: "log.cleaner.max.compaction.lag.ms",
        default: "9223372036854775807",
        kind: ValueKind::Int { min: 1, max: i64::MAX },
        dynamic: true,
        broker_default: None,
        doc: "A record is compacted soon after it is this old, whatever the dirty ratio (default of max.compaction.lag.ms).",
    },
    ConfigKey {
        name: "log.cleaner.min.cleanable.ratio",
        default: "0.5",
        kind: ValueKind::Double { min: 0.0, max: 1.0 },
        dynamic: true,
        broker_default: None,
        doc: "A partition is compacted once its uncompacted part is more than this share of it (default of min.cleanable.dirty.ratio).",
    },
    ConfigKey {
        name: "group.min.session.timeout.ms",
        default: "6000",
        kind: ValueKind::Int { min: 1, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Shortest session timeout a classic group member may ask for.",
    },
    ConfigKey {
        name: "group.max.session.timeout.ms",
        default: "1800000",
        kind: ValueKind::Int { min: 1, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Longest session timeout a classic group member may ask for.",
    },
    ConfigKey {
        name: "group.initial.rebalance.delay.ms",
        default: "3000",
        kind: ValueKind::Int { min: 0, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "How long the first rebalance of an empty classic group waits for more members.",
    },
    ConfigKey {
        name: "group.max.size",
        default: "2147483647",
        kind: ValueKind::Int { min: 1, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Most members a group may have.",
    },
    ConfigKey {
        name: "group.consumer.session.timeout.ms",
        default: "45000",
        kind: ValueKind::Int { min: 1, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Session timeout of consumer-protocol (KIP-848) group members.",
    },
    ConfigKey {
        name: "group.consumer.heartbeat.interval.ms",
        default: "5000",
        kind: ValueKind::Int { min: 1, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Heartbeat interval given to consumer-protocol (KIP-848) group members.",
    },
    ConfigKey {
        name: "group.consumer.assignors",
        default: "uniform,range",
        kind: ValueKind::Choice(&["uniform,range", "range,uniform", "uniform", "range"]),
        dynamic: false,
        broker_default: None,
        doc: "Server-side assignors of consumer-protocol groups; the first is the default.",
    },
    ConfigKey {
        name: "offsets.retention.minutes",
        default: "10080",
        kind: ValueKind::Int { min: 1, max: i32::MAX as i64 },
        dynamic: false,
        broker_default: None,
        doc: "Committed offsets of a group with no members expire this long after their last commit.",
    },
    ConfigKey {
        name: "offsets.retention.check.interval.ms",
        default: "600000",
        kind: ValueKind::Int { min: 1, max: i64::MAX },
        dynamic: false,
        broker_default: None,
        doc: "How often expired offsets are removed.",
    },
    ConfigKey {
        name: "pulsar.advertised.address",
        default: "",
        kind: ValueKind::Listener,
        dynamic: false,
        broker_default: None,
        doc: "Address Pulsar Lookup answers give clients (host:port or pulsar://host:port); defaults to the Pulsar listen address.",
    },
    ConfigKey {
        name: "pulsar.max.message.size",
        default: "5242880",
        kind: ValueKind::Int { min: 1024, max: i32::MAX as i64 - 10240 },
        dynamic: false,
        broker_default: None,
        doc: "Largest Pulsar message (metadata and payload) accepted, announced in Connected; frames may be 10 KiB larger (upstream maxMessageSize).",
    },
    ConfigKey {
        name: "pulsar.keep.alive.interval.seconds",
        default: "30",
        kind: ValueKind::Int { min: 1, max: 3600 },
        dynamic: false,
        broker_default: None,
        doc: "Pulsar connections are pinged this often and closed after two intervals without traffic (upstream keepAliveIntervalSeconds).",
    },
    ConfigKey {
        name: "pulsar.deduplication.producer.inactivity.timeout.minutes",
        default: "360",
        kind: ValueKind::Int { min: 1, max: 1 << 40 },
        dynamic: false,
        broker_default: None,
        doc: "A producer name's deduplication state (its last sequence id per partition) is forgotten once no producer of that name has been attached for this long (upstream brokerDeduplicationProducerInactivityTimeoutMinutes).",
    },
];

/// Every topic-level key (set by CreateTopics or IncrementalAlterConfigs).
pub const TOPIC_KEYS: &[ConfigKey] = &[
    ConfigKey {
        name: "retention.ms",
        default: DAY_MS,
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: Some("log.retention.ms"),
        doc: "Topic override of log.retention.ms.",
    },
    ConfigKey {
        name: "retention.bytes",
        default: "-1",
        kind: ValueKind::Limit { min: 0 },
        dynamic: true,
        broker_default: Some("log.retention.bytes"),
        doc: "Topic override of log.retention.bytes (per partition).",
    },
    ConfigKey {
        name: "segment.bytes",
        default: "1073741824",
        kind: ValueKind::Int {
            min: 1024,
            max: i32::MAX as i64,
        },
        dynamic: true,
        broker_default: Some("log.segment.bytes"),
        doc: "Topic override of log.segment.bytes.",
    },
    ConfigKey {
        name: "segment.ms",
        default: DAY_MS,
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: Some("log.roll.ms"),
        doc: "Topic override of log.roll.ms.",
    },
    ConfigKey {
        name: "max.message.bytes",
        default: "1048588",
        kind: ValueKind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        dynamic: true,
        broker_default: Some("message.max.bytes"),
        doc: "Topic override of message.max.bytes.",
    },
    ConfigKey {
        name: "flush.messages",
        default: "-1",
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: Some("log.flush.interval.messages"),
        doc: "Topic override of log.flush.interval.messages.",
    },
    ConfigKey {
        name: "flush.ms",
        default: "-1",
        kind: ValueKind::Limit { min: 1 },
        dynamic: true,
        broker_default: Some("log.flush.interval.ms"),
        doc: "Topic override of log.flush.interval.ms.",
    },
    ConfigKey {
        name: "cleanup.policy",
        default: "delete",
        kind: ValueKind::Choice(&["delete", "compact", "compact,delete", "delete,compact"]),
        dynamic: true,
        broker_default: None,
        doc: "delete: retention removes old segments; compact: the log cleaner keeps the latest record per key; both together.",
    },
    ConfigKey {
        name: "delete.retention.ms",
        default: "86400000",
        kind: ValueKind::Int { min: 0, max: i64::MAX },
        dynamic: true,
        broker_default: Some("log.cleaner.delete.retention.ms"),
        doc: "Topic override of log.cleaner.delete.retention.ms.",
    },
    ConfigKey {
        name: "min.compaction.lag.ms",
        default: "0",
        kind: ValueKind::Int { min: 0, max: i64::MAX },
        dynamic: true,
        broker_default: Some("log.cleaner.min.compaction.lag.ms"),
        doc: "Topic override of log.cleaner.min.compaction.lag.ms.",
    },
    ConfigKey {
        name: "max.compaction.lag.ms",
        default: "9223372036854775807",
        kind: ValueKind::Int { min: 1, max: i64::MAX },
        dynamic: true,
        broker_default: Some("log.cleaner.max.compaction.lag.ms"),
        doc: "Topic override of log.cleaner.max.compaction.lag.ms.",
    },
    ConfigKey {
        name: "min.cleanable.dirty.ratio",
        default: "0.5",
        kind: ValueKind::Double { min: 0.0, max: 1.0 },
        dynamic: true,
        broker_default: Some("log.cleaner.min.cleanable.ratio"),
        doc: "Topic override of log.cleaner.min.cleanable.ratio.",
    },
];

/// Looks up a broker key.
pub fn broker_key(name: &str) -> Option<&'static ConfigKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

/// Looks up a topic key.
pub fn topic_key(name: &str) -> Option<&'static ConfigKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_valid_for_its_kind() {
        for k in BROKER_KEYS.iter().chain(TOPIC_KEYS) {
            assert_eq!(
                k.kind.validate(k.default).as_deref(),
                Ok(k.default),
                "{}",
                k.name
            );
            if let Some(b) = k.broker_default {
                let bk = broker_key(b).unwrap();
                assert_eq!(bk.default, k.default, "{} vs {b}", k.name);
            }
        }
    }
}

#[cfg(test)]
mod readme {
    use super::*;

    const EXAMPLE_PATH: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/magnetar.example.toml"
    );

    /// The example configuration file as the key table says it should be.
    fn render_example() -> String {
        let mut out = String::from(
            "# Magnetar broker configuration: every key with its default value.\n\
             # Use it with `magnetar standalone --config FILE`; keys are Kafka's broker\n\
             # property names. Delete the lines you do not change, or edit them.\n\
             # Values can also be set on the command line: --set KEY=VALUE.\n\
             # (Generated from crates/broker/src/config/keys.rs; a test checks it.)\n",
        );
        for k in BROKER_KEYS {
            let value = match k.kind {
                ValueKind::Bool | ValueKind::Int { .. } | ValueKind::Limit { .. } => {
                    k.default.to_string()
                }
                // Quoted, so that the value reads back exactly as written
                // (a TOML float also works).
                ValueKind::Double { .. } | ValueKind::Choice(_) | ValueKind::Listener => {
                    format!("{:?}", k.default)
                }
            };
            let dynamic = if k.dynamic {
                " (dynamic: can be changed at runtime)"
            } else {
                ""
            };
            out.push_str(&format!(
                "\n# {}{dynamic}\n\"{}\" = {value}\n",
                k.doc, k.name
            ));
        }
        out
    }

    /// `config/magnetar.example.toml` lists every broker key with its
    /// default and documentation, and is a valid configuration equal to the
    /// defaults. `MAGNETAR_BLESS=1` rewrites it from the table.
    #[test]
    fn example_config_file_matches_the_key_table() {
        let expected = render_example();
        if std::env::var_os("MAGNETAR_BLESS").is_some() {
            std::fs::write(EXAMPLE_PATH, &expected).unwrap();
        }
        let actual = std::fs::read_to_string(EXAMPLE_PATH).unwrap();
        assert_eq!(
            actual, expected,
            "config/magnetar.example.toml is out of date: run MAGNETAR_BLESS=1 cargo test -p broker example_config"
        );
        let mut config =
            crate::config::BrokerConfig::new("/tmp/x", "127.0.0.1:9092".parse().unwrap());
        config
            .apply_toml_file(std::path::Path::new(EXAMPLE_PATH))
            .unwrap();
        for k in BROKER_KEYS {
            assert_eq!(
                config.get(k.name).map(|(v, _)| v),
                Some(k.default),
                "{}",
                k.name
            );
        }
    }

    /// The README's configuration reference is a contract: every key must
    /// be documented there.
    #[test]
    fn every_key_is_documented_in_the_readme() {
        let readme = include_str!("../../../../README.md");
        for k in BROKER_KEYS.iter().chain(TOPIC_KEYS) {
            assert!(
                readme.contains(&format!("`{}`", k.name)),
                "README lacks `{}`",
                k.name
            );
        }
    }
}
