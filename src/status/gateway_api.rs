//! The status istiod's Gateway API controller writes (`PILOT_ENABLE_GATEWAY_API_STATUS`):
//! GatewayClass `Accepted`; Gateway `Accepted`/`Programmed`, its addresses and each listener's
//! supported kinds, attached routes and conditions; each route's parents it owns
//! (`controllerName: istio.io/gateway-controller`) with `Accepted`/`ResolvedRefs`. Pure over a
//! snapshot and the translation `model::gateway_api` made of it; the leader's status writer
//! writes what differs, keeping what other controllers wrote.

use super::producer::Input;
use crate::config::gateway_api::CONTROLLER;
use crate::config::{ConfigKey, Kind, Spec};
use crate::model::Registry;
use crate::model::gateway_api::{
    BUILTIN_CLASSES, Condition, GatewayOutcome, Reference, RouteOutcome, Translation,
};
use crate::store::Snapshot;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The Gateway API's status, as a producer of whole status fields.
pub struct GatewayApi;

impl super::producer::FieldsProducer for GatewayApi {
    fn name(&self) -> &'static str {
        "gateway-api"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[
            Kind::GatewayClass,
            Kind::KubernetesGateway,
            Kind::HTTPRoute,
            Kind::GRPCRoute,
            Kind::TCPRoute,
            Kind::TLSRoute,
            Kind::BackendTLSPolicy,
            Kind::ListenerSet,
        ]
    }
    fn enabled(&self, settings: &super::producer::Settings) -> bool {
        settings.gateway_api_status
    }
    fn statuses(&self, input: &Input) -> BTreeMap<ConfigKey, Value> {
        statuses(input, input.translation)
    }
    fn merge(&self, kind: Kind, current: &Value, wanted: &Value, now: &str) -> Value {
        merge(kind, current, wanted, now)
    }
}

/// Which of istiod's GatewayClasses the leader creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassSet {
    /// The waypoint class (the ambient profile).
    pub ambient: bool,
    /// The east-west class (AMBIENT_ENABLE_MULTI_NETWORK).
    pub multi_network: bool,
}

/// istiod's GatewayClasses the leader creates when absent (`istio`, `istio-remote`; the
/// waypoint class with the ambient profile, the east-west class with ambient multi-network).
pub fn classes_to_create(set: ClassSet) -> Vec<Value> {
    use crate::config::gateway_api::{EAST_WEST_CLASS, EAST_WEST_CONTROLLER};
    let east_west = [(EAST_WEST_CLASS, EAST_WEST_CONTROLLER)];
    BUILTIN_CLASSES
        .iter()
        .filter(|(name, _)| set.ambient || *name != "istio-waypoint")
        .chain(east_west.iter().filter(|_| set.multi_network))
        .map(|(name, controller)| {
            let description = match *name {
                "istio" => "The default Istio GatewayClass",
                "istio-waypoint" => "The default Istio waypoint GatewayClass",
                EAST_WEST_CLASS => "The default GatewayClass for Istio East West Gateways",
                _ => "Remote to this cluster. Does not deploy or affect configuration.",
            };
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                   "metadata": {"name": name},
                   "spec": {"controllerName": controller, "description": description}})
        })
        .collect()
}

fn condition(kind: &str, c: &Condition, generation: Option<i64>) -> Value {
    let mut v = json!({"type": kind, "status": if c.status { "True" } else { "False" },
                       "reason": c.reason, "message": c.message});
    if let Some(g) = generation {
        v["observedGeneration"] = g.into();
    }
    v
}

/// Every status the translation amounts to, as the objects should carry it (without transition
/// times, which `merge` fills in).
pub fn statuses(input: &Input, t: &Translation) -> BTreeMap<ConfigKey, Value> {
    let snapshot = input.snapshot;
    let mut out = BTreeMap::new();
    for c in &t.classes {
        out.insert(
            ConfigKey {
                kind: Kind::GatewayClass,
                namespace: String::new(),
                name: c.name.clone(),
                cluster: String::new(),
            },
            json!({"conditions": [condition("Accepted", &c.accepted, c.generation)]}),
        );
    }
    for (key, g) in &t.gateway_outcomes {
        out.insert(key.clone(), gateway_status(input, key, g));
    }
    for (key, r) in &t.route_outcomes {
        out.insert(key.clone(), route_status(input, r));
    }
    backend_tls_statuses(snapshot, t, &mut out);
    out
}

/// BackendTLSPolicy status: one ancestor per target (the Service or ServiceEntry targeted), then
/// one per Gateway whose routes send to a target, as istiod reports them (at most 16, targets
/// first), each with `Accepted` (the target exists; an older policy does not already hold it;
/// its CA is usable) and `ResolvedRefs` (the CA reference is a ConfigMap of the policy's
/// namespace with a PEM `ca.crt`).
fn backend_tls_statuses(
    snapshot: &Snapshot,
    translation: &Translation,
    out: &mut BTreeMap<ConfigKey, Value>,
) {
    let mut policies: Vec<&std::sync::Arc<crate::config::Config>> = snapshot
        .list_local(Kind::BackendTLSPolicy)
        .map(|e| &e.config)
        .collect();
    policies.sort_by(|a, b| a.age_key().cmp(&b.age_key()));
    let mut held: std::collections::BTreeSet<(String, String, String, String, Option<String>)> =
        Default::default();
    for config in policies {
        let Spec::BackendTLSPolicy(p) = &config.spec else {
            continue;
        };
        let ns = &config.metadata.namespace;
        let generation = config.metadata.generation;
        let resolved = match p.validation.ca_certificate_refs.first() {
            None => Condition::ok("ResolvedRefs", "Configuration is valid"),
            Some(r) if !(r.group.is_empty() && r.kind == "ConfigMap") => Condition::failed(
                "InvalidKind",
                format!(
                    "Certificate reference not supported: unsupported kind {}",
                    r.kind
                ),
            ),
            Some(r) => {
                let pem = crate::model::gateway_api::backend_tls::ca_bundle(snapshot, ns, &r.name)
                    .is_some();
                if pem {
                    Condition::ok("ResolvedRefs", "Configuration is valid")
                } else {
                    Condition::failed(
                        "InvalidCACertificateRef",
                        format!(
                            "Certificate reference invalid: ConfigMap {}/{} has no PEM ca.crt",
                            ns, r.name
                        ),
                    )
                }
            }
        };
        let well_known = p
            .validation
            .well_known_ca_certificates
            .as_deref()
            .filter(|w| !w.is_empty());
        let mut gateway_ancestors: Vec<(Value, Value)> = Vec::new();
        let mut ancestors: Vec<Value> = p
            .target_refs
            .iter()
            .map(|t| {
                let section = t.section_name.clone().filter(|s| !s.is_empty());
                let exists = match (t.group.as_str(), t.kind.as_str()) {
                    ("", "Service") => snapshot.get_named(Kind::Service, ns, &t.name).is_some(),
                    ("networking.istio.io", "ServiceEntry") => snapshot
                        .get_named(Kind::ServiceEntry, ns, &t.name)
                        .is_some(),
                    _ => false,
                };
                let first = held.insert((
                    t.group.clone(),
                    t.kind.clone(),
                    ns.clone(),
                    t.name.clone(),
                    section.clone(),
                ));
                let accepted = if !exists {
                    Condition::failed("TargetNotFound", format!("{} {} not found", t.kind, t.name))
                } else if !first {
                    Condition::failed(
                        "Conflicted",
                        "an older BackendTLSPolicy targets the same backend",
                    )
                } else if well_known.is_some_and(|w| w != "System") {
                    Condition::failed(
                        "Invalid",
                        format!(
                            "Unknown wellKnownCACertificates: {}",
                            well_known.unwrap_or_default()
                        ),
                    )
                } else if !resolved.status {
                    Condition::failed("NoValidCACertificate", "no valid CA certificate")
                } else {
                    Condition::ok("Accepted", "Configuration is valid")
                };
                let mut ancestor = json!({"group": t.group, "kind": t.kind, "name": t.name,
                                          "namespace": ns});
                if let Some(s) = &section {
                    ancestor["sectionName"] = json!(s);
                }
                let conditions = json!([
                    condition("Accepted", &accepted, generation),
                    condition("ResolvedRefs", &resolved, generation)
                ]);
                for gateway in gateways_sending_to(snapshot, translation, ns, &t.kind, &t.name) {
                    if !gateway_ancestors.iter().any(|(g, _)| *g == gateway) {
                        gateway_ancestors.push((gateway, conditions.clone()));
                    }
                }
                json!({"ancestorRef": ancestor, "controllerName": CONTROLLER,
                       "conditions": conditions})
            })
            .collect();
        ancestors.extend(gateway_ancestors.into_iter().map(|(gateway, conditions)| {
            json!({"ancestorRef": gateway, "controllerName": CONTROLLER, "conditions": conditions})
        }));
        ancestors.truncate(16);
        out.insert(config.key(), json!({ "ancestors": ancestors }));
    }
}

/// Whether a reference resolves: a backend is a service of the registry the push built (one
/// outside discoverySelectors is not, as proxies get no cluster for it), a certificate a
/// Secret of the snapshot.
fn resolves(input: &Input, r: &Reference) -> bool {
    let (snapshot, registry) = (input.snapshot, input.registry);
    match r {
        Reference::Service { namespace, name } => {
            registry
                .services
                .contains_key(&crate::model::kubernetes::service_hostname(
                    namespace,
                    name,
                    &input.mesh.domain_suffix,
                ))
        }
        Reference::Hostname { host } => registry.services.contains_key(host),
        Reference::Secret { namespace, name } => snapshot
            .get_named(Kind::Secret, namespace, name)
            .is_some_and(|e| match &e.config.spec {
                Spec::Secret(s) => s.data.as_ref().is_some_and(|d| {
                    (d.contains_key("tls.crt") && d.contains_key("tls.key"))
                        || (d.contains_key("cert") && d.contains_key("key"))
                }),
                _ => false,
            }),
    }
}

fn gateway_status(input: &Input, key: &ConfigKey, g: &GatewayOutcome) -> Value {
    let generation = g.generation;
    if g.unmanaged {
        return json!({"conditions": [
            condition("Accepted", &g.accepted, generation),
            condition("Programmed", &Condition::ok("Programmed", "This Gateway is remote; Istio will not program it"), generation),
        ]});
    }
    let (programmed, addresses) = if key.kind == Kind::ListenerSet {
        // A ListenerSet is programmed with its Gateway; it has no addresses of its own.
        let programmed = if g.accepted.status {
            Condition::ok("Programmed", "ListenerSet programmed")
        } else {
            Condition::failed("NotAllowed", "ListenerSet is not attached to its Gateway")
        };
        (programmed, Vec::new())
    } else {
        programmed(input.snapshot, input.registry, &key.namespace, &g.services)
    };
    let listeners: Vec<Value> = g
        .listeners
        .iter()
        .map(|l| {
            let mut conditions = l.conditions.clone();
            if let Some(missing) = l
                .certificates
                .iter()
                .find(|c| !resolves(input, c))
                && conditions.get("ResolvedRefs").is_some_and(|c| c.status)
            {
                let Reference::Secret { namespace, name } = missing else {
                    unreachable!("listeners refer to Secrets only")
                };
                conditions.insert(
                    "ResolvedRefs",
                    Condition::failed(
                        "InvalidCertificateRef",
                        format!("invalid certificate reference /Secret/{name}, secret {namespace}/{name} not found"),
                    ),
                );
                conditions.insert(
                    "Programmed",
                    Condition::failed("Invalid", "Bad TLS configuration"),
                );
            }
            json!({"name": l.name,
                   "supportedKinds": l.supported_kinds,
                   "attachedRoutes": l.attached_routes,
                   "conditions": conditions.iter().map(|(t, c)| condition(t, c, generation)).collect::<Vec<_>>()})
        })
        .collect();
    let mut status = json!({
        "conditions": [condition("Accepted", &g.accepted, generation),
                       condition("Programmed", &programmed, generation)],
        "listeners": listeners,
    });
    if !addresses.is_empty() {
        status["addresses"] = addresses.into();
    }
    if g.attached_listener_sets > 0 {
        status["attachedListenerSets"] = g.attached_listener_sets.into();
    }
    status
}

/// `Programmed` and the addresses to report: the Gateway's Services must exist in its namespace
/// and have endpoints (istiod's `ResolveGatewayInstances`); addresses are a LoadBalancer's
/// ingress, else the Services' cluster IPs.
fn programmed(
    snapshot: &Snapshot,
    registry: &Registry,
    namespace: &str,
    services: &[String],
) -> (Condition, Vec<Value>) {
    if services.is_empty() {
        return (
            Condition::failed(
                "AddressNotUsable",
                "Failed to assign to any requested addresses",
            ),
            Vec::new(),
        );
    }
    let mut warnings = Vec::new();
    let mut assigned = Vec::new();
    let mut addresses = Vec::new();
    let mut unusable = false;
    for host in services {
        let service = registry
            .services
            .get(host)
            .filter(|s| s.namespace == namespace);
        let Some(service) = service else {
            warnings.push(format!("hostname {host:?} not found"));
            unusable = true;
            continue;
        };
        let has_endpoints = service
            .ports
            .iter()
            .any(|p| !registry.endpoints(host, p.number).is_empty());
        if !has_endpoints {
            warnings.push(format!("no instances found for hostname {host:?}"));
            continue;
        }
        assigned.push(host.clone());
        let name = host.split('.').next().unwrap_or_default();
        let ingress: Vec<Value> = snapshot
            .get_named(Kind::Service, namespace, name)
            .and_then(|e| match &e.config.spec {
                Spec::Service(s) => s.status.as_ref()?.load_balancer.as_ref()?.ingress.clone(),
                _ => None,
            })
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| {
                i.ip.map(|ip| json!({"type": "IPAddress", "value": ip}))
                    .or_else(|| i.hostname.map(|h| json!({"type": "Hostname", "value": h})))
            })
            .collect();
        if ingress.is_empty() {
            addresses.extend(
                service
                    .addresses
                    .iter()
                    .map(|a| json!({"type": "IPAddress", "value": a})),
            );
        } else {
            addresses.extend(ingress);
        }
    }
    let condition = if warnings.is_empty() {
        Condition::ok(
            "Programmed",
            &format!(
                "Resource programmed, assigned to service(s) {}",
                assigned.join(", ")
            ),
        )
    } else {
        let message = if assigned.is_empty() {
            format!(
                "Failed to assign to any requested addresses: {}",
                warnings.join("; ")
            )
        } else {
            format!(
                "Assigned to service(s) {}, but failed to assign to all requested addresses: {}",
                assigned.join(", "),
                warnings.join("; ")
            )
        };
        Condition::failed(
            if unusable {
                "AddressNotUsable"
            } else {
                "AddressNotAssigned"
            },
            message,
        )
    };
    (condition, addresses)
}

fn route_status(input: &Input, r: &RouteOutcome) -> Value {
    let suffix = &input.mesh.domain_suffix;
    let missing = r.backends.iter().find(|b| !resolves(input, b)).cloned();
    let parents: Vec<Value> = r
        .parents
        .iter()
        .map(|p| {
            let accepted = &p.accepted;
            let resolved = match (&p.route_error, &missing) {
                (Some(e), _) => e.clone(),
                (None, Some(Reference::Service { namespace, name })) => Condition::failed(
                    "BackendNotFound",
                    format!("backend({name}.{namespace}.svc.{suffix}) not found"),
                ),
                (None, Some(Reference::Hostname { host })) => {
                    Condition::failed("BackendNotFound", format!("backend({host}) not found"))
                }
                _ => Condition::ok("ResolvedRefs", "All references resolved"),
            };
            json!({"parentRef": p.parent_ref,
                   "controllerName": CONTROLLER,
                   "conditions": [condition("Accepted", accepted, r.generation),
                                  condition("ResolvedRefs", &resolved, r.generation)]})
        })
        .collect();
    json!({ "parents": parents })
}

/// The Gateways (as ancestor references) whose routes send to Service or ServiceEntry `name`
/// of `ns`.
fn gateways_sending_to(
    snapshot: &Snapshot,
    t: &Translation,
    ns: &str,
    kind: &str,
    name: &str,
) -> Vec<Value> {
    let hosts: Vec<String> = match kind {
        "ServiceEntry" => match snapshot
            .get_named(Kind::ServiceEntry, ns, name)
            .map(|e| &e.config.spec)
        {
            Some(Spec::ServiceEntry(se)) => se.hosts.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for (route, outcome) in &t.route_outcomes {
        let sends = outcome.backends.iter().any(|b| match b {
            Reference::Service { namespace, name: n } => {
                kind == "Service" && namespace == ns && n == name
            }
            Reference::Hostname { host } => hosts.contains(host),
            Reference::Secret { .. } => false,
        });
        if !sends {
            continue;
        }
        for parent in &outcome.parents {
            let r = &parent.parent_ref;
            let gateway = r.kind.as_deref().is_none_or(|k| k == "Gateway")
                && r.group
                    .as_deref()
                    .is_none_or(|g| g == crate::config::gateway_api::GROUP);
            if !gateway {
                continue;
            }
            let ancestor = json!({"group": crate::config::gateway_api::GROUP, "kind": "Gateway",
                "name": r.name, "namespace": r.namespace.clone().unwrap_or_else(|| route.namespace.clone())});
            if !out.contains(&ancestor) {
                out.push(ancestor);
            }
        }
    }
    out
}

/// The entries of list `list` (route parents, policy ancestors): other controllers' kept as they
/// are, then ours as `wanted` has them, each keeping its conditions' transition times from the
/// entry of ours with the same `reference` in `current`.
fn ours_over_theirs(
    current: &Value,
    wanted: &Value,
    list: &str,
    reference: &str,
    now: &str,
) -> Value {
    let current_entries = current[list].as_array().cloned().unwrap_or_default();
    let mut entries: Vec<Value> = current_entries
        .iter()
        .filter(|e| e["controllerName"] != CONTROLLER)
        .cloned()
        .collect();
    for mut e in wanted[list].as_array().cloned().unwrap_or_default() {
        let before = current_entries
            .iter()
            .find(|c| c["controllerName"] == CONTROLLER && c[reference] == e[reference])
            .map(|c| c["conditions"].clone())
            .unwrap_or(Value::Null);
        e["conditions"] = merge_conditions(&before, &e["conditions"], now);
        entries.push(e);
    }
    entries.into()
}

/// `wanted` conditions over `current` ones: each keeps its transition time while its status
/// does not change; conditions of types not in `wanted` are kept.
fn merge_conditions(current: &Value, wanted: &Value, now: &str) -> Value {
    let current = current.as_array().cloned().unwrap_or_default();
    let wanted = wanted.as_array().cloned().unwrap_or_default();
    let types: Vec<&str> = wanted.iter().filter_map(|c| c["type"].as_str()).collect();
    let mut out: Vec<Value> = current
        .iter()
        .filter(|c| c["type"].as_str().is_none_or(|t| !types.contains(&t)))
        .cloned()
        .collect();
    for mut w in wanted.iter().cloned() {
        let previous = current
            .iter()
            .find(|c| c["type"] == w["type"] && c["status"] == w["status"]);
        w["lastTransitionTime"] = previous
            .and_then(|p| p.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| now.into());
        out.push(w);
    }
    out.into()
}

/// The status to write: `current` with what this controller owns replaced by `wanted`.
pub fn merge(kind: Kind, current: &Value, wanted: &Value, now: &str) -> Value {
    let mut out = if current.is_object() {
        current.clone()
    } else {
        json!({})
    };
    out["conditions"] = merge_conditions(&current["conditions"], &wanted["conditions"], now);
    match kind {
        Kind::KubernetesGateway | Kind::ListenerSet => {
            match wanted.get("attachedListenerSets") {
                Some(n) => out["attachedListenerSets"] = n.clone(),
                None => {
                    if let Some(o) = out.as_object_mut() {
                        o.remove("attachedListenerSets");
                    }
                }
            }
            match wanted.get("addresses") {
                Some(a) => out["addresses"] = a.clone(),
                None => {
                    if let Some(o) = out.as_object_mut() {
                        o.remove("addresses");
                    }
                }
            }
            let listeners: Vec<Value> = wanted["listeners"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|mut l| {
                    let before = current["listeners"]
                        .as_array()
                        .and_then(|ls| ls.iter().find(|c| c["name"] == l["name"]))
                        .map(|c| c["conditions"].clone())
                        .unwrap_or(Value::Null);
                    l["conditions"] = merge_conditions(&before, &l["conditions"], now);
                    l
                })
                .collect();
            out["listeners"] = listeners.into();
            if out["conditions"].as_array().is_some_and(Vec::is_empty)
                && let Some(o) = out.as_object_mut()
            {
                o.remove("conditions");
            }
        }
        Kind::HTTPRoute | Kind::GRPCRoute | Kind::TCPRoute | Kind::TLSRoute => {
            if let Some(o) = out.as_object_mut() {
                o.remove("conditions");
            }
            out["parents"] = ours_over_theirs(current, wanted, "parents", "parentRef", now);
        }
        Kind::BackendTLSPolicy => {
            if let Some(o) = out.as_object_mut() {
                o.remove("conditions");
            }
            out["ancestors"] = ours_over_theirs(current, wanted, "ancestors", "ancestorRef", now);
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests;
