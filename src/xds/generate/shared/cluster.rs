//! CDS: one cluster per service port, plus one per DestinationRule subset, with the rule's policies.

use super::upstream_tls::{auto_mtls_sockets, auto_sni_and_san, tls_socket};
use super::util::{ads, duration, outbound_cluster};
use crate::config::networking::{
    ClientTlsMode, ClientTlsSettings, ConnectionPoolSettings, DestinationRule,
    LoadBalancerSettings, OutlierDetection, Resolution, SimpleLb, Subset, TrafficPolicy,
};
use crate::model::{Protocol, Service, ServicePort};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Built, Class, Typed};
use envoy_types::pb::envoy::config::cluster::v3::circuit_breakers::Thresholds;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, CommonLbConfig, DiscoveryType, DnsLookupFamily, EdsClusterConfig,
    LbConfig, LbPolicy, MaglevLbConfig, RingHashLbConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, OutlierDetection as EnvoyOutlier, UpstreamConnectionOptions,
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, Http1ProtocolOptions, Http2ProtocolOptions, HttpProtocolOptions as CommonHttpOptions,
    SocketAddress, TcpKeepalive, TransportSocket, UpstreamHttpProtocolOptions, address,
    socket_address, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::{
    ExplicitHttpConfig, UpstreamProtocolOptions, UseDownstreamHttpConfig,
    explicit_http_config::ProtocolConfig,
};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::{UInt32Value, UInt64Value};

pub const BLACKHOLE: &str = "BlackHoleCluster";
pub const PASSTHROUGH: &str = "PassthroughCluster";
pub const INBOUND_PASSTHROUGH: &str = "InboundPassthroughCluster";
const UPSTREAM_HTTP_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// The four policy parts after Istio's merge order: top level, port level, subset, subset port level.
#[derive(Default, Clone)]
pub struct EffectivePolicy {
    pub load_balancer: Option<LoadBalancerSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub outlier_detection: Option<OutlierDetection>,
    pub tls: Option<ClientTlsSettings>,
    /// Top level and subset only (a port-level policy has neither).
    pub proxy_protocol: Option<crate::config::networking::ProxyProtocol>,
    pub retry_budget: Option<crate::config::networking::RetryBudget>,
    pub tunnel: Option<crate::config::networking::TunnelSettings>,
}

impl EffectivePolicy {
    fn overlay(&mut self, tp: &TrafficPolicy, port: u32) {
        if tp.proxy_protocol.is_some() {
            self.proxy_protocol.clone_from(&tp.proxy_protocol);
        }
        if tp.retry_budget.is_some() {
            self.retry_budget.clone_from(&tp.retry_budget);
        }
        if tp.tunnel.is_some() {
            self.tunnel.clone_from(&tp.tunnel);
        }
        self.take(
            tp.load_balancer.clone(),
            tp.connection_pool.clone(),
            tp.outlier_detection.clone(),
            tp.tls.clone(),
        );
        if let Some(pl) = tp
            .port_level_settings
            .iter()
            .find(|p| p.port.as_ref().is_some_and(|p| p.number == port))
        {
            self.take(
                pl.load_balancer.clone(),
                pl.connection_pool.clone(),
                pl.outlier_detection.clone(),
                pl.tls.clone(),
            );
        }
    }

    fn take(
        &mut self,
        lb: Option<LoadBalancerSettings>,
        pool: Option<ConnectionPoolSettings>,
        outlier: Option<OutlierDetection>,
        tls: Option<ClientTlsSettings>,
    ) {
        if lb.is_some() {
            self.load_balancer = lb;
        }
        if pool.is_some() {
            self.connection_pool = pool;
        }
        if outlier.is_some() {
            self.outlier_detection = outlier;
        }
        if tls.is_some() {
            self.tls = tls;
        }
    }

    pub fn resolve(
        dr: Option<&DestinationRule>,
        subset: Option<&Subset>,
        port: u32,
    ) -> EffectivePolicy {
        let mut p = EffectivePolicy::default();
        if let Some(tp) = dr.and_then(|d| d.traffic_policy.as_ref()) {
            p.overlay(tp, port);
        }
        if let Some(tp) = subset.and_then(|s| s.traffic_policy.as_ref()) {
            p.overlay(tp, port);
        }
        p
    }
}

pub fn clusters(ctx: &PushContext, scope: &ScopeView, with_builtins: bool) -> Vec<Typed> {
    let mut out = Vec::new();
    for svc in &scope.services {
        out.extend(service_clusters(ctx, scope, svc));
    }
    if with_builtins {
        out.push(blackhole(ctx, scope));
        for name in [PASSTHROUGH, INBOUND_PASSTHROUGH] {
            let mut c = Cluster {
                name: name.into(),
                cluster_discovery_type: Some(ClusterDiscoveryType::Type(
                    DiscoveryType::OriginalDst as i32,
                )),
                lb_policy: LbPolicy::ClusterProvided as i32,
                connect_timeout: Some(duration(ctx.mesh.connect_timeout)),
                ..Default::default()
            };
            if name == INBOUND_PASSTHROUGH {
                // To the workload's own address from 127.0.0.6, which the capture rules leave
                // alone (from any other source the connection would be captured again).
                c.upstream_bind_config = Some(inbound_bind(scope.ipv6_only));
            }
            out.push(Typed::new(name, Class::outbound(scope), c));
        }
    }
    out
}

/// The outbound clusters of every port of `svc`, and of each subset its DestinationRule names.
pub(in crate::xds::generate) fn service_clusters(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
) -> Vec<Typed> {
    let dr = ctx
        .destination_rule_for(&scope.namespace, &scope.labels, svc)
        .map(|d| &d.spec);
    let mut out = Vec::new();
    for port in &svc.ports {
        out.push(build(ctx, svc, port, dr, None, scope.mtls, scope));
        for subset in dr.map(|d| d.subsets.as_slice()).unwrap_or_default() {
            out.push(build(ctx, svc, port, dr, Some(subset), scope.mtls, scope));
        }
    }
    out
}

/// istiod's source for connections to the workload: 127.0.0.6 (`::6` for IPv6-only proxies).
pub(in crate::xds::generate) fn inbound_bind(
    ipv6_only: bool,
) -> envoy_types::pb::envoy::config::core::v3::BindConfig {
    use envoy_types::pb::envoy::config::core::v3::{BindConfig, SocketAddress, socket_address};
    BindConfig {
        source_address: Some(SocketAddress {
            address: if ipv6_only { "::6" } else { "127.0.0.6" }.into(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(0)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The outbound cluster of `svc`'s port `port` (and `subset`), as `clusters` builds it.
pub(in crate::xds::generate) fn outbound(
    ctx: &PushContext,
    scope: &ScopeView,
    svc: &Service,
    port: u32,
    subset: Option<&str>,
) -> Option<Typed> {
    let sp = svc.port(port)?;
    let dr = ctx
        .destination_rule_for(&scope.namespace, &scope.labels, svc)
        .map(|d| &d.spec);
    let subset = match subset {
        Some(name) => Some(dr?.subsets.iter().find(|s| s.name == name)?),
        None => None,
    };
    Some(build(ctx, svc, sp, dr, subset, scope.mtls, scope))
}

/// One cluster by name, for clients that ask for clusters by name (proxyless gRPC).
pub fn cluster_by_name(ctx: &PushContext, scope: &ScopeView, name: &str) -> Option<Typed> {
    let (port, subset, host) = super::util::parse_service_cluster(name)?;
    let svc = scope.services.iter().find(|s| s.hostname == host)?;
    let sp = svc.port(port)?;
    let dr = ctx
        .destination_rule_for(&scope.namespace, &scope.labels, svc)
        .map(|d| &d.spec);
    let subset = if subset.is_empty() {
        None
    } else {
        Some(dr?.subsets.iter().find(|s| s.name == subset)?)
    };
    let built = build(ctx, svc, sp, dr, subset, false, scope);
    let tls = EffectivePolicy::resolve(dr, subset, port).tls;
    let grpc_tls = match tls {
        // As istiod's grpcgen: the mesh's mTLS from the client's certificate provider, pinned
        // to the servers' identities (the DestinationRule's `subjectAltNames` when it names some).
        Some(t) if t.mode == ClientTlsMode::ISTIO_MUTUAL => {
            let sans = if t.subject_alt_names.is_empty() {
                identities(ctx, svc, sp)
            } else {
                t.subject_alt_names
            };
            Some(super::tls::grpc_mesh_tls(&sans))
        }
        _ => None,
    };
    Some(for_grpc(built, grpc_tls))
}

/// gRPC's xDS client implements a subset of Envoy's cluster: round robin or ring hash, no Envoy
/// upstream protocol options, TLS only from certificate providers. Anything else would be NACKed
/// or silently differ: as istiod, only ISTIO_MUTUAL originates TLS for gRPC (`tls`), SIMPLE and
/// MUTUAL do not (gRPC cannot take their SDS or file secrets; docs/xds.md).
fn for_grpc(
    mut typed: Typed,
    tls: Option<envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::CommonTlsContext>,
) -> Typed {
    let Built::Cluster(c) = &mut typed.built else {
        return typed;
    };
    if c.lb_policy != LbPolicy::RingHash as i32 {
        c.lb_policy = LbPolicy::RoundRobin as i32;
        c.lb_config = None;
    }
    c.typed_extension_protocol_options.clear();
    c.upstream_connection_options = None;
    c.transport_socket_matches.clear();
    c.transport_socket = tls.map(|common| TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &UpstreamTlsContext {
                common_tls_context: Some(common),
                ..Default::default()
            },
        ))),
    });
    typed
}

/// `BlackHoleCluster`: no endpoints, so what is sent to it goes nowhere.
pub(in crate::xds::generate) fn blackhole(ctx: &PushContext, scope: &ScopeView) -> Typed {
    Typed::new(
        BLACKHOLE,
        Class::outbound(scope),
        Cluster {
            name: BLACKHOLE.into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
            connect_timeout: Some(duration(ctx.mesh.connect_timeout)),
            ..Default::default()
        },
    )
}

/// istiod's `BestEffortInferServiceMTLSMode` saying DISABLE: automatic mTLS sends plain text to
/// the service. A passthrough service (headless, or a DestinationRule's PASSTHROUGH load
/// balancer) with no endpoint, or any endpoint labelled `security.istio.io/tlsMode: disabled`;
/// else the PeerAuthentication of the service's namespace, or the mesh's, being DISABLE.
fn auto_mtls_disabled(ctx: &PushContext, svc: &Service, port: u32, passthrough_lb: bool) -> bool {
    use crate::config::security::MtlsMode;
    use crate::model::peer_auth;
    if svc.resolution == Resolution::NONE || passthrough_lb {
        let endpoints = ctx.registry.endpoints(&svc.hostname, port);
        if endpoints.is_empty() {
            return true;
        }
        if endpoints.iter().any(|e| {
            e.labels
                .get("security.istio.io/tlsMode")
                .is_some_and(|m| m == "disabled")
        }) {
            return true;
        }
    }
    let root = &ctx.mesh.root_namespace;
    let policies = peer_auth::applicable(&ctx.snapshot, root, &svc.namespace);
    let levels = peer_auth::levels(&policies, root, &svc.namespace, &Default::default());
    let namespace = peer_auth::mode(levels.namespace);
    let effective = if namespace == MtlsMode::UNSET {
        peer_auth::mode(levels.mesh)
    } else {
        namespace
    };
    effective == MtlsMode::DISABLE
}

pub(in crate::xds::generate) fn build(
    ctx: &PushContext,
    svc: &Service,
    port: &ServicePort,
    dr: Option<&DestinationRule>,
    subset: Option<&Subset>,
    auto_mtls: bool,
    scope: &ScopeView,
) -> Typed {
    let ipv6_only = scope.ipv6_only;
    let name = outbound_cluster(
        port.number,
        subset.map_or("", |s| s.name.as_str()),
        &svc.hostname,
    );
    let policy = EffectivePolicy::resolve(dr, subset, port.number);
    let mut c = Cluster {
        name: name.clone(),
        connect_timeout: Some(duration(
            policy
                .connection_pool
                .as_ref()
                .and_then(|p| p.tcp.as_ref())
                .and_then(|t| t.connect_timeout)
                .map_or(ctx.mesh.connect_timeout, |d| d.as_std()),
        )),
        ..Default::default()
    };
    let passthrough_lb =
        policy.load_balancer.as_ref().and_then(|l| l.simple) == Some(SimpleLb::PASSTHROUGH);
    match svc.resolution {
        _ if passthrough_lb => original_dst(&mut c),
        // No dynamic forward proxy yet: DYNAMIC_DNS hosts go to the address the client resolved,
        // as NONE does (listed as not honoured in validation::unhonoured).
        Resolution::NONE | Resolution::DYNAMIC_DNS => original_dst(&mut c),
        Resolution::STATIC => {
            c.cluster_discovery_type = Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32));
            c.eds_cluster_config = Some(EdsClusterConfig {
                eds_config: Some(ads()),
                service_name: name.clone(),
            });
        }
        Resolution::DNS | Resolution::DNS_ROUND_ROBIN => {
            let kind = if svc.resolution == Resolution::DNS {
                DiscoveryType::StrictDns
            } else {
                DiscoveryType::LogicalDns
            };
            c.cluster_discovery_type = Some(ClusterDiscoveryType::Type(kind as i32));
            // As istiod (dual stack off): resolve the family the proxy has, so a name like
            // `localhost` does not come back as an IPv6 address an IPv4 pod cannot reach.
            c.dns_lookup_family = if ipv6_only {
                DnsLookupFamily::V6Only
            } else {
                DnsLookupFamily::V4Only
            } as i32;
            c.load_assignment = Some(dns_load_assignment(ctx, svc, port, subset, &name));
        }
    }
    apply_lb(
        &mut c,
        policy.load_balancer.as_ref(),
        passthrough_lb || svc.resolution == Resolution::NONE,
    );
    // As istiod: a sidecar's cluster for a sniffed port speaks whatever HTTP version the client
    // spoke (gateways do not sniff).
    let sniffed = port.protocol == Protocol::Unsupported
        && scope.proxy_type != crate::xds::proxy::ProxyType::Router;
    apply_connection_pool(
        &mut c,
        policy.connection_pool.as_ref(),
        ctx.mesh.tcp_keepalive.as_ref(),
        // istiod's `shouldH2Upgrade`: the mesh's policy for ports declared HTTP, outbound only.
        ctx.mesh.h2_upgrade && port.protocol.is_http(),
        port.protocol,
        sniffed,
        policy.tls.as_ref().and_then(auto_sni_and_san),
    );
    if let Some(budget) = &policy.retry_budget
        && let Some(t) = c
            .circuit_breakers
            .as_mut()
            .and_then(|cb| cb.thresholds.first_mut())
    {
        // As istiod: 20% of active requests and 3 concurrent retries unless set.
        t.retry_budget = Some(
            envoy_types::pb::envoy::config::cluster::v3::circuit_breakers::thresholds::RetryBudget {
                budget_percent: Some(Percent {
                    value: budget.percent.unwrap_or(20.0),
                }),
                min_retry_concurrency: Some(UInt32Value {
                    value: if budget.min_retry_concurrency > 0 {
                        budget.min_retry_concurrency
                    } else {
                        3
                    },
                }),
                ..Default::default()
            },
        );
    }
    apply_outlier(&mut c, policy.outlier_detection.as_ref());
    let locality_rule = policy
        .load_balancer
        .as_ref()
        .and_then(|lb| lb.locality_lb_setting.as_ref());
    if c.lb_policy != LbPolicy::ClusterProvided as i32
        && super::locality::weighted(
            super::locality::setting(ctx.mesh.locality_lb.as_ref(), locality_rule),
            policy.outlier_detection.is_some(),
        )
    {
        c.common_lb_config
            .get_or_insert_with(Default::default)
            .locality_config_specifier = Some(
            envoy_types::pb::envoy::config::cluster::v3::cluster::common_lb_config::LocalityConfigSpecifier::LocalityWeightedLbConfig(
                Default::default(),
            ),
        );
    }
    apply_tls(ctx, svc, port, (&policy, passthrough_lb), auto_mtls, &mut c);
    if scope.send_hbone {
        let istio_mutual = policy
            .tls
            .as_ref()
            .is_some_and(|t| t.mode == ClientTlsMode::ISTIO_MUTUAL);
        super::hbone::hbone_transport(&mut c, istio_mutual);
    }
    if let Some(pp) = &policy.proxy_protocol {
        with_proxy_protocol(&mut c, pp);
    }
    Typed::new(name, Class::outbound(scope), c)
}

/// A DNS cluster's endpoints: the hostnames (or addresses) of the service's endpoints on the
/// port, else the service's own hostname, one for DNS_ROUND_ROBIN (Envoy's LOGICAL_DNS).
fn dns_load_assignment(
    ctx: &PushContext,
    svc: &Service,
    port: &ServicePort,
    subset: Option<&Subset>,
    name: &str,
) -> ClusterLoadAssignment {
    let mut targets: Vec<(String, u32)> = ctx
        .registry
        .endpoints(&svc.hostname, port.number)
        .iter()
        .filter(|e| subset.is_none_or(|s| e.matches(&s.labels)))
        .map(|e| (e.address.clone(), e.port))
        .collect();
    if targets.is_empty() {
        targets.push((
            svc.hostname.clone(),
            if port.target_port != 0 {
                port.target_port
            } else {
                port.number
            },
        ));
    }
    if svc.resolution == Resolution::DNS_ROUND_ROBIN {
        targets.truncate(1);
    }
    ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: targets
                .into_iter()
                .map(|(host, port)| LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket(&host, port)),
                        ..Default::default()
                    })),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The TLS a service cluster originates: the DestinationRule's (ISTIO_MUTUAL named by the
/// cluster, a ServiceEntry's SANs pinning SIMPLE/MUTUAL that name none), else automatic mTLS to
/// endpoints with sidecars.
fn apply_tls(
    ctx: &PushContext,
    svc: &Service,
    port: &ServicePort,
    (policy, passthrough_lb): (&EffectivePolicy, bool),
    auto_mtls: bool,
    c: &mut Cluster,
) {
    // As istiod, mesh mTLS names the cluster in the TLS server name
    // (`outbound_.<port>_.<subset>_.<host>`), which `connection.sni` policies and gateways routing
    // by SNI read.
    let istio_sni = c.name.replacen('|', "_.", 3);
    match &policy.tls {
        Some(tls) if tls.mode == ClientTlsMode::ISTIO_MUTUAL && tls.sni.is_empty() => {
            let tls = ClientTlsSettings {
                sni: istio_sni,
                ..tls.clone()
            };
            c.transport_socket =
                tls_socket(&tls, &identities(ctx, svc, port), &ctx.mesh.tls_defaults);
        }
        // As istiod: a ServiceEntry's `subjectAltNames` pin its servers when the
        // DestinationRule names none.
        Some(tls)
            if matches!(tls.mode, ClientTlsMode::SIMPLE | ClientTlsMode::MUTUAL)
                && tls.subject_alt_names.is_empty()
                && !svc.subject_alt_names.is_empty() =>
        {
            let tls = ClientTlsSettings {
                subject_alt_names: svc.subject_alt_names.clone(),
                ..tls.clone()
            };
            c.transport_socket =
                tls_socket(&tls, &identities(ctx, svc, port), &ctx.mesh.tls_defaults);
        }
        Some(tls) => {
            c.transport_socket =
                tls_socket(tls, &identities(ctx, svc, port), &ctx.mesh.tls_defaults)
        }
        None if auto_mtls
            && ctx.mesh.enable_auto_mtls
            && svc.location == crate::config::networking::Location::MESH_INTERNAL
            && !auto_mtls_disabled(ctx, svc, port.number, passthrough_lb) =>
        {
            c.transport_socket_matches = auto_mtls_sockets(
                &identities(ctx, svc, port),
                istio_sni,
                &ctx.mesh.tls_defaults,
            );
        }
        None => {}
    }
}

/// The identities a service port's servers may present, as istiod pins them: the SPIFFE
/// identities of its endpoints' service accounts (in the service's namespace), in the mesh's
/// trust domain and in each of its `trustDomainAliases` (a server may still hold a certificate of
/// the old domain during a migration), and a ServiceEntry's `subjectAltNames`.
fn identities(ctx: &PushContext, svc: &Service, port: &ServicePort) -> Vec<String> {
    let domains: Vec<&str> = std::iter::once(ctx.mesh.trust_domain.as_str())
        .chain(ctx.mesh.trust_domain_aliases.iter().map(String::as_str))
        .collect();
    ctx.registry
        .endpoints(&svc.hostname, port.number)
        .iter()
        .filter(|e| !e.service_account.is_empty())
        .flat_map(|e| {
            domains.iter().map(move |td| {
                format!(
                    "spiffe://{td}/ns/{}/sa/{}",
                    svc.namespace, e.service_account
                )
            })
        })
        .chain(svc.subject_alt_names.iter().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Endpoint metadata key Envoy picks a cluster's transport socket by, and the value the mesh's
/// workloads carry (their `security.istio.io/tlsMode: istio` label).
pub const TLS_MODE_MATCH: &str = "envoy.transport_socket_match";

fn original_dst(c: &mut Cluster) {
    c.cluster_discovery_type = Some(ClusterDiscoveryType::Type(
        DiscoveryType::OriginalDst as i32,
    ));
}

pub fn socket(host: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: host.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

/// `warmup` (or the older `warmupDurationSecs`): new endpoints get traffic gradually, with
/// istiod's defaults (linear, from 10%).
fn slow_start(
    lb: &LoadBalancerSettings,
) -> Option<envoy_types::pb::envoy::config::cluster::v3::cluster::SlowStartConfig> {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::SlowStartConfig;
    use envoy_types::pb::envoy::config::core::v3::RuntimeDouble;
    if let Some(w) = &lb.warmup {
        return Some(SlowStartConfig {
            slow_start_window: w.duration.map(|d| duration(d.as_std())),
            aggression: Some(RuntimeDouble {
                default_value: w.aggression.unwrap_or(1.0),
                runtime_key: "(".into(),
            }),
            min_weight_percent: Some(Percent {
                value: w.minimum_percent.unwrap_or(10.0),
            }),
        });
    }
    lb.warmup_duration_secs.map(|d| SlowStartConfig {
        slow_start_window: Some(duration(d.as_std())),
        ..Default::default()
    })
}

fn apply_lb(c: &mut Cluster, lb: Option<&LoadBalancerSettings>, cluster_provided: bool) {
    if cluster_provided {
        c.lb_policy = LbPolicy::ClusterProvided as i32;
        return;
    }
    // Istio's default is LEAST_REQUEST.
    c.lb_policy = LbPolicy::LeastRequest as i32;
    let Some(lb) = lb else { return };
    if let Some(simple) = lb.simple {
        c.lb_policy = match simple {
            SimpleLb::ROUND_ROBIN => LbPolicy::RoundRobin,
            SimpleLb::RANDOM => LbPolicy::Random,
            _ => LbPolicy::LeastRequest,
        } as i32;
    }
    if let Some(ch) = &lb.consistent_hash {
        if let Some(m) = &ch.maglev {
            c.lb_policy = LbPolicy::Maglev as i32;
            if m.table_size > 0 {
                c.lb_config = Some(LbConfig::MaglevLbConfig(MaglevLbConfig {
                    table_size: Some(UInt64Value {
                        value: m.table_size,
                    }),
                }));
            }
        } else {
            c.lb_policy = LbPolicy::RingHash as i32;
            let min = ch
                .ring_hash
                .as_ref()
                .map_or(ch.minimum_ring_size, |r| r.minimum_ring_size);
            if min > 0 {
                c.lb_config = Some(LbConfig::RingHashLbConfig(RingHashLbConfig {
                    minimum_ring_size: Some(UInt64Value { value: min }),
                    ..Default::default()
                }));
            }
        }
    }
    if let Some(slow_start) = slow_start(lb) {
        use envoy_types::pb::envoy::config::cluster::v3::cluster::{
            LeastRequestLbConfig, RoundRobinLbConfig,
        };
        if c.lb_policy == LbPolicy::RoundRobin as i32 {
            c.lb_config = Some(LbConfig::RoundRobinLbConfig(RoundRobinLbConfig {
                slow_start_config: Some(slow_start),
            }));
        } else if c.lb_policy == LbPolicy::LeastRequest as i32 {
            c.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                slow_start_config: Some(slow_start),
                ..Default::default()
            }));
        }
    }
}

/// A DestinationRule's (or a Sidecar's) connection pool on `c`, over the mesh's `tcpKeepalive`
/// and, where `mesh_upgrade`, its `h2UpgradePolicy: UPGRADE`.
pub(in crate::xds::generate) fn apply_connection_pool(
    c: &mut Cluster,
    pool: Option<&ConnectionPoolSettings>,
    mesh_keepalive: Option<&crate::config::networking::TcpKeepalive>,
    mesh_upgrade: bool,
    protocol: Protocol,
    sniffed: bool,
    upstream_http: Option<UpstreamHttpProtocolOptions>,
) {
    // Istio lifts Envoy's conservative defaults (1024) to effectively unlimited unless configured.
    const UNLIMITED: u32 = u32::MAX;
    let tcp = pool.and_then(|p| p.tcp.as_ref());
    let http = pool.and_then(|p| p.http.as_ref());
    let pick = |v: Option<i32>| v.filter(|v| *v > 0).map_or(UNLIMITED, |v| v as u32);
    c.circuit_breakers = Some(CircuitBreakers {
        thresholds: vec![Thresholds {
            max_connections: Some(UInt32Value {
                value: pick(tcp.map(|t| t.max_connections)),
            }),
            max_pending_requests: Some(UInt32Value {
                value: pick(http.map(|h| h.http1_max_pending_requests)),
            }),
            max_requests: Some(UInt32Value {
                value: pick(http.map(|h| h.http2_max_requests)),
            }),
            max_retries: Some(UInt32Value {
                value: pick(http.map(|h| h.max_retries)),
            }),
            track_remaining: true,
            ..Default::default()
        }],
        ..Default::default()
    });
    // As istiod's `applyTCPKeepalive`: the mesh's keepalive, then the rule's fields over it.
    for ka in [mesh_keepalive, tcp.and_then(|t| t.tcp_keepalive.as_ref())]
        .into_iter()
        .flatten()
    {
        let options = c
            .upstream_connection_options
            .get_or_insert_with(UpstreamConnectionOptions::default);
        let keepalive = options
            .tcp_keepalive
            .get_or_insert_with(TcpKeepalive::default);
        if ka.probes > 0 {
            keepalive.keepalive_probes = Some(UInt32Value { value: ka.probes });
        }
        if let Some(d) = ka.time {
            keepalive.keepalive_time = Some(UInt32Value {
                value: d.as_std().as_secs() as u32,
            });
        }
        if let Some(d) = ka.interval {
            keepalive.keepalive_interval = Some(UInt32Value {
                value: d.as_std().as_secs() as u32,
            });
        }
    }
    let mut common = CommonHttpOptions::default();
    let mut any_common = false;
    if let Some(h) = http {
        if h.max_requests_per_connection > 0 {
            common.max_requests_per_connection = Some(UInt32Value {
                value: h.max_requests_per_connection as u32,
            });
            any_common = true;
        }
        if let Some(idle) = h.idle_timeout {
            common.idle_timeout = Some(duration(idle.as_std()));
            any_common = true;
        }
    }
    // As istiod: the TCP idle timeout stands in for an unset HTTP one.
    if common.idle_timeout.is_none()
        && let Some(idle) = tcp.and_then(|t| t.idle_timeout)
    {
        common.idle_timeout = Some(duration(idle.as_std()));
        any_common = true;
    }
    if let Some(d) = tcp.and_then(|t| t.max_connection_duration) {
        common.max_connection_duration = Some(duration(d.as_std()));
        any_common = true;
    }
    let upgrade = {
        use crate::config::networking::H2UpgradePolicy;
        match http.and_then(|h| h.h2_upgrade_policy) {
            Some(H2UpgradePolicy::UPGRADE) => true,
            Some(H2UpgradePolicy::DO_NOT_UPGRADE) => false,
            _ => mesh_upgrade && !http.is_some_and(|h| h.use_client_protocol),
        }
    };
    let client_protocol = sniffed || http.is_some_and(|h| h.use_client_protocol);
    let h2 = || {
        let mut opts = Http2ProtocolOptions::default();
        if let Some(n) = http.map(|h| h.max_concurrent_streams).filter(|n| *n > 0) {
            opts.max_concurrent_streams = Some(UInt32Value { value: n as u32 });
        }
        opts
    };
    if protocol.is_http2() || upgrade || any_common || client_protocol || upstream_http.is_some() {
        // Envoy requires an upstream protocol whenever these options are present; like istiod,
        // HTTP/1.1 is written out explicitly when nothing asks for HTTP/2.
        let upstream = if client_protocol {
            UpstreamProtocolOptions::UseDownstreamProtocolConfig(UseDownstreamHttpConfig {
                http_protocol_options: Some(Http1ProtocolOptions::default()),
                http2_protocol_options: Some(h2()),
                ..Default::default()
            })
        } else if protocol.is_http2() || upgrade {
            explicit_http2(h2())
        } else {
            UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::HttpProtocolOptions(
                    Http1ProtocolOptions::default(),
                )),
            })
        };
        let opts = HttpProtocolOptions {
            common_http_protocol_options: any_common.then_some(common),
            upstream_http_protocol_options: upstream_http,
            upstream_protocol_options: Some(upstream),
            ..Default::default()
        };
        c.typed_extension_protocol_options
            .insert(UPSTREAM_HTTP_OPTIONS.into(), any(&opts));
    }
}

/// Sends a PROXY protocol header first on every upstream connection, around whatever transport
/// socket the cluster has (plain TCP when none), as istiod wraps it.
fn with_proxy_protocol(c: &mut Cluster, pp: &crate::config::networking::ProxyProtocol) {
    use envoy_types::pb::envoy::config::core::v3::{ProxyProtocolConfig, proxy_protocol_config};
    use envoy_types::pb::envoy::extensions::transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport;
    let version = match pp.version {
        crate::config::networking::ProxyProtocolVersion::V2 => proxy_protocol_config::Version::V2,
        _ => proxy_protocol_config::Version::V1,
    };
    let wrap = |inner: Option<TransportSocket>| {
        TransportSocket {
        name: "envoy.transport_sockets.upstream_proxy_protocol".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &ProxyProtocolUpstreamTransport {
                config: Some(ProxyProtocolConfig {
                    version: version as i32,
                    ..Default::default()
                }),
                transport_socket: Some(inner.unwrap_or_else(|| TransportSocket {
                    name: "envoy.transport_sockets.raw_buffer".into(),
                    config_type: Some(transport_socket::ConfigType::TypedConfig(any(
                        &envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer::default(),
                    ))),
                })),
                ..Default::default()
            },
        ))),
    }
    };
    if c.transport_socket_matches.is_empty() {
        c.transport_socket = Some(wrap(c.transport_socket.take()));
    }
    for m in &mut c.transport_socket_matches {
        m.transport_socket = Some(wrap(m.transport_socket.take()));
    }
}

fn explicit_http2(options: Http2ProtocolOptions) -> UpstreamProtocolOptions {
    UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
        protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(options)),
    })
}

fn apply_outlier(c: &mut Cluster, o: Option<&OutlierDetection>) {
    let Some(o) = o else { return };
    let mut out = EnvoyOutlier {
        interval: o.interval.map(|d| duration(d.as_std())),
        base_ejection_time: o.base_ejection_time.map(|d| duration(d.as_std())),
        max_ejection_percent: (o.max_ejection_percent > 0).then_some(UInt32Value {
            value: o.max_ejection_percent as u32,
        }),
        // As istiod: success-rate ejection off; consecutive 5xx left at Envoy's defaults (5, always
        // enforced) unless the rule sets them.
        enforcing_success_rate: Some(UInt32Value { value: 0 }),
        split_external_local_origin_errors: o.split_external_local_origin_errors,
        ..Default::default()
    };
    // The deprecated `consecutiveErrors` is only warned about, as istiod does: it sets nothing.
    if let Some(n) = o.consecutive_5xx_errors {
        out.consecutive_5xx = Some(UInt32Value { value: n });
        out.enforcing_consecutive_5xx = Some(UInt32Value {
            value: if n > 0 { 100 } else { 0 },
        });
    }
    if let Some(n) = o.consecutive_gateway_errors {
        out.consecutive_gateway_failure = Some(UInt32Value { value: n });
        out.enforcing_consecutive_gateway_failure = Some(UInt32Value {
            value: if n > 0 { 100 } else { 0 },
        });
    }
    // Local-origin failures count apart only when split, and then are enforced (istiod).
    if o.split_external_local_origin_errors {
        if let Some(n) = o.consecutive_local_origin_failures.filter(|n| *n > 0) {
            out.consecutive_local_origin_failure = Some(UInt32Value { value: n });
            out.enforcing_consecutive_local_origin_failure = Some(UInt32Value { value: 100 });
        }
        out.enforcing_local_origin_success_rate = Some(UInt32Value { value: 0 });
    }
    c.outlier_detection = Some(out);
    c.common_lb_config = Some(CommonLbConfig {
        healthy_panic_threshold: Some(Percent {
            value: f64::from(o.min_health_percent),
        }),
        ..Default::default()
    });
}
