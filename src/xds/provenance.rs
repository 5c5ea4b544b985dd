//! Which config objects produced a generated resource: the service's ServiceEntry or Kubernetes
//! Service, the DestinationRule that shaped a cluster, the VirtualService behind a route. Shown per
//! resource in `/debug/config_dump` and the UI.

use super::context::PushContext;
use super::generate::util::parse_outbound_cluster;
use super::types::TypeUrl;
use crate::model::Service;

fn config_ref(c: &crate::config::Config) -> String {
    format!("{}/{}/{}", c.kind, c.metadata.namespace, c.metadata.name)
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
        out.push(config_ref(&vs.config));
    }
    out
}

/// The objects behind resource `name` of `type_url`, as seen from `namespace`.
pub fn sources(ctx: &PushContext, namespace: &str, type_url: TypeUrl, name: &str) -> Vec<String> {
    let by_host = |host: &str| ctx.registry.services.get(host).cloned();
    let mut out: Vec<String> = match type_url {
        TypeUrl::Cluster | TypeUrl::Endpoint => parse_outbound_cluster(name)
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
