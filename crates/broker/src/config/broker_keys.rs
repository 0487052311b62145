//! Every broker-level key, with Kafka's name, type and default where Kafka
//! has the key. Keys that are a topic key's default (`log.*` and the
//! others named in `topic_keys.rs`) are dynamic, as in Kafka.

use super::keys::{ConfigKey, ValueKind};

const WEEK_MS: &str = "604800000";
const I32_MAX: i64 = i32::MAX as i64;
const LONG_MAX: &str = "9223372036854775807";

/// `compression.type` values (Kafka's `BrokerCompressionType`).
pub(super) const COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
/// `cleanup.policy` values.
pub(super) const CLEANUP_POLICIES: &[&str] = &["delete", "compact"];
/// `message.timestamp.type` values.
pub(super) const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];

const fn int(min: i64, max: i64) -> ValueKind {
    ValueKind::Int { min, max }
}

const fn long(min: i64) -> ValueKind {
    ValueKind::Long { min, max: i64::MAX }
}

const fn b(
    name: &'static str,
    default: &'static str,
    kind: ValueKind,
    dynamic: bool,
    doc: &'static str,
) -> ConfigKey {
    ConfigKey::broker(name, default, kind, dynamic, doc)
}

/// Every broker-level key.
#[rustfmt::skip]
pub const BROKER_KEYS: &[ConfigKey] = &[
    b("node.id", "1", int(0, I32_MAX), false, "This broker's node id, reported in Metadata."),
    b("process.roles", "broker,controller", ValueKind::Choice(&["broker", "broker,controller"]), false,
        "What a cluster node runs: a broker only, or a broker that also votes in the controller quorum (combined mode). Only read with controller.quorum.voters set."),
    b("controller.quorum.voters", "", ValueKind::Voters, false,
        "The controller quorum, id@host:port,...; empty = a single node (magnetar standalone) keeping its metadata in its own file."),
    b("controller.listen.address", "", ValueKind::Listener, false,
        "Where this node's controller listens (host:port); defaults to its own address in controller.quorum.voters."),
    b("broker.session.timeout.ms", "9000", int(1, I32_MAX), false,
        "A broker whose heartbeats stop for this long is fenced: it leads nothing and gets no new partitions until it returns."),
    b("broker.heartbeat.interval.ms", "2000", int(1, I32_MAX), false,
        "How often a cluster member heartbeats to the active controller."),
    b("offsets.topic.num.partitions", "50", int(1, 10_000), false,
        "Coordinator slots of a cluster: a group's or transactional id's coordinator is the broker of slot hash(id) % this, placed when the cluster first needs one."),
    b("advertised.listeners", "", ValueKind::Listener, false,
        "Address given to clients (PLAINTEXT://host:port); defaults to the listen address."),
    b("auto.create.topics.enable", "true", ValueKind::Bool, true,
        "Create a missing topic when a Metadata request asks for it (allow_auto_topic_creation)."),
    b("auto.create.topics.type", "partitioned", ValueKind::Choice(&["partitioned", "non-partitioned"]), true,
        "Auto-created topics get num.partitions partitions (partitioned) or one partition recorded as non-partitioned."),
    b("num.partitions", "1", int(1, 10_000), true,
        "Partition count of auto-created partitioned topics and of CreateTopics requests that leave it at -1."),
    b("log.retention.ms", WEEK_MS, ValueKind::Limit { min: 1 }, true,
        "Delete closed segments whose newest record is older than this; -1 keeps them forever."),
    b("log.retention.bytes", "-1", long(i64::MIN), true,
        "Delete the oldest closed segments while a partition is larger than this; negative = no limit."),
    b("log.segment.bytes", "1073741824", int(1024, I32_MAX), true,
        "Roll to a new segment file when the active one reaches this size."),
    b("log.roll.ms", WEEK_MS, ValueKind::Limit { min: 1 }, true,
        "Roll to a new segment when the active one is older than this; -1 = never by time."),
    b("log.roll.jitter.ms", "0", long(0), true,
        "Most a segment's time-based roll is brought forward (a per-segment amount), so partitions do not roll together."),
    b("log.index.interval.bytes", "4096", int(0, I32_MAX), true,
        "Bytes of log between two entries of a segment's offset index."),
    b("log.index.size.max.bytes", "10485760", int(4, I32_MAX), true,
        "Most bytes a segment's offset or time index may take; the segment rolls when one is full."),
    b("log.segment.delete.delay.ms", "60000", long(0), true,
        "Files of a deleted segment are renamed *.deleted and removed this long afterwards."),
    b("log.cleanup.policy", "delete", ValueKind::List(CLEANUP_POLICIES), true,
        "delete: retention deletes old segments; compact: the log cleaner keeps the latest record of each key (list: both)."),
    b("log.cleaner.delete.retention.ms", "86400000", long(0), true,
        "How long tombstones stay in a compacted log after the cleaning that first kept them."),
    b("log.cleaner.min.compaction.lag.ms", "0", long(0), true,
        "Records younger than this are never compacted."),
    b("log.cleaner.max.compaction.lag.ms", LONG_MAX, long(1), true,
        "Records older than this are due for compaction whatever the dirty ratio (the active segment of a compacted log rolls by then)."),
    b("log.cleaner.min.cleanable.ratio", "0.5", ValueKind::Double { min: 0.0, max: 1.0 }, true,
        "Share of a compacted log not yet cleaned from which it is cleaned."),
    b("log.cleaner.enable", "true", ValueKind::Bool, true,
        "Whether the log cleaner compacts topics with cleanup.policy=compact (deprecated in Kafka 4.1)."),
    b("log.cleaner.threads", "1", int(1, 64), true,
        "Partitions the log cleaner compacts at once (at most 64 here)."),
    b("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", ValueKind::Double { min: 1.0, max: f64::MAX }, true,
        "Bytes per second all cleaner threads together read and write at most."),
    b("log.cleaner.dedupe.buffer.size", "134217728", long(1), true,
        "Memory for the cleaner threads' key maps together (at least 1 MiB per thread is used)."),
    b("log.cleaner.backoff.ms", "15000", long(0), true,
        "How long the cleaner waits when no partition needs compacting (at least 1 ms)."),
    b("log.preallocate", "false", ValueKind::Bool, true,
        "Preallocate segment files (accepted, not applied: segment files grow as written)."),
    b("log.message.timestamp.type", "CreateTime", ValueKind::Choice(TIMESTAMP_TYPES), true,
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps every batch with the broker's time."),
    b("log.message.timestamp.before.max.ms", LONG_MAX, long(0), true,
        "Refuse (INVALID_TIMESTAMP) CreateTime records older than this relative to the broker's time."),
    b("log.message.timestamp.after.max.ms", "3600000", long(0), true,
        "Refuse (INVALID_TIMESTAMP) CreateTime records newer than this relative to the broker's time."),
    b("log.message.downconversion.enable", "true", ValueKind::Bool, true,
        "Deprecated in Kafka 4 and a no-op there too: no down-conversion exists."),
    b("log.local.retention.ms", "-2", long(-2), true,
        "Local retention of tiered topics (-2: retention.ms); no tiered storage here."),
    b("log.local.retention.bytes", "-2", long(-2), true,
        "Local retention of tiered topics (-2: retention.bytes); no tiered storage here."),
    b("compression.type", "producer", ValueKind::Choice(COMPRESSION_TYPES), true,
        "Codec batches are stored in: producer keeps the producer's; a codec (or uncompressed) recompresses others on append."),
    b("compression.gzip.level", "-1", ValueKind::IntOrMinusOne { min: 1, max: 9 }, true,
        "gzip level used when recompressing (-1: the codec's default)."),
    b("compression.lz4.level", "9", int(1, 17), true,
        "LZ4 level used when recompressing (accepted; the LZ4 encoder has a single level)."),
    b("compression.zstd.level", "3", int(-131_072, 22), true,
        "zstd level used when recompressing."),
    b("min.insync.replicas", "1", int(1, I32_MAX), true,
        "acks=all produce needs this many in-sync replicas (NOT_ENOUGH_REPLICAS otherwise; one on this single node)."),
    b("unclean.leader.election.enable", "false", ValueKind::Bool, true,
        "Elect an out-of-sync replica as leader as a last resort (no replicas on a single node)."),
    b("message.max.bytes", "1048588", int(0, I32_MAX), true,
        "Largest record batch a producer may send (MESSAGE_TOO_LARGE above it)."),
    b("fetch.max.bytes", "57671680", int(1024, I32_MAX), true,
        "Most bytes one Fetch response carries, whatever the request asks (at least one batch is returned)."),
    b("socket.request.max.bytes", "104857600", int(1024, I32_MAX), false,
        "Largest request frame accepted; a larger length prefix closes the connection."),
    b("queued.max.request.bytes", "536870912", ValueKind::Limit { min: 1024 }, false,
        "Most bytes of requests being read or handled at once over all connections; reading waits while it is reached; -1 = no limit."),
    b("socket.request.read.timeout.ms", "30000", ValueKind::Limit { min: 1 }, false,
        "A request must arrive whole within this long of its size prefix, or the connection is closed; -1 = no limit."),
    b("connections.max.idle.ms", "600000", ValueKind::Limit { min: 1 }, false,
        "Close connections that sent no request for this long; -1 = never."),
    b("max.connections", "-1", ValueKind::Limit { min: 1 }, false,
        "Most client connections at once; more are closed on accept. -1 = half the process's open-file limit."),
    b("max.connections.per.ip", "2147483647", int(1, I32_MAX), false,
        "Most client connections at once from one IP address; more are closed on accept."),
    b("log.flush.interval.messages", "-1", ValueKind::Limit { min: 1 }, true,
        "fsync a partition after this many unflushed records; -1 leaves flushing to the OS."),
    b("log.flush.interval.ms", "-1", ValueKind::Limit { min: 1 }, true,
        "fsync a partition whose oldest unflushed record is older than this; -1 leaves flushing to the OS."),
    b("log.retention.check.interval.ms", "300000", long(1), false,
        "How often retention runs over all partitions."),
    b("log.dir.delete.delay.ms", "60000", long(0), false,
        "A stale partition directory (of a deleted topic, or of an older topic with the same name, KIP-516) is kept under deleting/ this long before it is removed."),
    b("group.min.session.timeout.ms", "6000", int(1, I32_MAX), false,
        "Shortest session timeout a classic group member may ask for."),
    b("group.max.session.timeout.ms", "1800000", int(1, I32_MAX), false,
        "Longest session timeout a classic group member may ask for."),
    b("group.initial.rebalance.delay.ms", "3000", int(0, I32_MAX), false,
        "How long the first rebalance of an empty classic group waits for more members."),
    b("group.max.size", "2147483647", int(1, I32_MAX), false, "Most members a group may have."),
    b("group.consumer.session.timeout.ms", "45000", int(1, I32_MAX), false,
        "Session timeout of consumer-protocol (KIP-848) group members."),
    b("group.consumer.heartbeat.interval.ms", "5000", int(1, I32_MAX), false,
        "Heartbeat interval given to consumer-protocol (KIP-848) group members."),
    b("group.consumer.assignors", "uniform,range", ValueKind::List(&["uniform", "range"]), false,
        "Server-side assignors of consumer-protocol groups; the first is the default."),
    b("offsets.retention.minutes", "10080", int(1, I32_MAX), false,
        "Committed offsets of a group with no members expire this long after their last commit."),
    b("offsets.retention.check.interval.ms", "600000", long(1), false,
        "How often expired offsets are removed."),
    b("pulsar.advertised.address", "", ValueKind::Listener, false,
        "Address Pulsar Lookup answers give clients (host:port or pulsar://host:port); defaults to the Pulsar listen address."),
    b("pulsar.max.message.size", "5242880", int(1024, I32_MAX - 10240), false,
        "Largest Pulsar message (metadata and payload) accepted, announced in Connected; frames may be 10 KiB larger (upstream maxMessageSize)."),
    b("pulsar.keep.alive.interval.seconds", "30", int(1, 3600), false,
        "Pulsar connections are pinged this often and closed after two intervals without traffic (upstream keepAliveIntervalSeconds)."),
    b("pulsar.deduplication.producer.inactivity.timeout.minutes", "360", ValueKind::Long { min: 1, max: 1 << 40 }, false,
        "A producer name's deduplication state (its last sequence id per partition) is forgotten once no producer of that name has been attached for this long (upstream brokerDeduplicationProducerInactivityTimeoutMinutes)."),
];
