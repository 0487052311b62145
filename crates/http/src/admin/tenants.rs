//! `/admin/v2/tenants[/{tenant}]`: list, get, create (PUT), update (POST)
//! and delete tenants, with upstream's `TenantInfo` body
//! (`{"adminRoles": [...], "allowedClusters": [...]}`).

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use broker::tenancy::TenantInfo;
use serde::{Deserialize, Serialize};

use super::{json_body, no_content, path, query, run, tenant_name, ForceQuery};
use crate::error::ApiError;
use crate::state::AppState;

/// Upstream's `TenantInfo` as JSON.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantInfoJson {
    #[serde(default)]
    admin_roles: Option<BTreeSet<String>>,
    #[serde(default)]
    allowed_clusters: Option<BTreeSet<String>>,
}

impl From<TenantInfoJson> for TenantInfo {
    fn from(j: TenantInfoJson) -> TenantInfo {
        TenantInfo {
            admin_roles: j.admin_roles.unwrap_or_default(),
            allowed_clusters: j.allowed_clusters.unwrap_or_default(),
        }
    }
}

/// The body of a create or update; upstream refuses a missing one.
fn tenant_info(body: Result<Bytes, BytesRejection>) -> Result<TenantInfo, ApiError> {
    json_body::<TenantInfoJson>(body)?
        .map(TenantInfo::from)
        .ok_or_else(|| ApiError::new(StatusCode::PRECONDITION_FAILED, "TenantInfo is null"))
}

/// `GET /admin/v2/tenants`: every tenant, sorted.
pub async fn list(State(state): State<Arc<AppState>>) -> Json<Vec<String>> {
    Json(state.broker.tenant_names())
}

/// `GET /admin/v2/tenants/{tenant}`.
pub async fn get(
    State(state): State<Arc<AppState>>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Json<TenantInfoJson>, ApiError> {
    let tenant = path(p)?;
    let info = state.broker.tenant(&tenant).map_err(super::broker_error)?;
    Ok(Json(TenantInfoJson {
        admin_roles: Some(info.admin_roles),
        allowed_clusters: Some(info.allowed_clusters),
    }))
}

/// `PUT /admin/v2/tenants/{tenant}`: 204, 409 if it exists, 412 for a bad
/// name or clusters.
pub async fn create(
    State(state): State<Arc<AppState>>,
    p: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let tenant = path(p)?;
    tenant_name(&tenant)?;
    let info = tenant_info(body)?;
    let broker = state.broker.clone();
    run(move || broker.create_tenant(&tenant, info)).await?;
    Ok(no_content())
}

/// `POST /admin/v2/tenants/{tenant}`: replaces the tenant's info.
pub async fn update(
    State(state): State<Arc<AppState>>,
    p: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let tenant = path(p)?;
    let info = tenant_info(body)?;
    let broker = state.broker.clone();
    run(move || broker.update_tenant(&tenant, info)).await?;
    Ok(no_content())
}

/// `DELETE /admin/v2/tenants/{tenant}?force=`: 409 while it has
/// namespaces, unless `force` (which deletes them and their topics).
pub async fn delete(
    State(state): State<Arc<AppState>>,
    p: Result<Path<String>, PathRejection>,
    q: Result<Query<ForceQuery>, QueryRejection>,
) -> Result<StatusCode, ApiError> {
    let tenant = path(p)?;
    let force = query(q)?.force;
    let broker = state.broker.clone();
    run(move || broker.delete_tenant(&tenant, force)).await?;
    Ok(no_content())
}
