//! The mTLS mode PeerAuthentication gives a workload (and one of its ports), with Istio's
//! precedence: a policy selecting the workload, else its namespace's, else the mesh's (root
//! namespace); UNSET inherits from the next level; the oldest policy wins a tie; PERMISSIVE when
//! nothing says otherwise.

use crate::config::security::{MtlsMode, PeerAuthentication};
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use std::collections::BTreeMap;

pub fn effective_mode(
    snapshot: &Snapshot,
    root_namespace: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    port: Option<u32>,
) -> MtlsMode {
    let policies: Vec<(&Config, &PeerAuthentication)> = [namespace, root_namespace]
        .into_iter()
        .flat_map(|ns| snapshot.list_namespace(Kind::PeerAuthentication, ns))
        .filter_map(|e| match &e.config.spec {
            Spec::PeerAuthentication(pa) => Some((e.config.as_ref(), pa)),
            _ => None,
        })
        .collect();
    mode_among(&policies, root_namespace, namespace, labels, port)
}

pub fn mode_among(
    policies: &[(&Config, &PeerAuthentication)],
    root_namespace: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    port: Option<u32>,
) -> MtlsMode {
    let oldest = |pred: &dyn Fn(&Config, &PeerAuthentication) -> bool| {
        policies
            .iter()
            .filter(|(c, p)| pred(c, p))
            .min_by(|(a, _), (b, _)| {
                (&a.metadata.creation_timestamp, &a.metadata.name)
                    .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
            })
            .map(|(_, p)| *p)
    };
    let no_selector = |p: &PeerAuthentication| {
        p.selector
            .as_ref()
            .is_none_or(|s| s.match_labels.is_empty())
    };
    let mesh = oldest(&|c, p| c.metadata.namespace == root_namespace && no_selector(p));
    let ns = oldest(&|c, p| {
        c.metadata.namespace == namespace && namespace != root_namespace && no_selector(p)
    });
    let workload = oldest(&|c, p| {
        c.metadata.namespace == namespace
            && p.selector.as_ref().is_some_and(|s| {
                !s.match_labels.is_empty()
                    && s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
    });
    let mut mode = MtlsMode::PERMISSIVE;
    for level in [mesh, ns, workload].into_iter().flatten() {
        if let Some(m) = level.mtls.as_ref().map(|m| m.mode)
            && m != MtlsMode::UNSET
        {
            mode = m;
        }
    }
    // Port-level settings exist only on workload policies.
    if let (Some(port), Some(w)) = (port, workload)
        && let Some(m) = w
            .port_level_mtls
            .as_ref()
            .and_then(|levels| levels.get(&port.to_string()))
            .map(|m| m.mode)
            .filter(|m| *m != MtlsMode::UNSET)
    {
        mode = m;
    }
    mode
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn store(yaml: &str) -> Store {
        let store = Store::new(16);
        let parsed = crate::config::parse_yaml(yaml, "default");
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        for c in parsed.configs {
            store.upsert(c);
        }
        store
    }

    #[test]
    fn workload_over_namespace_over_mesh_and_ports_over_all() {
        let s = store(
            r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: relaxed}
spec: {mtls: {mode: PERMISSIVE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: db, namespace: relaxed}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: UNSET}
  portLevelMtls: {5432: {mode: DISABLE}, 8080: {mode: STRICT}}
"#,
        );
        let snap = s.snapshot();
        let labels = |app: &str| BTreeMap::from([("app".to_string(), app.to_string())]);
        let mode = |ns: &str, app: &str, port| {
            effective_mode(&snap, "istio-system", ns, &labels(app), port)
        };
        assert_eq!(mode("other", "web", None), MtlsMode::STRICT, "the mesh");
        assert_eq!(
            mode("relaxed", "web", None),
            MtlsMode::PERMISSIVE,
            "the namespace"
        );
        assert_eq!(
            mode("relaxed", "db", None),
            MtlsMode::PERMISSIVE,
            "UNSET inherits"
        );
        assert_eq!(mode("relaxed", "db", Some(5432)), MtlsMode::DISABLE);
        assert_eq!(mode("relaxed", "db", Some(8080)), MtlsMode::STRICT);
        assert_eq!(
            effective_mode(&snap, "nowhere", "x", &labels("a"), None),
            MtlsMode::PERMISSIVE,
            "nothing set"
        );
    }
}
