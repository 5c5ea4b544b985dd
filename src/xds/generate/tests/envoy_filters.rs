//! EnvoyFilter patches on what a proxy is sent, as istiod applies them.

use super::*;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

fn envoy_filter(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{spec}\n"
    )
}

/// The HTTP filter names of the first connection manager of listener `name`.
fn http_filters(listeners: &[Listener], name: &str) -> Vec<String> {
    let l = listeners
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"));
    for chain in &l.filter_chains {
        for f in &chain.filters {
            if let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type
                && any.type_url.ends_with("HttpConnectionManager")
                && let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice())
            {
                return hcm.http_filters.iter().map(|f| f.name.clone()).collect();
            }
        }
    }
    panic!("no connection manager on {name}")
}

const LUA: &str = r#"{name: envoy.filters.http.lua, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, defaultSourceCode: {inlineString: "function envoy_on_response(h) h:headers():add('x-lua', 'yes') end"}}}"#;

/// Cluster patches: MERGE by service and port (a Duration replaced whole), REMOVE by name, ADD
/// of a cluster of its own; a patch whose value is not a Cluster is skipped and reported while
/// the rest of its EnvoyFilter applies.
#[test]
fn cluster_patches_merge_remove_and_add() {
    let yaml = format!(
        "{}{}{}",
        se("a", "web", "HTTP"),
        se("a", "db", "TCP"),
        envoy_filter(
            "istio-system",
            "clusters",
            r#"  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: web.a.svc.cluster.local, portNumber: 80}}
    patch: {operation: MERGE, value: {connect_timeout: 0.25s, per_connection_buffer_limit_bytes: 1024}}
  - applyTo: CLUSTER
    match: {cluster: {name: "outbound|80||db.a.svc.cluster.local"}}
    patch: {operation: REMOVE}
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND}
    patch: {operation: ADD, value: {name: extra, type: STATIC, connect_timeout: 1s}}
  - applyTo: CLUSTER
    patch: {operation: MERGE, value: {connect_timeout: soon}}"#
        )
    );
    let c = ctx(&yaml);
    let p = proxy("a", &[]);
    let web = cluster(&c, &p, "outbound|80||web.a.svc.cluster.local");
    assert_eq!(
        web.connect_timeout.map(|d| (d.seconds, d.nanos)),
        Some((0, 250_000_000))
    );
    assert_eq!(
        web.per_connection_buffer_limit_bytes.map(|v| v.value),
        Some(1024)
    );
    let names: Vec<String> = clusters_of(&c, &p).into_iter().map(|c| c.name).collect();
    assert!(!names.iter().any(|n| n.contains("db.a")), "{names:?}");
    assert!(names.contains(&"extra".to_string()), "{names:?}");
    let skipped = &crate::xds::generate::passes::envoy_filter::compiled(&c).skipped;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].envoy_filter, "istio-system/clusters");
    assert_eq!(skipped[0].patch, 3);
}

/// HTTP filter patches: an insert before the router, a replace and a remove by name; two
/// EnvoyFilters apply in priority order (the root namespace's first at equal priority); a
/// workload selector and a context that do not match leave the proxy alone.
#[test]
fn http_filter_patches_keep_istiods_order() {
    let insert = format!(
        "  priority: 10\n  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {{context: SIDECAR_OUTBOUND, listener: {{portNumber: 80, filterChain: {{filter: {{name: envoy.filters.network.http_connection_manager, subFilter: {{name: envoy.filters.http.router}}}}}}}}}}\n    patch: {{operation: INSERT_BEFORE, value: {LUA}}}"
    );
    let first = "  priority: -5\n  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 80}}\n    patch: {operation: INSERT_FIRST, value: {name: first, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}}";
    let elsewhere = "  workloadSelector: {labels: {app: other}}\n  configPatches:\n  - applyTo: HTTP_FILTER\n    patch: {operation: INSERT_FIRST, value: {name: never}}";
    let inbound = "  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {context: SIDECAR_INBOUND}\n    patch: {operation: INSERT_FIRST, value: {name: inbound-only}}";
    let yaml = format!(
        "{}{}{}{}{}",
        se("a", "web", "HTTP"),
        envoy_filter("a", "lua", &insert),
        envoy_filter("istio-system", "first", first),
        envoy_filter("a", "elsewhere", elsewhere),
        envoy_filter("a", "inbound", inbound),
    );
    let c = ctx(&yaml);
    let listeners = listeners_of(&c, &proxy("a", &[]));
    let filters = http_filters(&listeners, "0.0.0.0_80");
    let at = |n: &str| filters.iter().position(|f| f == n);
    assert_eq!(at("first"), Some(0), "{filters:?}");
    assert_eq!(
        at("envoy.filters.http.lua").map(|i| i + 1),
        at("envoy.filters.http.router"),
        "{filters:?}"
    );
    assert!(at("never").is_none() && at("inbound-only").is_none());

    let replace = "  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: first}}}}}\n    patch: {operation: REPLACE, value: {name: replaced, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}}\n  - applyTo: HTTP_FILTER\n    match: {listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.lua}}}}}\n    patch: {operation: REMOVE}";
    let c = ctx(&format!(
        "{yaml}{}",
        envoy_filter(
            "istio-system",
            "aa-late",
            &format!("  priority: 20\n{replace}")
        )
    ));
    let filters = http_filters(&listeners_of(&c, &proxy("a", &[])), "0.0.0.0_80");
    assert_eq!(filters.first().map(String::as_str), Some("replaced"));
    assert!(!filters.iter().any(|f| f == "envoy.filters.http.lua"));
}

/// `proxy.proxyVersion` is a regular expression over the proxy's ISTIO_VERSION: proxies of
/// another version, or none, are not patched.
#[test]
fn proxy_version_matches_select_proxies() {
    let yaml = format!(
        "{}{}",
        se("a", "web", "HTTP"),
        envoy_filter(
            "istio-system",
            "versioned",
            "  configPatches:\n  - applyTo: CLUSTER\n    match: {proxy: {proxyVersion: '^1\\.30.*'}, cluster: {service: web.a.svc.cluster.local}}\n    patch: {operation: MERGE, value: {connect_timeout: 7s}}"
        )
    );
    let c = ctx(&yaml);
    let timeout = |version: &[(&str, &str)]| {
        cluster(
            &c,
            &proxy("a", version),
            "outbound|80||web.a.svc.cluster.local",
        )
        .connect_timeout
        .map(|d| d.seconds)
    };
    assert_eq!(timeout(&[("ISTIO_VERSION", "1.30.3")]), Some(7));
    assert_ne!(timeout(&[("ISTIO_VERSION", "1.29.0")]), Some(7));
    assert_ne!(timeout(&[]), Some(7));
}

/// Route configuration patches: a virtual host merged (a response header added), a route's
/// timeout merged, a virtual host added.
#[test]
fn route_patches_merge_and_add() {
    let yaml = format!(
        "{}{}",
        se("a", "web", "HTTP"),
        envoy_filter(
            "a",
            "routes",
            r#"  configPatches:
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 80, vhost: {name: "web.a.svc.cluster.local:80"}}}
    patch: {operation: MERGE, value: {response_headers_to_add: [{header: {key: x-patched, value: "yes"}}]}}
  - applyTo: HTTP_ROUTE
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: "web.a.svc.cluster.local:80", route: {action: ROUTE}}}}
    patch: {operation: MERGE, value: {route: {timeout: 3s}}}
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {name: "80"}}
    patch: {operation: ADD, value: {name: added, domains: [added.example]}}"#
        )
    );
    let c = ctx(&yaml);
    let rc = route_config(&c, &proxy("a", &[]), "80");
    let web = rc
        .virtual_hosts
        .iter()
        .find(|v| v.name == "web.a.svc.cluster.local:80")
        .expect("the service's virtual host");
    assert_eq!(web.response_headers_to_add.len(), 1);
    let timeout = web.routes.iter().find_map(|r| match &r.action {
        Some(route::Action::Route(a)) => a.timeout.map(|t| t.seconds),
        _ => None,
    });
    assert_eq!(timeout, Some(3));
    assert!(rc.virtual_hosts.iter().any(|v| v.name == "added"));
}

/// LISTENER_FILTER patches: an insert after a named listener filter, a remove by name, on the
/// virtual inbound listener (its port is not matched there, as istiod).
#[test]
fn listener_filter_patches_insert_and_remove() {
    let yaml = format!(
        "{}{}",
        se("a", "web", "HTTP"),
        envoy_filter(
            "a",
            "listener-filters",
            r#"  configPatches:
  - applyTo: LISTENER_FILTER
    match: {context: SIDECAR_INBOUND, listener: {name: virtualInbound, portNumber: 9999, listenerFilter: envoy.filters.listener.original_dst}}
    patch: {operation: INSERT_AFTER, value: {name: after-original-dst, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol}}}
  - applyTo: LISTENER_FILTER
    match: {context: SIDECAR_INBOUND, listener: {name: virtualInbound, listenerFilter: envoy.filters.listener.tls_inspector}}
    patch: {operation: REMOVE}"#
        )
    );
    let c = ctx(&yaml);
    let listeners = listeners_of(&c, &proxy("a", &[]));
    let inbound = listeners
        .iter()
        .find(|l| l.name == "virtualInbound")
        .expect("virtualInbound");
    let before = listeners_of(&ctx(&se("a", "web", "HTTP")), &proxy("a", &[]))
        .into_iter()
        .find(|l| l.name == "virtualInbound")
        .expect("virtualInbound");
    let names = listener_filter_names(inbound);
    assert!(names.contains(&"after-original-dst"), "{names:?}");
    let mut expected: Vec<&str> = listener_filter_names(&before)
        .into_iter()
        .filter(|n| *n != "envoy.filters.listener.tls_inspector")
        .collect();
    if let Some(i) = expected
        .iter()
        .position(|n| *n == "envoy.filters.listener.original_dst")
    {
        expected.insert(i + 1, "after-original-dst");
    }
    assert_eq!(names, expected);
}

/// An inbound cluster's name carries no host: a cluster match by service picks the inbound
/// clusters of the workload ports that service selects (istiod passes the instances' hosts).
#[test]
fn inbound_cluster_service_match_uses_the_services_at_the_port() {
    let yaml = workload_yaml(&envoy_filter(
        "a",
        "inbound",
        r#"  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_INBOUND, cluster: {service: app.a.svc.cluster.local, portNumber: 5432}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 2048}}
  - applyTo: CLUSTER
    match: {context: SIDECAR_INBOUND, cluster: {service: other.a.svc.cluster.local}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 99}}"#,
    ));
    let c = ctx(&yaml);
    let p = verified("a");
    let limit = |name: &str| {
        cluster(&c, &p, name)
            .per_connection_buffer_limit_bytes
            .map(|v| v.value)
    };
    assert_eq!(limit("inbound|5432||"), Some(2048));
    assert_ne!(limit("inbound|80||"), Some(2048));
    assert_ne!(limit("inbound|80||"), Some(99));
}

/// `proxy.metadata` matches as istiod's: every entry equal to the node's metadata; a proxy
/// without the key, or with another value, is left alone.
#[test]
fn proxy_metadata_matches_select_proxies() {
    let yaml = format!(
        "{}{}",
        se("a", "web", "HTTP"),
        envoy_filter(
            "istio-system",
            "by-metadata",
            "  configPatches:\n  - applyTo: CLUSTER\n    match: {proxy: {metadata: {TIER: gold, REGION: eu}}, cluster: {service: web.a.svc.cluster.local}}\n    patch: {operation: MERGE, value: {connect_timeout: 9s}}"
        )
    );
    let c = ctx(&yaml);
    let timeout = |meta: &[(&str, &str)]| {
        cluster(
            &c,
            &proxy("a", meta),
            "outbound|80||web.a.svc.cluster.local",
        )
        .connect_timeout
        .map(|d| d.seconds)
    };
    assert_eq!(timeout(&[("TIER", "gold"), ("REGION", "eu")]), Some(9));
    assert_ne!(timeout(&[("TIER", "gold")]), Some(9));
    assert_ne!(timeout(&[("TIER", "silver"), ("REGION", "eu")]), Some(9));
    // Two proxies that differ only in other metadata share a view.
    let a = c.scope(&proxy("a", &[("TIER", "gold"), ("POD_NAME", "one")]));
    let b = c.scope(&proxy("a", &[("TIER", "gold"), ("POD_NAME", "two")]));
    assert_eq!(a.key, b.key);
}

/// istiod applies EnvoyFilters last, to the finished config: a MERGE of the connection
/// manager's `tracing` (Istio's tracing is on by default) is what the proxy gets, not
/// overwritten by the tracing pass afterwards.
#[test]
fn a_connection_manager_patch_wins_over_istios_tracing() {
    let tracing = "  configPatches:\n  - applyTo: NETWORK_FILTER\n    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 80, filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}\n    patch: {operation: MERGE, value: {typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, tracing: {random_sampling: {value: 42.5}, max_path_tag_length: 77}}}}";
    let yaml = format!(
        "{}{}",
        se("a", "web", "HTTP"),
        envoy_filter("a", "tracing", tracing)
    );
    let c = ctx(&yaml);
    let listeners = listeners_of(&c, &proxy("a", &[]));
    let listener = listeners.iter().find(|l| l.name == "0.0.0.0_80").unwrap();
    let hcm = listener
        .filter_chains
        .iter()
        .flat_map(|ch| ch.filters.iter())
        .find_map(|f| match &f.config_type {
            Some(filter::ConfigType::TypedConfig(a))
                if a.type_url.ends_with("HttpConnectionManager") =>
            {
                HttpConnectionManager::decode(a.value.as_slice()).ok()
            }
            _ => None,
        })
        .expect("a connection manager on port 80");
    let tracing = hcm.tracing.expect("tracing");
    assert_eq!(tracing.random_sampling.map(|p| p.value), Some(42.5));
    assert_eq!(tracing.max_path_tag_length.map(|v| v.value), Some(77));
}
