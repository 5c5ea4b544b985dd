//! `/inject`: the sidecar injector. Adds `istio-init` and `istio-proxy` to selected pods the way
//! istiod's default `sidecar` template does, and answers with a JSONPatch against the pod as sent.
//!
//! istiod renders Go text templates from ConfigMap `istio-sidecar-injector`. Rudder renders the
//! default template in Rust and takes its settings from the same ConfigMap: `config` (policy,
//! always/never selectors, injectedAnnotations) and `values` (hub, tag, proxy image, resources, log
//! levels, status port, traffic capture, mesh/cluster/network ids), and istiod's `gateway` template
//! for pods that ask for it (`gateway.rs`). Custom Go templates under `config.templates` are not
//! executed; a pod asking for one is refused by name (docs/decisions.md).

mod gateway;
mod overlay;
mod pod;
mod policy;
pub mod proxy_config;
mod render;
mod settings;
pub mod url_envs;

pub use pod::{
    INIT_CONTAINER, INJECT_LABEL, INJECTOR_CONFIGMAP, InjectError, PROXY_CONTAINER,
    STATUS_ANNOTATION, TEMPLATES_ANNOTATION, injector_configmap,
};
use pod::{pod_name, string_map};
pub use policy::Decision;
pub use render::workload_of;
pub use settings::{DEFAULT_HUB, DEFAULT_TAG, InjectorSettings, Template};

use crate::config::{ConfigKey, Kind, Spec};
use crate::metrics::TypeLabels;
use crate::store::Store;
use crate::webhook::metrics::WebhookMetrics;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::{debug, info, warn};

/// The pod with the proxy the templates it asks for render: `sidecar` (the default), `gateway`,
/// or `waypoint` (the pods of a managed waypoint, which istiod renders from its own `waypoint`
/// template; Rudder's deployer asks the injector for it, as for gateways). Any other template is
/// refused by name, never injected as something else.
pub fn inject(
    settings: &InjectorSettings,
    template: &Template,
    sources: &proxy_config::ProxyConfigSources,
    namespace: &str,
    pod: &Value,
) -> Result<Value, InjectError> {
    let asked = pod["metadata"]["annotations"][TEMPLATES_ANNOTATION]
        .as_str()
        .unwrap_or("sidecar");
    let names: Vec<&str> = asked
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let unknown: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !["sidecar", "gateway", "waypoint"].contains(n))
        .collect();
    if !unknown.is_empty() {
        return Err(InjectError::UnknownTemplate(unknown.join(", ")));
    }
    let role = if names.contains(&"waypoint") {
        Some(gateway::Role::Waypoint)
    } else if names.contains(&"gateway") {
        Some(gateway::Role::Router)
    } else {
        None
    };
    if let Some(role) = role {
        gateway::inject(settings, template, sources, namespace, pod, role)
    } else {
        render::sidecar(settings, template, sources, namespace, pod)
    }
}

/// The injector: settings from flags, the template from the store's ConfigMap (re-read when it
/// changes), namespace labels from the store.
pub struct Injector {
    pub settings: InjectorSettings,
    store: Arc<Store>,
    /// The parsed template and the store version of the ConfigMap it came from (0: none).
    cached: Mutex<(u64, Arc<Template>)>,
    /// Revision tags found in the cluster (`webhook::tags`), besides those of the settings.
    cluster_tags: crate::webhook::tags::ClusterTags,
}

impl Injector {
    pub fn new(settings: InjectorSettings, store: Arc<Store>) -> Injector {
        Injector {
            settings,
            store,
            cached: Mutex::new((0, Arc::new(Template::default()))),
            cluster_tags: crate::webhook::tags::ClusterTags::default(),
        }
    }

    /// Where `webhook::tags` publishes the revision tags it finds in the cluster.
    pub fn cluster_tags(&self) -> crate::webhook::tags::ClusterTags {
        self.cluster_tags.clone()
    }

    /// The current template. A ConfigMap that does not parse is logged and the last good one kept.
    pub fn template(&self) -> Arc<Template> {
        let snapshot = self.store.snapshot();
        let key = ConfigKey {
            kind: Kind::ConfigMap,
            namespace: self.settings.system_namespace.clone(),
            name: injector_configmap(&self.settings.revision),
            cluster: String::new(),
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

    /// istiod's selection for `pod` in `namespace` (see `policy::decide`).
    pub fn decide(&self, template: &Template, namespace: &str, pod: &Value) -> Decision {
        self.decide_in("", template, namespace, pod)
    }

    /// `decide` for a pod of `cluster` (a remote cluster's webhook names it in its path): the
    /// namespace's labels are that cluster's when Rudder watches it.
    pub fn decide_in(
        &self,
        cluster: &str,
        template: &Template,
        namespace: &str,
        pod: &Value,
    ) -> Decision {
        policy::decide(
            template,
            &policy::Revision {
                name: self.settings.revision.clone(),
                tags: self
                    .settings
                    .revision_tags
                    .iter()
                    .chain(self.cluster_tags.load().iter())
                    .cloned()
                    .collect(),
            },
            &self.namespace_labels(cluster, namespace),
            namespace,
            pod,
        )
    }

    /// What the store says of `pod`'s ProxyConfig below its own annotation (mesh `defaultConfig`,
    /// ProxyConfig objects), read as the pod is injected.
    pub fn proxy_config_sources(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> proxy_config::ProxyConfigSources {
        proxy_config::ProxyConfigSources::from_snapshot(
            &self.store.snapshot(),
            &self.settings.system_namespace,
            namespace,
            &string_map(&pod["metadata"]["labels"]),
        )
    }

    fn namespace_labels(&self, cluster: &str, namespace: &str) -> BTreeMap<String, String> {
        let snapshot = self.store.snapshot();
        let remote = (!cluster.is_empty() && cluster != self.settings.cluster_id)
            .then(|| snapshot.get_in(Kind::Namespace, cluster, "", namespace))
            .flatten();
        remote
            .or_else(|| snapshot.get_named(Kind::Namespace, "", namespace))
            .map(|e| e.config.metadata.labels.clone())
            .unwrap_or_default()
    }
}

/// The injector's verdict on one admission request: always allowed; a patch when injected. A pod
/// the injector cannot handle is denied with the reason, as istiod does.
pub fn admit(
    injector: &Injector,
    metrics: &WebhookMetrics,
    request: &AdmissionRequest<DynamicObject>,
    url_envs: &BTreeMap<String, String>,
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
    let mut template = injector.template();
    // The cluster and network the webhook's path names (a remote cluster's webhook) win over
    // the injector's values, as in istiod.
    let url_cluster = url_envs.get(url_envs::CLUSTER_ID);
    let url_network = url_envs.get(url_envs::NETWORK);
    if url_cluster.is_some() || url_network.is_some() {
        let mut t = (*template).clone();
        if let Some(c) = url_cluster {
            t.cluster_id = Some(c.clone());
        }
        if let Some(n) = url_network {
            t.network = Some(n.clone());
        }
        template = Arc::new(t);
    }
    let cluster = url_cluster.map(String::as_str).unwrap_or_default();
    match injector.decide_in(cluster, &template, &namespace, &pod) {
        Decision::Skip(why) => {
            debug!(reason = %why, namespace, "pod not injected");
            metrics.injection_skipped.inc();
            allow
        }
        Decision::Inject => {
            let sources = injector.proxy_config_sources(&namespace, &pod);
            let mut injected =
                match inject(&injector.settings, &template, &sources, &namespace, &pod) {
                    Ok(p) => p,
                    Err(e) => return fail(e),
                };
            cluster_and_network(&mut injected, &pod, &template, url_envs);
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

/// istiod's last word on a proxy's cluster and network: the webhook path's variables on the
/// proxy container, the network from the pod's own `topology.istio.io/network` label first,
/// then the path, then the values; and the pod labelled with that network.
fn cluster_and_network(
    injected: &mut Value,
    pod: &Value,
    template: &Template,
    url_envs: &BTreeMap<String, String>,
) {
    let mut envs = url_envs.clone();
    let network = pod["metadata"]["labels"][crate::model::kubernetes::NETWORK_LABEL]
        .as_str()
        .map(str::to_string)
        .or_else(|| template.network.clone())
        .filter(|n| !n.is_empty());
    if let Some(network) = &network {
        envs.insert(url_envs::NETWORK.to_string(), network.clone());
        if !injected["metadata"]["labels"].is_object() {
            injected["metadata"]["labels"] = Value::Object(Default::default());
        }
        injected["metadata"]["labels"][crate::model::kubernetes::NETWORK_LABEL] =
            Value::String(network.clone());
    }
    if !envs.is_empty() {
        url_envs::apply(injected, &envs);
    }
}

#[cfg(test)]
mod tests;
