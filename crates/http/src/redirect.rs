//! In a cluster, a request about a topic's partitions that another broker
//! leads is redirected there with 307 Temporary Redirect (method and body
//! kept), as upstream's brokers redirect admin requests to a topic's
//! owner. The redirect carries `authoritative=true`: a broker asked
//! authoritatively does not redirect again, and answers 503 unless it
//! leads the partitions itself (its metadata moved on meanwhile), so
//! nothing bounces between brokers and no broker answers from a stale
//! local copy. A partitioned topic whose partitions several brokers lead
//! is refused with 503 and a reason (its partitions can be asked one by
//! one), rather than answered with this broker's share only.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::AppState;

/// Set on every request of an HTTPS connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Https;

/// The redirect layer, around the handlers of topic routes.
pub(crate) async fn to_owner(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let broker = &state.broker;
    if !broker.is_clustered() {
        return next.run(req).await;
    }
    let Some(name) = partition_route(req.uri().path()) else {
        return next.run(req).await;
    };
    // Parse errors and unknown topics are the handler's to answer.
    let owners = magnetar_pulsar::lookup::partition_owners(broker, &name).unwrap_or_default();
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
        _ => return several(&name, &owners, me).into_response(),
    };
    let https = req.extensions().get::<Https>().is_some();
    let (listener, scheme) = if https {
        (broker::cluster::HTTPS_LISTENER, "https")
    } else {
        (broker::cluster::HTTP_LISTENER, "http")
    };
    match magnetar_pulsar::lookup::owner_endpoint(broker, node, listener) {
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

fn several(name: &str, owners: &BTreeSet<i32>, me: i32) -> ApiError {
    let nodes: Vec<String> = owners
        .iter()
        .map(|n| match *n {
            -1 => "none (offline)".to_string(),
            n if n == me => format!("{n} (this one)"),
            n => n.to_string(),
        })
        .collect();
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the partitions of {name} are led by several brokers ({}); ask about each partition ({name}-partition-N)",
            nodes.join(", ")
        ),
    )
}

/// The topic a route about its partitions names
/// (`/admin/v2/persistent/{tenant}/{namespace}/{topic}/` followed by
/// `stats`, `partitioned-stats`, `subscriptions` or `subscription/...`), as
/// `persistent://tenant/namespace/topic`.
fn partition_route(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/admin/v2/persistent/")?;
    let mut parts = rest.split('/');
    let (tenant, namespace, topic, what) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Segments as the handlers' path extractors see them (Pulsar's admin
    // client percent-encodes names).
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .ok()
    };
    let (tenant, namespace, topic) = (decode(tenant)?, decode(namespace)?, decode(topic)?);
    matches!(
        what,
        "stats" | "partitioned-stats" | "subscriptions" | "subscription"
    )
    .then(|| format!("persistent://{tenant}/{namespace}/{topic}"))
}

fn authoritative(uri: &Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "authoritative=true"))
}

/// `uri` on `scheme://addr`, with `authoritative=true` (and any earlier
/// `authoritative` parameter dropped).
fn location(scheme: &str, addr: &str, uri: &Uri) -> String {
    let mut query: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty() && kv.split('=').next() != Some("authoritative"))
        .collect();
    query.push("authoritative=true");
    format!("{scheme}://{addr}{}?{}", uri.path(), query.join("&"))
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
    fn partition_routes_name_their_topic() {
        let t = |p: &str| partition_route(p);
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
    }
}
