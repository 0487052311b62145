//! Every topic-level key of Kafka 4.x (`TopicConfig`), with Kafka's type,
//! default, valid values and the broker key its default comes from.
//!
//! Kafka 4.0 removed `message.format.version` and
//! `message.timestamp.difference.max.ms`; both are refused as unknown, as
//! Kafka 4 does. `message.downconversion.enable` is deprecated in Kafka 4
//! and a no-op there; it is accepted the same way.

use super::broker_keys::{long, CLEANUP_POLICIES, COMPRESSION_TYPES, I32_MAX, TIMESTAMP_TYPES};
use super::key_spec::{ConfigKey, ValueKind};

const fn t(
    name: &'static str,
    default: &'static str,
    kind: ValueKind,
    broker_default: Option<&'static str>,
    doc: &'static str,
) -> ConfigKey {
    ConfigKey::topic(name, default, kind, broker_default, doc)
}

const NO_TIERED: &str = "there is no tiered storage";
/// Every topic-level key (set by CreateTopics, AlterConfigs or
/// IncrementalAlterConfigs).
#[rustfmt::skip]
pub const TOPIC_KEYS: &[ConfigKey] = &[
    t("cleanup.policy", "delete", ValueKind::List(CLEANUP_POLICIES), Some("log.cleanup.policy"),
        "delete: retention deletes old segments; compact: the log cleaner keeps the latest record of each key (records need a key); both together."),
    t("compression.type", "producer", ValueKind::Choice(COMPRESSION_TYPES), Some("compression.type"),
        "Codec batches are stored in: producer keeps the producer's; a codec (or uncompressed) recompresses others on append."),
    t("compression.gzip.level", "-1", ValueKind::IntOrMinusOne { min: 1, max: 9 }, Some("compression.gzip.level"),
        "gzip level used when recompressing (-1: the codec's default)."),
    t("compression.lz4.level", "9", ValueKind::Int { min: 1, max: 17 }, Some("compression.lz4.level"),
        "LZ4 level used when recompressing.")
        .not_enforced("the LZ4 encoder has a single level"),
    t("compression.zstd.level", "3", ValueKind::Int { min: -131_072, max: 22 }, Some("compression.zstd.level"),
        "zstd level used when recompressing."),
    t("delete.retention.ms", "86400000", long(0), Some("log.cleaner.delete.retention.ms"),
        "How long tombstones stay in a compacted log after the cleaning that first kept them."),
    t("file.delete.delay.ms", "60000", long(0), Some("log.segment.delete.delay.ms"),
        "Files of a deleted segment are renamed *.deleted and removed this long afterwards."),
    t("flush.messages", "-1", ValueKind::Limit { min: 1 }, Some("log.flush.interval.messages"),
        "fsync a partition after this many unflushed records; -1 leaves flushing to the OS."),
    t("flush.ms", "-1", ValueKind::Limit { min: 1 }, Some("log.flush.interval.ms"),
        "fsync a partition whose oldest unflushed record is older than this; -1 leaves flushing to the OS."),
    t("follower.replication.throttled.replicas", "", ValueKind::ReplicaList, None,
        "Replicas whose fetching as followers is held to follower.replication.throttled.rate (* or partition:broker pairs)."),
    t("index.interval.bytes", "4096", ValueKind::Int { min: 0, max: I32_MAX }, Some("log.index.interval.bytes"),
        "Bytes of log between two entries of a segment's offset index."),
    t("leader.replication.throttled.replicas", "", ValueKind::ReplicaList, None,
        "Replicas whose serving of followers as leaders is held to leader.replication.throttled.rate (* or partition:broker pairs)."),
    t("local.retention.bytes", "-2", long(-2), Some("log.local.retention.bytes"),
        "Bytes of a tiered topic kept locally (-2: retention.bytes).")
        .not_enforced(NO_TIERED),
    t("local.retention.ms", "-2", long(-2), Some("log.local.retention.ms"),
        "Time a tiered topic's data is kept locally (-2: retention.ms).")
        .not_enforced(NO_TIERED),
    t("max.compaction.lag.ms", "9223372036854775807", long(1), Some("log.cleaner.max.compaction.lag.ms"),
        "Records older than this are due for compaction whatever the dirty ratio (the active segment of a compacted log rolls by then)."),
    t("max.message.bytes", "1048588", ValueKind::Int { min: 0, max: I32_MAX }, Some("message.max.bytes"),
        "Largest record batch accepted, after recompression (MESSAGE_TOO_LARGE above it)."),
    t("message.downconversion.enable", "true", ValueKind::Bool, Some("log.message.downconversion.enable"),
        "Deprecated in Kafka 4 and a no-op there too.")
        .not_enforced("there is no down-conversion (Kafka 4 has none either)"),
    t("message.timestamp.after.max.ms", "3600000", long(0), Some("log.message.timestamp.after.max.ms"),
        "Refuse (INVALID_TIMESTAMP) CreateTime records newer than this relative to the broker's time."),
    t("message.timestamp.before.max.ms", "9223372036854775807", long(0), Some("log.message.timestamp.before.max.ms"),
        "Refuse (INVALID_TIMESTAMP) CreateTime records older than this relative to the broker's time."),
    t("message.timestamp.type", "CreateTime", ValueKind::Choice(TIMESTAMP_TYPES), Some("log.message.timestamp.type"),
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps every batch with the broker's time."),
    t("min.cleanable.dirty.ratio", "0.5", ValueKind::Double { min: 0.0, max: 1.0 }, Some("log.cleaner.min.cleanable.ratio"),
        "Share of a compacted log not yet cleaned from which it is cleaned."),
    t("min.compaction.lag.ms", "0", long(0), Some("log.cleaner.min.compaction.lag.ms"),
        "Records younger than this are never compacted."),
    t("min.insync.replicas", "1", ValueKind::Int { min: 1, max: I32_MAX }, Some("min.insync.replicas"),
        "acks=all produce needs this many in-sync replicas (NOT_ENOUGH_REPLICAS otherwise; one on this single node)."),
    t("preallocate", "false", ValueKind::Bool, Some("log.preallocate"),
        "Preallocate segment files.")
        .not_enforced("segment files grow as they are written; recovery relies on their size"),
    t("remote.log.copy.disable", "false", ValueKind::Bool, None,
        "Stop copying a tiered topic's segments to remote storage.")
        .not_enforced(NO_TIERED),
    t("remote.log.delete.on.disable", "false", ValueKind::Bool, None,
        "Delete a tiered topic's remote data when tiering is disabled.")
        .not_enforced(NO_TIERED),
    t("remote.storage.enable", "false", ValueKind::Bool, None,
        "Tiered storage for this topic; true is refused (INVALID_CONFIG), as by a Kafka broker without tiered storage."),
    t("retention.bytes", "-1", long(i64::MIN), Some("log.retention.bytes"),
        "Delete the oldest closed segments while a partition is larger than this (delete policy); negative = no limit."),
    t("retention.ms", "604800000", ValueKind::Limit { min: 0 }, Some("log.retention.ms"),
        "Delete closed segments whose newest record is older than this (delete policy); -1 keeps them forever."),
    t("segment.bytes", "1073741824", ValueKind::Int { min: 1024, max: I32_MAX }, Some("log.segment.bytes"),
        "Roll to a new segment file when the active one reaches this size."),
    t("segment.index.bytes", "10485760", ValueKind::Int { min: 4, max: I32_MAX }, Some("log.index.size.max.bytes"),
        "Most bytes a segment's offset or time index may take; the segment rolls when one is full."),
    t("segment.jitter.ms", "0", long(0), Some("log.roll.jitter.ms"),
        "Most a segment's time-based roll is brought forward (a per-segment amount), so partitions do not roll together."),
    t("segment.ms", "604800000", ValueKind::Limit { min: 1 }, Some("log.roll.ms"),
        "Roll to a new segment when the active one is older than this; -1 = never by time."),
    t("unclean.leader.election.enable", "false", ValueKind::Bool, Some("unclean.leader.election.enable"),
        "Elect an out-of-sync replica as leader as a last resort."),
];
