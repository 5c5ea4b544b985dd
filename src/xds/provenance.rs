//! Which config objects produced a generated resource: the service's ServiceEntry or Kubernetes
//! Service, the DestinationRule that shaped a cluster, the VirtualService behind a route. Shown per
//! resource in `/debug/config_dump` and the UI.

use super::context::PushContext;
use super::generate::shared::util::parse_service_cluster;
use super::types::TypeUrl;
use crate::model::Service;
use crate::model::origin::Origin;

/// `Kind/namespace/name` of the object behind `c`: for config derived from the Gateway API or an
/// Ingress, the objects it comes from.
fn config_refs(c: &crate::config::Config, origin: &Origin) -> Vec<String> {
    if origin.sources.is_empty() {
        return vec![config_ref(c)];
    }
    (origin.sources.iter())
        .map(|s| format!("{}/{}/{}", s.kind.qualified_name(), s.namespace, s.name))
        .collect()
}

fn config_ref(c: &crate::config::Config) -> String {
    format!("{}/{}/{}", c.kind, c.metadata.namespace, c.metadata.name)
}

/// The port of a gateway's listener (`0.0.0.0_443`) or route (`http.80`, `https.443.name.gw.ns`).
fn gateway_port(type_url: TypeUrl, name: &str) -> Option<u32> {
    match type_url {
        TypeUrl::Listener => name.strip_prefix("0.0.0.0_")?.parse().ok(),
        TypeUrl::Route => name
            .strip_prefix("http.")
            .or_else(|| name.strip_prefix("https."))?
            .split('.')
            .next()?
            .parse()
            .ok(),
        _ => None,
    }
}

/// The Gateways (and, for routes, the VirtualServices bound to them) with a server on `port`:
/// what a gateway's listener or route of that port comes from.
fn gateway_sources(ctx: &PushContext, type_url: TypeUrl, port: u32) -> Vec<String> {
    use crate::config::Spec;
    let gateways: Vec<(&std::sync::Arc<crate::config::Config>, _)> = ctx
        .istio_gateways()
        .filter(|(c, _)| match &c.spec {
            Spec::Gateway(g) => g
                .servers
                .iter()
                .any(|s| s.port.as_ref().is_some_and(|p| p.number == port)),
            _ => false,
        })
        .collect();
    let mut out: Vec<String> = gateways
        .iter()
        .flat_map(|(c, o)| config_refs(c, o))
        .collect();
    if type_url == TypeUrl::Route {
        let names: Vec<String> = gateways
            .iter()
            .map(|(c, _)| format!("{}/{}", c.metadata.namespace, c.metadata.name))
            .collect();
        for vs in &ctx.routing.gateway_virtual_services {
            if vs.gateways.iter().any(|g| names.contains(g)) {
                out.extend(config_refs(&vs.config, &vs.origin));
            }
        }
    }
    out
}

fn service_sources(
    ctx: &PushContext,
    namespace: &str,
    svc: &Service,
    with_dr: bool,
    with_vs: bool,
) -> Vec<String> {
    let mut out = vec![svc.source.clone()];
    if with_dr && let Some(dr) = ctx.destination_rule_for(namespace, &Default::default(), svc) {
        out.push(config_ref(&dr.config));
        out.extend(dr.merged_from.iter().map(|c| config_ref(c)));
    }
    if with_vs && let Some(vs) = ctx.virtual_service_for(namespace, &svc.hostname) {
        out.extend(config_refs(&vs.config, &vs.origin));
    }
    out
}

/// The objects behind resource `name` of `type_url`, as seen from `namespace` (by a gateway
/// when `gateway`: its listeners and routes come from Gateways and what is bound to them).
pub fn sources(
    ctx: &PushContext,
    namespace: &str,
    gateway: bool,
    type_url: TypeUrl,
    name: &str,
) -> Vec<String> {
    let by_host = |host: &str| ctx.registry.services.get(host).cloned();
    if gateway && let Some(port) = gateway_port(type_url, name) {
        let mut out = gateway_sources(ctx, type_url, port);
        out.sort();
        out.dedup();
        return out;
    }
    let mut out: Vec<String> = match type_url {
        TypeUrl::Cluster | TypeUrl::Endpoint => parse_service_cluster(name)
            .and_then(|(_, _, host)| by_host(host))
            .map(|svc| service_sources(ctx, namespace, &svc, true, false))
            .unwrap_or_default(),
        TypeUrl::Listener => {
            let port = name
                .rsplit(['_', ':'])
                .next()
                .and_then(|p| p.parse::<u32>().ok());
            let host = name.rsplit_once(':').map(|(h, _)| h);
            ctx.registry
                .services
                .values()
                .filter(|s| {
                    port.is_some_and(|p| s.port(p).is_some())
                        && host.is_none_or(|h| s.hostname == h || name.contains('_'))
                })
                .map(|s| s.source.clone())
                .collect()
        }
        TypeUrl::Route => {
            let (host, port) = match name.rsplit_once(':') {
                Some((h, p)) => (Some(h), p.parse::<u32>().ok()),
                None => (None, name.parse::<u32>().ok()),
            };
            ctx.registry
                .services
                .values()
                .filter(|s| {
                    port.is_some_and(|p| s.port(p).is_some_and(|sp| sp.protocol.is_http()))
                        && host.is_none_or(|h| s.hostname == h)
                })
                .flat_map(|s| service_sources(ctx, namespace, s, false, true))
                .collect()
        }
        _ => Vec::new(),
    };
    out.sort();
    out.dedup();
    out
}
