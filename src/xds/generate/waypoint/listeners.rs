//! A waypoint's listeners: `connect_terminate`, `main_internal`, `connect_originate`.

use super::clusters::hbone_tls;
use super::names::{
    CONNECT_ORIGINATE, CONNECT_TERMINATE, ENCAP, HBONE_PORT, MAIN_INTERNAL, ORIGINAL_DST_KEY,
    vip_subset,
};
use super::served::served;
use crate::config::networking::RouteDestination;
use crate::model::{Protocol, Service, resolve_host};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::security::rbac::PEER_PRINCIPAL_KEY;
use crate::xds::generate::shared::cluster::socket;
use crate::xds::generate::shared::network::{RouteSource, hcm_filter, network_filter, tcp_proxy};
use crate::xds::generate::shared::util::{
    duration, inbound_vip_cluster, match_applies_to_sidecar, outbound_cluster,
    parse_service_cluster,
};
use crate::xds::generate::sidecar::listener::PLAINTEXT_HTTP_ALPN;
use crate::xds::generate::typed_listener::{Chain, ListenerRole, NetworkFilter, TypedListener};
use envoy_types::pb::envoy::config::core::v3::{
    CidrRange, Http2ProtocolOptions, KeepaliveSettings, SubstitutionFormatString, data_source,
    substitution_format_string,
};
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChainMatch, Listener, ListenerFilter, listener, listener_filter,
};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::{
    ClusterSpecifier, UpgradeConfig as RouteUpgrade, upgrade_config::ConnectConfig,
};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route_match,
};
use envoy_types::pb::envoy::extensions::filters::common::set_filter_state::v3::{
    FilterStateValue, filter_state_value,
};
use envoy_types::pb::envoy::extensions::filters::http::set_filter_state::v3::Config as SetFilterState;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier as TcpCluster, tcp_proxy::TunnelingConfig,
    tcp_proxy::WeightedCluster, tcp_proxy::weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The waypoint's listeners, in istiod's order.
pub fn listeners(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    let services = served(ctx, scope);
    let workloads = super::served::bound_workloads(ctx, scope);
    vec![
        Typed::new(
            CONNECT_TERMINATE,
            Class::Waypoint,
            connect_terminate(ctx, scope),
        ),
        Typed::new(
            MAIN_INTERNAL,
            Class::Waypoint,
            main_internal(ctx, scope, &services, &workloads),
        ),
        Typed::new(
            CONNECT_ORIGINATE,
            Class::Waypoint,
            connect_originate_listener(),
        ),
    ]
}

fn format_string(text: &str) -> SubstitutionFormatString {
    SubstitutionFormatString {
        format: Some(substitution_format_string::Format::TextFormatSource(
            envoy_types::pb::envoy::config::core::v3::DataSource {
                specifier: Some(data_source::Specifier::InlineString(text.into())),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// A filter-state value set from `format` for each request and handed to the connection the
/// request opens upstream (the internal listener behind).
pub(super) fn shared_state(key: &str, factory: &str, format: &str) -> FilterStateValue {
    FilterStateValue {
        key: Some(filter_state_value::Key::ObjectKey(key.into())),
        factory_key: factory.into(),
        value: Some(filter_state_value::Value::FormatString(format_string(
            format,
        ))),
        shared_with_upstream: filter_state_value::SharedWithUpstream::Once as i32,
        ..Default::default()
    }
}

/// istiod's `connect_authority` filter: the tunnel's destination (its `:authority`) becomes the
/// original destination of the connection to `main_internal`, the tunnel's source its remote
/// address, and the peer's and our identities are kept for authorization there. Envoy's generic
/// string object stands for istio-proxy's hashable one (decisions.md).
fn connect_authority() -> HttpFilter {
    let config = SetFilterState {
        on_request_headers: vec![
            shared_state(
                &format!("{ORIGINAL_DST_KEY}.local_ip"),
                "",
                "%REQ(:AUTHORITY)%",
            ),
            shared_state(
                "io.istio.connect_authority",
                "envoy.string",
                "%REQ(:AUTHORITY)%",
            ),
            shared_state(
                &format!("{ORIGINAL_DST_KEY}.remote_ip"),
                "",
                "%DOWNSTREAM_REMOTE_ADDRESS%",
            ),
            shared_state(
                PEER_PRINCIPAL_KEY,
                "envoy.string",
                "%DOWNSTREAM_PEER_URI_SAN%",
            ),
            shared_state(
                "io.istio.local_principal",
                "envoy.string",
                "%DOWNSTREAM_LOCAL_URI_SAN%",
            ),
        ],
        ..Default::default()
    };
    HttpFilter {
        name: "connect_authority".into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&config))),
        ..Default::default()
    }
}

fn bind(scope: &ScopeView) -> &'static str {
    if scope.ipv6_only { "::" } else { "0.0.0.0" }
}

/// HBONE termination on 15008: mTLS with a mesh peer, HTTP/2 CONNECT, each tunnel handed to
/// `main_internal` (istiod's `buildWaypointInboundConnectTerminate`).
pub(super) fn connect_terminate(ctx: &PushContext, scope: &ScopeView) -> TypedListener {
    let route = Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::ConnectMatcher(
                Default::default(),
            )),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(MAIN_INTERNAL.into())),
            upgrade_configs: vec![RouteUpgrade {
                upgrade_type: "CONNECT".into(),
                connect_config: Some(ConnectConfig::default()),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let manager = HttpConnectionManager {
        stat_prefix: CONNECT_TERMINATE.into(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(
            RouteConfiguration {
                name: "default".into(),
                virtual_hosts: vec![VirtualHost {
                    name: "default".into(),
                    domains: vec!["*".into()],
                    routes: vec![route],
                    ..Default::default()
                }],
                ..Default::default()
            },
        )),
        set_current_client_cert_details: Some(
            http_connection_manager::SetCurrentClientCertDetails {
                subject: Some(BoolValue { value: true }),
                uri: true,
                dns: true,
                ..Default::default()
            },
        ),
        use_remote_address: Some(BoolValue { value: false }),
        stream_idle_timeout: Some(duration(std::time::Duration::ZERO)),
        upgrade_configs: vec![http_connection_manager::UpgradeConfig {
            upgrade_type: "CONNECT".into(),
            ..Default::default()
        }],
        http2_protocol_options: Some(Http2ProtocolOptions {
            allow_connect: true,
            max_concurrent_streams: Some(UInt32Value { value: 100 }),
            connection_keepalive: Some(KeepaliveSettings {
                interval: Some(duration(std::time::Duration::from_secs(10))),
                timeout: Some(duration(std::time::Duration::from_secs(20))),
                ..Default::default()
            }),
            ..Default::default()
        }),
        http_filters: vec![
            connect_authority(),
            HttpFilter {
                name: "envoy.filters.http.router".into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(
                    &envoy_types::pb::envoy::extensions::filters::http::router::v3::Router::default(
                    ),
                ))),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let tls = DownstreamTlsContext {
        common_tls_context: Some(hbone_tls(ctx)),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    };
    let listener = Listener {
        name: CONNECT_TERMINATE.into(),
        address: Some(socket(bind(scope), HBONE_PORT)),
        // As istiod: few long-lived tunnels, each carrying many streams, are spread evenly over
        // the workers.
        connection_balance_config: Some(listener::ConnectionBalanceConfig {
            balance_type: Some(
                listener::connection_balance_config::BalanceType::ExactBalance(Default::default()),
            ),
        }),
        ..Default::default()
    };
    use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
    let chain = Chain {
        name: "default".into(),
        transport_socket: Some(TransportSocket {
            name: "tls".into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(&tls))),
        }),
        filters: vec![NetworkFilter::http(manager)],
        ..Default::default()
    };
    TypedListener::new(listener, vec![chain]).with_role(ListenerRole::TunnelEnd)
}

pub(super) fn listener_filter<T: prost::Message + prost::Name>(
    name: &str,
    config: &T,
) -> ListenerFilter {
    ListenerFilter {
        name: name.into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(config))),
        ..Default::default()
    }
}

pub(super) fn internal() -> Option<listener::ListenerSpecifier> {
    Some(listener::ListenerSpecifier::InternalListener(
        listener::InternalListenerConfig::default(),
    ))
}

pub(super) fn original_dst() -> ListenerFilter {
    listener_filter(
        "envoy.filters.listener.original_dst",
        &envoy_types::pb::envoy::extensions::filters::listener::original_dst::v3::OriginalDst::default(),
    )
}

/// An internal listener of one chain of `filters`; with `restore_destination`, a connection's
/// destination is the one the endpoint's metadata restored (the original-destination filter).
pub(super) fn internal_listener(
    name: &str,
    restore_destination: bool,
    filters: Vec<NetworkFilter>,
) -> TypedListener {
    let listener = Listener {
        name: name.into(),
        use_original_dst: Some(BoolValue { value: false }),
        listener_specifier: internal(),
        listener_filters: restore_destination.then(original_dst).into_iter().collect(),
        ..Default::default()
    };
    let chain = Chain {
        filters,
        ..Default::default()
    };
    TypedListener::new(listener, vec![chain])
}

/// `connect_originate`: a connection to it is tunnelled (HTTP/2 CONNECT to the address the
/// endpoint's metadata restored as this connection's destination) over the `connect_originate`
/// cluster.
pub(super) fn connect_originate_listener() -> TypedListener {
    let proxy = TcpProxy {
        stat_prefix: CONNECT_ORIGINATE.into(),
        cluster_specifier: Some(TcpCluster::Cluster(CONNECT_ORIGINATE.into())),
        tunneling_config: Some(TunnelingConfig {
            hostname: "%DOWNSTREAM_LOCAL_ADDRESS%".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    internal_listener(CONNECT_ORIGINATE, true, vec![NetworkFilter::tcp(proxy)])
        .with_role(ListenerRole::TunnelEnd)
}

fn cidr(ip: &str) -> Option<CidrRange> {
    let parsed: std::net::IpAddr = ip.parse().ok()?;
    Some(CidrRange {
        address_prefix: parsed.to_string(),
        prefix_len: Some(UInt32Value {
            value: if parsed.is_ipv4() { 32 } else { 128 },
        }),
    })
}

/// `main_internal`: the tunnelled connections, by destination (a served service's VIP and
/// port): HTTP through the service's routes and policies, TCP through its L4 policies, a
/// sniffed port either way; then connections to the workloads bound to the waypoint (any port):
/// the waypoint's own policies, then on to the workload (`direct-http`, `direct-tcp`).
fn main_internal(
    ctx: &PushContext,
    scope: &ScopeView,
    services: &[Arc<Service>],
    workloads: &[std::net::IpAddr],
) -> TypedListener {
    let own: BTreeSet<&str> = services.iter().map(|s| s.hostname.as_str()).collect();
    let mut chains = Vec::new();
    let mut sniffing = false;
    for svc in services {
        // A waypoint matches auto-allocated VIPs too, as istiod's (ztunnel sends them).
        let ranges: Vec<CidrRange> = svc
            .addresses_for(true)
            .iter()
            .filter_map(|a| cidr(a))
            .collect();
        if ranges.is_empty() {
            // No VIP: nothing reaches the service by address, as istiod leaves it.
            continue;
        }
        let http_security = || {
            let mut filters: Vec<HttpFilter> =
                crate::xds::generate::security::jwt::http_filter_for(ctx, scope, Some(svc))
                    .into_iter()
                    .collect();
            filters.extend(crate::xds::generate::security::authz::http_filters_for(
                ctx,
                scope,
                Some(svc),
                false,
            ));
            filters
        };
        for port in &svc.ports {
            let matching = |alpn: &[&str]| FilterChainMatch {
                prefix_ranges: ranges.clone(),
                destination_port: Some(UInt32Value { value: port.number }),
                application_protocols: alpn.iter().map(|a| a.to_string()).collect(),
                ..Default::default()
            };
            let sniffed = port.protocol == Protocol::Unsupported;
            sniffing |= sniffed;
            if sniffed || !port.protocol.is_http() {
                let cluster = inbound_vip_cluster(port.number, "tcp", &svc.hostname);
                let mut filters = crate::xds::generate::security::authz::network_filters_for(
                    ctx,
                    scope,
                    Some(svc),
                    false,
                );
                filters.push(tcp_proxy(
                    &cluster,
                    tcp_destination(ctx, scope, svc, port.number, &own),
                    None,
                ));
                chains.push(Chain {
                    name: cluster,
                    filter_chain_match: Some(matching(&[])),
                    filters,
                    service: Some(svc.hostname.clone()),
                    ..Default::default()
                });
            }
            if sniffed || port.protocol.is_http() {
                let cluster = inbound_vip_cluster(port.number, "http", &svc.hostname);
                let routes = route_config(ctx, scope, svc, port.number, &cluster, &own);
                chains.push(Chain {
                    name: cluster,
                    filter_chain_match: Some(matching(if sniffed {
                        &PLAINTEXT_HTTP_ALPN
                    } else {
                        &[]
                    })),
                    filters: vec![hcm_filter(
                        ctx,
                        scope,
                        Class::Waypoint,
                        &format!("inbound_0.0.0.0_{}", port.number),
                        RouteSource::Inline(Box::new(routes)),
                        http_security(),
                    )],
                    service: Some(svc.hostname.clone()),
                    ..Default::default()
                });
            }
        }
    }
    if !workloads.is_empty() {
        sniffing = true;
        chains.extend(direct_chains(ctx, scope, workloads));
    }
    let mut listener_filters = vec![original_dst()];
    if sniffing {
        listener_filters.push(listener_filter(
            "envoy.filters.listener.http_inspector",
            &envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector::default(),
        ));
    }
    TypedListener::new(
        Listener {
            name: MAIN_INTERNAL.into(),
            listener_specifier: internal(),
            listener_filters,
            traffic_direction: envoy_types::pb::envoy::config::core::v3::TrafficDirection::Inbound
                as i32,
            ..Default::default()
        },
        chains,
    )
    .with_role(ListenerRole::Destinations)
}

/// The chains of workload-addressed traffic (istiod's `direct-tcp` and `direct-http`): the
/// tunnel's destination handed on to `connect_originate` (through `encap`) as it came, the
/// waypoint's own policies applied.
fn direct_chains(
    ctx: &PushContext,
    scope: &ScopeView,
    workloads: &[std::net::IpAddr],
) -> Vec<Chain> {
    let ranges: Vec<CidrRange> = workloads
        .iter()
        .filter_map(|ip| cidr(&ip.to_string()))
        .collect();
    let matching = |alpn: &[&str]| FilterChainMatch {
        prefix_ranges: ranges.clone(),
        application_protocols: alpn.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    };
    let mut tcp = vec![forward_destination()];
    tcp.extend(crate::xds::generate::security::authz::network_filters(
        ctx, scope,
    ));
    tcp.push(tcp_proxy(ENCAP, TcpCluster::Cluster(ENCAP.into()), None));
    let security = crate::xds::generate::sidecar::listener::security_filters(ctx, scope, false);
    let routes = RouteConfiguration {
        validate_clusters: Some(BoolValue { value: false }),
        ..crate::xds::generate::sidecar::listener::inbound_route(ENCAP, "inbound|http|0", ENCAP)
    };
    let http = vec![
        forward_destination(),
        hcm_filter(
            ctx,
            scope,
            Class::Waypoint,
            "inbound_0.0.0.0_0",
            RouteSource::Inline(Box::new(routes)),
            security,
        ),
    ];
    vec![
        Chain {
            name: "direct-tcp".into(),
            filter_chain_match: Some(matching(&[])),
            filters: tcp,
            ..Default::default()
        },
        Chain {
            name: "direct-http".into(),
            filter_chain_match: Some(matching(&PLAINTEXT_HTTP_ALPN)),
            filters: http,
            ..Default::default()
        },
    ]
}

/// istiod's `connect_authority` network filter: the destination the tunnel named is handed on
/// once more, to the connection `encap` opens to `connect_originate`.
fn forward_destination() -> NetworkFilter {
    use envoy_types::pb::envoy::extensions::filters::network::set_filter_state::v3::Config;
    let key = format!("{ORIGINAL_DST_KEY}.local_ip");
    network_filter(
        "connect_authority",
        &Config {
            on_new_connection: vec![shared_state(
                &key,
                "",
                &format!("%FILTER_STATE({key}:PLAIN)%"),
            )],
            ..Default::default()
        },
    )
}

/// Where a TCP chain sends: the first TCP route (of the service's VirtualServices) for the port,
/// else the service's own `inbound-vip` cluster.
fn tcp_destination(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    own: &BTreeSet<&str>,
) -> TcpCluster {
    let found = ctx
        .virtual_services_for_waypoint(&scope.namespace, svc)
        .into_iter()
        .find_map(|vs| {
            vs.spec
                .tcp
                .iter()
                .find(|r| {
                    r.matches.is_empty()
                        || r.matches.iter().any(|m| {
                            m.source_labels.is_empty()
                                && match_applies_to_sidecar(
                                    scope,
                                    port,
                                    m.port,
                                    &Default::default(),
                                    &m.gateways,
                                    "",
                                )
                        })
                })
                .map(|r| (vs.config.metadata.namespace.as_str(), r.route.as_slice()))
        });
    let Some((vs_ns, routes)) = found else {
        return TcpCluster::Cluster(inbound_vip_cluster(port, "tcp", &svc.hostname));
    };
    let cluster_of = |d: &RouteDestination| {
        let Some(dest) = d.destination.as_ref() else {
            return "UnknownService".to_string();
        };
        let host = resolve_host(&dest.host, vs_ns, &ctx.mesh.domain_suffix);
        let dest_port = dest
            .port
            .as_ref()
            .map(|p| p.number)
            .filter(|p| *p != 0)
            .unwrap_or(port);
        waypoint_cluster(ctx, own, &outbound_cluster(dest_port, &dest.subset, &host))
    };
    match routes {
        [one] => TcpCluster::Cluster(cluster_of(one)),
        many => TcpCluster::WeightedClusters(WeightedCluster {
            clusters: many
                .iter()
                .filter(|d| d.weight > 0)
                .map(|d| ClusterWeight {
                    name: cluster_of(d),
                    weight: d.weight as u32,
                    ..Default::default()
                })
                .collect(),
        }),
    }
}

/// A route's outbound cluster as the waypoint names it: a served service's becomes its
/// `inbound-vip` cluster (istiod's `getWaypointDestinationCluster`), any other stays outbound.
fn waypoint_cluster(ctx: &PushContext, own: &BTreeSet<&str>, cluster: &str) -> String {
    match parse_service_cluster(cluster) {
        Some((port, subset, host)) if own.contains(host) && cluster.starts_with("outbound|") => {
            let svc = ctx.registry.services.get(host).map(AsRef::as_ref);
            inbound_vip_cluster(port, &vip_subset(svc, port, subset), host)
        }
        _ => cluster.to_string(),
    }
}

/// The routes of a served service's port: the HTTP routes of its VirtualServices (matches on
/// source labels dropped, as ambient cannot tell them), merged in order, else one route to its
/// own `inbound-vip` cluster.
fn route_config(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    cluster: &str,
    own: &BTreeSet<&str>,
) -> RouteConfiguration {
    let applies = |m: &crate::config::networking::HttpMatchRequest| {
        m.source_labels.is_empty()
            && match_applies_to_sidecar(scope, port, m.port, &Default::default(), &m.gateways, "")
    };
    let mut routes = Vec::new();
    for vs in ctx.virtual_services_for_waypoint(&scope.namespace, svc) {
        if vs.spec.http.is_empty() {
            continue;
        }
        routes.extend(crate::xds::generate::shared::route::virtual_service_routes(
            ctx,
            scope,
            (&vs.config, &vs.origin),
            &vs.spec.http,
            port,
            false,
            &applies,
        ));
    }
    for route in &mut routes {
        rename_clusters(route, &|c| waypoint_cluster(ctx, own, c));
    }
    if routes.is_empty() {
        routes.push(crate::xds::generate::sidecar::listener::default_route(
            cluster,
        ));
    }
    RouteConfiguration {
        name: cluster.into(),
        virtual_hosts: vec![VirtualHost {
            name: format!("inbound|http|{port}"),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        validate_clusters: Some(BoolValue { value: false }),
        ..Default::default()
    }
}

/// Renames every cluster a route sends to (its destination, weighted destinations, mirrors).
fn rename_clusters(route: &mut Route, rename: &dyn Fn(&str) -> String) {
    let Some(Action::Route(action)) = route.action.as_mut() else {
        return;
    };
    match action.cluster_specifier.as_mut() {
        Some(ClusterSpecifier::Cluster(c)) => *c = rename(c),
        Some(ClusterSpecifier::WeightedClusters(w)) => {
            for c in &mut w.clusters {
                c.name = rename(&c.name);
            }
        }
        _ => {}
    }
    for m in &mut action.request_mirror_policies {
        m.cluster = rename(&m.cluster);
    }
}
