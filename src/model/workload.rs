//! Workload naming as istiod does it: the workload that owns a pod (a ReplicaSet's pod belongs to its
//! Deployment) and the canonical service name and revision. Shared by injection and ambient.

use std::collections::BTreeMap;

/// The workload that owns the pod, as istiod names it: a ReplicaSet's pod belongs to its Deployment,
/// a Job's to its CronJob when the name says so; a bare pod to itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub name: String,
    pub kind: String,
    pub api_version: String,
}

/// The workload from the pod's controller `(kind, name, apiVersion)`, if it has one.
pub fn workload_from_owner(
    pod_name: &str,
    labels: &BTreeMap<String, String>,
    controller: Option<(&str, &str, &str)>,
) -> Workload {
    let Some((kind, name, api_version)) = controller else {
        return Workload {
            name: pod_name.trim_end_matches('-').to_string(),
            kind: "Pod".into(),
            api_version: "v1".into(),
        };
    };
    let (name, kind, api_version) = (name.to_string(), kind.to_string(), api_version.to_string());
    match kind.as_str() {
        "ReplicaSet" => match labels.get("pod-template-hash") {
            Some(hash) if name.ends_with(&format!("-{hash}")) => Workload {
                name: name[..name.len() - hash.len() - 1].to_string(),
                kind: "Deployment".into(),
                api_version: "apps/v1".into(),
            },
            _ => Workload {
                name,
                kind,
                api_version,
            },
        },
        "Job" => {
            // A CronJob names its Jobs `<cronjob>-<scheduled minute>`.
            match name.rsplit_once('-') {
                Some((cron, suffix))
                    if !cron.is_empty() && suffix.chars().all(|c| c.is_ascii_digit()) =>
                {
                    Workload {
                        name: cron.to_string(),
                        kind: "CronJob".into(),
                        api_version: "batch/v1".into(),
                    }
                }
                _ => Workload {
                    name,
                    kind,
                    api_version,
                },
            }
        }
        _ => Workload {
            name,
            kind,
            api_version,
        },
    }
}

/// Istio's canonical service labels: explicit label, else the app labels, else the workload.
pub fn canonical(labels: &BTreeMap<String, String>, workload: &str) -> (String, String) {
    let first = |keys: &[&str]| keys.iter().find_map(|k| labels.get(*k).cloned());
    let name = first(&[
        "service.istio.io/canonical-name",
        "app.kubernetes.io/name",
        "app",
    ])
    .unwrap_or_else(|| workload.to_string());
    let revision = first(&[
        "service.istio.io/canonical-revision",
        "app.kubernetes.io/version",
        "version",
    ])
    .unwrap_or_else(|| "latest".into());
    (name, revision)
}

/// The workload that owns a Kubernetes pod (from its controller owner reference).
pub fn of_pod(pod: &k8s_openapi::api::core::v1::Pod) -> Workload {
    let meta = &pod.metadata;
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| (r.kind.as_str(), r.name.as_str(), r.api_version.as_str()));
    let labels = meta.labels.clone().unwrap_or_default();
    workload_from_owner(
        meta.name.as_deref().unwrap_or_default(),
        &labels,
        controller,
    )
}

/// The workload a WorkloadEntry (or a ServiceEntry's inline endpoint, named `<entry>-<index>`)
/// belongs to, as istiod names it: its auto-registration group, else its
/// `service.istio.io/workload-name` label, else its own name.
pub fn of_workload_entry(
    name: &str,
    annotations: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> String {
    annotations
        .get("istio.io/autoRegistrationGroup")
        .or_else(|| labels.get("service.istio.io/workload-name"))
        .cloned()
        .unwrap_or_else(|| name.to_string())
}

/// A WorkloadEntry's labels: the object's, then its spec's (which win).
pub fn workload_entry_labels(
    meta: &crate::config::ObjectMeta,
    we: &crate::config::networking::WorkloadEntry,
) -> BTreeMap<String, String> {
    meta.labels
        .iter()
        .chain(we.labels.iter())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
