//! The network filters every listener shape shares: `network_filter` wraps a typed config,
//! `http_connection_manager` is the one HTTP connection manager builder and `tcp_proxy` the one
//! TCP proxy builder, each for every class (sidecar inbound and outbound, gateway, proxyless),
//! shaped by what the class needs.

use super::route::{CORS_FILTER, FAULT_FILTER};
use super::util::ads;
use crate::config::mesh::PathNormalization;
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::Class;
use crate::xds::generate::typed_listener::NetworkFilter;
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::BoolValue;

/// A network filter other than the connection manager and TCP proxy, its config packed.
pub(in crate::xds::generate) fn network_filter<T: prost::Message + prost::Name>(
    name: &str,
    config: &T,
) -> NetworkFilter {
    NetworkFilter::encoded(name, filter::ConfigType::TypedConfig(any(config)))
}

/// The one destination service (and port) whose DestinationRule shapes a TCP proxy.
pub(in crate::xds::generate) struct Destination<'a> {
    pub ctx: &'a PushContext,
    pub scope: &'a ScopeView,
    pub service: &'a Service,
    pub port: u32,
}

/// A TCP proxy to `specifier` (one cluster or weighted clusters), shaped by `destination`'s
/// DestinationRule when there is one destination.
pub(in crate::xds::generate) fn tcp_proxy(
    stat_prefix: &str,
    specifier: tcp_proxy::ClusterSpecifier,
    destination: Option<Destination>,
) -> NetworkFilter {
    let mut proxy = TcpProxy {
        stat_prefix: stat_prefix.into(),
        cluster_specifier: Some(specifier),
        ..Default::default()
    };
    if let Some(d) = destination {
        shape_by_rule(&mut proxy, &d);
    }
    NetworkFilter::tcp(proxy)
}

/// What the destination's DestinationRule sets on a TCP proxy: `connectionPool.tcp.idleTimeout`
/// (Envoy's default of one hour otherwise) and `tunnel`: the payload goes through an HTTP CONNECT
/// (or POST) tunnel to `targetHost:targetPort`, the destination being the tunnel's proxy.
fn shape_by_rule(proxy: &mut TcpProxy, d: &Destination) {
    let (ctx, scope, svc, port) = (d.ctx, d.scope, d.service, d.port);
    let rule = ctx
        .destination_rule_for(&scope.namespace, &scope.labels, svc)
        .map(|d| &d.spec);
    let policy = super::cluster::EffectivePolicy::resolve(rule, None, port);
    proxy.idle_timeout = policy
        .connection_pool
        .and_then(|p| p.tcp)
        .and_then(|t| t.idle_timeout)
        .map(|d| super::util::duration(d.as_std()));
    if let Some(t) = policy.tunnel {
        proxy.tunneling_config = Some(tcp_proxy::TunnelingConfig {
            hostname: if t.target_host.contains(':') {
                format!("[{}]:{}", t.target_host, t.target_port)
            } else {
                format!("{}:{}", t.target_host, t.target_port)
            },
            use_post: t.protocol.eq_ignore_ascii_case("POST"),
            ..Default::default()
        });
    }
}

/// Where an HTTP connection manager's routes come from.
pub(in crate::xds::generate) enum RouteSource {
    Rds(String),
    Inline(Box<RouteConfiguration>),
}

fn typed_filter<T: prost::Message + prost::Name>(name: &str, config: &T) -> HttpFilter {
    HttpFilter {
        name: name.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(config))),
        ..Default::default()
    }
}

/// The one HTTP connection manager builder. Every class: `security` (request authentication
/// and authorization, server side only) first, then CORS (Envoy only), then faults (not on a
/// gRPC server: istiod's grpcgen), then the router. gRPC implements nothing more; Envoy adds path
/// normalisation from MeshConfig, WebSocket upgrades, and on gateways what
/// istiod's `buildGatewayConnectionManager` adds: the client is the connection's peer
/// (`use_remote_address`) or the address `gatewayTopology.numTrustedProxies` hops back in
/// `X-Forwarded-For`, never one the client wrote itself, and `X-Forwarded-Client-Cert` as the
/// topology says (SANITIZE_SET by default, with the certificate's subject, URI, DNS names and
/// the certificate).
pub(in crate::xds::generate) fn http_connection_manager(
    ctx: &PushContext,
    scope: &ScopeView,
    class: Class,
    stat_prefix: &str,
    routes: RouteSource,
    security: Vec<HttpFilter>,
) -> HttpConnectionManager {
    let proxyless = matches!(class, Class::Proxyless | Class::ProxylessServer);
    let mut filters = security;
    if !proxyless {
        filters.push(typed_filter(
            CORS_FILTER,
            &envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors::default(),
        ));
    }
    if class != Class::ProxylessServer {
        filters.push(typed_filter(FAULT_FILTER, &HttpFault::default()));
    }
    filters.push(typed_filter(
        "envoy.filters.http.router",
        &Router::default(),
    ));
    let mut manager = HttpConnectionManager {
        stat_prefix: stat_prefix.to_string(),
        route_specifier: Some(match routes {
            RouteSource::Rds(name) => http_connection_manager::RouteSpecifier::Rds(Rds {
                config_source: Some(ads()),
                route_config_name: name,
            }),
            RouteSource::Inline(rc) => http_connection_manager::RouteSpecifier::RouteConfig(*rc),
        }),
        http_filters: filters,
        ..Default::default()
    };
    if proxyless {
        // istiod leaves path normalisation to gRPC itself, and gRPC refuses filters it does
        // not know.
        return manager;
    }
    normalize(&mut manager, ctx.mesh.path_normalization);
    // As istiod: WebSocket upgrades pass through every Envoy HTTP connection manager.
    manager.upgrade_configs = vec![http_connection_manager::UpgradeConfig {
        upgrade_type: "websocket".into(),
        ..Default::default()
    }];
    if class == Class::Gateway {
        gateway_client_address(&mut manager, &scope.gateway_topology);
    }
    if class == Class::SidecarInbound {
        sidecar_inbound_client_cert(&mut manager);
    }
    // istiod's `enableHTTP10`: outbound and gateway connection managers of a proxy whose
    // metadata asks for it accept HTTP/1.0.
    if scope.http10 && matches!(class, Class::SidecarOutbound | Class::Gateway) {
        manager.http_protocol_options = Some(
            envoy_types::pb::envoy::config::core::v3::Http1ProtocolOptions {
                accept_http_10: true,
                ..Default::default()
            },
        );
    }
    manager
}

/// istiod's sidecar inbound `X-Forwarded-Client-Cert`: the caller's certificate (subject, SPIFFE
/// URI, DNS names) appended to what came in, so the application reads the caller's identity. A
/// header the calling application wrote never arrives: its own sidecar's outbound connection
/// manager sanitizes it (Envoy's default, as istiod leaves it).
fn sidecar_inbound_client_cert(manager: &mut HttpConnectionManager) {
    use http_connection_manager::{ForwardClientCertDetails, SetCurrentClientCertDetails};
    manager.forward_client_cert_details = ForwardClientCertDetails::AppendForward as i32;
    manager.set_current_client_cert_details = Some(SetCurrentClientCertDetails {
        subject: Some(BoolValue { value: true }),
        uri: true,
        dns: true,
        ..Default::default()
    });
}

/// [`http_connection_manager`] as a network filter.
pub(in crate::xds::generate) fn hcm_filter(
    ctx: &PushContext,
    scope: &ScopeView,
    class: Class,
    stat_prefix: &str,
    routes: RouteSource,
    security: Vec<HttpFilter>,
) -> NetworkFilter {
    NetworkFilter::http(http_connection_manager(
        ctx,
        scope,
        class,
        stat_prefix,
        routes,
        security,
    ))
}

/// Path normalisation as istiod sets it from MeshConfig `pathNormalization` (default BASE: RFC 3986
/// normalisation, so `/a/../admin` is routed and authorised as `/admin`); escaped slashes are kept.
fn normalize(hcm: &mut HttpConnectionManager, level: PathNormalization) {
    use http_connection_manager::PathWithEscapedSlashesAction as Escaped;
    let (normalize, merge, escaped) = match level {
        PathNormalization::NONE => (false, false, Escaped::KeepUnchanged),
        PathNormalization::DEFAULT | PathNormalization::BASE => {
            (true, false, Escaped::KeepUnchanged)
        }
        PathNormalization::MERGE_SLASHES => (true, true, Escaped::KeepUnchanged),
        PathNormalization::DECODE_AND_MERGE_SLASHES => (true, true, Escaped::UnescapeAndForward),
    };
    hcm.normalize_path = Some(BoolValue { value: normalize });
    hcm.merge_slashes = merge;
    hcm.path_with_escaped_slashes_action = escaped as i32;
}

/// The client address and client-certificate header of a gateway, from its `gatewayTopology`.
fn gateway_client_address(
    manager: &mut HttpConnectionManager,
    topology: &crate::config::mesh::GatewayTopology,
) {
    use crate::config::mesh::ForwardClientCertDetails as Xfcc;
    use http_connection_manager::{ForwardClientCertDetails, SetCurrentClientCertDetails};
    manager.use_remote_address = Some(BoolValue { value: true });
    manager.xff_num_trusted_hops = topology.num_trusted_proxies;
    let xfcc = match topology.forward_client_cert_details {
        Xfcc::UNDEFINED | Xfcc::SANITIZE_SET => ForwardClientCertDetails::SanitizeSet,
        Xfcc::SANITIZE => ForwardClientCertDetails::Sanitize,
        Xfcc::FORWARD_ONLY => ForwardClientCertDetails::ForwardOnly,
        Xfcc::APPEND_FORWARD => ForwardClientCertDetails::AppendForward,
        Xfcc::ALWAYS_FORWARD_ONLY => ForwardClientCertDetails::AlwaysForwardOnly,
    };
    manager.forward_client_cert_details = xfcc as i32;
    if matches!(
        xfcc,
        ForwardClientCertDetails::SanitizeSet | ForwardClientCertDetails::AppendForward
    ) {
        manager.set_current_client_cert_details = Some(SetCurrentClientCertDetails {
            subject: Some(BoolValue { value: true }),
            cert: true,
            dns: true,
            uri: true,
            ..Default::default()
        });
    }
}
