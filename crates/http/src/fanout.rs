//! In a cluster, a request about a partitioned topic whose partitions
//! several brokers lead is asked of each partition's broker (as a request
//! about that partition, `authoritative=true`, with the caller's
//! credentials) and the answers combined, as upstream's brokers do for
//! partitioned topics: partitioned stats are summed, subscription lists
//! joined, and a subscription change is made on every partition once
//! every partition's state allows it.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use tokio::net::TcpStream;

use crate::error::ApiError;
use crate::forward::{authoritative_target, Https};
use crate::state::AppState;
use crate::stats::{PartitionedQuery, PartitionedStats, TopicStats};

/// Most a broker may take to answer about one partition.
const PEER_TIMEOUT: Duration = Duration::from_secs(8);

/// Most one fanned-out request may take, well within the service's
/// request timeout, so an answer (not a cut-off) always comes back.
const BUDGET: Duration = Duration::from_secs(20);

/// Most requests in flight to other brokers for one request (a topic
/// may have thousands of partitions).
const MAX_IN_FLIGHT: usize = 32;

/// Largest answer read from a broker about one partition.
const MAX_PEER_ANSWER: usize = 16 << 20;

/// A route about a partitioned topic's partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `GET .../partitioned-stats`.
    PartitionedStats,
    /// `GET .../subscriptions`.
    Subscriptions,
    /// `PUT .../subscription/{sub}`.
    CreateSubscription(String),
    /// `DELETE .../subscription/{sub}`.
    DeleteSubscription(String),
    /// `POST .../subscription/{sub}/...`: a reset to a time, or a skip.
    MoveCursor(String),
    /// Anything else (the handler answers: stats, peeks and resets to a
    /// message id are per partition, as upstream's are).
    Other,
}

impl Route {
    /// The route of `method` on the path segments after the topic's (as
    /// sent: the subscription's is percent-decoded here).
    pub(crate) fn of(method: &Method, rest: &[String]) -> Route {
        // An undecodable name is the handler's to refuse.
        let decoded = |raw: &str| {
            percent_encoding::percent_decode_str(raw)
                .decode_utf8()
                .map(|s| s.into_owned())
                .ok()
        };
        let what: Vec<&str> = rest.iter().map(String::as_str).collect();
        let route = match (method, what.as_slice()) {
            (&Method::GET, ["partitioned-stats"]) => Some(Route::PartitionedStats),
            (&Method::GET, ["subscriptions"]) => Some(Route::Subscriptions),
            (&Method::PUT, ["subscription", s]) => decoded(s).map(Route::CreateSubscription),
            (&Method::DELETE, ["subscription", s]) => decoded(s).map(Route::DeleteSubscription),
            // A message id means one partition's position: the handler
            // refuses it on a partitioned topic (405).
            (&Method::POST, ["subscription", _, "resetcursor"]) => None,
            (&Method::POST, ["subscription", s, "resetcursor" | "skip", _])
            | (&Method::POST, ["subscription", s, "skip_all"]) => decoded(s).map(Route::MoveCursor),
            _ => None,
        };
        route.unwrap_or(Route::Other)
    }
}

/// One request as it is asked of each partition's broker.
struct Asking {
    state: Arc<AppState>,
    https: bool,
    method: Method,
    /// The path with `{topic}` in place of the topic segment.
    template: (String, String),
    query: Option<String>,
    authorization: Option<HeaderValue>,
    content_type: Option<HeaderValue>,
    body: Bytes,
    /// Each partition's path segment (`topic-partition-N`, or the
    /// topic's own for a non-partitioned one) and leader, in order.
    targets: Vec<(String, i32)>,
    /// When the whole request must be answered.
    deadline: tokio::time::Instant,
}

/// What one broker answered.
struct Answer {
    status: StatusCode,
    body: Bytes,
}

impl Answer {
    fn ok(&self) -> bool {
        self.status.is_success()
    }

    fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!("a broker's answer about a partition is unreadable: {e}"),
            )
        })
    }

    /// The answer as this broker's own.
    fn relay(self) -> Response {
        let mut r = (self.status, self.body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}

/// The path segment and leader of each partition of the topic whose path
/// segment is `segment`.
pub(crate) fn targets(segment: &str, partitioned: bool, leaders: &[i32]) -> Vec<(String, i32)> {
    leaders
        .iter()
        .enumerate()
        .map(|(n, l)| match partitioned {
            true => (format!("{segment}-partition-{n}"), *l),
            false => (segment.to_string(), *l),
        })
        .collect()
}

/// Answers `route` (not [`Route::Other`]) about the partitioned topic
/// whose path segment is `segment` by asking each of `targets`.
pub(crate) async fn serve(
    state: Arc<AppState>,
    req: Request,
    route: Route,
    segment: &str,
    targets: Vec<(String, i32)>,
) -> Response {
    let asking = match Asking::new(state, req, segment, targets).await {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    match asking.run(route).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// Whether a producer or a subscription's consumer is attached to any of
/// `targets` (asked of their brokers): a delete without `force` is refused
/// then. The request is given back for the handler.
pub(crate) async fn in_use(
    state: Arc<AppState>,
    req: Request,
    segment: &str,
    targets: Vec<(String, i32)>,
) -> Result<(bool, Request), Response> {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, crate::state::MAX_BODY_BYTES)
        .await
        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")).into_response())?;
    let req = Request::from_parts(parts.clone(), Body::from(body));
    let asking = Asking::new(
        state,
        Request::from_parts(parts, Body::empty()),
        segment,
        targets,
    )
    .await
    .map_err(IntoResponse::into_response)?;
    let all: Vec<usize> = (0..asking.targets.len()).collect();
    let each = asking
        .stats(&all)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok((each.iter().any(TopicStats::in_use), req))
}

/// `path` split around its topic segment `segment` (the third after
/// `/admin/v2/persistent/`): what comes before it and after it.
fn split_at_topic(path: &str, segment: &str) -> Option<(String, String)> {
    let prefix = "/admin/v2/persistent/";
    let rest = path.strip_prefix(prefix)?;
    let mut it = rest.splitn(4, '/');
    let (tenant, namespace, t) = (it.next()?, it.next()?, it.next()?);
    if t != segment {
        return None;
    }
    let after = it.next().map(|a| format!("/{a}")).unwrap_or_default();
    Some((format!("{prefix}{tenant}/{namespace}/"), after))
}

impl Asking {
    async fn new(
        state: Arc<AppState>,
        req: Request,
        segment: &str,
        targets: Vec<(String, i32)>,
    ) -> Result<Asking, ApiError> {
        let (parts, body) = req.into_parts();
        let body = axum::body::to_bytes(body, crate::state::MAX_BODY_BYTES)
            .await
            .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
        let template = split_at_topic(parts.uri.path(), segment)
            .ok_or_else(|| ApiError::bad_request("unexpected path"))?;
        Ok(Asking {
            state,
            https: parts.extensions.get::<Https>().is_some(),
            method: parts.method.clone(),
            template,
            query: parts.uri.query().map(str::to_string),
            authorization: parts.headers.get(header::AUTHORIZATION).cloned(),
            content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
            body,
            targets,
            deadline: tokio::time::Instant::now() + BUDGET,
        })
    }

    async fn run(&self, route: Route) -> Result<Response, ApiError> {
        let all: Vec<usize> = (0..self.targets.len()).collect();
        match route {
            Route::PartitionedStats => {
                let query: PartitionedQuery = query_of(self.query.as_deref())?;
                let each = self.stats(&all).await?;
                let named = each
                    .into_iter()
                    .enumerate()
                    .map(|(n, s)| (self.partition_name(n), s))
                    .collect();
                Ok(Json(PartitionedStats::of(named, &query)).into_response())
            }
            Route::Subscriptions => {
                let mut names = Vec::new();
                for a in self
                    .ask_each(&all, Method::GET, "/subscriptions", None)
                    .await?
                {
                    if !a.ok() {
                        return Ok(a.relay());
                    }
                    names.extend(a.json::<Vec<String>>()?);
                }
                names.sort();
                names.dedup();
                Ok(Json(names).into_response())
            }
            Route::CreateSubscription(sub) => {
                let each = self.stats(&all).await?;
                if each
                    .iter()
                    .any(|s| s.subscription_connected(&sub).is_some())
                {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "Subscription already exists for topic",
                    ));
                }
                self.change(&all).await
            }
            Route::DeleteSubscription(sub) => {
                let each = self.stats(&all).await?;
                let found = with_subscription(&each, &sub)?;
                let connected = found
                    .iter()
                    .any(|n| each[*n].subscription_connected(&sub) == Some(true));
                if connected && !self.forced() {
                    return Err(ApiError::new(
                        StatusCode::PRECONDITION_FAILED,
                        "Subscription has active connected consumers",
                    ));
                }
                self.change(&found).await
            }
            Route::MoveCursor(sub) => {
                let each = self.stats(&all).await?;
                let found = with_subscription(&each, &sub)?;
                self.change(&found).await
            }
            Route::Other => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "no fan-out for this route",
            )),
        }
    }

    /// The Pulsar name of target `n`.
    fn partition_name(&self, n: usize) -> String {
        let path = format!("{}{}", self.template.0, self.targets[n].0);
        let name = path.trim_start_matches("/admin/v2/");
        let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
        name.replacen('/', "://", 1)
    }

    fn forced(&self) -> bool {
        self.query
            .as_deref()
            .unwrap_or("")
            .split('&')
            .any(|kv| kv == "force=true")
    }

    /// Each listed partition's stats, in order.
    async fn stats(&self, which: &[usize]) -> Result<Vec<TopicStats>, ApiError> {
        let mut out = Vec::new();
        for a in self
            .ask_each(which, Method::GET, "/stats", Some(""))
            .await?
        {
            if !a.ok() {
                return Err(peer_error(a));
            }
            out.push(a.json()?);
        }
        Ok(out)
    }

    /// The request itself made on each listed partition: 204 once every
    /// one succeeded, else the first failure.
    async fn change(&self, which: &[usize]) -> Result<Response, ApiError> {
        // Started only with time for a whole round of answers, so a change
        // is not cut off half made by the deadline.
        if self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now())
            < PEER_TIMEOUT
        {
            return Err(unavailable(
                "the partitions' brokers answered too slowly; nothing was changed".into(),
            ));
        }
        let after = self.template.1.clone();
        for a in self
            .ask_each(which, self.method.clone(), &after, None)
            .await?
        {
            if !a.ok() {
                return Ok(a.relay());
            }
        }
        Ok(StatusCode::NO_CONTENT.into_response())
    }

    /// Asks `method` on `after` (the path after the topic segment) of the
    /// listed partitions' leaders, all at once; `query` replaces the
    /// request's own query when given.
    async fn ask_each(
        &self,
        which: &[usize],
        method: Method,
        after: &str,
        query: Option<&str>,
    ) -> Result<Vec<Answer>, ApiError> {
        let asks: Vec<_> = which
            .iter()
            .map(|&n| {
                let (segment, node) = &self.targets[n];
                let node = *node;
                let path = format!("{}{segment}{after}", self.template.0);
                let query = query.map(str::to_string).or_else(|| self.query.clone());
                let method = method.clone();
                async move {
                    let addr = self.endpoint(node, n)?;
                    let uri: axum::http::Uri = match &query {
                        Some(q) if !q.is_empty() => format!("{path}?{q}"),
                        _ => path,
                    }
                    .parse()
                    .map_err(|e| ApiError::bad_request(format!("bad partition path: {e}")))?;
                    let target = authoritative_target(&uri);
                    let until = self
                        .deadline
                        .min(tokio::time::Instant::now() + PEER_TIMEOUT);
                    tokio::time::timeout_at(until, self.ask(&addr, method, &target))
                        .await
                        .map_err(|_| {
                            unavailable(format!(
                                "broker {node} did not answer about partition {n} in time"
                            ))
                        })?
                        .map_err(|e| unavailable(format!("broker {node} (partition {n}): {e}")))
                }
            })
            .collect();
        use futures::StreamExt;
        let answers: Vec<_> = futures::stream::iter(asks)
            .buffered(MAX_IN_FLIGHT)
            .collect()
            .await;
        answers.into_iter().collect()
    }

    fn endpoint(&self, node: i32, partition: usize) -> Result<String, ApiError> {
        if node < 0 {
            return Err(unavailable(format!(
                "partition {partition} has no live leader"
            )));
        }
        let listener = if self.https {
            broker::cluster::HTTPS_LISTENER
        } else {
            broker::cluster::HTTP_LISTENER
        };
        magnetar_pulsar_core::lookup::owner_endpoint(&self.state.broker, node, listener).ok_or_else(
            || {
                unavailable(format!(
                    "partition {partition} is led by broker {node}, which is not available over {}",
                    if self.https { "https" } else { "http" }
                ))
            },
        )
    }

    /// One request to `addr` (`host:port`) for `target` (path and query).
    async fn ask(&self, addr: &str, method: Method, target: &str) -> Result<Answer, String> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let mut req = axum::http::Request::builder()
            .method(method.clone())
            .uri(target)
            .header(header::HOST, addr);
        if let Some(a) = &self.authorization {
            req = req.header(header::AUTHORIZATION, a.clone());
        }
        let body = if method == self.method {
            if let Some(c) = &self.content_type {
                req = req.header(header::CONTENT_TYPE, c.clone());
            }
            self.body.clone()
        } else {
            Bytes::new()
        };
        let req = req.body(Body::from(body)).map_err(|e| e.to_string())?;
        if self.https {
            let config = self
                .state
                .config
                .peer_tls
                .clone()
                .ok_or("HTTPS to other brokers needs ssl.truststore.location")?;
            let host = addr
                .rsplit_once(':')
                .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
                .unwrap_or(addr)
                .to_string();
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host)
                .map_err(|e| format!("bad server name: {e}"))?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS with {addr}: {e}"))?;
            send(tls, req).await
        } else {
            send(tcp, req).await
        }
    }
}

/// Sends `req` on a new HTTP/1.1 connection over `io` and reads the answer.
async fn send<S>(io: S, req: axum::http::Request<Body>) -> Result<Answer, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let resp = sender.send_request(req).await.map_err(|e| e.to_string());
    let out = match resp {
        Ok(resp) => {
            let status = resp.status();
            axum::body::to_bytes(Body::new(resp.into_body()), MAX_PEER_ANSWER)
                .await
                .map(|body| Answer { status, body })
                .map_err(|e| format!("reading the answer: {e}"))
        }
        Err(e) => Err(e),
    };
    driver.abort();
    out
}

fn unavailable(why: String) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, why)
}

/// A failed answer about a partition, as this broker's error.
fn peer_error(a: Answer) -> ApiError {
    let reason = serde_json::from_slice::<serde_json::Value>(&a.body)
        .ok()
        .and_then(|v| v["reason"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&a.body).into_owned());
    ApiError::new(a.status, reason)
}

fn query_of<T: serde::de::DeserializeOwned>(q: Option<&str>) -> Result<T, ApiError> {
    let uri: axum::http::Uri = format!("/?{}", q.unwrap_or(""))
        .parse()
        .map_err(|_| ApiError::bad_request("bad query"))?;
    axum::extract::Query::<T>::try_from_uri(&uri)
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

/// The partitions (indexes into `each`) that have subscription `sub`; 404
/// if none has.
fn with_subscription(each: &[TopicStats], sub: &str) -> Result<Vec<usize>, ApiError> {
    let found: Vec<usize> = (0..each.len())
        .filter(|n| each[*n].subscription_connected(sub).is_some())
        .collect();
    if found.is_empty() {
        return Err(ApiError::not_found("Subscription not found"));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_method_and_path() {
        let r = |m: Method, rest: &[&str]| {
            Route::of(&m, &rest.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(
            r(Method::GET, &["partitioned-stats"]),
            Route::PartitionedStats
        );
        assert_eq!(r(Method::GET, &["subscriptions"]), Route::Subscriptions);
        assert_eq!(
            r(Method::PUT, &["subscription", "s"]),
            Route::CreateSubscription("s".into())
        );
        assert_eq!(
            r(Method::DELETE, &["subscription", "s"]),
            Route::DeleteSubscription("s".into())
        );
        assert_eq!(
            r(Method::POST, &["subscription", "s", "skip_all"]),
            Route::MoveCursor("s".into())
        );
        assert_eq!(
            r(Method::POST, &["subscription", "a%3Ab", "resetcursor", "0"]),
            Route::MoveCursor("a:b".into())
        );
        assert_eq!(
            r(Method::DELETE, &["subscription", "a%3Ab"]),
            Route::DeleteSubscription("a:b".into())
        );
        assert_eq!(
            r(Method::POST, &["subscription", "s", "resetcursor"]),
            Route::Other
        );
        assert_eq!(
            r(Method::POST, &["subscription", "s", "nonsense"]),
            Route::Other
        );
        assert_eq!(r(Method::GET, &["stats"]), Route::Other);
        assert_eq!(
            r(Method::GET, &["subscription", "s", "position", "1"]),
            Route::Other
        );
    }

    #[test]
    fn paths_split_around_the_topic() {
        assert_eq!(
            split_at_topic("/admin/v2/persistent/a/b/t%3Ax/subscription/s", "t%3Ax"),
            Some((
                "/admin/v2/persistent/a/b/".to_string(),
                "/subscription/s".to_string()
            ))
        );
        assert_eq!(split_at_topic("/admin/v2/persistent/a/b/t", "u"), None);
    }
}
