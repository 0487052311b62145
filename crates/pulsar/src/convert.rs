//! Pulsar messages ↔ Kafka records. What one Pulsar SEND carries (a single
//! message or a client batch) is stored as one Kafka v2 batch, so the
//! message ids a producer is given are the ids consumers see; what a Pulsar
//! consumer receives is built from one stored batch (see [`crate::message_id`]).
//!
//! | Pulsar | Kafka record |
//! |---|---|
//! | payload (decompressed) | value; `null_value` ↔ null value |
//! | `partition_key` (`partition_key_b64_encoded`: base64 of the bytes) | key |
//! | `properties` | headers (values UTF-8; a null header value reads as `""`) |
//! | `publish_time` | timestamp (CreateTime); delivered: the first record's timestamp, for the whole entry |
//! | `event_time` (when set) | header `pulsar.event_time` (decimal ms); delivered: that header, else the record's own timestamp |
//! | `ordering_key` (when set) | header `pulsar.ordering_key` (raw bytes) |
//! | compression LZ4 / ZLIB / ZSTD / SNAPPY | batch compression lz4 / gzip / zstd / snappy |

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use magnetar_pulsar_wire::payload::{self, build_batch, build_single, codec_of, MessagePayload};
use magnetar_pulsar_wire::proto::{
    CompressionType, KeyValue, MessageMetadata, SingleMessageMetadata,
};
use magnetar_pulsar_wire::FrameError;
use model::Timestamp;
use storage::records::{Record, RecordIter};
use storage::{BatchBuilder, BatchError, BatchHeader, Compression};

/// Header carrying a Pulsar message's `event_time`.
pub const EVENT_TIME_HEADER: &str = "pulsar.event_time";
/// Header carrying a Pulsar message's `ordering_key`.
pub const ORDERING_KEY_HEADER: &str = "pulsar.ordering_key";
/// `producer_name` of messages a Pulsar consumer receives (the stored
/// records do not keep who wrote them).
pub const DELIVERED_PRODUCER_NAME: &str = "magnetar";

/// Why a message could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The Pulsar payload is malformed (compression, batch layout).
    #[error("{0}")]
    Payload(#[from] FrameError),
    /// The records could not be encoded or decoded as a Kafka batch.
    #[error("{0}")]
    Batch(#[from] BatchError),
}

/// The Kafka codec storing what a Pulsar producer compressed with `codec`.
pub fn kafka_codec(codec: CompressionType) -> Compression {
    match codec {
        CompressionType::None => Compression::None,
        CompressionType::Lz4 => Compression::Lz4,
        CompressionType::Zlib => Compression::Gzip,
        CompressionType::Zstd => Compression::Zstd,
        CompressionType::Snappy => Compression::Snappy,
    }
}

/// The Pulsar codec delivering a batch stored with `codec`.
pub fn pulsar_codec(codec: Compression) -> CompressionType {
    match codec {
        Compression::None => CompressionType::None,
        Compression::Lz4 => CompressionType::Lz4,
        Compression::Gzip => CompressionType::Zlib,
        Compression::Zstd => CompressionType::Zstd,
        Compression::Snappy => CompressionType::Snappy,
    }
}

/// One message's fields, wherever they came from (a non-batched message's
/// metadata or a batch entry's).
struct Fields<'a> {
    properties: &'a [KeyValue],
    partition_key: Option<&'a str>,
    b64: bool,
    ordering_key: Option<&'a [u8]>,
    event_time: u64,
    null_value: bool,
}

/// Converts the message(s) of one SEND into one Kafka batch (offsets from
/// 0; the log assigns them). `max_uncompressed` bounds decompression.
/// Returns the batch and its record count.
pub fn to_kafka_batch(
    metadata: &MessageMetadata,
    data: Bytes,
    max_uncompressed: usize,
) -> Result<(BytesMut, usize), ConvertError> {
    let codec = codec_of(metadata)?;
    let publish = Timestamp(i64::try_from(metadata.publish_time).unwrap_or(i64::MAX));
    let mut builder = BatchBuilder::new(kafka_codec(codec));
    match payload::decode_payload(metadata, data, max_uncompressed)? {
        MessagePayload::Single(value) => {
            let fields = Fields {
                properties: &metadata.properties,
                partition_key: metadata.partition_key.as_deref(),
                b64: metadata.partition_key_b64_encoded.unwrap_or(false),
                ordering_key: metadata.ordering_key.as_deref(),
                event_time: metadata.event_time.unwrap_or(0),
                null_value: metadata.null_value.unwrap_or(false),
            };
            append(&mut builder, publish, &fields, &value)?;
        }
        MessagePayload::Batch(entries) => {
            for entry in entries {
                let (m, value) = entry?;
                let fields = Fields {
                    properties: &m.properties,
                    partition_key: m.partition_key.as_deref(),
                    b64: m.partition_key_b64_encoded.unwrap_or(false),
                    ordering_key: m.ordering_key.as_deref(),
                    event_time: m.event_time.unwrap_or(0),
                    null_value: m.null_value.unwrap_or(false),
                };
                append(&mut builder, publish, &fields, &value)?;
            }
        }
    }
    let count = builder.record_count();
    Ok((builder.build()?, count))
}

fn append(
    builder: &mut BatchBuilder,
    timestamp: Timestamp,
    f: &Fields<'_>,
    value: &[u8],
) -> Result<(), ConvertError> {
    let decoded_key;
    let key: Option<&[u8]> = match f.partition_key {
        Some(k) if f.b64 => {
            // An undecodable base64 key is kept as the text it is.
            decoded_key = base64::engine::general_purpose::STANDARD
                .decode(k)
                .unwrap_or_else(|_| k.as_bytes().to_vec());
            Some(&decoded_key)
        }
        Some(k) => Some(k.as_bytes()),
        None => None,
    };
    let event_time = (f.event_time > 0).then(|| f.event_time.to_string());
    let mut headers: Vec<(&[u8], Option<&[u8]>)> = f
        .properties
        .iter()
        .map(|kv| (kv.key.as_bytes(), Some(kv.value.as_bytes())))
        .collect();
    if let Some(t) = &event_time {
        headers.push((EVENT_TIME_HEADER.as_bytes(), Some(t.as_bytes())));
    }
    if let Some(k) = f.ordering_key {
        headers.push((ORDERING_KEY_HEADER.as_bytes(), Some(k)));
    }
    let value = (!f.null_value).then_some(value);
    builder.append(timestamp, key, value, &headers)?;
    Ok(())
}

/// What a Pulsar consumer receives for one stored batch: the metadata and
/// payload of one entry (a batch when the stored batch holds more than one
/// record, a single message otherwise).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry's metadata.
    pub metadata: MessageMetadata,
    /// The (compressed) payload.
    pub payload: Bytes,
    /// Offset of the first record.
    pub base_offset: model::Offset,
    /// Records in the entry.
    pub count: u32,
    /// The entry's Key_Shared hash: Murmur3 of its first record's key, as
    /// upstream routes an entry by its metadata's key, which producers copy
    /// from a batch's first message.
    pub key_hash: u32,
}

/// Builds the Pulsar entry for one stored `batch` (exactly one batch).
/// `max_decompressed` bounds decompression.
pub fn to_pulsar_entry(batch: Bytes, max_decompressed: u64) -> Result<Entry, ConvertError> {
    let header = BatchHeader::parse(&batch)?;
    let codec = pulsar_codec(header.compression());
    let records = RecordIter::new(batch, max_decompressed)?.collect::<Result<Vec<_>, _>>()?;
    let publish_time = records
        .first()
        .map_or(header.max_timestamp.0, |r| r.timestamp.0)
        .max(0) as u64;
    let mut metadata = MessageMetadata {
        producer_name: DELIVERED_PRODUCER_NAME.to_string(),
        sequence_id: header.base_offset.0.max(0) as u64,
        publish_time,
        ..Default::default()
    };
    let key_hash = records.first().map_or(0, key_hash);
    let payload = if let [only] = records.as_slice() {
        let single = single_metadata(only);
        metadata.properties = single.properties;
        metadata.partition_key = single.partition_key;
        metadata.partition_key_b64_encoded = single.partition_key_b64_encoded;
        metadata.ordering_key = single.ordering_key;
        metadata.event_time = single.event_time;
        metadata.null_value = single.null_value;
        build_single(&mut metadata, only.value.as_deref().unwrap_or(&[]), codec)?
    } else {
        build_batch(
            &mut metadata,
            records
                .iter()
                .map(|r| (single_metadata(r), r.value.clone().unwrap_or_default())),
            codec,
        )?
    };
    Ok(Entry {
        metadata,
        payload,
        base_offset: header.base_offset,
        count: records.len() as u32,
        key_hash,
    })
}

fn single_metadata(r: &Record) -> SingleMessageMetadata {
    // Each message keeps its own Kafka timestamp as its event time (an
    // entry has one publish time); a stored Pulsar event time wins.
    let mut m = SingleMessageMetadata {
        sequence_id: Some(r.offset.0.max(0) as u64),
        event_time: (r.timestamp.0 > 0).then_some(r.timestamp.0 as u64),
        ..Default::default()
    };
    for h in r.headers.iter() {
        let value = h.value.as_deref().unwrap_or_default();
        match &h.key[..] {
            k if k == EVENT_TIME_HEADER.as_bytes() => {
                if let Some(t) = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()) {
                    m.event_time = Some(t);
                }
            }
            k if k == ORDERING_KEY_HEADER.as_bytes() => {
                m.ordering_key = Some(Bytes::copy_from_slice(value))
            }
            k => m.properties.push(KeyValue {
                key: String::from_utf8_lossy(k).into_owned(),
                value: String::from_utf8_lossy(value).into_owned(),
            }),
        }
    }
    match r.key.as_deref().map(std::str::from_utf8) {
        Some(Ok(k)) => m.partition_key = Some(k.to_string()),
        Some(Err(_)) => {
            m.partition_key =
                Some(base64::engine::general_purpose::STANDARD.encode(r.key.as_deref().unwrap()));
            m.partition_key_b64_encoded = Some(true);
        }
        None => {}
    }
    if r.value.is_none() {
        m.null_value = Some(true);
    }
    m
}

/// The Key_Shared hash of a record: Murmur3-32 of its ordering key, else of
/// its key, modulo 65536 (as upstream's `Murmur3_32Hash` and
/// `DEFAULT_HASH_RANGE_SIZE`); records without either hash to 0.
fn key_hash(r: &Record) -> u32 {
    let ordering = r
        .headers
        .iter()
        .find(|h| h.key == ORDERING_KEY_HEADER.as_bytes())
        .and_then(|h| h.value);
    match ordering.as_deref().or(r.key.as_deref()) {
        Some(k) => murmur3_32(k, 0) % 65536,
        None => 0,
    }
}

/// Murmur3 x86 32-bit.
pub fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    let mut k = 0u32;
    for (i, b) in tail.iter().enumerate() {
        k |= u32::from(*b) << (8 * i);
    }
    if !tail.is_empty() {
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}
