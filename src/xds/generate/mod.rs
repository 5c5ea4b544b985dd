//! Resource generation: for a proxy, a push context and a type, the resources to send.

pub mod authz;
pub mod cluster;
pub mod endpoint;
pub mod extauthz;
pub mod gateway;
pub mod jwt;
pub mod listener;
pub mod route;
pub mod secret;
pub mod util;

use super::context::{PushContext, Resource, Resources, Scope};
use super::proxy::{Generator, Proxy};
use std::collections::BTreeSet;
use std::sync::Arc;

pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
pub const ADDRESS: &str = crate::ambient::ADDRESS_TYPE;
pub const AUTHORIZATION: &str = crate::ambient::AUTHORIZATION_TYPE;

/// Types a client may leave unnamed to mean "everything" (the other types are always named).
pub fn is_wildcard_type(type_url: &str) -> bool {
    matches!(type_url, CLUSTER | LISTENER | ADDRESS | AUTHORIZATION)
}

/// Push order that keeps Envoy's make-before-break: clusters, endpoints, listeners, routes, the
/// secrets they name; then ztunnel's types (policies before the workloads that reference them).
pub const PUSH_ORDER: [&str; 7] = [
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SECRET,
    AUTHORIZATION,
    ADDRESS,
];

pub fn short_type(type_url: &str) -> &'static str {
    match type_url {
        CLUSTER => "cds",
        ENDPOINT => "eds",
        LISTENER => "lds",
        ROUTE => "rds",
        SECRET => "sds",
        ADDRESS => "wds",
        AUTHORIZATION => "wads",
        _ => "unknown",
    }
}

/// The types whose resources depend only on the push context, the proxy's scope and the names
/// asked for (so one list serves every stream of a scope); SDS and ambient types depend on more.
pub fn scope_type(type_url: &str) -> Option<&'static str> {
    match type_url {
        CLUSTER => Some(CLUSTER),
        ENDPOINT => Some(ENDPOINT),
        LISTENER => Some(LISTENER),
        ROUTE => Some(ROUTE),
        _ => None,
    }
}

pub fn known_type(type_url: &str) -> bool {
    short_type(type_url) != "unknown"
}

/// Resources of `type_url` for `proxy`: all of them when `names` is `None` (wildcard), else the named
/// ones that exist. Results are cached per push version and scope.
pub fn generate(
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &Scope,
    type_url: &str,
    names: Option<&BTreeSet<String>>,
) -> Vec<Arc<Resource>> {
    let grpc = proxy.generator == Generator::Grpc;
    let router = proxy.proxy_type == super::proxy::ProxyType::Router;
    let per_name = |type_url: &'static str,
                    scope_key: u64,
                    build: &dyn Fn(&str) -> Option<Arc<Resource>>|
     -> Vec<Arc<Resource>> {
        let mut out = Vec::new();
        for n in names.into_iter().flatten() {
            out.extend(
                ctx.cached(type_url, scope_key, n, || build(n).into_iter().collect())
                    .iter()
                    .cloned(),
            );
        }
        out
    };
    let filter = |all: Resources| -> Vec<Arc<Resource>> {
        match names {
            None => all.iter().cloned().collect(),
            Some(n) => all
                .iter()
                .filter(|r| n.contains(&r.name))
                .cloned()
                .collect(),
        }
    };
    match type_url {
        CLUSTER if grpc => per_name(CLUSTER, scope.key, &|n| {
            cluster::cluster_by_name(ctx, scope, n)
        }),
        CLUSTER => {
            let all = ctx.cached(CLUSTER, scope.key, "*", || {
                let mut v = cluster::clusters(ctx, scope, true);
                v.extend(listener::inbound_clusters(ctx, proxy));
                v.extend(jwt::jwks_clusters(ctx, proxy));
                v
            });
            filter(all)
        }
        ENDPOINT => per_name(ENDPOINT, scope.key, &|n| {
            Some(endpoint::load_assignment(ctx, scope, n))
        }),
        LISTENER if grpc => per_name(LISTENER, scope.key, &|n| {
            if n.starts_with(listener::GRPC_INBOUND_PREFIX) {
                listener::grpc_inbound_listener(ctx, proxy, n)
            } else {
                listener::grpc_listener(ctx, scope, n)
            }
        }),
        LISTENER if router => filter(ctx.cached(LISTENER, scope.key, "*", || {
            gateway::listeners(ctx, proxy, scope)
        })),
        LISTENER => filter(ctx.cached(LISTENER, scope.key, "*", || {
            listener::listeners(ctx, proxy, scope)
        })),
        ROUTE if grpc => per_name(ROUTE, scope.key, &|n| {
            listener::grpc_route_config(ctx, proxy, scope, n)
        }),
        ROUTE if router => per_name(ROUTE, scope.key, &|n| {
            gateway::route_config(ctx, proxy, scope, n)
        }),
        ROUTE => per_name(ROUTE, scope.key, &|n| {
            listener::route_config(ctx, proxy, scope, n)
        }),
        ADDRESS => match names {
            None => ctx.ambient().addresses(),
            Some(n) => {
                // One entry per resource: two subscribed names (a uid and an IP, or both IPs of a
                // dual-stack pod) may lead to the same one; it answers for every alias.
                let mut by_name: std::collections::BTreeMap<String, Vec<Arc<Resource>>> =
                    std::collections::BTreeMap::new();
                for name in n {
                    let found = ctx.cached(ADDRESS, 0, name, || ctx.ambient().lookup_address(name));
                    for r in found.iter() {
                        by_name.entry(r.name.clone()).or_default().push(r.clone());
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
        },
        SECRET => secret::secrets(ctx, proxy, names),
        AUTHORIZATION => match names {
            None => ctx.ambient().authorizations(),
            Some(n) => n
                .iter()
                .filter_map(|name| ctx.ambient().authorization(name))
                .collect(),
        },
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
