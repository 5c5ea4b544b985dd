//! Which workload-selector policies attach to a workload: the one rule AuthorizationPolicy and
//! RequestAuthentication share (sidecars, gateways and proxyless servers alike).

use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// Security policies of `kind` (AuthorizationPolicy, RequestAuthentication) from a workload's
/// namespace, then the root namespace, that select its `labels`: no selector means the whole namespace (the mesh, from
/// the root namespace). Policies with `targetRef(s)` are for other attachment points (waypoints,
/// Gateway API) and are left out.
pub fn selecting<'a>(
    snapshot: &'a Snapshot,
    root: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    kind: Kind,
) -> Vec<&'a Config> {
    let mut out = Vec::new();
    for ns in [namespace, root] {
        for e in snapshot.list_namespace(kind, ns) {
            let (selector, targeted) = match &e.config.spec {
                Spec::AuthorizationPolicy(p) => (
                    p.selector.as_ref(),
                    p.target_ref.is_some() || !p.target_refs.is_empty(),
                ),
                Spec::RequestAuthentication(r) => (
                    r.selector.as_ref(),
                    r.target_ref.is_some() || !r.target_refs.is_empty(),
                ),
                _ => continue,
            };
            let selected = selector
                .is_none_or(|s| s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v)));
            if selected && !targeted {
                out.push(e.config.as_ref());
            }
        }
        if ns == root {
            break;
        }
    }
    out
}
