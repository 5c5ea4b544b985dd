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
    #[serde(default)]
    pub root_namespace: Option<String>,
    #[serde(default)]
    pub discovery_selectors: Vec<LabelSelector>,
    #[serde(default)]
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
    /// ProxyConfig defaults, kept as given (used by injection).
    #[serde(default)]
    pub default_config: Option<serde_json::Value>,
    /// Named providers AuthorizationPolicy `CUSTOM` refers to.
    #[serde(default)]
    pub extension_providers: Vec<ExtensionProvider>,
    /// How proxies normalise request paths before routing and authorization.
    #[serde(default)]
    pub path_normalization: Option<ProxyPathNormalization>,
    /// Mesh-wide locality load balancing (a DestinationRule's setting wins).
    #[serde(default)]
    pub locality_lb_setting: Option<crate::config::networking::LocalityLoadBalancerSetting>,
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

impl MeshConfig {
    /// Parses the `mesh` key of the mesh ConfigMap (YAML or JSON); blank text is the defaults.
    pub fn parse(text: &str) -> Result<MeshConfig, String> {
        if text.trim().is_empty() {
            return Ok(MeshConfig::default());
        }
        serde_saphyr::from_str::<serde_json::Value>(text)
            .map_err(|e| format!("mesh config: {e}"))
            .and_then(|v| serde_json::from_value(v).map_err(|e| format!("mesh config: {e}")))
    }
}

/// Kubernetes label selector semantics (matchLabels AND every matchExpression).
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = sel
        .match_labels
        .as_ref()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
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
