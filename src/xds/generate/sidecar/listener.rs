//! LDS and RDS entry points of sidecars: the virtual listeners, inbound chains and clusters, and
//! the route configurations outbound listeners name.

use crate::config::Spec;
use crate::config::networking::OutboundTrafficPolicyMode;
use crate::config::security::MtlsMode;
use crate::model::Protocol;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::cluster::{BLACKHOLE, INBOUND_PASSTHROUGH, PASSTHROUGH, socket};
pub(in crate::xds::generate) use crate::xds::generate::shared::network::network_filter;
use crate::xds::generate::shared::network::{RouteSource, hcm_filter, tcp_proxy};
use crate::xds::generate::shared::route::virtual_host;
use crate::xds::generate::typed_listener::{Chain, ListenerRole, NetworkFilter, TypedListener};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChainMatch, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route_match,
};
use envoy_types::pb::envoy::extensions::filters::listener::original_dst::v3::OriginalDst;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use std::collections::HashSet;

const VIRTUAL_OUTBOUND_PORT: u32 = 15001;
const VIRTUAL_INBOUND_PORT: u32 = 15006;
/// ALPN a sidecar accepts for mesh mTLS (what Istio's clients offer, then plain HTTP versions).
const MESH_ALPN: [&str; 4] = ["istio-peer-exchange", "istio", "h2", "http/1.1"];

/// The server-side HTTP filters for `proxy`: JWT verification, then authorization (of the
/// HBONE tunnel's peer when `tunnel`).
pub(in crate::xds::generate) fn security_filters(
    ctx: &PushContext,
    scope: &ScopeView,
    tunnel: bool,
) -> Vec<HttpFilter> {
    let mut out: Vec<HttpFilter> = crate::xds::generate::security::jwt::http_filter(ctx, scope)
        .into_iter()
        .collect();
    out.extend(crate::xds::generate::security::authz::http_filters_for(
        ctx, scope, None, tunnel,
    ));
    out
}

/// An inbound route configuration: every request of any host to `cluster`, without a timeout.
pub(in crate::xds::generate) fn inbound_route(
    name: &str,
    virtual_host: &str,
    cluster: &str,
) -> RouteConfiguration {
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: virtual_host.into(),
            domains: vec!["*".into()],
            routes: vec![default_route(cluster)],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The route `default`: every path to `cluster`, without a timeout.
pub(in crate::xds::generate) fn default_route(cluster: &str) -> Route {
    Route {
        name: "default".into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.into())),
            timeout: Some(crate::xds::generate::shared::util::duration(
                std::time::Duration::ZERO,
            )),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A plain TCP proxy to `cluster` (passthrough, blackhole, inbound).
pub(in crate::xds::generate) fn tcp_filter(cluster: &str) -> NetworkFilter {
    tcp_proxy(
        cluster,
        tcp_proxy::ClusterSpecifier::Cluster(cluster.into()),
        None,
    )
}

/// The TCP proxy of unmatched outbound connections (to the passthrough or blackhole cluster),
/// with the proxy's `IDLE_TIMEOUT` as istiod's `buildOutboundCatchAllNetworkFiltersOnly`.
pub(in crate::xds::generate) fn catch_all_filter(
    scope: &ScopeView,
    cluster: &str,
) -> NetworkFilter {
    let Some(idle) = scope.catch_all_idle_timeout else {
        return tcp_filter(cluster);
    };
    let proxy = envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy {
        stat_prefix: cluster.into(),
        cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(cluster.into())),
        idle_timeout: Some(crate::xds::generate::shared::util::duration(idle)),
        ..Default::default()
    };
    NetworkFilter::tcp(proxy)
}

/// A TCP proxy to `cluster` behind the TCP authorization filters (`rbac`).
pub(in crate::xds::generate) fn tcp_filters(
    rbac: &[NetworkFilter],
    cluster: &str,
) -> Vec<NetworkFilter> {
    behind_rbac(rbac, tcp_filter(cluster))
}

/// `proxy` behind the TCP authorization filters (`rbac`).
pub(in crate::xds::generate) fn behind_rbac(
    rbac: &[NetworkFilter],
    proxy: NetworkFilter,
) -> Vec<NetworkFilter> {
    let mut out = rbac.to_vec();
    out.push(proxy);
    out
}

/// The listeners that take captured traffic (none with interception NONE): `virtualOutbound` hands
/// each connection to the outbound listener of its original destination, `virtualInbound` serves
/// the workload's own ports.
pub fn virtual_listeners(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    let mut out = Vec::new();
    if !scope.interception_none {
        let fallback = if allow_any(ctx, scope) {
            PASSTHROUGH
        } else {
            BLACKHOLE
        };
        out.push(Typed::new(
            "virtualOutbound",
            Class::outbound(scope),
            TypedListener::new(
                Listener {
                    name: "virtualOutbound".into(),
                    address: Some(socket("0.0.0.0", VIRTUAL_OUTBOUND_PORT)),
                    use_original_dst: Some(BoolValue { value: true }),
                    ..Default::default()
                },
                vec![Chain {
                    name: "virtualOutbound-catchall-tcp".into(),
                    filters: vec![catch_all_filter(scope, fallback)],
                    ..Default::default()
                }],
            )
            .with_role(ListenerRole::Capture),
        ));
        out.push(Typed::new(
            "virtualInbound",
            Class::inbound(scope),
            virtual_inbound(ctx, scope),
        ));
    }
    out
}

/// istiod's inbound DestinationRule: the connection pool of the rule for the service behind the
/// proxy's `port` (the first by hostname, as istiod takes one), at that service's port, so
/// circuit-breaker limits raised for clients hold on the server side too. A Sidecar's pool wins.
fn destination_rule_pool(
    ctx: &PushContext,
    scope: &ScopeView,
    port: u32,
) -> Option<crate::config::networking::ConnectionPoolSettings> {
    let host = scope.inbound_hosts.get(&port)?.first()?;
    let svc = ctx.registry.services.get(host.as_str())?;
    let service_port = svc
        .ports
        .iter()
        .find(|p| p.target_port == port)
        .or_else(|| svc.ports.iter().find(|p| p.number == port))?
        .number;
    let rule = ctx.destination_rule_for(&scope.namespace, &scope.labels, svc)?;
    crate::xds::generate::shared::cluster::EffectivePolicy::resolve(
        Some(&rule.spec),
        None,
        service_port,
    )
    .connection_pool
}

pub fn inbound_cluster_name(port: u32) -> String {
    format!("inbound|{port}||")
}

/// Clusters that deliver inbound traffic to the application: to the address the client dialled
/// (the pod's IP, as istiod since 1.10: applications listening on localhost only are not
/// reached), from 127.0.0.6 so the capture rules let it through; to localhost under MeshConfig
/// `inboundTrafficPolicy: LOCALHOST`; or to a Sidecar ingress listener's `defaultEndpoint`.
pub fn inbound_clusters(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    if scope.interception_none {
        return Vec::new();
    }
    let sidecar = scope.sidecar.as_ref().and_then(|c| match &c.spec {
        Spec::Sidecar(sc) => Some(sc),
        _ => None,
    });
    scope
        .inbound
        .iter()
        .map(|(&port, &protocol)| {
            let name = inbound_cluster_name(port);
            let ingress = sidecar.and_then(|sc| {
                sc.ingress
                    .iter()
                    .find(|i| i.port.as_ref().is_some_and(|p| p.number == port))
            });
            let mut cluster = Cluster {
                name: name.clone(),
                connect_timeout: Some(crate::xds::generate::shared::util::duration(ctx.mesh.connect_timeout)),
                ..Default::default()
            };
            let endpoint = ingress.map(|i| i.default_endpoint.as_str()).unwrap_or("");
            // MeshConfig `inboundTrafficPolicy: LOCALHOST`: a service's port goes to the
            // application on localhost, as before Istio 1.10 (istiod's inbound bind).
            let endpoint = match (ingress, ctx.mesh.inbound_localhost) {
                (None, true) if scope.ipv6_only => format!("[::1]:{port}"),
                (None, true) => format!("127.0.0.1:{port}"),
                _ => endpoint.to_string(),
            };
            match parse_default_endpoint(&endpoint) {
                DefaultEndpoint::Address(host, target) => {
                    cluster.cluster_discovery_type =
                        Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
                    cluster.load_assignment =
                        Some(single_endpoint(&name, socket(&host, target)));
                }
                DefaultEndpoint::Unix(path) => {
                    cluster.cluster_discovery_type =
                        Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
                    cluster.load_assignment = Some(single_endpoint(
                        &name,
                        envoy_types::pb::envoy::config::core::v3::Address {
                            address: Some(
                                envoy_types::pb::envoy::config::core::v3::address::Address::Pipe(
                                    envoy_types::pb::envoy::config::core::v3::Pipe {
                                        path,
                                        ..Default::default()
                                    },
                                ),
                            ),
                        },
                    ));
                }
                DefaultEndpoint::Original(port_override) => {
                    cluster.cluster_discovery_type =
                        Some(ClusterDiscoveryType::Type(DiscoveryType::OriginalDst as i32));
                    cluster.lb_policy =
                        envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy::ClusterProvided
                            as i32;
                    cluster.lb_config = port_override.map(|p| {
                        envoy_types::pb::envoy::config::cluster::v3::cluster::LbConfig::OriginalDstLbConfig(
                            envoy_types::pb::envoy::config::cluster::v3::cluster::OriginalDstLbConfig {
                                upstream_port_override: Some(UInt32Value { value: p }),
                                ..Default::default()
                            },
                        )
                    });
                    // istiod's inbound passthrough source: the capture rules return traffic from
                    // it on loopback instead of redirecting it back to the proxy.
                    cluster.upstream_bind_config =
                        Some(crate::xds::generate::shared::cluster::inbound_bind(scope.ipv6_only));
                }
            }
            // As istiod: the Sidecar's connection pool (the ingress listener's, else
            // `inboundConnectionPool`; limits unset are unlimited); an HTTP/2 or gRPC port reaches
            // the application over HTTP/2, a sniffed one over the client's HTTP version.
            let rule_pool = destination_rule_pool(ctx, scope, port);
            let pool = ingress
                .and_then(|i| i.connection_pool.as_ref())
                .or_else(|| sidecar.and_then(|sc| sc.inbound_connection_pool.as_ref()))
                .or(rule_pool.as_ref());
            crate::xds::generate::shared::cluster::apply_connection_pool(
                &mut cluster,
                pool,
                ctx.mesh.tcp_keepalive.as_ref(),
                false,
                protocol,
                protocol == Protocol::Unsupported,
                None,
            );
            Typed::new(&name, Class::inbound(scope), cluster)
        })
        .collect()
}

/// Where a Sidecar ingress listener's `defaultEndpoint` sends traffic.
enum DefaultEndpoint {
    /// `127.0.0.1:PORT`, `[::1]:PORT`: that address.
    Address(String, u32),
    /// `unix:///path`.
    Unix(String),
    /// Empty: the address the client dialled; `0.0.0.0:PORT`/`[::]:PORT`: the pod's IP at PORT.
    Original(Option<u32>),
}

fn parse_default_endpoint(endpoint: &str) -> DefaultEndpoint {
    if let Some(path) = endpoint.strip_prefix("unix://") {
        return DefaultEndpoint::Unix(path.to_string());
    }
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        return DefaultEndpoint::Original(None);
    };
    let Ok(port) = port.parse::<u32>() else {
        return DefaultEndpoint::Original(None);
    };
    match host.trim_start_matches('[').trim_end_matches(']') {
        "0.0.0.0" | "::" => DefaultEndpoint::Original(Some(port)),
        host => DefaultEndpoint::Address(host.to_string(), port),
    }
}

fn single_endpoint(
    cluster: &str,
    address: envoy_types::pb::envoy::config::core::v3::Address,
) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(address),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn virtual_inbound(ctx: &PushContext, scope: &ScopeView) -> TypedListener {
    let (chains, sniffing) = inbound_chains(ctx, scope, &[]);
    let mut listener_filters = vec![
            ListenerFilter {
                name: "envoy.filters.listener.original_dst".into(),
                config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                    &OriginalDst::default(),
                ))),
                ..Default::default()
            },
            // Tells TLS from plaintext, so PERMISSIVE ports can take both.
            ListenerFilter {
                name: "envoy.filters.listener.tls_inspector".into(),
                config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                    &envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector::default(),
                ))),
                ..Default::default()
            },
        ];
    if sniffing {
        listener_filters.push(ListenerFilter {
            name: "envoy.filters.listener.http_inspector".into(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector::default(),
            ))),
            ..Default::default()
        });
    }
    TypedListener::new(
        Listener {
            name: "virtualInbound".into(),
            address: Some(socket("0.0.0.0", VIRTUAL_INBOUND_PORT)),
            listener_filters,
            // As istiod: protocol detection waits for the client's first bytes without a deadline.
            listener_filters_timeout: Some(crate::xds::generate::shared::util::duration(
                std::time::Duration::ZERO,
            )),
            continue_on_listener_filters_timeout: true,
            ..Default::default()
        },
        chains,
    )
    .with_role(ListenerRole::Capture)
}

/// The inbound filter chains of the workload's ports and the passthrough ones, and whether any
/// sniffs HTTP. With `hbone` (the sidecar's addresses), the chains of its HBONE `main_internal`:
/// plain text inside the tunnel (the tunnel is the mTLS), the tunnel's peer as the identity, and
/// only the sidecar's own addresses as destinations (istiod's `buildInboundHBONEListeners`).
pub(in crate::xds::generate) fn inbound_chains(
    ctx: &PushContext,
    scope: &ScopeView,
    hbone: &[String],
) -> (Vec<Chain>, bool) {
    let tunnel = !hbone.is_empty();
    let security = security_filters(ctx, scope, tunnel);
    let network_rbac =
        crate::xds::generate::security::authz::network_filters_for(ctx, scope, None, tunnel);
    let ranges: Vec<_> = hbone.iter().filter_map(|ip| cidr(ip)).collect();
    let peer_auth = crate::model::peer_auth::applicable(
        &ctx.snapshot,
        &ctx.mesh.root_namespace,
        &scope.namespace,
    );
    let mut chains: Vec<Chain> = Vec::new();
    let mut sniffing = false;
    // Each port of the workload, then every other port (no port match): the passthrough chains
    // enforce the workload's PeerAuthentication and AuthorizationPolicy too, as istiod's do.
    let targets = scope
        .inbound
        .iter()
        .map(|(&port, &protocol)| (Some(port), protocol, inbound_cluster_name(port)))
        .chain(std::iter::once((
            None,
            Protocol::Unsupported,
            INBOUND_PASSTHROUGH.to_string(),
        )));
    for (port, protocol, cluster) in targets {
        let chain_name = match port {
            Some(_) => cluster.clone(),
            None => "inbound-passthrough".to_string(),
        };
        let http_filters = || {
            let rc = inbound_route(&cluster, "inbound|http", &cluster);
            vec![hcm_filter(
                ctx,
                scope,
                Class::inbound(scope),
                &chain_name,
                RouteSource::Inline(Box::new(rc)),
                security.clone(),
            )]
        };
        // PeerAuthentication: STRICT takes mTLS only (even before the proxy can get its
        // certificate: closed, not open), PERMISSIVE both, DISABLE plaintext. A proxy without an
        // identity cannot terminate mTLS, so PERMISSIVE stays plaintext for it.
        let mut mode = crate::model::peer_auth::mode_among(
            &peer_auth,
            &ctx.mesh.root_namespace,
            &scope.namespace,
            &scope.labels,
            port,
        );
        if (mode == MtlsMode::PERMISSIVE && !scope.mtls) || tunnel {
            mode = MtlsMode::DISABLE;
        }
        if mode == MtlsMode::STRICT && !scope.mtls {
            // No certificate to terminate mTLS with: the port takes nothing. A chain of its own
            // (not none, which would let the passthrough chains take the port) that needs no
            // secret, so listener updates never wait for one.
            chains.push(Chain {
                name: format!("{chain_name}-strict-without-certificate"),
                filter_chain_match: Some(FilterChainMatch {
                    destination_port: port.map(|value| UInt32Value { value }),
                    ..Default::default()
                }),
                filters: vec![tcp_filter(BLACKHOLE)],
                ..Default::default()
            });
            continue;
        }
        // Inside a tunnel there is no TLS of the mesh's to tell apart: a client's own TLS is TCP.
        let options = inbound_options(protocol, mode)
            .into_iter()
            .filter(|o| !tunnel || o.transport != TLS);
        for opt in options {
            sniffing |= !opt.alpn.is_empty() && opt.transport == RAW_BUFFER;
            let tls = if opt.terminate_tls {
                "-mtls"
            } else if opt.transport == TLS {
                "-tls"
            } else {
                ""
            };
            let sniffed = match (protocol, opt.http) {
                (Protocol::Unsupported, true) => "-http",
                (Protocol::Unsupported, false) => "-tcp",
                _ => "",
            };
            chains.push(Chain {
                name: format!("{chain_name}{tls}{sniffed}"),
                filter_chain_match: Some(FilterChainMatch {
                    destination_port: port.map(|value| UInt32Value { value }),
                    transport_protocol: if tunnel { "" } else { opt.transport }.into(),
                    prefix_ranges: ranges.clone(),
                    application_protocols: opt.alpn.iter().map(|a| a.to_string()).collect(),
                    ..Default::default()
                }),
                transport_socket: opt.terminate_tls.then(|| {
                    crate::xds::generate::shared::tls::downstream_socket(
                        crate::xds::generate::shared::tls::inbound_mesh_tls(
                            MESH_ALPN.iter().map(|a| a.to_string()).collect(),
                            &ctx.mesh,
                        ),
                        true,
                    )
                }),
                filters: if opt.http {
                    http_filters()
                } else {
                    tcp_filters(&network_rbac, &cluster)
                },
                ..Default::default()
            });
        }
    }
    (chains, sniffing)
}

/// What the HTTP inspector reports for plaintext HTTP (istiod leaves HTTP/1.0 to TCP by default).
pub(in crate::xds::generate) const PLAINTEXT_HTTP_ALPN: [&str; 2] = ["http/1.1", "h2c"];
const RAW_BUFFER: &str = "raw_buffer";
const TLS: &str = "tls";
/// ALPN of istio mTLS clients that send HTTP (the sniffing client's override).
const MTLS_HTTP_ALPN: &[&str] = &["istio-http/1.0", "istio-http/1.1", "istio-h2"];
/// ALPN of every istio mTLS client, HTTP or TCP (ours offer `istio`).
const ALL_MTLS_ALPN: &[&str] = &[
    "istio",
    "istio-peer-exchange",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
];
const MTLS_TCP_ALPN: &[&str] = &["istio-peer-exchange", "istio"];

/// One inbound filter chain of a port: what it matches and how it serves.
struct InboundOption {
    transport: &'static str,
    alpn: &'static [&'static str],
    http: bool,
    terminate_tls: bool,
}

const fn opt(
    transport: &'static str,
    alpn: &'static [&'static str],
    http: bool,
    terminate_tls: bool,
) -> InboundOption {
    InboundOption {
        transport,
        alpn,
        http,
        terminate_tls,
    }
}

/// istiod's inbound filter chains per port protocol and mTLS mode. Envoy picks a chain by
/// transport, then ALPN, and never falls back to a less specific transport, so every transport a
/// port can see has its own chains. A sniffed port serves plaintext HTTP/1.1 and h2c, and mTLS
/// whose ALPN says HTTP, through the HTTP connection manager, and the rest as TCP.
fn inbound_options(protocol: Protocol, mode: MtlsMode) -> Vec<InboundOption> {
    let plain_http = PLAINTEXT_HTTP_ALPN.as_slice();
    match (protocol, mode) {
        (p, MtlsMode::STRICT) if p.is_http() => vec![opt(TLS, &[], true, true)],
        // Any TLS client of an HTTP port is taken as a mesh client (proxyless gRPC offers `h2`).
        (p, MtlsMode::PERMISSIVE) if p.is_http() => {
            vec![opt(TLS, &[], true, true), opt(RAW_BUFFER, &[], true, false)]
        }
        (p, _) if p.is_http() => vec![opt("", &[], true, false)],
        (Protocol::Unsupported, MtlsMode::STRICT) => vec![
            opt(TLS, MTLS_HTTP_ALPN, true, true),
            opt(TLS, &[], false, true),
        ],
        (Protocol::Unsupported, MtlsMode::PERMISSIVE) => vec![
            opt(TLS, MTLS_HTTP_ALPN, true, true),
            opt(RAW_BUFFER, plain_http, true, false),
            opt(TLS, MTLS_TCP_ALPN, false, true),
            opt(RAW_BUFFER, &[], false, false),
            // One-way TLS from a client outside the mesh: passed to the application as it is.
            opt(TLS, &[], false, false),
        ],
        (Protocol::Unsupported, _) => vec![
            opt(RAW_BUFFER, plain_http, true, false),
            opt(RAW_BUFFER, &[], false, false),
            opt(TLS, &[], false, false),
        ],
        (_, MtlsMode::STRICT) => vec![opt(TLS, &[], false, true)],
        (_, MtlsMode::PERMISSIVE) => vec![
            opt(TLS, ALL_MTLS_ALPN, false, true),
            opt(TLS, &[], false, false),
            opt(RAW_BUFFER, &[], false, false),
        ],
        _ => vec![opt("", &[], false, false)],
    }
}

pub(in crate::xds::generate) fn cidr(
    addr: &str,
) -> Option<envoy_types::pb::envoy::config::core::v3::CidrRange> {
    let net: ipnet::IpNet = addr
        .parse()
        .or_else(|_| addr.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .ok()?;
    Some(envoy_types::pb::envoy::config::core::v3::CidrRange {
        address_prefix: net.addr().to_string(),
        prefix_len: Some(UInt32Value {
            value: u32::from(net.prefix_len()),
        }),
    })
}

/// Whether traffic to destinations outside the registry passes through: the proxy's Sidecar
/// `outboundTrafficPolicy` when it sets one, else the mesh's.
pub(in crate::xds::generate) fn allow_any(ctx: &PushContext, scope: &ScopeView) -> bool {
    let from_sidecar = scope.sidecar.as_ref().and_then(|c| match &c.spec {
        Spec::Sidecar(sc) => sc.outbound_traffic_policy.as_ref(),
        _ => None,
    });
    match from_sidecar {
        Some(policy) => policy.mode == OutboundTrafficPolicyMode::ALLOW_ANY,
        None => ctx.mesh.outbound_allow_any,
    }
}

/// The Envoy route configuration named after a port: one virtual host per HTTP service on that port.
pub fn route_config(ctx: &PushContext, scope: &ScopeView, name: &str) -> Option<Typed> {
    if let Some((host, port)) = name.rsplit_once(':') {
        return sniffed_route_config(ctx, scope, name, host, port.parse().ok()?);
    }
    let port: u32 = name.parse().ok()?;
    let mut seen = HashSet::new();
    // Every service with this port, whatever its protocol, as istiod: a sniffed service without
    // a VIP is only reached through this configuration.
    let mut hosts: Vec<VirtualHost> = scope
        .services_on_port(port)
        .into_iter()
        .filter(|s| s.port(port).is_some())
        .filter_map(|s| virtual_host(ctx, scope, s, port, false, &mut seen))
        .collect();
    if seen.insert("*".into()) {
        // Hosts the mesh does not know: passed through (ALLOW_ANY) or answered 502 (REGISTRY_ONLY),
        // with istiod's virtual host and route names, whatever the interception mode (as
        // istiod's `buildCatchAllVirtualHost`).
        let (name, action) = if allow_any(ctx, scope) {
            (
                "allow_any",
                Action::Route(RouteAction {
                    cluster_specifier: Some(ClusterSpecifier::Cluster(PASSTHROUGH.into())),
                    timeout: Some(crate::xds::generate::shared::util::duration(
                        std::time::Duration::ZERO,
                    )),
                    ..Default::default()
                }),
            )
        } else {
            (
                "block_all",
                Action::DirectResponse(
                    envoy_types::pb::envoy::config::route::v3::DirectResponseAction {
                        status: 502,
                        ..Default::default()
                    },
                ),
            )
        };
        hosts.push(VirtualHost {
            name: name.into(),
            domains: vec!["*".into()],
            routes: vec![Route {
                name: name.into(),
                r#match: Some(RouteMatch {
                    path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                    ..Default::default()
                }),
                action: Some(action),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    Some(Typed::new(
        name,
        Class::outbound(scope),
        RouteConfiguration {
            name: name.into(),
            virtual_hosts: hosts,
            validate_clusters: Some(BoolValue { value: false }),
            ..Default::default()
        },
    ))
}

/// The route configuration of one sniffed service with a VIP (`<hostname>:<port>`): its virtual
/// host alone, for every Host header, since the VIP already chose the service (as istiod).
fn sniffed_route_config(
    ctx: &PushContext,
    scope: &ScopeView,
    name: &str,
    host: &str,
    port: u32,
) -> Option<Typed> {
    let svc = scope
        .services
        .iter()
        .find(|s| s.hostname == host && s.port(port).is_some())?;
    let mut vh = virtual_host(ctx, scope, svc, port, false, &mut HashSet::new())?;
    vh.domains = vec!["*".into()];
    Some(Typed::new(
        name,
        Class::outbound(scope),
        RouteConfiguration {
            name: name.into(),
            virtual_hosts: vec![vh],
            validate_clusters: Some(BoolValue { value: false }),
            ..Default::default()
        },
    ))
}
