//! Round trips of every declared message, and field numbers checked against
//! hand-encoded bytes so that a renumbering in the .proto is caught.

use bytes::Bytes;
use prost::Message;

use super::*;
use crate::wire::{self, decode_checked};

/// Encodes, decodes with the required-field check, compares.
fn rt<M: Message + Default + PartialEq + std::fmt::Debug>(m: M, schema: usize) {
    let bytes = Bytes::from(m.encode_to_vec());
    let back: M = decode_checked(bytes, schema).unwrap_or_else(|e| panic!("{m:?}: {e}"));
    assert_eq!(back, m);
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: v.into(),
    }
}

fn id(ledger: u64, entry: u64) -> MessageIdData {
    MessageIdData {
        ledger_id: ledger,
        entry_id: entry,
        ..Default::default()
    }
}

fn schema() -> Schema {
    Schema {
        name: "s".into(),
        schema_data: Bytes::from_static(b"{}"),
        r#type: schema::Type::Json as i32,
        properties: vec![kv("a", "b")],
    }
}

#[test]
fn common_types_round_trip() {
    rt(
        MessageIdData {
            ledger_id: u64::MAX,
            entry_id: i64::MAX as u64,
            partition: Some(-1),
            batch_index: Some(3),
            ack_set: vec![5, -1],
            batch_size: Some(10),
            first_chunk_message_id: Some(Box::new(id(1, 2))),
        },
        wire::MESSAGE_ID_DATA,
    );
    rt(kv("k", "v"), wire::KEY_VALUE);
    rt(
        KeyLongValue {
            key: "k".into(),
            value: 7,
        },
        wire::KEY_LONG_VALUE,
    );
    rt(
        IntRange {
            start: 0,
            end: 65535,
        },
        wire::INT_RANGE,
    );
    rt(
        EncryptionKeys {
            key: "k".into(),
            value: Bytes::from_static(b"secret"),
            metadata: vec![kv("m", "n")],
        },
        wire::ENCRYPTION_KEYS,
    );
    rt(schema(), wire::SCHEMA);
    rt(
        BrokerEntryMetadata {
            broker_timestamp: Some(1),
            index: Some(2),
        },
        wire::BROKER_ENTRY_METADATA,
    );
    rt(
        AuthData {
            auth_method_name: Some("none".into()),
            auth_data: Some(Bytes::new()),
        },
        wire::AUTH_DATA,
    );
    rt(
        KeySharedMeta {
            key_shared_mode: KeySharedMode::Sticky as i32,
            hash_ranges: vec![IntRange { start: 0, end: 10 }],
            allow_out_of_order_delivery: Some(true),
        },
        wire::KEY_SHARED_META,
    );
}

#[test]
fn metadata_round_trips() {
    rt(
        MessageMetadata {
            producer_name: "p".into(),
            sequence_id: 1,
            publish_time: 1_700_000_000_000,
            properties: vec![kv("h", "v")],
            partition_key: Some("a2V5".into()),
            replicate_to: vec!["c1".into()],
            compression: Some(CompressionType::Lz4 as i32),
            uncompressed_size: Some(81),
            num_messages_in_batch: Some(3),
            event_time: Some(5),
            schema_version: Some(Bytes::from_static(&[0, 1])),
            partition_key_b64_encoded: Some(true),
            ordering_key: Some(Bytes::from_static(b"key")),
            deliver_at_time: Some(-1),
            highest_sequence_id: Some(3),
            null_value: Some(false),
            uuid: Some("u".into()),
            chunk_id: Some(0),
            null_partition_key: Some(true),
            ..Default::default()
        },
        wire::MESSAGE_METADATA,
    );
    rt(
        SingleMessageMetadata {
            properties: vec![kv("h", "v")],
            partition_key: Some("pk".into()),
            payload_size: 0,
            compacted_out: Some(false),
            event_time: Some(9),
            ordering_key: Some(Bytes::from_static(b"o")),
            sequence_id: Some(4),
            null_value: Some(true),
            ..Default::default()
        },
        wire::SINGLE_MESSAGE_METADATA,
    );
}

#[test]
fn handshake_commands_round_trip() {
    let flags = FeatureFlags {
        supports_auth_refresh: Some(true),
        supports_broker_entry_metadata: Some(true),
        supports_get_partitioned_metadata_without_auto_creation: Some(true),
        supports_tc_metadata_discovery: Some(false),
        ..Default::default()
    };
    rt(flags, wire::FEATURE_FLAGS);
    rt(
        CommandConnect {
            client_version: "Pulsar-CPP-v4.2.0".into(),
            protocol_version: Some(ProtocolVersion::V20 as i32),
            auth_method_name: Some("none".into()),
            feature_flags: Some(flags),
            proxy_version: Some("x".into()),
            ..Default::default()
        },
        wire::COMMAND_CONNECT,
    );
    rt(
        CommandConnected {
            server_version: "Magnetar".into(),
            protocol_version: Some(21),
            max_message_size: Some(5 << 20),
            feature_flags: Some(flags),
        },
        wire::COMMAND_CONNECTED,
    );
    rt(
        CommandAuthResponse {
            client_version: Some("c".into()),
            response: Some(AuthData::default()),
            protocol_version: Some(21),
        },
        wire::COMMAND_AUTH_RESPONSE,
    );
    rt(
        CommandAuthChallenge {
            server_version: Some("s".into()),
            ..Default::default()
        },
        wire::COMMAND_AUTH_CHALLENGE,
    );
    rt(CommandPing {}, wire::COMMAND_PING);
    rt(CommandPong {}, wire::COMMAND_PONG);
}

#[test]
fn consumer_commands_round_trip() {
    rt(
        CommandSubscribe {
            topic: "persistent://public/default/t".into(),
            subscription: "s".into(),
            sub_type: command_subscribe::SubType::KeyShared as i32,
            consumer_id: 1,
            request_id: 2,
            consumer_name: Some("c".into()),
            durable: Some(false),
            start_message_id: Some(id(u64::MAX, u64::MAX)),
            metadata: vec![kv("a", "b")],
            schema: Some(schema()),
            initial_position: Some(command_subscribe::InitialPosition::Earliest as i32),
            key_shared_meta: Some(KeySharedMeta::default()),
            subscription_properties: vec![kv("c", "d")],
            consumer_epoch: Some(1),
            ..Default::default()
        },
        wire::COMMAND_SUBSCRIBE,
    );
    rt(
        CommandFlow {
            consumer_id: 1,
            message_permits: 1000,
        },
        wire::COMMAND_FLOW,
    );
    rt(
        CommandMessage {
            consumer_id: 1,
            message_id: MessageIdData {
                partition: Some(2),
                ..id(5, 8)
            },
            redelivery_count: Some(1),
            ack_set: vec![5],
            consumer_epoch: Some(0),
        },
        wire::COMMAND_MESSAGE,
    );
    rt(
        CommandAck {
            consumer_id: 1,
            ack_type: command_ack::AckType::Cumulative as i32,
            message_id: vec![
                id(5, 8),
                MessageIdData {
                    ack_set: vec![4],
                    ..id(5, 9)
                },
            ],
            validation_error: Some(command_ack::ValidationError::ChecksumMismatch as i32),
            properties: vec![KeyLongValue {
                key: "k".into(),
                value: 1,
            }],
            request_id: Some(9),
            ..Default::default()
        },
        wire::COMMAND_ACK,
    );
    rt(
        CommandAckResponse {
            consumer_id: 1,
            error: Some(ServerError::UnknownError as i32),
            message: Some("m".into()),
            request_id: Some(9),
            ..Default::default()
        },
        wire::COMMAND_ACK_RESPONSE,
    );
    rt(
        CommandActiveConsumerChange {
            consumer_id: 1,
            is_active: Some(true),
        },
        wire::COMMAND_ACTIVE_CONSUMER_CHANGE,
    );
    rt(
        CommandUnsubscribe {
            consumer_id: 1,
            request_id: 2,
            force: Some(true),
        },
        wire::COMMAND_UNSUBSCRIBE,
    );
    rt(
        CommandSeek {
            consumer_id: 1,
            request_id: 2,
            message_id: Some(id(5, 8)),
            message_publish_time: Some(3),
        },
        wire::COMMAND_SEEK,
    );
    rt(
        CommandReachedEndOfTopic { consumer_id: 1 },
        wire::COMMAND_REACHED_END_OF_TOPIC,
    );
    rt(
        CommandTopicMigrated {
            resource_id: 1,
            resource_type: command_topic_migrated::ResourceType::Consumer as i32,
            broker_service_url: Some("pulsar://b:6650".into()),
            broker_service_url_tls: None,
        },
        wire::COMMAND_TOPIC_MIGRATED,
    );
    rt(
        CommandCloseConsumer {
            consumer_id: 1,
            request_id: u64::MAX,
            assigned_broker_service_url: Some("u".into()),
            ..Default::default()
        },
        wire::COMMAND_CLOSE_CONSUMER,
    );
    rt(
        CommandRedeliverUnacknowledgedMessages {
            consumer_id: 1,
            message_ids: vec![id(1, 2)],
            consumer_epoch: Some(3),
        },
        wire::COMMAND_REDELIVER_UNACKNOWLEDGED_MESSAGES,
    );
    rt(
        CommandConsumerStats {
            request_id: 1,
            consumer_id: 2,
        },
        wire::COMMAND_CONSUMER_STATS,
    );
    rt(
        CommandConsumerStatsResponse {
            request_id: 1,
            msg_rate_out: Some(1.5),
            consumer_name: Some("c".into()),
            available_permits: Some(10),
            message_ack_rate: Some(0.25),
            ..Default::default()
        },
        wire::COMMAND_CONSUMER_STATS_RESPONSE,
    );
    rt(
        CommandGetLastMessageId {
            consumer_id: 1,
            request_id: 2,
        },
        wire::COMMAND_GET_LAST_MESSAGE_ID,
    );
    rt(
        CommandGetLastMessageIdResponse {
            last_message_id: MessageIdData {
                batch_index: Some(2),
                ..id(5, 8)
            },
            request_id: 2,
            consumer_mark_delete_position: Some(id(5, 7)),
        },
        wire::COMMAND_GET_LAST_MESSAGE_ID_RESPONSE,
    );
}

#[test]
fn lookup_commands_round_trip() {
    rt(
        CommandPartitionedTopicMetadata {
            topic: "t".into(),
            request_id: 1,
            metadata_auto_creation_enabled: Some(false),
            ..Default::default()
        },
        wire::COMMAND_PARTITIONED_TOPIC_METADATA,
    );
    rt(
        CommandPartitionedTopicMetadataResponse {
            partitions: Some(4),
            request_id: 1,
            response: Some(command_partitioned_topic_metadata_response::LookupType::Success as i32),
            ..Default::default()
        },
        wire::COMMAND_PARTITIONED_TOPIC_METADATA_RESPONSE,
    );
    rt(
        CommandLookupTopic {
            topic: "t-partition-0".into(),
            request_id: 2,
            authoritative: Some(false),
            advertised_listener_name: Some(String::new()),
            properties: vec![kv("a", "b")],
            ..Default::default()
        },
        wire::COMMAND_LOOKUP_TOPIC,
    );
    rt(
        CommandLookupTopicResponse {
            broker_service_url: Some("pulsar://127.0.0.1:6650".into()),
            response: Some(command_lookup_topic_response::LookupType::Connect as i32),
            request_id: 2,
            authoritative: Some(true),
            proxy_through_service_url: Some(false),
            ..Default::default()
        },
        wire::COMMAND_LOOKUP_TOPIC_RESPONSE,
    );
    rt(
        CommandGetTopicsOfNamespace {
            request_id: 1,
            namespace: "public/default".into(),
            mode: Some(command_get_topics_of_namespace::Mode::All as i32),
            topics_pattern: Some("public/default/t.*".into()),
            topics_hash: Some("00000000".into()),
            properties: vec![kv("a", "b")],
        },
        wire::COMMAND_GET_TOPICS_OF_NAMESPACE,
    );
    rt(
        CommandGetTopicsOfNamespaceResponse {
            request_id: 1,
            topics: vec!["persistent://public/default/a".into()],
            filtered: Some(true),
            topics_hash: Some("c7559e98".into()),
            changed: Some(true),
        },
        wire::COMMAND_GET_TOPICS_OF_NAMESPACE_RESPONSE,
    );
    rt(
        CommandWatchTopicList {
            request_id: 1,
            watcher_id: 2,
            namespace: "n".into(),
            topics_pattern: "p".into(),
            topics_hash: None,
        },
        wire::COMMAND_WATCH_TOPIC_LIST,
    );
    rt(
        CommandWatchTopicListSuccess {
            request_id: 1,
            watcher_id: 2,
            topic: vec!["t".into()],
            topics_hash: "h".into(),
        },
        wire::COMMAND_WATCH_TOPIC_LIST_SUCCESS,
    );
    rt(
        CommandWatchTopicUpdate {
            watcher_id: 2,
            new_topics: vec!["a".into()],
            deleted_topics: vec!["b".into()],
            topics_hash: "h".into(),
        },
        wire::COMMAND_WATCH_TOPIC_UPDATE,
    );
    rt(
        CommandWatchTopicListClose {
            request_id: 1,
            watcher_id: 2,
        },
        wire::COMMAND_WATCH_TOPIC_LIST_CLOSE,
    );
}

#[test]
fn producer_and_reply_commands_round_trip() {
    rt(
        CommandProducer {
            topic: "t".into(),
            producer_id: 1,
            request_id: 2,
            producer_name: Some("p".into()),
            encrypted: Some(false),
            metadata: vec![kv("a", "b")],
            schema: Some(schema()),
            epoch: Some(0),
            user_provided_producer_name: Some(false),
            producer_access_mode: Some(ProducerAccessMode::ExclusiveWithFencing as i32),
            topic_epoch: Some(1),
            txn_enabled: Some(false),
            initial_subscription_name: Some("s".into()),
        },
        wire::COMMAND_PRODUCER,
    );
    rt(
        CommandSend {
            producer_id: 1,
            sequence_id: 2,
            num_messages: Some(3),
            highest_sequence_id: Some(4),
            is_chunk: Some(false),
            message_id: Some(id(1, 1)),
            ..Default::default()
        },
        wire::COMMAND_SEND,
    );
    rt(
        CommandSendReceipt {
            producer_id: 1,
            sequence_id: 2,
            message_id: Some(id(9, 0)),
            highest_sequence_id: Some(2),
        },
        wire::COMMAND_SEND_RECEIPT,
    );
    rt(
        CommandSendError {
            producer_id: 1,
            sequence_id: 2,
            error: ServerError::ChecksumError as i32,
            message: "bad checksum".into(),
        },
        wire::COMMAND_SEND_ERROR,
    );
    rt(
        CommandCloseProducer {
            producer_id: 1,
            request_id: 2,
            ..Default::default()
        },
        wire::COMMAND_CLOSE_PRODUCER,
    );
    rt(
        CommandProducerSuccess {
            request_id: 2,
            producer_name: "standalone-0-0".into(),
            last_sequence_id: Some(-1),
            schema_version: Some(Bytes::new()),
            topic_epoch: Some(1),
            producer_ready: Some(true),
        },
        wire::COMMAND_PRODUCER_SUCCESS,
    );
    rt(
        CommandSuccess {
            request_id: 1,
            schema: Some(schema()),
        },
        wire::COMMAND_SUCCESS,
    );
    rt(
        CommandError {
            request_id: 1,
            error: ServerError::TopicNotFound as i32,
            message: String::new(),
        },
        wire::COMMAND_ERROR,
    );
    rt(
        CommandGetSchema {
            request_id: 1,
            topic: "t".into(),
            schema_version: Some(Bytes::from_static(&[0])),
        },
        wire::COMMAND_GET_SCHEMA,
    );
    rt(
        CommandGetSchemaResponse {
            request_id: 1,
            error_code: Some(ServerError::TopicNotFound as i32),
            error_message: Some("no schema".into()),
            ..Default::default()
        },
        wire::COMMAND_GET_SCHEMA_RESPONSE,
    );
    rt(
        CommandGetOrCreateSchema {
            request_id: 1,
            topic: "t".into(),
            schema: schema(),
            producer_name: Some("p".into()),
        },
        wire::COMMAND_GET_OR_CREATE_SCHEMA,
    );
    rt(
        CommandGetOrCreateSchemaResponse {
            request_id: 1,
            schema_version: Some(Bytes::from_static(&[1])),
            ..Default::default()
        },
        wire::COMMAND_GET_OR_CREATE_SCHEMA_RESPONSE,
    );
}

/// Field numbers checked against bytes written by hand (tag = number << 3
/// | wire type), so that the .proto cannot drift from upstream unnoticed.
#[test]
fn field_numbers_match_upstream() {
    // CommandPartitionedTopicMetadata.metadata_auto_creation_enabled = 6:
    // tag 0x30 (varint).
    let m = CommandPartitionedTopicMetadata {
        topic: "t".into(),
        request_id: 1,
        metadata_auto_creation_enabled: Some(false),
        ..Default::default()
    };
    assert_eq!(
        m.encode_to_vec(),
        [0x0a, 0x01, b't', 0x10, 0x01, 0x30, 0x00]
    );
    // Absent, it defaults to true (PIP-344).
    let absent =
        CommandPartitionedTopicMetadata::decode(&[0x0a, 0x01, b't', 0x10, 0x01][..]).unwrap();
    assert!(absent.metadata_auto_creation_enabled());

    // FeatureFlags.supports_get_partitioned_metadata_without_auto_creation
    // = 5: tag 0x28.
    let f = FeatureFlags {
        supports_get_partitioned_metadata_without_auto_creation: Some(true),
        ..Default::default()
    };
    assert_eq!(f.encode_to_vec(), [0x28, 0x01]);
    // supports_topic_watchers = 4 (tag 0x20), supports_tc_metadata_discovery = 9 (0x48).
    let f = FeatureFlags {
        supports_topic_watchers: Some(true),
        supports_tc_metadata_discovery: Some(true),
        ..Default::default()
    };
    assert_eq!(f.encode_to_vec(), [0x20, 0x01, 0x48, 0x01]);

    // BaseCommand{type: PARTITIONED_METADATA (21), partitionMetadata (21)}:
    // tag 0x08 value 21, then field 21 length-delimited = key 0xaa 0x01.
    let base = crate::command(CommandPartitionedTopicMetadata {
        topic: "t".into(),
        request_id: 7,
        ..Default::default()
    });
    assert_eq!(
        base.encode_to_vec(),
        [0x08, 21, 0xaa, 0x01, 0x05, 0x0a, 0x01, b't', 0x10, 0x07]
    );
    // And its response is type/field 22 (key 0xb2 0x01).
    let base = crate::command(CommandPartitionedTopicMetadataResponse {
        request_id: 7,
        ..Default::default()
    });
    assert_eq!(
        base.encode_to_vec(),
        [0x08, 22, 0xb2, 0x01, 0x02, 0x10, 0x07]
    );

    // CommandConnect.feature_flags = 10 (0x52), CommandConnected.feature_flags = 4 (0x22),
    // CommandConnected.max_message_size = 3 (0x18).
    let c = CommandConnect {
        client_version: "v".into(),
        feature_flags: Some(FeatureFlags::default()),
        ..Default::default()
    };
    assert_eq!(c.encode_to_vec(), [0x0a, 0x01, b'v', 0x52, 0x00]);
    let c = CommandConnected {
        server_version: "s".into(),
        max_message_size: Some(1),
        feature_flags: Some(FeatureFlags::default()),
        ..Default::default()
    };
    assert_eq!(
        c.encode_to_vec(),
        [0x0a, 0x01, b's', 0x18, 0x01, 0x22, 0x00]
    );

    // MessageMetadata.num_messages_in_batch = 11 (0x58), ordering_key = 18 (0x92 0x01),
    // null_partition_key = 30 (0xf0 0x01).
    let m = MessageMetadata {
        producer_name: String::new(),
        num_messages_in_batch: Some(2),
        ordering_key: Some(Bytes::from_static(b"k")),
        null_partition_key: Some(true),
        ..Default::default()
    };
    assert_eq!(
        m.encode_to_vec(),
        [
            0x0a, 0x00, 0x10, 0x00, 0x18, 0x00, 0x58, 0x02, 0x92, 0x01, 0x01, b'k', 0xf0, 0x01,
            0x01
        ]
    );

    // CommandAck.request_id = 8 (0x40); CommandMessage.ack_set = 4 (0x20, unpacked as upstream).
    let a = CommandAck {
        consumer_id: 1,
        request_id: Some(3),
        ..Default::default()
    };
    assert_eq!(a.encode_to_vec(), [0x08, 0x01, 0x10, 0x00, 0x40, 0x03]);
    let m = CommandMessage {
        consumer_id: 1,
        message_id: id(2, 3),
        ack_set: vec![5],
        ..Default::default()
    };
    assert_eq!(
        m.encode_to_vec(),
        [0x08, 0x01, 0x12, 0x04, 0x08, 0x02, 0x10, 0x03, 0x20, 0x05]
    );

    // A signed -1 in the uint64 ledgerId travels as ten bytes (2^64 - 1).
    assert_eq!(id(u64::MAX, 0).encode_to_vec().len(), 1 + 10 + 2);
}

#[test]
fn required_fields_are_always_written() {
    // proto2 required fields are written even at their zero value, and an
    // empty CommandError message is still on the wire.
    let e = CommandError {
        request_id: 0,
        error: 0,
        message: String::new(),
    };
    assert_eq!(e.encode_to_vec(), [0x08, 0x00, 0x10, 0x00, 0x1a, 0x00]);
}

#[test]
fn enum_values_match_upstream() {
    assert_eq!(ProtocolVersion::V21 as i32, 21);
    assert_eq!(ServerError::ProducerFenced as i32, 25);
    assert_eq!(ServerError::NotAllowedError as i32, 22);
    assert_eq!(schema::Type::External as i32, 22);
    assert_eq!(CompressionType::Snappy as i32, 4);
    assert_eq!(command_subscribe::SubType::KeyShared as i32, 3);
    assert_eq!(base_command::Type::TopicMigrated as i32, 68);
    assert_eq!(base_command::Type::WatchTopicList as i32, 64);
    assert_eq!(base_command::Type::GetOrCreateSchemaResponse as i32, 40);
    assert_eq!(command_ack::ValidationError::DecryptionError as i32, 4);
}
