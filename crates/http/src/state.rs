//! What every handler sees: the service's configuration ([`HttpConfig`])
//! and state ([`AppState`]), the limits on a request, and running broker
//! work off the async workers ([`blocking`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use broker::Broker;

use crate::error::ApiError;
use crate::security::HttpSecurity;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Longest a request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Addresses the service hands out, and how callers authenticate.
#[derive(Debug, Clone, Default)]
pub struct HttpConfig {
    /// `pulsar://host:port` of the Pulsar listener, if there is one.
    pub pulsar_url: Option<String>,
    /// `pulsar+ssl://host:port` of the Pulsar TLS listener, if there is one.
    pub pulsar_url_tls: Option<String>,
    /// `http://host:port` of this service.
    pub http_url: String,
    /// `https://host:port` of this service, if it serves HTTPS.
    pub https_url: Option<String>,
    /// The Pulsar front end (its publishers and consumers), if it runs.
    pub pulsar: Option<Arc<dyn magnetar_pulsar_core::admin::Connections>>,
    /// How callers authenticate.
    pub security: HttpSecurity,
    /// How this broker verifies other brokers' HTTPS service when it asks
    /// them about their partitions (the truststore's CAs), if it can.
    pub peer_tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
}

/// What every handler sees.
#[derive(Debug)]
pub struct AppState {
    pub(crate) broker: Arc<Broker>,
    pub(crate) config: HttpConfig,
    pub(crate) ready: AtomicBool,
}

/// Runs broker work that may touch files off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
