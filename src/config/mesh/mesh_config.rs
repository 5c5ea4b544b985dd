//! The MeshConfig fields Rudder reads, how the `mesh` key parses, and Kubernetes label-selector
//! matching.

use super::providers::*;
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
    use super::super::unhonoured::unhonoured_mesh_fields;
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
