//! proptest strategies shared by the property tests: random commands,
//! random payload frames, and the encoded bytes of either.

#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use magnetar_pulsar_wire::payload::{build_batch, build_single};
use magnetar_pulsar_wire::proto::*;
use magnetar_pulsar_wire::{command, encode_command, encode_payload_command, Command};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;
use proptest::strategy::Union;

pub const CODECS: [CompressionType; 5] = [
    CompressionType::None,
    CompressionType::Lz4,
    CompressionType::Zlib,
    CompressionType::Zstd,
    CompressionType::Snappy,
];

pub fn text() -> impl Strategy<Value = String> {
    "[a-z0-9/:_\\-\u{e9}]{0,12}"
}

pub fn blob() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..16).prop_map(Bytes::from)
}

pub fn kv() -> impl Strategy<Value = KeyValue> {
    (text(), text()).prop_map(|(key, value)| KeyValue { key, value })
}

pub fn message_id() -> impl Strategy<Value = MessageIdData> {
    (
        any::<u64>(),
        any::<u64>(),
        of(any::<i32>()),
        of(any::<i32>()),
        vec(any::<i64>(), 0..3),
    )
        .prop_map(
            |(ledger_id, entry_id, partition, batch_index, ack_set)| MessageIdData {
                ledger_id,
                entry_id,
                partition,
                batch_index,
                ack_set,
                ..Default::default()
            },
        )
}

fn boxed<T: Into<Command> + std::fmt::Debug + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Command> {
    s.prop_map(Into::into).boxed()
}

/// Random commands of most types, with random fields.
pub fn any_command() -> impl Strategy<Value = Command> {
    let id = || any::<u64>();
    Union::new(vec![
        boxed(
            (
                text(),
                of(0..=21i32),
                of(text()),
                any::<[Option<bool>; 3]>(),
            )
                .prop_map(|(client_version, protocol_version, auth_method_name, f)| {
                    CommandConnect {
                        client_version,
                        protocol_version,
                        auth_method_name,
                        feature_flags: Some(FeatureFlags {
                            supports_auth_refresh: f[0],
                            supports_broker_entry_metadata: f[1],
                            supports_get_partitioned_metadata_without_auto_creation: f[2],
                            ..Default::default()
                        }),
                        ..Default::default()
                    }
                }),
        ),
        boxed((text(), of(0..=21i32), of(any::<i32>())).prop_map(
            |(server_version, protocol_version, max_message_size)| CommandConnected {
                server_version,
                protocol_version,
                max_message_size,
                feature_flags: None,
            },
        )),
        boxed(
            (
                text(),
                text(),
                0..4i32,
                id(),
                id(),
                of(text()),
                of(message_id()),
                vec(kv(), 0..3),
                of(0..2i32),
            )
                .prop_map(
                    |(
                        topic,
                        subscription,
                        sub_type,
                        consumer_id,
                        request_id,
                        consumer_name,
                        start,
                        metadata,
                        pos,
                    )| {
                        CommandSubscribe {
                            topic,
                            subscription,
                            sub_type,
                            consumer_id,
                            request_id,
                            consumer_name,
                            start_message_id: start,
                            metadata,
                            initial_position: pos,
                            ..Default::default()
                        }
                    },
                ),
        ),
        boxed(
            (text(), id(), id(), of(text()), of(any::<bool>())).prop_map(
                |(topic, producer_id, request_id, producer_name, user_provided_producer_name)| {
                    CommandProducer {
                        topic,
                        producer_id,
                        request_id,
                        producer_name,
                        user_provided_producer_name,
                        ..Default::default()
                    }
                },
            ),
        ),
        boxed((id(), id(), of(any::<i32>()), of(any::<u64>())).prop_map(
            |(producer_id, sequence_id, num_messages, highest_sequence_id)| CommandSend {
                producer_id,
                sequence_id,
                num_messages,
                highest_sequence_id,
                ..Default::default()
            },
        )),
        boxed(
            (id(), id(), of(message_id())).prop_map(|(producer_id, sequence_id, message_id)| {
                CommandSendReceipt {
                    producer_id,
                    sequence_id,
                    message_id,
                    highest_sequence_id: None,
                }
            }),
        ),
        boxed((id(), id(), 0..26i32, text()).prop_map(
            |(producer_id, sequence_id, error, message)| CommandSendError {
                producer_id,
                sequence_id,
                error,
                message,
            },
        )),
        boxed((id(), message_id(), of(any::<u32>())).prop_map(
            |(consumer_id, message_id, redelivery_count)| CommandMessage {
                consumer_id,
                message_id,
                redelivery_count,
                ..Default::default()
            },
        )),
        boxed((id(), 0..2i32, vec(message_id(), 0..4), of(id())).prop_map(
            |(consumer_id, ack_type, message_id, request_id)| CommandAck {
                consumer_id,
                ack_type,
                message_id,
                request_id,
                ..Default::default()
            },
        )),
        boxed(
            (id(), any::<u32>()).prop_map(|(consumer_id, message_permits)| CommandFlow {
                consumer_id,
                message_permits,
            }),
        ),
        boxed(
            (id(), id(), of(any::<bool>())).prop_map(|(consumer_id, request_id, force)| {
                CommandUnsubscribe {
                    consumer_id,
                    request_id,
                    force,
                }
            }),
        ),
        boxed(id().prop_map(|request_id| CommandSuccess {
            request_id,
            schema: None,
        })),
        boxed(
            (id(), 0..26i32, text()).prop_map(|(request_id, error, message)| CommandError {
                request_id,
                error,
                message,
            }),
        ),
        boxed(
            (id(), id()).prop_map(|(producer_id, request_id)| CommandCloseProducer {
                producer_id,
                request_id,
                ..Default::default()
            }),
        ),
        boxed(
            (id(), id()).prop_map(|(consumer_id, request_id)| CommandCloseConsumer {
                consumer_id,
                request_id,
                ..Default::default()
            }),
        ),
        boxed((id(), text(), of(any::<i64>()), of(blob())).prop_map(
            |(request_id, producer_name, last_sequence_id, schema_version)| {
                CommandProducerSuccess {
                    request_id,
                    producer_name,
                    last_sequence_id,
                    schema_version,
                    ..Default::default()
                }
            },
        )),
        boxed(Just(CommandPing {})),
        boxed(Just(CommandPong {})),
        boxed(
            (id(), vec(message_id(), 0..3)).prop_map(|(consumer_id, message_ids)| {
                CommandRedeliverUnacknowledgedMessages {
                    consumer_id,
                    message_ids,
                    consumer_epoch: None,
                }
            }),
        ),
        boxed(
            (text(), id(), of(any::<bool>())).prop_map(|(topic, request_id, auto)| {
                CommandPartitionedTopicMetadata {
                    topic,
                    request_id,
                    metadata_auto_creation_enabled: auto,
                    ..Default::default()
                }
            }),
        ),
        boxed(
            (
                of(any::<u32>()),
                id(),
                of(0..2i32),
                of(0..26i32),
                of(text()),
            )
                .prop_map(|(partitions, request_id, response, error, message)| {
                    CommandPartitionedTopicMetadataResponse {
                        partitions,
                        request_id,
                        response,
                        error,
                        message,
                    }
                }),
        ),
        boxed((text(), id(), of(any::<bool>()), of(text())).prop_map(
            |(topic, request_id, authoritative, advertised_listener_name)| CommandLookupTopic {
                topic,
                request_id,
                authoritative,
                advertised_listener_name,
                ..Default::default()
            },
        )),
        boxed((of(text()), of(0..3i32), id(), of(any::<bool>())).prop_map(
            |(broker_service_url, response, request_id, authoritative)| {
                CommandLookupTopicResponse {
                    broker_service_url,
                    response,
                    request_id,
                    authoritative,
                    ..Default::default()
                }
            },
        )),
        boxed((id(), id(), of(message_id()), of(any::<u64>())).prop_map(
            |(consumer_id, request_id, message_id, message_publish_time)| CommandSeek {
                consumer_id,
                request_id,
                message_id,
                message_publish_time,
            },
        )),
        boxed(
            (id(), id()).prop_map(|(consumer_id, request_id)| CommandGetLastMessageId {
                consumer_id,
                request_id,
            }),
        ),
        boxed((message_id(), id(), of(message_id())).prop_map(
            |(last_message_id, request_id, mark)| CommandGetLastMessageIdResponse {
                last_message_id,
                request_id,
                consumer_mark_delete_position: mark,
            },
        )),
        boxed(
            (id(), of(any::<bool>())).prop_map(|(consumer_id, is_active)| {
                CommandActiveConsumerChange {
                    consumer_id,
                    is_active,
                }
            }),
        ),
        boxed((id(), text(), of(0..3i32), of(text())).prop_map(
            |(request_id, namespace, mode, topics_pattern)| CommandGetTopicsOfNamespace {
                request_id,
                namespace,
                mode,
                topics_pattern,
                ..Default::default()
            },
        )),
        boxed((id(), vec(text(), 0..4), of(any::<bool>())).prop_map(
            |(request_id, topics, changed)| CommandGetTopicsOfNamespaceResponse {
                request_id,
                topics,
                changed,
                ..Default::default()
            },
        )),
        boxed(
            (id(), id()).prop_map(|(request_id, consumer_id)| CommandConsumerStats {
                request_id,
                consumer_id,
            }),
        ),
        boxed(
            (
                id(),
                of(any::<f64>().prop_filter("NaN never equals itself", |f| !f.is_nan())),
            )
                .prop_map(|(request_id, msg_rate_out)| CommandConsumerStatsResponse {
                    request_id,
                    msg_rate_out,
                    ..Default::default()
                }),
        ),
        boxed(
            (id(), of(id()), of(0..26i32)).prop_map(|(consumer_id, request_id, error)| {
                CommandAckResponse {
                    consumer_id,
                    request_id,
                    error,
                    ..Default::default()
                }
            }),
        ),
        boxed(
            (id(), text(), of(blob())).prop_map(|(request_id, topic, schema_version)| {
                CommandGetSchema {
                    request_id,
                    topic,
                    schema_version,
                }
            }),
        ),
    ])
}

pub fn any_base_command() -> impl Strategy<Value = BaseCommand> {
    any_command().prop_map(command)
}

pub fn metadata() -> impl Strategy<Value = MessageMetadata> {
    (
        (
            text(),
            any::<u64>(),
            any::<u64>(),
            vec(kv(), 0..3),
            of(text()),
        ),
        (
            of(any::<u64>()),
            of(blob()),
            of(blob()),
            of(any::<bool>()),
            vec(text(), 0..2),
        ),
    )
        .prop_map(
            |(
                (producer_name, sequence_id, publish_time, properties, partition_key),
                (event_time, ordering_key, schema_version, null_value, replicate_to),
            )| MessageMetadata {
                producer_name,
                sequence_id,
                publish_time,
                properties,
                partition_key,
                event_time,
                ordering_key,
                schema_version,
                null_value,
                replicate_to,
                ..Default::default()
            },
        )
}

pub fn single_metadata() -> impl Strategy<Value = SingleMessageMetadata> {
    (
        vec(kv(), 0..2),
        of(text()),
        of(any::<u64>()),
        of(blob()),
        of(any::<u64>()),
        of(any::<bool>()),
    )
        .prop_map(
            |(properties, partition_key, event_time, ordering_key, sequence_id, null_value)| {
                SingleMessageMetadata {
                    properties,
                    partition_key,
                    event_time,
                    ordering_key,
                    sequence_id,
                    null_value,
                    // Set by the batch encoder.
                    payload_size: 0,
                    ..Default::default()
                }
            },
        )
}

/// What a payload frame carries before encoding.
#[derive(Debug, Clone)]
pub enum Body {
    Single(Vec<u8>),
    Batch(Vec<(SingleMessageMetadata, Vec<u8>)>),
}

/// A SEND or MESSAGE frame's parts, before compression.
#[derive(Debug, Clone)]
pub struct PayloadFrame {
    pub command: BaseCommand,
    pub metadata: MessageMetadata,
    pub codec: CompressionType,
    pub body: Body,
}

/// Random or compressible values of up to `max` bytes.
pub fn value(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..=max.min(300)),
        (any::<u8>(), 0..=max).prop_map(|(b, n)| vec![b; n]),
    ]
}

/// Payload frames with values of up to 2000 bytes.
pub fn payload_frame() -> impl Strategy<Value = PayloadFrame> {
    payload_frame_of(2000)
}

/// Payload frames with values of up to `max_value` bytes.
pub fn payload_frame_of(max_value: usize) -> impl Strategy<Value = PayloadFrame> {
    let cmd = prop_oneof![
        (any::<u64>(), any::<u64>()).prop_map(|(producer_id, sequence_id)| command(CommandSend {
            producer_id,
            sequence_id,
            ..Default::default()
        })),
        (any::<u64>(), message_id()).prop_map(|(consumer_id, message_id)| command(
            CommandMessage {
                consumer_id,
                message_id,
                ..Default::default()
            }
        )),
    ];
    let body = prop_oneof![
        value(max_value).prop_map(Body::Single),
        vec((single_metadata(), value(max_value)), 0..6).prop_map(Body::Batch),
    ];
    (cmd, metadata(), 0..CODECS.len(), body).prop_map(|(command, metadata, codec, body)| {
        PayloadFrame {
            command,
            metadata,
            codec: CODECS[codec],
            body,
        }
    })
}

impl PayloadFrame {
    /// Compresses the body, completes the metadata and encodes the frame.
    /// Returns the frame bytes and the metadata as encoded.
    pub fn encode(&self) -> (BytesMut, MessageMetadata) {
        let mut metadata = self.metadata.clone();
        let payload = match &self.body {
            Body::Single(v) => build_single(&mut metadata, v, self.codec).unwrap(),
            Body::Batch(messages) => {
                build_batch(&mut metadata, messages.clone(), self.codec).unwrap()
            }
        };
        let mut buf = BytesMut::new();
        encode_payload_command(&self.command, &metadata, &[payload], &mut buf).unwrap();
        (buf, metadata)
    }
}

pub fn encoded_command(cmd: &BaseCommand) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_command(cmd, &mut buf).unwrap();
    buf
}
