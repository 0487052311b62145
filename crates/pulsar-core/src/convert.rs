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
//! | producer name of the SEND | header `pulsar.producer_name` on the entry's first record only; delivered as `producer_name` (`magnetar` when absent: written by a Kafka client) |
//! | `sequence_id` of the SEND | header `pulsar.sequence_id` (decimal) on the first record; delivered as the entry's `sequence_id` (the base offset when absent) |
//! | `highest_sequence_id` of the SEND (a batch) | header `pulsar.highest_sequence_id` on the first record, only when it differs from `sequence_id` |
//! | a batched message's own `sequence_id` | header `pulsar.sequence_id` on its record only when it is not the first's plus its index; delivered in its SingleMessageMetadata |
//!
//! So a Pulsar SEND costs at most three headers on one record whatever its
//! size, and the log itself says which producer stored which sequence ids
//! (deduplication recovers from it after a restart: `magnetar_pulsar::producer`).
//! Kafka consumers see these headers like any other.

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use magnetar_pulsar_wire::payload::{self, build_batch, build_single, codec_of, MessagePayload};
use magnetar_pulsar_wire::proto::{
    CompressionType, KeyValue, MessageMetadata, SingleMessageMetadata,
};
use magnetar_pulsar_wire::FrameError;
use model::Timestamp;
use storage::builder::HeaderRef;
use storage::records::{Record, RecordIter};
use storage::{BatchBuilder, BatchError, BatchHeader, Compression};

/// Header carrying a Pulsar message's `event_time`.
pub const EVENT_TIME_HEADER: &str = "pulsar.event_time";
/// Header carrying a Pulsar message's `ordering_key`.
pub const ORDERING_KEY_HEADER: &str = "pulsar.ordering_key";
/// Header naming the producer that stored an entry (first record only).
pub const PRODUCER_NAME_HEADER: &str = "pulsar.producer_name";
/// Header with a message's sequence id (decimal): on an entry's first
/// record, the SEND's; on a later record, its own when that is not the
/// first's plus the record's index.
pub const SEQUENCE_ID_HEADER: &str = "pulsar.sequence_id";
/// Header with the SEND's highest sequence id (decimal; first record only,
/// when it differs from the SEND's sequence id).
pub const HIGHEST_SEQUENCE_ID_HEADER: &str = "pulsar.highest_sequence_id";
/// `producer_name` of delivered messages written by Kafka clients (no
/// [`PRODUCER_NAME_HEADER`]).
pub const DELIVERED_PRODUCER_NAME: &str = "magnetar";

/// Who stores a SEND: the producer's name and the SEND's sequence ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin<'a> {
    /// The producer's name (the broker's, as given in ProducerSuccess).
    pub producer_name: &'a str,
    /// The SEND's (first) sequence id.
    pub sequence_id: i64,
    /// The SEND's highest sequence id (`sequence_id` for one message).
    pub highest_sequence_id: i64,
}

/// The producer of a stored entry, as its first record's headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOrigin {
    /// The producer's name.
    pub producer_name: Bytes,
    /// The SEND's (first) sequence id.
    pub sequence_id: i64,
    /// The SEND's highest sequence id.
    pub highest_sequence_id: i64,
}

impl StoredOrigin {
    /// Reads the origin headers of an entry's first record; `None` when it
    /// has no producer name (a Kafka client wrote it) or no valid
    /// sequence id.
    pub fn of(first: &Record) -> Option<StoredOrigin> {
        let mut name = None;
        let mut seq = None;
        let mut highest = None;
        for h in first.headers.iter() {
            let key = &h.key[..];
            if key == PRODUCER_NAME_HEADER.as_bytes() {
                name = h.value;
            } else if key == SEQUENCE_ID_HEADER.as_bytes() {
                seq = h.value.as_deref().and_then(parse_decimal);
            } else if key == HIGHEST_SEQUENCE_ID_HEADER.as_bytes() {
                highest = h.value.as_deref().and_then(parse_decimal);
            }
        }
        let sequence_id = seq?;
        Some(StoredOrigin {
            producer_name: name?,
            sequence_id,
            highest_sequence_id: highest.unwrap_or(sequence_id).max(sequence_id),
        })
    }

    /// Reads the origin of one stored `batch` from its first record only
    /// (a compressed batch is decompressed no further than that record).
    pub fn of_batch(batch: Bytes, max_decompressed: u64) -> Option<StoredOrigin> {
        let first = RecordIter::new(batch, max_decompressed)
            .ok()?
            .next()?
            .ok()?;
        StoredOrigin::of(&first)
    }
}

fn parse_decimal(v: &[u8]) -> Option<i64> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// `v` in decimal, written into `buf` (no allocation).
fn decimal(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

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
/// 0; the log assigns them), the first record naming `origin` (see the
/// table above). `max_uncompressed` bounds decompression.
/// Returns the batch and its record count.
pub fn to_kafka_batch(
    metadata: &MessageMetadata,
    data: Bytes,
    max_uncompressed: usize,
    origin: Option<Origin<'_>>,
) -> Result<(BytesMut, usize), ConvertError> {
    let codec = codec_of(metadata)?;
    let publish = Timestamp(i64::try_from(metadata.publish_time).unwrap_or(i64::MAX));
    let mut builder = BatchBuilder::new(kafka_codec(codec));
    let (mut seq_buf, mut highest_buf) = ([0u8; 20], [0u8; 20]);
    let first_headers: [HeaderRef<'_>; 3];
    let first_extra: &[HeaderRef<'_>] = match &origin {
        Some(o) => {
            first_headers = [
                (
                    PRODUCER_NAME_HEADER.as_bytes(),
                    Some(o.producer_name.as_bytes()),
                ),
                (
                    SEQUENCE_ID_HEADER.as_bytes(),
                    Some(decimal(o.sequence_id, &mut seq_buf)),
                ),
                (
                    HIGHEST_SEQUENCE_ID_HEADER.as_bytes(),
                    Some(decimal(o.highest_sequence_id, &mut highest_buf)),
                ),
            ];
            let n = if o.highest_sequence_id != o.sequence_id {
                3
            } else {
                2
            };
            &first_headers[..n]
        }
        None => &[],
    };
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
            append(&mut builder, publish, &fields, &value, first_extra)?;
        }
        MessagePayload::Batch(entries) => {
            let mut own_buf = [0u8; 20];
            for (index, entry) in entries.enumerate() {
                let (m, value) = entry?;
                let fields = Fields {
                    properties: &m.properties,
                    partition_key: m.partition_key.as_deref(),
                    b64: m.partition_key_b64_encoded.unwrap_or(false),
                    ordering_key: m.ordering_key.as_deref(),
                    event_time: m.event_time.unwrap_or(0),
                    null_value: m.null_value.unwrap_or(false),
                };
                let own: Option<[HeaderRef<'_>; 1]> = match (&origin, m.sequence_id) {
                    (Some(o), Some(s)) if index > 0 && s as i64 != o.sequence_id + index as i64 => {
                        Some([(
                            SEQUENCE_ID_HEADER.as_bytes(),
                            Some(decimal(s as i64, &mut own_buf)),
                        )])
                    }
                    _ => None,
                };
                let extra = match &own {
                    _ if index == 0 => first_extra,
                    Some(h) => &h[..],
                    None => &[],
                };
                append(&mut builder, publish, &fields, &value, extra)?;
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
    extra: &[HeaderRef<'_>],
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
    let mut event_buf = [0u8; 20];
    let mut headers: Vec<HeaderRef<'_>> = Vec::with_capacity(f.properties.len() + 2 + extra.len());
    headers.extend(
        f.properties
            .iter()
            .map(|kv| (kv.key.as_bytes(), Some(kv.value.as_bytes()))),
    );
    if f.event_time > 0 {
        let t = i64::try_from(f.event_time).unwrap_or(i64::MAX);
        headers.push((
            EVENT_TIME_HEADER.as_bytes(),
            Some(decimal(t, &mut event_buf)),
        ));
    }
    if let Some(k) = f.ordering_key {
        headers.push((ORDERING_KEY_HEADER.as_bytes(), Some(k)));
    }
    headers.extend_from_slice(extra);
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
    let origin = records.first().and_then(StoredOrigin::of);
    let mut metadata = MessageMetadata {
        producer_name: match &origin {
            Some(o) => String::from_utf8_lossy(&o.producer_name).into_owned(),
            None => DELIVERED_PRODUCER_NAME.to_string(),
        },
        sequence_id: origin
            .as_ref()
            .map_or(header.base_offset.0, |o| o.sequence_id)
            .max(0) as u64,
        publish_time,
        ..Default::default()
    };
    let key_hash = records.first().map_or(0, key_hash);
    // A batched message's sequence id when its record has no header of its
    // own: the first's plus its index, or (Kafka clients') its offset.
    let first_seq = origin.as_ref().map(|o| o.sequence_id);
    let implied_seq = |index: usize, r: &Record| match first_seq {
        Some(s) => s.saturating_add(index as i64),
        None => r.offset.0,
    };
    let payload = if let [only] = records.as_slice() {
        let single = single_metadata(only, implied_seq(0, only));
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
            records.iter().enumerate().map(|(i, r)| {
                (
                    single_metadata(r, implied_seq(i, r)),
                    r.value.clone().unwrap_or_default(),
                )
            }),
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

/// A record's message metadata; `sequence_id` unless a header says
/// otherwise.
fn single_metadata(r: &Record, sequence_id: i64) -> SingleMessageMetadata {
    // Each message keeps its own Kafka timestamp as its event time (an
    // entry has one publish time); a stored Pulsar event time wins.
    let mut m = SingleMessageMetadata {
        sequence_id: Some(sequence_id.max(0) as u64),
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
            k if k == SEQUENCE_ID_HEADER.as_bytes() => {
                if let Some(s) = parse_decimal(value) {
                    m.sequence_id = Some(s.max(0) as u64);
                }
            }
            k if k == PRODUCER_NAME_HEADER.as_bytes()
                || k == HIGHEST_SEQUENCE_ID_HEADER.as_bytes() => {}
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

#[cfg(test)]
mod tests {
    use magnetar_pulsar_wire::payload::build_batch;

    use super::*;

    const MAX: usize = 1 << 20;

    fn metadata(sequence_id: u64) -> MessageMetadata {
        MessageMetadata {
            producer_name: "client-side-name".into(),
            sequence_id,
            publish_time: 1_700_000_000_000,
            ..Default::default()
        }
    }

    fn records(batch: &[u8]) -> Vec<Record> {
        RecordIter::new(Bytes::copy_from_slice(batch), MAX as u64)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn header_keys(r: &Record) -> Vec<String> {
        r.headers
            .iter()
            .map(|h| String::from_utf8_lossy(&h.key).into_owned())
            .collect()
    }

    fn deliver(batch: BytesMut) -> (Entry, Vec<(SingleMessageMetadata, Bytes)>) {
        let entry = to_pulsar_entry(batch.freeze(), MAX as u64).unwrap();
        let messages =
            match payload::decode_payload(&entry.metadata, entry.payload.clone(), MAX).unwrap() {
                MessagePayload::Single(v) => vec![(SingleMessageMetadata::default(), v)],
                MessagePayload::Batch(b) => b.map(|m| m.unwrap()).collect(),
            };
        (entry, messages)
    }

    #[test]
    fn decimal_needs_no_allocation_and_is_exact() {
        let mut buf = [0u8; 20];
        for v in [0, 7, -1, 42, i64::MAX, i64::MIN, -1_000_000] {
            assert_eq!(decimal(v, &mut buf), v.to_string().as_bytes());
        }
    }

    #[test]
    fn a_single_message_names_its_producer_once() {
        let mut m = metadata(41);
        m.properties.push(KeyValue {
            key: "k".into(),
            value: "v".into(),
        });
        let mut payload = m.clone();
        let data = build_single(&mut payload, b"hello", CompressionType::None).unwrap();
        let origin = Origin {
            producer_name: "p-1",
            sequence_id: 41,
            highest_sequence_id: 41,
        };
        let (batch, count) = to_kafka_batch(&payload, data, MAX, Some(origin)).unwrap();
        assert_eq!(count, 1);
        let stored = records(&batch);
        assert_eq!(
            header_keys(&stored[0]),
            ["k", PRODUCER_NAME_HEADER, SEQUENCE_ID_HEADER]
        );
        assert_eq!(
            StoredOrigin::of(&stored[0]),
            Some(StoredOrigin {
                producer_name: Bytes::from_static(b"p-1"),
                sequence_id: 41,
                highest_sequence_id: 41,
            })
        );
        let (entry, _) = deliver(batch);
        assert_eq!(entry.metadata.producer_name, "p-1");
        assert_eq!(entry.metadata.sequence_id, 41);
        assert_eq!(
            entry.metadata.properties, m.properties,
            "origin headers are not properties"
        );
    }

    #[test]
    fn a_client_batch_keeps_every_sequence_id_with_headers_only_where_needed() {
        let mut m = metadata(10);
        let single = |seq: Option<u64>| SingleMessageMetadata {
            sequence_id: seq,
            payload_size: 0,
            ..Default::default()
        };
        // 10, 11 follow on; 20 was set explicitly; the last one has none.
        let messages = vec![
            (single(Some(10)), &b"a"[..]),
            (single(Some(11)), &b"b"[..]),
            (single(Some(20)), &b"c"[..]),
            (single(None), &b"d"[..]),
        ];
        let data = build_batch(&mut m, messages, CompressionType::Lz4).unwrap();
        let origin = Origin {
            producer_name: "p-2",
            sequence_id: 10,
            highest_sequence_id: 20,
        };
        let (batch, count) = to_kafka_batch(&m, data, MAX, Some(origin)).unwrap();
        assert_eq!(count, 4);
        let stored = records(&batch);
        let keys: Vec<Vec<String>> = stored.iter().map(header_keys).collect();
        assert_eq!(
            keys,
            vec![
                vec![
                    PRODUCER_NAME_HEADER.to_string(),
                    SEQUENCE_ID_HEADER.into(),
                    HIGHEST_SEQUENCE_ID_HEADER.into()
                ],
                vec![],
                vec![SEQUENCE_ID_HEADER.into()],
                vec![],
            ]
        );
        // Replay reads the first record only, even of a compressed batch.
        let origin = StoredOrigin::of_batch(Bytes::copy_from_slice(&batch), MAX as u64).unwrap();
        assert_eq!((origin.sequence_id, origin.highest_sequence_id), (10, 20));
        let (entry, messages) = deliver(batch);
        assert_eq!(entry.metadata.producer_name, "p-2");
        assert_eq!(entry.metadata.sequence_id, 10);
        let seqs: Vec<Option<u64>> = messages.iter().map(|(m, _)| m.sequence_id).collect();
        assert_eq!(seqs, [Some(10), Some(11), Some(20), Some(13)]);
        assert!(messages.iter().all(|(m, _)| m.properties.is_empty()));
    }

    #[test]
    fn records_of_kafka_clients_are_delivered_as_magnetar_with_offsets() {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(Timestamp(5), None, Some(b"x"), &[]).unwrap();
        b.append(Timestamp(5), None, Some(b"y"), &[]).unwrap();
        let batch = b.build().unwrap();
        assert_eq!(
            StoredOrigin::of_batch(Bytes::copy_from_slice(&batch), MAX as u64),
            None
        );
        let (entry, messages) = deliver(batch);
        assert_eq!(entry.metadata.producer_name, DELIVERED_PRODUCER_NAME);
        assert_eq!(entry.metadata.sequence_id, 0);
        let seqs: Vec<Option<u64>> = messages.iter().map(|(m, _)| m.sequence_id).collect();
        assert_eq!(seqs, [Some(0), Some(1)]);
        // Without an origin (no producer), nothing is added.
        let mut m = metadata(3);
        let data = build_single(&mut m, b"v", CompressionType::None).unwrap();
        let (batch, _) = to_kafka_batch(&m, data, MAX, None).unwrap();
        assert!(records(&batch)[0].headers.is_empty());
    }
}
