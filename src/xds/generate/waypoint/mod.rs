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
mod names;
mod receive;
mod send;
mod served;

pub use ingress::{ingress_clusters, ingress_listener, ingress_load_assignment};
pub use names::{
    CONNECT_ORIGINATE, CONNECT_TERMINATE, ENCAP, HBONE_PORT, MAIN_INTERNAL, ORIGINAL_DST_KEY,
    vip_subset,
};
pub use receive::{sidecar_hbone_cluster, sidecar_hbone_listeners};
pub use send::{hbone_cluster, hbone_listener, tunnel_endpoints};
pub use served::{bound_workloads, served};

use crate::xds::context::{PushContext, ScopeView};

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

#[cfg(test)]
pub(in crate::xds::generate) mod tests;
