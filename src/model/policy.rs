//! Which workload-selector policies attach to a workload: the one rule AuthorizationPolicy and
//! RequestAuthentication share (sidecars, gateways and proxyless servers alike), istiod's
//! `WorkloadPolicyMatcher.ShouldAttachPolicy`.

use crate::config::common::PolicyTargetReference;
use crate::config::{Config, Kind, Spec};
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// The label naming the Gateway API `Gateway` a gateway pod serves.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";

/// Security policies of `kind` (AuthorizationPolicy, RequestAuthentication) from a workload's
/// namespace, then the root namespace, that attach to it, as istiod attaches them:
/// - a workload that is not a Gateway API gateway: by `selector` (none: the whole namespace, or
///   the mesh from the root namespace); a policy with `targetRef(s)` never attaches to it;
/// - a Gateway API gateway (labelled with its Gateway's name): by a `targetRef` to that Gateway
///   (group `gateway.networking.k8s.io`, kind `Gateway`, from the gateway's own namespace), or,
///   without targetRefs, by `selector` (istiod's `ENABLE_SELECTOR_BASED_K8S_GATEWAY_POLICY`, on by
///   default), except for waypoints, which never take selector policies.
///
/// Attachment to Services, ServiceEntries and the waypoint GatewayClass is a waypoint's, which
/// Rudder does not serve yet (such policies are warned about as enforced nowhere).
pub fn selecting<'a>(
    snapshot: &'a Snapshot,
    root: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    waypoint: bool,
    kind: Kind,
) -> Vec<&'a Config> {
    let gateway = labels.get(GATEWAY_NAME_LABEL);
    let mut out = Vec::new();
    for ns in [namespace, root] {
        for e in snapshot.list_namespace(kind, ns) {
            let (selector, target_ref, target_refs) = match &e.config.spec {
                Spec::AuthorizationPolicy(p) => {
                    (p.selector.as_ref(), p.target_ref.as_ref(), &p.target_refs)
                }
                Spec::RequestAuthentication(r) => {
                    (r.selector.as_ref(), r.target_ref.as_ref(), &r.target_refs)
                }
                _ => continue,
            };
            let targets: Vec<&PolicyTargetReference> = if target_refs.is_empty() {
                target_ref.into_iter().collect()
            } else {
                target_refs.iter().collect()
            };
            let selected = || {
                selector.is_none_or(|s| crate::config::mesh::labels_match(&s.match_labels, labels))
            };
            let attached = match gateway {
                None => targets.is_empty() && selected(),
                Some(_) if targets.is_empty() => !waypoint && selected(),
                Some(gateway) => {
                    e.config.metadata.namespace == namespace
                        && targets.iter().any(|t| {
                            t.group == GATEWAY_API_GROUP
                                && t.kind == "Gateway"
                                && &t.name == gateway
                                && (t.namespace.is_empty() || t.namespace == namespace)
                        })
                }
            };
            if attached {
                out.push(e.config.as_ref());
            }
        }
        if ns == root {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    const POLICIES: &str = "
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ns-wide, namespace: shop}
spec: {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: by-label, namespace: shop}
spec: {selector: {matchLabels: {app: web}}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-gateway, namespace: shop}
spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: ingress}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-other-gateway, namespace: shop}
spec: {targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: other}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-service, namespace: shop}
spec: {targetRefs: [{kind: Service, group: \"\", name: web}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-wide, namespace: istio-system}
spec: {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: root-to-gateway, namespace: istio-system}
spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: ingress}]}
";

    fn names(labels: &[(&str, &str)], waypoint: bool) -> Vec<String> {
        let store = Store::from_yaml(POLICIES);
        let snap = store.snapshot();
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        selecting(
            &snap,
            "istio-system",
            "shop",
            &labels,
            waypoint,
            Kind::AuthorizationPolicy,
        )
        .into_iter()
        .map(|c| c.metadata.name.clone())
        .collect()
    }

    #[test]
    fn workloads_take_selector_policies_and_never_targeted_ones() {
        assert_eq!(
            names(&[("app", "web")], false),
            ["by-label", "ns-wide", "mesh-wide"]
        );
        assert_eq!(names(&[("app", "db")], false), ["ns-wide", "mesh-wide"]);
    }

    #[test]
    fn gateway_api_gateways_take_policies_targeting_their_gateway() {
        assert_eq!(
            names(&[(GATEWAY_NAME_LABEL, "ingress")], false),
            ["ns-wide", "to-gateway", "mesh-wide"],
            "its Gateway's policy (not another's, not one from the root namespace), and selector policies"
        );
        assert_eq!(
            names(&[(GATEWAY_NAME_LABEL, "ingress")], true),
            ["to-gateway"],
            "a waypoint never takes selector policies"
        );
    }
}
