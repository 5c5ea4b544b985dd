//! gateway.networking.k8s.io: the Kubernetes Gateway API kinds istiod 1.30 serves (Gateway API
//! v1.5, standard and experimental channels), field for field with the CRDs' schemas. Unknown
//! fields are rejected, as the API server rejects them; fields Rudder reads but does not honour
//! are warned about by name (`validation::unhonoured`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The API group of every kind here.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// `spec.controllerName` of the GatewayClasses istiod owns.
pub const CONTROLLER: &str = "istio.io/gateway-controller";
pub const MESH_CONTROLLER: &str = "istio.io/mesh-controller";
pub const UNMANAGED_CONTROLLER: &str = "istio.io/unmanaged-gateway";
/// Ambient east-west gateways (class `istio-east-west`, ambient multi-network only).
pub const EAST_WEST_CONTROLLER: &str = "istio.io/eastwest-controller";
/// The class of ambient east-west gateways.
pub const EAST_WEST_CLASS: &str = "istio-east-west";
/// The class of a Gateway standing for another network's gateway (not deployed here).
pub const REMOTE_CLASS: &str = "istio-remote";
/// On a Gateway: the service account its pods run as (istiod's `GatewaySA`).
pub const SERVICE_ACCOUNT_ANNOTATION: &str = "gateway.istio.io/service-account";

/// Whether Gateways of `controller` are deployed and served as waypoints are (a waypoint or an
/// ambient east-west gateway): the waypoint listener set, no routes, the Gateway's own name.
pub fn waypoint_like(controller: &str) -> bool {
    controller == MESH_CONTROLLER || controller == EAST_WEST_CONTROLLER
}

// ---------------------------------------------------------------------------------------------
// GatewayClass

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayClass {
    #[serde(default)]
    pub controller_name: String,
    pub description: Option<String>,
    pub parameters_ref: Option<ParametersReference>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParametersReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Gateway

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gateway {
    #[serde(default)]
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    #[serde(default)]
    pub addresses: Vec<GatewayAddress>,
    pub infrastructure: Option<GatewayInfrastructure>,
    pub allowed_listeners: Option<AllowedListeners>,
    pub tls: Option<GatewayTlsConfig>,
    pub default_scope: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Listener {
    #[serde(default)]
    pub name: String,
    pub hostname: Option<String>,
    #[serde(default)]
    pub port: u32,
    #[serde(default)]
    pub protocol: String,
    pub tls: Option<ListenerTls>,
    pub allowed_routes: Option<AllowedRoutes>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerTls {
    /// `Terminate` (the default) or `Passthrough`.
    pub mode: Option<String>,
    #[serde(default)]
    pub certificate_refs: Vec<SecretObjectReference>,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretObjectReference {
    pub group: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedRoutes {
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default)]
    pub kinds: Vec<RouteGroupKind>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    pub from: Option<String>,
    pub selector: Option<LabelSelector>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteGroupKind {
    pub group: Option<String>,
    #[serde(default)]
    pub kind: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayAddress {
    /// `IPAddress` (the default), `Hostname` or `NamedAddress`.
    #[serde(rename = "type")]
    pub address_type: Option<String>,
    #[serde(default)]
    pub value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayInfrastructure {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    pub parameters_ref: Option<LocalParametersReference>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalParametersReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedListeners {
    pub namespaces: Option<ListenerNamespaces>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerNamespaces {
    pub from: Option<String>,
    pub selector: Option<LabelSelector>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayTlsConfig {
    pub backend: Option<GatewayBackendTls>,
    pub frontend: Option<FrontendTls>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayBackendTls {
    pub client_certificate_ref: Option<SecretObjectReference>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontendTls {
    pub default: Option<FrontendTlsConfig>,
    #[serde(default)]
    pub per_port: Vec<FrontendTlsPerPort>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontendTlsConfig {
    pub validation: Option<FrontendTlsValidation>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontendTlsPerPort {
    #[serde(default)]
    pub port: u32,
    pub tls: Option<FrontendTlsConfig>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontendTlsValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<ObjectReference>,
    pub mode: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Routes: what every route kind shares

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParentReference {
    pub group: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
    pub section_name: Option<String>,
    pub port: Option<u32>,
}

impl ParentReference {
    /// `Kind namespace/name`, with its section or port, for messages (`route_ns` fills an
    /// unset namespace, as the spec reads it).
    pub fn display(&self, route_ns: &str) -> String {
        let mut out = format!(
            "{} {}/{}",
            self.kind.as_deref().unwrap_or("Gateway"),
            self.namespace.as_deref().unwrap_or(route_ns),
            self.name
        );
        if let Some(section) = &self.section_name {
            out += &format!(" section {section}");
        }
        if let Some(port) = self.port {
            out += &format!(" port {port}");
        }
        out
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<u32>,
    pub weight: Option<u32>,
}

/// A backend of an HTTP or gRPC rule: a [`BackendRef`] with filters of its own.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpBackendRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<u32>,
    pub weight: Option<u32>,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
}

impl HttpBackendRef {
    pub fn backend(&self) -> BackendRef {
        BackendRef {
            group: self.group.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            port: self.port,
            weight: self.weight,
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPersistence {
    pub session_name: Option<String>,
    pub absolute_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    #[serde(rename = "type")]
    pub persistence_type: Option<String>,
    pub cookie_config: Option<CookieConfig>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CookieConfig {
    pub lifetime_type: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// HTTPRoute

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRoute {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<HttpRouteRule>,
    pub use_default_gateways: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteRule {
    pub name: Option<String>,
    #[serde(default)]
    pub matches: Vec<HttpRouteMatch>,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
    pub timeouts: Option<HttpRouteTimeouts>,
    pub retry: Option<HttpRouteRetry>,
    pub session_persistence: Option<SessionPersistence>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteMatch {
    pub path: Option<HttpPathMatch>,
    #[serde(default)]
    pub headers: Vec<HttpHeaderMatch>,
    #[serde(default)]
    pub query_params: Vec<HttpHeaderMatch>,
    pub method: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpPathMatch {
    /// `Exact`, `PathPrefix` (the default) or `RegularExpression`.
    #[serde(rename = "type")]
    pub match_type: Option<String>,
    pub value: Option<String>,
}

/// A header or query parameter match: `Exact` (the default) or `RegularExpression`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeaderMatch {
    #[serde(rename = "type")]
    pub match_type: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

/// An HTTPRoute or GRPCRoute filter's `type`: each filter the spec defines, so that translating
/// and validating them are matches the compiler checks; a type the spec may add later is kept as
/// written (`Other`) and reported unsupported on the route, as istiod reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(from = "String", into = "String")]
pub enum FilterType {
    RequestHeaderModifier,
    ResponseHeaderModifier,
    RequestMirror,
    RequestRedirect,
    UrlRewrite,
    Cors,
    ExternalAuth,
    ExtensionRef,
    Other(String),
}

impl FilterType {
    /// Every type the spec defines.
    pub const ALL: [FilterType; 8] = [
        FilterType::RequestHeaderModifier,
        FilterType::ResponseHeaderModifier,
        FilterType::RequestMirror,
        FilterType::RequestRedirect,
        FilterType::UrlRewrite,
        FilterType::Cors,
        FilterType::ExternalAuth,
        FilterType::ExtensionRef,
    ];

    /// The name the spec gives it.
    pub fn name(&self) -> &str {
        match self {
            FilterType::RequestHeaderModifier => "RequestHeaderModifier",
            FilterType::ResponseHeaderModifier => "ResponseHeaderModifier",
            FilterType::RequestMirror => "RequestMirror",
            FilterType::RequestRedirect => "RequestRedirect",
            FilterType::UrlRewrite => "URLRewrite",
            FilterType::Cors => "CORS",
            FilterType::ExternalAuth => "ExternalAuth",
            FilterType::ExtensionRef => "ExtensionRef",
            FilterType::Other(name) => name,
        }
    }

    /// The field of the filter that holds its settings.
    pub fn field(&self) -> &'static str {
        match self {
            FilterType::RequestHeaderModifier => "requestHeaderModifier",
            FilterType::ResponseHeaderModifier => "responseHeaderModifier",
            FilterType::RequestMirror => "requestMirror",
            FilterType::RequestRedirect => "requestRedirect",
            FilterType::UrlRewrite => "urlRewrite",
            FilterType::Cors => "cors",
            FilterType::ExternalAuth => "externalAuth",
            FilterType::ExtensionRef | FilterType::Other(_) => "extensionRef",
        }
    }
}

impl Default for FilterType {
    fn default() -> FilterType {
        FilterType::Other(String::new())
    }
}

impl From<String> for FilterType {
    fn from(name: String) -> FilterType {
        FilterType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .unwrap_or(FilterType::Other(name))
    }
}

impl From<FilterType> for String {
    fn from(t: FilterType) -> String {
        t.name().to_string()
    }
}

impl HttpRouteFilter {
    /// Whether the field of filter type `t` is set.
    pub fn sets(&self, t: &FilterType) -> bool {
        match t {
            FilterType::RequestHeaderModifier => self.request_header_modifier.is_some(),
            FilterType::ResponseHeaderModifier => self.response_header_modifier.is_some(),
            FilterType::RequestMirror => self.request_mirror.is_some(),
            FilterType::RequestRedirect => self.request_redirect.is_some(),
            FilterType::UrlRewrite => self.url_rewrite.is_some(),
            FilterType::Cors => self.cors.is_some(),
            FilterType::ExternalAuth => self.external_auth.is_some(),
            FilterType::ExtensionRef | FilterType::Other(_) => self.extension_ref.is_some(),
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteFilter {
    #[serde(rename = "type", default)]
    pub filter_type: FilterType,
    pub request_header_modifier: Option<HttpHeaderFilter>,
    pub response_header_modifier: Option<HttpHeaderFilter>,
    pub request_mirror: Option<HttpRequestMirrorFilter>,
    pub request_redirect: Option<HttpRequestRedirectFilter>,
    pub url_rewrite: Option<HttpUrlRewriteFilter>,
    pub cors: Option<HttpCorsFilter>,
    pub external_auth: Option<serde_json::Value>,
    pub extension_ref: Option<LocalObjectReference>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalObjectReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeaderFilter {
    #[serde(default)]
    pub set: Vec<HttpHeader>,
    #[serde(default)]
    pub add: Vec<HttpHeader>,
    #[serde(default)]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRequestMirrorFilter {
    #[serde(default)]
    pub backend_ref: BackendRef,
    pub percent: Option<u32>,
    pub fraction: Option<Fraction>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fraction {
    #[serde(default)]
    pub numerator: u32,
    pub denominator: Option<u32>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRequestRedirectFilter {
    pub scheme: Option<String>,
    pub hostname: Option<String>,
    pub path: Option<HttpPathModifier>,
    pub port: Option<u32>,
    pub status_code: Option<u32>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpUrlRewriteFilter {
    pub hostname: Option<String>,
    pub path: Option<HttpPathModifier>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpPathModifier {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type", default)]
    pub modifier_type: String,
    pub replace_full_path: Option<String>,
    pub replace_prefix_match: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpCorsFilter {
    #[serde(default)]
    pub allow_origins: Vec<String>,
    pub allow_credentials: Option<bool>,
    #[serde(default)]
    pub allow_methods: Vec<String>,
    #[serde(default)]
    pub allow_headers: Vec<String>,
    #[serde(default)]
    pub expose_headers: Vec<String>,
    pub max_age: Option<u32>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteTimeouts {
    pub request: Option<String>,
    pub backend_request: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteRetry {
    #[serde(default)]
    pub codes: Vec<u32>,
    pub attempts: Option<u32>,
    pub backoff: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// GRPCRoute

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRoute {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<GrpcRouteRule>,
    pub use_default_gateways: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRouteRule {
    pub name: Option<String>,
    #[serde(default)]
    pub matches: Vec<GrpcRouteMatch>,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
    pub session_persistence: Option<SessionPersistence>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRouteMatch {
    pub method: Option<GrpcMethodMatch>,
    #[serde(default)]
    pub headers: Vec<HttpHeaderMatch>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcMethodMatch {
    #[serde(rename = "type")]
    pub match_type: Option<String>,
    pub service: Option<String>,
    pub method: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// TCPRoute and TLSRoute

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRoute {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub rules: Vec<L4RouteRule>,
    pub use_default_gateways: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsRoute {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<L4RouteRule>,
    pub use_default_gateways: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct L4RouteRule {
    pub name: Option<String>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

// ---------------------------------------------------------------------------------------------
// ReferenceGrant

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReferenceGrant {
    #[serde(default)]
    pub from: Vec<ReferenceGrantFrom>,
    #[serde(default)]
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReferenceGrantFrom {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReferenceGrantTo {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    pub name: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// BackendTLSPolicy

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendTlsPolicy {
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub validation: BackendTlsValidation,
    /// Implementation-specific TLS options (istiod reads none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// A policy's target in its own namespace, a port of it by `sectionName`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTargetReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    pub section_name: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendTlsValidation {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ca_certificate_refs: Vec<LocalObjectReference>,
    #[serde(rename = "wellKnownCACertificates")]
    pub well_known_ca_certificates: Option<String>,
    #[serde(default)]
    pub hostname: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<SubjectAltName>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubjectAltName {
    #[serde(default, rename = "type")]
    pub type_: String,
    pub hostname: Option<String>,
    pub uri: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// ListenerSet

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerSet {
    #[serde(default)]
    pub parent_ref: ParentGatewayReference,
    #[serde(default)]
    pub listeners: Vec<Listener>,
}

/// The Gateway a ListenerSet adds listeners to.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParentGatewayReference {
    pub group: Option<String>,
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter's type reads as the spec's name and writes back as written, a type the spec
    /// does not define (yet) included, so config dumps show what the user wrote.
    #[test]
    fn filter_types_read_and_write_as_written() {
        for (written, read) in [
            ("URLRewrite", FilterType::UrlRewrite),
            ("CORS", FilterType::Cors),
            ("FutureFilter", FilterType::Other("FutureFilter".into())),
        ] {
            let json = serde_json::json!({ "type": written });
            let filter: HttpRouteFilter = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(filter.filter_type, read);
            assert_eq!(serde_json::to_value(&filter).unwrap(), json);
        }
    }
}
