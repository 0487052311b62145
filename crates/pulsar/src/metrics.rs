//! What the Pulsar front end records per command in the broker's metrics:
//! the command by its protocol name (`SEND`, `SUBSCRIBE`, `LOOKUP`, …) and
//! the outcome, the `ServerError` name of an error answer
//! (`TopicNotFound`), else `ok`.

use magnetar_pulsar_wire::proto::base_command::Type;
use magnetar_pulsar_wire::proto::ServerError;
use magnetar_pulsar_wire::Command;

/// Command table slots: every command type below this is resolved once,
/// on its first use (the highest type defined is in the 60s).
pub const COMMAND_SLOTS: usize = 128;

/// The command's protocol name, e.g. `SEND`.
pub fn command_name(kind: Type) -> &'static str {
    kind.as_str_name()
}

/// The `ServerError` code an answer carries; `None` for an answer that is
/// not an error.
pub fn answer_error(answer: &Command) -> Option<i32> {
    match answer {
        Command::Error(e) => Some(e.error),
        Command::SendError(e) => Some(e.error),
        Command::AckResponse(a) => a.error,
        Command::ConsumerStatsResponse(s) => s.error_code,
        Command::PartitionedMetadataResponse(p) => p.error,
        Command::LookupResponse(l) => l.error,
        Command::GetSchemaResponse(s) => s.error_code,
        Command::GetOrCreateSchemaResponse(s) => s.error_code,
        _ => None,
    }
}

/// The name of a `ServerError` code (`UnknownError` for one the protocol
/// does not define).
pub fn error_name(code: i32) -> &'static str {
    ServerError::try_from(code).map_or("UnknownError", |e| e.as_str_name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use magnetar_pulsar_wire::proto::{
        CommandAckResponse, CommandError, CommandLookupTopicResponse, CommandSuccess,
    };

    #[test]
    fn error_answers_are_named_by_their_server_error() {
        let error = Command::from(CommandError {
            request_id: 1,
            error: ServerError::TopicNotFound as i32,
            message: String::new(),
        });
        assert_eq!(answer_error(&error).map(error_name), Some("TopicNotFound"));
        let lookup = Command::from(CommandLookupTopicResponse {
            error: Some(ServerError::ServiceNotReady as i32),
            ..Default::default()
        });
        assert_eq!(
            answer_error(&lookup).map(error_name),
            Some("ServiceNotReady")
        );
        assert_eq!(error_name(9999), "UnknownError");
        let ack = Command::from(CommandAckResponse::default());
        assert_eq!(answer_error(&ack), None, "an ack answer without an error");
        let ok = Command::from(CommandSuccess {
            request_id: 1,
            schema: None,
        });
        assert_eq!(answer_error(&ok), None);
        assert_eq!(command_name(Type::Send), "SEND");
        assert_eq!(
            command_name(Type::PartitionedMetadata),
            "PARTITIONED_METADATA"
        );
        assert!((Type::TopicMigrated as i32 as usize) < COMMAND_SLOTS);
    }
}
