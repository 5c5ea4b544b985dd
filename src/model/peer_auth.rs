//! The mTLS mode PeerAuthentication gives a workload (and one of its ports), with Istio's
//! precedence: a policy selecting the workload, else its namespace's, else the mesh's (root
//! namespace); UNSET inherits from the next level; the oldest policy wins a tie; PERMISSIVE when
//! nothing says otherwise.

use super::policy::{Workload, levels_among};
use crate::config::security::{MtlsMode, PeerAuthentication};
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// One PeerAuthentication with the object it came from (namespace, name, creation time).
pub type Policy<'a> = (&'a Config, &'a PeerAuthentication);

/// The policies that can apply to a workload of `namespace`: its namespace's and the root's.
pub fn applicable<'a>(
    snapshot: &'a Snapshot,
    root_namespace: &'a str,
    namespace: &'a str,
) -> Vec<Policy<'a>> {
    [namespace, root_namespace]
        .into_iter()
        .flat_map(|ns| snapshot.list_namespace(Kind::PeerAuthentication, ns))
        .filter_map(|e| match &e.config.spec {
            Spec::PeerAuthentication(pa) => Some((e.config.as_ref(), pa)),
            _ => None,
        })
        .collect()
}

/// A policy's own mode (UNSET when it sets none).
pub fn mode(p: Option<&PeerAuthentication>) -> MtlsMode {
    p.and_then(|p| p.mtls.as_ref())
        .map_or(MtlsMode::UNSET, |m| m.mode)
}

/// No selector: the policy is for its whole namespace (the mesh, in the root namespace).
pub fn namespace_wide(p: &PeerAuthentication) -> bool {
    super::policy::Attachable::namespace_wide(p)
}

/// The policies a workload's mode is resolved from, each the oldest of its level.
pub struct Levels<'a> {
    pub mesh: Option<&'a PeerAuthentication>,
    pub namespace: Option<&'a PeerAuthentication>,
    /// A policy of the workload's namespace (not the root) whose selector matches its labels.
    pub workload: Option<Policy<'a>>,
}

/// The levels among `policies` (`applicable`), chosen by the rule every levelled kind shares
/// (`policy::levels_among`).
pub fn levels<'a>(
    policies: &[Policy<'a>],
    root_namespace: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Levels<'a> {
    let workload = Workload {
        namespace,
        labels,
        waypoint: false,
        service: None,
    };
    let found = levels_among(
        policies.iter().copied(),
        |(c, _)| c,
        root_namespace,
        &workload,
    );
    Levels {
        mesh: found.root.map(|(_, p)| p),
        namespace: found.namespace.map(|(_, p)| p),
        workload: found.workload,
    }
}

/// The mode of a workload (and of one of its ports) among the `applicable` policies.
pub fn mode_among(
    policies: &[Policy],
    root_namespace: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    port: Option<u32>,
) -> MtlsMode {
    let levels = levels(policies, root_namespace, namespace, labels);
    let workload = levels.workload.map(|(_, p)| p);
    let mut effective = MtlsMode::PERMISSIVE;
    for level in [levels.mesh, levels.namespace, workload] {
        let m = mode(level);
        if m != MtlsMode::UNSET {
            effective = m;
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
        effective = m;
    }
    effective
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn workload_over_namespace_over_mesh_and_ports_over_all() {
        let s = Store::from_yaml(
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
            mode_among(
                &applicable(&snap, "istio-system", ns),
                "istio-system",
                ns,
                &labels(app),
                port,
            )
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
            mode_among(
                &applicable(&snap, "nowhere", "x"),
                "nowhere",
                "x",
                &labels("a"),
                None
            ),
            MtlsMode::PERMISSIVE,
            "nothing set"
        );
    }
}
