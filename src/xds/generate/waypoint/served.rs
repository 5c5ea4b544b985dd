//! What a waypoint serves: the services bound to it, and the workloads that send their own
//! traffic through it.

use crate::config::Kind;
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The services the waypoint of `scope` serves: those bound (`istio.io/use-waypoint`) to a
/// Service that selects the waypoint proxy itself (its own `<gateway>.<ns>.svc` Service), in the
/// waypoint's namespace, as istiod's `WaypointKeyForProxy` finds them. By hostname.
pub fn served(ctx: &PushContext, scope: &ScopeView) -> Vec<Arc<Service>> {
    let suffix = format!(".{}.svc.{}", scope.namespace, ctx.mesh.domain_suffix);
    let mut own: Vec<&str> = scope
        .inbound_hosts
        .values()
        .flatten()
        .map(String::as_str)
        .filter(|h| h.ends_with(&suffix))
        .collect();
    own.sort_unstable();
    own.dedup();
    if own.is_empty() {
        return Vec::new();
    }
    let namespaces: HashMap<&str, &BTreeMap<String, String>> = ctx
        .snapshot
        .list_local(Kind::Namespace)
        .map(|e| (e.config.metadata.name.as_str(), &e.config.metadata.labels))
        .collect();
    let labels_of = |ns: &str| namespaces.get(ns).copied();
    crate::model::waypoint::services_for(&ctx.registry, &labels_of, &own, &ctx.mesh.domain_suffix)
        .into_iter()
        .cloned()
        .collect()
}

/// The addresses of the workloads that send their own traffic (not their services') through the
/// waypoint of `scope` (`istio.io/use-waypoint` on the workload, a waypoint for `workload` or
/// `all` traffic), as ztunnel is told: their waypoint is one of the waypoint's own Services, by
/// VIP or hostname.
pub fn bound_workloads(ctx: &PushContext, scope: &ScopeView) -> Vec<std::net::IpAddr> {
    use crate::xds::generate::ztunnel::pb::workload::gateway_address::Destination;
    let suffix = format!(".{}.svc.{}", scope.namespace, ctx.mesh.domain_suffix);
    let own: Vec<&Service> = scope
        .inbound_hosts
        .values()
        .flatten()
        .filter(|h| h.ends_with(&suffix))
        .filter_map(|h| ctx.registry.services.get(h).map(AsRef::as_ref))
        .collect();
    if own.is_empty() {
        return Vec::new();
    }
    let index = crate::xds::generate::ztunnel::index(ctx);
    let mut out: Vec<std::net::IpAddr> = index
        .workloads
        .values()
        .filter(
            |w| match w.waypoint.as_ref().and_then(|g| g.destination.as_ref()) {
                Some(Destination::Hostname(h)) => own.iter().any(|s| s.hostname == h.hostname),
                Some(Destination::Address(a)) => {
                    let ip = ip_of(&a.address);
                    own.iter()
                        .any(|s| s.addresses_for(true).iter().any(|v| v.parse().ok() == ip))
                }
                None => false,
            },
        )
        .flat_map(|w| w.addresses.iter().filter_map(|a| ip_of(a)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn ip_of(bytes: &[u8]) -> Option<std::net::IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        _ => None,
    }
}
