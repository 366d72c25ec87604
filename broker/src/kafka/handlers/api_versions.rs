//! ApiVersions: the table in `kafka::versions`, nothing else. No feature tags are sent: they
//! would mean nothing yet, and librdkafka before 2.2 (Debian's kcat) cannot skip non-empty
//! tagged fields in this response.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::kafka::error_code::NONE;
use crate::kafka::versions::{self, SUPPORTED};

pub fn handle(_req: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default();
    resp.error_code = NONE;
    resp.api_keys = SUPPORTED
        .iter()
        .map(|api| {
            let mut v = ApiVersion::default();
            v.api_key = api.key as i16;
            v.min_version = api.min;
            v.max_version = api.max;
            v
        })
        .collect();
    resp
}

/// The v0 answer to an ApiVersions request of a version Strom does not know (KIP-511): error
/// UNSUPPORTED_VERSION and ApiVersions' own range, so the client retries with one it shares.
pub fn unsupported_version() -> ApiVersionsResponse {
    let (min, max) = versions::api_versions_range();
    let mut own = ApiVersion::default();
    own.api_key = kafka_protocol::messages::ApiKey::ApiVersions as i16;
    own.min_version = min;
    own.max_version = max;
    let mut resp = ApiVersionsResponse::default();
    resp.error_code = kafka_protocol::error::ResponseError::UnsupportedVersion.code();
    resp.api_keys = vec![own];
    resp
}
