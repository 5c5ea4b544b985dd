//! Whether a pod is injected: istiod's namespace and pod labels, the injection policy, and the
//! always/never selectors of the injector ConfigMap.

use super::pod::{INJECT_LABEL, STATUS_ANNOTATION, string_map};
use super::settings::Template;
use crate::config::mesh::selector_matches;
use serde_json::Value;
use std::collections::BTreeMap;

/// Why a pod was or was not injected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Inject,
    Skip(String),
}

/// This control plane's revision and its tags (istiod's revision tags: other names for it).
#[derive(Debug, Clone)]
pub struct Revision {
    pub name: String,
    pub tags: Vec<String>,
}

impl Revision {
    /// Whether an `istio.io/rev` label's value names this revision.
    pub fn answers_to(&self, label: &str) -> bool {
        self.name == label || self.tags.iter().any(|t| t == label)
    }
}

/// Namespaces istiod never injects into.
const IGNORED_NAMESPACES: &[&str] = &[
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "local-path-storage",
];

/// istiod's selection: the webhook configuration's namespace/object selectors (evaluated here
/// too, so a webhook registered without them behaves the same), then the injection policy.
pub fn decide(
    template: &Template,
    revision: &Revision,
    ns_labels: &BTreeMap<String, String>,
    namespace: &str,
    pod: &Value,
) -> Decision {
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
    let pod_label = labels.get(INJECT_LABEL).map(String::as_str);
    let selected = match ns_labels.get("istio-injection").map(String::as_str) {
        Some("enabled") => pod_label != Some("false"),
        Some(_) => false,
        None => match ns_labels.get("istio.io/rev") {
            Some(rev) => revision.answers_to(rev) && pod_label != Some("false"),
            None => match labels.get("istio.io/rev") {
                Some(rev) => revision.answers_to(rev) && pod_label != Some("false"),
                None => {
                    pod_label == Some("true")
                        || (template.namespaces_by_default && pod_label.is_none())
                }
            },
        },
    };
    if !selected {
        return Decision::Skip(format!(
            "namespace {namespace} is not labelled istio-injection=enabled or istio.io/rev={}, and the pod does not opt in",
            revision.name
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
