//! `GET /metrics`: the broker's metrics (`broker::metrics`) in the
//! OpenMetrics text format that Prometheus scrapes.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;

use crate::error::ApiError;
use crate::state::{blocking, AppState};

/// `GET /metrics`. Sampling walks every partition, group and
/// subscription, so it runs on the blocking pool.
pub async fn metrics(State(state): State<Arc<AppState>>) -> Result<impl IntoResponse, ApiError> {
    let broker = state.broker.clone();
    let text = blocking(move || broker::metrics::encode(&broker))
        .await?
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot encode metrics: {e}"),
            )
        })?;
    Ok((
        [(header::CONTENT_TYPE, broker::metrics::CONTENT_TYPE)],
        text,
    ))
}
