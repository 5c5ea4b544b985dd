//! VirtualService: HTTP, TLS and TCP routes, destinations, and what a route may do (redirect,
//! rewrite, fault, retry, mirror, CORS).

use crate::config::common::Labels;
use crate::config::common::{Duration, StringMatch};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualService {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub http: Vec<HttpRoute>,
    #[serde(default)]
    pub tls: Vec<TlsRoute>,
    #[serde(default)]
    pub tcp: Vec<TcpRoute>,
    #[serde(default)]
    pub export_to: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRoute {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "match")]
    pub matches: Vec<HttpMatchRequest>,
    #[serde(default)]
    pub route: Vec<HttpRouteDestination>,
    pub redirect: Option<HttpRedirect>,
    pub direct_response: Option<HttpDirectResponse>,
    pub delegate: Option<Delegate>,
    pub rewrite: Option<HttpRewrite>,
    pub timeout: Option<Duration>,
    pub retries: Option<HttpRetry>,
    pub fault: Option<HttpFaultInjection>,
    pub mirror: Option<Destination>,
    #[serde(default)]
    pub mirrors: Vec<HttpMirrorPolicy>,
    /// Deprecated in Istio in favour of `mirrorPercentage`; still accepted, also under its proto
    /// field name, as the CRD lists it.
    #[serde(alias = "mirror_percent")]
    pub mirror_percent: Option<u32>,
    pub mirror_percentage: Option<Percent>,
    pub cors_policy: Option<CorsPolicy>,
    pub headers: Option<Headers>,
    /// Removed from Istio's API (a reserved field) but still admitted by istiod, which ignores
    /// it: WebSocket upgrades are always allowed. Read so that such objects are not refused,
    /// warned about, and left out of the CRD schema as Istio's CRD leaves it out.
    #[schemars(skip)]
    pub websocket_upgrade: Option<bool>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpMatchRequest {
    #[serde(default)]
    pub name: String,
    pub uri: Option<StringMatch>,
    pub scheme: Option<StringMatch>,
    pub method: Option<StringMatch>,
    pub authority: Option<StringMatch>,
    #[serde(default)]
    pub headers: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub source_labels: Labels,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub query_params: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub ignore_uri_case: bool,
    #[serde(default)]
    pub without_headers: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub source_namespace: String,
    #[serde(default)]
    pub stat_prefix: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteDestination {
    pub destination: Option<Destination>,
    #[serde(default)]
    pub weight: i32,
    pub headers: Option<Headers>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteDestination {
    pub destination: Option<Destination>,
    #[serde(default)]
    pub weight: i32,
}

#[serde_with::skip_serializing_none]
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Destination {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub subset: String,
    pub port: Option<PortSelector>,
}

#[serde_with::skip_serializing_none]
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortSelector {
    #[serde(default)]
    pub number: u32,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Headers {
    pub request: Option<HeaderOperations>,
    pub response: Option<HeaderOperations>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderOperations {
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    #[serde(default)]
    pub add: BTreeMap<String, String>,
    #[serde(default)]
    pub remove: Vec<String>,
}

istio_enum!(RedirectPortSelection {
    FROM_PROTOCOL_DEFAULT,
    FROM_REQUEST_PORT
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRedirect {
    #[serde(default)]
    pub uri: String,
    #[serde(default)]
    pub authority: String,
    pub port: Option<u32>,
    pub derive_port: Option<RedirectPortSelection>,
    #[serde(default)]
    pub scheme: String,
    #[serde(default)]
    pub redirect_code: u32,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpDirectResponse {
    #[serde(default)]
    pub status: u32,
    pub body: Option<HttpBody>,
}

/// `HTTPBody`: a oneof of `string` or `bytes` (base64 in JSON).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum HttpBody {
    String(String),
    Bytes(String),
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delegate {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRewrite {
    #[serde(default)]
    pub uri: String,
    #[serde(default)]
    pub authority: String,
    pub uri_regex_rewrite: Option<RegexRewrite>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegexRewrite {
    #[serde(default, rename = "match")]
    pub match_regex: String,
    #[serde(default)]
    pub rewrite: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRetry {
    #[serde(default)]
    pub attempts: i32,
    pub per_try_timeout: Option<Duration>,
    #[serde(default)]
    pub retry_on: String,
    pub retry_remote_localities: Option<bool>,
    pub retry_ignore_previous_hosts: Option<bool>,
    pub backoff: Option<Duration>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpFaultInjection {
    pub delay: Option<FaultDelay>,
    pub abort: Option<FaultAbort>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultDelay {
    pub fixed_delay: Option<Duration>,
    pub exponential_delay: Option<Duration>,
    pub percentage: Option<Percent>,
    /// Deprecated integer percentage; still accepted.
    #[serde(default)]
    pub percent: i32,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultAbort {
    pub http_status: Option<i32>,
    pub grpc_status: Option<String>,
    pub http2_error: Option<String>,
    pub percentage: Option<Percent>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Percent {
    #[serde(default)]
    pub value: f64,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpMirrorPolicy {
    pub destination: Option<Destination>,
    pub percentage: Option<Percent>,
}

istio_enum!(UnmatchedPreflights {
    UNSPECIFIED,
    FORWARD,
    IGNORE
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CorsPolicy {
    #[serde(default)]
    pub allow_origins: Vec<StringMatch>,
    /// Deprecated in favour of `allowOrigins`.
    #[serde(default)]
    pub allow_origin: Vec<String>,
    #[serde(default)]
    pub allow_methods: Vec<String>,
    #[serde(default)]
    pub allow_headers: Vec<String>,
    #[serde(default)]
    pub expose_headers: Vec<String>,
    pub max_age: Option<Duration>,
    pub allow_credentials: Option<bool>,
    pub unmatched_preflights: Option<UnmatchedPreflights>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsRoute {
    #[serde(default, rename = "match")]
    pub matches: Vec<TlsMatchAttributes>,
    #[serde(default)]
    pub route: Vec<RouteDestination>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsMatchAttributes {
    #[serde(default)]
    pub sni_hosts: Vec<String>,
    #[serde(default)]
    pub destination_subnets: Vec<String>,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub source_labels: Labels,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub source_namespace: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRoute {
    #[serde(default, rename = "match")]
    pub matches: Vec<L4MatchAttributes>,
    #[serde(default)]
    pub route: Vec<RouteDestination>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct L4MatchAttributes {
    #[serde(default)]
    pub destination_subnets: Vec<String>,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub source_subnet: String,
    #[serde(default)]
    pub source_labels: Labels,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub source_namespace: String,
}

/// gRPC status names in code order (`OK` is 0): what a fault abort's `grpcStatus` may name.
pub const GRPC_STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The claim path of a VirtualService header named `@request.auth.claims.a.b` or
/// `@request.auth.claims[a][b]` (istiod's `ToRoutingClaim`); `None` for any other header.
pub fn routing_claim(header: &str) -> Option<Vec<&str>> {
    const PREFIX: &str = "@request.auth.claims";
    let rest = header
        .get(..PREFIX.len())
        .filter(|p| p.eq_ignore_ascii_case(PREFIX))
        .map(|_| &header[PREFIX.len()..])?;
    if let Some(dotted) = rest.strip_prefix('.').filter(|r| !r.is_empty()) {
        Some(dotted.split('.').collect())
    } else if rest.len() > 2 && rest.starts_with('[') && rest.ends_with(']') {
        Some(rest[1..rest.len() - 1].split("][").collect())
    } else {
        None
    }
}
