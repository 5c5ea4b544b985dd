//! Sidecars and gateways sending to the ambient mesh over HBONE, as istiod does once ambient is on
//! (PILOT_ENABLE_SENDING_HBONE): an endpoint that is an ambient workload without a sidecar (no
//! `tlsMode: istio`) is reached through the proxy's own `connect_originate` listener, an HBONE
//! tunnel to its ztunnel with the endpoint as the destination; the service's clusters choose that
//! path by the endpoint's `tunnel: http` metadata (transport socket `hbone`), and keep Istio's
//! mTLS for sidecar endpoints and plain text for the rest. Without it, a sidecar sent plain text to
//! ambient pods, which ztunnel refuses under STRICT mTLS.

use super::clusters::{connect_originate, internal_address, internal_upstream, raw_buffer};
use super::listeners::connect_originate_listener;
use super::{CONNECT_ORIGINATE, ORIGINAL_DST_KEY};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::cluster::TLS_MODE_MATCH;
use crate::xds::generate::finish::{Class, Typed};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, TransportSocketMatch,
};
use envoy_types::pb::envoy::config::core::v3::{
    Metadata, TransportSocket, address, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint;
use envoy_types::pb::google::protobuf::{Struct, Value, value};

/// The endpoint metadata key and value that pick the `hbone` transport socket.
const TUNNEL_KEY: &str = "tunnel";
const TUNNEL_HTTP: &str = "http";

fn string(s: &str) -> Value {
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
        c.transport_socket_matches
            .insert(0, hbone_match(raw_buffer()));
        return;
    }
    match c.transport_socket.take() {
        None => {
            c.transport_socket_matches = vec![
                hbone_match(raw_buffer()),
                TransportSocketMatch {
                    name: "tlsMode-disabled".into(),
                    r#match: Some(Struct::default()),
                    transport_socket: Some(raw_buffer()),
                },
            ]
        }
        Some(ts) if istio_mutual => {
            c.transport_socket_matches = vec![
                hbone_match(raw_buffer()),
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

/// The `connect_originate` cluster of a proxy that sends HBONE, unless `clusters` has it.
pub fn hbone_cluster(ctx: &PushContext, scope: &ScopeView, clusters: &mut Vec<Typed>) {
    if scope.send_hbone && !clusters.iter().any(|c| c.name == CONNECT_ORIGINATE) {
        clusters.push(connect_originate(ctx, scope, false));
    }
}

/// The `connect_originate` listener of a proxy that sends HBONE, unless `listeners` has it.
pub fn hbone_listener(scope: &ScopeView, listeners: &mut Vec<Typed>) {
    if scope.send_hbone && !listeners.iter().any(|l| l.name == CONNECT_ORIGINATE) {
        listeners.push(Typed::new(
            CONNECT_ORIGINATE,
            Class::outbound(scope),
            connect_originate_listener(),
        ));
    }
}

/// A load assignment of a proxy that sends HBONE: each endpoint that is an ambient workload (in
/// the proxy's network) and has no sidecar is tunnelled to, its `ip:port` the tunnel's
/// destination, as istiod's endpoint builder does.
pub fn tunnel_endpoints(ctx: &PushContext, scope: &ScopeView, typed: &mut Typed) {
    if !scope.send_hbone {
        return;
    }
    let Some(assignment) = typed.load_assignment_mut() else {
        return;
    };
    let index = crate::xds::generate::ambient::index(ctx);
    for lb in assignment
        .endpoints
        .iter_mut()
        .flat_map(|g| g.lb_endpoints.iter_mut())
    {
        let has_sidecar = lb
            .metadata
            .as_ref()
            .and_then(|m| m.filter_metadata.get(TLS_MODE_MATCH))
            .and_then(|s| s.fields.get("tlsMode"))
            .is_some_and(|v| v.kind == Some(value::Kind::StringValue("istio".into())));
        if has_sidecar {
            continue;
        }
        let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = lb.host_identifier.as_mut() else {
            continue;
        };
        let Some(address::Address::SocketAddress(sock)) =
            ep.address.as_ref().and_then(|a| a.address.as_ref())
        else {
            continue;
        };
        let Some(socket_address::PortSpecifier::PortValue(port)) = sock.port_specifier else {
            continue;
        };
        if !index.supports_tunnel(&scope.network, &sock.address) {
            continue;
        }
        let target = if sock.address.contains(':') {
            format!("[{}]:{port}", sock.address)
        } else {
            format!("{}:{port}", sock.address)
        };
        ep.address = Some(internal_address(CONNECT_ORIGINATE, &target));
        let metadata = lb.metadata.get_or_insert_with(Metadata::default);
        metadata.filter_metadata.insert(
            ORIGINAL_DST_KEY.to_string(),
            Struct {
                fields: [("local".to_string(), string(&target))].into(),
            },
        );
        metadata.filter_metadata.insert(
            TLS_MODE_MATCH.to_string(),
            Struct {
                fields: [(TUNNEL_KEY.to_string(), string(TUNNEL_HTTP))].into(),
            },
        );
    }
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
