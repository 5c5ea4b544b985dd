//! A pod that declares its own `istio-proxy` container (the `istio/gateway` chart does, with
//! `image: auto`; users do to customise the sidecar) keeps what it declared: as istiod re-applies
//! the pod's containers over the rendered template, its fields win, lists Kubernetes merges by key
//! (env by name, ports by containerPort, volumeMounts by mountPath) merge, and `image: auto` takes
//! the rendered image.

use serde_json::{Map, Value};

/// The lists of a container merged entry by entry, by the key Kubernetes' strategic merge uses.
const MERGE_KEYS: &[(&str, &str)] = &[
    ("env", "name"),
    ("ports", "containerPort"),
    ("volumeMounts", "mountPath"),
];

/// `own` (the pod's container) over `rendered` (the template's).
pub fn container(rendered: &Value, own: &Value) -> Value {
    let mut out = rendered.clone();
    let (Some(out_map), Some(own_map)) = (out.as_object_mut(), own.as_object()) else {
        return out;
    };
    for (key, value) in own_map {
        if key == "image" && value.as_str() == Some("auto") {
            continue;
        }
        let merge_key = MERGE_KEYS.iter().find(|(k, _)| k == key).map(|(_, m)| *m);
        match (out_map.get_mut(key), value, merge_key) {
            (Some(Value::Array(base)), Value::Array(items), Some(by)) => {
                merge_list(base, items, by)
            }
            (Some(Value::Object(base)), Value::Object(items), None) => merge_maps(base, items),
            _ => {
                out_map.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// Entries of `items` replace those of `base` with the same `by` value; the rest are appended.
fn merge_list(base: &mut Vec<Value>, items: &[Value], by: &str) {
    for item in items {
        match base
            .iter_mut()
            .find(|b| b.get(by).is_some() && b.get(by) == item.get(by))
        {
            Some(slot) => *slot = item.clone(),
            None => base.push(item.clone()),
        }
    }
}

fn merge_maps(base: &mut Map<String, Value>, items: &Map<String, Value>) {
    for (k, v) in items {
        match (base.get_mut(k), v) {
            (Some(Value::Object(b)), Value::Object(i)) => merge_maps(b, i),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_pods_fields_win_and_keyed_lists_merge() {
        let rendered = json!({
            "name": "istio-proxy", "image": "proxyv2:1.30",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "ports": [{"containerPort": 15090, "name": "http-envoy-prom"}],
            "securityContext": {"runAsUser": 1337, "runAsGroup": 1337},
        });
        let own = json!({
            "name": "istio-proxy", "image": "auto",
            "env": [{"name": "B", "value": "override"}, {"name": "C", "value": "3"}],
            "ports": [{"containerPort": 15021, "name": "status-port"}],
            "securityContext": {"runAsUser": 1000},
            "resources": {"limits": {"cpu": "2"}},
        });
        let merged = container(&rendered, &own);
        assert_eq!(
            merged["image"], "proxyv2:1.30",
            "image: auto takes the rendered image"
        );
        assert_eq!(
            merged["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "override"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(merged["ports"].as_array().unwrap().len(), 2);
        assert_eq!(
            merged["securityContext"],
            json!({"runAsUser": 1000, "runAsGroup": 1337})
        );
        assert_eq!(merged["resources"], json!({"limits": {"cpu": "2"}}));
    }
}
