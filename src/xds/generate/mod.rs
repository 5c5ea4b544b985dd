//! Resource generation: for a proxy, a push context and a type, the resources to send.

pub mod encode;
pub mod finish;
pub mod gateway;
pub mod grpc;
pub mod inputs;
pub mod passes;
pub mod security;
pub mod shared;
pub mod sidecar;
pub mod typed_listener;
pub mod waypoint;
pub mod ztunnel;

use crate::xds::context::{PushContext, Role, ScopeView};
use crate::xds::proxy::{Generator, Proxy, ProxyType};
use crate::xds::resource::{Resource, Resources};
use crate::xds::types::TypeUrl;
use passes::{access_log, envoy_filter, stats, tracing, traffic_extension};
use security::jwt;
use shared::{cluster, endpoint, secret, util};
use sidecar::{listener, name_table, outbound};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Resources of `type_url` for a proxy whose view is `scope`: all of them when `names` is `None`
/// (wildcard), else the named ones that exist. The scoped types are cached per push version and
/// scope key, and read nothing but `scope`; SDS is per identity, so only `secret` sees the proxy.
pub fn generate(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &ScopeView,
    type_url: TypeUrl,
    names: Option<&BTreeSet<String>>,
) -> Vec<Arc<Resource>> {
    let grpc = scope.generator == Generator::Grpc;
    let router = scope.proxy_type == ProxyType::Router;
    // Per-name types: each name's resource cached under the scope it is built from.
    let per_name = |type_url: TypeUrl,
                    scope: &ScopeView,
                    build: &dyn Fn(&str) -> Option<Arc<Resource>>|
     -> Vec<Arc<Resource>> {
        let mut out = Vec::new();
        for n in names.into_iter().flatten() {
            out.extend(
                ctx.cached(type_url, scope.role(), scope.key, n, || {
                    build(n).into_iter().collect()
                })
                .iter()
                .cloned(),
            );
        }
        out
    };
    // Per-name types: one typed resource, finished and encoded.
    let finished = |typed: Option<finish::Typed>| typed.and_then(|t| finish_one(ctx, scope, t));
    let filter = |all: Resources| -> Vec<Arc<Resource>> {
        match names {
            None => all.iter().cloned().collect(),
            Some(n) => all
                .iter()
                .filter(|r| n.contains(&*r.name))
                .cloned()
                .collect(),
        }
    };
    match type_url {
        TypeUrl::Cluster if grpc => per_name(TypeUrl::Cluster, scope, &|n| {
            finished(cluster::cluster_by_name(ctx, scope, n))
        }),
        TypeUrl::Cluster => {
            let all = ctx.cached(TypeUrl::Cluster, scope.role(), scope.key, "*", || {
                finish(ctx, scope, build_all(ctx, scope, TypeUrl::Cluster))
            });
            filter(all)
        }
        // istio-agent's DNS proxy: one unnamed table per scope.
        TypeUrl::NameTable => ctx
            .cached(TypeUrl::NameTable, scope.role(), scope.key, "*", || {
                name_table::name_table(ctx, scope)
            })
            .iter()
            .cloned()
            .collect(),
        TypeUrl::Endpoint => {
            // Built from what endpoints read of the proxy alone, and cached by that.
            let endpoints = &*ctx.projected(scope, scope.inputs.for_endpoints());
            per_name(TypeUrl::Endpoint, endpoints, &|n| {
                finish_one(ctx, endpoints, load_assignment(ctx, endpoints, router, n))
            })
        }
        TypeUrl::Listener if grpc => per_name(TypeUrl::Listener, scope, &|n| {
            finished(if n.starts_with(grpc::INBOUND_PREFIX) {
                grpc::inbound_listener(ctx, scope, n)
            } else {
                grpc::api_listener(ctx, scope, n)
            })
        }),
        TypeUrl::Listener if router => {
            filter(
                ctx.cached(TypeUrl::Listener, scope.role(), scope.key, "*", || {
                    finish(ctx, scope, build_all(ctx, scope, TypeUrl::Listener))
                }),
            )
        }
        TypeUrl::Listener => {
            filter(
                ctx.cached(TypeUrl::Listener, scope.role(), scope.key, "*", || {
                    finish(ctx, scope, build_all(ctx, scope, TypeUrl::Listener))
                }),
            )
        }
        TypeUrl::Route if grpc => per_name(TypeUrl::Route, scope, &|n| {
            finished(grpc::route_config(ctx, scope, n))
        }),
        TypeUrl::Route if router => per_name(TypeUrl::Route, scope, &|n| {
            finished(gateway::route_config(ctx, scope, n))
        }),
        TypeUrl::Route => per_name(TypeUrl::Route, scope, &|n| {
            finished(listener::route_config(ctx, scope, n))
        }),
        TypeUrl::ExtensionConfig => extension_configs(ctx, proxy, scope, names),
        TypeUrl::Address => addresses(ctx, proxy, names),
        TypeUrl::Secret => finish(
            ctx,
            scope,
            secret::secrets(
                ctx,
                proxy,
                finish::Class::outbound(scope),
                names,
                &gateway::verified_certificate_references(ctx, scope, proxy),
            ),
        ),
        TypeUrl::Authorization => {
            let index = ztunnel::index(ctx);
            match names {
                None => index.authorizations(),
                Some(n) => n
                    .iter()
                    .filter_map(|name| index.authorization(name))
                    .collect(),
            }
        }
    }
}

/// The endpoints of cluster `name` for `scope`: a waypoint's `inbound-vip` clusters, a
/// gateway's through a service's waypoint, else the service's, tunnelled to ambient workloads.
pub(crate) fn load_assignment(
    ctx: &PushContext,
    scope: &ScopeView,
    router: bool,
    name: &str,
) -> finish::Typed {
    if name.starts_with(util::INBOUND_VIP) {
        return waypoint::load_assignment(ctx, scope, name);
    }
    if router && let Some(through_waypoint) = waypoint::ingress_load_assignment(ctx, scope, name) {
        return through_waypoint;
    }
    let mut typed = endpoint::load_assignment(ctx, scope, name);
    waypoint::tunnel_endpoints(ctx, scope, &mut typed);
    typed
}

/// A Wasm extension of the scope's by its name (the registry credential only for
/// authenticated proxies); else an EnvoyFilter's EXTENSION_CONFIG of the scope.
fn extension_configs(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &ScopeView,
    names: Option<&BTreeSet<String>>,
) -> Vec<Arc<Resource>> {
    let verified = proxy.identity.is_some();
    let mut out = Vec::new();
    for n in names.into_iter().flatten() {
        let wasm = ctx.cached(
            TypeUrl::ExtensionConfig,
            scope.role(),
            scope.key,
            &format!("wasm/{verified}/{n}"),
            || {
                traffic_extension::extension_config(ctx, scope, n, verified)
                    .and_then(|t| finish_one(ctx, scope, t))
                    .into_iter()
                    .collect()
            },
        );
        let found = if wasm.is_empty() {
            ctx.cached(TypeUrl::ExtensionConfig, scope.role(), scope.key, n, || {
                envoy_filter::extension_config(ctx, scope, n)
                    .and_then(|t| finish_one(ctx, scope, t))
                    .into_iter()
                    .collect()
            })
        } else {
            wasm
        };
        out.extend(found.iter().cloned());
    }
    out
}

/// ztunnel's addresses: all, or those of the subscribed names (each resource once, answering
/// for all its aliases), with an on-demand ztunnel's own node's workloads.
fn addresses(
    ctx: &PushContext,
    proxy: &Proxy,
    names: Option<&BTreeSet<String>>,
) -> Vec<Arc<Resource>> {
    match names {
        None => ztunnel::index(ctx).addresses(),
        Some(n) => {
            // One entry per resource: two subscribed names (a uid and an IP, or both IPs of a
            // dual-stack pod) may lead to the same one; it answers for every alias.
            let mut by_name: std::collections::BTreeMap<String, Vec<Arc<Resource>>> =
                std::collections::BTreeMap::new();
            for name in n {
                let found = ctx.cached(TypeUrl::Address, Role::Ztunnel, 0, name, || {
                    ztunnel::index(ctx).lookup_address(name)
                });
                for r in found.iter() {
                    by_name
                        .entry(r.name.to_string())
                        .or_default()
                        .push(r.clone());
                }
            }
            // An on-demand ztunnel also gets the workloads of its own node, unasked, as
            // istiod's `AdditionalPodSubscriptions` sends them: it will need them for the
            // traffic of its local pods. (The key cannot be a name a client subscribes to.)
            let node = proxy.metadata.get("NODE_NAME").filter(|n| !n.is_empty());
            if let (ProxyType::Ztunnel, Some(node)) = (proxy.proxy_type, node) {
                let local = ctx.cached(
                    TypeUrl::Address,
                    Role::Ztunnel,
                    0,
                    &format!("\0node/{node}"),
                    || ztunnel::index(ctx).node_local(node),
                );
                for r in local.iter() {
                    by_name
                        .entry(r.name.to_string())
                        .or_insert_with(|| vec![r.clone()]);
                }
            }
            by_name
                .into_values()
                .filter_map(|same| {
                    let aliases: Vec<String> = same
                        .iter()
                        .flat_map(|r| r.aliases.iter().cloned())
                        .collect();
                    let first = same.into_iter().next()?;
                    Some(if first.aliases == aliases {
                        first
                    } else {
                        first.with_aliases(aliases)
                    })
                })
                .collect()
        }
    }
}

/// The finishing passes, in the order they run: TrafficExtension filters, Istio's metadata
/// exchange and stats filters, access logs and tracing, and EnvoyFilter patches last, on the
/// finished config, as istiod applies them (a patch of the connection manager's `tracing` or
/// access logs is what the proxy gets) (`finish::Pass`). Listed here, above the passes' own files, so that no pass and the
/// finishing step import each other.
pub static PASSES: &[&dyn finish::Pass] = &[
    &traffic_extension::TrafficExtensions,
    &stats::IstioTelemetry,
    &access_log::AccessLogs,
    &tracing::TracingPass,
    &envoy_filter::EnvoyFilterPatches,
];

/// Runs the mesh's [`PASSES`] over a scope's typed resources, then encodes them.
pub fn finish(
    ctx: &PushContext,
    scope: &ScopeView,
    resources: Vec<finish::Typed>,
) -> Vec<Arc<Resource>> {
    finish::finish_with(PASSES, ctx, scope, resources)
}

/// [`finish`] for one resource, as per-name types are built (`None` when a pass removed it).
pub fn finish_one(
    ctx: &PushContext,
    scope: &ScopeView,
    resource: finish::Typed,
) -> Option<Arc<Resource>> {
    finish(ctx, scope, vec![resource]).pop()
}

/// Every typed cluster or listener an Envoy (sidecar or gateway) of `scope` is sent, before
/// finishing; nothing for other types and for proxyless clients, which ask by name.
pub fn build_all(ctx: &PushContext, scope: &ScopeView, type_url: TypeUrl) -> Vec<finish::Typed> {
    if scope.generator == Generator::Grpc {
        return Vec::new();
    }
    match type_url {
        TypeUrl::Cluster if scope.proxy_type == ProxyType::Waypoint => {
            let mut v = waypoint::clusters(ctx, scope);
            let served = waypoint::served(ctx, scope);
            let served: Vec<&crate::model::Service> = served.iter().map(AsRef::as_ref).collect();
            v.extend(jwt::jwks_clusters(ctx, scope, &served));
            v
        }
        TypeUrl::Listener if scope.proxy_type == ProxyType::Waypoint => {
            waypoint::listeners(ctx, scope)
        }
        TypeUrl::Cluster => {
            let mut v = cluster::clusters(ctx, scope, true);
            if scope.proxy_type == ProxyType::Router {
                waypoint::ingress_clusters(ctx, scope, &mut v);
            }
            waypoint::hbone_cluster(ctx, scope, &mut v);
            waypoint::double_hbone_clusters(ctx, scope, &mut v);
            waypoint::sidecar_hbone_cluster(scope, &mut v);
            if gateway::has_auto_passthrough(ctx, scope) {
                v.extend(gateway::auto_passthrough::clusters(ctx, scope));
            }
            v.extend(listener::inbound_clusters(ctx, scope));
            v.extend(jwt::jwks_clusters(ctx, scope, &[]));
            v
        }
        TypeUrl::Listener if scope.proxy_type == ProxyType::Router => {
            let mut v = gateway::listeners(ctx, scope);
            v.extend(waypoint::ingress_listener(ctx, scope));
            waypoint::hbone_listener(scope, &mut v);
            waypoint::double_hbone_listeners(ctx, scope, &mut v);
            v
        }
        TypeUrl::Listener => {
            let mut v = outbound::listeners(ctx, scope, listener::allow_any(ctx, scope));
            v.extend(listener::virtual_listeners(ctx, scope));
            v.extend(waypoint::sidecar_hbone_listeners(ctx, scope));
            waypoint::hbone_listener(scope, &mut v);
            v
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
