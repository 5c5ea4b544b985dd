//! Sidecars taking HBONE, as istiod does once ambient is on (PILOT_ENABLE_SIDECAR_LISTENING_HBONE)
//! for a sidecar whose metadata says `ENABLE_HBONE`: `connect_terminate` on 15008 (mTLS with a
//! mesh peer, HTTP/2 CONNECT) hands each tunnel to `main_internal`, whose chains are the sidecar's
//! inbound chains in plain text (the tunnel is the mTLS), with the tunnel's peer as the identity
//! for authorization and only the sidecar's own addresses as destinations. ztunnel and waypoints
//! then reach the sidecar under STRICT mTLS, where plain text would be refused.

use super::clusters::internal_cluster;
use super::listeners::{connect_terminate, internal, listener_filter, original_dst};
use super::names::{CONNECT_TERMINATE, MAIN_INTERNAL};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::typed_listener::{Chain, TypedListener};
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::Listener;

/// The HBONE listeners of a sidecar that takes HBONE; none for others.
pub fn sidecar_hbone_listeners(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    if scope.hbone_listen_ips.is_empty() {
        return Vec::new();
    }
    let (mut chains, sniffing) = crate::xds::generate::sidecar::listener::inbound_chains(
        ctx,
        scope,
        &scope.hbone_listen_ips,
    );
    if chains.is_empty() {
        // Envoy refuses a listener without chains; one that takes nothing says more than none.
        chains.push(Chain {
            name: "BlackHoleCluster".into(),
            filters: vec![crate::xds::generate::sidecar::listener::tcp_filter(
                "BlackHoleCluster",
            )],
            ..Default::default()
        });
    }
    let mut listener_filters = vec![original_dst()];
    if sniffing {
        listener_filters.push(listener_filter(
            "envoy.filters.listener.http_inspector",
            &envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector::default(),
        ));
    }
    let main = TypedListener::new(
        Listener {
            name: MAIN_INTERNAL.into(),
            listener_specifier: internal(),
            traffic_direction: TrafficDirection::Inbound as i32,
            continue_on_listener_filters_timeout: true,
            listener_filters,
            ..Default::default()
        },
        chains,
    );
    vec![
        Typed::new(
            CONNECT_TERMINATE,
            Class::inbound(scope),
            connect_terminate(ctx, scope),
        ),
        Typed::new(MAIN_INTERNAL, Class::inbound(scope), main),
    ]
}

/// The `main_internal` cluster `connect_terminate` hands tunnels to, for a sidecar that takes
/// HBONE.
pub fn sidecar_hbone_cluster(scope: &ScopeView, clusters: &mut Vec<Typed>) {
    if scope.hbone_listen_ips.is_empty() {
        return;
    }
    let mut cluster = internal_cluster(MAIN_INTERNAL, MAIN_INTERNAL);
    cluster.class = Class::inbound(scope);
    clusters.push(cluster);
}
