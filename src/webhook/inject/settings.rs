//! The injection template's settings: from the daemon's flags, and from ConfigMap
//! `istio-sidecar-injector` (`config` and `values`), with istiod's chart defaults.

use super::pod::InjectError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What the daemon's flags say about the mesh, for the proxies it injects.
#[derive(Debug, Clone)]
pub struct InjectorSettings {
    pub revision: String,
    /// Other names of this revision (istiod's revision tags): namespaces and pods labelled
    /// `istio.io/rev=<tag>` are ours too.
    pub revision_tags: Vec<String>,
    pub system_namespace: String,
    pub domain_suffix: String,
    pub trust_domain: String,
    /// xDS and CA address proxies dial (istiod: `istiod.istio-system.svc:15012`).
    pub discovery_address: String,
    pub cluster_id: String,
}

impl Default for InjectorSettings {
    fn default() -> Self {
        InjectorSettings {
            revision: "default".into(),
            revision_tags: Vec::new(),
            system_namespace: "istio-system".into(),
            domain_suffix: "cluster.local".into(),
            trust_domain: "cluster.local".into(),
            discovery_address: "istiod.istio-system.svc:15012".into(),
            cluster_id: "Kubernetes".into(),
        }
    }
}

/// The injection template's settings, with istiod chart defaults for anything the ConfigMap omits.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    pub policy_enabled: bool,
    pub always_inject: Vec<LabelSelector>,
    pub never_inject: Vec<LabelSelector>,
    pub injected_annotations: BTreeMap<String, String>,
    pub image: String,
    /// `hub/image:tag` without the variant, to which an image type (ProxyConfig `image`, the
    /// `sidecar.istio.io/proxyImageType` annotation) is appended; empty when the values name a
    /// whole image reference, which no image type changes.
    pub base_image: String,
    pub pull_policy: Option<String>,
    pub resources: Value,
    pub log_level: String,
    pub component_log_level: String,
    pub status_port: u16,
    pub hold_application: bool,
    pub privileged: bool,
    pub include_ip_ranges: String,
    pub exclude_ip_ranges: String,
    pub include_inbound_ports: String,
    pub exclude_inbound_ports: String,
    pub exclude_outbound_ports: String,
    pub rewrite_probes: bool,
    /// `sidecarInjectorWebhook.enableNamespacesByDefault`: pods in namespaces without injection
    /// labels are injected unless they say no.
    pub namespaces_by_default: bool,
    pub mesh_id: Option<String>,
    pub network: Option<String>,
    pub cluster_id: Option<String>,
    pub ca_address: Option<String>,
}

pub const DEFAULT_HUB: &str = "docker.io/istio";
pub const DEFAULT_TAG: &str = "1.30.0";

impl Default for Template {
    fn default() -> Self {
        Template {
            policy_enabled: true,
            always_inject: Vec::new(),
            never_inject: Vec::new(),
            injected_annotations: BTreeMap::new(),
            image: format!("{DEFAULT_HUB}/proxyv2:{DEFAULT_TAG}"),
            base_image: format!("{DEFAULT_HUB}/proxyv2:{DEFAULT_TAG}"),
            pull_policy: None,
            resources: json!({
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"cpu": "2000m", "memory": "1024Mi"},
            }),
            log_level: "warning".into(),
            component_log_level: "misc:error".into(),
            status_port: 15020,
            hold_application: false,
            privileged: false,
            include_ip_ranges: "*".into(),
            exclude_ip_ranges: String::new(),
            include_inbound_ports: "*".into(),
            exclude_inbound_ports: String::new(),
            exclude_outbound_ports: String::new(),
            rewrite_probes: true,
            namespaces_by_default: false,
            mesh_id: None,
            network: None,
            cluster_id: None,
            ca_address: None,
        }
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct InjectorConfigDoc {
    policy: Option<String>,
    #[serde(default)]
    always_inject_selector: Vec<LabelSelector>,
    #[serde(default)]
    never_inject_selector: Vec<LabelSelector>,
    #[serde(default)]
    injected_annotations: BTreeMap<String, String>,
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Template {
    /// Reads the ConfigMap's `config` (YAML) and `values` (JSON). Unknown keys (Go templates, other
    /// components' values) are ignored; a malformed document is an error and the caller keeps the
    /// template it had.
    pub fn from_configmap(data: &BTreeMap<String, String>) -> Result<Template, InjectError> {
        let mut t = Template::default();
        if let Some(text) = data.get("config").filter(|t| !t.trim().is_empty()) {
            let doc: InjectorConfigDoc = serde_saphyr::from_str(text)
                .map_err(|e| InjectError::Template(format!("config: {e}")))?;
            if let Some(policy) = doc.policy {
                t.policy_enabled = match policy.as_str() {
                    "enabled" => true,
                    "disabled" => false,
                    other => {
                        return Err(InjectError::Template(format!(
                            "config.policy {other:?} is neither \"enabled\" nor \"disabled\""
                        )));
                    }
                };
            }
            t.always_inject = doc.always_inject_selector;
            t.never_inject = doc.never_inject_selector;
            t.injected_annotations = doc.injected_annotations;
        }
        if let Some(text) = data.get("values").filter(|t| !t.trim().is_empty()) {
            let values: Value = serde_json::from_str(text)
                .map_err(|e| InjectError::Template(format!("values: {e}")))?;
            t.apply_values(&values);
        }
        Ok(t)
    }

    fn apply_values(&mut self, v: &Value) {
        let global = &v["global"];
        let proxy = &global["proxy"];
        let hub = scalar(&global["hub"]).unwrap_or_else(|| DEFAULT_HUB.into());
        let tag = scalar(&global["tag"]).unwrap_or_else(|| DEFAULT_TAG.into());
        let image = scalar(&proxy["image"]).unwrap_or_else(|| "proxyv2".into());
        // `distroless` or `debug`: the tag's suffix, as istiod's template appends it.
        let variant = scalar(&proxy["variant"])
            .or_else(|| scalar(&global["variant"]))
            .map(|v| format!("-{v}"))
            .unwrap_or_default();
        // As the chart does: a value with a slash is a whole image reference.
        (self.image, self.base_image) = if image.contains('/') {
            (image, String::new())
        } else {
            (
                format!("{hub}/{image}:{tag}{variant}"),
                format!("{hub}/{image}:{tag}"),
            )
        };
        self.pull_policy = scalar(&global["imagePullPolicy"]);
        if proxy["resources"].is_object() {
            self.resources = proxy["resources"].clone();
        }
        let set = |field: &mut String, value: &Value| {
            if let Some(s) = scalar(value) {
                *field = s;
            }
        };
        set(&mut self.log_level, &proxy["logLevel"]);
        set(&mut self.component_log_level, &proxy["componentLogLevel"]);
        set(&mut self.include_ip_ranges, &proxy["includeIPRanges"]);
        if let Value::String(s) = &proxy["excludeIPRanges"] {
            self.exclude_ip_ranges = s.clone();
        }
        set(
            &mut self.include_inbound_ports,
            &proxy["includeInboundPorts"],
        );
        if let Value::String(s) = &proxy["excludeInboundPorts"] {
            self.exclude_inbound_ports = s.clone();
        }
        if let Value::String(s) = &proxy["excludeOutboundPorts"] {
            self.exclude_outbound_ports = s.clone();
        }
        if let Some(p) = proxy["statusPort"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
        {
            self.status_port = p;
        }
        if let Some(b) = proxy["holdApplicationUntilProxyStarts"].as_bool() {
            self.hold_application = b;
        }
        if let Some(b) = proxy["privileged"].as_bool() {
            self.privileged = b;
        }
        if let Some(b) = v["sidecarInjectorWebhook"]["rewriteAppHTTPProbe"].as_bool() {
            self.rewrite_probes = b;
        }
        if let Some(b) = v["sidecarInjectorWebhook"]["enableNamespacesByDefault"].as_bool() {
            self.namespaces_by_default = b;
        }
        self.mesh_id = scalar(&global["meshID"]);
        self.network = scalar(&global["network"]);
        self.cluster_id = scalar(&global["multiCluster"]["clusterName"]);
        self.ca_address = scalar(&global["caAddress"]);
    }
}
