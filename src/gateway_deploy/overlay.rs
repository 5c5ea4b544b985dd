//! Deployment parameters of managed Gateways, as istiod applies them (`applyOverlay` in
//! `gatewaycommon/deploymentcontroller.go`): ConfigMaps whose keys `deployment`, `service`,
//! `serviceAccount`, `horizontalPodAutoscaler` and `podDisruptionBudget` hold YAML patched onto
//! the objects of that kind with Kubernetes' strategic merge — first the class defaults (the
//! oldest ConfigMap of the system namespace labelled `gateway.istio.io/defaults-for-class:
//! <class>`), then the Gateway's `infrastructure.parametersRef`. An autoscaler and a disruption
//! budget exist only when a parameter describes them; a parameter may not rename or re-own an
//! object.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The label of a GatewayClass's default parameters (istiod's `GatewayClassDefaults`).
pub const DEFAULTS_FOR_CLASS: &str = "gateway.istio.io/defaults-for-class";

const KEYS: [(&str, &str); 5] = [
    ("Deployment", "deployment"),
    ("Service", "service"),
    ("ServiceAccount", "serviceAccount"),
    ("HorizontalPodAutoscaler", "horizontalPodAutoscaler"),
    ("PodDisruptionBudget", "podDisruptionBudget"),
];

/// Kinds that exist only when a parameter describes them.
const ONLY_WITH_PARAMETERS: [&str; 2] = ["HorizontalPodAutoscaler", "PodDisruptionBudget"];

/// Lists Kubernetes merges entry by entry, by field name: the key of their entries.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "hostAliases" => "name",
        "volumeMounts" => "mountPath",
        // Container ports by containerPort; a Service's by port.
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => "containerPort",
        "ports" => "port",
        _ => return None,
    })
}

/// Strategic merge of `patch` onto `base`: maps merge key by key (`null` deletes), the lists
/// Kubernetes merges by key merge entry by entry, other values (lists included) are replaced.
pub fn strategic_merge(base: &mut Value, patch: &Value) {
    let (Some(base_map), Some(patch_map)) = (base.as_object_mut(), patch.as_object()) else {
        *base = patch.clone();
        return;
    };
    merge_maps(base_map, patch_map);
}

fn merge_maps(base: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (field, value) in patch {
        if value.is_null() {
            base.remove(field);
            continue;
        }
        match (base.get_mut(field), value) {
            (Some(Value::Object(b)), Value::Object(p)) => merge_maps(b, p),
            (Some(Value::Array(b)), Value::Array(p)) => match merge_key(field, p) {
                Some(key) => merge_list(b, p, key),
                None => *b = p.clone(),
            },
            _ => {
                base.insert(field.clone(), value.clone());
            }
        }
    }
}

fn merge_list(base: &mut Vec<Value>, patch: &[Value], key: &str) {
    for item in patch {
        let id = item.get(key);
        match base.iter_mut().find(|b| id.is_some() && b.get(key) == id) {
            Some(existing) => strategic_merge(existing, item),
            None => base.push(item.clone()),
        }
    }
}

/// `objects` with `parameters` (ConfigMap data, lowest precedence first) applied; the
/// objects that exist only with parameters dropped when none describes them.
pub fn apply(
    objects: Vec<Value>,
    parameters: &[BTreeMap<String, String>],
) -> Result<Vec<Value>, String> {
    for data in parameters {
        if let Some(unknown) = data.keys().find(|k| !KEYS.iter().any(|(_, key)| key == *k)) {
            return Err(format!(
                "unsupported parameter {unknown:?} (supported: deployment, horizontalPodAutoscaler, podDisruptionBudget, service, serviceAccount)"
            ));
        }
    }
    let mut out = Vec::new();
    for mut object in objects {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let Some((_, key)) = KEYS.iter().find(|(k, _)| *k == kind) else {
            out.push(object);
            continue;
        };
        let identity = |o: &Value| {
            (
                o["metadata"]["name"].clone(),
                o["metadata"]["namespace"].clone(),
                o["metadata"]["ownerReferences"].clone(),
            )
        };
        let before = identity(&object);
        let mut applied = false;
        for data in parameters {
            let Some(text) = data.get(*key) else {
                continue;
            };
            let patch: Value = serde_saphyr::from_str(text)
                .map_err(|e| format!("parameter {key:?} is not YAML: {e}"))?;
            strategic_merge(&mut object, &patch);
            applied = true;
        }
        if identity(&object) != before {
            return Err(format!(
                "parameter {key:?} may not change the object's name, namespace or owner"
            ));
        }
        if applied || !ONLY_WITH_PARAMETERS.contains(&kind.as_str()) {
            out.push(object);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keyed_lists_merge_and_other_values_are_replaced() {
        let mut deployment = json!({"spec": {"replicas": 1, "template": {"spec": {
            "containers": [{"name": "istio-proxy", "image": "auto", "env": [{"name": "A", "value": "1"}]}],
            "tolerations": [{"key": "x"}]}}}});
        strategic_merge(
            &mut deployment,
            &json!({"spec": {"replicas": 3, "template": {"spec": {
                "containers": [{"name": "istio-proxy", "resources": {"limits": {"cpu": "2"}},
                                "env": [{"name": "B", "value": "2"}]}],
                "tolerations": [{"key": "y"}],
                "nodeSelector": null}}}}),
        );
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(deployment["spec"]["replicas"], 3);
        assert_eq!(pod["containers"][0]["image"], "auto");
        assert_eq!(pod["containers"][0]["resources"]["limits"]["cpu"], "2");
        assert_eq!(pod["containers"][0]["env"].as_array().unwrap().len(), 2);
        assert_eq!(pod["tolerations"], json!([{"key": "y"}]));
    }

    #[test]
    fn class_defaults_then_the_gateways_parameters() {
        let objects = vec![
            json!({"kind": "Deployment", "metadata": {"name": "gw-istio", "namespace": "a"}, "spec": {"replicas": 1}}),
            json!({"kind": "HorizontalPodAutoscaler", "metadata": {"name": "gw-istio", "namespace": "a"}, "spec": {}}),
            json!({"kind": "PodDisruptionBudget", "metadata": {"name": "gw-istio", "namespace": "a"}, "spec": {}}),
        ];
        let class: BTreeMap<String, String> = [(
            "deployment".to_string(),
            "spec: {replicas: 2, minReadySeconds: 5}".to_string(),
        )]
        .into();
        let own: BTreeMap<String, String> = [
            ("deployment".to_string(), "spec: {replicas: 4}".to_string()),
            (
                "horizontalPodAutoscaler".to_string(),
                "spec: {minReplicas: 2, maxReplicas: 5}".to_string(),
            ),
        ]
        .into();
        let out = apply(objects.clone(), &[class, own]).unwrap();
        assert_eq!(out.len(), 2, "no disruption budget without a parameter");
        assert_eq!(out[0]["spec"], json!({"replicas": 4, "minReadySeconds": 5}));
        assert_eq!(out[1]["spec"]["maxReplicas"], 5);
        let renamed: BTreeMap<String, String> = [(
            "deployment".to_string(),
            "metadata: {name: other}".to_string(),
        )]
        .into();
        assert!(apply(objects.clone(), &[renamed]).is_err());
        let unknown: BTreeMap<String, String> =
            [("daemonSet".to_string(), "{}".to_string())].into();
        assert!(apply(objects, &[unknown]).is_err());
    }
}
