use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use super::*;
use crate::command::{command, Command};
use crate::proto::base_command::Type;
use crate::proto::*;

fn id(ledger: u64, entry: u64) -> MessageIdData {
    MessageIdData {
        ledger_id: ledger,
        entry_id: entry,
        ..Default::default()
    }
}

/// One command of every declared type, with a few fields set.
fn samples() -> Vec<Command> {
    let s = |v: &str| v.to_string();
    let schema = Schema {
        name: s("s"),
        schema_data: Bytes::from_static(b"{}"),
        r#type: schema::Type::Avro as i32,
        properties: vec![],
    };
    vec![
        CommandConnect {
            client_version: s("Pulsar-CPP-v4.2.0"),
            protocol_version: Some(20),
            auth_method_name: Some(s("none")),
            feature_flags: Some(FeatureFlags {
                supports_auth_refresh: Some(true),
                supports_broker_entry_metadata: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }
        .into(),
        CommandConnected {
            server_version: s("Magnetar"),
            protocol_version: Some(20),
            max_message_size: Some(5 << 20),
            feature_flags: Some(FeatureFlags {
                supports_get_partitioned_metadata_without_auto_creation: Some(true),
                ..Default::default()
            }),
        }
        .into(),
        CommandSubscribe {
            topic: s("persistent://public/default/t"),
            subscription: s("sub"),
            sub_type: command_subscribe::SubType::Failover as i32,
            consumer_id: 1,
            request_id: 2,
            consumer_name: Some(s("c")),
            priority_level: Some(0),
            durable: Some(false),
            start_message_id: Some(id(u64::MAX, u64::MAX)),
            initial_position: Some(1),
            ..Default::default()
        }
        .into(),
        CommandProducer {
            topic: s("t"),
            producer_id: 1,
            request_id: 3,
            user_provided_producer_name: Some(false),
            producer_access_mode: Some(ProducerAccessMode::Shared as i32),
            schema: Some(schema.clone()),
            ..Default::default()
        }
        .into(),
        CommandSend {
            producer_id: 1,
            sequence_id: 0,
            num_messages: Some(3),
            ..Default::default()
        }
        .into(),
        CommandSendReceipt {
            producer_id: 1,
            sequence_id: 0,
            message_id: Some(id(9, 0)),
            highest_sequence_id: Some(2),
        }
        .into(),
        CommandSendError {
            producer_id: 1,
            sequence_id: 0,
            error: ServerError::ChecksumError as i32,
            message: s("checksum"),
        }
        .into(),
        CommandMessage {
            consumer_id: 1,
            message_id: id(5, 8),
            ..Default::default()
        }
        .into(),
        CommandAck {
            consumer_id: 1,
            ack_type: command_ack::AckType::Individual as i32,
            message_id: vec![id(5, 8), id(5, 9)],
            ..Default::default()
        }
        .into(),
        CommandFlow {
            consumer_id: 1,
            message_permits: 1000,
        }
        .into(),
        CommandUnsubscribe {
            consumer_id: 1,
            request_id: 4,
            force: None,
        }
        .into(),
        CommandSuccess {
            request_id: 4,
            schema: None,
        }
        .into(),
        CommandError {
            request_id: 4,
            error: ServerError::TopicNotFound as i32,
            message: String::new(),
        }
        .into(),
        CommandCloseProducer {
            producer_id: 1,
            request_id: u64::MAX,
            ..Default::default()
        }
        .into(),
        CommandCloseConsumer {
            consumer_id: 1,
            request_id: 5,
            ..Default::default()
        }
        .into(),
        CommandProducerSuccess {
            request_id: 3,
            producer_name: s("standalone-0-0"),
            last_sequence_id: Some(-1),
            schema_version: Some(Bytes::new()),
            ..Default::default()
        }
        .into(),
        CommandPing {}.into(),
        CommandPong {}.into(),
        CommandRedeliverUnacknowledgedMessages {
            consumer_id: 1,
            message_ids: vec![id(1, 1)],
            consumer_epoch: None,
        }
        .into(),
        CommandPartitionedTopicMetadata {
            topic: s("t"),
            request_id: 6,
            metadata_auto_creation_enabled: Some(false),
            ..Default::default()
        }
        .into(),
        CommandPartitionedTopicMetadataResponse {
            partitions: Some(0),
            request_id: 6,
            response: Some(0),
            ..Default::default()
        }
        .into(),
        CommandLookupTopic {
            topic: s("t"),
            request_id: 7,
            ..Default::default()
        }
        .into(),
        CommandLookupTopicResponse {
            broker_service_url: Some(s("pulsar://127.0.0.1:6650")),
            response: Some(1),
            request_id: 7,
            authoritative: Some(true),
            ..Default::default()
        }
        .into(),
        CommandConsumerStats {
            request_id: 8,
            consumer_id: 1,
        }
        .into(),
        CommandConsumerStatsResponse {
            request_id: 8,
            msg_backlog: Some(3),
            ..Default::default()
        }
        .into(),
        CommandReachedEndOfTopic { consumer_id: 1 }.into(),
        CommandSeek {
            consumer_id: 1,
            request_id: 9,
            message_id: Some(id(5, 8)),
            message_publish_time: None,
        }
        .into(),
        CommandGetLastMessageId {
            consumer_id: 1,
            request_id: 10,
        }
        .into(),
        CommandGetLastMessageIdResponse {
            last_message_id: MessageIdData {
                partition: Some(-1),
                batch_index: Some(2),
                ..id(5, 8)
            },
            request_id: 10,
            consumer_mark_delete_position: Some(id(5, 7)),
        }
        .into(),
        CommandActiveConsumerChange {
            consumer_id: 1,
            is_active: Some(true),
        }
        .into(),
        CommandGetTopicsOfNamespace {
            request_id: 11,
            namespace: s("public/default"),
            mode: Some(0),
            ..Default::default()
        }
        .into(),
        CommandGetTopicsOfNamespaceResponse {
            request_id: 11,
            topics: vec![s("persistent://public/default/a")],
            filtered: Some(false),
            changed: Some(true),
            ..Default::default()
        }
        .into(),
        CommandGetSchema {
            request_id: 12,
            topic: s("t"),
            schema_version: None,
        }
        .into(),
        CommandGetSchemaResponse {
            request_id: 12,
            schema: Some(schema.clone()),
            schema_version: Some(Bytes::from_static(&[0; 8])),
            ..Default::default()
        }
        .into(),
        CommandAuthChallenge::default().into(),
        CommandAuthResponse::default().into(),
        CommandAckResponse {
            consumer_id: 1,
            request_id: Some(13),
            ..Default::default()
        }
        .into(),
        CommandGetOrCreateSchema {
            request_id: 14,
            topic: s("t"),
            schema,
            producer_name: None,
        }
        .into(),
        CommandGetOrCreateSchemaResponse {
            request_id: 14,
            ..Default::default()
        }
        .into(),
        CommandWatchTopicList {
            request_id: 15,
            watcher_id: 1,
            namespace: s("public/default"),
            topics_pattern: s(".*"),
            topics_hash: None,
        }
        .into(),
        CommandWatchTopicListSuccess {
            request_id: 15,
            watcher_id: 1,
            topic: vec![],
            topics_hash: s("0"),
        }
        .into(),
        CommandWatchTopicUpdate {
            watcher_id: 1,
            topics_hash: s("0"),
            ..Default::default()
        }
        .into(),
        CommandWatchTopicListClose {
            request_id: 16,
            watcher_id: 1,
        }
        .into(),
        CommandTopicMigrated {
            resource_id: 1,
            resource_type: 0,
            ..Default::default()
        }
        .into(),
    ]
}

fn metadata() -> MessageMetadata {
    MessageMetadata {
        producer_name: "p".into(),
        sequence_id: 7,
        publish_time: 1_700_000_000_000,
        properties: vec![KeyValue {
            key: "k".into(),
            value: "v".into(),
        }],
        ..Default::default()
    }
}

fn send() -> BaseCommand {
    command(CommandSend {
        producer_id: 3,
        sequence_id: 7,
        ..Default::default()
    })
}

fn encoded(cmd: &BaseCommand) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_command(cmd, &mut buf).unwrap();
    buf
}

fn encoded_payload(cmd: &BaseCommand, meta: &MessageMetadata, payload: &[u8]) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_payload_command(cmd, meta, &[payload], &mut buf).unwrap();
    buf
}

fn decode_all(mut buf: BytesMut) -> Result<Frame> {
    let frame = FrameDecoder::default()
        .decode(&mut buf)?
        .expect("a whole frame");
    assert!(buf.is_empty(), "frame left {} bytes", buf.len());
    Ok(frame)
}

/// A raw frame: totalSize, commandSize, command bytes, then `rest`.
fn raw_frame(command: &[u8], rest: &[u8]) -> BytesMut {
    let mut buf = BytesMut::new();
    buf.put_u32((4 + command.len() + rest.len()) as u32);
    buf.put_u32(command.len() as u32);
    buf.put_slice(command);
    buf.put_slice(rest);
    buf
}

#[test]
fn every_command_type_round_trips() {
    let samples = samples();
    // One sample per declared type.
    let mut kinds: Vec<i32> = samples.iter().map(|c| c.kind() as i32).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let declared = (0..128).filter(|v| Type::try_from(*v).is_ok()).count();
    assert_eq!(kinds.len(), declared);
    assert_eq!(samples.len(), declared);

    for sample in samples {
        let base = sample.clone().into_base();
        let frame = decode_all(encoded(&base)).unwrap();
        assert_eq!(frame, Frame::new(base));
        assert_eq!(Command::try_from(frame.command).unwrap(), sample);
    }
}

#[test]
fn simple_frame_layout() {
    let buf = encoded(&command(CommandPing {}));
    // totalSize 9 = 4 + commandSize 5; BaseCommand{type 18, ping {}}.
    assert_eq!(
        &buf[..],
        [0, 0, 0, 9, 0, 0, 0, 5, 0x08, 18, 0x92, 0x01, 0x00]
    );
}

#[test]
fn payload_frame_round_trips_with_checksum() {
    let buf = encoded_payload(&send(), &metadata(), b"hello");
    // The checksum covers metadataSize, metadata and payload.
    let command_end = 8 + send().encoded_len();
    assert_eq!(&buf[command_end..command_end + 2], &[0x0e, 0x01]);
    let crc = u32::from_be_bytes(buf[command_end + 2..command_end + 6].try_into().unwrap());
    assert_eq!(crc, crc32c::crc32c(&buf[command_end + 6..]));

    let frame = decode_all(buf).unwrap();
    assert_eq!(frame.command, send());
    let payload = frame.payload.unwrap();
    assert_eq!(payload.metadata, metadata());
    assert_eq!(payload.data, Bytes::from_static(b"hello"));
    assert_eq!(payload.checksum, ChecksumState::Verified(crc));
}

#[test]
fn payload_pieces_are_concatenated() {
    let mut buf = BytesMut::new();
    let pieces = [
        Bytes::from_static(b"he"),
        Bytes::new(),
        Bytes::from_static(b"llo"),
    ];
    encode_payload_command(&send(), &metadata(), &pieces, &mut buf).unwrap();
    assert_eq!(buf, encoded_payload(&send(), &metadata(), b"hello"));
}

#[test]
fn empty_payload_is_a_payload() {
    let frame = decode_all(encoded_payload(&send(), &metadata(), b"")).unwrap();
    assert_eq!(frame.payload.unwrap().data, Bytes::new());
}

#[test]
fn payload_data_is_a_slice_of_the_input() {
    let mut buf = encoded_payload(&send(), &metadata(), &[7u8; 1000]);
    let start = buf.as_ptr() as usize;
    let end = start + buf.len();
    let frame = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
    let data = frame.payload.unwrap().data;
    let at = data.as_ptr() as usize;
    assert!(at >= start && at + data.len() <= end, "payload was copied");
}

#[test]
fn frame_without_checksum_is_accepted() {
    let mut rest = BytesMut::new();
    let meta = metadata().encode_to_vec();
    rest.put_u32(meta.len() as u32);
    rest.put_slice(&meta);
    rest.put_slice(b"x");
    let frame = decode_all(raw_frame(&send().encode_to_vec(), &rest)).unwrap();
    let payload = frame.payload.unwrap();
    assert_eq!(payload.checksum, ChecksumState::Absent);
    assert_eq!(payload.data, Bytes::from_static(b"x"));
}

#[test]
fn broker_entry_metadata_prefix_is_skipped() {
    let plain = encoded_payload(&send(), &metadata(), b"hello");
    let command_end = 8 + send().encoded_len();
    let entry = BrokerEntryMetadata {
        broker_timestamp: Some(1),
        index: Some(41),
    }
    .encode_to_vec();
    let mut rest = BytesMut::new();
    rest.put_u16(BROKER_ENTRY_METADATA_MAGIC);
    rest.put_u32(entry.len() as u32);
    rest.put_slice(&entry);
    rest.put_slice(&plain[command_end..]);
    let frame = decode_all(raw_frame(&send().encode_to_vec(), &rest)).unwrap();
    assert_eq!(frame, decode_all(plain).unwrap());
}

#[test]
fn partial_input_waits_and_consumes_nothing() {
    let whole = encoded_payload(&send(), &metadata(), b"hello");
    let mut decoder = FrameDecoder::default();
    for cut in 0..whole.len() {
        let mut buf = BytesMut::from(&whole[..cut]);
        assert_eq!(decoder.decode(&mut buf).unwrap(), None, "cut at {cut}");
        assert_eq!(buf.len(), cut);
    }
}

#[test]
fn consecutive_frames_decode_in_order() {
    let mut buf = encoded(&command(CommandPing {}));
    buf.extend_from_slice(&encoded_payload(&send(), &metadata(), b"a"));
    buf.extend_from_slice(&encoded(&command(CommandPong {})));
    buf.extend_from_slice(&[0, 0]);
    let mut decoder = FrameDecoder::default();
    let kinds: Vec<_> = std::iter::from_fn(|| decoder.decode(&mut buf).unwrap())
        .map(|f| f.command.r#type())
        .collect();
    assert_eq!(kinds, [Type::Ping, Type::Send, Type::Pong]);
    assert_eq!(&buf[..], &[0, 0]);
}

#[test]
fn oversized_frame_is_refused_without_allocating() {
    // 4 GiB announced, 10 bytes present.
    let mut buf = BytesMut::with_capacity(10);
    buf.put_u32(u32::MAX);
    buf.put_slice(&[0; 6]);
    let capacity = buf.capacity();
    let err = FrameDecoder::default().decode(&mut buf).unwrap_err();
    assert_eq!(
        err,
        FrameError::FrameTooLarge {
            size: 4 + u64::from(u32::MAX),
            max: u64::from(DEFAULT_MAX_FRAME_SIZE)
        }
    );
    assert_eq!(buf.capacity(), capacity);
    assert_eq!(buf.len(), 10);
}

#[test]
fn limit_counts_the_size_field() {
    let buf = encoded(&command(CommandPing {}));
    let size = buf.len() as u32;
    assert!(FrameDecoder::new(size)
        .decode(&mut buf.clone())
        .unwrap()
        .is_some());
    assert_eq!(
        FrameDecoder::new(size - 1)
            .decode(&mut buf.clone())
            .unwrap_err(),
        FrameError::FrameTooLarge {
            size: u64::from(size),
            max: u64::from(size - 1)
        }
    );
    // The default is upstream's 5 MiB + 10 KiB.
    assert_eq!(FrameDecoder::default().max_frame_size(), 5_253_120);
}

#[test]
fn size_field_errors() {
    for total_size in 0..4u32 {
        let mut buf = BytesMut::new();
        buf.put_u32(total_size);
        assert_eq!(
            FrameDecoder::default().decode(&mut buf).unwrap_err(),
            FrameError::FrameTooShort { total_size }
        );
    }
    let mut buf = BytesMut::new();
    buf.put_u32(4);
    buf.put_u32(0);
    assert_eq!(decode_all(buf).unwrap_err(), FrameError::EmptyCommand);

    let mut buf = BytesMut::new();
    buf.put_u32(8);
    buf.put_u32(5);
    buf.put_u32(0);
    assert_eq!(
        decode_all(buf).unwrap_err(),
        FrameError::CommandSizeOutOfRange {
            command_size: 5,
            total_size: 8
        }
    );
    let mut buf = BytesMut::new();
    buf.put_u32(8);
    buf.put_u32(u32::MAX);
    buf.put_u32(0);
    assert!(matches!(
        decode_all(buf).unwrap_err(),
        FrameError::CommandSizeOutOfRange { .. }
    ));
}

#[test]
fn undecodable_command_is_refused() {
    let err = decode_all(raw_frame(&[0xff], &[])).unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::InvalidProtobuf {
                message: "BaseCommand",
                ..
            }
        ),
        "{err}"
    );
    // Invalid UTF-8 in a string field.
    let mut cmd = command(CommandLookupTopic {
        topic: "ab".into(),
        request_id: 1,
        ..Default::default()
    })
    .encode_to_vec();
    let at = cmd.windows(2).position(|w| w == b"ab").unwrap();
    cmd[at] = 0xff;
    assert!(matches!(
        decode_all(raw_frame(&cmd, &[])).unwrap_err(),
        FrameError::InvalidProtobuf { .. }
    ));
}

#[test]
fn missing_required_fields_are_refused() {
    // No type at all: just an empty ping field.
    let err = decode_all(raw_frame(&[0x92, 0x01, 0x00], &[])).unwrap_err();
    assert_eq!(
        err,
        FrameError::MissingRequiredField {
            message: "BaseCommand",
            field: "type"
        }
    );

    // type SEND without the send command.
    let err = decode_all(raw_frame(&[0x08, 6], &[])).unwrap_err();
    assert_eq!(
        err,
        FrameError::MissingRequiredField {
            message: "BaseCommand",
            field: "send"
        }
    );

    // CommandSend without sequence_id: {type 6, send {producer_id 1}}.
    let err = decode_all(raw_frame(&[0x08, 6, 0x32, 0x02, 0x08, 0x01], &[])).unwrap_err();
    assert_eq!(
        err,
        FrameError::MissingRequiredField {
            message: "CommandSend",
            field: "sequence_id"
        }
    );

    // MessageMetadata without publish_time.
    let meta = [0x0a, 0x00, 0x10, 0x01];
    let mut rest = BytesMut::new();
    rest.put_u32(meta.len() as u32);
    rest.put_slice(&meta);
    let err = decode_all(raw_frame(&send().encode_to_vec(), &rest)).unwrap_err();
    assert_eq!(
        err,
        FrameError::MissingRequiredField {
            message: "MessageMetadata",
            field: "publish_time"
        }
    );
}

#[test]
fn unknown_command_type_decodes_but_does_not_convert() {
    // NEW_TXN (50) is not declared: the frame decodes, the command does not.
    let frame = decode_all(raw_frame(&[0x08, 50, 0x92, 0x03, 0x02, 0x08, 0x01], &[])).unwrap();
    assert_eq!(frame.command.r#type, 50);
    assert_eq!(
        Command::try_from(frame.command).unwrap_err(),
        FrameError::UnknownCommandType(50)
    );
}

#[test]
fn bad_magic_is_refused() {
    let err = decode_all(raw_frame(
        &send().encode_to_vec(),
        &[0x0e, 0x03, 0, 0, 0, 0],
    ))
    .unwrap_err();
    assert_eq!(err, FrameError::BadMagic(0x0e03));
    // The same after a broker-entry-metadata prefix.
    let err = decode_all(raw_frame(
        &send().encode_to_vec(),
        &[0x0e, 0x02, 0, 0, 0, 0, 0x0e, 0x02],
    ))
    .unwrap_err();
    assert_eq!(err, FrameError::BadMagic(0x0e02));
}

#[test]
fn checksum_mismatch_keeps_the_command_and_the_stream() {
    let mut buf = encoded_payload(&send(), &metadata(), b"hello");
    let last = buf.len() - 1;
    buf[last] ^= 0x20;
    buf.extend_from_slice(&encoded(&command(CommandPing {})));

    let mut decoder = FrameDecoder::default();
    let err = decoder.decode(&mut buf).unwrap_err();
    let FrameError::ChecksumMismatch {
        command: cmd,
        expected,
        computed,
    } = &err
    else {
        panic!("{err}")
    };
    assert_ne!(expected, computed);
    assert_eq!(**cmd, send());
    assert_eq!(err.command().unwrap().send.as_ref().unwrap().sequence_id, 7);
    // The corrupt frame is consumed; the next one decodes.
    let next = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(next.command.r#type(), Type::Ping);
    assert!(FrameError::EmptyCommand.command().is_none());
}

#[test]
fn truncated_payload_parts_are_refused() {
    let cmd = send().encode_to_vec();
    let truncated = |rest: &[u8]| match decode_all(raw_frame(&cmd, rest)).unwrap_err() {
        FrameError::TruncatedPayload { what, .. } => what,
        other => panic!("{other}"),
    };
    assert_eq!(truncated(&[0x00]), "metadata size");
    assert_eq!(truncated(&[0, 0, 0, 9, 1, 2]), "metadata");
    assert_eq!(truncated(&[0x0e, 0x01, 0, 0]), "checksum");
    assert_eq!(truncated(&[0x0e, 0x02, 0]), "broker entry metadata size");
    assert_eq!(
        truncated(&[0x0e, 0x02, 0, 0, 0, 5, 1]),
        "broker entry metadata"
    );
    // A checksum over nothing, then no metadata size.
    let mut rest = vec![0x0e, 0x01];
    rest.extend_from_slice(&crc32c::crc32c(&[]).to_be_bytes());
    assert_eq!(truncated(&rest), "metadata size");
}

#[test]
fn undecodable_metadata_is_refused() {
    let mut rest = BytesMut::new();
    rest.put_u32(1);
    rest.put_u8(0xff);
    let err = decode_all(raw_frame(&send().encode_to_vec(), &rest)).unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::InvalidProtobuf {
                message: "MessageMetadata",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn encoders_refuse_inconsistent_commands_and_write_nothing() {
    let bad = BaseCommand {
        r#type: Type::Send as i32,
        ..Default::default()
    };
    let mut buf = BytesMut::from(&b"keep"[..]);
    let err = encode_command(&bad, &mut buf).unwrap_err();
    assert_eq!(
        err,
        FrameError::MissingRequiredField {
            message: "BaseCommand",
            field: "send"
        }
    );
    let err = encode_payload_command(&bad, &metadata(), &[b"x"], &mut buf).unwrap_err();
    assert_eq!(
        err,
        FrameError::MissingRequiredField {
            message: "BaseCommand",
            field: "send"
        }
    );
    assert_eq!(&buf[..], b"keep");
    // An undeclared type is encoded as given (nothing to check it against).
    encode_command(
        &BaseCommand {
            r#type: 50,
            ..Default::default()
        },
        &mut buf,
    )
    .unwrap();
}

#[test]
fn message_frames_for_consumers() {
    // What the front end sends to a consumer: MESSAGE + metadata of a batch.
    let cmd = command(CommandMessage {
        consumer_id: 4,
        message_id: MessageIdData {
            partition: Some(0),
            ..id(0, 100)
        },
        ..Default::default()
    });
    let meta = MessageMetadata {
        num_messages_in_batch: Some(2),
        ..metadata()
    };
    let frame = decode_all(encoded_payload(&cmd, &meta, b"batch")).unwrap();
    assert_eq!(frame.command, cmd);
    assert_eq!(frame.payload.unwrap().metadata, meta);
}

#[test]
fn sizes_past_u32_are_refused_when_encoding() {
    // Frames over 4 GiB cannot be described by totalSize; building one in
    // a test would take 4 GiB, so the size check is exercised directly.
    assert_eq!(to_u32("frame", u64::from(u32::MAX)).unwrap(), u32::MAX);
    assert_eq!(
        to_u32("frame", u64::from(u32::MAX) + 1).unwrap_err(),
        FrameError::TooLargeToEncode {
            what: "frame",
            size: 1 << 32
        }
    );
}
