//! istiod's in-cluster analysis (`PILOT_ENABLE_ANALYSIS`): checks across objects that validating
//! one object cannot make, as messages per object with istiod's codes. `status::writer` writes
//! them into the objects' `status.validationMessages`, as istiod's status controller does.
//!
//! The analyzers Rudder runs (a subset of istiod's): a VirtualService's destination, mirror or
//! gateway that does not exist, a subset no DestinationRule of the host defines (IST0101
//! ReferencedResourceNotFound), several VirtualServices claiming one host for the mesh (IST0109),
//! and a Gateway whose selector matches no pod (IST0101, "selector").

use crate::config::networking::{Destination, VirtualService};
use crate::config::{ConfigKey, Kind, Spec, host};
use crate::model::{Registry, resolve_host};
use crate::store::Snapshot;
use std::collections::{BTreeMap, BTreeSet};

/// How serious a message is (istiod's `AnalysisMessageBase.Level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warning,
    Info,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warning => "WARNING",
            Level::Info => "INFO",
        }
    }
}

/// One analysis finding about one object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Message {
    /// istiod's code, e.g. `IST0101`.
    pub code: &'static str,
    pub level: Level,
    /// The text istiod's template gives (logged; the status carries the code and level).
    pub text: String,
}

/// istiod's documentation base for analysis codes (Istio 1.30).
const DOCS: &str = "https://istio.io/v1.30/docs/reference/config/analysis";

impl Message {
    fn not_found(what: &str, name: &str) -> Message {
        Message {
            code: "IST0101",
            level: Level::Error,
            text: format!("Referenced {what} not found: {name:?}"),
        }
    }

    /// The entry of `status.validationMessages` (istio.analysis.v1alpha1.AnalysisMessageBase).
    pub fn to_status(&self) -> serde_json::Value {
        serde_json::json!({
            "documentationUrl": format!("{DOCS}/{}/", self.code.to_lowercase()),
            "level": self.level.as_str(),
            "type": {"code": self.code},
        })
    }
}

/// Messages by object. Objects without findings are absent.
pub type Findings = BTreeMap<ConfigKey, BTreeSet<Message>>;

/// Runs every analyzer over one snapshot and the registry built from it.
pub fn analyze(snapshot: &Snapshot, registry: &Registry, domain_suffix: &str) -> Findings {
    let mut out = Findings::new();
    virtual_services(snapshot, registry, domain_suffix, &mut out);
    gateway_selectors(snapshot, &mut out);
    out
}

/// Whether a service (exactly, or through a wildcard host) answers for `hostname`.
fn known_host(registry: &Registry, hostname: &str) -> bool {
    registry.services.contains_key(hostname)
        || registry
            .services
            .keys()
            .any(|h| h.starts_with('*') && host::subset_of(hostname, h))
}

/// Every destination of a VirtualService, with what istiod calls it in its message.
fn destinations(vs: &VirtualService) -> Vec<(&'static str, &Destination)> {
    let mut out = Vec::new();
    for route in &vs.http {
        out.extend(
            route
                .route
                .iter()
                .filter_map(|r| r.destination.as_ref())
                .map(|d| ("host", d)),
        );
        out.extend(route.mirror.iter().map(|d| ("mirror host", d)));
        out.extend(
            route
                .mirrors
                .iter()
                .filter_map(|m| m.destination.as_ref())
                .map(|d| ("mirror host", d)),
        );
    }
    for route in vs
        .tcp
        .iter()
        .map(|r| &r.route)
        .chain(vs.tls.iter().map(|r| &r.route))
    {
        out.extend(
            route
                .iter()
                .filter_map(|r| r.destination.as_ref())
                .map(|d| ("host", d)),
        );
    }
    out
}

fn virtual_services(snapshot: &Snapshot, registry: &Registry, suffix: &str, out: &mut Findings) {
    // Subsets defined for each host, by any DestinationRule.
    let mut subsets: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for entry in snapshot.list(Kind::DestinationRule) {
        if let Spec::DestinationRule(dr) = &entry.config.spec {
            let host = resolve_host(&dr.host, &entry.config.metadata.namespace, suffix);
            subsets
                .entry(host)
                .or_default()
                .extend(dr.subsets.iter().map(|s| s.name.as_str()));
        }
    }
    let gateways: BTreeSet<(String, String)> = snapshot
        .list(Kind::Gateway)
        .map(|e| {
            (
                e.config.metadata.namespace.clone(),
                e.config.metadata.name.clone(),
            )
        })
        .collect();
    // Hosts of VirtualServices bound to the mesh, for IST0109.
    let mut mesh_hosts: BTreeMap<String, Vec<(ConfigKey, String)>> = BTreeMap::new();
    for entry in snapshot.list(Kind::VirtualService) {
        let Spec::VirtualService(vs) = &entry.config.spec else {
            continue;
        };
        let ns = entry.config.metadata.namespace.as_str();
        let key = entry.config.key();
        let mut found = BTreeSet::new();
        for (what, d) in destinations(vs) {
            if d.host.is_empty() || d.host.contains('*') {
                continue;
            }
            let hostname = resolve_host(&d.host, ns, suffix);
            if !known_host(registry, &hostname) {
                found.insert(Message::not_found(what, &d.host));
            } else if !d.subset.is_empty()
                && !subsets
                    .get(&hostname)
                    .is_some_and(|s| s.contains(d.subset.as_str()))
            {
                found.insert(Message::not_found(
                    "host+subset in destinationrule",
                    &format!("{}+{}", d.host, d.subset),
                ));
            }
        }
        for gw in vs.gateways.iter().filter(|g| g.as_str() != "mesh") {
            let (gw_ns, gw_name) = gw.split_once('/').unwrap_or((ns, gw));
            if !gateways.contains(&(gw_ns.to_string(), gw_name.to_string())) {
                found.insert(Message::not_found("gateway", &format!("{gw_ns}/{gw_name}")));
            }
        }
        if vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == "mesh") {
            for h in &vs.hosts {
                mesh_hosts
                    .entry(resolve_host(h, ns, suffix))
                    .or_default()
                    .push((key.clone(), format!("{ns}/{}", entry.config.metadata.name)));
            }
        }
        if !found.is_empty() {
            out.entry(key).or_default().extend(found);
        }
    }
    for (hostname, claims) in mesh_hosts.into_iter().filter(|(_, c)| c.len() > 1) {
        let names = claims
            .iter()
            .map(|(_, n)| n.as_str())
            .collect::<Vec<_>>()
            .join(",");
        for (key, _) in claims {
            out.entry(key).or_default().insert(Message {
                code: "IST0109",
                level: Level::Error,
                text: format!(
                    "The VirtualServices {names} associated with mesh gateway define the same host {hostname} which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource."
                ),
            });
        }
    }
}

fn gateway_selectors(snapshot: &Snapshot, out: &mut Findings) {
    let pods: Vec<&BTreeMap<String, String>> = snapshot
        .list_local(Kind::Pod)
        .map(|e| &e.config.metadata.labels)
        .collect();
    // Without any pod in the store (files mode), nothing can be said about selectors.
    if pods.is_empty() {
        return;
    }
    for entry in snapshot.list(Kind::Gateway) {
        let Spec::Gateway(gw) = &entry.config.spec else {
            continue;
        };
        if gw.selector.is_empty() {
            continue;
        }
        let matched = pods
            .iter()
            .any(|labels| crate::config::mesh::labels_match(&gw.selector, labels));
        if !matched {
            let selector = gw
                .selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            out.entry(entry.config.key())
                .or_default()
                .insert(Message::not_found("selector", &selector));
        }
    }
}

#[cfg(test)]
mod tests;
