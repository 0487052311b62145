//! What a request sent on to another broker (redirected or fanned out)
//! keeps: the scheme it came in on ([`Https`]) and its authoritative form
//! ([`authoritative_target`]).

use axum::http::Uri;

/// Set on every request of an HTTPS connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Https;

/// `uri`'s path and query with `authoritative=true` (and any earlier
/// `authoritative` parameter dropped).
pub(crate) fn authoritative_target(uri: &Uri) -> String {
    let mut query: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty() && kv.split('=').next() != Some("authoritative"))
        .collect();
    query.push("authoritative=true");
    format!("{}?{}", uri.path(), query.join("&"))
}
