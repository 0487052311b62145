//! Property tests of the frame and payload codecs: round trips of random
//! commands and payload frames, decoding a frame split at every byte, and
//! the checksum catching every corrupted byte.

mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use magnetar_pulsar_wire::payload::decode_payload;
use magnetar_pulsar_wire::proto::*;
use magnetar_pulsar_wire::{
    ChecksumState, Command, Frame, FrameDecoder, FrameError, MessagePayload,
};
use proptest::prelude::*;

fn decode_one(mut buf: BytesMut) -> Result<Frame, FrameError> {
    let frame = FrameDecoder::default()
        .decode(&mut buf)?
        .expect("a whole frame");
    assert!(buf.is_empty());
    Ok(frame)
}

/// Checks that a decoded payload frame carries what `frame` describes.
fn check_payload(frame: &PayloadFrame, decoded: Frame, metadata: &MessageMetadata) {
    assert_eq!(decoded.command, frame.command);
    let payload = decoded.payload.expect("a payload");
    assert!(matches!(payload.checksum, ChecksumState::Verified(_)));
    assert_eq!(&payload.metadata, metadata);
    match (
        &frame.body,
        decode_payload(&payload.metadata, payload.data, 1 << 20).unwrap(),
    ) {
        (Body::Single(v), MessagePayload::Single(out)) => assert_eq!(&out[..], &v[..]),
        (Body::Batch(messages), MessagePayload::Batch(batch)) => {
            let out: Vec<_> = batch.collect::<Result<_, _>>().unwrap();
            assert_eq!(out.len(), messages.len());
            for ((m, p), (orig_m, orig_p)) in out.iter().zip(messages) {
                assert_eq!(&p[..], &orig_p[..]);
                assert_eq!(
                    &SingleMessageMetadata {
                        payload_size: 0,
                        ..m.clone()
                    },
                    orig_m
                );
                assert_eq!(m.payload_size as usize, orig_p.len());
            }
        }
        (body, other) => panic!("{body:?} decoded as {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// (2) Random commands survive encode → decode, and convert back to the
    /// same `Command`.
    #[test]
    fn commands_round_trip(cmd in any_command()) {
        let base = cmd.clone().into_base();
        let frame = decode_one(encoded_command(&base)).unwrap();
        prop_assert_eq!(&frame, &Frame::new(base));
        prop_assert_eq!(Command::try_from(frame.command).unwrap(), cmd);
    }

    /// (2) Random payload frames (random metadata, payloads and codecs,
    /// batched or not) survive encode → decode → decompress → split.
    #[test]
    fn payload_frames_round_trip(frame in payload_frame()) {
        let (buf, metadata) = frame.encode();
        check_payload(&frame, decode_one(buf).unwrap(), &metadata);
    }

    /// (3) A frame fed in two pieces, split at every byte, decodes to the
    /// same frame, and nothing is consumed until it is whole.
    #[test]
    fn every_split_point_yields_the_same_frame(
        frame in prop_oneof![
            any_base_command().prop_map(|c| encoded_command(&c)),
            payload_frame_of(64).prop_map(|f| f.encode().0),
        ],
        trailing in proptest::collection::vec(any::<u8>(), 0..4),
    ) {
        let whole = decode_one(frame.clone()).unwrap();
        let mut decoder = FrameDecoder::default();
        for cut in 0..=frame.len() {
            let mut buf = BytesMut::from(&frame[..cut]);
            if cut < frame.len() {
                prop_assert_eq!(decoder.decode(&mut buf).unwrap(), None);
                prop_assert_eq!(buf.len(), cut);
            }
            buf.extend_from_slice(&frame[cut..]);
            buf.extend_from_slice(&trailing);
            let decoded = decoder.decode(&mut buf).unwrap();
            prop_assert_eq!(decoded.as_ref(), Some(&whole));
            // Only the frame was taken; the start of the next stays.
            prop_assert_eq!(&buf[..], &trailing[..]);
        }
    }

    /// (3) The same frames fed in arbitrary chunks.
    #[test]
    fn arbitrary_chunking_yields_the_same_frames(
        frames in proptest::collection::vec(payload_frame(), 1..4),
        cmds in proptest::collection::vec(any_base_command(), 0..4),
        chunk_sizes in proptest::collection::vec(1usize..64, 1..64),
    ) {
        let mut stream = BytesMut::new();
        let mut expected = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            let (buf, _) = f.encode();
            expected.push(decode_one(buf.clone()).unwrap());
            stream.extend_from_slice(&buf);
            if let Some(c) = cmds.get(i) {
                let buf = encoded_command(c);
                expected.push(decode_one(buf.clone()).unwrap());
                stream.extend_from_slice(&buf);
            }
        }
        let mut decoder = FrameDecoder::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        let mut rest = &stream[..];
        let mut sizes = chunk_sizes.iter().cycle();
        while !rest.is_empty() {
            let n = (*sizes.next().unwrap()).min(rest.len());
            buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            while let Some(f) = decoder.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got, expected);
    }

    /// (4) Flipping any bits of any byte after the checksum field
    /// (metadata size, metadata, payload) or of the checksum itself is
    /// caught, and the error still carries the command. Frames up to 1 KiB
    /// are checked at every byte; larger ones at their first and last 256
    /// bytes and 256 random ones.
    #[test]
    fn any_corrupted_byte_fails_the_checksum(
        frame in payload_frame(),
        mask in 1u8..=255,
        picks in proptest::collection::vec(any::<proptest::sample::Index>(), 256),
    ) {
        let (buf, _) = frame.encode();
        let command_len = prost::Message::encoded_len(&frame.command);
        let checksum_at = 8 + command_len + 2;
        let covered = checksum_at..buf.len();
        let positions: Vec<usize> = if covered.len() <= 1024 {
            covered.collect()
        } else {
            let n = covered.len();
            (checksum_at..checksum_at + 256)
                .chain(buf.len() - 256..buf.len())
                .chain(picks.iter().map(|i| checksum_at + i.index(n)))
                .collect()
        };
        for at in positions {
            let mut corrupt = buf.clone();
            corrupt[at] ^= mask;
            match decode_one(corrupt) {
                Err(FrameError::ChecksumMismatch { command, expected, computed }) => {
                    prop_assert_eq!(&*command, &frame.command);
                    prop_assert_ne!(expected, computed);
                }
                other => prop_assert!(false, "byte {} of {}: {:?}", at, buf.len(), other),
            }
        }
    }

    /// Decompression never produces more than it was told, whatever the
    /// input, and never panics.
    #[test]
    fn decompression_of_garbage_is_bounded(
        codec in 1..5usize,
        data in proptest::collection::vec(any::<u8>(), 0..512),
        claimed in 0u32..4096,
    ) {
        let codec = CODECS[codec];
        if let Ok(out) = magnetar_pulsar_wire::payload::decompress(codec, Bytes::from(data), claimed, 4096) {
            prop_assert_eq!(out.len(), claimed as usize);
        }
    }

    /// Batch decoding of arbitrary bytes never panics and never yields more
    /// than the announced count or bytes it does not have.
    #[test]
    fn batch_decoding_of_garbage_is_safe(
        data in proptest::collection::vec(any::<u8>(), 0..512),
        count in -2i32..8,
    ) {
        let len = data.len();
        if let Ok(batch) = magnetar_pulsar_wire::payload::BatchIter::new(Bytes::from(data), count) {
            let mut n = 0;
            let mut total = 0;
            for entry in batch {
                let Ok((_, payload)) = entry else { break };
                n += 1;
                total += payload.len();
            }
            prop_assert!(n <= count);
            prop_assert!(total <= len);
        }
    }
}
