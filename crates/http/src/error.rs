//! Errors as upstream Pulsar's REST API answers them: a status code and
//! `{"reason": "..."}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use magnetar_pulsar::error::PulsarError;
use magnetar_pulsar_wire::proto::ServerError;

/// A refused or failed request.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for the caller.
    pub reason: String,
}

impl ApiError {
    /// An error with `status` and `reason`.
    pub fn new(status: StatusCode, reason: impl Into<String>) -> ApiError {
        ApiError {
            status,
            reason: reason.into(),
        }
    }

    /// 404 with `reason`.
    pub fn not_found(reason: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, reason)
    }

    /// 400 with `reason`.
    pub fn bad_request(reason: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, reason)
    }
}

impl From<PulsarError> for ApiError {
    fn from(e: PulsarError) -> Self {
        let status = match e.code {
            ServerError::TopicNotFound | ServerError::MetadataError => StatusCode::NOT_FOUND,
            ServerError::InvalidTopicName => StatusCode::PRECONDITION_FAILED,
            ServerError::NotAllowedError => StatusCode::CONFLICT,
            ServerError::PersistenceError | ServerError::UnknownError => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ServerError::ServiceNotReady => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_REQUEST,
        };
        // Upstream's not-found answers carry their reason.
        let reason = if e.message.is_empty() && e.code == ServerError::TopicNotFound {
            "Topic not found".to_string()
        } else {
            e.message
        };
        ApiError::new(status, reason)
    }
}

impl From<broker::Error> for ApiError {
    fn from(e: broker::Error) -> Self {
        use broker::Error as E;
        let status = match &e {
            E::UnknownTopic(_)
            | E::UnknownTopicId(_)
            | E::UnknownPartition { .. }
            | E::SubscriptionNotFound(_)
            | E::ConsumerNotFound(_) => StatusCode::NOT_FOUND,
            E::TopicExists(_) | E::SubscriptionExists(_) => StatusCode::CONFLICT,
            E::InvalidTopic(_) | E::ConsumerBusy(_) | E::SubscriptionTypeMismatch { .. } => {
                StatusCode::PRECONDITION_FAILED
            }
            E::InvalidPartitions(_)
            | E::InvalidRequest(_)
            | E::InvalidConfig { .. }
            | E::Config { .. }
            | E::InvalidReplicationFactor(_) => StatusCode::BAD_REQUEST,
            E::InternalTopic(_) | E::NotAllowed(_) => StatusCode::FORBIDDEN,
            E::Storage { .. }
            | E::DataDir(_)
            | E::MetadataIo { .. }
            | E::MetadataCorrupt { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "reason": self.reason })),
        )
            .into_response()
    }
}
