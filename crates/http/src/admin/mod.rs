//! Upstream Pulsar's admin REST API (v2) for clusters, tenants, namespaces
//! and topics, over the broker's tenancy and topics (the same topics Kafka
//! clients see). Paths, bodies, status codes and reasons follow upstream's
//! `ClustersBase`, `TenantsBase`, `NamespacesBase` and
//! `PersistentTopicsBase`; the rules themselves are the broker's
//! (`broker::tenancy`).

pub mod namespaces;
pub mod tenants;
pub mod topics;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use model::pulsar_name::Namespace;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::state::AppState;

/// The broker's error as upstream's REST API answers it: its status and,
/// where upstream has one, its reason text.
pub(crate) fn broker_error(e: broker::Error) -> ApiError {
    ApiError::from(e)
}

/// Runs broker work that may write files on the blocking pool, its error
/// answered as upstream does.
pub(crate) async fn run<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, broker::Error> + Send + 'static,
) -> Result<T, ApiError> {
    crate::state::blocking(f).await?.map_err(broker_error)
}

/// A request body as JSON of any content type (`curl -d` sends form
/// encoding by default); `None` when the body is empty.
pub(crate) fn json_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<T>, ApiError> {
    let body = body.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(None);
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// A path's parameters, or 400.
pub(crate) fn path<T>(p: Result<Path<T>, PathRejection>) -> Result<T, ApiError> {
    p.map(|Path(p)| p)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

/// A query's parameters, or 400.
pub(crate) fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

/// `?force=` of the delete endpoints (other parameters upstream takes,
/// such as `authoritative`, are accepted and ignored).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ForceQuery {
    #[serde(default)]
    pub force: bool,
}

/// A tenant name from a path, or 412 as upstream.
pub(crate) fn tenant_name(tenant: &str) -> Result<(), ApiError> {
    Namespace::check_tenant(tenant).map_err(|e| {
        ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            format!("Tenant name is not valid: {e}"),
        )
    })
}

/// A namespace from a path, or 412 as upstream.
pub(crate) fn namespace_name(tenant: &str, namespace: &str) -> Result<Namespace, ApiError> {
    Namespace::new(tenant, namespace).map_err(|e| {
        ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            format!("Namespace name is not valid: {e}"),
        )
    })
}

/// 204, upstream's answer to a change that succeeded.
pub(crate) fn no_content() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// `GET /admin/v2/clusters`: this cluster's name.
pub async fn clusters(State(state): State<Arc<AppState>>) -> Json<Vec<String>> {
    Json(state.broker.clusters())
}

/// Upstream's `ClusterData`, the fields a single broker has.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterData {
    service_url: String,
    broker_service_url: String,
}

/// `GET /admin/v2/clusters/{cluster}`: this cluster's service URLs.
pub async fn cluster(
    State(state): State<Arc<AppState>>,
    p: Result<Path<String>, PathRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let name = path(p)?;
    if !state.broker.clusters().contains(&name) {
        return Err(ApiError::not_found("Cluster does not exist"));
    }
    Ok(Json(ClusterData {
        service_url: state.config.http_url.clone(),
        broker_service_url: state.config.pulsar_url.clone().unwrap_or_default(),
    }))
}
