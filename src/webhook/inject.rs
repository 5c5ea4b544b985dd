//! `/inject`: the sidecar injector. Adds `istio-init` and `istio-proxy` to selected pods the way
//! istiod's default `sidecar` template does, and answers with a JSONPatch against the pod as sent.
//!
//! istiod renders Go text templates from ConfigMap `istio-sidecar-injector`. Rudder renders the
//! default template in Rust and takes its settings from the same ConfigMap: `config` (policy,
//! always/never selectors, injectedAnnotations) and `values` (hub, tag, proxy image, resources, log
//! levels, status port, traffic capture, mesh/cluster/network ids). Custom Go templates under
//! `config.templates` are not executed (docs/decisions.md).

use super::{WebhookState, read_review, review_response};
use crate::config::mesh::selector_matches;
use crate::config::{ConfigKey, Kind, Spec};
use crate::metrics::TypeLabels;
use crate::model::workload::{Workload, canonical, workload_from_owner};
use crate::store::Store;
use crate::webhook::metrics::WebhookMetrics;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::{debug, info, warn};

pub const STATUS_ANNOTATION: &str = "sidecar.istio.io/status";
pub const INJECT_LABEL: &str = "sidecar.istio.io/inject";
pub const PROXY_CONTAINER: &str = "istio-proxy";
pub const INIT_CONTAINER: &str = "istio-init";
pub const INJECTOR_CONFIGMAP: &str = "istio-sidecar-injector";

/// The injector ConfigMap of a revision: `istio-sidecar-injector`, or `istio-sidecar-injector-<rev>`
/// for a non-default revision (as istiod names it, so canaries in one namespace do not collide).
pub fn injector_configmap(revision: &str) -> String {
    if revision.is_empty() || revision == "default" {
        INJECTOR_CONFIGMAP.to_string()
    } else {
        format!("{INJECTOR_CONFIGMAP}-{revision}")
    }
}

/// Namespaces istiod never injects into.
const IGNORED_NAMESPACES: &[&str] = &[
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "local-path-storage",
];

/// Envoy's Prometheus port, the health port and the agent's status port: never captured inbound.
const PROXY_PORTS_EXCLUDED: &[u16] = &[15090, 15021];

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error("the request carries no pod")]
    NoPod,
    #[error("the pod is not a JSON object")]
    NotAnObject,
    #[error("annotation proxy.istio.io/config is not valid YAML: {0}")]
    ProxyConfig(String),
    #[error("ConfigMap {INJECTOR_CONFIGMAP}: {0}")]
    Template(String),
    #[error("could not build the patch: {0}")]
    Patch(String),
}

impl InjectError {
    fn kind(&self) -> &'static str {
        match self {
            InjectError::NoPod | InjectError::NotAnObject => "decode",
            InjectError::ProxyConfig(_) => "proxy_config",
            InjectError::Template(_) => "template",
            InjectError::Patch(_) => "patch",
        }
    }
}

/// What the daemon's flags say about the mesh, for the proxies it injects.
#[derive(Debug, Clone)]
pub struct InjectorSettings {
    pub revision: String,
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
            system_namespace: "istio-system".into(),
            domain_suffix: "cluster.local".into(),
            trust_domain: "cluster.local".into(),
            discovery_address: "istiod.istio-system.svc:15012".into(),
            cluster_id: "Kubernetes".into(),
        }
    }
}

/// The injection template's settings, with istiod chart defaults for anything the ConfigMap omits.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub policy_enabled: bool,
    pub always_inject: Vec<LabelSelector>,
    pub never_inject: Vec<LabelSelector>,
    pub injected_annotations: BTreeMap<String, String>,
    pub image: String,
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
    pub mesh_id: Option<String>,
    pub network: Option<String>,
    pub cluster_id: Option<String>,
    pub ca_address: Option<String>,
}

pub const DEFAULT_HUB: &str = "docker.io/istio";
pub const DEFAULT_TAG: &str = "1.28.0";

impl Default for Template {
    fn default() -> Self {
        Template {
            policy_enabled: true,
            always_inject: Vec::new(),
            never_inject: Vec::new(),
            injected_annotations: BTreeMap::new(),
            image: format!("{DEFAULT_HUB}/proxyv2:{DEFAULT_TAG}"),
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
        // As the chart does: a value with a slash is a whole image reference.
        self.image = if image.contains('/') {
            image
        } else {
            format!("{hub}/{image}:{tag}")
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
        self.mesh_id = scalar(&global["meshID"]);
        self.network = scalar(&global["network"]);
        self.cluster_id = scalar(&global["multiCluster"]["clusterName"]);
        self.ca_address = scalar(&global["caAddress"]);
    }
}

/// The injector: settings from flags, the template from the store's ConfigMap (re-read when it
/// changes), namespace labels from the store.
pub struct Injector {
    pub settings: InjectorSettings,
    store: Arc<Store>,
    /// The parsed template and the store version of the ConfigMap it came from (0: none).
    cached: Mutex<(u64, Arc<Template>)>,
}

/// Why a pod was or was not injected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Inject,
    Skip(String),
}

impl Injector {
    pub fn new(settings: InjectorSettings, store: Arc<Store>) -> Injector {
        Injector {
            settings,
            store,
            cached: Mutex::new((0, Arc::new(Template::default()))),
        }
    }

    /// The current template. A ConfigMap that does not parse is logged and the last good one kept.
    pub fn template(&self) -> Arc<Template> {
        let snapshot = self.store.snapshot();
        let key = ConfigKey {
            kind: Kind::ConfigMap,
            namespace: self.settings.system_namespace.clone(),
            name: injector_configmap(&self.settings.revision),
        };
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = snapshot.get(&key) else {
            return cached.1.clone();
        };
        if entry.version == cached.0 {
            return cached.1.clone();
        }
        if let Spec::ConfigMap(cm) = &entry.config.spec {
            match Template::from_configmap(&cm.data.clone().unwrap_or_default()) {
                Ok(t) => *cached = (entry.version, Arc::new(t)),
                Err(e) => {
                    warn!(error = %e, "injection template not updated; keeping the last good one");
                    cached.0 = entry.version;
                }
            }
        }
        cached.1.clone()
    }

    fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        let key = ConfigKey {
            kind: Kind::Namespace,
            namespace: String::new(),
            name: namespace.into(),
        };
        self.store
            .snapshot()
            .get(&key)
            .map(|e| e.config.metadata.labels.clone())
            .unwrap_or_default()
    }

    /// istiod's selection: the webhook configuration's namespace/object selectors (evaluated here
    /// too, so a webhook registered without them behaves the same), then the injection policy.
    pub fn decide(&self, template: &Template, namespace: &str, pod: &Value) -> Decision {
        let meta = &pod["metadata"];
        let labels = string_map(&meta["labels"]);
        let annotations = string_map(&meta["annotations"]);
        if pod["spec"]["hostNetwork"].as_bool() == Some(true) {
            return Decision::Skip("pod uses the host network".into());
        }
        if IGNORED_NAMESPACES.contains(&namespace) {
            return Decision::Skip(format!("namespace {namespace} is never injected"));
        }
        if annotations.contains_key(STATUS_ANNOTATION) {
            return Decision::Skip("pod is already injected".into());
        }
        let ns_labels = self.namespace_labels(namespace);
        let pod_label = labels.get(INJECT_LABEL).map(String::as_str);
        let revision = &self.settings.revision;
        let selected = match ns_labels.get("istio-injection").map(String::as_str) {
            Some("enabled") => pod_label != Some("false"),
            Some(_) => false,
            None => match ns_labels.get("istio.io/rev") {
                Some(rev) => rev == revision && pod_label != Some("false"),
                None => pod_label == Some("true") || labels.get("istio.io/rev") == Some(revision),
            },
        };
        if !selected {
            return Decision::Skip(format!(
                "namespace {namespace} is not labelled istio-injection=enabled or istio.io/rev={revision}, and the pod does not opt in"
            ));
        }
        let explicit = pod_label.or(annotations.get(INJECT_LABEL).map(String::as_str));
        let (mut use_default, mut inject) = match explicit.map(str::to_lowercase).as_deref() {
            None | Some("") => (true, false),
            Some("y" | "yes" | "true" | "on") => (false, true),
            Some(_) => (false, false),
        };
        if use_default
            && template
                .never_inject
                .iter()
                .any(|s| selector_matches(s, &labels))
        {
            (use_default, inject) = (false, false);
        }
        if use_default
            && template
                .always_inject
                .iter()
                .any(|s| selector_matches(s, &labels))
        {
            (use_default, inject) = (false, true);
        }
        let required = if use_default {
            template.policy_enabled
        } else {
            inject
        };
        if required {
            Decision::Inject
        } else if use_default {
            Decision::Skip("injection policy is disabled and the pod does not opt in".into())
        } else {
            Decision::Skip(format!("{INJECT_LABEL} says no"))
        }
    }
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

pub async fn handle(State(s): State<WebhookState>, headers: HeaderMap, body: Body) -> Response {
    let request = match read_review(&s.metrics, &headers, body).await {
        Ok(r) => r,
        Err(response) => return response,
    };
    review_response(admit(&s.injector, &s.metrics, &request))
}

/// The injector's verdict on one admission request: always allowed; a patch when injected. A pod
/// the injector cannot handle is denied with the reason, as istiod does.
pub fn admit(
    injector: &Injector,
    metrics: &WebhookMetrics,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    metrics.injection_requests.inc();
    let allow = AdmissionResponse::from(request);
    if request.operation != Operation::Create || request.kind.kind != "Pod" {
        metrics.injection_skipped.inc();
        return allow;
    }
    let fail = |e: InjectError| {
        metrics
            .injection_failures
            .get_or_create(&TypeLabels {
                r#type: e.kind().into(),
            })
            .inc();
        warn!(error = %e, name = %request.name, "sidecar injection failed");
        AdmissionResponse::from(request).deny(format!("sidecar injection failed: {e}"))
    };
    let pod = match request.object.as_ref().map(serde_json::to_value) {
        Some(Ok(v)) if v.is_object() => v,
        Some(Ok(_)) => return fail(InjectError::NotAnObject),
        Some(Err(_)) | None => return fail(InjectError::NoPod),
    };
    let namespace = request
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| pod["metadata"]["namespace"].as_str().map(String::from))
        .unwrap_or_else(|| "default".into());
    let template = injector.template();
    match injector.decide(&template, &namespace, &pod) {
        Decision::Skip(why) => {
            debug!(reason = %why, namespace, "pod not injected");
            metrics.injection_skipped.inc();
            allow
        }
        Decision::Inject => {
            let injected = match inject(&injector.settings, &template, &namespace, &pod) {
                Ok(p) => p,
                Err(e) => return fail(e),
            };
            let patch = json_patch::diff(&pod, &injected);
            match allow.with_patch(patch) {
                Ok(response) => {
                    metrics.injection_success.inc();
                    info!(namespace, pod = %pod_name(&pod), "sidecar injected");
                    response
                }
                Err(e) => fail(InjectError::Patch(e.to_string())),
            }
        }
    }
}

fn pod_name(pod: &Value) -> String {
    let meta = &pod["metadata"];
    meta["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or_else(|| meta["generateName"].as_str())
        .unwrap_or("")
        .to_string()
}

pub fn workload_of(pod: &Value) -> Workload {
    let meta = &pod["metadata"];
    let labels = string_map(&meta["labels"]);
    let controller = meta["ownerReferences"].as_array().and_then(|refs| {
        refs.iter()
            .find(|r| r["controller"].as_bool() == Some(true))
    });
    let controller = controller.map(|owner| {
        (
            owner["kind"].as_str().unwrap_or(""),
            owner["name"].as_str().unwrap_or(""),
            owner["apiVersion"].as_str().unwrap_or(""),
        )
    });
    workload_from_owner(&pod_name(pod), &labels, controller)
}

fn owner_url(w: &Workload, namespace: &str) -> String {
    format!(
        "kubernetes://apis/{}/namespaces/{namespace}/{}s/{}",
        w.api_version,
        w.kind.to_lowercase(),
        w.name
    )
}

fn annotation<'a>(annotations: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    annotations.get(key).map(String::as_str)
}

/// The pod with the sidecar added: what the JSONPatch turns the submitted pod into.
pub fn inject(
    settings: &InjectorSettings,
    template: &Template,
    namespace: &str,
    pod: &Value,
) -> Result<Value, InjectError> {
    let mut out = pod.clone();
    let annotations = string_map(&pod["metadata"]["annotations"]);
    let labels = string_map(&pod["metadata"]["labels"]);
    let workload = workload_of(pod);
    let (canonical_name, canonical_revision) = canonical(&labels, &workload.name);
    let status_port = annotation(&annotations, "status.sidecar.istio.io/port")
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(template.status_port);
    let interception = annotation(&annotations, "sidecar.istio.io/interceptionMode")
        .unwrap_or("REDIRECT")
        .to_string();
    let image = annotation(&annotations, "sidecar.istio.io/proxyImage")
        .map(String::from)
        .unwrap_or_else(|| template.image.clone());
    let proxy_config = proxy_config(settings, template, &annotations)?;
    let hold = proxy_config
        .get("holdApplicationUntilProxyStarts")
        .and_then(Value::as_bool)
        .unwrap_or(template.hold_application);
    let proxy_config = Value::Object(proxy_config).to_string();
    let resources = resources(template, &annotations);

    let app_containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let app_names: Vec<String> = app_containers
        .iter()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let pod_ports: Vec<Value> = app_containers
        .iter()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .collect();

    let rewrite = template.rewrite_probes
        && annotation(&annotations, "sidecar.istio.io/rewriteAppHTTPProbers") != Some("false");
    let mut probers = Map::new();
    if rewrite && let Some(containers) = out["spec"]["containers"].as_array_mut() {
        for c in containers {
            rewrite_probes(c, status_port, &mut probers);
        }
    }

    let field = |path: &str| json!({"fieldRef": {"fieldPath": path}});
    let resource = |res: &str| json!({"resourceFieldRef": {"resource": res, "divisor": "0"}});
    let mut env = vec![
        json!({"name": "PILOT_CERT_PROVIDER", "value": "istiod"}),
        json!({"name": "CA_ADDR", "value": template.ca_address.clone().unwrap_or_else(|| settings.discovery_address.clone())}),
        json!({"name": "POD_NAME", "valueFrom": field("metadata.name")}),
        json!({"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")}),
        json!({"name": "INSTANCE_IP", "valueFrom": field("status.podIP")}),
        json!({"name": "SERVICE_ACCOUNT", "valueFrom": field("spec.serviceAccountName")}),
        json!({"name": "HOST_IP", "valueFrom": field("status.hostIP")}),
        json!({"name": "ISTIO_CPU_LIMIT", "valueFrom": resource("limits.cpu")}),
        json!({"name": "PROXY_CONFIG", "value": proxy_config}),
        json!({"name": "ISTIO_META_POD_PORTS", "value": Value::Array(pod_ports).to_string()}),
        json!({"name": "ISTIO_META_APP_CONTAINERS", "value": app_names.join(",")}),
        json!({"name": "GOMEMLIMIT", "valueFrom": resource("limits.memory")}),
        json!({"name": "GOMAXPROCS", "valueFrom": resource("limits.cpu")}),
        json!({"name": "ISTIO_META_CLUSTER_ID", "value": template.cluster_id.clone().unwrap_or_else(|| settings.cluster_id.clone())}),
        json!({"name": "ISTIO_META_NODE_NAME", "valueFrom": field("spec.nodeName")}),
        json!({"name": "ISTIO_META_INTERCEPTION_MODE", "value": interception}),
        json!({"name": "ISTIO_META_WORKLOAD_NAME", "value": workload.name}),
        json!({"name": "ISTIO_META_OWNER", "value": owner_url(&workload, namespace)}),
        json!({"name": "ISTIO_META_MESH_ID", "value": template.mesh_id.clone().unwrap_or_else(|| settings.trust_domain.clone())}),
        json!({"name": "TRUST_DOMAIN", "value": settings.trust_domain}),
    ];
    if let Some(network) = &template.network {
        env.push(json!({"name": "ISTIO_META_NETWORK", "value": network}));
    }
    if !probers.is_empty() {
        env.push(
            json!({"name": "ISTIO_KUBE_APP_PROBERS", "value": Value::Object(probers).to_string()}),
        );
    }

    let mut proxy = json!({
        "name": PROXY_CONTAINER,
        "image": image,
        "args": [
            "proxy",
            "sidecar",
            "--domain",
            format!("$(POD_NAMESPACE).svc.{}", settings.domain_suffix),
            format!("--proxyLogLevel={}", annotation(&annotations, "sidecar.istio.io/logLevel").unwrap_or(&template.log_level)),
            format!("--proxyComponentLogLevel={}", annotation(&annotations, "sidecar.istio.io/componentLogLevel").unwrap_or(&template.component_log_level)),
            "--log_output_level=default:info",
        ],
        "env": env,
        "ports": [{"containerPort": 15090, "protocol": "TCP", "name": "http-envoy-prom"}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz/ready", "port": 15021},
            "failureThreshold": 4, "periodSeconds": 15, "timeoutSeconds": 3,
        },
        "startupProbe": {
            "httpGet": {"path": "/healthz/ready", "port": 15021},
            "failureThreshold": 600, "periodSeconds": 1, "timeoutSeconds": 3,
        },
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": template.privileged,
            "capabilities": {"drop": ["ALL"]},
            "privileged": template.privileged,
            "readOnlyRootFilesystem": true,
            "runAsGroup": 1337,
            "runAsNonRoot": true,
            "runAsUser": 1337,
        },
        "volumeMounts": [
            {"name": "workload-socket", "mountPath": "/var/run/secrets/workload-spiffe-uds"},
            {"name": "credential-socket", "mountPath": "/var/run/secrets/credential-uds"},
            {"name": "workload-certs", "mountPath": "/var/run/secrets/workload-spiffe-credentials"},
            {"name": "istiod-ca-cert", "mountPath": "/var/run/secrets/istio"},
            {"name": "istio-data", "mountPath": "/var/lib/istio/data"},
            {"name": "istio-envoy", "mountPath": "/etc/istio/proxy"},
            {"name": "istio-token", "mountPath": "/var/run/secrets/tokens"},
            {"name": "istio-podinfo", "mountPath": "/etc/istio/pod"},
        ],
    });
    if let Some(policy) = &template.pull_policy {
        proxy["imagePullPolicy"] = policy.clone().into();
    }
    if hold {
        proxy["lifecycle"] = json!({"postStart": {"exec": {"command": ["pilot-agent", "wait"]}}});
    }

    let mut init_containers = Vec::new();
    if interception != "NONE" {
        let mut init = json!({
            "name": INIT_CONTAINER,
            "image": template.image,
            "args": iptables_args(template, &annotations, &interception, status_port),
            "resources": resources,
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
                "privileged": false,
                "readOnlyRootFilesystem": false,
                "runAsGroup": 0,
                "runAsNonRoot": false,
                "runAsUser": 0,
            },
        });
        if let Some(policy) = &template.pull_policy {
            init["imagePullPolicy"] = policy.clone().into();
        }
        init_containers.push(init);
    }

    let volumes = [
        json!({"name": "workload-socket", "emptyDir": {}}),
        json!({"name": "credential-socket", "emptyDir": {}}),
        json!({"name": "workload-certs", "emptyDir": {}}),
        json!({"name": "istio-envoy", "emptyDir": {"medium": "Memory"}}),
        json!({"name": "istio-data", "emptyDir": {}}),
        json!({"name": "istio-podinfo", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        ]}}),
        json!({"name": "istio-token", "projected": {"sources": [
            {"serviceAccountToken": {"audience": "istio-ca", "expirationSeconds": 43200, "path": "istio-token"}},
        ]}}),
        json!({"name": "istiod-ca-cert", "configMap": {"name": "istio-ca-root-cert"}}),
    ];
    let volume_names: Vec<&str> = volumes.iter().filter_map(|v| v["name"].as_str()).collect();
    let status = json!({
        "initContainers": init_containers.iter().filter_map(|c| c["name"].as_str()).collect::<Vec<_>>(),
        "containers": [PROXY_CONTAINER],
        "volumes": volume_names,
        "imagePullSecrets": null,
        "revision": settings.revision,
    });

    let spec = object_at(out.as_object_mut().ok_or(InjectError::NotAnObject)?, "spec")?;
    let containers = array_at(spec, "containers")?;
    if hold {
        containers.insert(0, proxy);
    } else {
        containers.push(proxy);
    }
    if !init_containers.is_empty() {
        let inits = array_at(spec, "initContainers")?;
        // First, so other init containers' traffic is already captured (istiod does the same).
        for (i, c) in init_containers.into_iter().enumerate() {
            inits.insert(i, c);
        }
    }
    let existing: Vec<String> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let pod_volumes = array_at(spec, "volumes")?;
    for v in volumes {
        if !existing.iter().any(|n| v["name"] == n.as_str()) {
            pod_volumes.push(v);
        }
    }

    let meta = object_at(
        out.as_object_mut().ok_or(InjectError::NotAnObject)?,
        "metadata",
    )?;
    let default_container = app_names.first().cloned();
    let annotations_out = object_at(meta, "annotations")?;
    let mut set_if_absent = |k: &str, v: String| {
        annotations_out
            .entry(k.to_string())
            .or_insert(Value::String(v));
    };
    if let Some(first) = default_container {
        set_if_absent("kubectl.kubernetes.io/default-container", first.clone());
        set_if_absent("kubectl.kubernetes.io/default-logs-container", first);
    }
    if annotations.get("prometheus.io/scrape").map(String::as_str) != Some("false") {
        set_if_absent("prometheus.io/scrape", "true".into());
        set_if_absent("prometheus.io/port", status_port.to_string());
        set_if_absent("prometheus.io/path", "/stats/prometheus".into());
    }
    for (k, v) in &template.injected_annotations {
        set_if_absent(k, v.clone());
    }
    annotations_out.insert("istio.io/rev".into(), settings.revision.clone().into());
    annotations_out.insert(STATUS_ANNOTATION.into(), status.to_string().into());
    let labels_out = object_at(meta, "labels")?;
    labels_out.insert("security.istio.io/tlsMode".into(), "istio".into());
    labels_out.insert(
        "service.istio.io/canonical-name".into(),
        canonical_name.into(),
    );
    labels_out.insert(
        "service.istio.io/canonical-revision".into(),
        canonical_revision.into(),
    );
    Ok(out)
}

fn object_at<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Map<String, Value>, InjectError> {
    let slot = obj
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().ok_or(InjectError::NotAnObject)
}

fn array_at<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Vec<Value>, InjectError> {
    let slot = obj
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut().ok_or(InjectError::NotAnObject)
}

/// `PROXY_CONFIG`: the discovery address merged with the pod's `proxy.istio.io/config` annotation.
fn proxy_config(
    settings: &InjectorSettings,
    template: &Template,
    annotations: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, InjectError> {
    let mut config = Map::new();
    if let Some(text) = annotations.get("proxy.istio.io/config") {
        let parsed: Value =
            serde_saphyr::from_str(text).map_err(|e| InjectError::ProxyConfig(e.to_string()))?;
        match parsed {
            Value::Object(m) => config = m,
            Value::Null => {}
            other => {
                return Err(InjectError::ProxyConfig(format!(
                    "expected a mapping, found {other}"
                )));
            }
        }
    }
    config
        .entry("discoveryAddress")
        .or_insert_with(|| settings.discovery_address.clone().into());
    if template.hold_application {
        config
            .entry("holdApplicationUntilProxyStarts")
            .or_insert(true.into());
    }
    Ok(config)
}

/// The template's resources with the pod's `sidecar.istio.io/proxyCPU`-style overrides.
fn resources(template: &Template, annotations: &BTreeMap<String, String>) -> Value {
    let mut r = template.resources.clone();
    for (key, section, resource) in [
        ("sidecar.istio.io/proxyCPU", "requests", "cpu"),
        ("sidecar.istio.io/proxyMemory", "requests", "memory"),
        ("sidecar.istio.io/proxyCPULimit", "limits", "cpu"),
        ("sidecar.istio.io/proxyMemoryLimit", "limits", "memory"),
    ] {
        if let Some(v) = annotations.get(key) {
            if !r[section].is_object() {
                r[section] = json!({});
            }
            r[section][resource] = v.clone().into();
        }
    }
    r
}

fn iptables_args(
    template: &Template,
    annotations: &BTreeMap<String, String>,
    interception: &str,
    status_port: u16,
) -> Vec<String> {
    let pick = |key: &str, default: &str| {
        annotations
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let mut excluded_inbound: Vec<String> = PROXY_PORTS_EXCLUDED
        .iter()
        .map(u16::to_string)
        .chain([status_port.to_string()])
        .collect();
    let extra = pick(
        "traffic.sidecar.istio.io/excludeInboundPorts",
        &template.exclude_inbound_ports,
    );
    excluded_inbound.extend(
        extra
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from),
    );
    let mut args: Vec<String> = [
        "istio-iptables",
        "-p",
        "15001",
        "-z",
        "15006",
        "-u",
        "1337",
        "-m",
        interception,
        "-i",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(pick(
        "traffic.sidecar.istio.io/includeOutboundIPRanges",
        &template.include_ip_ranges,
    ));
    args.push("-x".into());
    args.push(pick(
        "traffic.sidecar.istio.io/excludeOutboundIPRanges",
        &template.exclude_ip_ranges,
    ));
    args.push("-b".into());
    args.push(pick(
        "traffic.sidecar.istio.io/includeInboundPorts",
        &template.include_inbound_ports,
    ));
    args.push("-d".into());
    args.push(excluded_inbound.join(","));
    let outbound = pick(
        "traffic.sidecar.istio.io/excludeOutboundPorts",
        &template.exclude_outbound_ports,
    );
    if !outbound.is_empty() {
        args.push("-o".into());
        args.push(outbound);
    }
    args.push("--log_output_level=default:info".into());
    args
}

/// Points the container's HTTP, TCP and gRPC probes at the agent's status port, which runs the
/// original probe from inside the pod (mTLS would otherwise reject the kubelet), and records the
/// originals for `ISTIO_KUBE_APP_PROBERS`.
fn rewrite_probes(container: &mut Value, status_port: u16, probers: &mut Map<String, Value>) {
    let Some(name) = container["name"].as_str().map(String::from) else {
        return;
    };
    let named_ports: BTreeMap<String, Value> = container["ports"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| Some((p["name"].as_str()?.to_string(), p["containerPort"].clone())))
                .collect()
        })
        .unwrap_or_default();
    for (probe_key, suffix) in [
        ("livenessProbe", "livez"),
        ("readinessProbe", "readyz"),
        ("startupProbe", "startupz"),
    ] {
        let Some(probe) = container.get_mut(probe_key).and_then(Value::as_object_mut) else {
            continue;
        };
        let handler = ["httpGet", "tcpSocket", "grpc"]
            .into_iter()
            .find(|h| probe.get(*h).is_some_and(Value::is_object));
        let Some(handler) = handler else { continue };
        let mut original = probe.remove(handler).unwrap_or(Value::Null);
        if let Some(port) = original["port"].as_str().and_then(|p| named_ports.get(p)) {
            original["port"] = port.clone();
        }
        let path = format!("/app-health/{name}/{suffix}");
        let mut prober = json!({ handler: original });
        if let Some(t) = probe.get("timeoutSeconds") {
            prober["timeoutSeconds"] = t.clone();
        }
        probers.insert(path.clone(), prober);
        probe.insert(
            "httpGet".into(),
            json!({"path": path, "port": status_port, "scheme": "HTTP"}),
        );
    }
}

#[cfg(test)]
#[path = "inject_tests.rs"]
mod tests;
