//! Sidecar outbound listeners, laid out as istiod lays them out so that the same traffic takes the
//! same path:
//! - HTTP services share `0.0.0.0_<port>` (one route configuration per port, told apart by Host);
//! - TCP, TLS and protocol-sniffed services with a VIP get their own `<vip>_<port>` listener, which
//!   Envoy's original-destination hand-off picks before the wildcard one;
//! - ports without a declared protocol are sniffed: plaintext HTTP/1.1 and h2c go through the HTTP
//!   connection manager (so routing rules apply), everything else is proxied as TCP;
//! - TLS services without a VIP are told apart by SNI;
//! - whatever matches no chain falls through to the passthrough (ALLOW_ANY) or blackhole
//!   (REGISTRY_ONLY) chain, so egress to hosts the mesh does not know keeps working on every port.

use super::listener::{PLAINTEXT_HTTP_ALPN, cidr, network_filter};
use crate::config::networking::Resolution;
use crate::config::networking::{ClientTlsMode, RouteDestination};
use crate::model::{Protocol, Service, resolve_host};
use crate::xds::context::{PushContext, ScopeView, VsEntry};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::cluster::{BLACKHOLE, PASSTHROUGH, socket};
use crate::xds::generate::shared::network::{Destination, RouteSource, hcm_filter, tcp_proxy};
use crate::xds::generate::shared::util::{match_applies_to_sidecar, outbound_cluster};
use crate::xds::generate::typed_listener::{Chain, NetworkFilter, TypedListener};
use crate::xds::resource::Finding;
use envoy_types::pb::envoy::config::core::v3::{
    SubstitutionFormatString, TrafficDirection, data_source, substitution_format_string,
};
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChainMatch, Listener, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::common::set_filter_state::v3::{
    FilterStateValue, filter_state_value,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
use envoy_types::pb::google::protobuf::BoolValue;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// ALPN a sniffed HTTP chain offers on its mTLS upstream connections: tells the server's sidecar
/// that HTTP follows (istiod's clients offer the same), with plain `http/1.1` for servers outside
/// the mesh.
const MTLS_HTTP_ALPN: &str = "istio-http/1.1,istio,http/1.1";
const PASSTHROUGH_CHAIN: &str = "PassthroughFilterChain";

/// One listener being assembled: its filter chains in order, the chain that takes everything the
/// others do not match, and the listener filters the matches need.
#[derive(Default)]
struct Entry {
    chains: Vec<Chain>,
    default: Option<Chain>,
    matches: HashSet<String>,
    tls_inspector: bool,
    http_inspector: bool,
    /// Where connections that match no chain go: a TCP proxy to passthrough or blackhole.
    fallback: NetworkFilter,
    /// A TCP chain lost its connections to an earlier one (istiod's
    /// `pilot_conflict_outbound_listener_tcp_over_current_tcp`).
    tcp_conflict: bool,
}

impl Entry {
    fn with_fallback(fallback: &NetworkFilter) -> Entry {
        Entry {
            fallback: fallback.clone(),
            ..Default::default()
        }
    }

    /// Adds `chain`; a chain that matches exactly what an earlier one matches would make Envoy
    /// reject the whole listener, so the first keeps it (as istiod does) and the conflict is logged.
    fn add(&mut self, listener: &str, chain: Chain) {
        let Some(m) = chain.filter_chain_match.as_ref() else {
            if self.default.is_none() {
                self.default = Some(chain);
            } else {
                self.tcp_conflict |= chain.proxies_tcp();
                tracing::debug!(listener, chain = %chain.name,
                    "two services take every connection on this listener; the first keeps it");
            }
            return;
        };
        if !self.matches.insert(format!("{m:?}")) {
            self.tcp_conflict |= chain.proxies_tcp();
            tracing::debug!(listener, chain = %chain.name,
                "two filter chains match the same connections; the first keeps them");
            return;
        }
        self.tls_inspector |= !m.server_names.is_empty() || m.transport_protocol == "tls";
        self.http_inspector |= !m.application_protocols.is_empty();
        self.chains.push(chain);
    }

    fn into_listener(self, name: &str, bind: &str, port: u32, bind_to_port: bool) -> TypedListener {
        let fallback = if self.default.is_some() {
            None
        } else {
            Some(Chain {
                name: PASSTHROUGH_CHAIN.into(),
                filter_chain_match: Some(FilterChainMatch::default()),
                filters: vec![self.fallback],
                ..Default::default()
            })
        };
        let mut chains = self.chains;
        let mut default = self.default.or(fallback);
        if chains.is_empty() {
            chains.extend(default.take());
        }
        let mut listener_filters = Vec::new();
        if self.tls_inspector {
            listener_filters.push(listener_filter_named(
                "envoy.filters.listener.tls_inspector",
                any(&envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector::default()),
            ));
        }
        if self.http_inspector {
            listener_filters.push(listener_filter_named(
                "envoy.filters.listener.http_inspector",
                any(&envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector::default()),
            ));
        }
        let listener = Listener {
            name: name.into(),
            address: Some(socket(bind, port)),
            listener_filters,
            // As istiod: protocol detection waits for the client's first bytes without a deadline
            // (MeshConfig protocolDetectionTimeout 0s); server-first protocols must be declared.
            listener_filters_timeout: Some(crate::xds::generate::shared::util::duration(
                std::time::Duration::ZERO,
            )),
            continue_on_listener_filters_timeout: true,
            traffic_direction: TrafficDirection::Outbound as i32,
            bind_to_port: Some(BoolValue {
                value: bind_to_port,
            }),
            ..Default::default()
        };
        TypedListener::new(listener, chains).with_default_chain(default)
    }
}

fn listener_filter_named(
    name: &str,
    config: envoy_types::pb::google::protobuf::Any,
) -> ListenerFilter {
    ListenerFilter {
        name: name.into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// The route configuration a sniffed service with a VIP gets to itself: `<hostname>:<port>`.
pub fn sniffed_route_name(hostname: &str, port: u32) -> String {
    format!("{hostname}:{port}")
}

/// The addresses of `svc` a listener can bind (plain IPs) and those only a filter chain can match
/// (CIDR ranges); auto-allocated ones only for a proxy whose DNS proxy hands them out.
fn addresses(svc: &Service, auto_allocated: bool) -> (Vec<&str>, Vec<&str>) {
    let mut ips = Vec::new();
    let mut ranges = Vec::new();
    for a in svc.addresses_for(auto_allocated) {
        if a.parse::<std::net::IpAddr>().is_ok() {
            ips.push(a.as_str());
        } else if a.parse::<ipnet::IpNet>().is_ok() {
            ranges.push(a.as_str());
        }
    }
    (ips, ranges)
}

fn prefix_match(ranges: &[&str]) -> Option<FilterChainMatch> {
    if ranges.is_empty() {
        return None;
    }
    let mut sorted: Vec<&str> = ranges.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    Some(FilterChainMatch {
        prefix_ranges: sorted.iter().filter_map(|a| cidr(a)).collect(),
        ..Default::default()
    })
}

/// Every outbound listener of a sidecar: per port, the wildcard listener and the VIP listeners.
/// `allow_any`: unmatched connections pass through (else they are dropped).
pub fn listeners(ctx: &PushContext, scope: &ScopeView, allow_any: bool) -> Vec<Typed> {
    let wildcard = if scope.interception_none {
        "127.0.0.1"
    } else {
        "0.0.0.0"
    };
    // With INTERCEPTION_MODE NONE the passthrough cluster would dial the listener itself.
    let fallback = super::listener::catch_all_filter(
        scope,
        if allow_any && !scope.interception_none {
            PASSTHROUGH
        } else {
            BLACKHOLE
        },
    );
    let ports: std::collections::BTreeSet<u32> = scope
        .services
        .iter()
        .flat_map(|s| s.ports.iter().map(|p| p.number))
        .collect();
    let mut by_port: BTreeMap<u32, Vec<(&Arc<Service>, Protocol)>> = BTreeMap::new();
    for port in ports {
        for svc in scope.services_on_port(port) {
            if let Some(p) = svc.port(port) {
                by_port.entry(port).or_default().push((svc, p.protocol));
            }
        }
    }
    let mut out = Vec::new();
    for (port, services) in by_port {
        let wildcard_name = format!("{wildcard}_{port}");
        let mut shared = Entry::with_fallback(&fallback);
        // Keyed by VIP; a BTreeMap keeps the listeners in a stable order.
        let mut by_vip: BTreeMap<&str, Entry> = BTreeMap::new();
        let mut http_on_wildcard = false;
        for (svc, protocol) in services {
            let (mut ips, ranges) = addresses(svc, scope.auto_allocated_vips);
            if !scope.interception_none && !protocol.is_http() {
                match headless_binds(ctx, svc, port, &ips, &ranges) {
                    Headless::No => {}
                    Headless::Endpoints(endpoints) => ips = endpoints,
                    // A Kubernetes headless Service without endpoints: nothing to reach.
                    Headless::Nothing => continue,
                }
            }
            let own_listener = !scope.interception_none && !ips.is_empty();
            match protocol {
                p if p.is_http() => http_on_wildcard = true,
                Protocol::Unsupported if own_listener => {
                    for ip in ips {
                        let entry = by_vip
                            .entry(ip)
                            .or_insert_with(|| Entry::with_fallback(&fallback));
                        let name = format!("{ip}_{port}");
                        entry.add(&name, sniffed_http_chain(ctx, scope, svc, port, &name));
                        for chain in tcp_chains(ctx, scope, svc, port, None) {
                            entry.add(&name, chain);
                        }
                    }
                }
                Protocol::Unsupported | Protocol::Tcp => {
                    http_on_wildcard |= protocol == Protocol::Unsupported;
                    if own_listener {
                        for ip in ips {
                            let name = format!("{ip}_{port}");
                            let entry = by_vip
                                .entry(ip)
                                .or_insert_with(|| Entry::with_fallback(&fallback));
                            for chain in tcp_chains(ctx, scope, svc, port, None) {
                                entry.add(&name, chain);
                            }
                        }
                    } else {
                        for chain in tcp_chains(ctx, scope, svc, port, prefix_match(&ranges)) {
                            shared.add(&wildcard_name, chain);
                        }
                    }
                }
                _ => {
                    // TLS and HTTPS: by VIP where there is one, else by SNI.
                    if own_listener {
                        for ip in ips {
                            let name = format!("{ip}_{port}");
                            let entry = by_vip
                                .entry(ip)
                                .or_insert_with(|| Entry::with_fallback(&fallback));
                            for chain in tls_chains(ctx, scope, svc, port, None, false) {
                                entry.add(&name, chain);
                            }
                        }
                    } else {
                        let by_sni = ranges.is_empty() || scope.interception_none;
                        for chain in
                            tls_chains(ctx, scope, svc, port, prefix_match(&ranges), by_sni)
                        {
                            shared.add(&wildcard_name, chain);
                        }
                    }
                }
            }
        }
        if http_on_wildcard {
            let mut chain = Chain {
                name: format!("{wildcard_name}-http"),
                filters: vec![hcm_filter(
                    ctx,
                    scope,
                    Class::outbound(scope),
                    &format!("outbound_{wildcard_name}"),
                    RouteSource::Rds(port.to_string()),
                    Vec::new(),
                )],
                ..Default::default()
            };
            // With traffic captured, the port is sniffed: non-HTTP traffic to a host the mesh does
            // not know takes the fallback instead of failing in the HTTP codec (as istiod).
            if !scope.interception_none {
                chain.filter_chain_match = Some(plaintext_http_match());
            }
            shared.add(&wildcard_name, chain);
        }
        if !shared.chains.is_empty() || shared.default.is_some() {
            let conflict = shared.tcp_conflict;
            let listener =
                shared.into_listener(&wildcard_name, wildcard, port, scope.interception_none);
            out.push(listener_resource(scope, listener, conflict));
        }
        for (ip, entry) in by_vip {
            let conflict = entry.tcp_conflict;
            let listener = entry.into_listener(&format!("{ip}_{port}"), ip, port, false);
            out.push(listener_resource(scope, listener, conflict));
        }
    }
    out
}

/// How a headless service's non-HTTP port is listened for (istiod's statefulset support).
enum Headless<'a> {
    /// Not headless: by VIP, or on the port's wildcard listener.
    No,
    /// A listener per endpoint (`<podIP>_<port>`), so each pod is reached as itself: a
    /// StatefulSet's `kafka-0.kafka.ns.svc` resolves to that pod's IP.
    Endpoints(Vec<&'a str>),
    /// No listener at all: a Kubernetes headless Service without endpoints.
    Nothing,
}

/// istiod's rule for a service without VIPs whose resolution is NONE (a headless Service, a
/// passthrough ServiceEntry) on a TCP, TLS or unnamed port: a listener per endpoint IP. A
/// ServiceEntry without endpoints or selector stays on the wildcard listener; a Kubernetes
/// Service without endpoints gets none (traffic could never work, and a wildcard chain would
/// fight the others on the port when it scales down).
fn headless_binds<'a>(
    ctx: &'a PushContext,
    svc: &Service,
    port: u32,
    ips: &[&str],
    ranges: &[&str],
) -> Headless<'a> {
    if svc.resolution != Resolution::NONE || !ips.is_empty() || !ranges.is_empty() {
        return Headless::No;
    }
    let endpoints: Vec<&str> = ctx
        .registry
        .endpoints(&svc.hostname, port)
        .iter()
        .map(|e| e.address.as_str())
        .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !endpoints.is_empty() {
        return Headless::Endpoints(endpoints);
    }
    if svc.origin().0 == "Service" {
        Headless::Nothing
    } else {
        Headless::No
    }
}

/// A listener as served; `tcp_conflict` when a TCP service on it lost its connections to another.
fn listener_resource(scope: &ScopeView, l: TypedListener, tcp_conflict: bool) -> Typed {
    let typed = Typed::new(l.name().to_string(), Class::outbound(scope), l);
    if tcp_conflict {
        typed.found(Finding::OutboundTcpConflict)
    } else {
        typed
    }
}

fn plaintext_http_match() -> FilterChainMatch {
    FilterChainMatch {
        transport_protocol: "raw_buffer".into(),
        application_protocols: PLAINTEXT_HTTP_ALPN.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

/// The HTTP half of a sniffed service with a VIP: its own route configuration, and on mesh mTLS
/// an ALPN that tells the server's sidecar HTTP follows.
fn sniffed_http_chain(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    listener: &str,
) -> Chain {
    let mut filters = Vec::new();
    if !originates_own_tls(ctx, scope, svc) {
        filters.push(network_filter(
            "envoy.filters.network.set_filter_state",
            &envoy_types::pb::envoy::extensions::filters::network::set_filter_state::v3::Config {
                on_new_connection: vec![FilterStateValue {
                    key: Some(filter_state_value::Key::ObjectKey(
                        "envoy.network.application_protocols".into(),
                    )),
                    value: Some(filter_state_value::Value::FormatString(
                        SubstitutionFormatString {
                            format: Some(substitution_format_string::Format::TextFormatSource(
                                envoy_types::pb::envoy::config::core::v3::DataSource {
                                    specifier: Some(data_source::Specifier::InlineString(
                                        MTLS_HTTP_ALPN.into(),
                                    )),
                                    ..Default::default()
                                },
                            )),
                            ..Default::default()
                        },
                    )),
                    shared_with_upstream: filter_state_value::SharedWithUpstream::Once as i32,
                    ..Default::default()
                }],
                ..Default::default()
            },
        ));
    }
    filters.push(hcm_filter(
        ctx,
        scope,
        Class::outbound(scope),
        &format!("outbound_{listener}"),
        RouteSource::Rds(sniffed_route_name(&svc.hostname, port)),
        Vec::new(),
    ));
    Chain {
        name: format!("{listener}-http"),
        filter_chain_match: Some(plaintext_http_match()),
        filters,
        ..Default::default()
    }
}

/// The service's DestinationRule originates TLS of its own (SIMPLE or MUTUAL): the server is not
/// a mesh sidecar, so its ALPN must stay the one the rule gives.
fn originates_own_tls(ctx: &PushContext, scope: &ScopeView, svc: &Service) -> bool {
    ctx.destination_rule_for(&scope.namespace, &scope.labels, svc)
        .and_then(|d| d.spec.traffic_policy.as_ref())
        .and_then(|p| p.tls.as_ref())
        .is_some_and(|t| !matches!(t.mode, ClientTlsMode::DISABLE | ClientTlsMode::ISTIO_MUTUAL))
}

fn vs_for<'a>(ctx: &'a PushContext, scope: &ScopeView, svc: &Service) -> Option<&'a VsEntry> {
    ctx.virtual_service_for(&scope.namespace, &svc.hostname)
        .filter(|vs| vs.spec.gateways.is_empty() || vs.spec.gateways.iter().any(|g| g == "mesh"))
}

fn with_ranges(base: Option<FilterChainMatch>, ranges: &[String]) -> Option<FilterChainMatch> {
    if ranges.is_empty() {
        return base;
    }
    let refs: Vec<&str> = ranges.iter().map(String::as_str).collect();
    let mut m = base.unwrap_or_default();
    m.prefix_ranges = prefix_match(&refs)
        .map(|p| p.prefix_ranges)
        .unwrap_or_default();
    Some(m)
}

/// The TCP chains of a service: its VirtualService's `tcp` routes that apply here, in order, then
/// (unless a route without conditions took everything) a chain straight to the service.
fn tcp_chains(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    base: Option<FilterChainMatch>,
) -> Vec<Chain> {
    let mut out = Vec::new();
    if let Some(vs) = vs_for(ctx, scope, svc) {
        let vs_ns = vs.config.metadata.namespace.as_str();
        for (i, tcp) in vs.spec.tcp.iter().enumerate() {
            let name = format!("{}.{vs_ns}.tcp.{i}", vs.config.metadata.name);
            let Some(filter) = l4_route_filter(ctx, scope, vs_ns, &tcp.route, port, &name) else {
                continue;
            };
            if tcp.matches.is_empty() {
                out.push(chain(&name, base.clone(), filter));
                return out;
            }
            let mut subnets = Vec::new();
            for m in &tcp.matches {
                if !match_applies_to_sidecar(
                    scope,
                    port,
                    m.port,
                    &m.source_labels,
                    &m.gateways,
                    &m.source_namespace,
                ) {
                    continue;
                }
                if m.destination_subnets.is_empty() {
                    out.push(chain(&name, base.clone(), filter));
                    return out;
                }
                subnets.extend(m.destination_subnets.iter().cloned());
            }
            if !subnets.is_empty() {
                out.push(chain(&name, with_ranges(base.clone(), &subnets), filter));
            }
        }
    }
    let cluster = outbound_cluster(port, "", &svc.hostname);
    out.push(chain(
        &cluster,
        base,
        service_tcp_filter(ctx, scope, svc, port),
    ));
    out
}

/// The TLS chains of a service: its VirtualService's `tls` routes that apply here (by SNI), else a
/// chain straight to the service, matched by SNI when `by_sni` (no VIP to tell it apart).
fn tls_chains(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    base: Option<FilterChainMatch>,
    by_sni: bool,
) -> Vec<Chain> {
    let mut out = Vec::new();
    let mut handled = HashSet::new();
    if let Some(vs) = vs_for(ctx, scope, svc) {
        let vs_ns = vs.config.metadata.namespace.as_str();
        for (i, tls) in vs.spec.tls.iter().enumerate() {
            let name = format!("{}.{vs_ns}.tls.{i}", vs.config.metadata.name);
            let Some(filter) = l4_route_filter(ctx, scope, vs_ns, &tls.route, port, &name) else {
                continue;
            };
            for m in &tls.matches {
                if !match_applies_to_sidecar(
                    scope,
                    port,
                    m.port,
                    &m.source_labels,
                    &m.gateways,
                    &m.source_namespace,
                ) {
                    continue;
                }
                let mut sni: Vec<String> = m.sni_hosts.clone();
                sni.sort();
                if !handled.insert((sni.clone(), m.destination_subnets.clone())) {
                    continue;
                }
                let mut fcm = with_ranges(base.clone(), &m.destination_subnets).unwrap_or_default();
                if !sni.iter().any(|h| h == "*") {
                    fcm.server_names = sni;
                }
                out.push(chain(
                    &name,
                    Some(fcm).filter(|m| *m != FilterChainMatch::default()),
                    filter.clone(),
                ));
            }
        }
    }
    if out.is_empty() {
        let cluster = outbound_cluster(port, "", &svc.hostname);
        let mut fcm = base.unwrap_or_default();
        if by_sni && svc.hostname != "*" {
            fcm.server_names = vec![svc.hostname.clone()];
        }
        out.push(chain(
            &cluster,
            Some(fcm).filter(|m| *m != FilterChainMatch::default()),
            service_tcp_filter(ctx, scope, svc, port),
        ));
    }
    out
}

/// A TCP proxy straight to the service, shaped by its DestinationRule as istiod shapes it.
fn service_tcp_filter(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
) -> NetworkFilter {
    let cluster = outbound_cluster(port, "", &svc.hostname);
    tcp_proxy(
        &cluster,
        tcp_proxy::ClusterSpecifier::Cluster(cluster.clone()),
        Some(Destination {
            ctx,
            scope,
            service: svc,
            port,
        }),
    )
}

fn chain(name: &str, filter_chain_match: Option<FilterChainMatch>, filter: NetworkFilter) -> Chain {
    Chain {
        name: name.into(),
        filter_chain_match,
        filters: vec![filter],
        ..Default::default()
    }
}

/// A TCP proxy for the destinations of an L4 (`tcp` or `tls`) route: one cluster, or weighted
/// clusters when the route splits traffic. A destination without a port takes `port` when its
/// service has it, else the service's only port.
pub(in crate::xds::generate) fn l4_route_filter(
    ctx: &PushContext,
    scope: &ScopeView,
    vs_ns: &str,
    route: &[RouteDestination],
    port: u32,
    stat_prefix: &str,
) -> Option<NetworkFilter> {
    let mut clusters: Vec<(String, u32)> = Vec::new();
    let mut single = None;
    for rd in route {
        let Some(d) = rd.destination.as_ref() else {
            continue;
        };
        let host = resolve_host(&d.host, vs_ns, &ctx.mesh.domain_suffix);
        let dest_port = match d.port.as_ref().map(|p| p.number).filter(|p| *p != 0) {
            Some(p) => p,
            None => match ctx.registry.services.get(&host) {
                Some(s) if s.port(port).is_some() => port,
                Some(s) if s.ports.len() == 1 => s.ports[0].number,
                _ => port,
            },
        };
        if route.len() == 1 {
            single = ctx.registry.services.get(&host).map(|svc| (svc, dest_port));
        }
        let weight = if route.len() == 1 {
            100
        } else {
            rd.weight.max(0) as u32
        };
        clusters.push((outbound_cluster(dest_port, &d.subset, &host), weight));
    }
    clusters.retain(|(_, w)| *w > 0);
    let specifier = match clusters.as_slice() {
        [] => return None,
        [(one, _)] => tcp_proxy::ClusterSpecifier::Cluster(one.clone()),
        many => tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster {
            clusters: many
                .iter()
                .map(
                    |(name, weight)| tcp_proxy::weighted_cluster::ClusterWeight {
                        name: name.clone(),
                        weight: *weight,
                        ..Default::default()
                    },
                )
                .collect(),
        }),
    };
    // As istiod: one destination is shaped by its DestinationRule.
    let destination = single.map(|(service, port)| Destination {
        ctx,
        scope,
        service,
        port,
    });
    Some(tcp_proxy(stat_prefix, specifier, destination))
}
