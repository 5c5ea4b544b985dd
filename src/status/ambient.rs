//! The conditions istiod's ambient controller writes into the status of the objects it reads
//! (`AMBIENT_ENABLE_STATUS`): `istio.io/WaypointBound` on a Service, ServiceEntry or WorkloadEntry
//! that names a waypoint, and `ZtunnelAccepted` on an AuthorizationPolicy, saying whether ztunnel
//! enforces it and what it leaves out. Pure over a snapshot; the leader's status writer
//! (`status::writer`) writes them. Types and reasons are istiod's, so `kubectl wait
//! --for=condition=istio.io/WaypointBound` and dashboards keyed on them work unchanged.

use super::{Condition, Conditions};
use crate::config::security::AuthorizationAction;
use crate::config::{ConfigKey, Kind, Spec};
use crate::model::Registry;
use crate::store::Snapshot;
use crate::xds::generate::ambient::authorization;
use crate::xds::generate::ambient::{USE_WAYPOINT, USE_WAYPOINT_NAMESPACE};
use std::collections::{BTreeMap, HashMap};

pub const WAYPOINT_BOUND: &str = "istio.io/WaypointBound";
pub const ZTUNNEL_ACCEPTED: &str = "ZtunnelAccepted";
/// On an AuthorizationPolicy attached by `targetRef(s)`: whether a waypoint enforces it.
pub const WAYPOINT_ACCEPTED: &str = "WaypointAccepted";
/// On a waypoint's own Service (and an east-west gateway's): such a service has no waypoint.
const GATEWAY_MANAGED: &str = "gateway.istio.io/managed";

/// Ambient's conditions, as a status producer (`AMBIENT_ENABLE_STATUS`).
pub struct Ambient;

impl super::Producer for Ambient {
    fn name(&self) -> &'static str {
        "ambient"
    }
    fn types(&self) -> &'static [&'static str] {
        &[WAYPOINT_BOUND, ZTUNNEL_ACCEPTED, WAYPOINT_ACCEPTED]
    }
    fn kinds(&self) -> &'static [Kind] {
        KINDS
    }
    fn enabled(&self, settings: &super::Settings) -> bool {
        settings.ambient_status
    }
    fn conditions(&self, input: &super::Input) -> Conditions {
        conditions(
            input.snapshot,
            input.registry,
            input.domain_suffix,
            input.root_namespace,
        )
    }
}

/// The kinds these conditions are written on.
pub const KINDS: &[Kind] = &[
    Kind::Service,
    Kind::ServiceEntry,
    Kind::WorkloadEntry,
    Kind::AuthorizationPolicy,
];

/// Every ambient condition of `snapshot`.
pub fn conditions(
    snapshot: &Snapshot,
    registry: &Registry,
    domain_suffix: &str,
    root_namespace: &str,
) -> Conditions {
    let namespaces: HashMap<&str, &BTreeMap<String, String>> = snapshot
        .list_local(Kind::Namespace)
        .map(|e| (e.config.metadata.name.as_str(), &e.config.metadata.labels))
        .collect();
    let mut out = Conditions::new();
    for kind in [Kind::Service, Kind::ServiceEntry] {
        for e in snapshot.list_local(kind) {
            let meta = &e.config.metadata;
            let condition = if is_gateway(&meta.labels) {
                None
            } else {
                let namespace_labels = namespaces.get(meta.namespace.as_str()).copied();
                service_waypoint(&meta.labels, namespace_labels, &meta.namespace)
                    .map(|(name, ns)| waypoint_condition(&name, &ns, registry, domain_suffix))
            };
            out.insert(
                key(kind, meta),
                BTreeMap::from([(WAYPOINT_BOUND, condition)]),
            );
        }
    }
    for e in snapshot.list(Kind::WorkloadEntry) {
        let Spec::WorkloadEntry(we) = &e.config.spec else {
            continue;
        };
        let meta = &e.config.metadata;
        let labels = crate::xds::generate::ambient::workload_entry_labels(meta, we);
        // A workload uses a waypoint only when it names one itself (a namespace's waypoint is
        // for service traffic), so only its own label counts.
        let condition = service_waypoint(&labels, None, &meta.namespace)
            .map(|(name, ns)| waypoint_condition(&name, &ns, registry, domain_suffix));
        out.insert(
            key(Kind::WorkloadEntry, meta),
            BTreeMap::from([(WAYPOINT_BOUND, condition)]),
        );
    }
    for e in snapshot.list(Kind::AuthorizationPolicy) {
        let Spec::AuthorizationPolicy(policy) = &e.config.spec else {
            continue;
        };
        let meta = &e.config.metadata;
        let targets: Vec<&crate::config::common::PolicyTargetReference> =
            if policy.target_refs.is_empty() {
                policy.target_ref.iter().collect()
            } else {
                policy.target_refs.iter().collect()
            };
        if !targets.is_empty() {
            // Bound to a waypoint or gateway: not ztunnel's business; whether a waypoint takes
            // it is, as istiod reports it (none does under Rudder yet).
            let condition = waypoint_accepted(snapshot, root_namespace, meta, &targets);
            out.insert(
                key(Kind::AuthorizationPolicy, meta),
                BTreeMap::from([
                    (ZTUNNEL_ACCEPTED, None),
                    (WAYPOINT_ACCEPTED, Some(condition)),
                ]),
            );
            continue;
        }
        let condition = if !matches!(
            policy.action,
            AuthorizationAction::ALLOW | AuthorizationAction::DENY
        ) {
            Some(Condition {
                status: false,
                reason: "UnsupportedValue".into(),
                message: format!(
                    "ztunnel cannot enforce {:?} policies; this policy does not apply to ambient workloads",
                    policy.action
                ),
                observed_generation: meta.generation,
            })
        } else {
            let converted = authorization::convert_stored(root_namespace, meta, policy);
            Some(if converted.ignored_http.is_empty() {
                Condition {
                    status: true,
                    reason: "Accepted".into(),
                    message: "enforced by ztunnel".into(),
                    observed_generation: meta.generation,
                }
            } else {
                let effect = if policy.action == AuthorizationAction::DENY {
                    "ztunnel denies without the HTTP conditions, so more is denied than written"
                } else {
                    "ztunnel drops the rules that have them, so less is allowed than written"
                };
                Condition {
                    status: true,
                    reason: "UnsupportedValue".into(),
                    message: format!(
                        "ztunnel does not see HTTP, so these attributes need a waypoint: {}; {effect}",
                        converted.ignored_http.join(", ")
                    ),
                    observed_generation: meta.generation,
                }
            })
        };
        out.insert(
            key(Kind::AuthorizationPolicy, meta),
            BTreeMap::from([(ZTUNNEL_ACCEPTED, condition), (WAYPOINT_ACCEPTED, None)]),
        );
    }
    out
}

/// istiod's `WaypointAccepted` for a policy attached by `targets`: one binding per target, with
/// istiod's reasons (`Invalid`, `TargetNotFound`, `AncestorNotBound`), flattened as istiod
/// flattens them. Rudder serves no waypoint yet, so no target is bound and the messages say the
/// policy is enforced nowhere (a Gateway API gateway's own pods do enforce a policy attached to
/// their Gateway: `model::policy`).
fn waypoint_accepted(
    snapshot: &Snapshot,
    root_namespace: &str,
    meta: &crate::config::ObjectMeta,
    targets: &[&crate::config::common::PolicyTargetReference],
) -> Condition {
    const NOT_SERVED: &str =
        "Rudder does not serve waypoints yet, so this policy is enforced nowhere";
    let bindings: Vec<(String, String, String)> = targets
        .iter()
        .map(|t| {
            let namespace = if t.namespace.is_empty() {
                meta.namespace.as_str()
            } else {
                t.namespace.as_str()
            };
            let target = format!("{namespace}/{}", t.name);
            let exists = |kind: Kind| snapshot.get_named(kind, namespace, &t.name).is_some();
            let (reason, message) = match t.kind.as_str() {
                "GatewayClass" if meta.namespace != root_namespace => (
                    "Invalid",
                    format!("AuthorizationPolicy must be in the root namespace `{root_namespace}` when referencing a GatewayClass"),
                ),
                "Service" | "ServiceEntry" => {
                    let kind = if t.kind == "Service" {
                        Kind::Service
                    } else {
                        Kind::ServiceEntry
                    };
                    if exists(kind) {
                        (
                            "AncestorNotBound",
                            format!("{} {target} is not bound to a waypoint Rudder serves: {NOT_SERVED}", t.kind),
                        )
                    } else {
                        ("TargetNotFound", format!("{} {target} was not found", t.kind))
                    }
                }
                "Gateway" => (
                    "TargetNotFound",
                    format!("not bound to a waypoint ({NOT_SERVED}); the pods of Gateway {target} enforce it"),
                ),
                _ => ("TargetNotFound", format!("not bound: {NOT_SERVED}")),
            };
            let group = if t.group.is_empty() { "core" } else { t.group.as_str() };
            (format!("{}.{group}:{target}", t.kind), reason.to_string(), message)
        })
        .collect();
    if let [(_, reason, message)] = bindings.as_slice() {
        return Condition {
            status: false,
            reason: reason.clone(),
            message: message.clone(),
            observed_generation: meta.generation,
        };
    }
    let unbound: Vec<&str> = bindings.iter().map(|(a, _, _)| a.as_str()).collect();
    Condition {
        status: false,
        reason: "Invalid".into(),
        message: format!("Invalid targetRefs: {}", unbound.join(", ")),
        observed_generation: meta.generation,
    }
}

fn key(kind: Kind, meta: &crate::config::ObjectMeta) -> ConfigKey {
    ConfigKey {
        kind,
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        cluster: String::new(),
    }
}

fn is_gateway(labels: &BTreeMap<String, String>) -> bool {
    labels
        .get(GATEWAY_MANAGED)
        .is_some_and(|v| v == "istio.io-mesh-controller" || v == "istio.io-eastwest-controller")
}

/// The waypoint (name, namespace) an object's labels, or else its namespace's, name; `None`
/// when neither names one or the object opts out with `none`.
fn service_waypoint(
    labels: &BTreeMap<String, String>,
    namespace_labels: Option<&BTreeMap<String, String>>,
    namespace: &str,
) -> Option<(String, String)> {
    let own = labels.get(USE_WAYPOINT);
    let (name, source) = match own {
        Some(name) => (name, labels),
        None => {
            let ns_labels = namespace_labels?;
            (ns_labels.get(USE_WAYPOINT)?, ns_labels)
        }
    };
    if name.is_empty() || name == "none" {
        return None;
    }
    let ns = source
        .get(USE_WAYPOINT_NAMESPACE)
        .cloned()
        .unwrap_or_else(|| namespace.to_string());
    Some((name.clone(), ns))
}

/// Bound when the waypoint's Service exists; otherwise istiod's "not ready".
fn waypoint_condition(
    name: &str,
    namespace: &str,
    registry: &Registry,
    domain_suffix: &str,
) -> Condition {
    let waypoint = format!("{namespace}/{name}");
    if !registry
        .services
        .contains_key(&format!("{name}.{namespace}.svc.{domain_suffix}"))
    {
        return Condition {
            status: false,
            reason: "WaypointIsNotReady".into(),
            message: format!(
                "waypoint {waypoint} does not exist (no such Service) or is not ready"
            ),
            observed_generation: None,
        };
    }
    Condition {
        status: true,
        reason: "WaypointAccepted".into(),
        message: format!("bound to waypoint {waypoint}"),
        observed_generation: None,
    }
}
