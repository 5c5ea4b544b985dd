//! RDS: VirtualService features, delegation, precedence, and unknown hosts.

use super::*;

#[test]
fn virtual_service_features_translate() {
    let yaml = format!(
        r#"{}---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: a}}
spec:
  hosts: [web]
  http:
  - match: [{{uri: {{regex: "^/v[0-9]+/.*"}}, ignoreUriCase: true, queryParams: {{debug: {{exact: "1"}}}}}}]
    rewrite: {{uri: /new, authority: other.example}}
    timeout: 3s
    retries: {{attempts: 4, perTryTimeout: 1s, retryOn: "5xx,503", backoff: 250ms, retryIgnorePreviousHosts: false, retryRemoteLocalities: true}}
    mirror: {{host: web}}
    mirrorPercentage: {{value: 25}}
    route: [{{destination: {{host: web}}}}]
  - match: [{{uri: {{prefix: /old}}}}]
    redirect: {{uri: /moved, redirectCode: 302}}
  - match: [{{port: 8080}}]
    directResponse: {{status: 204}}
  - route: [{{destination: {{host: web}}}}]
    retries: {{attempts: 0}}
"#,
        se("a", "web", "HTTP")
    );
    let c = ctx(&yaml);
    let rc = route_config(&c, &proxy("a", &[]), "80");
    let vh = &rc.virtual_hosts[0];
    assert!(
        vh.domains.contains(&"web".to_string()) && vh.domains.contains(&"web.a:80".to_string()),
        "{:?}",
        vh.domains
    );
    assert_eq!(
        vh.routes.len(),
        3,
        "the port-8080 match does not apply on port 80"
    );
    let r0 = &vh.routes[0];
    let m = r0.r#match.as_ref().unwrap();
    assert!(!m.case_sensitive.unwrap().value);
    assert_eq!(m.query_parameters[0].name, "debug");
    let Some(route::Action::Route(a)) = &r0.action else {
        panic!()
    };
    assert_eq!(a.prefix_rewrite, "/new");
    assert!(
        matches!(&a.host_rewrite_specifier, Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(h)) if h == "other.example")
    );
    assert_eq!(a.timeout.unwrap().seconds, 3);
    let retry = a.retry_policy.as_ref().unwrap();
    assert_eq!(retry.num_retries.unwrap().value, 4);
    assert_eq!(retry.retriable_status_codes, [503]);
    assert!(retry.retry_on.contains("5xx") && retry.retry_on.contains("retriable-status-codes"));
    assert_eq!(
        retry
            .retry_back_off
            .as_ref()
            .unwrap()
            .base_interval
            .unwrap()
            .nanos,
        250_000_000
    );
    assert!(
        retry.retry_host_predicate.is_empty(),
        "retryIgnorePreviousHosts: false"
    );
    assert_eq!(
        retry.retry_priority.as_ref().unwrap().name,
        "envoy.retry_priorities.previous_priorities"
    );
    assert_eq!(
        a.request_mirror_policies[0]
            .runtime_fraction
            .as_ref()
            .unwrap()
            .default_value
            .unwrap()
            .numerator,
        250_000
    );
    let Some(route::Action::Redirect(rd)) = &vh.routes[1].action else {
        panic!()
    };
    assert_eq!(rd.response_code, 1, "FOUND");
    let Some(route::Action::Route(last)) = &vh.routes[2].action else {
        panic!()
    };
    assert!(last.retry_policy.is_none(), "attempts: 0 disables retries");
    let default_vs = route_config(&ctx(&se("a", "web", "HTTP")), &proxy("a", &[]), "80");
    let Some(route::Action::Route(d)) = &default_vs.virtual_hosts[0].routes[0].action else {
        panic!()
    };
    let default_retry = d.retry_policy.as_ref().unwrap();
    assert_eq!(
        default_retry.num_retries.unwrap().value,
        2,
        "Istio's default retry policy"
    );
    assert_eq!(
        default_retry.retry_on,
        "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
    );
    assert!(
        default_retry.retriable_status_codes.is_empty(),
        "as istiod, a 503 is not retried unless retryOn lists it"
    );
    assert_eq!(default_retry.retry_host_predicate.len(), 1);
    assert_eq!(
        default_vs.virtual_hosts.last().unwrap().name,
        "allow_any",
        "ALLOW_ANY passthrough host"
    );
}

#[test]
fn grpc_clients_get_api_listeners_by_name() {
    let c = ctx(&se("a", "echo", "GRPC"));
    let p = proxy("a", &[("GENERATOR", "grpc")]);
    let scope = c.scope(&p);
    let want: std::collections::BTreeSet<String> = [
        "echo.a.svc.cluster.local:80".to_string(),
        "unknown.a.svc.cluster.local:80".to_string(),
    ]
    .into();
    let lds = generate(&c, &p, &scope, TypeUrl::Listener, Some(&want));
    assert_eq!(lds.len(), 1, "only existing targets");
    let l =
        envoy_types::pb::envoy::config::listener::v3::Listener::decode(lds[0].any.value.as_slice())
            .unwrap();
    assert!(l.api_listener.is_some() && l.address.is_none());
    let cds = generate(
        &c,
        &p,
        &scope,
        TypeUrl::Cluster,
        Some(&["outbound|80||echo.a.svc.cluster.local".to_string()].into()),
    );
    let cl = Cluster::decode(cds[0].any.value.as_slice()).unwrap();
    assert_eq!(
        cl.lb_policy,
        LbPolicy::RoundRobin as i32,
        "gRPC-supported policy"
    );
}

/// Unknown hosts get istiod's answer: passed through under ALLOW_ANY, a 502 from `block_all` under
/// REGISTRY_ONLY; a Sidecar's `outboundTrafficPolicy` overrides the mesh's.
#[test]
fn outbound_traffic_policy_decides_unknown_hosts() {
    use envoy_types::pb::envoy::config::route::v3::route::Action;
    let yaml = se("default", "web", "HTTP");
    let fallback = |ctx: &PushContext| {
        let rc = route_config(ctx, &proxy("default", &[]), "80");
        let vh = rc
            .virtual_hosts
            .iter()
            .find(|v| v.domains == ["*"])
            .expect("catch-all virtual host")
            .clone();
        let status = match &vh.routes[0].action {
            Some(Action::DirectResponse(d)) => d.status,
            _ => 0,
        };
        (vh.name, status)
    };
    let registry_only = MeshSettings {
        outbound_allow_any: false,
        ..MeshSettings::default()
    };
    let strict = push_context_with(&yaml, registry_only.clone());
    assert_eq!(fallback(&strict), ("block_all".to_string(), 502));
    assert_eq!(fallback(&ctx(&yaml)), ("allow_any".to_string(), 0));

    let with_sidecar = format!(
        "{yaml}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: default}}\nspec: {{outboundTrafficPolicy: {{mode: ALLOW_ANY}}}}\n"
    );
    let overridden = push_context_with(&with_sidecar, registry_only);
    assert_eq!(fallback(&overridden), ("allow_any".to_string(), 0));
}

#[test]
fn delegate_virtual_services_are_merged_into_their_root() {
    let yaml = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: web, namespace: a}}\n\
spec: {{hosts: [web], http: [{{match: [{{uri: {{prefix: /api}}}}], delegate: {{name: api, namespace: b}}}}, {{route: [{{destination: {{host: web}}}}]}}]}}\n\
---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: api, namespace: b}}\n\
spec: {{http: [{{match: [{{uri: {{prefix: /api/v2}}}}], route: [{{destination: {{host: web.a.svc.cluster.local, subset: v2}}}}]}}]}}\n",
        se("a", "web", "HTTP")
    );
    let c = ctx(&yaml);
    let rc = route_config(&c, &proxy("a", &[]), "80");
    let routes = &rc.virtual_hosts[0].routes;
    use envoy_types::pb::envoy::config::route::v3::{Route as EnvoyRoute, route_match};
    let prefix = |r: &EnvoyRoute| match &r.r#match.as_ref().unwrap().path_specifier {
        Some(route_match::PathSpecifier::Prefix(p)) => p.clone(),
        other => format!("{other:?}"),
    };
    let Some(route::Action::Route(a)) = &routes[0].action else {
        panic!("a route action")
    };
    assert_eq!(prefix(&routes[0]), "/api/v2");
    assert!(
        matches!(&a.cluster_specifier, Some(route_action::ClusterSpecifier::Cluster(c)) if c == "outbound|80|v2|web.a.svc.cluster.local"),
        "{:?}",
        a.cluster_specifier
    );
    assert_eq!(
        routes.len(),
        2,
        "the delegate's route, then the root's default"
    );
}

#[test]
fn the_oldest_virtual_service_for_a_host_wins() {
    let vs = |name: &str, created: &str, subset: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: a, creationTimestamp: \"{created}\"}}\n\
spec: {{hosts: [web], http: [{{route: [{{destination: {{host: web, subset: {subset}}}}}]}}]}}\n"
        )
    };
    // "a-newer" sorts first by name, but "z-older" was created first: it keeps the host.
    let yaml = format!(
        "{}{}{}",
        se("a", "web", "HTTP"),
        vs("a-newer", "2026-06-01T00:00:00Z", "v2"),
        vs("z-older", "2025-01-01T00:00:00Z", "v1")
    );
    let c = ctx(&yaml);
    let rc = route_config(&c, &proxy("a", &[]), "80");
    let Some(route::Action::Route(a)) = &rc.virtual_hosts[0].routes[0].action else {
        panic!("a route")
    };
    assert!(
        matches!(&a.cluster_specifier, Some(route_action::ClusterSpecifier::Cluster(c)) if c == "outbound|80|v1|web.a.svc.cluster.local"),
        "{:?}",
        a.cluster_specifier
    );
}

/// A Kubernetes Service port that declares no protocol (name without a prefix, no appProtocol) is
/// sniffed as istiod sniffs it, so a VirtualService's HTTP routes apply to it: its VIP listener
/// sends plaintext HTTP to the HTTP connection manager, whose route configuration carries them.
#[test]
fn kubernetes_service_ports_without_a_protocol_are_sniffed() {
    let yaml = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.0.30
  ports: [{name: web, port: 8080, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.44.0.3], conditions: {ready: true}}]
ports: [{name: web, port: 8080}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [web]
  http:
  - match: [{headers: {x-canary: {exact: "1"}}}]
    fault: {abort: {httpStatus: 418, percentage: {value: 100}}}
    route: [{destination: {host: web}}]
  - route: [{destination: {host: web}}]
"#;
    let c = ctx(yaml);
    let p = proxy("shop", &[]);
    let vip = listener_named(&c, &p, "10.96.0.30_8080");
    assert!(
        vip.filter_chains.iter().any(|ch| ch
            .filter_chain_match
            .as_ref()
            .is_some_and(|m| !m.application_protocols.is_empty())),
        "a sniffed HTTP chain on the Service's VIP"
    );
    let rc = route_config(&c, &p, "web.shop.svc.cluster.local:8080");
    let routes = &rc.virtual_hosts[0].routes;
    assert_eq!(routes.len(), 2, "the VirtualService's two routes");
    assert!(
        routes[0]
            .typed_per_filter_config
            .contains_key("envoy.filters.http.fault")
    );
}

/// `{}` is a valid Istio StringMatch: a header, query parameter or method that is present, a
/// header that is absent (withoutHeaders), a URI that is anything (istiod's present matches).
#[test]
fn empty_string_matches_ask_for_presence() {
    use envoy_types::pb::envoy::config::route::v3::{
        header_matcher, query_parameter_matcher, route_match,
    };
    let yaml = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: web, namespace: a}}\nspec:\n  hosts: [web.a.svc.cluster.local]\n  http:\n  - match: [{{uri: {{}}, method: {{}}, headers: {{end-user: {{}}}}, withoutHeaders: {{x-debug: {{}}}}, queryParams: {{q: {{}}}}}}]\n    route: [{{destination: {{host: web.a.svc.cluster.local}}}}]\n",
        se("a", "web", "HTTP")
    );
    let rc = route_config(&ctx(&yaml), &proxy("a", &[]), "80");
    let vh = rc
        .virtual_hosts
        .iter()
        .find(|v| v.domains.iter().any(|d| d == "web.a.svc.cluster.local"))
        .unwrap();
    let m = vh.routes[0].r#match.as_ref().unwrap();
    assert_eq!(
        m.path_specifier,
        Some(route_match::PathSpecifier::Prefix("/".into()))
    );
    let present = Some(header_matcher::HeaderMatchSpecifier::PresentMatch(true));
    let by_name: Vec<(&str, bool, bool)> = m
        .headers
        .iter()
        .map(|h| {
            (
                h.name.as_str(),
                h.header_match_specifier == present,
                h.invert_match,
            )
        })
        .collect();
    assert_eq!(
        by_name,
        [
            ("end-user", true, false),
            ("x-debug", true, true),
            (":method", true, false)
        ]
    );
    assert_eq!(
        m.query_parameters[0].query_parameter_match_specifier,
        Some(query_parameter_matcher::QueryParameterMatchSpecifier::PresentMatch(true))
    );
}

/// A headless Kubernetes Service on an HTTP port (a StatefulSet's): as istiod, its virtual host
/// also matches one label more than each of its domains, so `web-0.web.shop.svc.cluster.local`
/// (a pod's own name) is routed as the service, to the original-destination cluster.
#[test]
fn headless_http_services_route_their_pods_names() {
    let yaml = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n\
spec: {clusterIP: None, ports: [{name: http, port: 8080, targetPort: 8080}]}\n\
---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}\n\
addressType: IPv4\nendpoints: [{addresses: [10.44.0.3], conditions: {ready: true}}]\nports: [{name: http, port: 8080}]\n";
    let c = ctx(yaml);
    let rc = route_config(&c, &proxy("shop", &[]), "8080");
    let vh = rc
        .virtual_hosts
        .iter()
        .find(|v| v.name == "web.shop.svc.cluster.local:8080")
        .expect("the service's virtual host");
    for d in [
        "web.shop.svc.cluster.local",
        "*.web.shop.svc.cluster.local",
        "*.web.shop.svc.cluster.local:8080",
        "*.web",
    ] {
        assert!(
            vh.domains.iter().any(|x| x == d),
            "{d} missing from {:?}",
            vh.domains
        );
    }
    let cluster = cluster(
        &c,
        &proxy("shop", &[]),
        "outbound|8080||web.shop.svc.cluster.local",
    );
    assert_eq!(
        cluster.cluster_discovery_type,
        Some(
            envoy_types::pb::envoy::config::cluster::v3::cluster::ClusterDiscoveryType::Type(
                envoy_types::pb::envoy::config::cluster::v3::cluster::DiscoveryType::OriginalDst
                    as i32
            )
        )
    );
}
