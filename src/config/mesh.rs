//! MeshConfig: the `mesh` key of ConfigMap `istio` in the root namespace (the fields that matter
//! here), and Kubernetes label-selector matching, which mesh settings and registries share.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MeshConfig {
    #[serde(default)]
    pub trust_domain: Option<String>,
    /// Automatic mTLS (on unless `false`).
    #[serde(default)]
    pub enable_auto_mtls: Option<bool>,
    /// The providers Telemetry falls back to (`accessLogging` and `tracing` are applied;
    /// `metrics` is warned about).
    #[serde(default)]
    pub default_providers: Option<DefaultProviders>,
    /// Kubernetes Ingress: the class served (`kubernetes.io/ingress.class`), the gateway Service
    /// whose addresses go into its status, the gateway pods' `istio` label, and the mode
    /// (`DEFAULT`, `STRICT`, `OFF`).
    #[serde(default)]
    pub ingress_class: Option<String>,
    #[serde(default)]
    pub ingress_service: Option<String>,
    #[serde(default)]
    pub ingress_selector: Option<String>,
    /// A string; YAML 1.1 readers (and people) write `OFF` unquoted, which is `false`.
    #[serde(default)]
    pub ingress_controller_mode: Option<serde_json::Value>,
    #[serde(default)]
    pub root_namespace: Option<String>,
    #[serde(default)]
    pub discovery_selectors: Vec<LabelSelector>,
    #[serde(default)]
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
    /// `mode: LOCALHOST`: inbound traffic reaches the application on localhost instead of the
    /// pod's address (`PASSTHROUGH`, the default since Istio 1.10).
    #[serde(default)]
    pub inbound_traffic_policy: Option<InboundTrafficPolicy>,
    /// ProxyConfig defaults, kept as given (used by injection).
    #[serde(default)]
    pub default_config: Option<serde_json::Value>,
    /// Named providers AuthorizationPolicy `CUSTOM` refers to.
    #[serde(default)]
    pub extension_providers: Vec<ExtensionProvider>,
    /// How proxies normalise request paths before routing and authorization.
    #[serde(default)]
    pub path_normalization: Option<ProxyPathNormalization>,
    /// Other trust domains whose identities count as this mesh's (authorization principals).
    #[serde(default)]
    pub trust_domain_aliases: Vec<String>,
    /// Visibility of Services, VirtualServices and DestinationRules that set no `exportTo`.
    #[serde(default)]
    pub default_service_export_to: Vec<String>,
    #[serde(default)]
    pub default_virtual_service_export_to: Vec<String>,
    #[serde(default)]
    pub default_destination_rule_export_to: Vec<String>,
    /// Mesh-wide locality load balancing (a DestinationRule's setting wins).
    #[serde(default)]
    pub locality_lb_setting: Option<crate::config::networking::LocalityLoadBalancerSetting>,
    /// Envoy's access log: the file (`/dev/stdout`), `TEXT` or `JSON`, and a format of Envoy's
    /// command operators (Istio's own when empty).
    #[serde(default)]
    pub access_log_file: Option<String>,
    #[serde(default)]
    pub access_log_encoding: Option<String>,
    #[serde(default)]
    pub access_log_format: Option<String>,
    /// No listener-level access log (connections that match no filter chain).
    #[serde(default)]
    pub disable_envoy_listener_log: Option<bool>,
    /// Tracing without the Telemetry API (istiod's default: on): connection managers sample and
    /// tag, and the proxy's bootstrap tracer (written by pilot-agent) reports.
    #[serde(default)]
    pub enable_tracing: Option<bool>,
    /// Every cluster's connect timeout (istiod's default 10s) where a DestinationRule sets none.
    #[serde(default)]
    pub connect_timeout: Option<crate::config::common::Duration>,
    /// TCP keepalive on every upstream connection; a DestinationRule's overrides it field by field.
    #[serde(default)]
    pub tcp_keepalive: Option<crate::config::networking::TcpKeepalive>,
    /// `UPGRADE`: HTTP/1.1 to HTTP ports' upstreams goes as HTTP/2 unless a DestinationRule says not.
    #[serde(default)]
    pub h2_upgrade_policy: Option<String>,
    /// TLS the proxies originate (DestinationRule SIMPLE/MUTUAL) and gateways terminate:
    /// ECDH curves, cipher suites, and (gateways) the minimum version.
    #[serde(default)]
    pub tls_defaults: Option<TlsConfig>,
    /// The mesh's own mTLS on sidecar inbound: minimum version and cipher suites.
    #[serde(default, rename = "meshMTLS")]
    pub mesh_mtls: Option<TlsConfig>,
    /// Per-host service settings: `clusterLocal` keeps a host's traffic in the proxy's cluster.
    #[serde(default)]
    pub service_settings: Vec<ServiceSettings>,
    /// Which services ambient multi-network shares across clusters (read only with
    /// AMBIENT_ENABLE_MULTI_NETWORK, as istiod).
    #[serde(default)]
    pub service_scope_configs: Vec<ServiceScopeConfig>,
}

/// MeshConfig `inboundTrafficPolicy`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundTrafficPolicy {
    #[serde(default)]
    pub mode: Option<String>,
}

/// MeshConfig `tlsDefaults` and `meshMTLS` (istio.mesh.v1alpha1 `MeshConfig.TLSConfig`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsConfig {
    /// `TLS_AUTO` (TLS 1.2), `TLSV1_2` or `TLSV1_3`.
    #[serde(default)]
    pub min_protocol_version: Option<String>,
    #[serde(default)]
    pub ecdh_curves: Vec<String>,
    #[serde(default)]
    pub cipher_suites: Vec<String>,
}

/// The ECDH curves Envoy 1.40 accepts; it rejects a TLS context naming any other. istiod's
/// `ValidECDHCurves` also lists `P-224` and `X25519Kyber768Draft00`, which Envoy 1.40 rejects
/// (tried through a real Envoy): Rudder leaves them out and warns (docs/decisions.md).
pub const ECDH_CURVES: &[&str] = &["P-256", "P-521", "P-384", "X25519", "X25519MLKEM768"];

/// MeshConfig `serviceScopeConfigs[]`: services whose namespace and own labels match are `GLOBAL`
/// (their endpoints in every cluster reach every cluster) or `LOCAL`; an absent selector matches
/// everything, as istiod reads it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceScopeConfig {
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default)]
    pub services_selector: Option<LabelSelector>,
    #[serde(default)]
    pub scope: ServiceScope,
}

/// `serviceScopeConfigs[].scope`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[allow(clippy::upper_case_acronyms)]
pub enum ServiceScope {
    #[default]
    LOCAL,
    GLOBAL,
}

/// MeshConfig `serviceSettings[]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceSettings {
    #[serde(default)]
    pub settings: ServiceSettingsValues,
    #[serde(default)]
    pub hosts: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceSettingsValues {
    #[serde(default)]
    pub cluster_local: bool,
}

/// MeshConfig `pathNormalization`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProxyPathNormalization {
    #[serde(default)]
    pub normalization: PathNormalization,
}

/// istiod's levels; `DEFAULT` means `BASE`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash, serde::Serialize)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum PathNormalization {
    #[default]
    DEFAULT,
    NONE,
    BASE,
    MERGE_SLASHES,
    DECODE_AND_MERGE_SLASHES,
}

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

/// ProxyConfig `gatewayTopology`: what stands in front of a gateway (mesh `defaultConfig`, or a
/// proxy's own `PROXY_CONFIG`, which its agent builds from that and `proxy.istio.io/config`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayTopology {
    /// Trusted proxies in front of the gateway: the client is the Nth address from the right of
    /// `X-Forwarded-For` (0: the connection's own peer).
    #[serde(default)]
    pub num_trusted_proxies: u32,
    #[serde(default)]
    pub forward_client_cert_details: ForwardClientCertDetails,
    /// PROXY protocol on the gateway's listeners (an empty object turns it on).
    #[serde(default)]
    pub proxy_protocol: Option<serde_json::Map<String, serde_json::Value>>,
}

/// How a proxy treats `X-Forwarded-Client-Cert` (ProxyConfig's enum, Envoy's names).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash, serde::Serialize)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum ForwardClientCertDetails {
    #[default]
    UNDEFINED,
    SANITIZE,
    FORWARD_ONLY,
    APPEND_FORWARD,
    SANITIZE_SET,
    ALWAYS_FORWARD_ONLY,
}

impl GatewayTopology {
    /// The `gatewayTopology` of a ProxyConfig given as JSON; none when it has none or it does not
    /// parse (validation refuses such a mesh config; a proxy's metadata is its agent's).
    pub fn of_proxy_config(proxy_config: &serde_json::Value) -> Option<GatewayTopology> {
        proxy_config
            .get("gatewayTopology")
            .and_then(|t| serde_json::from_value(t.clone()).ok())
    }
}

/// MeshConfig `defaultProviders`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DefaultProviders {
    #[serde(default)]
    pub tracing: Vec<String>,
    #[serde(default)]
    pub metrics: Vec<String>,
    #[serde(default)]
    pub access_logging: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct OutboundTrafficPolicy {
    #[serde(default)]
    pub mode: Option<String>,
}

/// The ConfigMap that holds the mesh config (in the root namespace), and its key.
pub const MESH_CONFIGMAP: &str = "istio";
pub const MESH_KEY: &str = "mesh";

/// The ConfigMap istiod writes the CA root into, in every namespace.
pub const ROOT_CERT_CONFIGMAP: &str = "istio-ca-root-cert";

/// Every top-level MeshConfig field of istio.io/api (`mesh/v1alpha1/config.proto`): anything else
/// is refused, as istiod refuses it.
pub const MESH_FIELDS: &[&str] = &[
    "proxyListenPort",
    "proxyInboundListenPort",
    "proxyHttpPort",
    "connectTimeout",
    "hboneIdleTimeout",
    "protocolDetectionTimeout",
    "tcpKeepalive",
    "ingressClass",
    "ingressService",
    "ingressControllerMode",
    "ingressSelector",
    "enableTracing",
    "accessLogFile",
    "accessLogFormat",
    "accessLogEncoding",
    "enableEnvoyAccessLogService",
    "disableEnvoyListenerLog",
    "defaultConfig",
    "outboundTrafficPolicy",
    "inboundTrafficPolicy",
    "configSources",
    "enableAutoMtls",
    "trustDomain",
    "trustDomainAliases",
    "caCertificates",
    "defaultServiceExportTo",
    "trustDomainAliases",
    "defaultVirtualServiceExportTo",
    "defaultDestinationRuleExportTo",
    "rootNamespace",
    "localityLbSetting",
    "zoneAwareLbSetting",
    "dnsRefreshRate",
    "h2UpgradePolicy",
    "inboundClusterStatName",
    "outboundClusterStatName",
    "certificates",
    "serviceSettings",
    "serviceScopeConfigs",
    "enablePrometheusMerge",
    "verifyCertificateAtClient",
    "ca",
    "extensionProviders",
    "defaultProviders",
    "discoverySelectors",
    "pathNormalization",
    "defaultHttpRetryPolicy",
    "meshMTLS",
    "tlsDefaults",
    "defaultTrafficPolicy",
    "serviceEntryVisibility",
];

/// The MeshConfig fields Rudder acts on (`defaultConfig` by the injector). The others are
/// accepted and warned about (`validation::unhonoured`).
pub const HONOURED_MESH_FIELDS: &[&str] = &[
    "trustDomain",
    "serviceSettings",
    "defaultProviders",
    "ingressClass",
    "ingressService",
    "ingressSelector",
    "ingressControllerMode",
    "discoverySelectors",
    "extensionProviders",
    "pathNormalization",
    "outboundTrafficPolicy",
    "defaultConfig",
    "localityLbSetting",
    "enableAutoMtls",
    "protocolDetectionTimeout",
    "defaultServiceExportTo",
    "defaultVirtualServiceExportTo",
    "defaultDestinationRuleExportTo",
    "trustDomainAliases",
    "accessLogFile",
    "accessLogEncoding",
    "accessLogFormat",
    "disableEnvoyListenerLog",
    "enableTracing",
    "connectTimeout",
    "tcpKeepalive",
    "h2UpgradePolicy",
    "tlsDefaults",
    "meshMTLS",
    "inboundTrafficPolicy",
];

/// Of the telemetry providers Rudder applies, the fields it reads; any other is warned about.
const PROVIDER_FIELDS_READ: &[(&str, &[&str])] = &[
    ("envoyFileAccessLog", &["path", "logFormat"]),
    (
        "zipkin",
        &[
            "service",
            "port",
            "maxTagLength",
            "enable64bitTraceId",
            "path",
            "traceContextOption",
            "timeout",
            "headers",
        ],
    ),
    (
        "opentelemetry",
        &[
            "service",
            "port",
            "maxTagLength",
            "http",
            "grpc",
            "resourceDetectors",
            "dynatraceSampler",
        ],
    ),
    ("datadog", &["service", "port", "maxTagLength"]),
    ("skywalking", &["service", "port"]),
    ("envoyOtelAls", &["service", "port", "logName", "logFormat"]),
    (
        "envoyHttpAls",
        &[
            "service",
            "port",
            "logName",
            "filterStateObjectsToLog",
            "additionalRequestHeadersToLog",
            "additionalResponseHeadersToLog",
            "additionalResponseTrailersToLog",
        ],
    ),
    (
        "envoyTcpAls",
        &["service", "port", "logName", "filterStateObjectsToLog"],
    ),
];

/// What Rudder says of a field of an applied provider it does not read.
pub const PROVIDER_FIELD_NOT_APPLIED: &str = "this provider field is not applied";

/// The kinds of `extensionProviders[]` Rudder applies: the external authorizers, file, OpenTelemetry
/// and gRPC access logs, Zipkin and OpenTelemetry tracing. Others are accepted and warned about by name.
const HONOURED_PROVIDER_KINDS: &[&str] = &[
    "envoyExtAuthzHttp",
    "envoyExtAuthzGrpc",
    "envoyFileAccessLog",
    "zipkin",
    "opentelemetry",
    "datadog",
    "skywalking",
    "envoyOtelAls",
    "envoyHttpAls",
    "envoyTcpAls",
    "prometheus",
];

impl MeshConfig {
    /// Parses the `mesh` key of the mesh ConfigMap (YAML or JSON); blank text is the defaults.
    pub fn parse(text: &str) -> Result<MeshConfig, String> {
        MeshConfig::parse_value(text)
            .and_then(|v| serde_json::from_value(v).map_err(|e| format!("mesh config: {e}")))
    }

    /// The mesh config as a JSON value, its top-level fields checked against istio.io/api.
    pub fn parse_value(text: &str) -> Result<serde_json::Value, String> {
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Object(Default::default()));
        }
        let value: serde_json::Value =
            serde_saphyr::from_str(text).map_err(|e| format!("mesh config: {e}"))?;
        match &value {
            serde_json::Value::Object(fields) => {
                if let Some(unknown) = fields.keys().find(|k| !MESH_FIELDS.contains(&k.as_str())) {
                    return Err(format!("mesh config: unknown field {unknown:?}"));
                }
            }
            serde_json::Value::Null => return Ok(serde_json::Value::Object(Default::default())),
            _ => return Err("mesh config: expected a mapping".into()),
        }
        Ok(value)
    }
}

/// What of a `tlsDefaults` or `meshMTLS` value is not sent to the proxies: curves and cipher
/// suites Envoy does not know (istiod passes them on, and Envoy rejects the TLS context), a
/// repeated curve, and `meshMTLS.ecdhCurves`, which istiod refuses.
fn tls_config_warnings(
    field: &str,
    value: &serde_json::Value,
    out: &mut Vec<(String, &'static str)>,
) {
    let list = |key: &str| -> Vec<String> {
        value
            .get(key)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let curves = list("ecdhCurves");
    if field == "meshMTLS" && !curves.is_empty() {
        out.push((
            "data.mesh.meshMTLS.ecdhCurves".into(),
            "not applied: mesh TLS does not support ECDH curves configuration (istiod refuses it)",
        ));
    } else {
        for (i, curve) in curves.iter().enumerate() {
            if !ECDH_CURVES.contains(&curve.as_str()) {
                out.push((
                    format!("data.mesh.{field}.ecdhCurves[{i}]"),
                    "left out: Envoy 1.40 does not accept this ECDH curve (sent, it would reject the TLS context; istiod sends it)",
                ));
            } else if curves[..i].contains(curve) {
                out.push((
                    format!("data.mesh.{field}.ecdhCurves[{i}]"),
                    "a duplicate ECDH curve",
                ));
            }
        }
    }
    let ciphers = list("cipherSuites");
    let kept = crate::config::networking::envoy_cipher_suites(&ciphers);
    for (i, cipher) in ciphers.iter().enumerate() {
        if !kept.contains(cipher) {
            out.push((
                format!("data.mesh.{field}.cipherSuites[{i}]"),
                "left out: not a cipher suite Envoy knows (sent, it would reject the TLS context)",
            ));
        }
    }
}

/// Why a network gateway's `locality` and `weight` are warned about.
const GATEWAY_PLACEMENT: &str = "a network gateway's locality and weight are not used (nor by istiod): endpoints reached through it keep their own locality and weight";

/// The fields of a `meshNetworks` value that are read but change nothing, as (path, note).
pub fn unhonoured_mesh_networks_fields(text: &str) -> Vec<(String, &'static str)> {
    let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Some(networks) = value.get("networks").and_then(|n| n.as_object()) else {
        return out;
    };
    for (name, network) in networks {
        let gateways = network.get("gateways").and_then(|g| g.as_array());
        for (i, gateway) in gateways.into_iter().flatten().enumerate() {
            let set = |field: &str| match gateway.get(field) {
                Some(serde_json::Value::String(s)) => !s.is_empty(),
                Some(serde_json::Value::Number(n)) => n.as_u64() != Some(0),
                Some(serde_json::Value::Null) | None => false,
                Some(_) => true,
            };
            for field in ["locality", "weight"] {
                if set(field) {
                    out.push((
                        format!("meshNetworks.networks.{name}.gateways[{i}].{field}"),
                        GATEWAY_PLACEMENT,
                    ));
                }
            }
        }
    }
    out
}

/// The fields a mesh config sets that Rudder does not act on, as `(field, why)`; values Rudder
/// cannot follow count too (`enableAutoMtls: false`, a protocol detection timeout).
pub fn unhonoured_mesh_fields(text: &str) -> Vec<(String, &'static str)> {
    let Ok(serde_json::Value::Object(fields)) = MeshConfig::parse_value(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, value) in &fields {
        let unset = match value {
            serde_json::Value::Null => true,
            serde_json::Value::Array(a) => a.is_empty(),
            serde_json::Value::Object(o) => o.is_empty(),
            serde_json::Value::String(s) => s.is_empty(),
            _ => false,
        };
        if unset {
            continue;
        }
        let note = match name.as_str() {
            "protocolDetectionTimeout" if !matches!(value.as_str(), Some("0s" | "0" | "0ms")) => {
                Some("protocol detection waits for the client without a deadline")
            }
            "defaultProviders" => {
                // Access logging, tracing and Prometheus metrics are applied; metrics providers
                // of other kinds (istiod's built-in `stackdriver`) are not.
                let providers: Vec<ExtensionProvider> = fields
                    .get("extensionProviders")
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                    .unwrap_or_default();
                let names = value.get("metrics").and_then(|v| v.as_array());
                for name in names.into_iter().flatten().filter_map(|n| n.as_str()) {
                    if !is_prometheus_provider(&providers, name) {
                        out.push((
                            "data.mesh.defaultProviders.metrics".to_string(),
                            "only Prometheus metrics providers are applied",
                        ));
                        break;
                    }
                }
                None
            }
            // Tracing's sampling, tags and path tag length are applied; the tracer's address
            // is the agent's; proxy metadata goes to the injected proxies. Of `proxyHeaders`,
            // only the metadata-exchange mode is read; the headers keep istiod's defaults.
            "defaultConfig" => {
                let headers = value.get("proxyHeaders").and_then(|h| h.as_object());
                for (field, _) in headers
                    .into_iter()
                    .flatten()
                    .filter(|(f, _)| *f != "metadataExchangeHeaders")
                {
                    out.push((
                        format!("data.mesh.defaultConfig.proxyHeaders.{field}"),
                        "not applied: the proxies keep istiod's default for this header (X-Forwarded-Client-Cert: the caller's certificate appended on sidecar inbound)",
                    ));
                }
                None
            }
            "tlsDefaults" | "meshMTLS" => {
                tls_config_warnings(name, value, &mut out);
                None
            }
            "outboundTrafficPolicy" if value.get("egressProxy").is_some() => {
                Some("no egress proxy: unknown destinations are passed through directly")
            }
            "extensionProviders" => {
                for (i, provider) in value.as_array().into_iter().flatten().enumerate() {
                    let kinds = provider.as_object().into_iter().flatten();
                    for (kind, settings) in kinds.filter(|(k, _)| *k != "name") {
                        if !HONOURED_PROVIDER_KINDS.contains(&kind.as_str()) {
                            out.push((
                                format!("data.mesh.extensionProviders[{i}].{kind}"),
                                PROVIDER_NOT_APPLIED,
                            ));
                            continue;
                        }
                        // Of an applied provider, the settings Rudder does not read.
                        let Some(read) = PROVIDER_FIELDS_READ
                            .iter()
                            .find(|(k, _)| *k == kind)
                            .map(|(_, f)| *f)
                        else {
                            continue;
                        };
                        let fields = settings.as_object().into_iter().flatten();
                        for (field, _) in fields.filter(|(f, _)| !read.contains(&f.as_str())) {
                            out.push((
                                format!("data.mesh.extensionProviders[{i}].{kind}.{field}"),
                                PROVIDER_FIELD_NOT_APPLIED,
                            ));
                        }
                    }
                }
                None
            }
            n if HONOURED_MESH_FIELDS.contains(&n) => None,
            "serviceScopeConfigs" => Some(SERVICE_SCOPE_ONLY_MULTI_NETWORK),
            _ => Some(MESH_FIELD_NOT_APPLIED),
        };
        if let Some(note) = note {
            out.push((format!("data.mesh.{name}"), note));
        }
    }
    out
}

/// What Rudder says of a MeshConfig field it does not act on.
pub const MESH_FIELD_NOT_APPLIED: &str = "this MeshConfig field is not applied";

/// `serviceScopeConfigs` is read by ambient multi-network alone, in istiod as here.
pub const SERVICE_SCOPE_ONLY_MULTI_NETWORK: &str =
    "applied only with AMBIENT_ENABLE_MULTI_NETWORK=true (ambient across networks), as istiod";

/// What Rudder says of an extension provider of a kind it does not apply.
pub const PROVIDER_NOT_APPLIED: &str = "this extension provider kind is not applied";

/// Whether `labels` carry every label of `selector` (an empty selector selects everything): the
/// rule of Istio's workload selectors and Kubernetes `matchLabels`.
pub fn labels_match(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Kubernetes label selector semantics (matchLabels AND every matchExpression).
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = sel
        .match_labels
        .as_ref()
        .is_none_or(|m| labels_match(m, labels));
    let exprs_ok = sel.match_expressions.as_ref().is_none_or(|exprs| {
        exprs.iter().all(|e| {
            let values = e.values.clone().unwrap_or_default();
            match e.operator.as_str() {
                "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
                "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
                "Exists" => labels.contains_key(&e.key),
                "DoesNotExist" => !labels.contains_key(&e.key),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn label_selectors() {
        let labels: BTreeMap<String, String> = [("env".to_string(), "prod".to_string())].into();
        let by_label = LabelSelector {
            match_labels: Some(labels.clone()),
            ..Default::default()
        };
        assert!(selector_matches(&by_label, &labels));
        assert!(!selector_matches(&by_label, &BTreeMap::new()));
        let expr = |op: &str, vals: &[&str]| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".into(),
                operator: op.into(),
                values: Some(vals.iter().map(|s| s.to_string()).collect()),
            }]),
            ..Default::default()
        };
        assert!(selector_matches(&expr("In", &["prod", "qa"]), &labels));
        assert!(!selector_matches(&expr("NotIn", &["prod"]), &labels));
        assert!(selector_matches(&expr("Exists", &[]), &labels));
        assert!(selector_matches(
            &expr("DoesNotExist", &[]),
            &BTreeMap::new()
        ));
    }

    /// ProxyConfig `proxyHeaders` of the mesh's `defaultConfig` (the client-certificate header
    /// among them) are named: Rudder applies istiod's defaults, and reads only the
    /// metadata-exchange mode.
    #[test]
    fn proxy_headers_for_client_certificates_are_warned_about() {
        let warned = unhonoured_mesh_fields(
            "defaultConfig:\n  proxyHeaders:\n    forwardedClientCert: SANITIZE\n    server: {disabled: true}\n",
        );
        let paths: Vec<&str> = warned.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "data.mesh.defaultConfig.proxyHeaders.forwardedClientCert",
                "data.mesh.defaultConfig.proxyHeaders.server"
            ]
        );
    }

    #[test]
    fn mesh_config_parses_istio_yaml() {
        let text = "trustDomain: example.org\ndiscoverySelectors:\n- matchLabels: {istio-discovery: enabled}\noutboundTrafficPolicy:\n  mode: REGISTRY_ONLY\ndefaultConfig:\n  discoveryAddress: istiod.istio-system.svc:15012\nenableTracing: true\n";
        let mc = MeshConfig::parse(text).unwrap();
        assert_eq!(mc.trust_domain.as_deref(), Some("example.org"));
        assert_eq!(mc.discovery_selectors.len(), 1);
        assert_eq!(
            mc.outbound_traffic_policy.unwrap().mode.as_deref(),
            Some("REGISTRY_ONLY")
        );
    }
}

#[cfg(test)]
mod metrics_providers {
    use super::*;

    /// Prometheus metrics providers (istiod's built-in `prometheus`, or one of that kind) are
    /// applied; a default metrics provider of another kind is warned about.
    #[test]
    fn only_prometheus_metrics_providers_are_applied() {
        let warned = |text: &str| -> Vec<String> {
            unhonoured_mesh_fields(text)
                .into_iter()
                .map(|(f, _)| f)
                .collect()
        };
        assert!(warned("defaultProviders: {metrics: [prometheus]}").is_empty());
        assert!(
            warned("defaultProviders: {metrics: [prom]}\nextensionProviders: [{name: prom, prometheus: {}}]")
                .is_empty()
        );
        assert_eq!(
            warned("defaultProviders: {metrics: [stackdriver]}"),
            ["data.mesh.defaultProviders.metrics"]
        );
        let providers = vec![ExtensionProvider {
            name: "prometheus".into(),
            envoy_file_access_log: Some(Default::default()),
            ..Default::default()
        }];
        assert!(!is_prometheus_provider(&providers, "prometheus"));
    }
}
