//! `/admin/v2/namespaces/...`: a tenant's namespaces (list, create,
//! delete) and a namespace's retention policy (get, set, remove).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use broker::tenancy::Retention;
use serde::{Deserialize, Serialize};

use super::{json_body, namespace_name, no_content, path, query, run, tenant_name, ForceQuery};
use crate::error::ApiError;
use crate::state::AppState;

/// Upstream's `RetentionPolicies` as JSON.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct RetentionJson {
    #[serde(rename = "retentionTimeInMinutes", default)]
    time_in_minutes: i64,
    #[serde(rename = "retentionSizeInMB", default)]
    size_in_mb: i64,
}

impl From<RetentionJson> for Retention {
    fn from(j: RetentionJson) -> Retention {
        Retention {
            time_in_minutes: j.time_in_minutes,
            size_in_mb: j.size_in_mb,
        }
    }
}

/// The parts of upstream's `Policies` a namespace is created with here;
/// the other fields are accepted and ignored.
#[derive(Debug, Default, Deserialize)]
pub struct PoliciesJson {
    #[serde(default)]
    retention_policies: Option<RetentionJson>,
}

/// `GET /admin/v2/namespaces/{tenant}`: `["tenant/ns", ...]`.
pub async fn list(
    State(state): State<Arc<AppState>>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Json<Vec<String>>, ApiError> {
    let tenant = path(p)?;
    tenant_name(&tenant)?;
    let names = state
        .broker
        .namespaces(&tenant)
        .map_err(super::broker_error)?;
    Ok(Json(names.iter().map(|n| n.to_string()).collect()))
}

/// `PUT /admin/v2/namespaces/{tenant}/{namespace}`, with an optional
/// `Policies` body: 204, 404 without the tenant, 409 if it exists.
pub async fn create(
    State(state): State<Arc<AppState>>,
    p: Result<Path<(String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let (tenant, namespace) = path(p)?;
    let ns = namespace_name(&tenant, &namespace)?;
    let policies = json_body::<PoliciesJson>(body)?.unwrap_or_default();
    let retention = policies.retention_policies.map(Retention::from);
    let broker = state.broker.clone();
    run(move || broker.create_namespace(&ns, retention)).await?;
    Ok(no_content())
}

/// `DELETE /admin/v2/namespaces/{tenant}/{namespace}?force=`: 409 while
/// it has topics, unless `force` (which deletes them).
pub async fn delete(
    State(state): State<Arc<AppState>>,
    p: Result<Path<(String, String)>, PathRejection>,
    q: Result<Query<ForceQuery>, QueryRejection>,
) -> Result<StatusCode, ApiError> {
    let (tenant, namespace) = path(p)?;
    let ns = namespace_name(&tenant, &namespace)?;
    let force = query(q)?.force;
    let broker = state.broker.clone();
    run(move || broker.delete_namespace(&ns, force)).await?;
    Ok(no_content())
}

/// `GET /admin/v2/namespaces/{tenant}/{namespace}/retention`: the policy,
/// or 204 without a body when the namespace sets none (upstream answers
/// its null policy so).
pub async fn get_retention(
    State(state): State<Arc<AppState>>,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let (tenant, namespace) = path(p)?;
    let ns = namespace_name(&tenant, &namespace)?;
    let retention = state
        .broker
        .namespace_retention(&ns)
        .map_err(super::broker_error)?;
    Ok(match retention {
        Some(r) => Json(RetentionJson {
            time_in_minutes: r.time_in_minutes,
            size_in_mb: r.size_in_mb,
        })
        .into_response(),
        None => no_content().into_response(),
    })
}

/// `POST /admin/v2/namespaces/{tenant}/{namespace}/retention` with
/// `{"retentionTimeInMinutes": M, "retentionSizeInMB": S}`: 204; 412 for
/// a policy upstream refuses.
pub async fn set_retention(
    State(state): State<Arc<AppState>>,
    p: Result<Path<(String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let (tenant, namespace) = path(p)?;
    let ns = namespace_name(&tenant, &namespace)?;
    // An empty body is refused rather than read as "remove" (that is
    // DELETE), so a forgotten `-d` changes nothing.
    let retention: Retention = json_body::<RetentionJson>(body)?
        .ok_or_else(|| ApiError::bad_request("the body must be a RetentionPolicies object"))?
        .into();
    let broker = state.broker.clone();
    run(move || broker.set_namespace_retention(&ns, Some(retention))).await?;
    Ok(no_content())
}

/// `DELETE /admin/v2/namespaces/{tenant}/{namespace}/retention`: back to
/// the broker's `log.retention.*` for the namespace's topics.
pub async fn remove_retention(
    State(state): State<Arc<AppState>>,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let (tenant, namespace) = path(p)?;
    let ns = namespace_name(&tenant, &namespace)?;
    let broker = state.broker.clone();
    run(move || broker.set_namespace_retention(&ns, None)).await?;
    Ok(no_content())
}
