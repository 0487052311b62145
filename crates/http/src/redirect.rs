//! Requests about a partition another broker of the cluster leads are
//! redirected there with 307 Temporary Redirect (method and body kept), as
//! upstream's brokers redirect admin requests to a topic's owner. The
//! redirect carries `authoritative=true`: a broker asked authoritatively
//! answers itself (503 if it does not lead the partition either), so a
//! request spanning partitions of several brokers is redirected at most
//! once instead of bouncing between them.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;

/// Set on an error response: the node leading what was asked about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner(pub i32);

/// Set on every request of an HTTPS connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Https;

/// The redirect layer (innermost, around the handlers).
pub(crate) async fn to_owner(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let https = req.extensions().get::<Https>().is_some();
    let uri = req.uri().clone();
    let resp = next.run(req).await;
    let Some(Owner(node)) = resp.extensions().get::<Owner>().copied() else {
        return resp;
    };
    if node == state.broker.node_id() || authoritative(&uri) {
        return resp;
    }
    let (listener, scheme) = if https {
        (broker::cluster::HTTPS_LISTENER, "https")
    } else {
        (broker::cluster::HTTP_LISTENER, "http")
    };
    let Some(addr) = magnetar_pulsar::lookup::owner_endpoint(&state.broker, node, listener) else {
        return resp;
    };
    let location = location(scheme, &addr, &uri);
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, location)],
    )
        .into_response()
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
}
