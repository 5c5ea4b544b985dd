//! TrafficExtension Lua filters, as istiod 1.30 builds them (`pilot/pkg/networking/core/extension`,
//! `model/extensions.go`): the TrafficExtensions that attach to a proxy (the one attachment rule:
//! its namespace, then the root namespace; selector or targetRefs), matched per HTTP connection
//! manager by mode (CLIENT for outbound and gateways, SERVER inbound) and port, ordered as istiod
//! (namespace, oldest first, then by `priority`, highest first) and inserted at their phase: AUTHN
//! before request authentication, AUTHZ before authorization, STATS and unspecified after it. A
//! pass before EnvoyFilter patches, so EnvoyFilters see them as istiod's do.
//!
//! Wasm TrafficExtensions need extension config discovery, which Rudder does not serve yet: they
//! are warned about (`validation::unhonoured`) and not inserted.

use super::extauthz::EXT_AUTHZ_FILTER;
use super::finish::{Built, Class, Pass, Typed};
use super::jwt::JWT_FILTER;
use super::rbac::RBAC_FILTER;
use super::util::{any, listener_port};
use crate::config::extensions::{ExtensionPhase, TrafficExtension, WorkloadMode};
use crate::config::{Config, Kind, Spec};
use crate::xds::context::{PushContext, ScopeView};
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::extensions::filters::http::lua::v3::Lua;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_filter,
};
use prost::{Message, Name};

/// istiod's prefix of a TrafficExtension's filter name.
const NAME_PREFIX: &str = "extensions.istio.io/trafficextension/";

/// The Lua TrafficExtensions that attach to `scope`'s proxy, in istiod's order.
fn extensions<'a>(ctx: &'a PushContext, scope: &ScopeView) -> Vec<&'a Config> {
    if ctx.snapshot.list(Kind::TrafficExtension).next().is_none() {
        return Vec::new();
    }
    let mut found: Vec<&Config> = ctx
        .selecting(scope, Kind::TrafficExtension)
        .into_iter()
        .filter(
            |c| matches!(&c.spec, Spec::TrafficExtension(t) if t.lua.is_some() && t.wasm.is_none()),
        )
        .collect();
    let own = |c: &Config| c.metadata.namespace != scope.namespace;
    found.sort_by(|a, b| {
        own(a)
            .cmp(&own(b))
            .then_with(|| a.age_key().cmp(&b.age_key()))
    });
    // Stable: equal priorities keep the order above; unset is the lowest.
    found.sort_by_key(|c| match &c.spec {
        Spec::TrafficExtension(t) => std::cmp::Reverse(t.priority.unwrap_or(i32::MIN)),
        _ => std::cmp::Reverse(i32::MIN),
    });
    found
}

/// Whether `t` applies to a connection manager of `class` on `port` (istiod's
/// `matchTrafficExtensionSelectors`: no match applies everywhere).
fn applies(t: &TrafficExtension, class: Class, port: Option<u32>) -> bool {
    let mode = if class == Class::SidecarInbound {
        WorkloadMode::SERVER
    } else {
        WorkloadMode::CLIENT
    };
    t.matches.is_empty()
        || t.matches.iter().any(|m| {
            let mode_ok = match m.mode.unwrap_or(WorkloadMode::UNDEFINED) {
                WorkloadMode::UNDEFINED | WorkloadMode::CLIENT_AND_SERVER => true,
                other => other == mode,
            };
            let port_ok = m.ports.is_empty()
                || m.ports
                    .iter()
                    .any(|p| p.number != 0 && Some(p.number) == port);
            mode_ok && port_ok
        })
}

fn lua_filter(c: &Config, t: &TrafficExtension) -> HttpFilter {
    let code = t
        .lua
        .as_ref()
        .map(|l| l.inline_code.clone())
        .unwrap_or_default();
    HttpFilter {
        name: format!("{NAME_PREFIX}{}.{}", c.metadata.namespace, c.metadata.name),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&Lua {
            default_source_code: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(code)),
                ..Default::default()
            }),
            ..Default::default()
        }))),
        ..Default::default()
    }
}

/// Inserts `extensions` into `filters` at their phases. The positions follow istiod's build
/// order: custom authorization, [AUTHN], request authentication, [AUTHZ], authorization,
/// [STATS, UNSPECIFIED], then the rest.
fn insert(filters: &mut Vec<HttpFilter>, extensions: &[(ExtensionPhase, HttpFilter)]) {
    let run = |from: usize, names: &[&str], filters: &[HttpFilter]| {
        from + filters[from..]
            .iter()
            .take_while(|f| names.contains(&f.name.as_str()))
            .count()
    };
    let authn_at = run(0, &[EXT_AUTHZ_FILTER], filters);
    let authz_at = run(authn_at, &[JWT_FILTER], filters);
    let after_authz = run(authz_at, &[RBAC_FILTER], filters);
    let of = |phases: &[ExtensionPhase]| -> Vec<HttpFilter> {
        extensions
            .iter()
            .filter(|(p, _)| phases.contains(p))
            .map(|(_, f)| f.clone())
            .collect()
    };
    // From the back, so earlier positions stay valid.
    let late = [
        of(&[ExtensionPhase::STATS]),
        of(&[ExtensionPhase::UNSPECIFIED]),
    ]
    .concat();
    filters.splice(after_authz..after_authz, late);
    filters.splice(authz_at..authz_at, of(&[ExtensionPhase::AUTHZ]));
    filters.splice(authn_at..authn_at, of(&[ExtensionPhase::AUTHN]));
}

/// The pass: Lua TrafficExtensions into the HTTP connection managers of a scope's listeners.
pub struct TrafficExtensions;

impl Pass for TrafficExtensions {
    fn name(&self) -> &'static str {
        "traffic_extension"
    }

    fn applies(&self, ctx: &PushContext, scope: &ScopeView) -> bool {
        !extensions(ctx, scope).is_empty()
    }

    fn apply(&self, ctx: &PushContext, scope: &ScopeView, resources: &mut Vec<Typed>) {
        let found: Vec<(&Config, &TrafficExtension)> = extensions(ctx, scope)
            .into_iter()
            .filter_map(|c| match &c.spec {
                Spec::TrafficExtension(t) => Some((c, t)),
                _ => None,
            })
            .collect();
        for r in resources.iter_mut() {
            let class = r.class;
            if matches!(
                class,
                Class::Proxyless | Class::ProxylessServer | Class::Waypoint
            ) {
                continue;
            }
            let Built::Listener(listener) = &mut r.built else {
                continue;
            };
            let listener_port = listener_port(listener);
            let chains = listener
                .filter_chains
                .iter_mut()
                .chain(listener.default_filter_chain.as_mut());
            for chain in chains {
                // On the virtual listeners the port is the filter chain's.
                let port = chain
                    .filter_chain_match
                    .as_ref()
                    .and_then(|m| m.destination_port)
                    .map(|p| p.value)
                    .or(listener_port);
                let here: Vec<(ExtensionPhase, HttpFilter)> = found
                    .iter()
                    .filter(|(_, t)| applies(t, class, port))
                    .map(|(c, t)| {
                        (
                            t.phase.unwrap_or(ExtensionPhase::UNSPECIFIED),
                            lua_filter(c, t),
                        )
                    })
                    .collect();
                if here.is_empty() {
                    continue;
                }
                for f in &mut chain.filters {
                    let Some(filter::ConfigType::TypedConfig(config)) = &mut f.config_type else {
                        continue;
                    };
                    if config.type_url != HttpConnectionManager::type_url() {
                        continue;
                    }
                    let Ok(mut hcm) = HttpConnectionManager::decode(config.value.as_slice()) else {
                        continue;
                    };
                    insert(&mut hcm.http_filters, &here);
                    config.value = hcm.encode_to_vec();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(filters: &[HttpFilter]) -> Vec<&str> {
        filters.iter().map(|f| f.name.as_str()).collect()
    }

    fn named(n: &str) -> HttpFilter {
        HttpFilter {
            name: n.into(),
            ..Default::default()
        }
    }

    /// Each phase lands where istiod builds it, whatever security filters the chain has.
    #[test]
    fn phases_land_where_istiod_builds_them() {
        let ext = |p: ExtensionPhase, n: &str| (p, named(n));
        let all = [
            ext(ExtensionPhase::UNSPECIFIED, "plain"),
            ext(ExtensionPhase::AUTHN, "authn"),
            ext(ExtensionPhase::STATS, "stats"),
            ext(ExtensionPhase::AUTHZ, "authz"),
        ];
        let mut full: Vec<HttpFilter> =
            [EXT_AUTHZ_FILTER, JWT_FILTER, RBAC_FILTER, "cors", "router"]
                .iter()
                .map(|n| named(n))
                .collect();
        insert(&mut full, &all);
        assert_eq!(
            names(&full),
            [
                EXT_AUTHZ_FILTER,
                "authn",
                JWT_FILTER,
                "authz",
                RBAC_FILTER,
                "stats",
                "plain",
                "cors",
                "router"
            ]
        );
        let mut bare: Vec<HttpFilter> = ["cors", "router"].iter().map(|n| named(n)).collect();
        insert(&mut bare, &all);
        assert_eq!(
            names(&bare),
            ["authn", "authz", "stats", "plain", "cors", "router"]
        );
    }
}
