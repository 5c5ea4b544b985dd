//! HBONE toward an internal listener, the transport pieces every proxy kind shares: the raw and
//! internal-upstream transport sockets, internal listener addresses, and the `hbone` transport
//! socket match a sidecar's or gateway's service clusters pick for tunnel endpoints (istiod's
//! `applyHBONETransportSocketMatches`).

use crate::xds::generate::encode::any;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, TransportSocketMatch,
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, EnvoyInternalAddress, Metadata, TransportSocket, address, envoy_internal_address,
    socket_address, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{LbEndpoint, lb_endpoint};
use envoy_types::pb::envoy::extensions::transport_sockets::internal_upstream::v3::{
    InternalUpstreamTransport, internal_upstream_transport::MetadataValueSource,
};
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer;
use envoy_types::pb::envoy::r#type::metadata::v3::MetadataKind;
use envoy_types::pb::google::protobuf::{Struct, Value, value};

/// Double HBONE (ambient multi-network): the internal listeners (and clusters) that open the
/// inner tunnel, to the destination, and the outer one, to its network's east-west gateway.
pub const INNER_CONNECT_ORIGINATE: &str = "inner_connect_originate";
pub const OUTER_CONNECT_ORIGINATE: &str = "outer_connect_originate";

/// The metadata of an endpoint reached over double HBONE: the east-west gateway (`gateway`,
/// `ip:port`) as the outer tunnel's destination, and `target` (`<hostname>:<port>`) as both
/// tunnels' `:authority` (istiod's `AppendDoubleHBONEMetadata`); with `socket_match`, the
/// `tunnel: http` mark a sidecar's or gateway's cluster picks its `hbone` socket by.
pub fn double_hbone_metadata(gateway: &str, target: &str, socket_match: bool) -> Metadata {
    let mut out = Metadata {
        filter_metadata: [
            (
                ORIGINAL_DST_KEY.to_string(),
                tunnel_destination(gateway, None),
            ),
            (
                "istio".to_string(),
                Struct {
                    fields: [(
                        "double_hbone".to_string(),
                        Value {
                            kind: Some(value::Kind::StructValue(Struct {
                                fields: [("hbone_target_address".to_string(), string(target))]
                                    .into(),
                            })),
                        },
                    )]
                    .into(),
                },
            ),
        ]
        .into(),
        ..Default::default()
    };
    if socket_match {
        out.filter_metadata.insert(
            SOCKET_MATCH_KEY.to_string(),
            Struct {
                fields: [(TUNNEL_KEY.to_string(), string(TUNNEL_HTTP))].into(),
            },
        );
    }
    out
}

/// Envoy's metadata namespace of transport socket matches.
const SOCKET_MATCH_KEY: &str = "envoy.transport_socket_match";

/// Envoy's original-destination metadata and filter-state namespace: the tunnel's logical
/// destination travels under it between the internal listeners.
pub const ORIGINAL_DST_KEY: &str = "envoy.filters.listener.original_dst";

pub fn raw_buffer() -> TransportSocket {
    TransportSocket {
        name: "raw_buffer".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &RawBuffer::default(),
        ))),
    }
}

/// The address of the internal listener `listener`; `id` tells its endpoints apart.
pub fn internal_address(listener: &str, id: &str) -> Address {
    Address {
        address: Some(address::Address::EnvoyInternalAddress(
            EnvoyInternalAddress {
                endpoint_id: id.to_string(),
                address_name_specifier: Some(
                    envoy_internal_address::AddressNameSpecifier::ServerListenerName(
                        listener.to_string(),
                    ),
                ),
            },
        )),
    }
}

/// `inner` toward an internal listener, passing the endpoint's tunnel metadata (its logical
/// destination, under [`ORIGINAL_DST_KEY`], and Istio's) when `passthrough`.
pub fn internal_upstream(inner: TransportSocket, passthrough: bool) -> TransportSocket {
    let host = |name: &str| MetadataValueSource {
        kind: Some(MetadataKind {
            kind: Some(
                envoy_types::pb::envoy::r#type::metadata::v3::metadata_kind::Kind::Host(
                    Default::default(),
                ),
            ),
        }),
        name: name.into(),
    };
    TransportSocket {
        name: "internal_upstream".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &InternalUpstreamTransport {
                passthrough_metadata: if passthrough {
                    vec![host(ORIGINAL_DST_KEY), host("istio")]
                } else {
                    Vec::new()
                },
                transport_socket: Some(inner),
            },
        ))),
    }
}

/// The endpoint metadata key and value that pick the `hbone` transport socket.
pub const TUNNEL_KEY: &str = "tunnel";
pub const TUNNEL_HTTP: &str = "http";

pub fn string(s: &str) -> Value {
    Value {
        kind: Some(value::Kind::StringValue(s.to_string())),
    }
}

/// The `hbone` match: endpoints marked `tunnel: http` go into the internal listener, `inner`
/// carried through the tunnel.
fn hbone_match(inner: TransportSocket) -> TransportSocketMatch {
    TransportSocketMatch {
        name: "hbone".into(),
        r#match: Some(Struct {
            fields: [(TUNNEL_KEY.to_string(), string(TUNNEL_HTTP))].into(),
        }),
        transport_socket: Some(internal_upstream(inner, true)),
    }
}

/// `ip:port`, an IPv6 address in brackets: a tunnel's destination and an internal endpoint's id.
pub fn host_port(ip: &str, port: u32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// An endpoint's original-destination metadata: the tunnel's destination (`local`) and, when the
/// tunnel goes through a waypoint, that waypoint's address (istiod's `BuildTunnelMetadataStruct`).
pub fn tunnel_destination(local: &str, waypoint: Option<&str>) -> Struct {
    let mut out = Struct {
        fields: [("local".to_string(), string(local))].into(),
    };
    if let Some(waypoint) = waypoint {
        out.fields.insert("waypoint".into(), string(waypoint));
    }
    out
}

/// Points an endpoint at the internal listener `listener` when its IP `tunnels`, its `ip:port`
/// as the endpoint id; returns that `ip:port`, or `None` when the endpoint stays as it was.
pub fn through_internal(
    lb: &mut LbEndpoint,
    listener: &str,
    tunnels: impl Fn(&str) -> bool,
) -> Option<String> {
    let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = lb.host_identifier.as_mut() else {
        return None;
    };
    let Some(address::Address::SocketAddress(sock)) =
        ep.address.as_ref().and_then(|a| a.address.as_ref())
    else {
        return None;
    };
    let Some(socket_address::PortSpecifier::PortValue(port)) = sock.port_specifier else {
        return None;
    };
    if !tunnels(&sock.address) {
        return None;
    }
    let target = host_port(&sock.address, port);
    ep.address = Some(internal_address(listener, &target));
    Some(target)
}

/// [`hbone_match`] of plain text, the same for every cluster: built once, cloned.
fn hbone_raw() -> TransportSocketMatch {
    static BUILT: std::sync::OnceLock<TransportSocketMatch> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| hbone_match(raw_buffer())).clone()
}

/// A service cluster of a proxy that sends HBONE, as istiod's `applyHBONETransportSocketMatches`:
/// HBONE first for tunnel endpoints, then what the cluster did before (automatic mTLS's matches;
/// Istio mTLS set by a DestinationRule, for sidecar endpoints; a user's TLS, kept inside the
/// tunnel too; else plain text).
pub fn hbone_transport(c: &mut Cluster, istio_mutual: bool) {
    let original_dst = matches!(
        c.cluster_discovery_type,
        Some(ClusterDiscoveryType::Type(t)) if t == DiscoveryType::OriginalDst as i32
    );
    if original_dst {
        return;
    }
    if !c.transport_socket_matches.is_empty() {
        c.transport_socket_matches.insert(0, hbone_raw());
        return;
    }
    match c.transport_socket.take() {
        None => {
            c.transport_socket_matches = vec![
                hbone_raw(),
                TransportSocketMatch {
                    name: "tlsMode-disabled".into(),
                    r#match: Some(Struct::default()),
                    transport_socket: Some(raw_buffer()),
                },
            ]
        }
        Some(ts) if istio_mutual => {
            c.transport_socket_matches = vec![
                hbone_raw(),
                TransportSocketMatch {
                    name: "tlsMode-istio".into(),
                    r#match: None,
                    transport_socket: Some(ts),
                },
            ]
        }
        Some(ts) => {
            c.transport_socket_matches = vec![
                hbone_match(ts.clone()),
                TransportSocketMatch {
                    name: "user".into(),
                    r#match: None,
                    transport_socket: Some(ts),
                },
            ]
        }
    }
}

/// The cluster's own transport socket for endpoints that are not tunnelled: the `user` or
/// `tlsMode-istio` match [`hbone_transport`] moved it into, or the cluster's.
pub fn direct_transport(c: &Cluster) -> Option<&TransportSocket> {
    c.transport_socket.as_ref().or_else(|| {
        c.transport_socket_matches
            .iter()
            .find(|m| m.name == "user" || (m.name == "tlsMode-istio" && m.r#match.is_none()))
            .and_then(|m| m.transport_socket.as_ref())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(c: &Cluster) -> Vec<&str> {
        c.transport_socket_matches
            .iter()
            .map(|m| m.name.as_str())
            .collect()
    }

    fn tls() -> TransportSocket {
        TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: None,
        }
    }

    /// istiod's four cases: automatic mTLS (HBONE first), none (HBONE or plain text), ISTIO_MUTUAL
    /// set by a DestinationRule (HBONE replaces it for ambient endpoints), a user's TLS (kept
    /// inside the tunnel as well); an ORIGINAL_DST cluster is left alone.
    #[test]
    fn hbone_comes_first_and_what_the_cluster_did_stays() {
        let mut auto = Cluster {
            transport_socket_matches: vec![TransportSocketMatch {
                name: "tlsMode-istio".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        hbone_transport(&mut auto, false);
        assert_eq!(names(&auto), ["hbone", "tlsMode-istio"]);

        let mut plain = Cluster::default();
        hbone_transport(&mut plain, false);
        assert_eq!(names(&plain), ["hbone", "tlsMode-disabled"]);

        let mut istio = Cluster {
            transport_socket: Some(tls()),
            ..Default::default()
        };
        hbone_transport(&mut istio, true);
        assert_eq!(names(&istio), ["hbone", "tlsMode-istio"]);
        assert_eq!(direct_transport(&istio), Some(&tls()));

        let mut user = Cluster {
            transport_socket: Some(tls()),
            ..Default::default()
        };
        hbone_transport(&mut user, false);
        assert_eq!(names(&user), ["hbone", "user"]);
        assert!(user.transport_socket.is_none());
        assert_eq!(direct_transport(&user), Some(&tls()));

        let mut passthrough = Cluster {
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(
                DiscoveryType::OriginalDst as i32,
            )),
            ..Default::default()
        };
        hbone_transport(&mut passthrough, false);
        assert!(names(&passthrough).is_empty());
    }
}
