//! [`Command`]: one variant per command, convertible to and from the
//! [`BaseCommand`] envelope with its `type` kept consistent.

use crate::error::FrameError;
use crate::proto::{self, base_command::Type, BaseCommand};

macro_rules! commands {
    ($( $variant:ident($ty:ident) => $field:ident, )*) => {
        /// One Pulsar command, as carried by a [`BaseCommand`] whose `type`
        /// names it. Variants are named like `BaseCommand.Type` values.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Command {
            $(
                #[doc = concat!("`", stringify!($ty), "` (`BaseCommand.", stringify!($field), "`).")]
                $variant(proto::$ty),
            )*
        }

        $(
            impl From<proto::$ty> for Command {
                fn from(c: proto::$ty) -> Self {
                    Command::$variant(c)
                }
            }
        )*

        impl Command {
            /// The `BaseCommand.type` value for this command.
            pub fn kind(&self) -> Type {
                match self {
                    $( Command::$variant(_) => Type::$variant, )*
                }
            }

            /// Wraps the command in a [`BaseCommand`] with `type` set.
            pub fn into_base(self) -> BaseCommand {
                let mut base = BaseCommand { r#type: self.kind() as i32, ..Default::default() };
                match self {
                    $( Command::$variant(c) => base.$field = Some(c), )*
                }
                base
            }
        }

        impl TryFrom<BaseCommand> for Command {
            type Error = FrameError;

            /// Takes out the command `type` names; an unknown type or an
            /// absent command is an error.
            fn try_from(base: BaseCommand) -> Result<Self, FrameError> {
                let kind = Type::try_from(base.r#type)
                    .map_err(|_| FrameError::UnknownCommandType(base.r#type))?;
                match kind {
                    $(
                        Type::$variant => base.$field.map(Command::$variant).ok_or(
                            FrameError::MissingRequiredField {
                                message: "BaseCommand",
                                field: stringify!($field),
                            },
                        ),
                    )*
                }
            }
        }

        /// Whether `base` carries the command its `type` names (an unknown
        /// type counts as carrying it: there is nothing to check).
        pub(crate) fn check_consistent(base: &BaseCommand) -> Result<(), FrameError> {
            let Ok(kind) = Type::try_from(base.r#type) else {
                return Ok(());
            };
            let present = match kind {
                $( Type::$variant => base.$field.is_some(), )*
            };
            if present {
                Ok(())
            } else {
                Err(FrameError::MissingRequiredField {
                    message: "BaseCommand",
                    field: field_name(kind),
                })
            }
        }

        /// The `BaseCommand` field that carries commands of `kind`.
        pub(crate) fn field_name(kind: Type) -> &'static str {
            match kind {
                $( Type::$variant => stringify!($field), )*
            }
        }
    };
}

commands! {
    Connect(CommandConnect) => connect,
    Connected(CommandConnected) => connected,
    Subscribe(CommandSubscribe) => subscribe,
    Producer(CommandProducer) => producer,
    Send(CommandSend) => send,
    SendReceipt(CommandSendReceipt) => send_receipt,
    SendError(CommandSendError) => send_error,
    Message(CommandMessage) => message,
    Ack(CommandAck) => ack,
    Flow(CommandFlow) => flow,
    Unsubscribe(CommandUnsubscribe) => unsubscribe,
    Success(CommandSuccess) => success,
    Error(CommandError) => error,
    CloseProducer(CommandCloseProducer) => close_producer,
    CloseConsumer(CommandCloseConsumer) => close_consumer,
    ProducerSuccess(CommandProducerSuccess) => producer_success,
    Ping(CommandPing) => ping,
    Pong(CommandPong) => pong,
    RedeliverUnacknowledgedMessages(CommandRedeliverUnacknowledgedMessages) => redeliver_unacknowledged_messages,
    PartitionedMetadata(CommandPartitionedTopicMetadata) => partition_metadata,
    PartitionedMetadataResponse(CommandPartitionedTopicMetadataResponse) => partition_metadata_response,
    Lookup(CommandLookupTopic) => lookup_topic,
    LookupResponse(CommandLookupTopicResponse) => lookup_topic_response,
    ConsumerStats(CommandConsumerStats) => consumer_stats,
    ConsumerStatsResponse(CommandConsumerStatsResponse) => consumer_stats_response,
    ReachedEndOfTopic(CommandReachedEndOfTopic) => reached_end_of_topic,
    Seek(CommandSeek) => seek,
    GetLastMessageId(CommandGetLastMessageId) => get_last_message_id,
    GetLastMessageIdResponse(CommandGetLastMessageIdResponse) => get_last_message_id_response,
    ActiveConsumerChange(CommandActiveConsumerChange) => active_consumer_change,
    GetTopicsOfNamespace(CommandGetTopicsOfNamespace) => get_topics_of_namespace,
    GetTopicsOfNamespaceResponse(CommandGetTopicsOfNamespaceResponse) => get_topics_of_namespace_response,
    GetSchema(CommandGetSchema) => get_schema,
    GetSchemaResponse(CommandGetSchemaResponse) => get_schema_response,
    AuthChallenge(CommandAuthChallenge) => auth_challenge,
    AuthResponse(CommandAuthResponse) => auth_response,
    AckResponse(CommandAckResponse) => ack_response,
    GetOrCreateSchema(CommandGetOrCreateSchema) => get_or_create_schema,
    GetOrCreateSchemaResponse(CommandGetOrCreateSchemaResponse) => get_or_create_schema_response,
    WatchTopicList(CommandWatchTopicList) => watch_topic_list,
    WatchTopicListSuccess(CommandWatchTopicListSuccess) => watch_topic_list_success,
    WatchTopicUpdate(CommandWatchTopicUpdate) => watch_topic_update,
    WatchTopicListClose(CommandWatchTopicListClose) => watch_topic_list_close,
    TopicMigrated(CommandTopicMigrated) => topic_migrated,
}

/// Wraps any command in a [`BaseCommand`] with the matching `type`, e.g.
/// `command(CommandPing {})` or `command(CommandFlow { consumer_id: 1,
/// message_permits: 1000 })`.
pub fn command(cmd: impl Into<Command>) -> BaseCommand {
    cmd.into().into_base()
}

impl From<Command> for BaseCommand {
    fn from(c: Command) -> Self {
        c.into_base()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::*;

    #[test]
    fn command_sets_type_and_field() {
        let base = command(CommandFlow {
            consumer_id: 3,
            message_permits: 1000,
        });
        assert_eq!(base.r#type(), Type::Flow);
        assert_eq!(base.flow.as_ref().unwrap().message_permits, 1000);
        assert_eq!(Command::try_from(base).unwrap().kind(), Type::Flow);
    }

    #[test]
    fn every_type_round_trips_through_base() {
        // Every declared type: its field number equals its value, and the
        // envelope converts back to the same variant.
        for value in 0..128 {
            let Ok(kind) = Type::try_from(value) else {
                continue;
            };
            let mut base = BaseCommand {
                r#type: value,
                ..Default::default()
            };
            assert!(
                check_consistent(&base).is_err(),
                "{kind:?} without its command"
            );
            let err = Command::try_from(base.clone()).unwrap_err();
            assert_eq!(
                err,
                FrameError::MissingRequiredField {
                    message: "BaseCommand",
                    field: field_name(kind)
                }
            );
            // Set the field by decoding an empty sub-message at number = value.
            let mut bytes = prost::Message::encode_to_vec(&base);
            prost::encoding::encode_key(
                value as u32,
                prost::encoding::WireType::LengthDelimited,
                &mut bytes,
            );
            bytes.push(0);
            base = prost::Message::decode(&bytes[..]).unwrap();
            check_consistent(&base).unwrap();
            let cmd = Command::try_from(base.clone()).unwrap();
            assert_eq!(cmd.kind(), kind);
            assert_eq!(cmd.into_base(), base);
        }
    }

    #[test]
    fn unknown_type_is_reported() {
        let base = BaseCommand {
            r#type: 50,
            ..Default::default()
        };
        assert_eq!(
            Command::try_from(base.clone()).unwrap_err(),
            FrameError::UnknownCommandType(50)
        );
        assert!(check_consistent(&base).is_ok());
    }
}
