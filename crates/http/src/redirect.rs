//! In a cluster, a request about a topic's partitions that another broker
//! leads is redirected there with 307 Temporary Redirect (method and body
//! kept), as upstream's brokers redirect admin requests to a topic's
//! owner. The redirect carries `authoritative=true`: a broker asked
//! authoritatively does not redirect again, and answers 503 unless it
//! leads the partitions itself (its metadata moved on meanwhile), so
//! nothing bounces between brokers and no broker answers from a stale
//! local copy. A request about a partitioned topic whose partitions
//! several brokers lead is asked of each of them ([`fanout`]), and a topic
//! delete without `force` is refused while another broker's partition of
//! it has producers or consumers attached.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::fanout;
use crate::forward::{authoritative_target, Https};
use crate::state::AppState;

/// The redirect layer, around the handlers of topic routes.
pub(crate) async fn to_owner(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(route) = topic_route(req.uri().path()) else {
        return next.run(req).await;
    };
    if route.deletes_topic(req.method()) {
        return unless_in_use(state.clone(), req, next, &route).await;
    }
    if !route.about_partitions() {
        return next.run(req).await;
    }
    let name = &route.name;
    let broker = &state.broker;
    // Parse errors and unknown topics are the handler's to answer.
    let owners = magnetar_pulsar_core::lookup::partition_owners(broker, name).unwrap_or_default();
    let me = broker.node_id();
    let node = match (owners.len(), owners.first().copied()) {
        (1, Some(n)) if n == me => return next.run(req).await,
        (1, Some(n)) if authoritative(req.uri()) => {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{name} is led by broker {n}, not this one (asked authoritatively)"),
            )
            .into_response()
        }
        (1, Some(n)) => n,
        (_, None) => return next.run(req).await,
        _ => {
            let fanned = fanout::Route::of(req.method(), &route.rest);
            if fanned == fanout::Route::Other {
                // Per-partition routes: the handler refuses the
                // partitioned topic itself.
                return next.run(req).await;
            }
            let leaders = match magnetar_pulsar_core::lookup::topic_leaders(broker, name) {
                Ok(Some((true, l))) => l,
                _ => return next.run(req).await,
            };
            let targets = fanout::targets(&route.segment, true, &leaders);
            return fanout::serve(state.clone(), req, fanned, &route.segment, targets).await;
        }
    };
    let https = req.extensions().get::<Https>().is_some();
    let (listener, scheme) = if https {
        (broker::cluster::HTTPS_LISTENER, "https")
    } else {
        (broker::cluster::HTTP_LISTENER, "http")
    };
    match magnetar_pulsar_core::lookup::owner_endpoint(broker, node, listener) {
        Some(addr) => (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, location(scheme, &addr, req.uri()))],
        )
            .into_response(),
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{name} is led by broker {node}, which is not available over {scheme}"),
        )
        .into_response(),
    }
}

/// A topic delete without `force`: refused (412, as the handler refuses
/// a topic in use here) while producers or consumers are attached to a
/// partition another broker leads; the handler decides the rest.
async fn unless_in_use(
    state: Arc<AppState>,
    req: Request,
    next: Next,
    route: &TopicRoute,
) -> Response {
    let forced = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "force=true"));
    let me = state.broker.node_id();
    let (partitioned, leaders) =
        match magnetar_pulsar_core::lookup::topic_leaders(&state.broker, &route.name) {
            Ok(Some(found)) => found,
            _ => return next.run(req).await,
        };
    // The handler refuses the endpoint of the other kind (409) itself.
    let kind_matches = partitioned == (route.rest == ["partitions"]);
    if forced || !kind_matches || leaders.iter().all(|l| *l == me) {
        return next.run(req).await;
    }
    // This broker's own partitions are the handler's to check.
    let targets: Vec<(String, i32)> = fanout::targets(&route.segment, partitioned, &leaders)
        .into_iter()
        .filter(|(_, l)| *l != me)
        .collect();
    match fanout::in_use(state, req, &route.segment, targets).await {
        Ok((true, _)) => ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "Topic has active producers/subscriptions",
        )
        .into_response(),
        Ok((false, req)) => next.run(req).await,
        Err(r) => r,
    }
}

/// A route under `/admin/v2/persistent/{tenant}/{namespace}/{topic}`.
#[derive(Debug, PartialEq, Eq)]
struct TopicRoute {
    /// `persistent://tenant/namespace/topic`.
    name: String,
    /// The topic's path segment as sent.
    segment: String,
    /// The segments after the topic's, as sent.
    rest: Vec<String>,
}

impl TopicRoute {
    /// Whether the route is about the topic's partitions: `stats`,
    /// `partitioned-stats`, `subscriptions` or `subscription/...`.
    fn about_partitions(&self) -> bool {
        matches!(
            self.rest.first().map(String::as_str),
            Some("stats" | "partitioned-stats" | "subscriptions" | "subscription")
        )
    }

    /// Whether `method` on the route deletes the topic.
    fn deletes_topic(&self, method: &Method) -> bool {
        method == Method::DELETE && (self.rest.is_empty() || self.rest == ["partitions"])
    }
}

/// The route a path under `/admin/v2/persistent/` is, with its topic
/// percent-decoded (Pulsar's admin client percent-encodes names) as the
/// handlers' path extractors see it.
fn topic_route(path: &str) -> Option<TopicRoute> {
    let rest = path.strip_prefix("/admin/v2/persistent/")?;
    let mut parts = rest.split('/');
    let (tenant, namespace, topic) = (parts.next()?, parts.next()?, parts.next()?);
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .ok()
    };
    let segment = topic.to_string();
    let (tenant, namespace, topic) = (decode(tenant)?, decode(namespace)?, decode(topic)?);
    if topic.is_empty() {
        return None;
    }
    Some(TopicRoute {
        name: format!("persistent://{tenant}/{namespace}/{topic}"),
        segment,
        rest: parts.map(str::to_string).collect(),
    })
}

fn authoritative(uri: &Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "authoritative=true"))
}

/// `uri` on `scheme://addr`, with `authoritative=true` (and any earlier
/// `authoritative` parameter dropped).
fn location(scheme: &str, addr: &str, uri: &Uri) -> String {
    format!("{scheme}://{addr}{}", authoritative_target(uri))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_keep_the_path_and_query_and_say_authoritative() {
        let uri: Uri = "/admin/v2/persistent/public/default/t/stats?getPreciseBacklog=true"
            .parse()
            .unwrap();
        assert!(!authoritative(&uri));
        assert_eq!(
            location("http", "10.0.0.2:8080", &uri),
            "http://10.0.0.2:8080/admin/v2/persistent/public/default/t/stats?getPreciseBacklog=true&authoritative=true"
        );
        let again: Uri = "/a?authoritative=false&x=1".parse().unwrap();
        assert_eq!(
            location("https", "[::1]:8443", &again),
            "https://[::1]:8443/a?x=1&authoritative=true"
        );
        assert!(authoritative(
            &"/a?x=1&authoritative=true".parse::<Uri>().unwrap()
        ));
    }

    #[test]
    fn topic_routes_name_their_topic() {
        let t = |p: &str| {
            topic_route(p)
                .filter(TopicRoute::about_partitions)
                .map(|r| r.name)
        };
        assert_eq!(
            t("/admin/v2/persistent/public/default/t-partition-1/subscription/s/skip_all"),
            Some("persistent://public/default/t-partition-1".into())
        );
        assert_eq!(
            t("/admin/v2/persistent/a/b/t/stats"),
            Some("persistent://a/b/t".into())
        );
        assert_eq!(t("/admin/v2/persistent/a/b/t/partitions"), None);
        assert_eq!(t("/admin/v2/persistent/a/b/t"), None);
        assert_eq!(t("/lookup/v2/topic/persistent/a/b/t"), None);
        assert_eq!(
            t("/admin/v2/persistent/a/b/t%3Ax/stats"),
            Some("persistent://a/b/t:x".into())
        );
        let r = topic_route("/admin/v2/persistent/a/b/t%3Ax/subscription/s").unwrap();
        assert_eq!(r.segment, "t%3Ax");
        assert_eq!(r.rest, ["subscription", "s"]);
        let deletes = |p: &str| topic_route(p).unwrap().deletes_topic(&Method::DELETE);
        assert!(deletes("/admin/v2/persistent/a/b/t"));
        assert!(deletes("/admin/v2/persistent/a/b/t/partitions"));
        assert!(!deletes("/admin/v2/persistent/a/b/t/subscription/s"));
    }
}
