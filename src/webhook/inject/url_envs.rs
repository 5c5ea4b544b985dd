//! Proxy settings carried in the injection webhook's path, as istiod reads them: a remote
//! cluster's webhook calls `/inject/cluster/<id>/net/<network>` (Istio's remote profile writes
//! that path), so the control plane of another cluster injects its pods with their own cluster
//! and network. Pairs are `key/value` after `/inject/` (`cluster` and `net` name
//! `ISTIO_META_CLUSTER_ID` and `ISTIO_META_NETWORK`; any other key is an environment variable of
//! its own name, upper-cased), `--slash--` in a value is `/`, and the older
//! `/inject/:ENV:KEY=value:ENV:…` form is read too.

use serde_json::Value;
use std::collections::BTreeMap;

pub const CLUSTER_ID: &str = "ISTIO_META_CLUSTER_ID";
pub const NETWORK: &str = "ISTIO_META_NETWORK";

/// The proxy environment a webhook path names (empty for `/inject`).
pub fn parse(path: &str) -> BTreeMap<String, String> {
    let path = path.trim_end_matches('/');
    let Some(rest) = path
        .strip_prefix("/inject/")
        .filter(|rest| !rest.is_empty())
    else {
        return BTreeMap::new();
    };
    let words: Vec<String> = if let Some(envs) = rest.strip_prefix(":ENV:") {
        envs.split(":ENV:")
            .filter_map(|pair| pair.split_once('='))
            .filter(|(k, _)| !k.is_empty())
            .flat_map(|(k, v)| [k.to_string(), v.to_string()])
            .collect()
    } else {
        rest.split('/')
            .enumerate()
            .map(|(i, w)| {
                if i % 2 == 1 {
                    w.replace("--slash--", "/")
                } else {
                    w.to_string()
                }
            })
            .collect()
    };
    let mut out = BTreeMap::new();
    // A key without a value (an odd count) is left out, as istiod leaves it.
    for pair in words.chunks_exact(2) {
        let env = match pair[0].as_str() {
            "cluster" => CLUSTER_ID.to_string(),
            "net" => NETWORK.to_string(),
            other => other.to_uppercase(),
        };
        if !env.is_empty() {
            out.insert(env, pair[1].clone());
        }
    }
    out
}

/// Sets `envs` on the pod's proxy container (a container or native-sidecar init container named
/// `istio-proxy`): a variable it has gets the value, one it lacks is added.
pub fn apply(pod: &mut Value, envs: &BTreeMap<String, String>) {
    for list in ["containers", "initContainers"] {
        let Some(containers) = pod["spec"][list].as_array_mut() else {
            continue;
        };
        for container in containers.iter_mut().filter(|c| c["name"] == "istio-proxy") {
            if !container["env"].is_array() {
                container["env"] = Value::Array(Vec::new());
            }
            let Some(env) = container["env"].as_array_mut() else {
                continue;
            };
            for (name, value) in envs {
                let entry = serde_json::json!({"name": name, "value": value});
                match env.iter_mut().find(|e| e["name"] == name.as_str()) {
                    Some(existing) => *existing = entry,
                    None => env.push(entry),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_as_istiod_reads_them() {
        assert!(parse("/inject").is_empty());
        assert!(parse("/inject/").is_empty());
        assert_eq!(
            parse("/inject/cluster/west/net/network2"),
            BTreeMap::from([
                (CLUSTER_ID.to_string(), "west".to_string()),
                (NETWORK.to_string(), "network2".to_string()),
            ])
        );
        assert_eq!(
            parse("/inject/cluster/west/net/a--slash--b/extra"),
            BTreeMap::from([
                (CLUSTER_ID.to_string(), "west".to_string()),
                (NETWORK.to_string(), "a/b".to_string()),
            ]),
            "a key without a value is left out"
        );
        assert_eq!(
            parse("/inject/:ENV:cluster=west:ENV:custom_var=x"),
            BTreeMap::from([
                (CLUSTER_ID.to_string(), "west".to_string()),
                ("CUSTOM_VAR".to_string(), "x".to_string()),
            ])
        );
    }

    #[test]
    fn the_proxy_container_gets_the_values() {
        let mut pod = serde_json::json!({"spec": {"containers": [
            {"name": "app"},
            {"name": "istio-proxy", "env": [{"name": CLUSTER_ID, "value": "Kubernetes"}]},
        ]}});
        apply(
            &mut pod,
            &BTreeMap::from([
                (CLUSTER_ID.to_string(), "west".to_string()),
                (NETWORK.to_string(), "n2".to_string()),
            ]),
        );
        assert_eq!(
            pod["spec"]["containers"][1]["env"],
            serde_json::json!([{"name": CLUSTER_ID, "value": "west"}, {"name": NETWORK, "value": "n2"}])
        );
        assert!(pod["spec"]["containers"][0]["env"].is_null());
    }
}
