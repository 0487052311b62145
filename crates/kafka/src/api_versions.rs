//! ApiVersions (key 18): the versions of every API this broker implements.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::{Versions, SUPPORTED_APIS};

/// Implemented versions.
pub const VERSIONS: Versions = Versions::new(0, 3);

fn api_list() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|(k, v)| {
            ApiVersion::default()
                .with_api_key(*k as i16)
                .with_min_version(v.min)
                .with_max_version(v.max)
        })
        .collect()
}

/// Kafka's rule for client software names and versions (KIP-511).
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// Answers ApiVersions.
pub fn handle(version: i16, req: ApiVersionsRequest) -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default().with_api_keys(api_list());
    if version >= 3
        && !(valid_software_field(&req.client_software_name)
            && valid_software_field(&req.client_software_version))
    {
        resp.error_code = ResponseError::InvalidRequest.code();
    }
    resp
}

/// The answer to an ApiVersions version above ours (sent in the v0 format).
pub fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_list())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn lists_every_supported_api_and_validates_software_names() {
        let ok = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("librdkafka"))
            .with_client_software_version(StrBytes::from_static_str("2.12.1"));
        let r = handle(3, ok);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.api_keys.len(), SUPPORTED_APIS.len());
        let bad = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("-bad name"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        assert_eq!(
            handle(3, bad).error_code,
            ResponseError::InvalidRequest.code()
        );
        // Before v3 there are no such fields to check.
        assert_eq!(handle(2, ApiVersionsRequest::default()).error_code, 0);
    }
}
