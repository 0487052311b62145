//! Who an HTTP request is and what it may do. With
//! `http.authentication.enabled`, every path but the health checks and the
//! OpenAPI document needs credentials: `Authorization: Bearer <JWT>`
//! (checked against the token keys, principal `User:<sub>`) or
//! `Authorization: Basic` (a user's password checked against its stored
//! SCRAM credential, principal `User:<name>`). Missing or bad credentials
//! are answered 401 (bad ones after `connection.failed.authentication.delay.ms`);
//! a request the authorizer refuses is answered 403. A request without
//! credentials (every request without authentication) is
//! `http.anonymous.principal`; unset, it is `User:ANONYMOUS` only when no
//! authorizer is configured and answered 401 otherwise, so that it never
//! inherits what a Kafka listener's `User:ANONYMOUS` may do.
//!
//! Each route's operation is in [`rule`]: reads of a topic need Describe
//! (Read to peek at messages), creating one Create, growing it Alter,
//! deleting it Delete; subscription changes Read on the topic and on the
//! group named after the subscription (Delete on it to delete it);
//! tenants, namespaces and metrics Describe or Alter on the cluster;
//! listings show only topics the caller may describe.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, MatchedPath, RawPathParams, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use broker::config::HttpAuthMethod;
use broker::log_limit::RateLimiter;
use broker::security::acl::{Access, Operation, Requester, ResourceType, CLUSTER_NAME};
use broker::security::{plain, Principal, ScramMechanism};
use broker::warn_limited;

use crate::error::ApiError;
use crate::state::AppState;

pub use crate::security::{BasicCache, HttpSecurity};

static AUTH_FAILURE_LOG: RateLimiter = RateLimiter::new(10, Duration::from_secs(1));

/// What a request without credentials is told when no principal is given
/// to such requests and HTTP authentication is off (an authorizer is set).
const ANONYMOUS_REFUSED: &str = "authentication required: this broker has an authorizer and HTTP \
     requests must be authenticated; the broker needs http.authentication.enabled=true (then send \
     Authorization: Bearer <token> or Basic <user:password>) or http.anonymous.principal naming \
     the principal of requests without credentials";

/// The caller of a request (a request extension every handler can read).
#[derive(Debug, Clone)]
pub struct Caller {
    /// Its principal.
    pub principal: Arc<Principal>,
    /// Its IP address.
    pub host: String,
}

impl Requester for Caller {
    fn principal(&self) -> &Principal {
        &self.principal
    }

    fn client_host(&self) -> &str {
        &self.host
    }
}

/// Paths anyone may ask for (load balancers, documentation).
fn open_path(path: &str) -> bool {
    path.starts_with("/health/") || path == "/openapi.json" || path == "/admin/v2/brokers/health"
}

fn unauthorized(reason: &str) -> Response {
    let mut r = ApiError::new(StatusCode::UNAUTHORIZED, reason).into_response();
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer, Basic realm=\"magnetar\""),
    );
    r
}

/// The 401 of a request without credentials when no principal is named
/// for such requests.
fn anonymous_refused(security: &HttpSecurity) -> Response {
    match security.methods {
        Some(_) => unauthorized("authentication required"),
        None => ApiError::new(StatusCode::UNAUTHORIZED, ANONYMOUS_REFUSED).into_response(),
    }
}

/// Authenticates the request and records its [`Caller`].
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    mut req: Request,
    next: Next,
) -> Response {
    let host = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_canonical().to_string())
        .unwrap_or_default();
    let security = &state.config.security;
    let principal = match &security.methods {
        _ if open_path(req.uri().path()) => Arc::new(Principal::anonymous()),
        None => match &security.anonymous {
            Some(p) => p.clone(),
            None => return anonymous_refused(security),
        },
        Some(methods) => {
            let header = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            match header {
                None => match &security.anonymous {
                    Some(p) => p.clone(),
                    None => return anonymous_refused(security),
                },
                Some(header) => match credentials_of(&state, methods, &header).await {
                    Ok(p) => Arc::new(p),
                    Err(detail) => {
                        warn_limited!(AUTH_FAILURE_LOG, peer = %host, "HTTP authentication failed: {detail}");
                        tokio::time::sleep(security.failed_delay).await;
                        return unauthorized("invalid credentials");
                    }
                },
            }
        }
    };
    req.extensions_mut().insert(Caller { principal, host });
    next.run(req).await
}

/// The principal an Authorization header proves, or why not (for the log).
async fn credentials_of(
    state: &Arc<AppState>,
    methods: &[HttpAuthMethod],
    header: &str,
) -> Result<Principal, String> {
    let (scheme, value) = header.split_once(' ').unwrap_or((header, ""));
    let value = value.trim();
    if scheme.eq_ignore_ascii_case("bearer") && methods.contains(&HttpAuthMethod::Bearer) {
        let tokens = state
            .config
            .security
            .tokens
            .as_ref()
            .ok_or("a bearer token, but no token key is configured")?;
        return tokens
            .validate(value, broker::now_ms().0)
            .map(|t| t.principal)
            .map_err(|e| e.log_detail());
    }
    if scheme.eq_ignore_ascii_case("basic") && methods.contains(&HttpAuthMethod::Basic) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value)
            .map_err(|_| "Basic credentials are not base64".to_string())?;
        let text = String::from_utf8(decoded).map_err(|_| "Basic credentials are not UTF-8")?;
        let (user, password) = text
            .split_once(':')
            .ok_or("Basic credentials are not user:password")?;
        if user.is_empty() || password.is_empty() {
            return Err("Basic credentials with an empty user or password".into());
        }
        let cache = &state.config.security.basic;
        // The strongest stored credential decides, as for SASL PLAIN.
        let stored = [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .find_map(|m| state.broker.scram_credential(user, m))
            .map(|c| c.stored_key)
            .unwrap_or_default();
        let tag = cache.tag(user, password, &stored);
        if !stored.is_empty() && cache.known(&tag) {
            return Ok(Principal::user(user));
        }
        let _permit = cache
            .derivations
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        let broker = state.broker.clone();
        let (user, password) = (user.to_string(), password.to_string());
        // The key derivation is slow on purpose: off the async workers.
        let verified = tokio::task::spawn_blocking(move || {
            let lookup = |u: &str, m| broker.scram_credential(u, m);
            plain::verify_password(&user, password.as_bytes(), &lookup)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.log_detail())?;
        cache.remember(tag);
        return Ok(verified);
    }
    Err(format!(
        "credentials of scheme {scheme:?}, which http.authentication.methods does not accept"
    ))
}

/// What one route needs.
enum Rule {
    /// Nothing (health, documentation).
    Open,
    /// An operation on the cluster.
    Cluster(Operation),
    /// An operation on the route's topic.
    Topic(Operation),
    /// Creating the route's topic.
    CreateTopic,
    /// Read on the topic and `op` on the subscription's group.
    Subscription(Operation),
    /// The handler filters what it lists.
    Listing,
}

/// The rule of a route, by its method and path template.
fn rule(method: &Method, path: &str) -> Rule {
    use Operation::*;
    if open_path(path) {
        return Rule::Open;
    }
    if path == "/metrics" {
        return Rule::Cluster(Describe);
    }
    if path.contains("/subscription/") {
        return match (method, path.ends_with("{subscription}")) {
            (&Method::DELETE, true) => Rule::Subscription(Delete),
            _ if path.contains("/position/") => Rule::Topic(Read),
            _ => Rule::Subscription(Read),
        };
    }
    if path.starts_with("/lookup/")
        || path.ends_with("/stats")
        || path.ends_with("/partitioned-stats")
        || path.ends_with("/subscriptions")
    {
        return Rule::Topic(Describe);
    }
    if path.ends_with("/topics") || path.ends_with("{namespace}/partitioned") {
        return Rule::Listing;
    }
    if path.starts_with("/admin/v2/clusters")
        || path.starts_with("/admin/v2/tenants")
        || path.starts_with("/admin/v2/namespaces")
    {
        return Rule::Cluster(if method == Method::GET {
            Describe
        } else {
            Alter
        });
    }
    if path == "/admin/v2/{domain}/{tenant}/{namespace}" {
        return Rule::Listing;
    }
    if path.ends_with("{topic}") || path.ends_with("{topic}/partitions") {
        return match *method {
            // PIP-344's metadata checks Describe (and Create) itself.
            Method::GET => Rule::Listing,
            Method::PUT => Rule::CreateTopic,
            Method::POST => Rule::Topic(Alter),
            _ => Rule::Topic(Delete),
        };
    }
    // Every route has a rule; an unknown one is for super users only.
    Rule::Cluster(Alter)
}

/// Checks the matched route's rule for the request's caller; 403 if the
/// authorizer refuses.
pub async fn authorize(
    State(state): State<Arc<AppState>>,
    matched: Option<MatchedPath>,
    params: RawPathParams,
    req: Request,
    next: Next,
) -> Response {
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "no caller").into_response();
    };
    let Some(matched) = matched else {
        return next.run(req).await;
    };
    let access = Access::of(&state.broker, &caller);
    if !access.checks() {
        return next.run(req).await;
    }
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
            .unwrap_or_default()
    };
    let topic = || -> Result<String, ApiError> {
        let domain = param("domain");
        let domain = if domain.is_empty() {
            "persistent"
        } else {
            domain.as_str()
        };
        let name = format!(
            "{domain}://{}/{}/{}",
            param("tenant"),
            param("namespace"),
            param("topic")
        );
        let parsed = magnetar_pulsar_core::topics::parse(&state.broker, &name)?;
        Ok(parsed.kafka_name().to_string())
    };
    let allowed = match rule(req.method(), matched.as_str()) {
        Rule::Open | Rule::Listing => Ok(true),
        Rule::Cluster(op) => Ok(access.may(op, ResourceType::Cluster, CLUSTER_NAME)),
        Rule::Topic(op) => topic().map(|t| access.topic(op, &t)),
        Rule::CreateTopic => topic().map(|t| access.may_create_topic(&t)),
        Rule::Subscription(op) => topic()
            .map(|t| access.topic(Operation::Read, &t) && access.group(op, &param("subscription"))),
    };
    match allowed {
        Ok(true) => next.run(req).await,
        Ok(false) => {
            tracing::debug!(principal = %caller.principal, path = %req.uri().path(), "HTTP request denied");
            ApiError::new(
                StatusCode::FORBIDDEN,
                format!("{} is not authorized for this request", caller.principal),
            )
            .into_response()
        }
        Err(e) => e.into_response(),
    }
}
