//! Ambient east-west gateways (istiod 1.30's `istio-east-west` class, with
//! AMBIENT_ENABLE_MULTI_NETWORK): a waypoint-shaped proxy at the edge of a network that takes the
//! outer tunnel of another network's double HBONE on 15008 and hands the inner tunnel on, as
//! opaque bytes, to a workload of the service its `:authority` names (`<hostname>:<port>`, as
//! ztunnel sends it), at that workload's port 15008. It never sees inside the inner tunnel: the
//! workload's identity is checked end to end by the two ztunnels. A service bound to a waypoint
//! takes only that waypoint's tunnels (the far network's copy of it, which applied the service's
//! policies and sends double HBONE itself); istiod would send the others to the local waypoint,
//! Rudder refuses them (docs/decisions.md).
//!
//! Listeners: `connect_terminate`, `main_internal` (a chain per global service port, picked by the
//! tunnel's authority), `forward_inner_connect`. Clusters: `main_internal`, `encap`, one
//! `inbound-vip|<port>|tcp|<host>` per global service port (its endpoints in this network that
//! take HBONE, through `forward_inner_connect`), `forward_inner_connect` (the endpoint's address,
//! port 15008) and `BlackHoleCluster`, in istiod's order and with istiod's names.

use super::clusters::{internal_cluster, to_hbone_port, tunnel_through};
use super::listeners::{connect_terminate, internal, original_dst};
use super::names::{CONNECT_TERMINATE, ENCAP, MAIN_INTERNAL};
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::cluster::{BLACKHOLE, blackhole};
use crate::xds::generate::shared::hbone::{internal_upstream, raw_buffer};
use crate::xds::generate::shared::network::network_filter;
use crate::xds::generate::shared::util::{
    ads, duration, inbound_vip_cluster, parse_service_cluster,
};
use crate::xds::generate::typed_listener::{Chain, ListenerRole, NetworkFilter, TypedListener};
use crate::xds::proxy::ProxyType;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
};
use envoy_types::pb::envoy::config::core::v3::ConfigSource;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier as TcpCluster,
};
use envoy_types::pb::envoy::extensions::matching::common_inputs::network::v3::FilterStateInput;
use envoy_types::pb::google::protobuf::StringValue;
use envoy_types::pb::xds::core::v3::TypedExtensionConfig as XdsTypedExtensionConfig;
use envoy_types::pb::xds::r#type::matcher::v3::{Matcher, StringMatcher, matcher, string_matcher};
use std::sync::Arc;

/// The internal listener (and cluster) that forwards an inner tunnel as it came.
pub const FORWARD_INNER_CONNECT: &str = "forward_inner_connect";
/// The filter-state key `connect_terminate` keeps the tunnel's `:authority` under.
const CONNECT_AUTHORITY: &str = "io.istio.connect_authority";

/// Whether the proxy of `scope` is an ambient east-west gateway: a waypoint-type proxy of an
/// `istio-east-west` Gateway, under ambient multi-network (istiod's `IsAmbientEastWestGateway`).
pub fn is_east_west(ctx: &PushContext, scope: &ScopeView) -> bool {
    ctx.mesh.ambient_multi_network
        && scope.proxy_type == ProxyType::Waypoint
        && scope
            .labels
            .get(crate::model::waypoint::GATEWAY_MANAGED)
            .is_some_and(|v| v == crate::model::waypoint::EAST_WEST_CONTROLLER)
}

/// The services an east-west gateway forwards to: the global ones, by hostname, each with the
/// identity of its waypoint when it has one (istiod deploys a waypoint's pods with the Gateway's
/// name as their service account).
pub fn served(ctx: &PushContext) -> Vec<(Arc<Service>, Option<String>)> {
    let index = crate::xds::generate::ztunnel::index(ctx);
    index
        .global_services
        .iter()
        .filter_map(|(key, waypoint)| {
            let svc = ctx.registry.services.get(key.split_once('/')?.1)?;
            let identity = waypoint.as_ref().map(|w| {
                format!(
                    "spiffe://{}/ns/{}/sa/{}",
                    ctx.mesh.trust_domain, w.namespace, w.name
                )
            });
            Some((svc.clone(), identity))
        })
        .collect()
}

/// Only the tunnels of `principal` pass (a waypoint-bound service: its waypoint, which applied
/// the service's L7 policies before the double tunnel; anyone else would skip them).
fn only_from(principal: &str) -> NetworkFilter {
    use envoy_types::pb::envoy::config::rbac::v3::{
        Permission, Policy, Principal, Rbac, permission, principal, rbac,
    };
    use envoy_types::pb::envoy::r#type::matcher::v3::{
        StringMatcher as EnvoyStringMatcher, string_matcher as envoy_string_matcher,
    };
    // The peer certificate's identity, made the tunnel peer's (filter state), as the
    // waypoints' policies read it.
    let peer = Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(EnvoyStringMatcher {
                    match_pattern: Some(envoy_string_matcher::MatchPattern::Exact(
                        principal.into(),
                    )),
                    ignore_case: false,
                }),
            },
        )),
    };
    let policy = Policy {
        permissions: vec![Permission {
            rule: Some(permission::Rule::Any(true)),
        }],
        principals: vec![crate::xds::generate::security::rbac::from_tunnel_peer(peer)],
        ..Default::default()
    };
    network_filter(
        "envoy.filters.network.rbac",
        &envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac {
            stat_prefix: "tcp.".into(),
            rules: Some(Rbac {
                action: rbac::Action::Allow as i32,
                policies: [("waypoint".to_string(), policy)].into(),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
}

pub fn listeners(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    let services = served(ctx);
    vec![
        Typed::new(
            CONNECT_TERMINATE,
            Class::Waypoint,
            connect_terminate(ctx, scope),
        ),
        Typed::new(MAIN_INTERNAL, Class::Waypoint, main_internal(&services)),
        Typed::new(
            FORWARD_INNER_CONNECT,
            Class::Waypoint,
            forward_inner_connect_listener(),
        ),
    ]
}

fn tcp_to(cluster: &str) -> NetworkFilter {
    NetworkFilter::tcp(TcpProxy {
        stat_prefix: cluster.into(),
        cluster_specifier: Some(TcpCluster::Cluster(cluster.into())),
        ..Default::default()
    })
}

/// `main_internal` of an east-west gateway: one chain per global service port, chosen by the
/// tunnel's `:authority` (`<hostname>:<port>`), each a plain TCP proxy to the port's
/// `inbound-vip` cluster; an authority it does not know matches nothing and is closed. A list of
/// exact matches (not a map) keeps the encoding stable from push to push.
fn main_internal(services: &[(Arc<Service>, Option<String>)]) -> TypedListener {
    let mut chains = Vec::new();
    let mut matchers = Vec::new();
    for (svc, waypoint) in services {
        for port in svc.ports.iter() {
            let cluster = inbound_vip_cluster(port.number, "tcp", &svc.hostname);
            matchers.push(exact_authority(
                &format!("{}:{}", svc.hostname, port.number),
                &cluster,
            ));
            let mut filters: Vec<_> = waypoint.iter().map(|w| only_from(w)).collect();
            filters.push(tcp_to(&cluster));
            chains.push(Chain {
                name: cluster.clone(),
                filters,
                service: Some(svc.hostname.clone()),
                ..Default::default()
            });
        }
    }
    if chains.is_empty() {
        // Envoy wants a chain; this one is never chosen.
        chains.push(Chain {
            name: "virtualInbound-blackhole".into(),
            filters: vec![tcp_to(BLACKHOLE)],
            ..Default::default()
        });
    }
    TypedListener::new(
        Listener {
            name: MAIN_INTERNAL.into(),
            listener_specifier: internal(),
            listener_filters: vec![original_dst()],
            traffic_direction: envoy_types::pb::envoy::config::core::v3::TrafficDirection::Inbound
                as i32,
            filter_chain_matcher: Some(Matcher {
                matcher_type: Some(matcher::MatcherType::MatcherList(matcher::MatcherList {
                    matchers,
                })),
                on_no_match: None,
            }),
            ..Default::default()
        },
        chains,
    )
    .with_role(ListenerRole::Destinations)
}

/// A matcher of the tunnel's authority (filter state) against `authority`, choosing `chain`.
fn exact_authority(authority: &str, chain: &str) -> matcher::matcher_list::FieldMatcher {
    use matcher::matcher_list::{Predicate, predicate};
    let input = XdsTypedExtensionConfig {
        name: "authority".into(),
        typed_config: Some(any(&FilterStateInput {
            key: CONNECT_AUTHORITY.into(),
            ..Default::default()
        })),
    };
    let action = XdsTypedExtensionConfig {
        name: chain.into(),
        typed_config: Some(any(&StringValue {
            value: chain.into(),
        })),
    };
    matcher::matcher_list::FieldMatcher {
        predicate: Some(Predicate {
            match_type: Some(predicate::MatchType::SinglePredicate(
                predicate::SinglePredicate {
                    input: Some(input),
                    matcher: Some(predicate::single_predicate::Matcher::ValueMatch(
                        StringMatcher {
                            match_pattern: Some(string_matcher::MatchPattern::Exact(
                                authority.into(),
                            )),
                            ignore_case: false,
                        },
                    )),
                },
            )),
        }),
        on_match: Some(matcher::OnMatch {
            on_match: Some(matcher::on_match::OnMatch::Action(action)),
            keep_matching: false,
        }),
    }
}

/// `forward_inner_connect`: what reaches it goes, unchanged (no tunnel of its own), to the
/// address the endpoint's metadata restored as the connection's destination.
fn forward_inner_connect_listener() -> TypedListener {
    super::listeners::internal_listener(
        FORWARD_INNER_CONNECT,
        true,
        vec![tcp_to(FORWARD_INNER_CONNECT)],
    )
}

pub fn clusters(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    let mut out = vec![
        internal_cluster(MAIN_INTERNAL, MAIN_INTERNAL),
        internal_cluster(ENCAP, FORWARD_INNER_CONNECT),
    ];
    for (svc, _) in served(ctx) {
        for port in svc.ports.iter() {
            out.push(vip_cluster(
                &inbound_vip_cluster(port.number, "tcp", &svc.hostname),
                ctx.mesh.connect_timeout,
            ));
        }
    }
    out.push(forward_inner_connect_cluster(ctx));
    out.push(blackhole(ctx, scope));
    out
}

/// An `inbound-vip` cluster of an east-west gateway: EDS, raw bytes into the internal listener
/// its endpoints name, their tunnel metadata passed along (no DestinationRule applies, as istiod).
fn vip_cluster(name: &str, connect_timeout: std::time::Duration) -> Typed {
    let c = Cluster {
        name: name.into(),
        alt_stat_name: format!("{name};"),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            // As istiod's: no waiting for the first endpoints before the cluster serves.
            eds_config: Some(ConfigSource {
                initial_fetch_timeout: Some(duration(std::time::Duration::ZERO)),
                ..ads()
            }),
            service_name: name.into(),
        }),
        connect_timeout: Some(duration(connect_timeout)),
        transport_socket: Some(internal_upstream(raw_buffer(), true)),
        ..Default::default()
    };
    Typed::new(name, Class::Waypoint, c)
}

/// `forward_inner_connect`: the endpoint's own address (or its waypoint's), port 15008, over
/// plain TCP: the bytes are the inner tunnel, TLS from the far ztunnel.
fn forward_inner_connect_cluster(ctx: &PushContext) -> Typed {
    Typed::new(
        FORWARD_INNER_CONNECT,
        Class::Waypoint,
        to_hbone_port(FORWARD_INNER_CONNECT, true, ctx.mesh.connect_timeout),
    )
}

/// The endpoints of an east-west gateway's `inbound-vip` cluster: the service's endpoints in the
/// gateway's network that take HBONE, each through `forward_inner_connect` with its address as
/// the destination; the others are left out (the inner tunnel can only end at a ztunnel).
pub fn load_assignment(ctx: &PushContext, scope: &ScopeView, cluster: &str) -> Typed {
    let mut cla = ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        ..Default::default()
    };
    if let Some((port, _, host)) = parse_service_cluster(cluster) {
        let plain = crate::xds::generate::shared::util::outbound_cluster(port, "", host);
        let mut built = crate::xds::generate::shared::endpoint::load_assignment(ctx, scope, &plain);
        if let Some(assignment) = built.load_assignment_mut() {
            let index = crate::xds::generate::ztunnel::index(ctx);
            for group in &mut assignment.endpoints {
                group.lb_endpoints.retain_mut(|lb| {
                    tunnel_through(lb, FORWARD_INNER_CONNECT, &index, &scope.network)
                });
            }
            assignment.endpoints.retain(|g| !g.lb_endpoints.is_empty());
            assignment.cluster_name = cluster.to_string();
            cla = std::mem::take(assignment);
        }
    }
    Typed::new(cluster, Class::Waypoint, cla)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{names, resources};
    use crate::xds::proxy::Proxy;
    use crate::xds::types::TypeUrl;

    /// Network `west`, as files mode names it (`meshNetworks` `fromRegistry`): `web` is global
    /// (labelled `istio.io/global`), in the ambient mesh, one endpoint in `west` and one that
    /// does not take HBONE; `local` is not global; `guarded` is global behind waypoint `wp`.
    const MESH: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    serviceScopeConfigs:
    - servicesSelector: {matchLabels: {istio.io/global: "true"}}
      scope: GLOBAL
  meshNetworks: |
    networks:
      west: {endpoints: [{fromRegistry: Kubernetes}], gateways: []}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop, labels: {istio.io/global: "true", istio.io/dataplane-mode: ambient}}
spec:
  hosts: [web.shop.svc.cluster.local]
  addresses: [10.96.0.20]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}, {number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.3, network: west}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: legacy, namespace: shop, labels: {istio.io/global: "true"}}
spec:
  hosts: [legacy.shop.svc.cluster.local]
  addresses: [10.96.0.23]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.7, network: west}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: local, namespace: shop, labels: {istio.io/dataplane-mode: ambient}}
spec:
  hosts: [local.shop.svc.cluster.local]
  addresses: [10.96.0.21]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.5, network: west}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: guarded, namespace: shop, labels: {istio.io/global: "true", istio.io/use-waypoint: wp, istio.io/dataplane-mode: ambient}}
spec:
  hosts: [guarded.shop.svc.cluster.local]
  addresses: [10.96.0.22]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.6, network: west}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wp, namespace: shop, labels: {gateway.istio.io/managed: istio.io-mesh-controller}}
spec:
  hosts: [wp.shop.svc.cluster.local]
  addresses: [10.96.0.100]
  ports: [{number: 15008, name: mesh, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.9, network: west}]
"#;

    fn east_west() -> Proxy {
        crate::testing::proxy(
            "waypoint~10.44.0.2~eastwest-0.istio-system~istio-system.svc.cluster.local",
            &[("NETWORK", "west")],
            &[("gateway.istio.io/managed", "istio.io-eastwest-controller")],
        )
    }

    fn context(on: bool) -> crate::xds::context::PushContext {
        let mesh = crate::model::mesh::MeshSettings {
            ambient_multi_network: on,
            ..Default::default()
        };
        let store = crate::testing::store(MESH);
        let (mesh, error) = mesh.with_mesh_config(&store.snapshot());
        assert_eq!(error, None);
        crate::testing::push_context_with(MESH, mesh)
    }

    #[test]
    fn an_east_west_gateway_forwards_inner_tunnels_of_global_services_by_authority() {
        let ctx = context(true);
        let p = east_west();
        let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
        assert_eq!(
            names(&listeners),
            [
                "connect_terminate",
                "main_internal",
                "forward_inner_connect"
            ]
        );
        let main = &listeners[1];
        let chains: Vec<&str> = main["filterChains"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            chains,
            [
                "inbound-vip|80|tcp|guarded.shop.svc.cluster.local",
                "inbound-vip|80|tcp|legacy.shop.svc.cluster.local",
                "inbound-vip|80|tcp|web.shop.svc.cluster.local",
                "inbound-vip|9000|tcp|web.shop.svc.cluster.local",
            ],
            "global services only: {main}"
        );
        let guarded = &main["filterChains"][0]["filters"];
        assert_eq!(guarded[0]["name"], "envoy.filters.network.rbac");
        assert_eq!(
            guarded[0]["typedConfig"]["rules"]["policies"]["waypoint"]["principals"][0]["filterState"]
                ["stringMatch"]["exact"],
            "spiffe://cluster.local/ns/shop/sa/wp",
            "a waypoint-bound service takes only its waypoint's tunnels, its policies applied"
        );
        assert_eq!(
            main["filterChains"][1]["filters"][0]["name"],
            "envoy.filters.network.tcp_proxy"
        );
        let first = &main["filterChainMatcher"]["matcherList"]["matchers"][2];
        assert_eq!(
            first["predicate"]["singlePredicate"]["valueMatch"]["exact"],
            "web.shop.svc.cluster.local:80"
        );
        assert_eq!(
            first["onMatch"]["action"]["name"],
            "inbound-vip|80|tcp|web.shop.svc.cluster.local"
        );
        let clusters = resources(&ctx, &p, TypeUrl::Cluster, &[]);
        assert_eq!(
            names(&clusters),
            [
                "main_internal",
                "encap",
                "inbound-vip|80|tcp|guarded.shop.svc.cluster.local",
                "inbound-vip|80|tcp|legacy.shop.svc.cluster.local",
                "inbound-vip|80|tcp|web.shop.svc.cluster.local",
                "inbound-vip|9000|tcp|web.shop.svc.cluster.local",
                "forward_inner_connect",
                "BlackHoleCluster",
            ]
        );
        let forward = &clusters[6];
        assert_eq!(forward["type"], "ORIGINAL_DST");
        assert!(
            forward.get("transportSocket").is_none(),
            "raw bytes: {forward}"
        );

        let web = "inbound-vip|80|tcp|web.shop.svc.cluster.local";
        let eds = resources(&ctx, &p, TypeUrl::Endpoint, &[web]);
        let lb = &eds[0]["endpoints"][0]["lbEndpoints"][0];
        assert_eq!(
            lb["endpoint"]["address"]["envoyInternalAddress"]["serverListenerName"],
            "forward_inner_connect"
        );
        assert_eq!(
            lb["metadata"]["filterMetadata"]["envoy.filters.listener.original_dst"]["local"],
            "10.44.0.3:8080"
        );
        let legacy = "inbound-vip|80|tcp|legacy.shop.svc.cluster.local";
        let eds = resources(&ctx, &p, TypeUrl::Endpoint, &[legacy]);
        assert!(
            eds[0]["endpoints"].as_array().is_none_or(Vec::is_empty),
            "an endpoint that does not take HBONE cannot end an inner tunnel: {}",
            eds[0]
        );
    }

    #[test]
    fn without_multi_network_it_is_an_ordinary_waypoint() {
        let ctx = context(false);
        let listeners = resources(&ctx, &east_west(), TypeUrl::Listener, &[]);
        assert_eq!(
            names(&listeners),
            ["connect_terminate", "main_internal", "connect_originate"]
        );
    }
}
