//! DestinationRule: subsets and traffic policies (load balancing, locality, connection pool,
//! outlier detection, TLS, tunnel).

use super::virtual_service::PortSelector;
use crate::config::common::Duration;
use crate::config::common::Labels;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    pub workload_selector: Option<crate::config::common::WorkloadSelector>,
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
