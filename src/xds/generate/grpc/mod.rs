//! Proxyless gRPC (`GENERATOR=grpc`): gRPC asks for listeners and routes by name — an API listener
//! and a route configuration per `host:port` it dials, and an inbound listener per address it
//! serves — and reads only what its xDS client implements. Clusters and endpoints are the shared
//! builders', with gRPC's choices made there.

use crate::config::security::MtlsMode;
use crate::model::Service;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Class, Typed};
use crate::xds::generate::shared::cluster::socket;
use crate::xds::generate::shared::network::{RouteSource, http_connection_manager};
use crate::xds::generate::shared::route::virtual_host;
use crate::xds::generate::typed_listener::{Chain, NetworkFilter, TypedListener};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, RouteMatch, VirtualHost, route_match,
};
use std::collections::HashSet;
use std::sync::Arc;

/// Splits `host:port` as gRPC asks for listeners and routes; short hosts resolve in the proxy namespace.
fn target<'a>(
    ctx: &PushContext,
    scope: &'a ScopeView,
    name: &str,
) -> Option<(&'a Arc<Service>, u32)> {
    let (host, port) = name.rsplit_once(':')?;
    let port: u32 = port.parse().ok()?;
    let fqdn = crate::model::resolve_host(host, &scope.namespace, &ctx.mesh.domain_suffix);
    let svc = scope
        .services
        .iter()
        .find(|s| s.hostname == fqdn || s.hostname == host)?;
    svc.port(port)?;
    Some((svc, port))
}

/// What proxyless gRPC servers ask for: `xds.istio.io/grpc/lds/inbound/<ip>:<port>` (their bootstrap's
/// `server_listener_resource_name_template`).
pub const INBOUND_PREFIX: &str = "xds.istio.io/grpc/lds/inbound/";

/// A proxyless gRPC server's listener: every request is served locally (non-forwarding route)
/// after the AuthorizationPolicy RBAC filters. gRPC runs only the filters it implements on the
/// server side, so no fault or JWT filter here. PeerAuthentication as istiod's `grpcgen` applies
/// it: STRICT (or PERMISSIVE on a workload labelled `security.istio.io/tlsMode: istio`, whose
/// clients use mTLS) takes mTLS only, with the server's certificate provider; gRPC cannot tell
/// TLS from plaintext on one port, so PERMISSIVE otherwise, and DISABLE, take plaintext.
pub fn inbound_listener(ctx: &PushContext, scope: &ScopeView, name: &str) -> Option<Typed> {
    let address = name.strip_prefix(INBOUND_PREFIX)?;
    let (host, port) = address.rsplit_once(':')?;
    let port: u32 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.parse::<std::net::IpAddr>().ok()?;
    let route = RouteConfiguration {
        name: "inbound|grpc".into(),
        virtual_hosts: vec![VirtualHost {
            name: "inbound|grpc".into(),
            domains: vec!["*".into()],
            routes: vec![Route {
                r#match: Some(RouteMatch {
                    path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                    ..Default::default()
                }),
                action: Some(Action::NonForwardingAction(Default::default())),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let manager = http_connection_manager(
        ctx,
        scope,
        Class::inbound(scope),
        name,
        RouteSource::Inline(Box::new(route)),
        crate::xds::generate::security::authz::http_filters(ctx, scope),
    );
    let peer_auth = crate::model::peer_auth::applicable(
        &ctx.snapshot,
        &ctx.mesh.root_namespace,
        &scope.namespace,
    );
    let mode = match crate::model::peer_auth::mode_among(
        &peer_auth,
        &ctx.mesh.root_namespace,
        &scope.namespace,
        &scope.labels,
        Some(port),
    ) {
        MtlsMode::PERMISSIVE
            if scope
                .labels
                .get("security.istio.io/tlsMode")
                .map(String::as_str)
                == Some("istio") =>
        {
            MtlsMode::STRICT
        }
        mode => mode,
    };
    let mtls = mode == MtlsMode::STRICT;
    Some(Typed::new(
        name,
        Class::inbound(scope),
        TypedListener::new(
            Listener {
                name: name.into(),
                address: Some(socket(host, port)),
                ..Default::default()
            },
            vec![Chain {
                name: if mtls {
                    "inbound-mtls"
                } else {
                    "inbound-plaintext"
                }
                .into(),
                filters: vec![NetworkFilter::http(manager)],
                transport_socket: mtls.then(|| {
                    crate::xds::generate::shared::tls::downstream_socket(
                        crate::xds::generate::shared::tls::grpc_mesh_tls(&[]),
                        true,
                    )
                }),
                ..Default::default()
            }],
        ),
    ))
}

/// A proxyless gRPC client's API listener for `host:port`.
pub fn api_listener(ctx: &PushContext, scope: &ScopeView, name: &str) -> Option<Typed> {
    target(ctx, scope, name)?;
    // istiod leaves path normalisation to gRPC itself on API listeners.
    let api = http_connection_manager(
        ctx,
        scope,
        Class::outbound(scope),
        name,
        RouteSource::Rds(name.to_string()),
        Vec::new(),
    );
    Some(Typed::new(
        name,
        Class::outbound(scope),
        TypedListener::api(
            Listener {
                name: name.into(),
                ..Default::default()
            },
            api,
        ),
    ))
}

/// The route configuration for a gRPC client's `host:port`.
pub fn route_config(ctx: &PushContext, scope: &ScopeView, name: &str) -> Option<Typed> {
    let (svc, port) = target(ctx, scope, name)?;
    let mut seen = HashSet::new();
    let mut vh = virtual_host(ctx, scope, svc, port, true, &mut seen)?;
    if !vh.domains.iter().any(|d| d == name) {
        vh.domains.push(name.to_string());
    }
    Some(Typed::new(
        name,
        Class::outbound(scope),
        RouteConfiguration {
            name: name.into(),
            virtual_hosts: vec![vh],
            ..Default::default()
        },
    ))
}
