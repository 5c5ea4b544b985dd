//! EnvoyFilter: match, patch operations and values (checked against Envoy's descriptors).

use crate::config::networking::*;
use crate::validation::helpers as h;
use crate::validation::report::Report;

pub(in crate::validation) fn envoy_filter(r: &mut Report, ef: &EnvoyFilter) {
    r.warn(
        "",
        "EnvoyFilter exposes internal implementation details that may change at any time. Prefer other APIs if possible, and exercise extreme caution, especially around upgrades.",
    );
    r.check(
        "spec.workloadSelector",
        h::label_selector(ef.workload_selector.as_ref()),
    );
    if ef
        .workload_selector
        .as_ref()
        .is_some_and(|s| s.labels.is_empty())
    {
        r.warn(
            "spec.workloadSelector",
            "Envoy filter: workload selector specified without labels, will be applied to all services in namespace",
        );
    }
    if ef.workload_selector.is_some() && !ef.target_refs.is_empty() {
        r.error(
            "spec",
            "only one of targetRefs or workloadSelector can be set",
        );
    }
    for (i, cp) in ef.config_patches.iter().enumerate() {
        let pp = format!("spec.configPatches[{i}]");
        // istiod does not validate waypoint patches yet.
        if cp
            .match_
            .as_ref()
            .is_some_and(|m| m.context == PatchContext::WAYPOINT)
        {
            continue;
        }
        if cp.apply_to == ApplyTo::INVALID {
            r.error(format!("{pp}.applyTo"), "Envoy filter: missing applyTo");
            continue;
        }
        let Some(patch) = &cp.patch else {
            r.error(format!("{pp}.patch"), "Envoy filter: missing patch");
            continue;
        };
        if patch.operation == PatchOperation::INVALID {
            r.error(
                format!("{pp}.patch.operation"),
                "Envoy filter: missing patch operation",
            );
            continue;
        }
        if patch.operation != PatchOperation::REMOVE && patch.value.is_none() {
            r.error(
                format!("{pp}.patch.value"),
                "Envoy filter: missing patch value for non-remove operation",
            );
            continue;
        }
        if !patch_match(r, &pp, cp) {
            continue;
        }
        if let Some(value) = &patch.value {
            patch_value(r, &pp, cp.apply_to, value);
        }
    }
}

/// The object classes `applyTo` patches, and the match that selects them.
const APPLIES_TO_LISTENER: [ApplyTo; 4] = [
    ApplyTo::LISTENER,
    ApplyTo::FILTER_CHAIN,
    ApplyTo::NETWORK_FILTER,
    ApplyTo::HTTP_FILTER,
];
const APPLIES_TO_ROUTE: [ApplyTo; 3] = [
    ApplyTo::ROUTE_CONFIGURATION,
    ApplyTo::VIRTUAL_HOST,
    ApplyTo::HTTP_ROUTE,
];

/// A patch's match: proxy version, one object class, and one that `applyTo` can patch. `false`
/// when the patch is not worth checking further.
fn patch_match(r: &mut Report, pp: &str, cp: &EnvoyConfigObjectPatch) -> bool {
    let Some(m) = &cp.match_ else {
        return true;
    };
    if let Some(proxy) = &m.proxy
        && proxy.proxy_version.len() > 1024
    {
        r.warn(
            format!("{pp}.match.proxy.proxyVersion"),
            "Envoy filter: proxyVersion match exceeds 1024 characters and will be ignored",
        );
    } else if let Some(proxy) = &m.proxy
        && !proxy.proxy_version.is_empty()
        && let Err(e) = regex::Regex::new(&proxy.proxy_version)
    {
        r.error(
            format!("{pp}.match.proxy.proxyVersion"),
            format!("Envoy filter: invalid regex for proxy version, [{e}]"),
        );
        return false;
    }
    let object_types = [
        m.listener.is_some(),
        m.route_configuration.is_some(),
        m.cluster.is_some(),
    ];
    if h::count_set(&object_types) > 1 {
        r.error(
            format!("{pp}.match"),
            "Envoy filter: only one of listener, routeConfiguration or cluster may be matched",
        );
        return false;
    }
    let any_object = object_types.iter().any(|b| *b);
    if APPLIES_TO_LISTENER.contains(&cp.apply_to) {
        if any_object && m.listener.is_none() {
            r.error(
                pp,
                "Envoy filter: applyTo for listener class objects cannot have non listener match",
            );
            return false;
        }
        if let Some(filter) = m
            .listener
            .as_ref()
            .and_then(|l| l.filter_chain.as_ref())
            .and_then(|fc| fc.filter.as_ref())
        {
            if matches!(cp.apply_to, ApplyTo::LISTENER | ApplyTo::FILTER_CHAIN) {
                r.warn(
                    pp,
                    format!(
                        "Envoy filter: filter match has no effect when used with {:?}",
                        cp.apply_to
                    ),
                );
            }
            if filter.name.is_empty() {
                r.error(pp, "Envoy filter: filter match has no name to match on");
            } else if let Some(sub) = &filter.sub_filter {
                if cp.apply_to != ApplyTo::HTTP_FILTER {
                    r.error(
                        pp,
                        "Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only",
                    );
                } else if filter.name != "envoy.filters.network.http_connection_manager"
                    && filter.name != "envoy.http_connection_manager"
                {
                    r.error(
                    pp,
                    "Envoy filter: subfilter match requires filter match with envoy.filters.network.http_connection_manager",
                );
                } else if sub.name.is_empty() {
                    r.error(pp, "Envoy filter: subfilter match has no name to match on");
                }
            }
            let names = std::iter::once(filter.name.as_str())
                .chain(filter.sub_filter.as_ref().map(|s| s.name.as_str()));
            for name in names {
                if let Some((_, canonical)) =
                    DEPRECATED_FILTER_NAMES.iter().find(|(old, _)| *old == name)
                {
                    r.warn(
                        pp,
                        format!("using deprecated filter name {name:?}; use {canonical:?} instead"),
                    );
                }
            }
        }
    } else if APPLIES_TO_ROUTE.contains(&cp.apply_to) {
        if any_object && m.route_configuration.is_none() {
            r.error(pp, "Envoy filter: applyTo for http route class objects cannot have non route configuration match");
        }
    } else if cp.apply_to == ApplyTo::CLUSTER && any_object && m.cluster.is_none() {
        r.error(
            pp,
            "Envoy filter: applyTo for cluster class objects cannot have non cluster match",
        );
    }
    true
}

/// The Envoy message a patch value of `applyTo` is read as.
pub(super) fn patch_type(apply_to: ApplyTo) -> Option<&'static str> {
    Some(match apply_to {
        ApplyTo::CLUSTER => "envoy.config.cluster.v3.Cluster",
        ApplyTo::LISTENER => "envoy.config.listener.v3.Listener",
        ApplyTo::ROUTE_CONFIGURATION => "envoy.config.route.v3.RouteConfiguration",
        ApplyTo::FILTER_CHAIN => "envoy.config.listener.v3.FilterChain",
        ApplyTo::HTTP_FILTER => {
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter"
        }
        ApplyTo::NETWORK_FILTER => "envoy.config.listener.v3.Filter",
        ApplyTo::VIRTUAL_HOST => "envoy.config.route.v3.VirtualHost",
        ApplyTo::HTTP_ROUTE => "envoy.config.route.v3.Route",
        ApplyTo::EXTENSION_CONFIG => "envoy.config.core.v3.TypedExtensionConfig",
        ApplyTo::BOOTSTRAP => "envoy.config.bootstrap.v3.Bootstrap",
        ApplyTo::LISTENER_FILTER => "envoy.config.listener.v3.ListenerFilter",
        ApplyTo::INVALID => return None,
    })
}

/// istiod's check of a patch value: it must read as the Envoy type its `applyTo` names (an
/// `@type` naming no known message included); unknown fields are warned about. A type the
/// descriptors do not carry is not judged (never a false denial).
pub(super) fn patch_value(r: &mut Report, pp: &str, apply_to: ApplyTo, value: &serde_json::Value) {
    use crate::envoy::proto_merge::{check_json, knows, missing_typed_config};
    let Some(type_name) = patch_type(apply_to).filter(|t| knows(t)) else {
        return;
    };
    if let Err(e) = check_json(type_name, value, false) {
        // Envoy's v2 API is gone: say so, as istiod does.
        let text = e.to_string();
        let hint = if text.contains(".v2.") || text.contains(".v2alpha") {
            " (hint: try using the v3 XDS API)"
        } else {
            ""
        };
        r.error(
            format!("{pp}.patch.value"),
            format!("Envoy filter: {text}{hint}"),
        );
        return;
    }
    if let Err(e) = check_json(type_name, value, true) {
        r.warn(format!("{pp}.patch.value"), format!("Envoy filter: {e}"));
    }
    if let Ok(untyped) = missing_typed_config(type_name, value)
        && !untyped.is_empty()
    {
        r.warn(
            format!("{pp}.patch.value"),
            format!(
                "using deprecated types by name without typed_config; {}",
                untyped.join(", ")
            ),
        );
    }
}

/// Envoy's old filter names and the names that replaced them: a match on an old name still works
/// in istiod, with a warning.
pub(super) const DEPRECATED_FILTER_NAMES: &[(&str, &str)] = &[
    ("envoy.buffer", "envoy.filters.http.buffer"),
    ("envoy.cors", "envoy.filters.http.cors"),
    ("envoy.csrf", "envoy.filters.http.csrf"),
    ("envoy.http_dynamo_filter", "envoy.filters.http.dynamo"),
    ("envoy.fault", "envoy.filters.http.fault"),
    (
        "envoy.grpc_http1_bridge",
        "envoy.filters.http.grpc_http1_bridge",
    ),
    (
        "envoy.grpc_json_transcoder",
        "envoy.filters.http.grpc_json_transcoder",
    ),
    ("envoy.grpc_web", "envoy.filters.http.grpc_web"),
    ("envoy.gzip", "envoy.filters.http.gzip"),
    ("envoy.health_check", "envoy.filters.http.health_check"),
    ("envoy.ip_tagging", "envoy.filters.http.ip_tagging"),
    ("envoy.lua", "envoy.filters.http.lua"),
    ("envoy.rate_limit", "envoy.filters.http.ratelimit"),
    ("envoy.router", "envoy.filters.http.router"),
    ("envoy.squash", "envoy.filters.http.squash"),
    (
        "envoy.listener.http_inspector",
        "envoy.filters.listener.http_inspector",
    ),
    (
        "envoy.listener.original_dst",
        "envoy.filters.listener.original_dst",
    ),
    (
        "envoy.listener.original_src",
        "envoy.filters.listener.original_src",
    ),
    (
        "envoy.listener.proxy_protocol",
        "envoy.filters.listener.proxy_protocol",
    ),
    (
        "envoy.listener.tls_inspector",
        "envoy.filters.listener.tls_inspector",
    ),
    (
        "envoy.client_ssl_auth",
        "envoy.filters.network.client_ssl_auth",
    ),
    ("envoy.ext_authz", "envoy.filters.network.ext_authz"),
    (
        "envoy.http_connection_manager",
        "envoy.filters.network.http_connection_manager",
    ),
    ("envoy.mongo_proxy", "envoy.filters.network.mongo_proxy"),
    ("envoy.ratelimit", "envoy.filters.network.ratelimit"),
    ("envoy.redis_proxy", "envoy.filters.network.redis_proxy"),
    ("envoy.tcp_proxy", "envoy.filters.network.tcp_proxy"),
];
