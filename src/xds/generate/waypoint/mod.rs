//! Waypoint proxies (ambient L7), as istiod 1.30 builds them (`listener_waypoint.go`,
//! `cluster_waypoint.go`). A waypoint takes HBONE on 15008 (`connect_terminate`: mTLS, HTTP/2
//! CONNECT), hands each tunnelled connection to the internal listener `main_internal`, which picks
//! a chain by the tunnel's destination (a service VIP and port it serves) and applies the
//! service's routes and policies; its clusters (`inbound-vip|<port>|<http|tcp>[/subset]|<host>`)
//! lead through the internal listener `connect_originate`, which opens HBONE to the chosen
//! endpoint's ztunnel (or waypoint). Names and their order are istiod's, so `istioctl` and
//! dashboards read a Rudder waypoint as they read istiod's.

mod clusters;
mod double_hbone;
pub mod east_west;
mod ingress;
mod listeners;
mod receive;
mod send;

pub use ingress::{ingress_clusters, ingress_listener, ingress_load_assignment};
pub use receive::{sidecar_hbone_cluster, sidecar_hbone_listeners};
pub use send::{hbone_cluster, hbone_listener, tunnel_endpoints};

use crate::config::Kind;
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub const CONNECT_TERMINATE: &str = "connect_terminate";
pub const MAIN_INTERNAL: &str = "main_internal";
pub const CONNECT_ORIGINATE: &str = "connect_originate";
/// The cluster of workload-addressed traffic: straight to `connect_originate`.
pub const ENCAP: &str = "encap";
/// The port waypoints and ztunnels take HBONE on.
pub const HBONE_PORT: u32 = 15008;
/// Envoy's original-destination metadata and filter-state namespace (`hbone`).
pub use crate::xds::generate::shared::hbone::ORIGINAL_DST_KEY;

/// A waypoint's (or an ambient east-west gateway's) clusters.
pub fn clusters(ctx: &PushContext, scope: &ScopeView) -> Vec<crate::xds::generate::finish::Typed> {
    if east_west::is_east_west(ctx, scope) {
        return east_west::clusters(ctx, scope);
    }
    let mut out = clusters::clusters(ctx, scope);
    double_hbone_clusters(ctx, scope, &mut out);
    out
}

/// A waypoint's (or an ambient east-west gateway's) listeners.
pub fn listeners(ctx: &PushContext, scope: &ScopeView) -> Vec<crate::xds::generate::finish::Typed> {
    if east_west::is_east_west(ctx, scope) {
        return east_west::listeners(ctx, scope);
    }
    let mut out = listeners::listeners(ctx, scope);
    double_hbone_listeners(ctx, scope, &mut out);
    out
}

/// The double-HBONE clusters of a proxy that reaches other networks (`double_hbone::applies`).
pub fn double_hbone_clusters(
    ctx: &PushContext,
    scope: &ScopeView,
    clusters: &mut Vec<crate::xds::generate::finish::Typed>,
) {
    if double_hbone::applies(ctx, scope) {
        clusters.extend(double_hbone::clusters(ctx, scope));
    }
}

/// The double-HBONE listeners of a proxy that reaches other networks.
pub fn double_hbone_listeners(
    ctx: &PushContext,
    scope: &ScopeView,
    listeners: &mut Vec<crate::xds::generate::finish::Typed>,
) {
    if double_hbone::applies(ctx, scope) {
        listeners.extend(double_hbone::listeners(scope));
    }
}

/// The endpoints of an `inbound-vip` cluster of a waypoint (or an east-west gateway).
pub fn load_assignment(
    ctx: &PushContext,
    scope: &ScopeView,
    cluster: &str,
) -> crate::xds::generate::finish::Typed {
    if east_west::is_east_west(ctx, scope) {
        east_west::load_assignment(ctx, scope, cluster)
    } else {
        clusters::load_assignment(ctx, scope, cluster)
    }
}

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

/// The subset part of a waypoint cluster for `port` of `svc`: istiod's `portToSubset`, the
/// port's protocol class (`tcp`, or `http` for HTTP and sniffed ports and ports it does not
/// know), then `/<subset>` when there is one.
pub fn vip_subset(svc: Option<&Service>, port: u32, subset: &str) -> String {
    let class = match svc.and_then(|s| s.port(port)) {
        Some(p) if !p.protocol.is_http() && p.protocol != crate::model::Protocol::Unsupported => {
            "tcp"
        }
        _ => "http",
    };
    if subset.is_empty() {
        class.to_string()
    } else {
        format!("{class}/{subset}")
    }
}

#[cfg(test)]
pub(in crate::xds::generate) mod tests;
