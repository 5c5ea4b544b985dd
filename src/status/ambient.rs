//! The conditions istiod's ambient controller writes into the status of the objects it reads
//! (`AMBIENT_ENABLE_STATUS`): `istio.io/WaypointBound` on a Service, ServiceEntry or WorkloadEntry
//! that names a waypoint, and `ZtunnelAccepted` on an AuthorizationPolicy, saying whether ztunnel
//! enforces it and what it leaves out. Pure over a snapshot; the leader's status writer
//! (`status::writer`) writes them. Types and reasons are istiod's, so `kubectl wait
//! --for=condition=istio.io/WaypointBound` and dashboards keyed on them work unchanged.

use super::producer::{Condition, Conditions};
use crate::config::security::AuthorizationAction;
use crate::config::{ConfigKey, Kind, Spec};
use crate::model::Registry;
use crate::model::l4_policy::policy_unseen_by_ztunnel;
use crate::model::policy::WAYPOINT_CLASS;
use crate::model::waypoint::{is_gateway, named_waypoint};
use crate::store::Snapshot;
use std::collections::{BTreeMap, HashMap};

pub const WAYPOINT_BOUND: &str = "istio.io/WaypointBound";
pub const ZTUNNEL_ACCEPTED: &str = "ZtunnelAccepted";
/// On an AuthorizationPolicy attached by `targetRef(s)`: whether a waypoint enforces it.
pub const WAYPOINT_ACCEPTED: &str = "WaypointAccepted";
/// Ambient's conditions, as a status producer (`AMBIENT_ENABLE_STATUS`).
pub struct Ambient;

impl super::producer::Producer for Ambient {
    fn name(&self) -> &'static str {
        "ambient"
    }
    fn types(&self) -> &'static [&'static str] {
        &[WAYPOINT_BOUND, ZTUNNEL_ACCEPTED, WAYPOINT_ACCEPTED]
    }
    fn kinds(&self) -> &'static [Kind] {
        KINDS
    }
    fn enabled(&self, settings: &super::producer::Settings) -> bool {
        settings.ambient_status
    }
    fn conditions(&self, input: &super::producer::Input) -> Conditions {
        conditions(
            input.snapshot,
            input.registry,
            &input.mesh.domain_suffix,
            &input.mesh.root_namespace,
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
                named_waypoint(&meta.labels, namespace_labels, &meta.namespace)
                    .map(|w| waypoint_condition(&w.name, &w.namespace, registry, domain_suffix))
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
        let labels = crate::model::workload::workload_entry_labels(meta, we);
        // A workload uses a waypoint only when it names one itself (a namespace's waypoint is
        // for service traffic), so only its own label counts.
        let condition = named_waypoint(&labels, None, &meta.namespace)
            .map(|w| waypoint_condition(&w.name, &w.namespace, registry, domain_suffix));
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
            // it is, as istiod reports it.
            let condition = waypoint_accepted(
                snapshot,
                registry,
                domain_suffix,
                root_namespace,
                meta,
                &targets,
            );
            out.insert(
                key(Kind::AuthorizationPolicy, meta),
                BTreeMap::from([
                    (ZTUNNEL_ACCEPTED, None),
                    (WAYPOINT_ACCEPTED, Some(condition)),
                ]),
            );
            continue;
        }
        let condition = if crate::config::security::is_dry_run(&meta.annotations) {
            Some(Condition {
                status: false,
                reason: "UnsupportedValue".into(),
                message: format!(
                    "found policy \"{}/{}\" using dry-run annotation, but support for ambient dry-run authorizationPolicies isn't enabled",
                    meta.namespace, meta.name
                ),
                observed_generation: meta.generation,
            })
        } else if !matches!(
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
            let unseen = policy_unseen_by_ztunnel(policy);
            Some(if unseen.is_empty() {
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
                        unseen.join(", ")
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
/// istiod's reasons and messages (`Accepted` "bound to <waypoint>", `Invalid`, `TargetNotFound`,
/// `AncestorNotBound`), flattened as istiod flattens them (`PartiallyInvalid` when some bind).
fn waypoint_accepted(
    snapshot: &Snapshot,
    registry: &Registry,
    domain_suffix: &str,
    root_namespace: &str,
    meta: &crate::config::ObjectMeta,
    targets: &[&crate::config::common::PolicyTargetReference],
) -> Condition {
    let namespace_labels = |ns: &str| {
        snapshot
            .get_named(Kind::Namespace, "", ns)
            .map(|e| e.config.metadata.labels.clone())
    };
    let bindings: Vec<(String, bool, String, String)> = targets
        .iter()
        .map(|t| {
            let namespace = if t.namespace.is_empty() {
                meta.namespace.as_str()
            } else {
                t.namespace.as_str()
            };
            let key = format!("{namespace}/{}", t.name);
            let (bound, reason, message) = match t.kind.as_str() {
                "GatewayClass" if namespace != root_namespace => (
                    false,
                    "Invalid",
                    format!("AuthorizationPolicy must be in the root namespace `{root_namespace}` when referencing a GatewayClass"),
                ),
                "GatewayClass" => match snapshot.get_named(Kind::GatewayClass, "", &t.name) {
                    None => (false, "TargetNotFound", "not bound".to_string()),
                    Some(e) if !is_waypoint_class(&e.config.spec) => (
                        false,
                        "Invalid",
                        format!("GatewayClass must use controller name `{}` for waypoints", crate::config::gateway_api::MESH_CONTROLLER),
                    ),
                    Some(_) => (true, "Accepted", format!("bound to {}", t.name)),
                },
                "Gateway" if waypoint_exists(snapshot, registry, domain_suffix, namespace, &t.name) => {
                    (true, "Accepted", format!("bound to {key}"))
                }
                "Service" | "ServiceEntry" => {
                    let kind = if t.kind == "Service" {
                        Kind::Service
                    } else {
                        Kind::ServiceEntry
                    };
                    match snapshot.get_named(kind, namespace, &t.name) {
                        None => (false, "TargetNotFound", format!("{} {key} was not found", t.kind)),
                        Some(e) => {
                            let labels = &e.config.metadata.labels;
                            let ns_labels = namespace_labels(namespace);
                            let waypoint = (!is_gateway(labels))
                                .then(|| named_waypoint(labels, ns_labels.as_ref(), namespace))
                                .flatten()
                                .filter(|w| {
                                    waypoint_exists(snapshot, registry, domain_suffix, &w.namespace, &w.name)
                                });
                            match waypoint {
                                Some(w) => (true, "Accepted", format!("bound to {}/{}", w.namespace, w.name)),
                                None => (
                                    false,
                                    "AncestorNotBound",
                                    format!("{} {key} is not bound to a waypoint", t.kind),
                                ),
                            }
                        }
                    }
                }
                _ => (false, "TargetNotFound", "not bound".to_string()),
            };
            let group = if t.group.is_empty() { "core" } else { t.group.as_str() };
            (
                format!("{}.{group}:{key}", t.kind),
                bound,
                reason.to_string(),
                message,
            )
        })
        .collect();
    if let [(_, bound, reason, message)] = bindings.as_slice() {
        return Condition {
            status: *bound,
            reason: reason.clone(),
            message: message.clone(),
            observed_generation: meta.generation,
        };
    }
    let unbound: Vec<&str> = bindings
        .iter()
        .filter(|b| !b.1)
        .map(|(a, _, _, _)| a.as_str())
        .collect();
    let any_bound = bindings.iter().any(|b| b.1);
    let reason = match (any_bound, unbound.is_empty()) {
        (true, true) => "Accepted",
        (true, false) => "PartiallyInvalid",
        (false, _) => "Invalid",
    };
    Condition {
        status: any_bound,
        reason: reason.into(),
        message: if unbound.is_empty() {
            String::new()
        } else {
            format!("Invalid targetRefs: {}", unbound.join(", "))
        },
        observed_generation: meta.generation,
    }
}

fn is_waypoint_class(spec: &crate::config::Spec) -> bool {
    matches!(spec, crate::config::Spec::GatewayClass(c) if c.controller_name == crate::config::gateway_api::MESH_CONTROLLER)
}

/// A waypoint `namespace/name`: a Gateway of a waypoint class, or (as istiod's waypoints index
/// also finds them) a Service or ServiceEntry of that name managed as a waypoint.
fn waypoint_exists(
    snapshot: &Snapshot,
    registry: &Registry,
    domain_suffix: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let gateway = snapshot
        .get_named(Kind::KubernetesGateway, namespace, name)
        .is_some_and(|e| match &e.config.spec {
            crate::config::Spec::KubernetesGateway(g) => g.gateway_class_name == WAYPOINT_CLASS,
            _ => false,
        });
    gateway
        || registry
            .services
            .get(&format!("{name}.{namespace}.svc.{domain_suffix}"))
            .is_some_and(|s| is_gateway(&s.labels))
}

fn key(kind: Kind, meta: &crate::config::ObjectMeta) -> ConfigKey {
    ConfigKey {
        kind,
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        cluster: String::new(),
    }
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
