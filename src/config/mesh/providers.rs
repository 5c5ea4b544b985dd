//! MeshConfig `extensionProviders`: the provider kinds Rudder reads, field for field.

use serde::Deserialize;

/// `extensionProviders[]`: the external authorizers (other provider kinds are ignored here).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionProvider {
    pub name: String,
    #[serde(default)]
    pub envoy_ext_authz_http: Option<ExtAuthzProvider>,
    #[serde(default)]
    pub envoy_ext_authz_grpc: Option<ExtAuthzProvider>,
    /// An access log to a file (Telemetry `accessLogging` names it).
    #[serde(default)]
    pub envoy_file_access_log: Option<FileAccessLogProvider>,
    /// Tracers (Telemetry `tracing` names them).
    #[serde(default)]
    pub zipkin: Option<ZipkinProvider>,
    #[serde(default)]
    pub opentelemetry: Option<OpenTelemetryProvider>,
    #[serde(default)]
    pub datadog: Option<CollectorProvider>,
    #[serde(default)]
    pub skywalking: Option<CollectorProvider>,
    /// Access logs over OTLP/gRPC to a collector (Envoy's OpenTelemetry access logger).
    #[serde(default)]
    pub envoy_otel_als: Option<OtelAccessLogProvider>,
    /// Access logs to Envoy's gRPC access-log service, HTTP and TCP flavours.
    #[serde(default)]
    pub envoy_http_als: Option<GrpcAccessLogProvider>,
    #[serde(default)]
    pub envoy_tcp_als: Option<GrpcAccessLogProvider>,
    /// Istio's standard metrics in Prometheus form (istio-proxy's `istio.stats` filter); the
    /// provider has no settings.
    #[serde(default)]
    pub prometheus: Option<serde_json::Value>,
}

/// Whether a ProxyConfig (as JSON) says `proxyHeaders.metadataExchangeHeaders.mode: IN_MESH`:
/// the peer metadata headers stay off requests leaving the mesh.
pub fn skips_mx_headers(proxy_config: &serde_json::Value) -> bool {
    proxy_config
        .pointer("/proxyHeaders/metadataExchangeHeaders/mode")
        .and_then(|m| m.as_str())
        == Some("IN_MESH")
}

/// Whether the metrics provider `name` is Prometheus: a provider of that name of the Prometheus
/// kind, or, as istiod's built-in provider, `prometheus` when no provider takes that name.
pub fn is_prometheus_provider(providers: &[ExtensionProvider], name: &str) -> bool {
    match providers.iter().find(|p| p.name == name) {
        Some(p) => p.prometheus.is_some(),
        None => name == "prometheus",
    }
}

/// `envoyHttpAls` / `envoyTcpAls`: entries streamed to a gRPC access-log service of the registry.
/// The header lists belong to the HTTP flavour only (`envoyTcpAls` has no such fields upstream).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcAccessLogProvider {
    /// `host` or `namespace/host` of a service in the registry.
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub log_name: String,
    #[serde(default)]
    pub filter_state_objects_to_log: Vec<String>,
    #[serde(default)]
    pub additional_request_headers_to_log: Vec<String>,
    #[serde(default)]
    pub additional_response_headers_to_log: Vec<String>,
    #[serde(default)]
    pub additional_response_trailers_to_log: Vec<String>,
}

/// `envoyOtelAls`: access logs to an OpenTelemetry collector of the registry.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OtelAccessLogProvider {
    /// `host` or `namespace/host` of a service in the registry.
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub log_name: String,
    #[serde(default)]
    pub log_format: Option<FileLogFormat>,
}

/// `zipkin`: spans as Zipkin v2 JSON to a service of the registry.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZipkinProvider {
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub max_tag_length: u32,
    #[serde(default, rename = "enable64bitTraceId")]
    pub enable_64bit_trace_id: bool,
    #[serde(default)]
    pub path: String,
    /// `USE_B3` (the default) or `USE_B3_WITH_W3C_PROPAGATION`.
    #[serde(default)]
    pub trace_context_option: Option<String>,
    #[serde(default)]
    pub timeout: Option<crate::config::common::Duration>,
    #[serde(default)]
    pub headers: Vec<ProviderHeader>,
}

/// A header a provider sends: a value, or the value of an environment variable of the control
/// plane (as istiod reads `envName`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub env_name: Option<String>,
}

impl ProviderHeader {
    pub fn resolved(&self) -> String {
        match (&self.value, &self.env_name) {
            (Some(v), _) => v.clone(),
            (None, Some(env)) => std::env::var(env).unwrap_or_default(),
            (None, None) => String::new(),
        }
    }
}

/// `datadog` and `skywalking`: spans to a collector service of the registry.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectorProvider {
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub max_tag_length: u32,
}

/// `opentelemetry`: spans over OTLP, gRPC (the default) or HTTP (`http.path`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenTelemetryProvider {
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub max_tag_length: u32,
    #[serde(default)]
    pub http: Option<OpenTelemetryHttp>,
    #[serde(default)]
    pub grpc: Option<OpenTelemetryGrpc>,
    #[serde(default)]
    pub resource_detectors: Option<ResourceDetectors>,
    #[serde(default)]
    pub dynatrace_sampler: Option<DynatraceSampler>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenTelemetryHttp {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub timeout: Option<crate::config::common::Duration>,
    #[serde(default)]
    pub headers: Vec<ProviderHeader>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenTelemetryGrpc {
    #[serde(default)]
    pub timeout: Option<crate::config::common::Duration>,
    #[serde(default)]
    pub initial_metadata: Vec<ProviderHeader>,
}

/// The resource detectors the tracer runs (each present means on).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDetectors {
    #[serde(default)]
    pub environment: Option<serde_json::Value>,
    #[serde(default)]
    pub dynatrace: Option<serde_json::Value>,
}

/// Dynatrace's adaptive sampler: its API is the OTLP/HTTP exporter's host unless `httpService`
/// names another.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DynatraceSampler {
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub cluster_id: i32,
    #[serde(default)]
    pub root_spans_per_minute: u32,
    #[serde(default)]
    pub http_service: Option<DynatraceApi>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DynatraceApi {
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub http: Option<OpenTelemetryHttp>,
}

/// `envoyFileAccessLog`: a path and a text format or JSON labels (Istio's default text when none).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileAccessLogProvider {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub log_format: Option<FileLogFormat>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileLogFormat {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub labels: Option<serde_json::Map<String, serde_json::Value>>,
}

/// An ext_authz service (HTTP or gRPC; the HTTP-only fields are empty for gRPC).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtAuthzProvider {
    /// `host` or `namespace/host` of a service in the registry.
    pub service: String,
    pub port: u32,
    /// A duration such as `0.5s` (Envoy's default when absent: 200ms).
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default)]
    pub path_prefix: String,
    #[serde(default)]
    pub fail_open: bool,
    /// Request headers sent to the authorizer (HTTP; none: Envoy's defaults).
    #[serde(default)]
    pub include_request_headers_in_check: Vec<String>,
    /// Headers of the authorizer's OK response copied to the request.
    #[serde(default)]
    pub headers_to_upstream_on_allow: Vec<String>,
    /// Headers of the authorizer's denial copied to the client.
    #[serde(default)]
    pub headers_to_downstream_on_deny: Vec<String>,
}
