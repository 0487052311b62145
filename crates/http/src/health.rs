//! Health checks: `/health/live` (the process answers), `/health/ready`
//! (the logs are recovered and the listeners bound; 503 while stopping),
//! and upstream Pulsar's `/admin/v2/brokers/health`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;

use crate::error::ApiError;
use crate::state::AppState;

/// `GET /health/live`.
pub async fn live() -> &'static str {
    "ok"
}

/// `GET /health/ready` and `GET /admin/v2/brokers/health`.
pub async fn ready(State(state): State<Arc<AppState>>) -> Result<&'static str, ApiError> {
    if state.ready.load(Ordering::Relaxed) {
        Ok("ok")
    } else {
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the broker is shutting down",
        ))
    }
}
