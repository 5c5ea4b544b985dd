//! A waypoint's clusters and the endpoints of its `inbound-vip` clusters.

use super::names::{CONNECT_ORIGINATE, ENCAP, HBONE_PORT, MAIN_INTERNAL, ORIGINAL_DST_KEY};
use super::served::served;
use crate::config::networking::ClientTlsMode;
use crate::model::{Service, resolve_host};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::cluster::{EffectivePolicy, build, service_clusters};
use crate::xds::generate::shared::hbone::{internal_address, internal_upstream, raw_buffer};
use crate::xds::generate::shared::hbone::{through_internal, tunnel_destination};
use crate::xds::generate::shared::tls::inbound_mesh_tls;
use crate::xds::generate::shared::util::{duration, inbound_vip_cluster, parse_service_cluster};
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, LbConfig, LbPolicy, OriginalDstLbConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, circuit_breakers::Thresholds,
};
use envoy_types::pb::envoy::config::core::v3::{
    Http2ProtocolOptions, HttpProtocolOptions as CommonHttpOptions, Metadata, TransportSocket,
    transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    TlsParameters, UpstreamTlsContext, tls_parameters::TlsProtocol,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::{
    ExplicitHttpConfig, UpstreamProtocolOptions, UseDownstreamHttpConfig,
    explicit_http_config::ProtocolConfig,
};
use envoy_types::pb::envoy::r#type::metadata::v3::{MetadataKey, metadata_key};
use envoy_types::pb::google::protobuf::UInt32Value;
use std::collections::BTreeSet;
use std::sync::Arc;

const UPSTREAM_HTTP_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
/// istiod's default for MeshConfig `hboneIdleTimeout`.
const HBONE_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// A waypoint's clusters in istiod's order: outbound clusters of the services its routes send
/// to that it does not serve itself, then `main_internal`, `encap`, one `inbound-vip` cluster per
/// served service port (`tcp` and/or `http` as the port's protocol allows, and per subset of the
/// service's DestinationRule), and `connect_originate`.
pub fn clusters(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    let services = served(ctx, scope);
    let own: BTreeSet<&str> = services.iter().map(|s| s.hostname.as_str()).collect();
    let mut out = Vec::new();
    for host in referenced_hosts(ctx, scope, &services) {
        if own.contains(host.as_str()) {
            continue;
        }
        if let Some(svc) = ctx.registry.services.get(&host) {
            out.extend(service_clusters(ctx, scope, svc));
        }
    }
    out.push(internal_cluster(MAIN_INTERNAL, MAIN_INTERNAL));
    out.push(internal_cluster(ENCAP, CONNECT_ORIGINATE));
    for svc in &services {
        out.extend(vip_clusters(ctx, scope, svc));
    }
    out.push(connect_originate(ctx, scope, true));
    out
}

/// The hosts the served services' routes send to (HTTP, TCP and TLS destinations and mirrors).
fn referenced_hosts(ctx: &PushContext, scope: &ScopeView, served: &[Arc<Service>]) -> Vec<String> {
    let mut out = BTreeSet::new();
    for svc in served {
        for vs in ctx.virtual_services_for_waypoint(&scope.namespace, svc) {
            let ns = vs.config.metadata.namespace.as_str();
            let mut add = |host: &str| {
                out.insert(resolve_host(host, ns, &ctx.mesh.domain_suffix));
            };
            for http in &vs.spec.http {
                http.route
                    .iter()
                    .filter_map(|r| r.destination.as_ref())
                    .for_each(|d| add(&d.host));
                if let Some(m) = &http.mirror {
                    add(&m.host);
                }
                http.mirrors
                    .iter()
                    .filter_map(|m| m.destination.as_ref())
                    .for_each(|d| add(&d.host));
            }
            for tcp in &vs.spec.tcp {
                tcp.route
                    .iter()
                    .filter_map(|r| r.destination.as_ref())
                    .for_each(|d| add(&d.host));
            }
            for tls in &vs.spec.tls {
                tls.route
                    .iter()
                    .filter_map(|r| r.destination.as_ref())
                    .for_each(|d| add(&d.host));
            }
        }
    }
    out.into_iter().collect()
}

fn unlimited() -> Option<CircuitBreakers> {
    let max = Some(UInt32Value { value: u32::MAX });
    Some(CircuitBreakers {
        thresholds: vec![Thresholds {
            max_connections: max,
            max_pending_requests: max,
            max_requests: max,
            max_retries: max,
            track_remaining: true,
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// A static cluster of one endpoint, the internal listener `listener` (istiod's
/// `buildInternalUpstreamCluster`, with HTTP/2 allowed as the downstream spoke it).
pub(super) fn internal_cluster(name: &str, listener: &str) -> Typed {
    let options = HttpProtocolOptions {
        upstream_protocol_options: Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(
            UseDownstreamHttpConfig {
                http_protocol_options: Some(Default::default()),
                http2_protocol_options: Some(Default::default()),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    let c = Cluster {
        name: name.into(),
        alt_stat_name: format!("{name};"),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        circuit_breakers: unlimited(),
        load_assignment: Some(internal_assignment(name, listener)),
        transport_socket: Some(internal_upstream(raw_buffer(), false)),
        typed_extension_protocol_options: [(UPSTREAM_HTTP_OPTIONS.to_string(), any(&options))]
            .into(),
        ..Default::default()
    };
    Typed::new(name, Class::Waypoint, c)
}

/// The one endpoint of cluster `name`: the internal listener `listener`.
pub(super) fn internal_assignment(name: &str, listener: &str) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(internal_address(listener, "")),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// An original-destination cluster `name` to port 15008 of the address the connection was given
/// (istiod's HBONE originators): of the endpoint's waypoint instead when `by_waypoint` and its
/// metadata names one.
pub(super) fn to_hbone_port(
    name: &str,
    by_waypoint: bool,
    connect_timeout: std::time::Duration,
) -> Cluster {
    Cluster {
        name: name.into(),
        alt_stat_name: format!("{name};"),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(
            DiscoveryType::OriginalDst as i32,
        )),
        lb_policy: LbPolicy::ClusterProvided as i32,
        connect_timeout: Some(duration(connect_timeout)),
        cleanup_interval: Some(duration(std::time::Duration::from_secs(60))),
        lb_config: Some(LbConfig::OriginalDstLbConfig(OriginalDstLbConfig {
            upstream_port_override: Some(UInt32Value { value: HBONE_PORT }),
            metadata_key: by_waypoint.then(|| MetadataKey {
                key: ORIGINAL_DST_KEY.into(),
                path: vec![metadata_key::PathSegment {
                    segment: Some(metadata_key::path_segment::Segment::Key("waypoint".into())),
                }],
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The upstream options of an HBONE originator: HTTP/2 with CONNECT, istiod's idle timeout, and
/// at most `streams_per_connection` tunnels on one connection (none: no limit).
pub(super) fn hbone_protocol_options(
    streams_per_connection: Option<u32>,
) -> std::collections::HashMap<String, envoy_types::pb::google::protobuf::Any> {
    let options = HttpProtocolOptions {
        common_http_protocol_options: Some(CommonHttpOptions {
            idle_timeout: Some(duration(HBONE_IDLE_TIMEOUT)),
            max_requests_per_connection: streams_per_connection.map(|value| UInt32Value { value }),
            ..Default::default()
        }),
        upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(Http2ProtocolOptions {
                    allow_connect: true,
                    ..Default::default()
                })),
            },
        )),
        ..Default::default()
    };
    [(UPSTREAM_HTTP_OPTIONS.to_string(), any(&options))].into()
}

/// `connect_originate`: HBONE (mTLS, HTTP/2 CONNECT) to the destination's port 15008, at the
/// address the `connect_originate` listener restored from the endpoint's metadata, or the
/// endpoint's own waypoint when its metadata names one. A waypoint's also accepts peers of its
/// own namespace by name (istiod's; the trust domain's already covers them).
pub(super) fn connect_originate(ctx: &PushContext, scope: &ScopeView, waypoint: bool) -> Typed {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::SubjectAltNameMatcher;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::subject_alt_name_matcher::SanType;
    use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
    let mut common = hbone_tls(ctx);
    if waypoint
        && let Some(ValidationContextType::CombinedValidationContext(combined)) =
            common.validation_context_type.as_mut()
        && let Some(default) = combined.default_validation_context.as_mut()
    {
        default
            .match_typed_subject_alt_names
            .push(SubjectAltNameMatcher {
                san_type: SanType::Uri as i32,
                matcher: Some(StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Prefix(format!(
                        "spiffe://{}/ns/{}/sa/",
                        ctx.mesh.trust_domain, scope.namespace
                    ))),
                    ignore_case: false,
                }),
                oid: String::new(),
            });
    }
    let c = Cluster {
        circuit_breakers: unlimited(),
        typed_extension_protocol_options: hbone_protocol_options(None),
        transport_socket: Some(TransportSocket {
            name: "tls".into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(
                &UpstreamTlsContext {
                    common_tls_context: Some(common),
                    ..Default::default()
                },
            ))),
        }),
        ..to_hbone_port(CONNECT_ORIGINATE, true, ctx.mesh.connect_timeout)
    };
    Typed::new(CONNECT_ORIGINATE, Class::outbound(scope), c)
}

/// The TLS of HBONE, both directions (istiod's `buildCommonConnectTLSContext`): the workload
/// certificate, peers of the mesh's trust domains, ALPN `h2`, TLS 1.3 only.
pub(super) fn hbone_tls(
    ctx: &PushContext,
) -> envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::CommonTlsContext {
    let mut common = inbound_mesh_tls(vec!["h2".into()], &ctx.mesh);
    common.tls_params = Some(TlsParameters {
        tls_minimum_protocol_version: TlsProtocol::TlSv13 as i32,
        tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
        ..Default::default()
    });
    common
}

/// The `inbound-vip` clusters of `svc`: per port, `tcp` and/or `http` as its protocol allows,
/// then the same per subset of its DestinationRule, each shaped by that rule (ISTIO_MUTUAL
/// aside: HBONE is the mesh's mTLS here) and reaching its endpoints through `connect_originate`.
fn vip_clusters(ctx: &PushContext, scope: &ScopeView, svc: &Service) -> Vec<Typed> {
    use crate::model::Protocol;
    let dr = ctx
        .destination_rule_for(&scope.namespace, &scope.labels, svc)
        .map(|d| &d.spec);
    let subsets = dr.map(|d| d.subsets.as_slice()).unwrap_or_default();
    let mut out = Vec::new();
    for port in &svc.ports {
        let classes: &[&str] = match port.protocol {
            Protocol::Unsupported => &["tcp", "http"],
            p if p.is_http() => &["http"],
            _ => &["tcp"],
        };
        for subset in std::iter::once(None).chain(subsets.iter().map(Some)) {
            for class in classes {
                let name = match subset {
                    Some(s) => format!("{class}/{}", s.name),
                    None => class.to_string(),
                };
                let cluster_name = inbound_vip_cluster(port.number, &name, &svc.hostname);
                let mut typed = build(ctx, svc, port, dr, subset, false, scope);
                let policy = EffectivePolicy::resolve(dr, subset, port.number);
                let Some(c) = typed.cluster_mut() else {
                    continue;
                };
                c.name.clone_from(&cluster_name);
                if let Some(eds) = c.eds_cluster_config.as_mut() {
                    eds.service_name.clone_from(&cluster_name);
                }
                if let Some(la) = c.load_assignment.as_mut() {
                    la.cluster_name.clone_from(&cluster_name);
                }
                let own_tls = policy.tls.as_ref().is_some_and(|t| {
                    matches!(t.mode, ClientTlsMode::SIMPLE | ClientTlsMode::MUTUAL)
                });
                let inner = match c.transport_socket.take() {
                    Some(ts) if own_tls || policy.proxy_protocol.is_some() => ts,
                    _ => raw_buffer(),
                };
                c.transport_socket_matches.clear();
                c.transport_socket = Some(internal_upstream(inner, true));
                typed.name = cluster_name;
                out.push(typed);
            }
        }
    }
    out
}

/// The endpoints of a waypoint's `inbound-vip` cluster: each endpoint of the service port (of the
/// subset), through `connect_originate` with its address as the tunnel's destination when it is
/// in the ambient mesh; directly otherwise.
pub fn load_assignment(ctx: &PushContext, scope: &ScopeView, cluster: &str) -> Typed {
    let mut cla = ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        ..Default::default()
    };
    if let Some((port, subset, host)) = parse_service_cluster(cluster) {
        let subset = subset.split_once('/').map_or("", |(_, s)| s);
        let plain = crate::xds::generate::shared::util::outbound_cluster(port, subset, host);
        let mut built = crate::xds::generate::shared::endpoint::load_assignment(ctx, scope, &plain);
        if let Some(assignment) = built.load_assignment_mut() {
            let index = crate::xds::generate::ztunnel::index(ctx);
            for group in &mut assignment.endpoints {
                for lb in &mut group.lb_endpoints {
                    tunnel_through_originate(lb, &index, &scope.network);
                }
            }
            assignment.cluster_name = cluster.to_string();
            cla = std::mem::take(assignment);
        }
    }
    Typed::new(cluster, Class::Waypoint, cla)
}

/// Points an endpoint of the ambient mesh at `connect_originate`, its `ip:port` as the tunnel's
/// destination (istiod's `BuildTunnelMetadataStruct`).
fn tunnel_through_originate(
    lb: &mut LbEndpoint,
    index: &crate::xds::generate::ztunnel::AmbientIndex,
    network: &str,
) {
    tunnel_through(lb, CONNECT_ORIGINATE, index, network);
}

/// Points an endpoint that takes HBONE (an ambient workload of `network`) at the internal
/// listener `listener`, its `ip:port` as the tunnel's destination; `false` when it does not.
pub(super) fn tunnel_through(
    lb: &mut LbEndpoint,
    listener: &str,
    index: &crate::xds::generate::ztunnel::AmbientIndex,
    network: &str,
) -> bool {
    let tunnels = |ip: &str| index.supports_tunnel(network, ip);
    let Some(target) = through_internal(lb, listener, tunnels) else {
        return false;
    };
    // Only the tunnel's destination: the cluster has no transport socket to choose by TLS mode
    // (and one key keeps the encoding stable).
    lb.metadata = Some(Metadata {
        filter_metadata: [(
            ORIGINAL_DST_KEY.to_string(),
            tunnel_destination(&target, None),
        )]
        .into(),
        ..Default::default()
    });
    true
}
