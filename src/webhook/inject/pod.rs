//! What the injector reads and writes on a pod by name (its annotations, labels and containers),
//! the injector ConfigMap's name, and why a pod could not be injected.

use serde_json::Value;
use std::collections::BTreeMap;

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
    #[error(
        "inject.istio.io/templates asks for {0}: Rudder renders istiod's `sidecar`, `gateway` and `waypoint` templates, not custom Go templates (docs/decisions.md)"
    )]
    UnknownTemplate(String),
}

/// The annotation naming the injection templates a pod asks for (`sidecar` when absent).
pub const TEMPLATES_ANNOTATION: &str = "inject.istio.io/templates";

impl InjectError {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            InjectError::NoPod | InjectError::NotAnObject => "decode",
            InjectError::ProxyConfig(_) => "proxy_config",
            InjectError::Template(_) | InjectError::UnknownTemplate(_) => "template",
            InjectError::Patch(_) => "patch",
        }
    }
}

pub(super) fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn pod_name(pod: &Value) -> String {
    let meta = &pod["metadata"];
    meta["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or_else(|| meta["generateName"].as_str())
        .unwrap_or("")
        .to_string()
}
