//! networking.istio.io: field for field with istio.io/api `networking/v1alpha3` (served as v1, v1beta1 and
//! v1alpha3). Unknown fields are rejected, as `istioctl validate` and the validation webhook do.

use super::common::{Duration, LabelSelector, PolicyTargetReference, StringMatch};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

type Labels = BTreeMap<String, String>;

macro_rules! istio_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize, schemars::JsonSchema)]
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        pub enum $name {
            #[default]
            $($variant),+
        }
    };
}
pub(crate) use istio_enum;

// ---------------------------------------------------------------------------------------------
// VirtualService

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

// ---------------------------------------------------------------------------------------------
// DestinationRule

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DestinationRule {
    #[serde(default)]
    pub host: String,
    pub traffic_policy: Option<TrafficPolicy>,
    #[serde(default)]
    pub subsets: Vec<Subset>,
    #[serde(default)]
    pub export_to: Vec<String>,
    pub workload_selector: Option<super::common::WorkloadSelector>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficPolicy {
    pub load_balancer: Option<LoadBalancerSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub outlier_detection: Option<OutlierDetection>,
    pub tls: Option<ClientTlsSettings>,
    #[serde(default)]
    pub port_level_settings: Vec<PortTrafficPolicy>,
    pub tunnel: Option<TunnelSettings>,
    pub proxy_protocol: Option<ProxyProtocol>,
    pub retry_budget: Option<RetryBudget>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortTrafficPolicy {
    pub port: Option<PortSelector>,
    pub load_balancer: Option<LoadBalancerSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub outlier_detection: Option<OutlierDetection>,
    pub tls: Option<ClientTlsSettings>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subset {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    pub traffic_policy: Option<TrafficPolicy>,
}

istio_enum!(SimpleLb {
    UNSPECIFIED,
    LEAST_CONN,
    RANDOM,
    PASSTHROUGH,
    ROUND_ROBIN,
    LEAST_REQUEST
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancerSettings {
    pub simple: Option<SimpleLb>,
    pub consistent_hash: Option<ConsistentHashLb>,
    pub locality_lb_setting: Option<LocalityLoadBalancerSetting>,
    pub warmup_duration_secs: Option<Duration>,
    pub warmup: Option<WarmupConfiguration>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WarmupConfiguration {
    pub duration: Option<Duration>,
    pub minimum_percent: Option<f64>,
    pub aggression: Option<f64>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsistentHashLb {
    pub http_header_name: Option<String>,
    pub http_cookie: Option<HttpCookie>,
    pub use_source_ip: Option<bool>,
    pub http_query_parameter_name: Option<String>,
    pub ring_hash: Option<RingHash>,
    pub maglev: Option<MagLev>,
    /// Deprecated in favour of `ringHash.minimumRingSize`.
    #[serde(default)]
    pub minimum_ring_size: u64,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpCookie {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub path: String,
    pub ttl: Option<Duration>,
    #[serde(default)]
    pub attributes: Vec<CookieAttribute>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CookieAttribute {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RingHash {
    #[serde(default)]
    pub minimum_ring_size: u64,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MagLev {
    #[serde(default)]
    pub table_size: u64,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityLoadBalancerSetting {
    #[serde(default)]
    pub distribute: Vec<LocalityDistribute>,
    #[serde(default)]
    pub failover: Vec<LocalityFailover>,
    #[serde(default)]
    pub failover_priority: Vec<String>,
    pub enabled: Option<bool>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityDistribute {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: BTreeMap<String, u32>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityFailover {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionPoolSettings {
    pub tcp: Option<TcpSettings>,
    pub http: Option<HttpSettings>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpSettings {
    #[serde(default)]
    pub max_connections: i32,
    pub connect_timeout: Option<Duration>,
    pub tcp_keepalive: Option<TcpKeepalive>,
    pub max_connection_duration: Option<Duration>,
    pub idle_timeout: Option<Duration>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpKeepalive {
    #[serde(default)]
    pub probes: u32,
    pub time: Option<Duration>,
    pub interval: Option<Duration>,
}

istio_enum!(H2UpgradePolicy {
    DEFAULT,
    DO_NOT_UPGRADE,
    UPGRADE
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpSettings {
    #[serde(default)]
    pub http1_max_pending_requests: i32,
    #[serde(default)]
    pub http2_max_requests: i32,
    #[serde(default)]
    pub max_requests_per_connection: i32,
    #[serde(default)]
    pub max_retries: i32,
    pub idle_timeout: Option<Duration>,
    pub h2_upgrade_policy: Option<H2UpgradePolicy>,
    #[serde(default)]
    pub use_client_protocol: bool,
    #[serde(default)]
    pub max_concurrent_streams: i32,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutlierDetection {
    #[serde(default)]
    pub split_external_local_origin_errors: bool,
    pub consecutive_local_origin_failures: Option<u32>,
    pub consecutive_gateway_errors: Option<u32>,
    #[serde(rename = "consecutive5xxErrors")]
    pub consecutive_5xx_errors: Option<u32>,
    pub interval: Option<Duration>,
    pub base_ejection_time: Option<Duration>,
    #[serde(default)]
    pub max_ejection_percent: i32,
    #[serde(default)]
    pub min_health_percent: i32,
    /// Deprecated in favour of `consecutive5xxErrors`/`consecutiveGatewayErrors`.
    #[serde(default)]
    pub consecutive_errors: i32,
}

istio_enum!(ClientTlsMode {
    DISABLE,
    SIMPLE,
    MUTUAL,
    ISTIO_MUTUAL
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientTlsSettings {
    #[serde(default)]
    pub mode: ClientTlsMode,
    #[serde(default)]
    pub client_certificate: String,
    #[serde(default)]
    pub private_key: String,
    #[serde(default)]
    pub ca_certificates: String,
    #[serde(default)]
    pub credential_name: String,
    #[serde(default)]
    pub subject_alt_names: Vec<String>,
    #[serde(default)]
    pub sni: String,
    pub insecure_skip_verify: Option<bool>,
    #[serde(default)]
    pub ca_crl: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TunnelSettings {
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub target_host: String,
    #[serde(default)]
    pub target_port: u32,
}

istio_enum!(ProxyProtocolVersion { V1, V2 });

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyProtocol {
    #[serde(default)]
    pub version: ProxyProtocolVersion,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryBudget {
    #[serde(default)]
    pub percent: Option<f64>,
    #[serde(default)]
    pub min_retry_concurrency: u32,
}

// ---------------------------------------------------------------------------------------------
// Gateway

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gateway {
    #[serde(default)]
    pub servers: Vec<Server>,
    #[serde(default)]
    pub selector: Labels,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Server {
    pub port: Option<Port>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub hosts: Vec<String>,
    pub tls: Option<ServerTlsSettings>,
    #[serde(default)]
    pub default_endpoint: String,
    #[serde(default)]
    pub name: String,
}

/// `Port` (Gateway servers) and `ServicePort` (ServiceEntry) share this shape.
#[serde_with::skip_serializing_none]
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Port {
    #[serde(default)]
    pub number: u32,
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub target_port: u32,
}

istio_enum!(ServerTlsMode {
    PASSTHROUGH,
    SIMPLE,
    MUTUAL,
    AUTO_PASSTHROUGH,
    ISTIO_MUTUAL,
    OPTIONAL_MUTUAL
});

istio_enum!(TlsProtocol {
    TLS_AUTO,
    TLSV1_0,
    TLSV1_1,
    TLSV1_2,
    TLSV1_3
});

/// Cipher suites Envoy (BoringSSL) accepts by name, as istiod lists them (`ValidCipherSuites`).
pub const CIPHER_SUITES: &[&str] = &[
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// The cipher suites of `requested` Envoy is sent: each known name (or `ALL`) once, also with a
/// BoringSSL operator (`-`, `+`, `!`) in front or in an equal-preference group (`[a|b]`) of
/// known names. istiod passes other expressions through and Envoy, which parses the list
/// strictly, rejects the listener; they are dropped instead (validation warns about names it
/// does not know; docs/decisions.md).
pub fn envoy_cipher_suites(requested: &[String]) -> Vec<String> {
    let known = |name: &str| name == "ALL" || CIPHER_SUITES.contains(&name);
    let mut out: Vec<String> = Vec::new();
    for cs in requested {
        let bare = cs.trim_start_matches(['-', '+', '!']);
        let ok = match bare.strip_prefix('[').and_then(|g| g.strip_suffix(']')) {
            Some(group) => group.split('|').all(known),
            None => known(bare),
        };
        if ok && !out.contains(cs) {
            out.push(cs.clone());
        }
    }
    out
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerTlsSettings {
    #[serde(default)]
    pub https_redirect: bool,
    #[serde(default)]
    pub mode: ServerTlsMode,
    #[serde(default)]
    pub server_certificate: String,
    #[serde(default)]
    pub private_key: String,
    #[serde(default)]
    pub ca_certificates: String,
    #[serde(default)]
    pub ca_crl: String,
    #[serde(default)]
    pub credential_name: String,
    #[serde(default)]
    pub credential_names: Vec<String>,
    /// For mutual TLS: the Secret (or `configmap://` ConfigMap) holding the CA certificates,
    /// in place of the CA of `credentialName(s)`.
    #[serde(default)]
    pub ca_cert_credential_name: String,
    #[serde(default)]
    pub tls_certificates: Vec<TlsCertificate>,
    #[serde(default)]
    pub subject_alt_names: Vec<String>,
    #[serde(default)]
    pub verify_certificate_spki: Vec<String>,
    #[serde(default)]
    pub verify_certificate_hash: Vec<String>,
    pub min_protocol_version: Option<TlsProtocol>,
    pub max_protocol_version: Option<TlsProtocol>,
    #[serde(default)]
    pub cipher_suites: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsCertificate {
    #[serde(default)]
    pub server_certificate: String,
    #[serde(default)]
    pub private_key: String,
    #[serde(default)]
    pub ca_certificates: String,
}

// ---------------------------------------------------------------------------------------------
// ServiceEntry, WorkloadEntry, WorkloadGroup

istio_enum!(Location {
    MESH_EXTERNAL,
    MESH_INTERNAL
});

istio_enum!(Resolution {
    NONE,
    STATIC,
    DNS,
    DNS_ROUND_ROBIN,
    DYNAMIC_DNS
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceEntry {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub ports: Vec<Port>,
    #[serde(default)]
    pub location: Location,
    #[serde(default)]
    pub resolution: Resolution,
    #[serde(default)]
    pub endpoints: Vec<WorkloadEntry>,
    pub workload_selector: Option<LabelSelector>,
    #[serde(default)]
    pub export_to: Vec<String>,
    #[serde(default)]
    pub subject_alt_names: Vec<String>,
}

/// The label that opts a ServiceEntry out of IP auto-allocation (`"false"`).
pub const ENABLE_AUTOALLOCATE_IP: &str = "networking.istio.io/enable-autoallocate-ip";

impl ServiceEntry {
    /// Whether its hosts get auto-allocated addresses (istiod's `ShouldV2AutoAllocateIP`, the
    /// feature on): no addresses of its own, a resolution the dataplane can honour an address
    /// for, and no opt-out label.
    pub fn auto_allocates(&self, labels: &BTreeMap<String, String>) -> bool {
        self.resolution != Resolution::NONE
            && self.addresses.is_empty()
            && !labels
                .get(ENABLE_AUTOALLOCATE_IP)
                .is_some_and(|v| v.eq_ignore_ascii_case("false"))
    }

    /// The hosts that get an address: wildcards only with DYNAMIC_DNS (istiod's `keepHost`).
    pub fn allocated_hosts(&self) -> impl Iterator<Item = &String> {
        self.hosts
            .iter()
            .filter(|h| !h.starts_with('*') || self.resolution == Resolution::DYNAMIC_DNS)
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadEntry {
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub ports: BTreeMap<String, u32>,
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub network: String,
    #[serde(default)]
    pub locality: String,
    #[serde(default)]
    pub weight: u32,
    #[serde(default)]
    pub service_account: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadGroup {
    pub metadata: Option<WorkloadGroupObjectMeta>,
    pub template: Option<WorkloadEntry>,
    pub probe: Option<ReadinessProbe>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadGroupObjectMeta {
    #[serde(default)]
    pub labels: Labels,
    #[serde(default)]
    pub annotations: Labels,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadinessProbe {
    #[serde(default)]
    pub initial_delay_seconds: i32,
    #[serde(default)]
    pub timeout_seconds: i32,
    #[serde(default)]
    pub period_seconds: i32,
    #[serde(default)]
    pub success_threshold: i32,
    #[serde(default)]
    pub failure_threshold: i32,
    pub http_get: Option<HttpHealthCheckConfig>,
    pub tcp_socket: Option<TcpHealthCheckConfig>,
    pub exec: Option<ExecHealthCheckConfig>,
    pub grpc: Option<GrpcHealthCheckConfig>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHealthCheckConfig {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub scheme: String,
    #[serde(default)]
    pub http_headers: Vec<HttpHeader>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpHealthCheckConfig {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub port: u32,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecHealthCheckConfig {
    #[serde(default)]
    pub command: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcHealthCheckConfig {
    #[serde(default)]
    pub port: u32,
    pub service: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Sidecar

istio_enum!(CaptureMode {
    DEFAULT,
    IPTABLES,
    NONE
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sidecar {
    pub workload_selector: Option<LabelSelector>,
    #[serde(default)]
    pub ingress: Vec<IstioIngressListener>,
    #[serde(default)]
    pub egress: Vec<IstioEgressListener>,
    pub inbound_connection_pool: Option<ConnectionPoolSettings>,
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IstioIngressListener {
    pub port: Option<Port>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub capture_mode: CaptureMode,
    #[serde(default)]
    pub default_endpoint: String,
    pub tls: Option<ServerTlsSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IstioEgressListener {
    pub port: Option<Port>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub capture_mode: CaptureMode,
    #[serde(default)]
    pub hosts: Vec<String>,
}

istio_enum!(OutboundTrafficPolicyMode {
    REGISTRY_ONLY,
    ALLOW_ANY
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutboundTrafficPolicy {
    #[serde(default)]
    pub mode: OutboundTrafficPolicyMode,
    pub egress_proxy: Option<Destination>,
}

// ---------------------------------------------------------------------------------------------
// EnvoyFilter

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyFilter {
    pub workload_selector: Option<LabelSelector>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub config_patches: Vec<EnvoyConfigObjectPatch>,
    #[serde(default)]
    pub priority: i32,
}

istio_enum!(ApplyTo {
    INVALID,
    LISTENER,
    FILTER_CHAIN,
    NETWORK_FILTER,
    HTTP_FILTER,
    ROUTE_CONFIGURATION,
    VIRTUAL_HOST,
    HTTP_ROUTE,
    CLUSTER,
    EXTENSION_CONFIG,
    BOOTSTRAP,
    LISTENER_FILTER
});

istio_enum!(PatchContext {
    ANY,
    SIDECAR_INBOUND,
    SIDECAR_OUTBOUND,
    GATEWAY,
    WAYPOINT
});

istio_enum!(PatchOperation {
    INVALID,
    MERGE,
    ADD,
    REMOVE,
    INSERT_BEFORE,
    INSERT_AFTER,
    INSERT_FIRST,
    REPLACE
});

istio_enum!(FilterClass {
    UNSPECIFIED,
    AUTHN,
    AUTHZ,
    STATS
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyConfigObjectPatch {
    #[serde(default)]
    pub apply_to: ApplyTo,
    #[serde(rename = "match")]
    pub match_: Option<EnvoyConfigObjectMatch>,
    pub patch: Option<EnvoyPatch>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyConfigObjectMatch {
    #[serde(default)]
    pub context: PatchContext,
    pub proxy: Option<ProxyMatch>,
    pub listener: Option<ListenerMatch>,
    pub route_configuration: Option<RouteConfigurationMatch>,
    pub cluster: Option<ClusterMatch>,
    /// Only with context WAYPOINT.
    pub waypoint: Option<WaypointMatch>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaypointMatch {
    #[serde(default)]
    pub port_number: u32,
    pub route: Option<WaypointRouteMatch>,
    pub filter: Option<FilterMatch>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaypointRouteMatch {
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyMatch {
    #[serde(default)]
    pub proxy_version: String,
    #[serde(default)]
    pub metadata: Labels,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerMatch {
    #[serde(default)]
    pub port_number: u32,
    #[serde(default)]
    pub port_name: String,
    pub filter_chain: Option<FilterChainMatch>,
    pub listener_filter: Option<String>,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterChainMatch {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub sni: String,
    #[serde(default)]
    pub transport_protocol: String,
    #[serde(default)]
    pub application_protocols: String,
    pub filter: Option<FilterMatch>,
    pub destination_port: Option<u32>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterMatch {
    #[serde(default)]
    pub name: String,
    pub sub_filter: Option<SubFilterMatch>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubFilterMatch {
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteConfigurationMatch {
    #[serde(default)]
    pub port_number: u32,
    #[serde(default)]
    pub port_name: String,
    #[serde(default)]
    pub gateway: String,
    pub vhost: Option<VirtualHostMatch>,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualHostMatch {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub domain_name: String,
    pub route: Option<RouteMatch>,
}

istio_enum!(RouteAction {
    ANY,
    ROUTE,
    REDIRECT,
    DIRECT_RESPONSE
});

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteMatch {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub action: RouteAction,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterMatch {
    #[serde(default)]
    pub port_number: u32,
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub subset: String,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyPatch {
    #[serde(default)]
    pub operation: PatchOperation,
    /// A `google.protobuf.Struct`: free-form Envoy config, checked when it is applied.
    pub value: Option<serde_json::Value>,
    #[serde(default)]
    pub filter_class: FilterClass,
}

// ---------------------------------------------------------------------------------------------
// ProxyConfig (networking.istio.io/v1beta1)

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyConfig {
    pub selector: Option<super::common::WorkloadSelector>,
    pub concurrency: Option<i32>,
    #[serde(default)]
    pub environment_variables: BTreeMap<String, String>,
    pub image: Option<ProxyImage>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyImage {
    #[serde(default)]
    pub image_type: String,
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
