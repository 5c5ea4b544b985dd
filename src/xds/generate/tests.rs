use super::*;
use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::store::Store;
use crate::xds::context::PushContext;
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as VKind};
use prost::Message;

fn ctx(yaml: &str) -> PushContext {
    let snap = Store::from_yaml(yaml).snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    PushContext::new(1, snap, reg, MeshSettings::default())
}

fn proxy(ns: &str, meta: &[(&str, &str)]) -> Proxy {
    let node = Node {
        id: format!("sidecar~10.0.0.9~p.{ns}~{ns}.svc.cluster.local"),
        user_agent_name: "envoy".into(),
        metadata: Some(Struct {
            fields: meta
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        Value {
                            kind: Some(VKind::StringValue(v.to_string())),
                        },
                    )
                })
                .collect(),
        }),
        ..Default::default()
    };
    Proxy::from_node(Some(&node)).unwrap()
}

fn se(ns: &str, name: &str, proto: &str) -> String {
    format!(
        "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {ns}}}\n\
spec: {{hosts: [{name}.{ns}.svc.cluster.local], ports: [{{number: 80, name: p, protocol: {proto}}}], resolution: STATIC, endpoints: [{{address: 10.1.1.1, labels: {{version: v1}}}}]}}\n"
    )
}

fn clusters_of(ctx: &PushContext, p: &Proxy) -> Vec<Cluster> {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Cluster, None)
        .iter()
        .map(|r| Cluster::decode(r.any.value.as_slice()).unwrap())
        .collect()
}

fn cluster(ctx: &PushContext, p: &Proxy, name: &str) -> Cluster {
    clusters_of(ctx, p)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no cluster {name}"))
}

fn route_config(ctx: &PushContext, p: &Proxy, name: &str) -> RouteConfiguration {
    let scope = ctx.scope(p);
    let names = [name.to_string()].into_iter().collect();
    let r = generate(ctx, p, &scope, TypeUrl::Route, Some(&names));
    RouteConfiguration::decode(r[0].any.value.as_slice()).unwrap()
}

#[test]
fn proxies_sharing_a_scope_share_built_resources() {
    let c = ctx(&format!(
        "{}{}",
        se("a", "web", "HTTP"),
        se("a", "db", "TCP")
    ));
    let (p1, p2, other) = (proxy("a", &[]), proxy("a", &[]), proxy("b", &[]));
    let (s1, s2, s3) = (c.scope(&p1), c.scope(&p2), c.scope(&other));
    let r1 = generate(&c, &p1, &s1, TypeUrl::Cluster, None);
    let r2 = generate(&c, &p2, &s2, TypeUrl::Cluster, None);
    assert!(
        r1.iter().zip(&r2).all(|(a, b)| Arc::ptr_eq(a, b)),
        "built once, shared"
    );
    let r3 = generate(&c, &other, &s3, TypeUrl::Cluster, None);
    assert!(
        !Arc::ptr_eq(&r1[0], &r3[0]),
        "another namespace is another scope"
    );
}

/// A sidecar at `ip` in namespace `vms` with the labels every VM of one WorkloadGroup shares.
/// A proxy with node id `id` and the single label `app: <app>`.
fn labelled(id: &str, app: &str) -> Proxy {
    let label = Value {
        kind: Some(VKind::StringValue(app.into())),
    };
    let labels = Value {
        kind: Some(VKind::StructValue(Struct {
            fields: [("app".to_string(), label)].into(),
        })),
    };
    let node = Node {
        id: id.into(),
        metadata: Some(Struct {
            fields: [("LABELS".to_string(), labels)].into(),
        }),
        ..Default::default()
    };
    Proxy::from_node(Some(&node)).unwrap()
}

fn vm_at(ip: &str) -> Proxy {
    labelled(&format!("sidecar~{ip}~vm.vms~vms.svc.cluster.local"), "vm")
}

/// An endpoint-only push keeps its predecessor's proxy views: a proxy whose address a moved
/// endpoint now serves must still get that service's inbound cluster, never the view it had.
#[test]
fn shared_views_follow_the_ports_a_moved_endpoint_serves() {
    let at = |ip: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: billing, namespace: vms}}\nspec: {{hosts: [billing.vms.svc.cluster.local], ports: [{{number: 8080, name: http, protocol: HTTP}}], resolution: STATIC, endpoints: [{{address: {ip}}}]}}\n"
        )
    };
    let vm = vm_at("10.9.0.1");
    let inbound = |c: &PushContext| -> Vec<String> {
        clusters_of(c, &vm)
            .into_iter()
            .map(|cl| cl.name)
            .filter(|n| n.starts_with("inbound|"))
            .collect()
    };
    let before = ctx(&at("10.9.0.2"));
    assert!(inbound(&before).is_empty());
    let after = ctx(&at("10.9.0.1")).sharing_scopes(&before.scope_cache());
    assert_eq!(inbound(&after), ["inbound|8080||"]);
    let back = ctx(&at("10.9.0.2")).sharing_scopes(&after.scope_cache());
    assert!(inbound(&back).is_empty());
}

#[test]
fn same_label_proxies_at_different_ips_get_their_own_inbound_config() {
    // Two VMs with the same labels behind different services: each must get the inbound
    // clusters and listener chains of the ports served at its own address, never the other's.
    let c = ctx("
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: billing, namespace: vms}
spec:
  hosts: [billing.vms.svc.cluster.local]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.9.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ledger, namespace: vms}
spec:
  hosts: [ledger.vms.svc.cluster.local]
  ports: [{number: 9090, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.9.0.2}]
");
    let (first, second) = (vm_at("10.9.0.1"), vm_at("10.9.0.2"));
    assert_eq!(first.labels, second.labels);
    let inbound = |p: &Proxy| -> Vec<String> {
        clusters_of(&c, p)
            .into_iter()
            .map(|cl| cl.name)
            .filter(|n| n.starts_with("inbound|"))
            .collect()
    };
    // Generated in this order, the second VM would be served the first's cached clusters if the
    // cache key left out what the generator reads of the proxy's address.
    assert_eq!(inbound(&first), ["inbound|8080||"]);
    assert_eq!(inbound(&second), ["inbound|9090||"]);
    let chains = |p: &Proxy| -> Vec<String> {
        inbound_chains(&listener_named(&c, p, "virtualInbound"))
            .into_iter()
            .map(|(name, _)| name)
            .filter(|n| !n.starts_with("inbound-passthrough"))
            .collect()
    };
    assert_eq!(chains(&first), ["inbound|8080||"]);
    assert_eq!(chains(&second), ["inbound|9090||"]);
}

#[test]
fn sidecar_egress_and_export_to_scope_what_a_proxy_sees() {
    let yaml = format!(
        "{}{}{}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\nspec: {{egress: [{{hosts: [\"./*\"]}}]}}\n",
        se("a", "web", "HTTP"),
        se("b", "api", "HTTP"),
        se("b", "private", "HTTP").replace(
            "resolution: STATIC",
            "resolution: STATIC, exportTo: [\".\"]"
        )
    );
    let c = ctx(&yaml);
    let names = |ns: &str| -> Vec<String> {
        c.scope(&proxy(ns, &[]))
            .services
            .iter()
            .map(|s| s.hostname.clone())
            .collect()
    };
    assert_eq!(
        names("a"),
        ["web.a.svc.cluster.local"],
        "Sidecar egress ./* keeps a proxy to its namespace"
    );
    assert_eq!(
        names("c"),
        ["api.b.svc.cluster.local", "web.a.svc.cluster.local"],
        "exportTo . hides private from others"
    );
    assert!(names("b").contains(&"private.b.svc.cluster.local".to_string()));
}

#[test]
fn destination_rule_policies_become_cluster_settings() {
    let yaml = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: web, namespace: a}}\nspec:\n  host: web\n  trafficPolicy:\n    loadBalancer: {{consistentHash: {{httpHeaderName: x-user}}}}\n    connectionPool: {{tcp: {{maxConnections: 7, connectTimeout: 250ms}}, http: {{http2MaxRequests: 9}}}}\n    outlierDetection: {{consecutive5xxErrors: 3, interval: 5s, baseEjectionTime: 30s}}\n    tls: {{mode: SIMPLE, caCertificates: /etc/ca.pem, sni: web.example}}\n  subsets:\n  - name: v1\n    labels: {{version: v1}}\n    trafficPolicy: {{loadBalancer: {{simple: ROUND_ROBIN}}}}\n",
        se("a", "web", "GRPC")
    );
    let c = ctx(&yaml);
    let p = proxy("a", &[]);
    let base = cluster(&c, &p, "outbound|80||web.a.svc.cluster.local");
    assert_eq!(base.lb_policy, LbPolicy::RingHash as i32);
    let t = &base.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(
        (
            t.max_connections.unwrap().value,
            t.max_requests.unwrap().value
        ),
        (7, 9)
    );
    assert_eq!(base.connect_timeout.unwrap().nanos, 250_000_000);
    let od = base.outlier_detection.as_ref().unwrap();
    assert_eq!(
        (
            od.consecutive_5xx.unwrap().value,
            od.enforcing_consecutive_5xx.unwrap().value
        ),
        (3, 100)
    );
    assert!(base.transport_socket.is_some(), "SIMPLE TLS");
    assert!(
        base.typed_extension_protocol_options
            .contains_key("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"),
        "gRPC port speaks HTTP/2 upstream"
    );
    let v1 = cluster(&c, &p, "outbound|80|v1|web.a.svc.cluster.local");
    assert_eq!(
        v1.lb_policy,
        LbPolicy::RoundRobin as i32,
        "subset policy overrides"
    );
    let rc = route_config(&c, &p, "80");
    let Some(route::Action::Route(action)) = &rc.virtual_hosts[0].routes[0].action else {
        panic!()
    };
    assert!(
        format!("{:?}", action.hash_policy).contains("x-user"),
        "hash policy on the route"
    );
}

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
fn listeners_follow_interception_mode() {
    let c = ctx(&format!(
        "{}{}",
        se("a", "web", "HTTP"),
        se("a", "db", "TCP").replace("number: 80", "number: 5432")
    ));
    let names = |p: &Proxy| -> Vec<String> {
        generate(&c, p, &c.scope(p), TypeUrl::Listener, None)
            .iter()
            .map(|r| r.name.to_string())
            .collect()
    };
    assert_eq!(
        names(&proxy("a", &[("INTERCEPTION_MODE", "NONE")])),
        ["127.0.0.1_80", "127.0.0.1_5432"]
    );
    assert_eq!(
        names(&proxy("a", &[])),
        [
            "0.0.0.0_80",
            "0.0.0.0_5432",
            "virtualOutbound",
            "virtualInbound"
        ]
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

#[test]
fn lookups_prefer_exact_hosts_then_the_most_specific_wildcard_and_respect_export_to() {
    let c = ctx(r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a-wild, namespace: default}
spec: {hosts: ["*.example.com"], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b-narrow, namespace: default}
spec: {hosts: ["*.api.example.com"], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: c-hidden, namespace: default}
spec: {hosts: [v1.api.example.com], exportTo: ["."], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: d-exact, namespace: other}
spec: {hosts: [v1.api.example.com], http: [{route: [{destination: {host: x}}]}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: wild, namespace: default}
spec: {host: "*.example.com", trafficPolicy: {loadBalancer: {simple: RANDOM}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: exact, namespace: default}
spec: {host: v1.api.example.com, trafficPolicy: {loadBalancer: {simple: RANDOM}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se, namespace: default}
spec: {hosts: [v1.api.example.com, v2.api.example.com, www.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}
"#);
    let vs = |ns: &str, host: &str| {
        c.virtual_service_for(ns, host)
            .map(|v| v.config.metadata.name.clone())
    };
    assert_eq!(
        vs("default", "v1.api.example.com").as_deref(),
        Some("c-hidden"),
        "exact, same namespace"
    );
    assert_eq!(
        vs("third", "v1.api.example.com").as_deref(),
        Some("d-exact"),
        "exportTo . hides c-hidden"
    );
    assert_eq!(
        vs("default", "v2.api.example.com").as_deref(),
        Some("b-narrow"),
        "most specific wildcard"
    );
    assert_eq!(vs("default", "www.example.com").as_deref(), Some("a-wild"));
    assert_eq!(vs("default", "www.other.com"), None);
    let svc = |host: &str| {
        c.registry
            .services
            .values()
            .find(|s| s.hostname == host)
            .cloned()
            .unwrap_or_else(|| panic!("{host} not in the registry"))
    };
    let dr = |host: &str| {
        c.destination_rule_for("default", &Default::default(), &svc(host))
            .map(|d| d.config.metadata.name.clone())
    };
    assert_eq!(dr("v1.api.example.com").as_deref(), Some("exact"));
    assert_eq!(dr("www.example.com").as_deref(), Some("wild"));
}

/// A proxy at 10.0.0.9 that proved an identity (as on the TLS port with a token).
fn verified(ns: &str) -> Proxy {
    let mut p = proxy(ns, &[]);
    p.identity = Some(crate::model::identity::Identity {
        trust_domain: "cluster.local".into(),
        namespace: ns.into(),
        service_account: "default".into(),
    });
    p.labels.insert("app".into(), "app".into());
    p
}

fn listener_named(ctx: &PushContext, p: &Proxy, name: &str) -> Listener {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Listener, None)
        .iter()
        .map(|r| Listener::decode(r.any.value.as_slice()).unwrap())
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

use envoy_types::pb::envoy::config::listener::v3::Listener;

/// The workload at 10.0.0.9 serves `app` on ports 80 (HTTP) and 5432 (TCP).
fn workload_yaml(extra: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: app, namespace: a}}\n\
spec: {{hosts: [app.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{{number: 80, name: http, protocol: HTTP}}, {{number: 5432, name: tcp, protocol: TCP}}], resolution: STATIC, \
endpoints: [{{address: 10.0.0.9, labels: {{app: app, security.istio.io/tlsMode: istio}}}}]}}\n{extra}"
    )
}

fn inbound_chains(l: &Listener) -> Vec<(String, String)> {
    l.filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.clone().unwrap_or_default();
            (c.name.clone(), m.transport_protocol)
        })
        .collect()
}

#[test]
fn peer_authentication_shapes_inbound_chains() {
    let strict_db = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: db, namespace: a}\n\
spec: {selector: {matchLabels: {app: app}}, mtls: {mode: PERMISSIVE}, portLevelMtls: {5432: {mode: STRICT}}}\n";
    let c = ctx(&workload_yaml(strict_db));
    let chains = inbound_chains(&listener_named(&c, &verified("a"), "virtualInbound"));
    assert_eq!(
        chains,
        [
            ("inbound|80||-mtls".to_string(), "tls".to_string()),
            ("inbound|80||".into(), "raw_buffer".into()),
            ("inbound|5432||-mtls".into(), "tls".into()),
            ("inbound-passthrough-mtls-http".into(), "tls".into()),
            ("inbound-passthrough-http".into(), "raw_buffer".into()),
            ("inbound-passthrough-mtls-tcp".into(), "tls".into()),
            ("inbound-passthrough-tcp".into(), "raw_buffer".into()),
            ("inbound-passthrough-tls-tcp".into(), "tls".into()),
        ],
        "PERMISSIVE takes mTLS and plaintext, on the workload's ports and any other; the STRICT port mTLS only"
    );
    // Without an identity the proxy cannot terminate mTLS: PERMISSIVE stays plaintext, STRICT
    // stays closed.
    let mut anonymous = proxy("a", &[]);
    anonymous.labels.insert("app".into(), "app".into());
    let chains = inbound_chains(&listener_named(&c, &anonymous, "virtualInbound"));
    assert_eq!(chains[0], ("inbound|80||".to_string(), "".to_string()));
    assert_eq!(
        chains[1],
        (
            "inbound|5432||-strict-without-certificate".to_string(),
            "".to_string()
        ),
        "STRICT without a certificate takes nothing"
    );

    let disabled = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: istio-system}\nspec: {mtls: {mode: DISABLE}}\n";
    let c = ctx(&workload_yaml(disabled));
    let chains = inbound_chains(&listener_named(&c, &verified("a"), "virtualInbound"));
    assert!(
        chains
            .iter()
            .filter(|(n, _)| n.starts_with("inbound|"))
            .all(|(_, t)| t.is_empty()),
        "{chains:?}"
    );

    // Workload-wide STRICT closes the ports no service names too: only mTLS passes through.
    let strict = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: a}\nspec: {mtls: {mode: STRICT}}\n";
    let c = ctx(&workload_yaml(strict));
    let l = listener_named(&c, &verified("a"), "virtualInbound");
    let passthrough: Vec<&envoy_types::pb::envoy::config::listener::v3::FilterChain> = l
        .filter_chains
        .iter()
        .filter(|ch| ch.name.starts_with("inbound-passthrough"))
        .collect();
    assert!(!passthrough.is_empty());
    assert!(
        passthrough.iter().all(|ch| ch.transport_socket.is_some()
            && ch.filter_chain_match.as_ref().unwrap().transport_protocol == "tls"),
        "{:?}",
        passthrough.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
}

#[test]
fn automatic_mtls_for_mesh_endpoints_when_the_proxy_has_an_identity() {
    let c = ctx(&workload_yaml(""));
    let with = cluster(&c, &verified("b"), "outbound|80||app.a.svc.cluster.local");
    let names: Vec<&str> = with
        .transport_socket_matches
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(names, ["tlsMode-istio", "tlsMode-disabled"]);
    // The TLS server name names the cluster, as istiod's (`connection.sni` policies read it).
    let sni = b"outbound_.80_._.app.a.svc.cluster.local";
    let bytes = with.encode_to_vec();
    assert!(bytes.windows(sni.len()).any(|w| w == sni));
    let without = cluster(&c, &proxy("b", &[]), "outbound|80||app.a.svc.cluster.local");
    assert!(without.transport_socket_matches.is_empty());

    let scope = c.scope(&verified("b"));
    let names = ["outbound|80||app.a.svc.cluster.local".to_string()]
        .into_iter()
        .collect();
    let cla = generate(&c, &verified("b"), &scope, TypeUrl::Endpoint, Some(&names));
    let cla = envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment::decode(
        cla[0].any.value.as_slice(),
    )
    .unwrap();
    let md = cla.endpoints[0].lb_endpoints[0].metadata.clone().unwrap();
    assert!(
        md.filter_metadata
            .contains_key("envoy.transport_socket_match")
    );
}

#[test]
fn authorization_policies_become_rbac_filters_with_stable_bytes() {
    let policies = "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny, namespace: a}\n\
spec: {action: DENY, rules: [{to: [{operation: {methods: [DELETE]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: allow-1, namespace: a}\n\
spec: {selector: {matchLabels: {app: app}}, rules: [{from: [{source: {namespaces: [b]}}]}, {to: [{operation: {paths: [/healthz]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: other, namespace: a}\n\
spec: {selector: {matchLabels: {app: nope}}, rules: [{}]}\n";
    let filters = |c: &PushContext| super::authz::http_filters(c, &c.scope(&verified("a")));
    let c = ctx(&workload_yaml(policies));
    let built = filters(&c);
    assert_eq!(built.len(), 2, "a DENY filter, then an ALLOW filter");
    let decode = |f: &envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter| {
        match &f.config_type {
            Some(envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType::TypedConfig(a)) => {
                envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac::decode(a.value.as_slice()).unwrap()
            }
            _ => panic!("typed config"),
        }
    };
    let deny = decode(&built[0]).rules.unwrap();
    assert_eq!(deny.action, 1);
    assert_eq!(
        deny.policies.keys().collect::<Vec<_>>(),
        ["ns[a]-policy[deny]-rule[0]"]
    );
    let allow = decode(&built[1]).rules.unwrap();
    let mut names: Vec<&String> = allow.policies.keys().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ns[a]-policy[allow-1]-rule[0]",
            "ns[a]-policy[allow-1]-rule[1]"
        ],
        "the policy selecting another app does not apply"
    );
    // The same config encodes to the same bytes, whatever the hash order.
    let again = filters(&ctx(&workload_yaml(policies)));
    assert_eq!(built, again);
}

#[test]
fn tcp_authorization_drops_http_allow_rules_and_widens_http_deny_rules() {
    let policies = "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny-get, namespace: a}\n\
spec: {action: DENY, rules: [{to: [{operation: {methods: [GET], ports: [\"5432\"]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: allow-path, namespace: a}\n\
spec: {rules: [{to: [{operation: {paths: [/x]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: audit, namespace: a}\n\
spec: {action: AUDIT, rules: [{}]}\n";
    let c = ctx(&workload_yaml(policies));
    let p = verified("a");
    let http: Vec<String> = super::authz::http_filters(&c, &c.scope(&p))
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(http.len(), 3, "AUDIT (log), DENY and ALLOW on HTTP");
    let tcp = super::authz::network_filters(&c, &c.scope(&p));
    assert_eq!(tcp.len(), 2, "DENY and ALLOW on TCP");
    let decode = |f: &envoy_types::pb::envoy::config::listener::v3::Filter| match &f.config_type {
        Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) => {
            envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac::decode(
                a.value.as_slice(),
            )
            .unwrap()
        }
        _ => panic!("typed config"),
    };
    let deny = decode(&tcp[0]);
    assert_eq!(deny.stat_prefix, "tcp.");
    let rule = &deny.rules.unwrap().policies["ns[a]-policy[deny-get]-rule[0]"];
    assert!(
        format!("{:?}", rule.permissions).contains("DestinationPort(5432)")
            && !format!("{:?}", rule.permissions).contains(":method"),
        "the method is dropped, the port stays: {:?}",
        rule.permissions
    );
    let allow = decode(&tcp[1]).rules.unwrap();
    assert!(
        allow.policies.is_empty(),
        "an ALLOW rule on paths can never match TCP: nothing is allowed"
    );
    // The TCP inbound chain carries them before the TCP proxy.
    let l = listener_named(&c, &p, "virtualInbound");
    let names: Vec<&str> = l
        .filter_chains
        .iter()
        .find(|ch| ch.name == "inbound|5432||-mtls")
        .unwrap()
        .filters
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "envoy.filters.network.rbac",
            "envoy.filters.network.rbac",
            "envoy.filters.network.tcp_proxy"
        ]
    );
}

#[test]
fn gateway_servers_sharing_a_port_never_produce_conflicting_chains() {
    let yaml = concat!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: a}\n",
        "spec:\n  selector: {app: gw}\n  servers:\n",
        "  - {port: {number: 8443, name: one, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE, credentialName: one}}\n",
        "  - {port: {number: 8443, name: two, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE, credentialName: two}}\n",
        "  - {port: {number: 8443, name: plain, protocol: HTTP}, hosts: ['*']}\n",
    );
    let c = ctx(yaml);
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let l = listener_named(&c, &gw, "0.0.0.0_8443");
    let chains: Vec<(String, String)> = l
        .filter_chains
        .iter()
        .map(|ch| {
            (
                ch.name.clone(),
                ch.filter_chain_match
                    .clone()
                    .unwrap_or_default()
                    .transport_protocol,
            )
        })
        .collect();
    assert_eq!(
        chains,
        [
            ("http.8443".to_string(), "raw_buffer".to_string()),
            ("https.8443.one.gw.a".into(), "".into()),
        ],
        "the duplicate TLS server is dropped; plaintext takes only non-TLS connections"
    );
}

#[test]
fn the_oldest_gateway_keeps_a_port_two_gateways_claim() {
    let gateway = |name: &str, created: &str, credential: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: a, creationTimestamp: \"{created}\"}}\n\
spec:\n  selector: {{app: gw}}\n  servers:\n  - {{port: {{number: 8443, name: tls, protocol: HTTPS}}, hosts: ['*'], tls: {{mode: SIMPLE, credentialName: {credential}}}}}\n"
        )
    };
    // "a-new" sorts first by name, but "z-old" was created first.
    let yaml = gateway("a-new", "2026-02-01T00:00:00Z", "new")
        + &gateway("z-old", "2026-01-01T00:00:00Z", "old");
    let c = ctx(&yaml);
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let l = listener_named(&c, &gw, "0.0.0.0_8443");
    let names: Vec<&str> = l.filter_chains.iter().map(|ch| ch.name.as_str()).collect();
    assert_eq!(names, ["https.8443.tls.z-old.a"]);
}

#[test]
fn allow_rules_never_admit_more_than_written() {
    // serviceAccounts and trustDomains become identity matches; a `when` key the translation
    // cannot express leaves its ALLOW rule out (it allows nothing) instead of dropping the
    // condition, and widens a DENY rule instead.
    let policies = "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: by-sa, namespace: a}\n\
spec: {rules: [{from: [{source: {serviceAccounts: [bookinfo/reviews, ratings], trustDomains: [\"*.corp\"]}}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: by-claim, namespace: a}\n\
spec: {rules: [{when: [{key: \"request.auth.claims[group]\", values: [admins]}]}]}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: deny-sni, namespace: a}\n\
spec: {action: DENY, rules: [{to: [{operation: {paths: [/admin]}}], when: [{key: connection.sni, values: [x]}]}]}\n";
    let c = ctx(&workload_yaml(policies));
    let p = verified("a");
    let filters = super::authz::http_filters(&c, &c.scope(&p));
    let rbac = |name: &str| -> envoy_types::pb::envoy::config::rbac::v3::Rbac {
        let f = filters
            .iter()
            .filter(|f| f.name == "envoy.filters.http.rbac")
            .find_map(|f| match &f.config_type {
                Some(
                    envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType::TypedConfig(a),
                ) => {
                    let r = envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac::decode(a.value.as_slice()).unwrap();
                    r.rules.filter(|rules| rules.policies.keys().any(|k| k.contains(name)))
                }
                _ => None,
            });
        f.unwrap_or_default()
    };
    let allow = rbac("by-sa");
    let by_sa = format!(
        "{:?}",
        allow.policies["ns[a]-policy[by-sa]-rule[0]"].principals
    );
    assert!(
        by_sa.contains("spiffe://.+/ns/bookinfo/(.+/|)sa/reviews(/.+)?"),
        "{by_sa}"
    );
    assert!(
        by_sa.contains("spiffe://.+/ns/a/(.+/|)sa/ratings(/.+)?"),
        "{by_sa}"
    );
    assert!(by_sa.contains("spiffe://[^/]*\\\\.corp/.*"), "{by_sa}");
    let by_claim = format!(
        "{:?}",
        rbac("by-claim").policies["ns[a]-policy[by-claim]-rule[0]"].principals
    );
    assert!(
        by_claim.contains("envoy.filters.http.jwt_authn")
            && by_claim.contains("\"group\"")
            && by_claim.contains("\"admins\"")
            && by_claim.contains("ListMatch"),
        "a claim is matched in the verified payload, as a value or a list element: {by_claim}"
    );
    let deny = rbac("deny-sni");
    let rule = &deny.policies["ns[a]-policy[deny-sni]-rule[0]"];
    assert!(format!("{:?}", rule.permissions).contains("/admin"));
}

/// DNS clusters resolve the address family the proxy has, as istiod does with dual stack off:
/// IPv6 only for a proxy whose every address is IPv6, IPv4 only otherwise.
#[test]
fn dns_clusters_resolve_the_proxys_address_family() {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::DnsLookupFamily;
    let c = ctx("apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec: {hosts: [db.example.com], ports: [{number: 8080, name: http, protocol: HTTP}], resolution: DNS}
");
    let family = |p: &Proxy| cluster(&c, p, "outbound|8080||db.example.com").dns_lookup_family;
    assert_eq!(family(&vm_at("10.0.0.5")), DnsLookupFamily::V4Only as i32);
    assert_eq!(family(&vm_at("fd00::5")), DnsLookupFamily::V6Only as i32);
    let dual = proxy("default", &[("INSTANCE_IPS", "fd00::9,10.0.0.9")]);
    assert_eq!(family(&dual), DnsLookupFamily::V4Only as i32);
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
    let snap = Store::from_yaml(&yaml).snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let registry_only = MeshSettings {
        outbound_allow_any: false,
        ..MeshSettings::default()
    };
    let strict = PushContext::new(1, snap, reg, registry_only.clone());
    assert_eq!(fallback(&strict), ("block_all".to_string(), 502));
    assert_eq!(fallback(&ctx(&yaml)), ("allow_any".to_string(), 0));

    let with_sidecar = format!(
        "{yaml}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: default}}\nspec: {{outboundTrafficPolicy: {{mode: ALLOW_ANY}}}}\n"
    );
    let snap = Store::from_yaml(&with_sidecar).snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let overridden = PushContext::new(1, snap, reg, registry_only);
    assert_eq!(fallback(&overridden), ("allow_any".to_string(), 0));
}

/// Inbound clusters speak the port's protocol to the application: HTTP/2 for gRPC and HTTP/2
/// ports (a gRPC server would otherwise get HTTP/1.1), nothing added for HTTP/1.1 ports.
#[test]
fn inbound_clusters_speak_http2_to_grpc_apps() {
    let c = ctx("
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: vms}
spec:
  hosts: [api.vms.svc.cluster.local]
  ports: [{number: 7070, name: grpc, protocol: GRPC}, {number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.9.0.3}]
");
    let vm = vm_at("10.9.0.3");
    let h2 = |name: &str| {
        cluster(&c, &vm, name)
            .typed_extension_protocol_options
            .values()
            .any(|opts| opts.type_url.ends_with("HttpProtocolOptions"))
    };
    assert!(h2("inbound|7070||"));
    assert!(!h2("inbound|8080||"));
}

/// A ServiceEntry's `subjectAltNames` pin the identity its servers must present under mTLS, as
/// istiod adds them to the service's accounts.
#[test]
fn service_entry_subject_alt_names_pin_the_server_identity() {
    let c = ctx("apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: a}
spec:
  hosts: [db.a.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.2.0.1}]
  subjectAltNames: [\"spiffe://cluster.local/ns/a/sa/db\"]
");
    let cl = cluster(&c, &verified("b"), "outbound|5432||db.a.svc.cluster.local");
    let socket = format!("{:?}", cl.transport_socket_matches);
    assert!(
        String::from_utf8_lossy(
            &cl.transport_socket_matches[0]
                .transport_socket
                .as_ref()
                .and_then(|t| match &t.config_type {
                    Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(a)) => Some(a.value.clone()),
                    _ => None,
                })
                .unwrap_or_default()
        )
        .contains("spiffe://cluster.local/ns/a/sa/db"),
        "{socket}"
    );
}

/// `insecureSkipVerify` turns server verification off for `credentialName` origination too, as
/// istiod; without it the secret's CA verifies the server.
#[test]
fn credential_name_origination_verifies_unless_told_not_to() {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
    let validated = |skip: bool| {
        let c = ctx(&format!(
            "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: web, namespace: a}}\nspec: {{host: web.a.svc.cluster.local, trafficPolicy: {{tls: {{mode: SIMPLE, credentialName: web-ca, insecureSkipVerify: {skip}}}}}}}\n",
            se("a", "web", "HTTP")
        ));
        let cl = cluster(&c, &proxy("a", &[]), "outbound|80||web.a.svc.cluster.local");
        let Some(ConfigType::TypedConfig(any)) = cl.transport_socket.and_then(|t| t.config_type)
        else {
            panic!("no TLS transport socket");
        };
        UpstreamTlsContext::decode(any.value.as_slice())
            .unwrap()
            .common_tls_context
            .and_then(|c| c.validation_context_type)
            .is_some()
    };
    assert!(validated(false));
    assert!(!validated(true));
}

/// Services sharing port 443 and 3306 the way real meshes do: Kubernetes' API with a VIP, two
/// external TLS hosts without one, a TCP database with a VIP and an unnamed (sniffed) port.
const OUTBOUND_MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: kube, namespace: a}\n\
spec: {hosts: [kubernetes.default.svc.cluster.local], addresses: [10.96.0.1], ports: [{number: 443, name: https, protocol: HTTPS}], resolution: STATIC, endpoints: [{address: 10.1.0.1}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ext, namespace: a}\n\
spec: {hosts: [api.example.com, pay.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS, location: MESH_EXTERNAL}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: db, namespace: a}\n\
spec: {hosts: [db.a.svc.cluster.local], addresses: [10.96.0.5], ports: [{number: 3306, name: mysql, protocol: TCP}], resolution: STATIC, endpoints: [{address: 10.1.0.5}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: web, namespace: a}\n\
spec: {hosts: [web.a.svc.cluster.local], addresses: [10.96.0.7], ports: [{number: 8080, name: web}], resolution: STATIC, endpoints: [{address: 10.1.0.7}]}\n";

fn listeners_of(ctx: &PushContext, p: &Proxy) -> Vec<Listener> {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Listener, None)
        .iter()
        .map(|r| Listener::decode(r.any.value.as_slice()).unwrap())
        .collect()
}

/// The clusters (with weights) the TCP proxy of `chain` sends to.
fn tcp_targets(
    chain: &envoy_types::pb::envoy::config::listener::v3::FilterChain,
) -> Vec<(String, u32)> {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
        TcpProxy, tcp_proxy,
    };
    chain
        .filters
        .iter()
        .filter(|f| f.name == "envoy.filters.network.tcp_proxy")
        .flat_map(|f| {
            let Some(
                envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a),
            ) = &f.config_type
            else {
                return Vec::new();
            };
            match TcpProxy::decode(a.value.as_slice())
                .unwrap()
                .cluster_specifier
            {
                Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => vec![(c, 100)],
                Some(tcp_proxy::ClusterSpecifier::WeightedClusters(w)) => {
                    w.clusters.into_iter().map(|c| (c.name, c.weight)).collect()
                }
                None => Vec::new(),
            }
        })
        .collect()
}

fn listener_filter_names(l: &Listener) -> Vec<&str> {
    l.listener_filters.iter().map(|f| f.name.as_str()).collect()
}

#[test]
fn outbound_listeners_follow_istiods_layout() {
    let c = ctx(OUTBOUND_MESH);
    let all = listeners_of(&c, &proxy("a", &[]));
    let mut names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "0.0.0.0_443",
            "10.96.0.1_443",
            "10.96.0.5_3306",
            "10.96.0.7_8080",
            "virtualInbound",
            "virtualOutbound"
        ],
        "TCP, TLS and sniffed services with a VIP get their own listener"
    );
    let find = |n: &str| all.iter().find(|l| l.name == n).unwrap();

    // Two TLS hosts without a VIP on 443: told apart by SNI, the rest passes through.
    let shared = find("0.0.0.0_443");
    let sni: Vec<Vec<String>> = shared
        .filter_chains
        .iter()
        .map(|c| {
            c.filter_chain_match
                .clone()
                .unwrap_or_default()
                .server_names
        })
        .collect();
    assert_eq!(
        sni,
        [
            vec!["api.example.com".to_string()],
            vec!["pay.example.com".to_string()]
        ]
    );
    assert_eq!(
        listener_filter_names(shared),
        ["envoy.filters.listener.tls_inspector"]
    );
    let fallback = shared
        .default_filter_chain
        .as_ref()
        .expect("a fallback chain");
    assert_eq!(fallback.name, "PassthroughFilterChain");
    assert_eq!(
        tcp_targets(fallback),
        [("PassthroughCluster".to_string(), 100)]
    );

    // The API server's VIP listener takes everything to it, so no fallback is needed there.
    let kube = find("10.96.0.1_443");
    assert!(!kube.bind_to_port.unwrap().value);
    assert_eq!(kube.filter_chains.len(), 1);
    assert!(kube.default_filter_chain.is_none());
    assert_eq!(
        kube.filter_chains[0].name,
        "outbound|443||kubernetes.default.svc.cluster.local"
    );

    // The unnamed port is sniffed: plaintext HTTP goes to the HTTP connection manager with the
    // service's own route, the rest to the service as TCP.
    let web = find("10.96.0.7_8080");
    assert_eq!(
        listener_filter_names(web),
        ["envoy.filters.listener.http_inspector"]
    );
    let http = &web.filter_chains[0];
    let m = http.filter_chain_match.clone().unwrap();
    assert_eq!(m.transport_protocol, "raw_buffer");
    assert_eq!(m.application_protocols, ["http/1.1", "h2c"]);
    let filters: Vec<&str> = http.filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        filters,
        [
            "envoy.filters.network.set_filter_state",
            "envoy.filters.network.http_connection_manager"
        ],
        "the HTTP half tells the server's sidecar (by ALPN) that HTTP follows"
    );
    let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) =
        &http.filters[1].config_type
    else {
        panic!("typed config")
    };
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::RouteSpecifier,
    };
    match HttpConnectionManager::decode(a.value.as_slice())
        .unwrap()
        .route_specifier
    {
        Some(RouteSpecifier::Rds(r)) => {
            assert_eq!(r.route_config_name, "web.a.svc.cluster.local:8080")
        }
        other => panic!("RDS expected, got {other:?}"),
    }
    assert_eq!(
        web.default_filter_chain.as_ref().unwrap().name,
        "outbound|8080||web.a.svc.cluster.local"
    );
    let scope = c.scope(&proxy("a", &[]));
    let route = generate(
        &c,
        &proxy("a", &[]),
        &scope,
        TypeUrl::Route,
        Some(&["web.a.svc.cluster.local:8080".to_string()].into()),
    );
    let rc = envoy_types::pb::envoy::config::route::v3::RouteConfiguration::decode(
        route[0].any.value.as_slice(),
    )
    .unwrap();
    assert_eq!(rc.virtual_hosts.len(), 1);
    assert_eq!(
        rc.virtual_hosts[0].domains,
        ["*"],
        "the VIP already chose the service"
    );
}

#[test]
fn sidecar_tcp_and_tls_routes_apply() {
    let vs = "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: db, namespace: a}\n\
spec: {hosts: [db.a.svc.cluster.local], tcp: [{match: [{port: 3306}], route: [{destination: {host: db.a.svc.cluster.local, subset: v1}, weight: 80}, {destination: {host: db.a.svc.cluster.local, subset: v2}, weight: 20}]}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ext, namespace: a}\n\
spec: {hosts: [api.example.com], tls: [{match: [{port: 443, sniHosts: [api.example.com]}], route: [{destination: {host: pay.example.com}}]}]}\n";
    let c = ctx(&format!("{OUTBOUND_MESH}{vs}"));
    let all = listeners_of(&c, &proxy("a", &[]));
    let db = all.iter().find(|l| l.name == "10.96.0.5_3306").unwrap();
    assert_eq!(
        db.filter_chains.len(),
        1,
        "the route takes every connection"
    );
    assert_eq!(
        tcp_targets(&db.filter_chains[0]),
        [
            ("outbound|3306|v1|db.a.svc.cluster.local".to_string(), 80),
            ("outbound|3306|v2|db.a.svc.cluster.local".to_string(), 20)
        ],
        "the TCP route splits by weight"
    );
    let shared = all.iter().find(|l| l.name == "0.0.0.0_443").unwrap();
    let api = shared
        .filter_chains
        .iter()
        .find(|ch| ch.filter_chain_match.as_ref().unwrap().server_names == ["api.example.com"])
        .unwrap();
    assert_eq!(
        tcp_targets(api),
        [("outbound|443||pay.example.com".to_string(), 100)],
        "the TLS route sends api.example.com to pay.example.com"
    );
}

#[test]
fn registry_only_blackholes_unmatched_connections_on_every_port() {
    let mesh = MeshSettings {
        outbound_allow_any: false,
        ..MeshSettings::default()
    };
    let snap = Store::from_yaml(OUTBOUND_MESH).snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let c = PushContext::new(1, snap, reg, mesh);
    let all = listeners_of(&c, &proxy("a", &[]));
    let shared = all.iter().find(|l| l.name == "0.0.0.0_443").unwrap();
    assert_eq!(
        tcp_targets(shared.default_filter_chain.as_ref().unwrap()),
        [("BlackHoleCluster".to_string(), 100)]
    );
}

#[test]
fn sniffed_inbound_ports_serve_http_and_tcp() {
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: app, namespace: a}\n\
spec: {hosts: [app.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 9000, name: app}], resolution: STATIC, \
endpoints: [{address: 10.0.0.9, labels: {app: app, security.istio.io/tlsMode: istio}}]}\n";
    let c = ctx(yaml);
    let l = listener_named(&c, &verified("a"), "virtualInbound");
    let chains: Vec<(String, String, Vec<String>)> = l
        .filter_chains
        .iter()
        .map(|ch| {
            let m = ch.filter_chain_match.clone().unwrap_or_default();
            (
                ch.name.clone(),
                m.transport_protocol,
                m.application_protocols,
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        chains,
        [
            (
                "inbound|9000||-mtls-http".into(),
                "tls".into(),
                s(&["istio-http/1.0", "istio-http/1.1", "istio-h2"])
            ),
            (
                "inbound|9000||-http".into(),
                "raw_buffer".into(),
                s(&["http/1.1", "h2c"])
            ),
            (
                "inbound|9000||-mtls-tcp".into(),
                "tls".into(),
                s(&["istio-peer-exchange", "istio"])
            ),
            ("inbound|9000||-tcp".into(), "raw_buffer".into(), vec![]),
            ("inbound|9000||-tls-tcp".into(), "tls".into(), vec![]),
            (
                "inbound-passthrough-mtls-http".into(),
                "tls".into(),
                s(&["istio-http/1.0", "istio-http/1.1", "istio-h2"])
            ),
            (
                "inbound-passthrough-http".into(),
                "raw_buffer".into(),
                s(&["http/1.1", "h2c"])
            ),
            (
                "inbound-passthrough-mtls-tcp".into(),
                "tls".into(),
                s(&["istio-peer-exchange", "istio"])
            ),
            (
                "inbound-passthrough-tcp".into(),
                "raw_buffer".into(),
                vec![]
            ),
            ("inbound-passthrough-tls-tcp".into(), "tls".into(), vec![]),
        ]
    );
    assert!(listener_filter_names(&l).contains(&"envoy.filters.listener.http_inspector"));
}

#[test]
fn destination_rule_workload_selector_applies_to_selected_proxies_only() {
    let yaml = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: all, namespace: a}}\n\
spec: {{host: web.a.svc.cluster.local, trafficPolicy: {{connectionPool: {{tcp: {{maxConnections: 5}}}}}}}}\n\
---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: for-x, namespace: a}}\n\
spec: {{host: web.a.svc.cluster.local, workloadSelector: {{matchLabels: {{app: x}}}}, trafficPolicy: {{connectionPool: {{tcp: {{maxConnections: 7}}}}}}}}\n",
        se("a", "web", "HTTP")
    );
    let c = ctx(&yaml);
    let max = |p: &Proxy| {
        cluster(&c, p, "outbound|80||web.a.svc.cluster.local")
            .circuit_breakers
            .unwrap()
            .thresholds[0]
            .max_connections
            .unwrap()
            .value
    };
    let x = labelled("sidecar~10.0.0.1~x-1.a~a.svc.cluster.local", "x");
    let y = labelled("sidecar~10.0.0.2~y-1.a~a.svc.cluster.local", "y");
    let elsewhere = labelled("sidecar~10.0.0.3~x-1.b~b.svc.cluster.local", "x");
    assert_eq!(max(&x), 7, "the selected proxy gets its own rule");
    assert_eq!(max(&y), 5, "others get the rule without a selector");
    assert_eq!(
        max(&elsewhere),
        5,
        "a selector applies in its own namespace only"
    );
}

#[test]
fn tcp_proxies_take_the_destination_rules_idle_timeout() {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
    let dr = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: db, namespace: a}\n\
spec: {host: db.a.svc.cluster.local, trafficPolicy: {connectionPool: {tcp: {idleTimeout: 30s}}}}\n";
    let c = ctx(&format!("{OUTBOUND_MESH}{dr}"));
    let all = listeners_of(&c, &proxy("a", &[]));
    let db = all.iter().find(|l| l.name == "10.96.0.5_3306").unwrap();
    let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) =
        &db.filter_chains[0].filters[0].config_type
    else {
        panic!("typed config")
    };
    let tcp = TcpProxy::decode(a.value.as_slice()).unwrap();
    assert_eq!(tcp.idle_timeout.unwrap().seconds, 30);
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
fn mesh_default_export_to_applies_to_objects_without_export_to() {
    let yaml = format!(
        "{}{}",
        se("a", "web", "HTTP"),
        se("a", "shared", "HTTP").replace("spec: {", "spec: {exportTo: [\"*\"], ")
    );
    let snap = Store::from_yaml(&yaml).snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let mesh = MeshSettings {
        default_service_export_to: vec![".".into()],
        ..MeshSettings::default()
    };
    let c = PushContext::new(1, snap, reg, mesh);
    let names = |ns: &str| -> Vec<String> {
        clusters_of(&c, &proxy(ns, &[]))
            .into_iter()
            .map(|c| c.name)
            .filter(|n| n.starts_with("outbound|"))
            .collect()
    };
    assert!(names("a").contains(&"outbound|80||web.a.svc.cluster.local".to_string()));
    assert_eq!(
        names("b"),
        ["outbound|80||shared.a.svc.cluster.local"],
        "web sets no exportTo: the mesh's default keeps it in its namespace"
    );
}

#[test]
fn sidecar_inbound_connection_pool_limits_inbound_clusters() {
    let sidecar = "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: a}\n\
spec: {inboundConnectionPool: {tcp: {maxConnections: 9}, http: {http1MaxPendingRequests: 3}}}\n";
    let c = ctx(&workload_yaml(sidecar));
    let inbound = cluster(&c, &verified("a"), "inbound|80||");
    let t = &inbound.circuit_breakers.unwrap().thresholds[0];
    assert_eq!(t.max_connections.unwrap().value, 9);
    assert_eq!(t.max_pending_requests.unwrap().value, 3);
    // Without a Sidecar, inbound clusters are unlimited as istiod makes them (not Envoy's 1024).
    let plain = cluster(&ctx(&workload_yaml("")), &verified("a"), "inbound|80||");
    assert_eq!(
        plain.circuit_breakers.unwrap().thresholds[0]
            .max_connections
            .unwrap()
            .value,
        u32::MAX
    );
}

#[test]
fn sidecar_egress_port_listeners_serve_only_their_hosts() {
    let yaml = format!(
        "{}{}{}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\n\
spec: {{egress: [{{port: {{number: 80, protocol: HTTP, name: http}}, hosts: [./web.a.svc.cluster.local]}}, {{hosts: [\"./*\"]}}]}}\n",
        se("a", "web", "HTTP"),
        se("a", "other", "HTTP"),
        se("a", "api", "HTTP").replace("number: 80", "number: 8080")
    );
    let c = ctx(&yaml);
    let p = proxy("a", &[]);
    let rc = route_config(&c, &p, "80");
    let hosts: Vec<&str> = rc
        .virtual_hosts
        .iter()
        .map(|v| v.name.as_str())
        .filter(|n| n.contains(".svc."))
        .collect();
    assert_eq!(
        hosts,
        ["web.a.svc.cluster.local:80"],
        "port 80's egress listener names web only"
    );
    let rc = route_config(&c, &p, "8080");
    assert_eq!(
        rc.virtual_hosts[0].name, "api.a.svc.cluster.local:8080",
        "other ports follow the egress listener without a port"
    );
    // Clusters still exist for every service in scope (a VirtualService may route to them).
    let names: Vec<String> = clusters_of(&c, &p).into_iter().map(|c| c.name).collect();
    assert!(names.contains(&"outbound|80||other.a.svc.cluster.local".to_string()));
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

#[test]
fn the_oldest_sidecar_selecting_a_workload_wins() {
    let sidecar = |name: &str, created: &str, host: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: {name}, namespace: a, creationTimestamp: \"{created}\"}}\n\
spec: {{workloadSelector: {{labels: {{app: x}}}}, egress: [{{hosts: [\"./{host}\"]}}]}}\n"
        )
    };
    let yaml = format!(
        "{}{}{}{}",
        se("a", "web", "HTTP"),
        se("a", "other", "HTTP"),
        sidecar(
            "a-newer",
            "2026-06-01T00:00:00Z",
            "other.a.svc.cluster.local"
        ),
        sidecar("z-older", "2025-01-01T00:00:00Z", "web.a.svc.cluster.local")
    );
    let c = ctx(&yaml);
    let p = labelled("sidecar~10.0.0.1~x-1.a~a.svc.cluster.local", "x");
    let names: Vec<String> = clusters_of(&c, &p)
        .into_iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with("outbound|"))
        .collect();
    assert_eq!(names, ["outbound|80||web.a.svc.cluster.local"]);
}

/// The conflicts istiod counts: a host two mesh VirtualServices claim, a subset two
/// DestinationRules of one host and namespace both name (another namespace's rule is no conflict).
#[test]
fn conflicts_are_counted_as_istiod_does() {
    let vs = |name: &str, host: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: a}}\nspec:\n  hosts: [{host}]\n  http:\n  - route:\n    - destination: {{host: {host}}}\n---\n"
        )
    };
    let dr = |name: &str, ns: &str, subset: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  host: web.a.svc.cluster.local\n  subsets:\n  - name: {subset}\n    labels: {{version: {subset}}}\n---\n"
        )
    };
    let yaml = [
        vs("one", "web.a.svc.cluster.local"),
        vs("two", "web.a.svc.cluster.local"),
        vs("three", "other.a.svc.cluster.local"),
        dr("d1", "a", "v1"),
        dr("d2", "a", "v1"),
        dr("d3", "b", "v1"),
        dr("d4", "a", "v2"),
    ]
    .concat();
    assert_eq!(
        ctx(&yaml).conflicts(),
        crate::xds::context::Conflicts {
            duplicate_domains: 1,
            duplicate_subsets: 1,
        }
    );
}

/// istiod's listener conflicts: two TCP services without addresses on one port (the first keeps
/// the listener's connections), and a pod port two services select with different protocols.
#[test]
fn listener_conflicts_are_counted_as_istiod_does() {
    let se = |name: &str, port: u32, proto: &str, target: u32| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: a}}\nspec: {{hosts: [{name}.example.com], ports: [{{number: {port}, name: p, protocol: {proto}, targetPort: {target}}}], resolution: STATIC, endpoints: [{{address: 10.0.0.9}}]}}\n"
        )
    };
    let quiet = ctx(&[se("one", 9000, "TCP", 9000), se("two", 9001, "TCP", 9001)].concat());
    let p = proxy("a", &[]);
    generate(&quiet, &p, &quiet.scope(&p), TypeUrl::Listener, None);
    assert_eq!(quiet.listener_conflicts(), (0, 0));

    let yaml = [
        se("db-a", 5432, "TCP", 5432),
        se("db-b", 5432, "TCP", 5432),
        se("web", 80, "HTTP", 8080),
        se("raw", 81, "TCP", 8080),
    ]
    .concat();
    let c = ctx(&yaml);
    generate(&c, &p, &c.scope(&p), TypeUrl::Listener, None);
    assert_eq!(
        c.listener_conflicts(),
        (1, 1),
        "the proxy at 10.0.0.9 has two protocols on 8080; 0.0.0.0_5432 has two TCP services"
    );
}

/// With `trustDomainAliases`, a client accepts its server's identity in every alias trust domain
/// too (istiod expands the pinned service accounts the same way), so a server still holding a
/// certificate of the old domain keeps working during a trust-domain migration.
#[test]
fn pinned_server_identities_cover_trust_domain_aliases() {
    let yaml = workload_yaml("").replace("tlsMode: istio}", "tlsMode: istio}, serviceAccount: db");
    let snap = Store::from_yaml(&yaml).snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let mesh = MeshSettings {
        trust_domain_aliases: vec!["old.example".into()],
        ..MeshSettings::default()
    };
    let c = PushContext::new(1, snap, reg, mesh);
    let bytes = cluster(&c, &verified("b"), "outbound|80||app.a.svc.cluster.local").encode_to_vec();
    let has = |uri: &str| bytes.windows(uri.len()).any(|w| w == uri.as_bytes());
    assert!(has("spiffe://cluster.local/ns/a/sa/db"));
    assert!(has("spiffe://old.example/ns/a/sa/db"));
}

#[test]
fn custom_policies_ask_grpc_providers_on_tcp_and_deny_when_no_provider_can_be_asked() {
    let custom = |name: &str, provider: &str, port: &str| {
        format!(
            "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: a}}\n\
spec: {{action: CUSTOM, provider: {{name: {provider}}}, rules: [{{to: [{{operation: {{ports: [\"{port}\"]}}}}]}}]}}\n"
        )
    };
    let providers: Vec<crate::config::mesh::ExtensionProvider> = serde_json::from_value(serde_json::json!([
        {"name": "grpc", "envoyExtAuthzGrpc": {"service": "authz.a.svc.cluster.local", "port": 9000}},
        {"name": "http", "envoyExtAuthzHttp": {"service": "authz.a.svc.cluster.local", "port": 8000}}
    ]))
    .unwrap();
    let p = verified("a");
    let built = |policies: &str| {
        let mut c = ctx(&workload_yaml(policies));
        c.mesh.extension_providers = providers.clone();
        let http: Vec<String> = super::authz::http_filters(&c, &c.scope(&p))
            .into_iter()
            .map(|f| f.name)
            .collect();
        let tcp = super::authz::network_filters(&c, &c.scope(&p));
        (http, tcp)
    };
    let network_rbac =
        |f: &envoy_types::pb::envoy::config::listener::v3::Filter| match &f.config_type {
            Some(
                envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a),
            ) => envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac::decode(
                a.value.as_slice(),
            )
            .unwrap(),
            _ => panic!("typed config"),
        };

    // A gRPC provider is asked for TCP too: shadow rules mark the connection, ext_authz asks.
    let (http, tcp) = built(&custom("ask", "grpc", "5432"));
    assert_eq!(
        http,
        ["envoy.filters.http.rbac", "envoy.filters.http.ext_authz"]
    );
    let names: Vec<&str> = tcp.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "envoy.filters.network.rbac",
            "envoy.filters.network.ext_authz"
        ]
    );
    let shadow = network_rbac(&tcp[0]);
    assert!(shadow.rules.is_none(), "the shadow filter enforces nothing");
    assert_eq!(shadow.shadow_rules_stat_prefix, "istio_ext_authz_");
    assert!(
        shadow
            .shadow_rules
            .unwrap()
            .policies
            .contains_key("istio-ext-authz-ns[a]-policy[ask]-rule[0]")
    );

    // An HTTP provider does not apply to TCP (as istiod).
    let (_, tcp) = built(&custom("ask", "http", "5432"));
    assert!(tcp.is_empty());

    // A provider MeshConfig does not define, or two providers for one workload: what the rules
    // match is denied, on HTTP and on TCP.
    for policies in [
        custom("missing", "nope", "5432"),
        custom("one", "grpc", "5432") + &custom("two", "http", "5432"),
    ] {
        let (http, tcp) = built(&policies);
        assert_eq!(http, ["envoy.filters.http.rbac"], "{policies}");
        assert_eq!(tcp.len(), 1, "{policies}");
        let deny = network_rbac(&tcp[0]).rules.expect("enforced");
        assert_eq!(
            deny.action,
            envoy_types::pb::envoy::config::rbac::v3::rbac::Action::Deny as i32
        );
        assert!(!deny.policies.is_empty());
    }
}

/// A credential's CA bundle carries its revocation list, as istiod serves it (`ca.crl` of a TLS
/// Secret, `crl` of a generic one): without it a revoked client certificate got in.
#[test]
fn credential_ca_bundles_carry_their_revocation_list() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        Secret, secret as sds_secret,
    };
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    use crate::source::kube::convert::IntoConfig;
    let store = Store::default();
    for (name, data) in [
        (
            "tls-style",
            serde_json::json!({"tls.crt": b64("CERT"), "tls.key": b64("KEY"), "ca.crt": b64("CA"), "ca.crl": b64("CRL")}),
        ),
        (
            "generic",
            serde_json::json!({"cert": b64("CERT"), "key": b64("KEY"), "cacert": b64("CA"), "crl": b64("CRL")}),
        ),
        ("no-crl", serde_json::json!({"ca.crt": b64("CA")})),
    ] {
        let secret: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "gw"}, "data": data
            }))
            .unwrap();
        store.upsert(secret.into_config());
    }
    let snap = store.snapshot();
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let ctx = PushContext::new(1, snap, reg, MeshSettings::default());
    let mut p = proxy("gw", &[]);
    p.identity = Some(crate::model::identity::Identity {
        trust_domain: "cluster.local".into(),
        namespace: "gw".into(),
        service_account: "gateway".into(),
    });
    let names: std::collections::BTreeSet<String> = [
        "kubernetes://tls-style-cacert",
        "kubernetes://generic-cacert",
        "kubernetes://no-crl-cacert",
    ]
    .map(String::from)
    .into();
    let served: std::collections::BTreeMap<String, (Vec<u8>, Option<Vec<u8>>)> =
        secret::secrets(&ctx, &p, Some(&names))
            .iter()
            .map(|r| {
                let s = Secret::decode(r.any.value.as_slice()).unwrap();
                let Some(sds_secret::Type::ValidationContext(v)) = s.r#type else {
                    panic!("{} is not a CA bundle", s.name);
                };
                let bytes = |d: Option<envoy_types::pb::envoy::config::core::v3::DataSource>| {
                    d.and_then(|d| {
                        match d.specifier {
                Some(
                    envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineBytes(
                        b,
                    ),
                ) => Some(b),
                _ => None,
            }
                    })
                };
                (s.name, (bytes(v.trusted_ca).unwrap(), bytes(v.crl)))
            })
            .collect();
    assert_eq!(
        served["kubernetes://tls-style-cacert"],
        (b"CA".to_vec(), Some(b"CRL".to_vec()))
    );
    assert_eq!(
        served["kubernetes://generic-cacert"],
        (b"CA".to_vec(), Some(b"CRL".to_vec()))
    );
    assert_eq!(served["kubernetes://no-crl-cacert"], (b"CA".to_vec(), None));
}

/// A gateway's HTTP connection manager as istiod's `buildGatewayConnectionManager` writes it:
/// the client from the connection, `X-Forwarded-For` trusted as far as `gatewayTopology` says
/// (the mesh `defaultConfig`, unless the node sends a ProxyConfig of its own), XFCC handling,
/// and the PROXY protocol listener filter.
#[test]
fn gateway_topology_decides_the_client_address_and_xfcc() {
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::ForwardClientCertDetails,
    };
    let yaml = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: a}\n\
spec:\n  selector: {app: gw}\n  servers:\n  - {port: {number: 8080, name: http, protocol: HTTP}, hosts: ['*']}\n---\n\
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultConfig:\n      gatewayTopology: {numTrustedProxies: 2, forwardClientCertDetails: FORWARD_ONLY, proxyProtocol: {}}\n";
    let snap = Store::from_yaml(yaml).snapshot();
    let (mesh, error) = MeshSettings::default().with_mesh_config(&snap);
    assert_eq!(error, None);
    let reg = Arc::new(Registry::build(&snap, "cluster.local"));
    let c = PushContext::new(1, snap, reg, mesh);
    let hcm_of = |l: &Listener| {
        let f = &l.filter_chains[0].filters[0];
        let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) =
            &f.config_type
        else {
            panic!("no HCM");
        };
        HttpConnectionManager::decode(a.value.as_slice()).unwrap()
    };
    let listener_filters = |l: &Listener| {
        l.listener_filters
            .iter()
            .map(|f| f.name.clone())
            .collect::<Vec<_>>()
    };
    // The mesh default.
    let gw = labelled("router~10.0.0.5~gw-0.a~a.svc.cluster.local", "gw");
    let l = listener_named(&c, &gw, "0.0.0.0_8080");
    let hcm = hcm_of(&l);
    assert_eq!(hcm.use_remote_address.map(|b| b.value), Some(true));
    assert_eq!(hcm.xff_num_trusted_hops, 2);
    assert_eq!(
        hcm.forward_client_cert_details,
        ForwardClientCertDetails::ForwardOnly as i32
    );
    assert!(hcm.set_current_client_cert_details.is_none());
    assert_eq!(
        listener_filters(&l),
        ["envoy.filters.listener.proxy_protocol"]
    );
    // The node's own ProxyConfig wins, even without a topology (istiod's ProxyConfigOrDefault).
    let mut own = gw.clone();
    own.proxy_config = Some(serde_json::json!({"concurrency": 2}));
    let l = listener_named(&c, &own, "0.0.0.0_8080");
    let hcm = hcm_of(&l);
    assert_eq!(hcm.use_remote_address.map(|b| b.value), Some(true));
    assert_eq!(hcm.xff_num_trusted_hops, 0);
    assert_eq!(
        hcm.forward_client_cert_details,
        ForwardClientCertDetails::SanitizeSet as i32
    );
    let set = hcm.set_current_client_cert_details.unwrap();
    assert!(set.subject.is_some_and(|b| b.value) && set.cert && set.dns && set.uri);
    assert!(listener_filters(&l).is_empty());
}

/// TLS origination gets istiod's automatic SNI and SAN validation: SNI from the request's host
/// unless `sni` is set, the server's certificate checked against that host unless
/// `subjectAltNames` pin it or `insecureSkipVerify` is set; a ServiceEntry's `subjectAltNames`
/// pin its servers when the DestinationRule names none.
#[test]
fn tls_origination_sends_the_host_as_sni_and_checks_the_certificate_for_it() {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        UpstreamTlsContext, common_tls_context::ValidationContextType,
    };
    use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
    let service = |name: &str, tls: &str, sans: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: a}}\n\
spec: {{hosts: [{name}.example.com], ports: [{{number: 443, name: https, protocol: HTTP}}], resolution: DNS, location: MESH_EXTERNAL{sans}}}\n\
---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: a}}\n\
spec: {{host: {name}.example.com, trafficPolicy: {{tls: {tls}}}}}\n"
        )
    };
    let yaml = [
        service("plain", "{mode: SIMPLE}", ""),
        service("named", "{mode: SIMPLE, sni: api.example.com}", ""),
        service(
            "pinned",
            "{mode: SIMPLE, subjectAltNames: [x.example.com]}",
            "",
        ),
        service("skip", "{mode: SIMPLE, insecureSkipVerify: true}", ""),
        service(
            "se-pinned",
            "{mode: SIMPLE}",
            ", subjectAltNames: [se.example.com]",
        ),
    ]
    .concat();
    let c = ctx(&yaml);
    let p = proxy("a", &[]);
    let auto = |name: &str| {
        let cl = cluster(&c, &p, &format!("outbound|443||{name}.example.com"));
        cl.typed_extension_protocol_options
            .get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
            .map(|a| HttpProtocolOptions::decode(a.value.as_slice()).unwrap())
            .and_then(|o| o.upstream_http_protocol_options)
            .map(|u| (u.auto_sni, u.auto_san_validation))
    };
    assert_eq!(auto("plain"), Some((true, true)));
    assert_eq!(auto("named"), None, "an explicit SNI");
    assert_eq!(auto("pinned"), Some((true, false)), "SANs pin the server");
    assert_eq!(auto("skip"), Some((true, false)), "verification off");
    assert_eq!(auto("se-pinned"), Some((true, true)));
    let cl = cluster(&c, &p, "outbound|443||se-pinned.example.com");
    let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
        a,
    )) = cl.transport_socket.and_then(|t| t.config_type)
    else {
        panic!("no TLS");
    };
    let tls = UpstreamTlsContext::decode(a.value.as_slice()).unwrap();
    let Some(ValidationContextType::ValidationContext(v)) =
        tls.common_tls_context.unwrap().validation_context_type
    else {
        panic!("no validation context");
    };
    assert!(
        v.match_typed_subject_alt_names.iter().any(|m| m
            .matcher
            .as_ref()
            .is_some_and(|m| format!("{m:?}").contains("se.example.com"))),
        "{v:?}"
    );
}
