//! Topic lookup and partition metadata over HTTP, as the Pulsar clients'
//! HTTP lookup service and `pulsar-admin` call them:
//!
//! - `GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}`: the
//!   broker serving the topic (always this one), honouring the same
//!   auto-creation policy as a binary lookup;
//! - `GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions
//!   ?checkAllowAutoCreation=`: PIP-344's REST side, `false` by default (a
//!   missing topic is created only when the parameter is true *and* the
//!   broker allows it, else 404);
//! - `GET /admin/v2/namespaces/{tenant}/{namespace}/topics?mode=`: the
//!   topics of a namespace (pattern consumers over HTTP).

use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::{blocking, AppState};

/// `{domain}/{tenant}/{namespace}/{topic}` of a topic path.
#[derive(Debug, Deserialize)]
pub struct TopicPath {
    domain: String,
    tenant: String,
    namespace: String,
    topic: String,
}

impl TopicPath {
    /// The full topic name; only persistent topics exist.
    fn name(&self) -> Result<String, ApiError> {
        match self.domain.as_str() {
            "persistent" => Ok(format!(
                "persistent://{}/{}/{}",
                self.tenant, self.namespace, self.topic
            )),
            "non-persistent" => Err(ApiError::not_found(
                "non-persistent topics are not supported by Magnetar",
            )),
            other => Err(ApiError::not_found(format!(
                "unknown topic domain {other:?} (persistent or non-persistent)"
            ))),
        }
    }
}

/// What a lookup answers (upstream's `LookupData`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupData {
    broker_url: String,
    broker_url_tls: String,
    http_url: String,
    http_url_tls: String,
    native_url: String,
}

/// `GET /lookup/v2/topic/...`.
pub async fn lookup(
    State(state): State<Arc<AppState>>,
    path: Result<Path<TopicPath>, PathRejection>,
) -> Result<Json<LookupData>, ApiError> {
    let Path(path) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let name = path.name()?;
    let c = &state.config;
    if c.pulsar_url.is_none() && c.pulsar_url_tls.is_none() {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "this broker has no Pulsar listener",
        ));
    }
    let broker = state.broker.clone();
    let own = magnetar_pulsar_core::lookup::ServiceUrls {
        plain: c.pulsar_url.clone(),
        tls: c.pulsar_url_tls.clone(),
    };
    // In a cluster: the broker leading the topic (its first partition).
    let (urls, owner) = blocking(move || {
        use magnetar_pulsar_core::lookup::{lookup_allowed, owner_node, urls_of};
        lookup_allowed(&broker, &name)?;
        // One reading of the metadata for every URL answered.
        let owner = owner_node(&broker, &name)?;
        let urls = urls_of(&broker, &own, owner, &name)?;
        // The owner's HTTP service URLs ("" for a listener it lacks).
        let http = owner.map(|node| {
            let url = |listener: &str, scheme: &str| {
                magnetar_pulsar_core::lookup::owner_endpoint(&broker, node, listener)
                    .map_or_else(String::new, |a| format!("{scheme}://{a}"))
            };
            (
                url(broker::cluster::HTTP_LISTENER, "http"),
                url(broker::cluster::HTTPS_LISTENER, "https"),
            )
        });
        Ok::<_, magnetar_pulsar_core::error::PulsarError>((urls, http))
    })
    .await??;
    let (http_url, http_url_tls) =
        owner.unwrap_or_else(|| (c.http_url.clone(), c.https_url.clone().unwrap_or_default()));
    let pulsar_url = urls.plain.clone().unwrap_or_default();
    Ok(Json(LookupData {
        broker_url: pulsar_url.clone(),
        broker_url_tls: urls.tls.clone().unwrap_or_default(),
        http_url,
        http_url_tls,
        native_url: if pulsar_url.is_empty() {
            urls.tls.unwrap_or_default()
        } else {
            pulsar_url
        },
    }))
}

/// Query of the partitions endpoint.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionsQuery {
    #[serde(default)]
    check_allow_auto_creation: bool,
}

/// `GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions`.
pub async fn partitions(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    path: Result<Path<TopicPath>, PathRejection>,
    query: Result<Query<PartitionsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(path) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let name = path.name()?;
    let broker = state.broker.clone();
    let n = blocking(move || {
        magnetar_pulsar_core::lookup::metadata_partitions(
            &broker,
            &caller,
            &name,
            query.check_allow_auto_creation,
        )
    })
    .await??;
    Ok(Json(serde_json::json!({ "partitions": n })))
}

/// Query of the namespace topics endpoint.
#[derive(Debug, Deserialize)]
pub struct TopicsQuery {
    #[serde(default)]
    mode: Option<String>,
}

/// `GET /admin/v2/namespaces/{tenant}/{namespace}/topics`.
pub async fn namespace_topics(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<TopicsQuery>, QueryRejection>,
) -> Result<Json<Vec<String>>, ApiError> {
    let Path((tenant, namespace)) = path.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let persistent = match query.mode.as_deref().unwrap_or("PERSISTENT") {
        "PERSISTENT" | "ALL" => true,
        "NON_PERSISTENT" => false,
        other => {
            return Err(ApiError::bad_request(format!(
                "mode {other:?} is not PERSISTENT, NON_PERSISTENT or ALL"
            )))
        }
    };
    let broker = state.broker.clone();
    let names = blocking(move || {
        magnetar_pulsar_core::lookup::namespace_topics(&broker, &caller, &tenant, &namespace, None)
    })
    .await??;
    Ok(Json(if persistent { names } else { Vec::new() }))
}
