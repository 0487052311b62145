//! Per-log configuration, mirroring the Kafka topic configs of the same names.

use crate::attributes::{Compression, TimestampType};

/// How a log is segmented, retained, compacted and flushed.
///
/// Every field mirrors the Kafka topic config noted beside it; `None` stands
/// for Kafka's `-1` ("unlimited" / "never").
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: the active segment is rolled before an append would
    /// take it past this size.
    pub segment_bytes: u64,
    /// `segment.ms`/`log.roll.ms`: the active segment is rolled once its first
    /// batch is older than this. `None` never rolls by time.
    pub roll_ms: Option<u64>,
    /// `retention.ms`: closed segments whose newest record is older than this
    /// are deleted. `None` keeps them forever.
    pub retention_ms: Option<u64>,
    /// `retention.bytes`: the oldest closed segments are deleted while the log
    /// would stay at least this large without them. `None` is unlimited.
    pub retention_bytes: Option<u64>,
    /// `flush.messages`: fsync after this many unflushed records. `None`
    /// leaves flushing to the OS.
    pub flush_interval_messages: Option<u64>,
    /// `flush.ms`: fsync when this long has passed since the last flush
    /// (checked by [`crate::Log::flush_due`]). `None` leaves it to the OS.
    pub flush_interval_ms: Option<u64>,
    /// `index.interval.bytes`: bytes of log between two sparse index entries.
    pub index_interval_bytes: u32,
    /// `max.message.bytes`: the largest record batch accepted, header included.
    pub max_message_bytes: u32,
    /// `producer.id.expiration.ms`: idempotent producers idle this long are
    /// forgotten by [`crate::Log::run_retention`]. `None` keeps them forever.
    pub producer_id_expiration_ms: Option<u64>,
    /// Whether every appended record must have a key: set for
    /// `cleanup.policy=compact` topics, where a keyless record could never
    /// be compacted (Kafka refuses it with INVALID_RECORD).
    pub require_keys: bool,
    /// `compression.type`: the codec batches are stored in. `None` is
    /// `producer` (batches are kept as sent); a codec recompresses batches
    /// sent in any other codec on append, as Kafka's log validator does.
    pub compression: Option<Compression>,
    /// `compression.gzip.level`, `compression.lz4.level`,
    /// `compression.zstd.level`: the levels a recompression uses.
    pub compression_levels: CompressionLevels,
    /// `message.timestamp.type`: with `LogAppendTime` every appended batch
    /// is stamped with the append time (its `maxTimestamp`, attribute bit 3).
    pub timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: CreateTime records older than
    /// this (relative to the append time) are refused.
    pub timestamp_before_max_ms: u64,
    /// `message.timestamp.after.max.ms`: CreateTime records newer than
    /// this (relative to the append time) are refused.
    pub timestamp_after_max_ms: u64,
    /// `segment.jitter.ms`: the most a segment's time-based roll is brought
    /// forward, a per-segment amount so partitions do not roll together.
    pub segment_jitter_ms: u64,
    /// `segment.index.bytes`: the most bytes a segment's offset or time
    /// index may take; the segment rolls when either is full.
    pub segment_index_bytes: u32,
    /// `file.delete.delay.ms`: files of a deleted segment are renamed
    /// `*.deleted` and removed this long afterwards.
    pub file_delete_delay_ms: u64,
    /// `cleanup.policy`: whether old segments are deleted by retention,
    /// compacted by the cleaner, or both.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long a tombstone stays in the cleaned part
    /// of a compacted log (counted from the cleaning that first kept it,
    /// Kafka's KIP-534 delete horizon).
    pub delete_retention_ms: u64,
    /// `min.compaction.lag.ms`: a record stays uncompacted at least this
    /// long (segments with a newer record are not cleaned yet).
    pub min_compaction_lag_ms: u64,
    /// `max.compaction.lag.ms`: a record stays uncompacted at most about
    /// this long: the log is cleaned whatever its dirty ratio once its
    /// oldest dirty record is older, and the active segment rolls by then.
    pub max_compaction_lag_ms: u64,
    /// `min.cleanable.dirty.ratio`: the cleaner takes a log once the
    /// uncleaned part is at least this share of its bytes.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.insync.replicas`: kept with the log as Kafka's `LogConfig` does;
    /// storage does not use it (the broker checks it on `acks=all` appends).
    pub min_insync_replicas: u32,
}

/// `cleanup.policy`: what happens to old segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `delete`: time and size retention delete old segments.
    pub delete: bool,
    /// `compact`: the cleaner keeps (at least) the latest record of every
    /// key.
    pub compact: bool,
}

impl CleanupPolicy {
    /// Parses a comma-separated list of `delete` and `compact`; `None` for
    /// anything else.
    pub fn parse(s: &str) -> Option<CleanupPolicy> {
        let mut p = CleanupPolicy {
            delete: false,
            compact: false,
        };
        for part in s.split(',') {
            match part.trim() {
                "delete" => p.delete = true,
                "compact" => p.compact = true,
                _ => return None,
            }
        }
        Some(p)
    }
}

impl Default for CleanupPolicy {
    /// `delete`, Kafka's default.
    fn default() -> Self {
        CleanupPolicy {
            delete: true,
            compact: false,
        }
    }
}

/// The compression levels of the codecs that have levels (Kafka's
/// `compression.*.level` configs); used when a batch is recompressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressionLevels {
    /// 1–9, or -1 for the codec's default (6).
    pub gzip: i32,
    /// 1–17. The LZ4 encoder has one level; accepted, not applied.
    pub lz4: i32,
    /// -131072–22.
    pub zstd: i32,
}

impl Default for CompressionLevels {
    fn default() -> Self {
        CompressionLevels {
            gzip: -1,
            lz4: 9,
            zstd: 3,
        }
    }
}

/// Default `segment.bytes`: 1 GiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 1024 * 1024 * 1024;
/// Default `segment.ms` and `retention.ms`: 7 days.
pub const DEFAULT_ROLL_AND_RETENTION_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// Default `producer.id.expiration.ms`: 1 day.
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: u64 = 24 * 60 * 60 * 1000;
/// Default `message.timestamp.after.max.ms`: 1 hour (Kafka 4.0, KIP-1030).
pub const DEFAULT_TIMESTAMP_AFTER_MAX_MS: u64 = 60 * 60 * 1000;
/// Default `segment.index.bytes`: 10 MiB.
pub const DEFAULT_SEGMENT_INDEX_BYTES: u32 = 10 * 1024 * 1024;
/// Default `file.delete.delay.ms`: 1 minute.
pub const DEFAULT_FILE_DELETE_DELAY_MS: u64 = 60 * 1000;
/// Default `delete.retention.ms`: 1 day.
pub const DEFAULT_DELETE_RETENTION_MS: u64 = 24 * 60 * 60 * 1000;
/// Default `min.cleanable.dirty.ratio`.
pub const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: f64 = 0.5;
/// Default `index.interval.bytes`.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;
/// Default `max.message.bytes`: 1 MiB plus the 12-byte log overhead, as
/// Kafka's.
pub const DEFAULT_MAX_MESSAGE_BYTES: u32 = 1024 * 1024 + 12;
/// How many times `max.message.bytes` the records of one batch may
/// decompress to; see [`LogConfig::max_decompressed_bytes`].
pub const DECOMPRESSION_RATIO_LIMIT: u64 = 32;
/// The decompression limit never goes below this, whatever
/// `max.message.bytes` says; see [`LogConfig::max_decompressed_bytes`].
pub const MIN_DECOMPRESSED_BYTES: u64 = 16 * 1024 * 1024;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            roll_ms: Some(DEFAULT_ROLL_AND_RETENTION_MS),
            retention_ms: Some(DEFAULT_ROLL_AND_RETENTION_MS),
            retention_bytes: None,
            flush_interval_messages: None,
            flush_interval_ms: None,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            producer_id_expiration_ms: Some(DEFAULT_PRODUCER_ID_EXPIRATION_MS),
            require_keys: false,
            compression: None,
            compression_levels: CompressionLevels::default(),
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX as u64,
            timestamp_after_max_ms: DEFAULT_TIMESTAMP_AFTER_MAX_MS,
            segment_jitter_ms: 0,
            segment_index_bytes: DEFAULT_SEGMENT_INDEX_BYTES,
            file_delete_delay_ms: DEFAULT_FILE_DELETE_DELAY_MS,
            cleanup_policy: CleanupPolicy::default(),
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX as u64,
            min_cleanable_dirty_ratio: DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
            min_insync_replicas: 1,
        }
    }
}

impl LogConfig {
    /// Most bytes the records of one appended batch may decompress to:
    /// 32 × `max.message.bytes`, at least 16 MiB (32 MiB at the default
    /// 1 MiB). A batch beyond it is refused as invalid.
    ///
    /// Real data compresses 2–10× (gzip, lz4, snappy), zstd on repetitive
    /// JSON up to ~20×; 32× leaves room for that while stopping bombs (zstd
    /// turns 33 KB of zeros into 1 GB) after a bounded amount of work.
    /// Validation streams through a fixed buffer, so the limit bounds CPU
    /// time, not memory; the floor keeps ordinary batches of topics with a
    /// small `max.message.bytes` acceptable.
    pub fn max_decompressed_bytes(&self) -> u64 {
        (u64::from(self.max_message_bytes) * DECOMPRESSION_RATIO_LIMIT).max(MIN_DECOMPRESSED_BYTES)
    }

    /// How long the active segment may stay open: `roll_ms`, shortened to
    /// `max_compaction_lag_ms` for a compacted log so that no record waits
    /// longer than that to become cleanable (Kafka does the same).
    pub(crate) fn effective_roll_ms(&self) -> Option<u64> {
        if self.cleanup_policy.compact && self.max_compaction_lag_ms < i64::MAX as u64 {
            let lag = self.max_compaction_lag_ms.max(1);
            return Some(self.roll_ms.map_or(lag, |ms| ms.min(lag)));
        }
        self.roll_ms
    }

    /// The size a segment may reach: `segment_bytes`, capped so that file
    /// positions always fit the index's 32-bit position field.
    pub(crate) fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.clamp(1, i32::MAX as u64)
    }

    /// The codec a batch sent in `codec` is stored in: `codec` itself for
    /// `compression.type=producer`.
    pub fn target_compression(&self, codec: Compression) -> Compression {
        self.compression.unwrap_or(codec)
    }

    /// How far before the roll time the segment at `base` rolls: a stable
    /// per-segment amount below `min(segment_jitter_ms, roll_ms)`, as
    /// Kafka's random `rollJitterMs` (derived from the base offset here, so
    /// a reopened segment keeps its jitter).
    pub(crate) fn roll_jitter_ms(&self, base: model::Offset, seed: u64) -> u64 {
        let bound = match self.roll_ms {
            Some(ms) => self.segment_jitter_ms.min(ms),
            None => self.segment_jitter_ms,
        };
        if bound == 0 {
            return 0;
        }
        // splitmix64 of the base offset and the log's seed.
        let mut z = (base.0 as u64) ^ seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % bound
    }
}
