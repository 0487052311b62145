//! Magnetar's HTTP service: the Pulsar clients' HTTP lookup paths, the
//! PIP-344 REST partition metadata, upstream's admin REST API for clusters,
//! tenants, namespaces, topics, topic stats and subscriptions, Prometheus
//! metrics and health checks, over the same broker the Kafka and Pulsar
//! listeners serve.
//!
//! Bodies are size-limited and requests time-limited; every refusal is a
//! 4xx (5xx only for the broker's own failures) with `{"reason": "..."}`,
//! as upstream Pulsar's REST API answers.

#![warn(missing_docs)]

mod admin;
pub mod auth;
mod error;
mod fanout;
mod forward;
mod health;
mod kafka_assignment;
mod lookup;
mod metrics;
mod redirect;
mod security;
mod state;
mod stats;
mod subscriptions;
mod topic;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{StatusCode, Uri};
use axum::routing::{on, MethodFilter};
use axum::Router;
use broker::Broker;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tracing::info;

pub use error::ApiError;
pub use state::{AppState, HttpConfig, MAX_BODY_BYTES, REQUEST_TIMEOUT};

/// Every route the service serves, as `(method, path)` in axum's path
/// syntax; the OpenAPI document must list exactly these (a test checks
/// both the document and that the router answers each one).
pub fn served_routes() -> Vec<(&'static str, &'static str)> {
    routes().served
}

/// The router and the list of what it serves, built together so neither
/// can forget a route.
struct Routes {
    router: Router<Arc<AppState>>,
    served: Vec<(&'static str, &'static str)>,
}

impl Routes {
    /// Adds `handler` for `method` on `path`.
    fn add<H, T>(mut self, method: &'static str, path: &'static str, handler: H) -> Routes
    where
        H: axum::handler::Handler<T, Arc<AppState>>,
        T: 'static,
    {
        let filter = match method {
            "GET" => MethodFilter::GET,
            "PUT" => MethodFilter::PUT,
            "POST" => MethodFilter::POST,
            "DELETE" => MethodFilter::DELETE,
            other => panic!("unsupported method {other}"),
        };
        self.router = self.router.route(path, on(filter, handler));
        self.served.push((method, path));
        self
    }
}

fn routes() -> Routes {
    Routes {
        router: Router::new(),
        served: Vec::new(),
    }
    .add("GET", "/openapi.json", openapi)
    .add("GET", "/health/live", health::live)
    .add("GET", "/health/ready", health::ready)
    .add("GET", "/admin/v2/brokers/health", health::ready)
    .add("GET", "/metrics", metrics::metrics)
    .add(
        "GET",
        "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
        lookup::lookup,
    )
    .add(
        "GET",
        "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions",
        lookup::partitions,
    )
    .add(
        "GET",
        "/admin/v2/namespaces/{tenant}/{namespace}/topics",
        lookup::namespace_topics,
    )
    .add("GET", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/stats", stats::stats)
    .add("GET", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/partitioned-stats", stats::partitioned_stats)
    .add("GET", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscriptions", subscriptions::list)
    .add("PUT", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}", subscriptions::create)
    .add("DELETE", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}", subscriptions::delete)
    .add(
        "POST",
        "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}/resetcursor/{number}",
        subscriptions::reset_to_time,
    )
    .add("POST", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}/resetcursor", subscriptions::reset_to_id)
    .add("POST", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}/skip_all", subscriptions::skip_all)
    .add("POST", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}/skip/{number}", subscriptions::skip_n)
    .add("GET", "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}/position/{number}", subscriptions::peek)
    .admin_routes()
}

impl Routes {
    /// Upstream's admin REST API: clusters, tenants, namespaces, topics.
    fn admin_routes(self) -> Routes {
        use admin::{namespaces, tenants, topics};
        const TOPIC: &str = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}";
        const PARTITIONS: &str = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions";
        const RETENTION: &str = "/admin/v2/namespaces/{tenant}/{namespace}/retention";
        self.add("GET", "/admin/v2/clusters", admin::clusters)
            .add("GET", "/admin/v2/clusters/{cluster}", admin::cluster)
            .add("GET", "/admin/v2/tenants", tenants::list)
            .add("GET", "/admin/v2/tenants/{tenant}", tenants::get)
            .add("PUT", "/admin/v2/tenants/{tenant}", tenants::create)
            .add("POST", "/admin/v2/tenants/{tenant}", tenants::update)
            .add("DELETE", "/admin/v2/tenants/{tenant}", tenants::delete)
            .add("GET", "/admin/v2/namespaces/{tenant}", namespaces::list)
            .add(
                "PUT",
                "/admin/v2/namespaces/{tenant}/{namespace}",
                namespaces::create,
            )
            .add(
                "DELETE",
                "/admin/v2/namespaces/{tenant}/{namespace}",
                namespaces::delete,
            )
            .add("GET", RETENTION, namespaces::get_retention)
            .add("POST", RETENTION, namespaces::set_retention)
            .add("DELETE", RETENTION, namespaces::remove_retention)
            .add(
                "GET",
                "/admin/v2/{domain}/{tenant}/{namespace}",
                topics::list,
            )
            .add(
                "GET",
                "/admin/v2/{domain}/{tenant}/{namespace}/partitioned",
                topics::list_partitioned,
            )
            .add("PUT", TOPIC, topics::create_non_partitioned)
            .add("DELETE", TOPIC, topics::delete)
            // GET on this path is PIP-344's partition metadata (above).
            .add("PUT", PARTITIONS, topics::create_partitioned)
            .add("POST", PARTITIONS, topics::grow_partitions)
            .add("DELETE", PARTITIONS, topics::delete_partitioned)
    }
}

/// Every route the service serves, with the limits and fallbacks.
pub fn router(state: Arc<AppState>) -> Router {
    routes()
        .router
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            redirect::to_owner,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .layer(axum::middleware::map_response(error::json_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .with_state(state)
}

/// The OpenAPI document of every route (`GET /openapi.json`).
pub const OPENAPI: &str = include_str!("../openapi.json");

async fn openapi() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        OPENAPI,
    )
}

async fn no_route(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no such path: {}", uri.path()))
}

async fn wrong_method(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method not allowed on {}", uri.path()),
    )
}

/// A running HTTP (or HTTPS) listener.
pub struct Server {
    /// The bound address.
    pub local_addr: SocketAddr,
    state: Arc<AppState>,
    listener: broker::net::Listener,
}

/// How long a connection may take to send a request's headers (and, kept
/// alive, to start its next request).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One listener to serve: plain HTTP, or HTTPS with `tls`.
pub struct HttpListener {
    /// The bound socket.
    pub listener: TcpListener,
    /// TLS material: set for the HTTPS listener.
    pub tls: Option<Arc<broker::security::tls::TlsContext>>,
}

/// Serves `listeners` until [`Server::shutdown`], through the accept loop
/// every listener shares: the broker's connection limits
/// (`max.connections`, `max.connections.per.ip`) apply, refusals are
/// counted in the metrics under `listener="http"`, and shutdown drains
/// connections (bounded).
pub fn serve(
    listeners: Vec<HttpListener>,
    broker: Arc<Broker>,
    config: HttpConfig,
) -> std::io::Result<Vec<Server>> {
    let limits = broker.config();
    let tracker = broker::limits::ConnectionTracker::new(
        limits.max_connections(),
        limits.max_connections_per_ip(),
    );
    let state = Arc::new(AppState {
        broker: broker.clone(),
        config,
        ready: AtomicBool::new(true),
    });
    let app = router(state.clone());
    let mut servers = Vec::new();
    for HttpListener { listener, tls } in listeners {
        let local_addr = listener.local_addr()?;
        let listener_metrics = broker.metrics().listener("http");
        let (stop, stopped) = watch::channel(false);
        let app = app.clone();
        let https = tls.is_some();
        let task = tokio::spawn(broker::net::accept_loop(
            listener,
            tracker.clone(),
            listener_metrics,
            stopped,
            move |stream, peer, shutdown, guard| {
                accept(app.clone(), tls.clone(), stream, peer, shutdown, guard)
            },
        ));
        info!(%local_addr, https, "http service listening");
        servers.push(Server {
            local_addr,
            state: state.clone(),
            listener: broker::net::Listener::new(local_addr, stop, task),
        });
    }
    Ok(servers)
}

/// Sets up one connection: the TLS handshake (bounded by
/// [`HEADER_READ_TIMEOUT`]) on the HTTPS listener, then its requests.
async fn accept(
    app: Router,
    tls: Option<Arc<broker::security::tls::TlsContext>>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
    guard: broker::limits::ConnectionGuard,
) {
    let Some(tls) = tls else {
        return connection(app, stream, peer, false, shutdown, guard).await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    match tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => connection(app, s, peer, true, shutdown, guard).await,
        Ok(Err(e)) => tracing::debug!(%peer, "https connection refused: TLS handshake failed: {e}"),
        Err(_) => tracing::debug!(%peer, "https connection refused: no TLS handshake in time"),
    }
}

/// One HTTP/1.1 connection (keep-alive), closed gracefully at shutdown.
async fn connection<S>(
    app: Router,
    stream: S,
    peer: SocketAddr,
    https: bool,
    mut shutdown: watch::Receiver<bool>,
    _guard: broker::limits::ConnectionGuard,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // The peer's address, for the authorizer's host checks; the scheme, for
    // redirects to another broker's same listener.
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            if https {
                req.extensions_mut().insert(forward::Https);
            }
            tower::ServiceExt::oneshot(app.clone(), req.map(axum::body::Body::new))
        });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::pin!(conn);
    let done = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = done {
        tracing::debug!(%peer, "http connection ended: {e}");
    }
}

impl Server {
    /// Stops accepting, reports not-ready, and waits (at most 5 s) for
    /// requests in progress.
    pub async fn shutdown(self) {
        self.state.ready.store(false, Ordering::Relaxed);
        self.listener.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    #[test]
    fn the_openapi_document_lists_exactly_the_served_routes() {
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).expect("valid JSON");
        assert_eq!(doc["openapi"], "3.0.3");
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("path item").keys() {
                if method != "parameters" {
                    documented.insert((method.to_uppercase(), path.clone()));
                }
            }
        }
        let served: BTreeSet<(String, String)> = super::served_routes()
            .into_iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let not_served: Vec<_> = documented.difference(&served).collect();
        assert!(
            undocumented.is_empty() && not_served.is_empty(),
            "served but not in openapi.json: {undocumented:?}; documented but not served: {not_served:?}"
        );
    }

    /// Every served route reaches its handler: asked with placeholder
    /// parameters, none answers "no such path" or "method not allowed"
    /// (which a route shadowed by another would).
    #[tokio::test]
    async fn every_served_route_reaches_its_handler() {
        use axum::body::Body;
        use axum::http::{Method, Request, StatusCode};
        use tower::ServiceExt;

        let dir = tempfile::tempdir().unwrap();
        let broker = broker::testing::TestNode::start(broker::config::BrokerConfig::new(
            dir.path(),
            "127.0.0.1:9092".parse().unwrap(),
        ))
        .unwrap();
        let state = std::sync::Arc::new(super::AppState {
            broker: broker.clone(),
            config: super::HttpConfig {
                pulsar_url: Some("pulsar://127.0.0.1:6650".into()),
                http_url: "http://127.0.0.1:8080".into(),
                ..Default::default()
            },
            ready: std::sync::atomic::AtomicBool::new(true),
        });
        let app = super::router(state);
        for (method, path) in super::served_routes() {
            let uri = path
                .replace("{domain}", "persistent")
                .replace("{tenant}", "public")
                .replace("{namespace}", "default")
                .replace("{number}", "1")
                .replace(['{', '}'], "");
            let req = Request::builder()
                .method(Method::from_bytes(method.as_bytes()).unwrap())
                .uri(&uri)
                .body(Body::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            let status = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let text = String::from_utf8_lossy(&body);
            assert_ne!(
                status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {uri}: {text}"
            );
            assert!(!text.contains("no such path"), "{method} {uri}: {text}");
            assert!(status.as_u16() < 500, "{method} {uri}: {status} {text}");
        }
        broker.shutdown().unwrap();
    }
}
