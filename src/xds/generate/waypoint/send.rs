//! Sidecars and gateways sending to the ambient mesh over HBONE, as istiod does once ambient is on
//! (PILOT_ENABLE_SENDING_HBONE): an endpoint that is an ambient workload without a sidecar (no
//! `tlsMode: istio`) is reached through the proxy's own `connect_originate` listener, an HBONE
//! tunnel to its ztunnel with the endpoint as the destination; the service's clusters choose that
//! path by the endpoint's `tunnel: http` metadata (transport socket `hbone`), and keep Istio's
//! mTLS for sidecar endpoints and plain text for the rest. Without it, a sidecar sent plain text to
//! ambient pods, which ztunnel refuses under STRICT mTLS.

use super::clusters::connect_originate;
use super::listeners::connect_originate_listener;
use super::names::{CONNECT_ORIGINATE, ORIGINAL_DST_KEY};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::cluster::TLS_MODE_MATCH;
use crate::xds::generate::shared::hbone::{
    TUNNEL_HTTP, TUNNEL_KEY, string, through_internal, tunnel_destination,
};
use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::google::protobuf::{Struct, value};

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
    let index = crate::xds::generate::ztunnel::index(ctx);
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
        let tunnels = |ip: &str| index.supports_tunnel(&scope.network, ip);
        let Some(target) = through_internal(lb, CONNECT_ORIGINATE, tunnels) else {
            continue;
        };
        let metadata = lb.metadata.get_or_insert_with(Metadata::default);
        metadata.filter_metadata.insert(
            ORIGINAL_DST_KEY.to_string(),
            tunnel_destination(&target, None),
        );
        metadata.filter_metadata.insert(
            TLS_MODE_MATCH.to_string(),
            Struct {
                fields: [(TUNNEL_KEY.to_string(), string(TUNNEL_HTTP))].into(),
            },
        );
    }
}
