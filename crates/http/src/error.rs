//! Errors as upstream Pulsar's REST API answers them: a status code and
//! `{"reason": "..."}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use magnetar_pulsar_core::error::PulsarError;
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

impl From<broker::coordinator_error::CoordError> for ApiError {
    /// As the broker error it is.
    fn from(e: broker::coordinator_error::CoordError) -> Self {
        ApiError::from(broker::Error::from(e))
    }
}

impl From<broker::Error> for ApiError {
    /// The status and reason upstream answers for the same refusal (its
    /// reason texts where it has fixed ones).
    fn from(e: broker::Error) -> Self {
        use broker::Error as E;
        let fixed = |status: StatusCode, reason: &str| ApiError::new(status, reason);
        match &e {
            E::TenantNotFound(_) => fixed(StatusCode::NOT_FOUND, "Tenant does not exist"),
            E::TenantExists(_) => fixed(StatusCode::CONFLICT, "Tenant already exists"),
            E::TenantNotEmpty(_) => fixed(
                StatusCode::CONFLICT,
                "The tenant still has active namespaces",
            ),
            E::NamespaceNotFound(_) => fixed(StatusCode::NOT_FOUND, "Namespace does not exist"),
            E::NamespaceExists(_) => fixed(StatusCode::CONFLICT, "Namespace already exists"),
            E::NamespaceNotEmpty(_) => {
                fixed(StatusCode::CONFLICT, "Cannot delete non empty namespace")
            }
            E::TopicExists(_) => fixed(StatusCode::CONFLICT, "This topic already exists"),
            E::TopicBusy(_) => fixed(
                StatusCode::PRECONDITION_FAILED,
                "Topic has active producers/subscriptions",
            ),
            E::SubscriptionExists(_) => fixed(
                StatusCode::CONFLICT,
                "Subscription already exists for topic",
            ),
            E::SubscriptionNotFound(_) => fixed(StatusCode::NOT_FOUND, "Subscription not found"),
            E::UnknownTopic(_)
            | E::UnknownTopicId(_)
            | E::UnknownPartition { .. }
            | E::ConsumerNotFound(_) => ApiError::not_found(e.to_string()),
            E::InvalidTopic(_) => ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                format!("Topic name is not valid: {e}"),
            ),
            E::InvalidPolicy(_) | E::ConsumerBusy(_) | E::SubscriptionTypeMismatch { .. } => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, e.to_string())
            }
            E::Undeletable(_) | E::MetadataConflict(_) => {
                ApiError::new(StatusCode::CONFLICT, e.to_string())
            }
            E::InvalidPartitions(_) => ApiError::new(StatusCode::NOT_ACCEPTABLE, e.to_string()),
            E::ResourceNotFound(_) => ApiError::not_found(e.to_string()),
            E::DuplicateResource(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            E::UnacceptableCredential(_)
            | E::UnsupportedSaslMechanism(_)
            | E::SecurityDisabled(_) => ApiError::new(StatusCode::BAD_REQUEST, e.to_string()),
            E::Denied { .. } => ApiError::new(StatusCode::FORBIDDEN, e.to_string()),
            E::InvalidConfig { .. }
            | E::Config { .. }
            | E::InvalidRequest(_)
            | E::InternalTopic(_)
            | E::NotAllowed(_)
            | E::InvalidReplicationFactor(_)
            | E::InvalidReplicaAssignment(_)
            // Kafka transactions are not reachable over HTTP.
            | E::Transaction(_)
            | E::TransactionsUnavailable(_)
            | E::OperationNotAttempted => ApiError::bad_request(e.to_string()),
            // Requests about another broker's partitions are redirected
            // before they get here (see `crate::redirect`).
            E::PartitionNotHosted { .. } | E::Replication { .. } | E::ReplicationTimeout(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            E::Storage { .. }
            | E::DataDir(_)
            | E::MetadataIo { .. }
            | E::MetadataCorrupt { .. }
            | E::Startup(_) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
            E::NotEnoughReplicas { .. }
            | E::ControllerUnavailable(_)
            | E::CoordinatorUnavailable(_)
            | E::NotCoordinator(_)
            | E::CoordinatorLoadInProgress(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
        }
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

/// Gives every refusal upstream's shape: a 4xx or 5xx answered with
/// anything but JSON (a body over the limit, a timeout, an extractor's own
/// rejection) becomes `{"reason": <its text or the status's name>}`.
pub async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if json {
        return resp;
    }
    let body = axum::body::to_bytes(resp.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    let reason = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    ApiError::new(status, reason).into_response()
}
