use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use super::*;
use crate::proto::{EncryptionKeys, KeyValue};

const CODECS: [CompressionType; 5] = [
    CompressionType::None,
    CompressionType::Lz4,
    CompressionType::Zlib,
    CompressionType::Zstd,
    CompressionType::Snappy,
];

const LIMIT: usize = 1 << 20;

fn text(n: usize) -> Vec<u8> {
    (0..n).map(|i| b"pulsar magnetar "[i % 16]).collect()
}

fn single(payload_size: i32) -> SingleMessageMetadata {
    SingleMessageMetadata {
        payload_size,
        ..Default::default()
    }
}

fn metadata() -> MessageMetadata {
    MessageMetadata {
        producer_name: "p".into(),
        sequence_id: 1,
        publish_time: 2,
        ..Default::default()
    }
}

#[test]
fn every_codec_round_trips() {
    for codec in CODECS {
        for n in [0, 1, 100, 70_000] {
            let data = text(n);
            let compressed = compress(codec, &data).unwrap();
            let back = decompress(codec, compressed, n as u32, LIMIT).unwrap();
            assert_eq!(back, data, "{codec:?} {n}");
        }
    }
}

#[test]
fn lz4_is_a_raw_block() {
    // Token 0x50: five literals, no match: the raw block of "hello" as the
    // C++ client's LZ4_compress_default writes it.
    let block = Bytes::from_static(&[0x50, b'h', b'e', b'l', b'l', b'o']);
    assert_eq!(
        decompress(CompressionType::Lz4, block, 5, LIMIT).unwrap(),
        &b"hello"[..]
    );
    // Not the LZ4 frame format (magic 04 22 4d 18).
    let out = compress(CompressionType::Lz4, b"hello").unwrap();
    assert_eq!(&out[..], [0x50, b'h', b'e', b'l', b'l', b'o']);
}

#[test]
fn snappy_is_a_raw_block() {
    // Length varint 5, then a literal of five bytes: not the framed format
    // (which starts with a stream identifier chunk ff 06 00 00 "sNaPpY").
    let block = Bytes::from_static(&[0x05, 0x10, b'h', b'e', b'l', b'l', b'o']);
    assert_eq!(
        decompress(CompressionType::Snappy, block, 5, LIMIT).unwrap(),
        &b"hello"[..]
    );
    assert_eq!(
        compress(CompressionType::Snappy, b"hello").unwrap()[0],
        0x05
    );
}

#[test]
fn zlib_and_zstd_use_their_stream_formats() {
    assert_eq!(compress(CompressionType::Zlib, b"x").unwrap()[0], 0x78);
    assert_eq!(
        &compress(CompressionType::Zstd, b"x").unwrap()[..4],
        [0x28, 0xb5, 0x2f, 0xfd]
    );
}

#[test]
fn uncompressed_size_over_the_limit_is_refused() {
    for codec in &CODECS[1..] {
        let compressed = compress(*codec, &text(100)).unwrap();
        assert_eq!(
            decompress(*codec, compressed, 100, 99).unwrap_err(),
            FrameError::UncompressedSizeTooLarge { size: 100, max: 99 },
            "{codec:?}"
        );
        // A claim of 4 GiB is refused before allocating anything.
        assert!(matches!(
            decompress(*codec, Bytes::from_static(b"x"), u32::MAX, LIMIT),
            Err(FrameError::UncompressedSizeTooLarge { .. })
        ));
    }
    // Uncompressed data is not subject to the limit: nothing is allocated.
    let data = Bytes::from(text(100));
    assert_eq!(
        decompress(CompressionType::None, data.clone(), 0, 1).unwrap(),
        data
    );
}

#[test]
fn size_mismatch_is_an_error() {
    for codec in &CODECS[1..] {
        let compressed = compress(*codec, &text(100)).unwrap();
        for claimed in [0, 99, 101, 1000] {
            let err = decompress(*codec, compressed.clone(), claimed, LIMIT).unwrap_err();
            assert!(
                matches!(
                    err,
                    FrameError::UncompressedSizeMismatch { expected, .. } if expected == claimed
                ) || matches!(err, FrameError::Decompression { .. }),
                "{codec:?} claimed {claimed}: {err}"
            );
        }
        // Streaming codecs stop one byte past the claim.
        if matches!(codec, CompressionType::Zlib | CompressionType::Zstd) {
            assert_eq!(
                decompress(*codec, compressed, 10, LIMIT).unwrap_err(),
                FrameError::UncompressedSizeMismatch {
                    expected: 10,
                    actual: 11
                }
            );
        }
    }
}

#[test]
fn garbage_is_a_decompression_error() {
    for codec in &CODECS[1..] {
        for garbage in [&b""[..], b"\xff\xff\xff\xff\xff", b"not compressed at all"] {
            let err = decompress(*codec, Bytes::from_static(garbage), 50, LIMIT).unwrap_err();
            assert!(
                matches!(
                    err,
                    FrameError::Decompression { .. } | FrameError::UncompressedSizeMismatch { .. }
                ),
                "{codec:?} {garbage:?}: {err}"
            );
        }
    }
}

#[test]
fn single_message_payload_is_not_copied() {
    let data = Bytes::from(text(64));
    let MessagePayload::Single(out) = decode_payload(&metadata(), data.clone(), LIMIT).unwrap()
    else {
        panic!("not a single message")
    };
    assert_eq!(out.as_ptr(), data.as_ptr());
}

#[test]
fn build_single_sets_compression_fields() {
    for codec in CODECS {
        let mut meta = MessageMetadata {
            num_messages_in_batch: Some(9),
            ..metadata()
        };
        let value = text(300);
        let payload = build_single(&mut meta, &value, codec).unwrap();
        assert_eq!(meta.num_messages_in_batch, None);
        if codec == CompressionType::None {
            assert_eq!((meta.compression, meta.uncompressed_size), (None, None));
        } else {
            assert_eq!(meta.compression, Some(codec as i32));
            assert_eq!(meta.uncompressed_size, Some(300));
        }
        let MessagePayload::Single(out) = decode_payload(&meta, payload, LIMIT).unwrap() else {
            panic!("not a single message")
        };
        assert_eq!(out, value);
    }
}

#[test]
fn batches_round_trip_in_every_codec() {
    let messages = vec![
        (
            SingleMessageMetadata {
                properties: vec![KeyValue {
                    key: "h".into(),
                    value: "v".into(),
                }],
                partition_key: Some("pk".into()),
                ordering_key: Some(Bytes::from_static(b"k")),
                event_time: Some(5),
                sequence_id: Some(10),
                ..single(12345) // overwritten from the payload
            },
            Bytes::from_static(b"first"),
        ),
        (
            SingleMessageMetadata {
                null_value: Some(true),
                ..single(0)
            },
            Bytes::new(),
        ),
        (single(0), Bytes::from(text(1000))),
    ];
    for codec in CODECS {
        let mut meta = metadata();
        let payload = build_batch(&mut meta, messages.clone(), codec).unwrap();
        assert_eq!(meta.num_messages_in_batch, Some(3));
        let MessagePayload::Batch(batch) = decode_payload(&meta, payload, LIMIT).unwrap() else {
            panic!("not a batch")
        };
        assert_eq!(batch.message_count(), 3);
        let decoded: Vec<_> = batch.collect::<Result<_>>().unwrap();
        assert_eq!(decoded.len(), 3);
        for ((m, p), (orig_m, orig_p)) in decoded.iter().zip(&messages) {
            assert_eq!(p, orig_p);
            assert_eq!(m.payload_size as usize, orig_p.len());
            assert_eq!(
                SingleMessageMetadata {
                    payload_size: orig_m.payload_size,
                    ..m.clone()
                },
                *orig_m
            );
        }
    }
}

#[test]
fn batch_layout() {
    let mut buf = BytesMut::new();
    let n = encode_batch([(single(0), &b"ab"[..])], &mut buf).unwrap();
    assert_eq!(n, 1);
    // [size 2][payload_size = 2 (tag 0x18)]["ab"]
    assert_eq!(&buf[..], [0, 0, 0, 2, 0x18, 0x02, b'a', b'b']);
}

fn batch_of(entries: &[(SingleMessageMetadata, &[u8])]) -> Bytes {
    let mut buf = BytesMut::new();
    encode_batch(entries.iter().map(|(m, p)| (m.clone(), *p)), &mut buf).unwrap();
    buf.freeze()
}

#[test]
fn batch_errors() {
    let two = batch_of(&[(single(0), b"a"), (single(0), b"bc")]);

    // Fewer messages than announced.
    let mut it = BatchIter::new(two.clone(), 3).unwrap();
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().is_ok());
    assert_eq!(
        it.next().unwrap().unwrap_err(),
        FrameError::BatchEntryOutOfRange {
            index: 2,
            what: "metadata size field",
            size: 4,
            available: 0
        }
    );
    assert!(it.next().is_none(), "an iterator stops after an error");

    // More bytes than announced messages.
    let mut it = BatchIter::new(two.clone(), 1).unwrap();
    assert!(it.next().unwrap().is_ok());
    assert_eq!(
        it.next().unwrap().unwrap_err(),
        FrameError::TrailingBatchBytes {
            count: two.len() - 7,
            messages: 1
        }
    );
    assert!(it.next().is_none());

    // Zero messages: only an empty payload is valid.
    assert_eq!(BatchIter::new(Bytes::new(), 0).unwrap().message_count(), 0);
    assert_eq!(BatchIter::new(Bytes::new(), 0).unwrap().next(), None);
    assert!(BatchIter::new(two.clone(), 0)
        .unwrap()
        .next()
        .unwrap()
        .is_err());

    // Negative count.
    assert_eq!(
        BatchIter::new(two, -1).unwrap_err(),
        FrameError::InvalidBatchCount(-1)
    );

    // A huge count over a tiny buffer allocates nothing and fails at once.
    let mut it = BatchIter::new(Bytes::from_static(&[0, 0]), i32::MAX).unwrap();
    assert!(matches!(
        it.next(),
        Some(Err(FrameError::BatchEntryOutOfRange { .. }))
    ));
}

#[test]
fn batch_entry_sizes_are_checked() {
    let entry = |meta: &[u8], rest: &[u8]| {
        let mut b = BytesMut::new();
        b.put_u32(meta.len() as u32);
        b.put_slice(meta);
        b.put_slice(rest);
        BatchIter::new(b.freeze(), 1).unwrap().next().unwrap()
    };
    // Metadata size past the end.
    let mut b = BytesMut::new();
    b.put_u32(100);
    b.put_slice(&[0x18, 0x00]);
    assert_eq!(
        BatchIter::new(b.freeze(), 1)
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err(),
        FrameError::BatchEntryOutOfRange {
            index: 0,
            what: "metadata",
            size: 100,
            available: 2
        }
    );
    // payload_size past the end.
    assert_eq!(
        entry(&single(5).encode_to_vec(), b"abc").unwrap_err(),
        FrameError::BatchEntryOutOfRange {
            index: 0,
            what: "payload",
            size: 5,
            available: 3
        }
    );
    // Negative payload_size.
    assert_eq!(
        entry(&single(-1).encode_to_vec(), b"").unwrap_err(),
        FrameError::BatchEntryOutOfRange {
            index: 0,
            what: "payload",
            size: -1,
            available: 0
        }
    );
    // payload_size missing (required).
    assert_eq!(
        entry(&[], b"").unwrap_err(),
        FrameError::MissingRequiredField {
            message: "SingleMessageMetadata",
            field: "payload_size"
        }
    );
    // Undecodable metadata.
    assert!(matches!(
        entry(&[0xff], b""),
        Err(FrameError::InvalidProtobuf { .. })
    ));
}

#[test]
fn payload_level_errors() {
    let data = Bytes::from_static(b"x");
    let encrypted = MessageMetadata {
        encryption_keys: vec![EncryptionKeys {
            key: "k".into(),
            ..Default::default()
        }],
        ..metadata()
    };
    assert_eq!(
        decode_payload(&encrypted, data.clone(), LIMIT).unwrap_err(),
        FrameError::EncryptedPayload
    );
    let unknown = MessageMetadata {
        compression: Some(9),
        ..metadata()
    };
    assert_eq!(
        decode_payload(&unknown, data.clone(), LIMIT).unwrap_err(),
        FrameError::UnknownCompression(9)
    );
    let negative = MessageMetadata {
        num_messages_in_batch: Some(-3),
        ..metadata()
    };
    assert_eq!(
        decode_payload(&negative, data, LIMIT).unwrap_err(),
        FrameError::InvalidBatchCount(-3)
    );
    // Compressed without uncompressed_size: decompresses to 0 bytes or fails.
    let lz4 = MessageMetadata {
        compression: Some(CompressionType::Lz4 as i32),
        ..metadata()
    };
    let compressed = compress(CompressionType::Lz4, b"hello").unwrap();
    assert!(decode_payload(&lz4, compressed, LIMIT).is_err());
}
