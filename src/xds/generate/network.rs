//! The network filters every listener shape shares: `network_filter` wraps a typed config, and
//! `tcp_proxy` is the one TCP proxy builder (sidecar inbound and outbound, TCP and TLS routes,
//! gateways), shaped by the destination's DestinationRule where one destination decides.

use super::util::any;
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};

pub(super) fn network_filter<T: prost::Message + prost::Name>(name: &str, config: &T) -> Filter {
    Filter {
        name: name.into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(config))),
    }
}

/// The one destination service (and port) whose DestinationRule shapes a TCP proxy.
pub(super) struct Destination<'a> {
    pub ctx: &'a PushContext,
    pub scope: &'a ScopeView,
    pub service: &'a Service,
    pub port: u32,
}

/// A TCP proxy to `specifier` (one cluster or weighted clusters), shaped by `destination`'s
/// DestinationRule when there is one destination.
pub(super) fn tcp_proxy(
    stat_prefix: &str,
    specifier: tcp_proxy::ClusterSpecifier,
    destination: Option<Destination>,
) -> Filter {
    let mut proxy = TcpProxy {
        stat_prefix: stat_prefix.into(),
        cluster_specifier: Some(specifier),
        ..Default::default()
    };
    if let Some(d) = destination {
        shape_by_rule(&mut proxy, &d);
    }
    network_filter("envoy.filters.network.tcp_proxy", &proxy)
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
