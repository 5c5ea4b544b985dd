//! The effective ProxyConfig of a pod being injected, merged as istiod's `EffectiveProxyConfig`
//! merges it (`pilot/pkg/model/proxy_config.go`), lowest precedence first: MeshConfig
//! `defaultConfig`, the root namespace's ProxyConfig without a selector, the pod's namespace's
//! ProxyConfig without a selector, then the pod's `proxy.istio.io/config` annotation overridden by
//! the first ProxyConfig of its namespace whose selector matches the pod. Each layer replaces the
//! fields it sets; `proxyMetadata` maps are merged key by key. The oldest ProxyConfig wins where
//! several could apply, as istiod sorts them by creation time.
//!
//! A ProxyConfig object contributes `concurrency`, its `environmentVariables` (as `proxyMetadata`)
//! and `image`, as istiod's `toMeshConfigProxyConfig`.

use crate::config::networking::ProxyConfig;
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use serde_json::{Map, Value};

/// The layers below a pod's own annotation, read from the store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyConfigSources {
    /// MeshConfig `defaultConfig`.
    pub mesh_default: Map<String, Value>,
    /// The root namespace's ProxyConfig without a selector.
    pub root: Option<Map<String, Value>>,
    /// The pod's namespace's ProxyConfig without a selector (none when that is the root).
    pub namespace: Option<Map<String, Value>>,
    /// The first ProxyConfig of the pod's namespace whose selector matches the pod.
    pub workload: Option<Map<String, Value>>,
}

impl ProxyConfigSources {
    /// The sources for a pod of `namespace` with `labels`, `root` being the mesh's root namespace.
    pub fn from_snapshot(
        snapshot: &Snapshot,
        root: &str,
        namespace: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> ProxyConfigSources {
        let mesh_default = crate::model::mesh::from_snapshot(snapshot, root)
            .ok()
            .flatten()
            .and_then(|mc| mc.default_config)
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .unwrap_or_default();
        // The levels every levelled kind shares: a `selector: {}` is neither namespace-wide
        // nor a workload's (`Attachable::namespace_wide`), as istiod reads it.
        let workload = crate::model::policy::Workload {
            namespace,
            labels,
            waypoint: false,
            service: None,
        };
        let levels = crate::model::policy::levels(snapshot, Kind::ProxyConfig, root, &workload);
        let layer = |c: Option<&std::sync::Arc<Config>>| match c.map(|c| &c.spec) {
            Some(Spec::ProxyConfig(pc)) => Some(of_object(pc)),
            _ => None,
        };
        ProxyConfigSources {
            mesh_default,
            root: layer(levels.root),
            namespace: layer(levels.namespace),
            workload: layer(levels.workload),
        }
    }

    /// The effective ProxyConfig with the pod's `proxy.istio.io/config` annotation (parsed).
    pub fn effective(&self, annotation: Option<Map<String, Value>>) -> Map<String, Value> {
        let mut out = self.mesh_default.clone();
        for layer in [&self.root, &self.namespace].into_iter().flatten() {
            merge(&mut out, layer);
        }
        let mut workload = annotation.unwrap_or_default();
        if let Some(w) = &self.workload {
            merge(&mut workload, w);
        }
        merge(&mut out, &workload);
        out
    }
}

/// istiod's `toMeshConfigProxyConfig`.
fn of_object(pc: &ProxyConfig) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(c) = pc.concurrency {
        out.insert("concurrency".into(), c.into());
    }
    if !pc.environment_variables.is_empty() {
        out.insert(
            "proxyMetadata".into(),
            Value::Object(
                pc.environment_variables
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
    }
    if let Some(image) = &pc.image {
        out.insert(
            "image".into(),
            serde_json::json!({ "imageType": image.image_type }),
        );
    }
    out
}

/// `src` over `dst`: fields replaced, `proxyMetadata` merged key by key (istiod's
/// `MergeProxyConfig`).
fn merge(dst: &mut Map<String, Value>, src: &Map<String, Value>) {
    for (k, v) in src {
        match (k.as_str(), dst.get_mut(k), v) {
            ("proxyMetadata", Some(Value::Object(old)), Value::Object(new)) => {
                for (mk, mv) in new {
                    old.insert(mk.clone(), mv.clone());
                }
            }
            _ => {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The pod's proxy metadata, as the template writes it into the containers' environment.
pub fn proxy_metadata(effective: &Map<String, Value>) -> Vec<(String, String)> {
    effective
        .get("proxyMetadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let value = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(yaml: &str) -> std::sync::Arc<Snapshot> {
        crate::store::Store::from_yaml(yaml).snapshot()
    }

    /// istiod's precedence: mesh default < root namespace < pod namespace < annotation <
    /// workload ProxyConfig; `proxyMetadata` merged key by key; the oldest ProxyConfig wins.
    #[test]
    fn layers_merge_in_istiods_order() {
        let yaml = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultConfig:
      concurrency: 1
      holdApplicationUntilProxyStarts: true
      proxyMetadata: {ISTIO_META_DNS_CAPTURE: "true", FROM_MESH: "m"}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: root, namespace: istio-system, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {concurrency: 2, environmentVariables: {FROM_ROOT: r}}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: shop, namespace: shop, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {concurrency: 3, image: {imageType: distroless}}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: shop-later, namespace: shop, creationTimestamp: "2026-02-01T00:00:00Z"}
spec: {concurrency: 9}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: web, namespace: shop, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {selector: {matchLabels: {app: web}}, concurrency: 5, environmentVariables: {FROM_MESH: w}}
"#;
        let snap = snapshot(yaml);
        let labels = |app: &str| [("app".to_string(), app.to_string())].into_iter().collect();
        let annotation: Map<String, Value> =
            serde_json::from_str(r#"{"concurrency": 4, "proxyMetadata": {"FROM_POD": "p"}}"#)
                .unwrap();
        let web = ProxyConfigSources::from_snapshot(&snap, "istio-system", "shop", &labels("web"))
            .effective(Some(annotation.clone()));
        assert_eq!(
            web["concurrency"], 5,
            "the workload's ProxyConfig beats the annotation"
        );
        assert_eq!(web["holdApplicationUntilProxyStarts"], true);
        assert_eq!(web["image"]["imageType"], "distroless");
        let metadata: std::collections::BTreeMap<_, _> = proxy_metadata(&web).into_iter().collect();
        assert_eq!(metadata["ISTIO_META_DNS_CAPTURE"], "true");
        assert_eq!(metadata["FROM_ROOT"], "r");
        assert_eq!(metadata["FROM_POD"], "p");
        assert_eq!(metadata["FROM_MESH"], "w");
        let db = ProxyConfigSources::from_snapshot(&snap, "istio-system", "shop", &labels("db"))
            .effective(Some(annotation));
        assert_eq!(db["concurrency"], 4, "the annotation beats the namespace's");
        let plain = ProxyConfigSources::from_snapshot(&snap, "istio-system", "shop", &labels("db"))
            .effective(None);
        assert_eq!(plain["concurrency"], 3, "the oldest namespace ProxyConfig");
        let other =
            ProxyConfigSources::from_snapshot(&snap, "istio-system", "other", &labels("db"))
                .effective(None);
        assert_eq!(other["concurrency"], 2, "the root namespace's");
    }
}
