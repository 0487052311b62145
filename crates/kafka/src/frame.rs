//! Kafka framing: a 4-byte big-endian size, then a request header and body.
//! Decoding and encoding use the `kafka-protocol` crate; this module decides
//! which frames are acceptable before any of that runs.

use super::{supported_versions, RequestContext};
pub use broker::net::{read_frame, FrameLimits, ReadError as FrameError};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};

/// Why a complete frame is not a request we can serve; each closes the
/// connection except where the protocol defines an answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Shorter than a request header.
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    /// An API key this broker does not know or does not implement.
    #[error("unknown or unsupported API key {0}")]
    UnknownApiKey(i16),
    /// A version outside the advertised range.
    #[error("{api:?} version {version} is not supported (supported: {min}..={max})")]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The requested version.
        version: i16,
        /// Lowest supported.
        min: i16,
        /// Highest supported.
        max: i16,
    },
    /// The header or body does not decode.
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
        /// Decoder's complaint.
        reason: String,
    },
}

/// A frame that was parsed.
// Built once per request and moved once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Parsed {
    /// A request to handle.
    Request {
        /// Header facts.
        ctx: RequestContext,
        /// The decoded body.
        body: RequestKind,
    },
    /// ApiVersions at a version we do not implement: the protocol says to
    /// answer in the v0 format with UNSUPPORTED_VERSION and our version list,
    /// so the client can retry with one we support.
    UnsupportedApiVersions {
        /// Echoed in the response header.
        correlation_id: i32,
    },
}

/// Parses a request frame (without its size prefix).
pub fn parse_request(mut frame: Bytes) -> Result<Parsed, RequestError> {
    if frame.len() < 8 {
        return Err(RequestError::TooShort(frame.len()));
    }
    let key_raw = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = ApiKey::try_from(key_raw).map_err(|_| RequestError::UnknownApiKey(key_raw))?;
    let request_size = frame.len() + 4;
    let range = supported_versions(api).ok_or(RequestError::UnknownApiKey(key_raw))?;
    if !range.contains(version) {
        if api == ApiKey::ApiVersions && version > range.max {
            return Ok(Parsed::UnsupportedApiVersions { correlation_id });
        }
        return Err(RequestError::UnsupportedVersion {
            api,
            version,
            min: range.min,
            max: range.max,
        });
    }
    let malformed = |e: anyhow::Error| RequestError::Malformed {
        api,
        version,
        reason: format!("{e:#}"),
    };
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version))
        .map_err(malformed)?;
    let body = RequestKind::decode(api, &mut frame, version).map_err(malformed)?;
    Ok(Parsed::Request {
        ctx: RequestContext {
            api_key: api,
            api_version: version,
            correlation_id: header.correlation_id,
            client_id: header.client_id.map(|s| s.to_string()),
            client_host: String::new(),
            listener: default_listener(),
            principal: anonymous(),
            request_size,
        },
        body,
    })
}

/// The PLAINTEXT listener's key, until the server sets the real one.
fn default_listener() -> std::sync::Arc<str> {
    static KEY: std::sync::LazyLock<std::sync::Arc<str>> =
        std::sync::LazyLock::new(|| std::sync::Arc::from(broker::cluster::KAFKA_LISTENER));
    KEY.clone()
}

/// `User:ANONYMOUS`, until the server sets the session's principal.
fn anonymous() -> std::sync::Arc<broker::security::Principal> {
    static ANONYMOUS: std::sync::LazyLock<std::sync::Arc<broker::security::Principal>> =
        std::sync::LazyLock::new(|| std::sync::Arc::new(broker::security::Principal::anonymous()));
    ANONYMOUS.clone()
}

/// Encodes a response frame, size prefix included.
pub fn encode_response(ctx: &RequestContext, response: &ResponseKind) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(ctx.correlation_id)
        .encode(
            &mut buf,
            ctx.api_key.response_header_version(ctx.api_version),
        )?;
    response.encode(&mut buf, ctx.api_version)?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// The v0-format ApiVersions answer to an ApiVersions version we do not
/// implement.
pub fn encode_unsupported_api_versions(correlation_id: i32) -> Bytes {
    let body: ApiVersionsResponse = super::api_versions::unsupported_version_response();
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    // v0 encoding of our own table cannot fail: every field fits v0.
    if body.encode(&mut buf, 0).is_err() {
        buf.truncate(8);
        buf.put_i16(35);
        buf.put_i32(0);
    }
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

/// The correlation id of a raw frame, if it is long enough to have one.
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    let mut b = frame.get(4..8)?;
    Some(b.get_i32())
}

#[cfg(test)]
mod tests {
    use super::*;
    use broker::limits::RequestBudget;
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
    use kafka_protocol::protocol::StrBytes;
    use std::time::Duration;

    fn request_frame(key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("t")))
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn parses_supported_requests() {
        let f = request_frame(ApiKey::Metadata, 12, &MetadataRequest::default());
        match parse_request(f).unwrap() {
            Parsed::Request { ctx, body } => {
                assert_eq!(ctx.correlation_id, 7);
                assert_eq!(ctx.client_id.as_deref(), Some("t"));
                assert!(matches!(body, RequestKind::Metadata(_)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn future_api_versions_gets_the_v0_answer() {
        let f = request_frame(ApiKey::ApiVersions, 4, &ApiVersionsRequest::default());
        assert!(matches!(
            parse_request(f).unwrap(),
            Parsed::UnsupportedApiVersions { correlation_id: 7 }
        ));
        let out = encode_unsupported_api_versions(7);
        let mut b = out.slice(4..);
        assert_eq!(b.get_i32(), 7);
        let resp = ApiVersionsResponse::decode(&mut b, 0).unwrap();
        assert_eq!(resp.error_code, 35);
        assert!(resp
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::ApiVersions as i16 && k.max_version == 3));
    }

    #[test]
    fn rejects_bad_frames() {
        assert!(matches!(
            parse_request(Bytes::from_static(b"abc")),
            Err(RequestError::TooShort(3))
        ));
        let mut unknown = BytesMut::new();
        unknown.put_i16(9999);
        unknown.put_i16(0);
        unknown.put_i32(1);
        assert!(matches!(
            parse_request(unknown.freeze()),
            Err(RequestError::UnknownApiKey(9999))
        ));
        let f = request_frame(ApiKey::Produce, 2, &MetadataRequest::default());
        assert!(matches!(
            parse_request(f),
            Err(RequestError::UnsupportedVersion { .. })
        ));
        let mut garbage = BytesMut::new();
        garbage.put_i16(ApiKey::Metadata as i16);
        garbage.put_i16(12);
        garbage.put_i32(1);
        garbage.put_slice(&[0xff; 3]);
        assert!(matches!(
            parse_request(garbage.freeze()),
            Err(RequestError::Malformed { .. })
        ));
    }

    #[test]
    fn huge_collection_counts_are_malformed_not_fatal() {
        // Metadata v0 announcing 2^31-1 topics in a 14-byte frame.
        let mut b = BytesMut::new();
        b.put_i16(ApiKey::Metadata as i16);
        b.put_i16(0);
        b.put_i32(1);
        b.put_i16(-1);
        b.put_i32(i32::MAX);
        assert!(matches!(
            parse_request(b.freeze()),
            Err(RequestError::Malformed { .. })
        ));
        // Metadata v12 (compact array, varint count 2^32-1) and a compact string that long.
        let mut b = BytesMut::new();
        b.put_i16(ApiKey::Metadata as i16);
        b.put_i16(12);
        b.put_i32(2);
        b.put_i16(-1);
        b.put_u8(0);
        b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(matches!(
            parse_request(b.freeze()),
            Err(RequestError::Malformed { .. })
        ));
        // A produce request whose record bytes claim 2 GB.
        let mut b = BytesMut::new();
        b.put_i16(ApiKey::Produce as i16);
        b.put_i16(3);
        b.put_i32(3);
        b.put_i16(-1);
        b.put_i16(-1);
        b.put_i16(1);
        b.put_i32(1000);
        b.put_i32(1);
        b.put_i16(1);
        b.put_u8(b't');
        b.put_i32(1);
        b.put_i32(0);
        b.put_i32(i32::MAX);
        assert!(matches!(
            parse_request(b.freeze()),
            Err(RequestError::Malformed { .. })
        ));
    }

    proptest::proptest! {
        /// Any bytes after a valid header prefix decode to a request or a
        /// Malformed error; never a panic or an abort.
        #[test]
        fn arbitrary_bodies_never_crash(key in proptest::sample::select(crate::SUPPORTED_APIS.to_vec()), version_offset in 0i16..20, body in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let (api, range) = key;
            let version = range.min + version_offset % (range.max - range.min + 1);
            let mut b = BytesMut::new();
            b.put_i16(api as i16);
            b.put_i16(version);
            b.put_i32(9);
            b.put_slice(&body);
            let _ = parse_request(b.freeze());
        }
    }

    fn limits(max_size: usize) -> FrameLimits {
        FrameLimits {
            max_size,
            max_size_key: "socket.request.max.bytes",
            read_timeout: Some(Duration::from_secs(5)),
        }
    }

    async fn read(mut input: &[u8], max: usize) -> Result<Option<Bytes>, FrameError> {
        let budget = RequestBudget::new(Some(1 << 20)).for_peer([127, 0, 0, 1].into());
        read_frame(&mut input, &limits(max), &budget, None)
            .await
            .map(|f| f.map(|(b, _)| b))
    }

    #[tokio::test]
    async fn frame_limits() {
        assert!(matches!(
            read(&(-1i32).to_be_bytes(), 100).await,
            Err(FrameError::NegativeLength(-1))
        ));
        assert!(matches!(
            read(&1000i32.to_be_bytes(), 100).await,
            Err(FrameError::TooLarge { .. })
        ));
        assert!(matches!(
            read(&[0, 0, 0, 5, 1, 2], 100).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(
            read(&[0, 0], 100).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(read(&[], 100).await, Ok(None)));
        assert_eq!(
            read(&[0, 0, 0, 2, 9, 9, 7], 100)
                .await
                .unwrap()
                .unwrap()
                .as_ref(),
            &[9, 9]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stalled_frames_and_idle_connections_time_out() {
        let all = RequestBudget::new(Some(1 << 20));
        let budget = all.for_peer([127, 0, 0, 1].into());
        // A frame that announces 100 bytes and sends 3.
        let (mut client, mut server) = tokio::io::duplex(1024);
        tokio::io::AsyncWriteExt::write_all(&mut client, &[0, 0, 0, 100, 1, 2, 3])
            .await
            .unwrap();
        let r = read_frame(&mut server, &limits(1000), &budget, None).await;
        assert!(
            matches!(
                r,
                Err(FrameError::ReadTimeout {
                    len: 100,
                    received: 3,
                    ..
                })
            ),
            "{r:?}"
        );
        assert_eq!(
            (all.available(), all.reserve_available()),
            (Some(7 << 17), Some(1 << 17)),
            "the budget is given back"
        );
        // Nothing at all: idle.
        let (_client, mut server) = tokio::io::duplex(1024);
        let r = read_frame(
            &mut server,
            &limits(1000),
            &budget,
            Some(Duration::from_secs(60)),
        )
        .await;
        assert!(matches!(r, Err(FrameError::Idle(_))), "{r:?}");
    }
}
