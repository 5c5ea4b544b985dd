//! Ingress through waypoints, as istiod's gateways do it: a service labelled
//! `istio.io/ingress-use-waypoint` (or in a namespace so labelled) with a waypoint is reached from
//! an ingress gateway through that waypoint. The gateway's clusters of the service keep their
//! names; their endpoints are the waypoint's pods, each an HBONE tunnel (through the gateway's own
//! `connect_originate`) to the pod's port 15008 whose destination is the service's VIP and port,
//! so the waypoint applies the service's routes and policies.

use super::clusters::connect_originate;
use super::listeners::connect_originate_listener;
use super::names::{CONNECT_ORIGINATE, HBONE_PORT, ORIGINAL_DST_KEY};
use crate::config::Kind;
use crate::config::networking::{ClientTlsMode, Resolution};
use crate::model::Service;
use crate::model::waypoint::{ingress_uses_waypoint, service_waypoint};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::cluster::EffectivePolicy;
use crate::xds::generate::shared::hbone::{
    host_port, internal_address, internal_upstream, raw_buffer, tunnel_destination,
};
use crate::xds::generate::shared::util::parse_service_cluster;
use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, LocalityLbEndpoints};

/// The waypoint Service (hostname) and the VIP an ingress gateway tunnels `svc`'s traffic to,
/// when it sends it through the waypoint: the service (or its namespace) asks for it, it has a
/// waypoint that takes service traffic, and a VIP (a waypoint takes traffic by VIP only).
fn ingress_waypoint(ctx: &PushContext, svc: &Service) -> Option<(String, String)> {
    if !matches!(svc.resolution, Resolution::STATIC) {
        return None;
    }
    let vip = svc
        .addresses
        .iter()
        .find(|a| a.parse::<std::net::IpAddr>().is_ok())?;
    let ns_labels = ctx
        .snapshot
        .get_named(Kind::Namespace, "", &svc.namespace)
        .map(|e| &e.config.metadata.labels);
    if !ingress_uses_waypoint(&svc.labels, ns_labels) {
        return None;
    }
    let waypoint = service_waypoint(svc, ns_labels, &ctx.registry, &ctx.mesh.domain_suffix)?;
    Some((waypoint.hostname(&ctx.mesh.domain_suffix), vip.clone()))
}

/// Whether any service a gateway sees goes through its waypoint.
pub fn gateway_uses_waypoints(ctx: &PushContext, scope: &ScopeView) -> bool {
    scope
        .services
        .iter()
        .any(|s| ingress_waypoint(ctx, s).is_some())
}

/// A gateway's endpoints of `cluster` when its service goes through its waypoint: the
/// waypoint's pods, tunnelled to; `None` otherwise (the cluster's own endpoints apply).
pub fn ingress_load_assignment(
    ctx: &PushContext,
    scope: &ScopeView,
    cluster: &str,
) -> Option<Typed> {
    let (port, _, host) = parse_service_cluster(cluster)?;
    let svc = ctx.registry.services.get(host)?;
    let (waypoint, vip) = ingress_waypoint(ctx, svc)?;
    let destination = host_port(&vip, port);
    let lb_endpoints = ctx
        .registry
        .endpoints(&waypoint, HBONE_PORT)
        .iter()
        .map(|e| {
            let target = host_port(&e.address, e.port);
            let metadata = Metadata {
                filter_metadata: [(
                    ORIGINAL_DST_KEY.to_string(),
                    tunnel_destination(&destination, Some(&target)),
                )]
                .into(),
                ..Default::default()
            };
            crate::xds::generate::shared::endpoint::lb_endpoint_of(
                ctx,
                e,
                internal_address(CONNECT_ORIGINATE, &target),
                Some(metadata),
            )
        })
        .collect();
    let cla = ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints,
            ..Default::default()
        }],
        ..Default::default()
    };
    Some(Typed::new(cluster, Class::outbound(scope), cla))
}

/// A gateway's clusters with those of services reached through their waypoints sending into
/// the tunnel (the endpoint's destination passed on to `connect_originate`), and, when there
/// are any, the `connect_originate` cluster itself.
pub fn ingress_clusters(ctx: &PushContext, scope: &ScopeView, clusters: &mut Vec<Typed>) {
    let mut any = false;
    for typed in clusters.iter_mut() {
        let Some((port, subset, host)) = parse_service_cluster(&typed.name) else {
            continue;
        };
        let Some(svc) = ctx.registry.services.get(host) else {
            continue;
        };
        if ingress_waypoint(ctx, svc).is_none() {
            continue;
        }
        any = true;
        let rule = ctx
            .destination_rule_for(&scope.namespace, &scope.labels, svc)
            .map(|d| &d.spec);
        let subset_rule = rule.and_then(|r| r.subsets.iter().find(|s| s.name == subset));
        let policy = EffectivePolicy::resolve(rule, subset_rule, port);
        let own_tls = policy
            .tls
            .as_ref()
            .is_some_and(|t| matches!(t.mode, ClientTlsMode::SIMPLE | ClientTlsMode::MUTUAL));
        let Some(c) = typed.cluster_mut() else {
            continue;
        };
        // The cluster's own TLS, wherever a proxy sending HBONE keeps it (`send`).
        let inner = match crate::xds::generate::shared::hbone::direct_transport(c) {
            Some(ts) if own_tls => ts.clone(),
            _ => raw_buffer(),
        };
        c.transport_socket_matches.clear();
        c.transport_socket = Some(internal_upstream(inner, true));
    }
    if any {
        clusters.push(connect_originate(ctx, scope, false));
    }
}

/// The gateway's `connect_originate` listener, when any service it sees goes through its
/// waypoint.
pub fn ingress_listener(ctx: &PushContext, scope: &ScopeView) -> Option<Typed> {
    gateway_uses_waypoints(ctx, scope).then(|| {
        Typed::new(
            CONNECT_ORIGINATE,
            Class::outbound(scope),
            connect_originate_listener(),
        )
    })
}
