//! Double HBONE from a waypoint (ambient multi-network, istiod's
//! AMBIENT_ENABLE_MULTI_NETWORK_WAYPOINT) or an ingress gateway
//! (AMBIENT_ENABLE_MULTI_NETWORK_INGRESS): an endpoint of another network is its east-west
//! gateway, reached through `inner_connect_originate` (the inner tunnel, mTLS to the destination
//! with the service's `<hostname>:<port>` as `:authority`, one connection per stream so the far
//! side spreads them) and `outer_connect_originate` (the outer tunnel to the gateway's 15008, the
//! same `:authority`, marked as coming from a waypoint so the gateway does not send it to the
//! service's waypoint again). Names and shapes are istiod's.

use super::clusters::{hbone_protocol_options, hbone_tls, internal_assignment, to_hbone_port};
use super::listeners::{internal_listener, shared_state};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::encode::any;
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::hbone::{
    INNER_CONNECT_ORIGINATE, ORIGINAL_DST_KEY, OUTER_CONNECT_ORIGINATE, internal_upstream,
};
use crate::xds::generate::shared::network::network_filter;
use crate::xds::generate::typed_listener::NetworkFilter;
use crate::xds::proxy::ProxyType;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, TransportSocket, header_value_option, transport_socket,
};
use envoy_types::pb::envoy::extensions::filters::common::set_filter_state::v3::{
    FilterStateValue, filter_state_value,
};
use envoy_types::pb::envoy::extensions::filters::network::set_filter_state::v3::Config as SetFilterState;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier as TcpCluster, tcp_proxy::TunnelingConfig,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;

/// The filter-state key both tunnels take their `:authority` from.
const TARGET_KEY: &str = "istio.double_hbone.hbone_target_address";
const TARGET: &str = "%FILTER_STATE(istio.double_hbone.hbone_target_address:PLAIN)%";

/// Whether the proxy of `scope` gets the double-HBONE listeners and clusters.
pub fn applies(ctx: &PushContext, scope: &ScopeView) -> bool {
    crate::xds::generate::shared::endpoint::double_hbone(ctx, scope)
}

/// A filter-state value from `text`, kept through every internal listener behind.
fn carried(key: &str, factory: &str, text: &str) -> FilterStateValue {
    FilterStateValue {
        shared_with_upstream: filter_state_value::SharedWithUpstream::Transitive as i32,
        ..shared_state(key, factory, text)
    }
}

fn header(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.into(),
            value: value.into(),
            ..Default::default()
        }),
        append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..Default::default()
    }
}

fn tunnel(cluster: &str, headers: Vec<HeaderValueOption>) -> TcpProxy {
    TcpProxy {
        stat_prefix: cluster.into(),
        cluster_specifier: Some(TcpCluster::Cluster(cluster.into())),
        tunneling_config: Some(TunnelingConfig {
            hostname: TARGET.into(),
            headers_to_add: headers,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What a proxy's class is for the finishing passes: a waypoint's, else an outbound one.
fn class(scope: &ScopeView) -> Class {
    if scope.proxy_type == ProxyType::Waypoint {
        Class::Waypoint
    } else {
        Class::outbound(scope)
    }
}

/// `inner_connect_originate` and `outer_connect_originate`, in istiod's order.
pub fn listeners(scope: &ScopeView) -> Vec<Typed> {
    // istiod's `x-istio-source` on the outer tunnel: who sends it.
    let source = if scope.proxy_type == ProxyType::Waypoint {
        "waypoint"
    } else {
        "gateway"
    };
    let metadata = SetFilterState {
        on_new_connection: vec![
            carried(
                &format!("{ORIGINAL_DST_KEY}.local_ip"),
                "",
                &format!("%DYNAMIC_METADATA({ORIGINAL_DST_KEY}:local)%"),
            ),
            carried(
                TARGET_KEY,
                "envoy.string",
                "%DYNAMIC_METADATA(istio:double_hbone:hbone_target_address)%",
            ),
        ],
        ..Default::default()
    };
    let inner = internal_listener(
        INNER_CONNECT_ORIGINATE,
        false,
        vec![
            network_filter("propagate_endpoint_metadata", &metadata),
            NetworkFilter::tcp(tunnel(
                INNER_CONNECT_ORIGINATE,
                vec![header("x-forwarded-network", &scope.network)],
            )),
        ],
    );
    let outer = internal_listener(
        OUTER_CONNECT_ORIGINATE,
        true,
        vec![NetworkFilter::tcp(tunnel(
            OUTER_CONNECT_ORIGINATE,
            vec![header("x-istio-source", source)],
        ))],
    );
    vec![
        Typed::new(INNER_CONNECT_ORIGINATE, class(scope), inner),
        Typed::new(OUTER_CONNECT_ORIGINATE, class(scope), outer),
    ]
}

/// HTTP/2 with CONNECT, one stream per connection (istiod's `h2connectUpgradeWithNoPooling`:
/// the far side spreads the tunnels over its workloads).
fn h2_connect_unpooled() -> std::collections::HashMap<String, envoy_types::pb::google::protobuf::Any>
{
    hbone_protocol_options(Some(1))
}

fn tls(ctx: &PushContext) -> TransportSocket {
    TransportSocket {
        name: "tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &UpstreamTlsContext {
                common_tls_context: Some(hbone_tls(ctx)),
                ..Default::default()
            },
        ))),
    }
}

/// `inner_connect_originate` (mTLS into `outer_connect_originate`) and `outer_connect_originate`
/// (mTLS to the gateway's 15008 at the address the endpoint named).
pub fn clusters(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    let inner = Cluster {
        name: INNER_CONNECT_ORIGINATE.into(),
        alt_stat_name: format!("{INNER_CONNECT_ORIGINATE};"),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        load_assignment: Some(internal_assignment(
            INNER_CONNECT_ORIGINATE,
            OUTER_CONNECT_ORIGINATE,
        )),
        typed_extension_protocol_options: h2_connect_unpooled(),
        transport_socket: Some(internal_upstream(tls(ctx), false)),
        ..Default::default()
    };
    let outer = Cluster {
        typed_extension_protocol_options: h2_connect_unpooled(),
        transport_socket: Some(tls(ctx)),
        ..to_hbone_port(OUTER_CONNECT_ORIGINATE, false, ctx.mesh.connect_timeout)
    };
    vec![
        Typed::new(INNER_CONNECT_ORIGINATE, class(scope), inner),
        Typed::new(OUTER_CONNECT_ORIGINATE, class(scope), outer),
    ]
}
