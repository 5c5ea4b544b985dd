//! EDS: ClusterLoadAssignments, grouped by locality, filtered by subset labels.

use super::cluster::{EffectivePolicy, socket};
use super::util::parse_service_cluster;
use crate::config::networking::ClientTlsMode;
use crate::model::Endpoint as ModelEndpoint;
use crate::model::network::resolved;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Class, Typed};
use envoy_types::pb::envoy::config::core::v3::HealthStatus;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use envoy_types::pb::google::protobuf::value::Kind::StringValue;
use std::collections::BTreeMap;

/// The load assignment for one outbound cluster, or an empty one for a cluster that does not exist
/// (so a client that asked learns it has no endpoints instead of waiting forever).
pub fn load_assignment(ctx: &PushContext, scope: &ScopeView, cluster: &str) -> Typed {
    let mut policy = None;
    let mut mtls = MtlsCheck::new(ctx, None);
    // An SNI-DNAT cluster of an AUTO_PASSTHROUGH gateway: only endpoints that speak Istio's
    // mTLS, since the gateway cannot tell whether the passed-through connection is mTLS.
    let sni_dnat = super::util::parse_sni_dnat(cluster);
    let endpoints: Vec<&ModelEndpoint> = match parse_service_cluster(cluster).or(sni_dnat) {
        Some((port, subset, host)) => {
            let rule = ctx
                .registry
                .services
                .get(host)
                .and_then(|svc| ctx.destination_rule_for(&scope.namespace, &scope.labels, svc))
                .map(|dr| &dr.spec);
            let subset_rule = rule.and_then(|r| r.subsets.iter().find(|s| s.name == subset));
            policy = Some(EffectivePolicy::resolve(rule, subset_rule, port));
            mtls = MtlsCheck::new(ctx, rule.and_then(|r| dr_tls_mode(r, subset, port)));
            let selector = if subset.is_empty() {
                None
            } else {
                subset_rule
                    .map(|s| s.labels.clone())
                    .or(Some(BTreeMap::from([(
                        "\u{0}no-such-subset".to_string(),
                        String::new(),
                    )])))
            };
            // A cluster-local host's endpoints come from the proxy's own cluster alone.
            let cluster_local = ctx.mesh.cluster_local.is_cluster_local(host);
            ctx.registry
                .endpoints(host, port)
                .iter()
                .filter(|e| !cluster_local || e.cluster == scope.cluster)
                // istiod's `ProxyView`: the networks the proxy asked to see, and no network.
                .filter(|e| {
                    scope.network_view.is_empty()
                        || e.network.is_empty()
                        || scope.network_view.contains(&e.network)
                })
                .filter(|e| selector.as_ref().is_none_or(|s| e.matches(s)))
                .filter(|e| sni_dnat.is_none() || mtls.enabled(e))
                .collect()
        }
        None => Vec::new(),
    };
    let endpoints = split_horizon(ctx, scope, endpoints, &mut mtls);
    // The `:authority` of double HBONE: the service's hostname and port.
    let target = parse_service_cluster(cluster).map(|(port, _, host)| format!("{host}:{port}"));
    let mut by_locality: BTreeMap<&str, Vec<&ModelEndpoint>> = BTreeMap::new();
    for e in &endpoints {
        by_locality.entry(e.locality.as_str()).or_default().push(e);
    }
    let mut cla = ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        endpoints: by_locality
            .iter()
            .map(|(locality, eps)| {
                // gRPC ignores localities without a weight; Envoy ignores the weight unless
                // locality-weighted balancing is on. The sum of endpoint weights suits both.
                let weight: u32 = eps.iter().map(|e| e.weight.max(1)).sum();
                LocalityLbEndpoints {
                    load_balancing_weight: Some(UInt32Value { value: weight }),
                    locality: Some(super::locality::parse(locality)),
                    lb_endpoints: eps
                        .iter()
                        .map(
                            |e| match (&target, e.labels.contains_key(THROUGH_EAST_WEST)) {
                                (Some(target), true) => {
                                    let gateway = super::hbone::host_port(&e.address, e.port);
                                    lb_endpoint_of(
                                        ctx,
                                        e,
                                        super::hbone::internal_address(
                                            super::hbone::INNER_CONNECT_ORIGINATE,
                                            &gateway,
                                        ),
                                        Some(super::hbone::double_hbone_metadata(
                                            &gateway,
                                            target,
                                            // A gateway's service clusters pick the internal
                                            // listener by the `hbone` socket match.
                                            scope.proxy_type
                                                != crate::xds::proxy::ProxyType::Waypoint,
                                        )),
                                    )
                                }
                                _ => lb_endpoint_of(
                                    ctx,
                                    e,
                                    socket(&e.address, e.port),
                                    mtls.enabled(e).then(tls_mode_metadata),
                                ),
                            },
                        )
                        .collect(),
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    if let Some(policy) = policy {
        apply_locality_lb(ctx, scope, &mut cla, &by_locality, &policy);
    }
    Typed::new(cluster, Class::outbound(scope), cla)
}

/// The mesh's or the DestinationRule's locality load balancing on `cla`: failover, distribution
/// and failover priority by labels (with each endpoint's cluster and network when a priority
/// names them, as istiod labels them).
fn apply_locality_lb(
    ctx: &PushContext,
    scope: &ScopeView,
    cla: &mut ClusterLoadAssignment,
    by_locality: &BTreeMap<&str, Vec<&ModelEndpoint>>,
    policy: &EffectivePolicy,
) {
    let labels: Vec<Vec<&BTreeMap<String, String>>> = by_locality
        .values()
        .map(|eps| eps.iter().map(|e| &e.labels).collect())
        .collect();
    let rule = policy
        .load_balancer
        .as_ref()
        .and_then(|lb| lb.locality_lb_setting.as_ref());
    if let Some(setting) = super::locality::setting(ctx.mesh.locality_lb.as_ref(), rule) {
        // istiod labels every endpoint and proxy with its cluster and network, which
        // `failoverPriority` may name ("prefer my cluster"); added only when it does.
        let topology = setting.failover_priority.iter().any(|p| {
            let key = p.split_once('=').map_or(p.as_str(), |(k, _)| k);
            key == CLUSTER_LABEL || key == NETWORK_LABEL
        });
        let local = &ctx.mesh.cluster_id;
        let with_topology = |labels: &BTreeMap<String, String>, cluster: &str, network: &str| {
            let mut out = labels.clone();
            let cluster = if cluster.is_empty() {
                local.as_str()
            } else {
                cluster
            };
            out.entry(CLUSTER_LABEL.to_string())
                .or_insert_with(|| cluster.to_string());
            if !network.is_empty() {
                out.entry(NETWORK_LABEL.to_string())
                    .or_insert_with(|| network.to_string());
            }
            out
        };
        let topology_labels = topology.then(|| {
            let endpoints: Vec<Vec<BTreeMap<String, String>>> = by_locality
                .values()
                .map(|eps| {
                    eps.iter()
                        .map(|e| with_topology(&e.labels, &e.cluster, &e.network))
                        .collect()
                })
                .collect();
            let proxy = with_topology(&scope.labels, &scope.cluster, &scope.network);
            (endpoints, proxy)
        });
        let (endpoint_labels, proxy_labels) = match &topology_labels {
            Some((endpoints, proxy)) => (
                endpoints
                    .iter()
                    .map(|group| group.iter().collect())
                    .collect(),
                proxy,
            ),
            None => (labels, &scope.labels),
        };
        super::locality::apply(
            cla,
            &endpoint_labels,
            &scope.locality,
            proxy_labels,
            setting,
            policy.outlier_detection.is_some(),
        );
    }
}

/// `e` as Envoy's endpoint at `address`: its health and weight (at least 1), with `metadata` and
/// istiod's `istio.workload` telemetry metadata.
pub(in crate::xds::generate) fn lb_endpoint_of(
    ctx: &PushContext,
    e: &ModelEndpoint,
    address: envoy_types::pb::envoy::config::core::v3::Address,
    metadata: Option<envoy_types::pb::envoy::config::core::v3::Metadata>,
) -> LbEndpoint {
    let mut metadata = metadata.unwrap_or_default();
    metadata
        .filter_metadata
        .entry(ISTIO_METADATA.to_string())
        .or_default()
        .fields
        .insert(
            "workload".to_string(),
            envoy_types::pb::google::protobuf::Value {
                kind: Some(StringValue(workload_label(ctx, e))),
            },
        );
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(address),
            ..Default::default()
        })),
        health_status: if e.healthy {
            HealthStatus::Healthy
        } else {
            HealthStatus::Unhealthy
        } as i32,
        load_balancing_weight: Some(UInt32Value {
            value: e.weight.max(1),
        }),
        metadata: Some(metadata),
    }
}

/// The filter-metadata namespace istiod writes its own endpoint facts under.
const ISTIO_METADATA: &str = "istio";

/// istiod's compressed telemetry label (`AppendLbEndpointMetadata`, on by default):
/// `<workload>;<namespace>;<canonical name>;<canonical revision>;<cluster>`, the revision empty
/// when it is the default `latest`. istio-proxy's stats filter reads the destination's workload
/// from it when no peer metadata was exchanged (a destination without a sidecar, a failed
/// request). A gateway standing in for another network's endpoints has no namespace and the
/// gateway's own cluster (empty for a `meshNetworks` address), as istiod writes it.
fn workload_label(ctx: &PushContext, e: &ModelEndpoint) -> String {
    let (name, revision) = crate::model::workload::canonical(&e.labels, &e.workload);
    let revision = if revision == "latest" { "" } else { &revision };
    let cluster = if e.namespace.is_empty() {
        e.cluster.as_str()
    } else {
        crate::model::network::resolved(&e.cluster, &ctx.mesh.cluster_id)
    };
    format!("{};{};{name};{revision};{cluster}", e.workload, e.namespace)
}

/// istiod's `tlsModeForDestinationRule`: the TLS mode a DestinationRule sets for `subset` (its
/// traffic policy alone, not the rule's top level) or, with no subset, for the rule; a port-level
/// setting for `port` wins.
fn dr_tls_mode(
    rule: &crate::config::networking::DestinationRule,
    subset: &str,
    port: u32,
) -> Option<ClientTlsMode> {
    let policy = if subset.is_empty() {
        rule.traffic_policy.as_ref()
    } else {
        rule.subsets
            .iter()
            .find(|s| s.name == subset)?
            .traffic_policy
            .as_ref()
    }?;
    policy
        .port_level_settings
        .iter()
        .find(|p| p.port.as_ref().is_some_and(|s| s.number == port) && p.tls.is_some())
        .and_then(|p| p.tls.as_ref())
        .or(policy.tls.as_ref())
        .map(|t| t.mode)
}

/// istiod's `checkMtlsEnabled`, per endpoint of one cluster: the DestinationRule's TLS mode when
/// it sets one (ISTIO_MUTUAL or not); else whether the endpoint has a proxy
/// (`security.istio.io/tlsMode: istio`) whose PeerAuthentication does not DISABLE mTLS on its
/// port. An endpoint marked so is sent mTLS by automatic mTLS; one of another network is reached
/// through its network's gateway only when marked.
struct MtlsCheck<'a> {
    ctx: &'a PushContext,
    destination_rule: Option<ClientTlsMode>,
    /// PeerAuthentications by namespace, read once per namespace.
    policies: BTreeMap<&'a str, Vec<crate::model::peer_auth::Policy<'a>>>,
    /// Whether any PeerAuthentication of the push disables mTLS, read on first need.
    any_disabled: Option<bool>,
}

impl<'a> MtlsCheck<'a> {
    fn new(ctx: &'a PushContext, destination_rule: Option<ClientTlsMode>) -> Self {
        MtlsCheck {
            ctx,
            destination_rule,
            policies: BTreeMap::new(),
            any_disabled: None,
        }
    }

    fn enabled(&mut self, e: &'a ModelEndpoint) -> bool {
        use crate::config::security::MtlsMode;
        use crate::model::peer_auth;
        // A gateway standing in for another network's endpoints (no namespace) takes mTLS.
        if e.namespace.is_empty() {
            return e.labels.get(TLS_MODE_LABEL).map(String::as_str) == Some("istio");
        }
        if let Some(mode) = self.destination_rule {
            return mode == ClientTlsMode::ISTIO_MUTUAL;
        }
        if e.labels.get(TLS_MODE_LABEL).map(String::as_str) != Some("istio") {
            return false;
        }
        let ctx = self.ctx;
        if !*self
            .any_disabled
            .get_or_insert_with(|| ctx.derived(MtlsDisabledSomewhere::of).0)
        {
            return true;
        }
        let root = ctx.mesh.root_namespace.as_str();
        let policies = self
            .policies
            .entry(e.namespace.as_str())
            .or_insert_with(|| peer_auth::applicable(&ctx.snapshot, root, &e.namespace));
        peer_auth::mode_among(policies, root, &e.namespace, &e.labels, Some(e.port))
            != MtlsMode::DISABLE
    }
}

/// The labels istiod adds to every endpoint and proxy: its cluster and its network.
const CLUSTER_LABEL: &str = "topology.istio.io/cluster";
const NETWORK_LABEL: &str = crate::model::kubernetes::NETWORK_LABEL;

/// istiod's `EndpointsByNetworkFilter`: an endpoint of the proxy's network (or of none, or of a
/// network without gateways) is reached directly; one of another network through that network's
/// gateways, which stand in for its endpoints with their summed weight (spread over the gateways,
/// all weights scaled so the shares stay whole). The gateways are `meshNetworks`' (sidecar mode:
/// the stand-ins are marked for Istio's mTLS, so the gateway can route by SNI, and an endpoint
/// without a proxy cannot be reached and is left out), or, for a proxy that sends double HBONE
/// (`double_hbone`), the east-west gateways of ambient multi-network (by IP, on their HBONE port;
/// the stand-ins are marked to be reached through `inner_connect_originate`).
fn split_horizon<'a>(
    ctx: &PushContext,
    scope: &ScopeView,
    endpoints: Vec<&'a ModelEndpoint>,
    mtls: &mut MtlsCheck<'a>,
) -> Vec<std::borrow::Cow<'a, ModelEndpoint>> {
    use std::borrow::Cow;
    let double = double_hbone(ctx, scope);
    let index = double.then(|| crate::xds::generate::ztunnel::index(ctx));
    let gateways: BTreeMap<&str, Vec<Via>> = if let Some(index) = &index {
        index
            .network_gateways
            .iter()
            .map(|(network, gws)| {
                let reachable = gws
                    .iter()
                    .filter(|g| g.address.parse::<std::net::IpAddr>().is_ok())
                    .map(|g| Via {
                        cluster: resolved(&g.cluster, &ctx.mesh.cluster_id).to_string(),
                        address: g.address.clone(),
                        port: g.port(),
                    })
                    .collect();
                (network.as_str(), reachable)
            })
            .collect()
    } else {
        ctx.mesh
            .network_gateways
            .iter()
            .map(|(network, gws)| {
                let all = gws
                    .iter()
                    .map(|g| Via {
                        cluster: g.cluster.clone(),
                        address: g.address.clone(),
                        port: g.port,
                    })
                    .collect();
                (network.as_str(), all)
            })
            .collect()
    };
    // Under ambient multi-network a waypoint or ingress gateway never reaches another network's
    // endpoints directly: through its east-west gateway (double HBONE, when on), else not at all.
    let edge = ctx.mesh.ambient_multi_network && ambient_edge(scope);
    if !edge && gateways.values().all(Vec::is_empty) {
        return endpoints.into_iter().map(Cow::Borrowed).collect();
    }
    // Each network's gateways, all and by cluster, grouped once: what `selectNetworkGateways`
    // picks from for each endpoint.
    let mut by_cluster: BTreeMap<(&str, &str), Vec<&Via>> = BTreeMap::new();
    let mut by_network: BTreeMap<&str, Vec<&Via>> = BTreeMap::new();
    for (network, gws) in &gateways {
        for g in gws {
            by_cluster
                .entry((network, g.cluster.as_str()))
                .or_default()
                .push(g);
            by_network.entry(network).or_default().push(g);
        }
    }
    // istiod's `GetLBWeightScaleFactor`: the gateways per network and per network and cluster.
    let scale: u32 = gateways
        .values()
        .map(|g| g.len() as u32)
        .chain(by_cluster.values().map(|g| g.len() as u32))
        .filter(|n| *n > 0)
        .fold(1, lcm);
    let mut out: Vec<Cow<'a, ModelEndpoint>> = Vec::new();
    // (locality, gateway, network) → summed weight, in a stable order.
    let mut through: BTreeMap<(String, &Via, &str), u32> = BTreeMap::new();
    for e in endpoints {
        let weight = e.weight.max(1).saturating_mul(scale);
        // istiod's `selectNetworkGateways`: the gateways of the endpoint's own cluster when its
        // network has some there, else all of its network's.
        let cluster = resolved(&e.cluster, &ctx.mesh.cluster_id);
        let network_gateways: &[&Via] = by_cluster
            .get(&(e.network.as_str(), cluster))
            .or_else(|| by_network.get(e.network.as_str()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let same = e.network.is_empty() || scope.network.is_empty() || e.network == scope.network;
        let forced =
            scope.network.is_empty() && !e.network.is_empty() && !network_gateways.is_empty();
        if edge && !same && (!double || network_gateways.is_empty()) {
            continue;
        }
        if !forced && (same || network_gateways.is_empty()) {
            let mut direct = e.clone();
            direct.weight = weight;
            out.push(Cow::Owned(direct));
            continue;
        }
        if !double && !mtls.enabled(e) {
            continue;
        }
        let share = weight / network_gateways.len() as u32;
        for g in network_gateways {
            *through
                .entry((e.locality.clone(), *g, e.network.as_str()))
                .or_default() += share;
        }
    }
    for ((locality, via, network), weight) in through {
        let labels = if double {
            [(THROUGH_EAST_WEST.to_string(), String::new())].into()
        } else {
            [
                ("security.istio.io/tlsMode".to_string(), "istio".to_string()),
                ("topology.istio.io/network".to_string(), network.to_string()),
            ]
            .into()
        };
        out.push(Cow::Owned(ModelEndpoint {
            address: via.address.clone(),
            port: via.port,
            labels,
            locality,
            weight,
            network: network.to_string(),
            cluster: via.cluster.clone(),
            healthy: true,
            ..ModelEndpoint::default()
        }));
    }
    out
}

/// A network gateway an endpoint of its network is reached through: its cluster (the config
/// cluster's, empty, for `meshNetworks`' gateways), address and port; ordered, so the stand-ins
/// come in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Via {
    cluster: String,
    address: String,
    port: u32,
}

/// Marks an endpoint that stands for another network's endpoints at its east-west gateway (not a
/// label any object can carry).
const THROUGH_EAST_WEST: &str = "\u{0}through-east-west";

/// Whether the proxy of `scope` reaches other networks over double HBONE, under ambient
/// multi-network (istiod's `ShouldCreateDoubleHBONEResources`): a waypoint (not an east-west
/// gateway) with AMBIENT_ENABLE_MULTI_NETWORK_WAYPOINT, or an ingress gateway (istiod's
/// `IsIngressGateway`: a managed gateway's pods or `istio: ingressgateway`) that sends HBONE,
/// with AMBIENT_ENABLE_MULTI_NETWORK_INGRESS.
pub fn double_hbone(ctx: &PushContext, scope: &ScopeView) -> bool {
    use crate::xds::proxy::ProxyType;
    ctx.mesh.ambient_multi_network
        && ambient_edge(scope)
        && match scope.proxy_type {
            ProxyType::Waypoint => ctx.mesh.ambient_multi_network_waypoint,
            _ => ctx.mesh.ambient_multi_network_ingress && scope.send_hbone,
        }
}

/// A waypoint (not an east-west gateway) or an ingress gateway as istiod's `IsIngressGateway`
/// reads it (a managed gateway's pods or `istio: ingressgateway`): the proxies ambient
/// multi-network lets reach other networks only through east-west gateways.
fn ambient_edge(scope: &ScopeView) -> bool {
    use crate::model::waypoint::{EAST_WEST_CONTROLLER, GATEWAY_CONTROLLER, GATEWAY_MANAGED};
    use crate::xds::proxy::ProxyType;
    let label = |k: &str| scope.labels.get(k).map(String::as_str);
    match scope.proxy_type {
        ProxyType::Waypoint => label(GATEWAY_MANAGED) != Some(EAST_WEST_CONTROLLER),
        ProxyType::Router => {
            label(GATEWAY_MANAGED) == Some(GATEWAY_CONTROLLER)
                || label("istio") == Some("ingressgateway")
        }
        _ => false,
    }
}

fn lcm(a: u32, b: u32) -> u32 {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    a / gcd(a, b) * b
}

const TLS_MODE_LABEL: &str = "security.istio.io/tlsMode";

/// Whether any PeerAuthentication disables mTLS, for a whole namespace, a workload or a port; read
/// once per push. When none does, an endpoint's proxy label alone decides its mTLS mark.
struct MtlsDisabledSomewhere(bool);

impl MtlsDisabledSomewhere {
    fn of(ctx: &PushContext) -> Self {
        use crate::config::security::MtlsMode;
        use crate::config::{Kind, Spec};
        let disables = |mtls: Option<&crate::config::security::MutualTls>| {
            mtls.is_some_and(|m| m.mode == MtlsMode::DISABLE)
        };
        MtlsDisabledSomewhere(ctx.snapshot.list(Kind::PeerAuthentication).any(|e| {
            match &e.config.spec {
                Spec::PeerAuthentication(pa) => {
                    disables(pa.mtls.as_ref())
                        || pa
                            .port_level_mtls
                            .iter()
                            .flat_map(|ports| ports.values())
                            .any(|m| disables(Some(m)))
                }
                _ => false,
            }
        }))
    }
}

/// The mark of an endpoint that takes Istio's mTLS: automatic mTLS picks the mTLS transport socket
/// for it.
fn tls_mode_metadata() -> envoy_types::pb::envoy::config::core::v3::Metadata {
    use envoy_types::pb::google::protobuf::{Struct, Value};
    envoy_types::pb::envoy::config::core::v3::Metadata {
        filter_metadata: [(
            super::cluster::TLS_MODE_MATCH.to_string(),
            Struct {
                fields: [(
                    "tlsMode".to_string(),
                    Value {
                        kind: Some(StringValue("istio".to_string())),
                    },
                )]
                .into(),
            },
        )]
        .into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::types::TypeUrl;
    use prost::Message;

    const MESH: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: ""
  meshNetworks: |
    networks:
      east: {endpoints: [{fromRegistry: east}], gateways: [{address: 192.0.2.1, port: 15443}]}
      west: {endpoints: [{fromRegistry: west}], gateways: [{address: 192.0.2.9, port: 15443}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
  - {address: 10.1.0.1, network: east, labels: {security.istio.io/tlsMode: istio}}
  - {address: 10.2.0.1, network: west, labels: {security.istio.io/tlsMode: istio}}
  - {address: 10.2.0.2, network: west, labels: {security.istio.io/tlsMode: istio}}
  - {address: 10.2.0.3, network: west}
"#;

    /// (address, port, weight) of each endpoint `web` has for a sidecar of `network`.
    fn eds(network: &str) -> Vec<(String, u32, u32)> {
        let mut out: Vec<(String, u32, u32)> = lb_endpoints(MESH, network, "web")
            .iter()
            .map(|e| {
                let (address, port) = socket_of(e);
                (
                    address,
                    port,
                    e.load_balancing_weight.as_ref().map_or(0, |w| w.value),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// The address and port of an endpoint at a socket address.
    fn socket_of(e: &LbEndpoint) -> (String, u32) {
        use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
        let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &e.host_identifier else {
            panic!("an endpoint");
        };
        let Some(address::Address::SocketAddress(sa)) =
            ep.address.as_ref().and_then(|a| a.address.as_ref())
        else {
            panic!("a socket address");
        };
        let port = match sa.port_specifier {
            Some(socket_address::PortSpecifier::PortValue(p)) => p,
            _ => 0,
        };
        (sa.address.clone(), port)
    }

    /// The endpoints of `<service>.shop`'s port 80 cluster for a sidecar of `network` in `mesh`.
    fn lb_endpoints(mesh: &str, network: &str, service: &str) -> Vec<LbEndpoint> {
        let ctx = crate::testing::push_context_with_mesh_config(mesh);
        let meta: Vec<(&str, &str)> = if network.is_empty() {
            vec![]
        } else {
            vec![("NETWORK", network)]
        };
        let p = crate::testing::sidecar("shop", &meta);
        let scope = ctx.scope(&p);
        let names = [format!("outbound|80||{service}.shop.svc.cluster.local")].into();
        let r = crate::xds::generate::generate(&ctx, &p, &scope, TypeUrl::Endpoint, Some(&names));
        let cla = ClusterLoadAssignment::decode(r[0].any.value.as_slice()).unwrap();
        cla.endpoints
            .into_iter()
            .flat_map(|l| l.lb_endpoints)
            .collect()
    }

    /// A string field of an endpoint's filter metadata.
    fn metadata(e: &LbEndpoint, namespace: &str, key: &str) -> Option<String> {
        let value = e
            .metadata
            .as_ref()?
            .filter_metadata
            .get(namespace)?
            .fields
            .get(key)?;
        match &value.kind {
            Some(StringValue(s)) => Some(s.clone()),
            _ => None,
        }
    }

    /// istiod's `istio.workload` on every endpoint: a pod's Deployment (through its ReplicaSet),
    /// its canonical name and revision, and the config cluster's ID; a ServiceEntry's inline
    /// endpoint as the workload `<entry>-<index>` (or its `service.istio.io/workload-name`), the
    /// default revision `latest` left empty; a gateway standing in for another network with no
    /// workload or namespace and its own cluster (none for a `meshNetworks` address).
    #[test]
    fn every_endpoint_names_its_workload_for_istios_metrics() {
        let pods = r#"
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec: {clusterIP: 10.96.0.7, selector: {app: reviews}, ports: [{name: http, port: 80, targetPort: 9080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: reviews-1, namespace: shop, labels: {kubernetes.io/service-name: reviews}}
addressType: IPv4
ports: [{name: http, port: 9080}]
endpoints:
- addresses: [10.1.0.7]
  targetRef: {kind: Pod, name: reviews-v2-7d9f8c-x1, namespace: shop}
---
apiVersion: v1
kind: Pod
metadata:
  name: reviews-v2-7d9f8c-x1
  namespace: shop
  labels: {app: reviews, version: v2, pod-template-hash: 7d9f8c}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: reviews-v2-7d9f8c, uid: u1, controller: true}]
spec: {containers: [{name: app}]}
status: {phase: Running, podIP: 10.1.0.7}
"#;
        let mesh = format!("{MESH}{pods}");
        let reviews = lb_endpoints(&mesh, "east", "reviews");
        assert_eq!(
            metadata(&reviews[0], "istio", "workload").as_deref(),
            Some("reviews-v2;shop;reviews;v2;Kubernetes")
        );
        let named = MESH.replace(
            "{address: 10.1.0.1, network: east, labels: {security.istio.io/tlsMode: istio}}",
            "{address: 10.1.0.1, network: east, labels: {security.istio.io/tlsMode: istio, service.istio.io/workload-name: web-vm}}",
        );
        let workloads: Vec<Option<String>> = lb_endpoints(&named, "east", "web")
            .iter()
            .map(|e| metadata(e, "istio", "workload"))
            .collect();
        assert_eq!(
            workloads,
            [
                Some("web-vm;shop;web-vm;;Kubernetes".to_string()),
                Some(";;;;".to_string()),
            ],
            "the east endpoint, then the west network's gateway"
        );
    }

    /// As istiod: a DestinationRule whose TLS is not ISTIO_MUTUAL (here DISABLE) marks no endpoint
    /// for mTLS, and another network's endpoints, which only mTLS can reach through its gateway
    /// (the gateway routes by SNI), are left out; ISTIO_MUTUAL marks them all.
    #[test]
    fn a_destination_rule_without_istio_mtls_leaves_other_networks_out() {
        let rule = |mode: &str| {
            format!(
                "{MESH}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: web, namespace: shop}}\nspec: {{host: web.shop.svc.cluster.local, trafficPolicy: {{tls: {{mode: {mode}}}}}}}\n"
            )
        };
        let addresses = |mesh: &str| -> Vec<(String, Option<String>)> {
            lb_endpoints(mesh, "east", "web")
                .iter()
                .map(|e| {
                    (
                        socket_of(e).0,
                        metadata(e, super::super::cluster::TLS_MODE_MATCH, "tlsMode"),
                    )
                })
                .collect()
        };
        let istio = Some("istio".to_string());
        assert_eq!(
            addresses(&rule("DISABLE")),
            [("10.1.0.1".to_string(), None)]
        );
        assert_eq!(
            addresses(&rule("ISTIO_MUTUAL")),
            [
                ("10.1.0.1".to_string(), istio.clone()),
                ("192.0.2.9".to_string(), istio.clone())
            ]
        );
        // A PeerAuthentication that disables mTLS for the endpoint's workload: no mark, so
        // automatic mTLS sends it plain text, and no way through the other network's gateway.
        let disabled = format!(
            "{MESH}---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: plain, namespace: shop}}\nspec: {{mtls: {{mode: DISABLE}}}}\n"
        );
        assert_eq!(addresses(&disabled), [("10.1.0.1".to_string(), None)]);
    }

    /// istiod's `ProxyView`: a proxy that asks for some networks (`REQUESTED_NETWORK_VIEW`) is
    /// sent only their endpoints (and those of no network): no stand-in for the others.
    #[test]
    fn a_requested_network_view_hides_other_networks() {
        let ctx = crate::testing::push_context_with_mesh_config(MESH);
        let p = crate::testing::sidecar(
            "shop",
            &[("NETWORK", "east"), ("REQUESTED_NETWORK_VIEW", "east")],
        );
        let scope = ctx.scope(&p);
        let names = ["outbound|80||web.shop.svc.cluster.local".to_string()].into();
        let r = crate::xds::generate::generate(&ctx, &p, &scope, TypeUrl::Endpoint, Some(&names));
        let cla = ClusterLoadAssignment::decode(r[0].any.value.as_slice()).unwrap();
        let count: usize = cla.endpoints.iter().map(|l| l.lb_endpoints.len()).sum();
        assert_eq!(count, 1, "east's own endpoint alone: {cla:?}");
        assert_eq!(eds("east").len(), 2, "without a view, west's gateway too");
    }

    /// istiod's `selectNetworkGateways`: an endpoint goes through the gateways of its own cluster
    /// when its network has some there (a labelled gateway Service), not through the network's
    /// `meshNetworks` address as well; the stand-in names the gateway's cluster.
    #[test]
    fn an_endpoint_goes_through_its_own_clusters_gateway() {
        let gateway = r#"
---
apiVersion: v1
kind: Service
metadata: {name: eastwest, namespace: istio-system, labels: {topology.istio.io/network: west}}
spec: {ports: [{port: 15443, name: tls}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.50}]}}
"#;
        let mesh = format!("{MESH}{gateway}");
        let through: Vec<(String, u32, Option<String>)> = lb_endpoints(&mesh, "east", "web")
            .iter()
            .map(|e| {
                (
                    socket_of(e).0,
                    e.load_balancing_weight.as_ref().map_or(0, |w| w.value),
                    metadata(e, "istio", "workload"),
                )
            })
            .filter(|(a, _, _)| a.starts_with("192.0.2."))
            .collect();
        assert_eq!(
            through,
            [(
                "192.0.2.50".to_string(),
                4,
                Some(";;;;Kubernetes".to_string())
            )],
            "the west endpoints' own cluster's gateway alone, with their summed weight (each 1, \
             scaled by 2: istiod's factor, the lowest common multiple of the gateways per network \
             and per network and cluster)"
        );
    }

    /// Split-horizon EDS as istiod's: the proxy's network direct, another network through its
    /// gateway with the summed weight of its mTLS-capable endpoints (the one without a proxy is
    /// left out); a proxy of no network goes through the gateways too.
    #[test]
    fn endpoints_of_other_networks_are_reached_through_their_gateways() {
        assert_eq!(
            eds("east"),
            [
                ("10.1.0.1".to_string(), 80, 1),
                ("192.0.2.9".to_string(), 15443, 2)
            ]
        );
        assert_eq!(
            eds("west"),
            [
                ("10.2.0.1".to_string(), 80, 1),
                ("10.2.0.2".to_string(), 80, 1),
                ("10.2.0.3".to_string(), 80, 1),
                ("192.0.2.1".to_string(), 15443, 1)
            ]
        );
        assert_eq!(
            eds(""),
            [
                ("192.0.2.1".to_string(), 15443, 1),
                ("192.0.2.9".to_string(), 15443, 2)
            ]
        );
    }
}
