use crate::xds::context::PushContext;
use crate::xds::generate::generate;
use crate::xds::proxy::Proxy;
use crate::xds::types::TypeUrl;
use serde_json::Value;

/// A waypoint `waypoint` of namespace `shop` (its Service at 10.44.0.2), `web` bound to it with
/// two versions, `api` bound to another waypoint, `db` bound to none, and routes and policies.
pub(in crate::xds::generate) const MESH: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: waypoint, namespace: shop, labels: {gateway.istio.io/managed: istio.io-mesh-controller, istio.io/waypoint-for: service}}
spec:
  hosts: [waypoint.shop.svc.cluster.local]
  addresses: [10.96.0.100]
  ports: [{number: 15008, name: mesh, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop, labels: {istio.io/use-waypoint: waypoint, istio.io/dataplane-mode: ambient}}
spec:
  hosts: [web.shop.svc.cluster.local]
  addresses: [10.96.0.20]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  resolution: STATIC
  endpoints:
  - {address: 10.44.0.3, labels: {version: v1}}
  - {address: 10.44.0.4, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: shop, labels: {istio.io/use-waypoint: other}}
spec:
  hosts: [api.shop.svc.cluster.local]
  addresses: [10.96.0.21]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.5}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: shop}
spec:
  hosts: [db.shop.svc.cluster.local]
  addresses: [10.96.0.22]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.6}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: shop}
spec:
  host: web.shop.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  http:
  - match: [{headers: {x-version: {exact: v2}}}]
    route: [{destination: {host: web.shop.svc.cluster.local, subset: v2}}]
  - match: [{uri: {prefix: /db}}]
    route: [{destination: {host: db.shop.svc.cluster.local, port: {number: 5432}}}]
  - route:
    - {destination: {host: web.shop.svc.cluster.local, subset: v1}, weight: 90}
    - {destination: {host: web.shop.svc.cluster.local, subset: v2}, weight: 10}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: web-deny, namespace: shop}
spec:
  targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]
  action: DENY
  rules: [{to: [{operation: {paths: [/admin]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: waypoint-allow, namespace: shop}
spec:
  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]
  rules: [{from: [{source: {principals: [cluster.local/ns/shop/sa/client]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: by-selector, namespace: shop}
spec:
  selector: {matchLabels: {gateway.networking.k8s.io/gateway-name: waypoint}}
  action: DENY
  rules: [{}]
"#;

fn waypoint() -> Proxy {
    crate::testing::proxy(
        "waypoint~10.44.0.2~waypoint-0.shop~shop.svc.cluster.local",
        &[],
        &[("gateway.networking.k8s.io/gateway-name", "waypoint")],
    )
}

pub(super) fn resources(
    ctx: &PushContext,
    p: &Proxy,
    type_url: TypeUrl,
    names: &[&str],
) -> Vec<Value> {
    let scope = ctx.scope(p);
    let names: std::collections::BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    let names = (!names.is_empty()).then_some(&names);
    generate(ctx, p, &scope, type_url, names)
        .iter()
        .map(|r| {
            crate::envoy::json::to_json(&r.any.type_url, &r.any.value, Default::default()).unwrap()
        })
        .collect()
}

pub(super) fn names(list: &[Value]) -> Vec<&str> {
    list.iter().map(|v| v["name"].as_str().unwrap()).collect()
}

#[test]
fn a_waypoint_gets_istiods_listeners_and_clusters_in_istiods_order() {
    let ctx = crate::testing::push_context(MESH);
    let p = waypoint();
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    assert_eq!(
        names(&listeners),
        ["connect_terminate", "main_internal", "connect_originate"]
    );
    let clusters = resources(&ctx, &p, TypeUrl::Cluster, &[]);
    assert_eq!(
        names(&clusters),
        [
            "outbound|5432||db.shop.svc.cluster.local",
            "main_internal",
            "encap",
            "inbound-vip|80|http|web.shop.svc.cluster.local",
            "inbound-vip|80|http/v1|web.shop.svc.cluster.local",
            "inbound-vip|80|http/v2|web.shop.svc.cluster.local",
            "connect_originate",
        ],
        "db is routed to but not served: an outbound cluster; api is another waypoint's"
    );
    let terminate = &listeners[0];
    assert_eq!(terminate["address"]["socketAddress"]["portValue"], 15008);
    let originate = &clusters[6];
    assert_eq!(originate["type"], "ORIGINAL_DST");
    assert_eq!(
        originate["lbConfig"]
            .get("originalDstLbConfig")
            .or(originate.get("originalDstLbConfig"))
            .map(|c| c["upstreamPortOverride"].clone()),
        Some(Value::from(15008))
    );
}

#[test]
fn main_internal_serves_each_bound_service_by_vip_with_its_routes_and_policies() {
    let ctx = crate::testing::push_context(MESH);
    let p = waypoint();
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    let main = &listeners[1];
    let chains = main["filterChains"].as_array().unwrap();
    assert_eq!(
        names(chains),
        ["inbound-vip|80|http|web.shop.svc.cluster.local"],
        "only the services bound to this waypoint"
    );
    let chain = &chains[0];
    assert_eq!(
        chain["filterChainMatch"]["prefixRanges"][0]["addressPrefix"],
        "10.96.0.20"
    );
    assert_eq!(chain["filterChainMatch"]["destinationPort"], 80);
    let hcm = &chain["filters"][0]["typedConfig"];
    let routes = hcm["routeConfig"]["virtualHosts"][0]["routes"]
        .as_array()
        .unwrap();
    let cluster = |r: &Value| r["route"]["cluster"].as_str().map(str::to_string);
    assert_eq!(
        cluster(&routes[0]).as_deref(),
        Some("inbound-vip|80|http/v2|web.shop.svc.cluster.local")
    );
    assert_eq!(
        cluster(&routes[1]).as_deref(),
        Some("outbound|5432||db.shop.svc.cluster.local"),
        "a service the waypoint does not serve is reached as a sidecar reaches it"
    );
    let weighted: Vec<&str> = routes[2]["route"]["weightedClusters"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        weighted,
        [
            "inbound-vip|80|http/v1|web.shop.svc.cluster.local",
            "inbound-vip|80|http/v2|web.shop.svc.cluster.local"
        ]
    );
    let filters: Vec<&str> = hcm["httpFilters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        filters
            .iter()
            .filter(|f| **f == "envoy.filters.http.rbac")
            .count(),
        2,
        "the service's DENY and the waypoint's ALLOW; a selector policy never applies: {filters:?}"
    );
    let text = hcm.to_string();
    assert!(text.contains("ns[shop]-policy[web-deny]-rule[0]"), "{text}");
    assert!(!text.contains("by-selector"), "{text}");
    assert!(
        text.contains("io.istio.peer_principal")
            && text.contains("spiffe://cluster.local/ns/shop/sa/client"),
        "the tunnel peer's identity is matched from filter state: {text}"
    );
}

#[test]
fn inbound_vip_endpoints_are_tunnelled_through_connect_originate() {
    let ctx = crate::testing::push_context(MESH);
    let p = waypoint();
    let name = "inbound-vip|80|http/v1|web.shop.svc.cluster.local";
    let cla = resources(&ctx, &p, TypeUrl::Endpoint, &[name]);
    assert_eq!(cla[0]["clusterName"], name);
    let eps = cla[0]["endpoints"][0]["lbEndpoints"].as_array().unwrap();
    assert_eq!(eps.len(), 1, "the subset's endpoint only");
    let internal = &eps[0]["endpoint"]["address"]["envoyInternalAddress"];
    assert_eq!(internal["serverListenerName"], "connect_originate");
    assert_eq!(internal["endpointId"], "10.44.0.3:8080");
    assert_eq!(
        eps[0]["metadata"]["filterMetadata"]["envoy.filters.listener.original_dst"]["local"],
        "10.44.0.3:8080"
    );
}

#[test]
fn a_sidecar_never_takes_a_policy_targeting_a_service() {
    let ctx = crate::testing::push_context(MESH);
    let sidecar = crate::testing::proxy(
        "sidecar~10.44.0.3~web-0.shop~shop.svc.cluster.local",
        &[],
        &[("version", "v1")],
    );
    let scope = ctx.scope(&sidecar);
    let filters = crate::xds::generate::security::authz::http_filters(&ctx, &scope);
    let text = format!("{filters:?}");
    assert!(!text.contains("web-deny"), "{text}");
}

#[test]
fn an_ingress_gateway_tunnels_to_the_waypoint_of_a_service_that_asks_for_it() {
    let router = crate::testing::proxy(
        "router~10.44.0.9~ingress-0.shop~shop.svc.cluster.local",
        &[],
        &[("istio", "ingress")],
    );
    let name = "outbound|80||web.shop.svc.cluster.local";
    let plain = crate::testing::push_context(MESH);
    let cla = resources(&plain, &router, TypeUrl::Endpoint, &[name]);
    assert_eq!(
        cla[0]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"]["address"],
        "10.44.0.3",
        "without the label the gateway reaches the service's pods"
    );
    assert!(
        !names(&resources(&plain, &router, TypeUrl::Cluster, &[])).contains(&"connect_originate")
    );

    let labelled = MESH.replace(
        "labels: {istio.io/use-waypoint: waypoint, istio.io/dataplane-mode: ambient}",
        "labels: {istio.io/use-waypoint: waypoint, istio.io/dataplane-mode: ambient, istio.io/ingress-use-waypoint: \"true\"}",
    );
    let ctx = crate::testing::push_context(&labelled);
    let cla = resources(&ctx, &router, TypeUrl::Endpoint, &[name]);
    let ep = &cla[0]["endpoints"][0]["lbEndpoints"][0];
    assert_eq!(
        ep["endpoint"]["address"]["envoyInternalAddress"]["endpointId"], "10.44.0.2:15008",
        "the waypoint's pod"
    );
    let tunnel = &ep["metadata"]["filterMetadata"]["envoy.filters.listener.original_dst"];
    assert_eq!(
        tunnel["local"], "10.96.0.20:80",
        "the service's VIP is the destination"
    );
    assert_eq!(tunnel["waypoint"], "10.44.0.2:15008");
    let clusters = resources(&ctx, &router, TypeUrl::Cluster, &[]);
    assert!(names(&clusters).contains(&"connect_originate"));
    let web = clusters.iter().find(|c| c["name"] == name).unwrap();
    assert_eq!(web["transportSocket"]["name"], "internal_upstream");
    let listeners = resources(&ctx, &router, TypeUrl::Listener, &[]);
    assert!(names(&listeners).contains(&"connect_originate"));
}

#[test]
fn workloads_that_name_a_waypoint_for_workload_traffic_get_direct_chains() {
    let p = waypoint();
    let plain = crate::testing::push_context(MESH);
    assert!(
        super::bound_workloads(&plain, &plain.scope(&p)).is_empty(),
        "no workload names the waypoint"
    );
    let mesh = MESH
        .replace(
            "istio.io/waypoint-for: service",
            "istio.io/waypoint-for: all",
        )
        .replace(
            "{address: 10.44.0.3, labels: {version: v1}}",
            "{address: 10.44.0.3, labels: {version: v1, istio.io/use-waypoint: waypoint}}",
        );
    let ctx = crate::testing::push_context(&mesh);
    assert_eq!(
        super::bound_workloads(&ctx, &ctx.scope(&p)),
        ["10.44.0.3".parse::<std::net::IpAddr>().unwrap()]
    );
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    let chains = listeners[1]["filterChains"].as_array().unwrap();
    assert_eq!(
        names(chains),
        [
            "inbound-vip|80|http|web.shop.svc.cluster.local",
            "direct-tcp",
            "direct-http"
        ]
    );
    // A waypoint for service traffic only takes no workload's.
    let service_only = mesh.replace(
        "istio.io/waypoint-for: all",
        "istio.io/waypoint-for: service",
    );
    let ctx = crate::testing::push_context(&service_only);
    assert!(super::bound_workloads(&ctx, &ctx.scope(&p)).is_empty());
}

/// EnvoyFilter patches of context WAYPOINT apply to the waypoint they target; one with a `waypoint` match,
/// which Rudder does not read yet, applies nowhere rather than everywhere.
#[test]
fn waypoint_envoy_filters_apply_and_an_unread_match_fails_closed() {
    let p = waypoint();
    let patch = |matching: &str| {
        format!(
            "{MESH}---\napiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {{name: ef, namespace: shop}}\n\
spec: {{targetRefs: [{{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}}], configPatches: [{{applyTo: CLUSTER, match: {{context: WAYPOINT{matching}, cluster: {{name: encap}}}}, patch: {{operation: REMOVE}}}}]}}\n"
        )
    };
    let ctx = crate::testing::push_context(&patch(""));
    assert!(!names(&resources(&ctx, &p, TypeUrl::Cluster, &[])).contains(&"encap"));
    let ctx = crate::testing::push_context(&patch(", waypoint: {portNumber: 80}"));
    assert!(names(&resources(&ctx, &p, TypeUrl::Cluster, &[])).contains(&"encap"));
}

/// An HTTPRoute attached to a service (GAMMA; here its ServiceEntry) is applied at the
/// service's waypoint, as istiod applies it in ambient mode.
#[test]
fn a_gamma_route_of_a_bound_service_applies_at_its_waypoint() {
    let p = waypoint();
    let mesh = format!(
        "{}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web-split, namespace: shop}}
spec:
  parentRefs: [{{group: networking.istio.io, kind: ServiceEntry, name: web, port: 80}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /gamma}}}}]
    backendRefs: [{{name: db, port: 5432}}]
",
        MESH.replace(
            "kind: VirtualService\nmetadata: {name: web",
            "kind: VirtualService\nmetadata: {name: unused"
        )
        .replace(
            "hosts: [web.shop.svc.cluster.local]\n  http:",
            "hosts: [unused.example.com]\n  http:"
        )
    );
    let ctx = crate::testing::push_context(&mesh);
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    let routes = &listeners[1]["filterChains"][0]["filters"][0]["typedConfig"]["routeConfig"]["virtualHosts"]
        [0]["routes"];
    let text = routes.to_string();
    assert!(text.contains("/gamma"), "{text}");
    assert!(
        text.contains("outbound|5432||db.shop.svc.cluster.local"),
        "{text}"
    );
}

/// A RequestAuthentication targeting a served Service verifies tokens at the waypoint, on that
/// service's chain only; its JWKS host gets a cluster there.
#[test]
fn a_request_authentication_targeting_a_service_applies_at_the_waypoint() {
    let p = waypoint();
    let mesh = format!(
        "{MESH}---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {{name: web-jwt, namespace: shop}}
spec:
  targetRefs: [{{kind: ServiceEntry, group: networking.istio.io, name: web}}]
  jwtRules: [{{issuer: https://issuer.example.com, jwksUri: https://issuer.example.com/keys}}]
"
    );
    let ctx = crate::testing::push_context(&mesh);
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    let filters: Vec<String> =
        listeners[1]["filterChains"][0]["filters"][0]["typedConfig"]["httpFilters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect();
    assert!(
        filters.iter().any(|f| f == "envoy.filters.http.jwt_authn"),
        "{filters:?}"
    );
    let clusters = resources(&ctx, &p, TypeUrl::Cluster, &[]);
    assert!(
        names(&clusters).iter().any(|n| n.starts_with("jwks|")),
        "{:?}",
        names(&clusters)
    );
}

/// A Telemetry targeting a served ServiceEntry turns on access logs at the waypoint for that
/// service's chain only; the waypoint's other chains keep what the mesh says (nothing here).
#[test]
fn a_telemetry_targeting_a_service_logs_its_chain_at_the_waypoint() {
    let p = waypoint();
    let mesh = format!(
        "{MESH}---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {{name: web-logs, namespace: shop}}
spec:
  targetRefs: [{{kind: ServiceEntry, group: networking.istio.io, name: web}}]
  accessLogging: [{{providers: [{{name: envoy}}]}}]
"
    );
    let ctx = crate::testing::push_context(&mesh);
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    let main = listeners
        .iter()
        .find(|l| l["name"] == "main_internal")
        .expect("main_internal");
    let logged: Vec<(&str, usize)> = main["filterChains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let config = &c["filters"][0]["typedConfig"];
            let logs = config["accessLog"].as_array().map_or(0, Vec::len);
            (c["name"].as_str().unwrap(), logs)
        })
        .collect();
    assert!(
        logged
            .iter()
            .any(|(name, n)| name.ends_with("|web.shop.svc.cluster.local") && *n == 1),
        "{logged:?}"
    );
    assert!(
        logged
            .iter()
            .filter(|(name, _)| !name.contains("web.shop"))
            .all(|(_, n)| *n == 0),
        "{logged:?}"
    );
    // A sidecar is not a waypoint: the Telemetry does not reach it.
    let sidecar =
        crate::testing::proxy("sidecar~10.44.0.9~c.shop~shop.svc.cluster.local", &[], &[]);
    let text = serde_json::to_string(&resources(&ctx, &sidecar, TypeUrl::Listener, &[])).unwrap();
    assert!(!text.contains("envoy.access_loggers.file"), "sidecar logs");
}

/// With ambient on (PILOT_ENABLE_SENDING_HBONE), a sidecar reaches an ambient workload over
/// HBONE through its own `connect_originate`, as istiod: the endpoint is tunnelled to (marked
/// `tunnel: http`), the cluster picks the `hbone` socket for it first and keeps automatic mTLS
/// and plain text for the others; an endpoint outside the ambient mesh is reached directly; a
/// proxy with `DISABLE_HBONE_SEND`, or a mesh without ambient, gets none of it.
#[test]
fn a_sidecar_sends_hbone_to_ambient_workloads() {
    let on = crate::model::mesh::MeshSettings {
        send_hbone: true,
        ..Default::default()
    };
    let ctx = crate::testing::push_context_with(MESH, on);
    let client = |metadata: &[(&str, &str)]| {
        crate::testing::proxy(
            "sidecar~10.44.0.9~client-0.shop~shop.svc.cluster.local",
            metadata,
            &[("app", "client")],
        )
    };
    let web = "outbound|80||web.shop.svc.cluster.local";
    let db = "outbound|5432||db.shop.svc.cluster.local";
    let p = client(&[]);
    let clusters = resources(&ctx, &p, TypeUrl::Cluster, &[]);
    assert!(names(&clusters).contains(&"connect_originate"));
    let web_cluster = clusters.iter().find(|c| c["name"] == web).expect("web");
    let matches: Vec<&str> = web_cluster["transportSocketMatches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    // This proxy proved no identity, so no automatic mTLS: HBONE or plain text.
    assert_eq!(matches, ["hbone", "tlsMode-disabled"]);
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    assert!(names(&listeners).contains(&"connect_originate"));

    let eds = resources(&ctx, &p, TypeUrl::Endpoint, &[web, db]);
    let of = |name: &str| eds.iter().find(|c| c["clusterName"] == name).expect(name);
    let web_eps = of(web)["endpoints"][0]["lbEndpoints"].as_array().unwrap();
    assert_eq!(web_eps.len(), 2);
    for ep in web_eps {
        let internal = &ep["endpoint"]["address"]["envoyInternalAddress"];
        assert_eq!(internal["serverListenerName"], "connect_originate", "{ep}");
        let id = internal["endpointId"].as_str().unwrap();
        assert!(id.ends_with(":8080"), "{id}");
        let meta = &ep["metadata"]["filterMetadata"];
        assert_eq!(meta["envoy.filters.listener.original_dst"]["local"], id);
        assert_eq!(meta["envoy.transport_socket_match"]["tunnel"], "http");
    }
    assert_eq!(
        of(db)["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"]["address"],
        "10.44.0.6",
        "db is not in the ambient mesh: reached directly"
    );

    for (what, ctx, p) in [
        (
            "DISABLE_HBONE_SEND",
            &ctx,
            client(&[("DISABLE_HBONE_SEND", "true")]),
        ),
        (
            "ambient off",
            &crate::testing::push_context(MESH),
            client(&[]),
        ),
    ] {
        let clusters = resources(ctx, &p, TypeUrl::Cluster, &[]);
        assert!(!names(&clusters).contains(&"connect_originate"), "{what}");
        let text = serde_json::to_string(&resources(ctx, &p, TypeUrl::Endpoint, &[web])).unwrap();
        assert!(!text.contains("connect_originate"), "{what}: {text}");
    }
}

/// With ambient on, a sidecar whose metadata says ENABLE_HBONE takes HBONE as istiod's do:
/// `connect_terminate` on 15008 handing tunnels to `main_internal`, whose chains are its inbound
/// chains in plain text for its own addresses only, with the tunnel's peer for authorization; a
/// sidecar without the metadata, or a mesh without ambient, gets none of it.
#[test]
fn a_sidecar_with_enable_hbone_takes_hbone() {
    let on = crate::model::mesh::MeshSettings {
        send_hbone: true,
        sidecar_hbone_listen: true,
        ..Default::default()
    };
    let policy = format!(
        "{MESH}---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: web-clients, namespace: shop}}
spec:
  selector: {{matchLabels: {{version: v1}}}}
  rules: [{{from: [{{source: {{principals: [cluster.local/ns/shop/sa/client]}}}}]}}]
"
    );
    let ctx = crate::testing::push_context_with(&policy, on);
    let web = |metadata: &[(&str, &str)]| {
        crate::testing::proxy(
            "sidecar~10.44.0.3~web-0.shop~shop.svc.cluster.local",
            metadata,
            &[("version", "v1")],
        )
    };
    let p = web(&[("ENABLE_HBONE", "true")]);
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    let listener_names = names(&listeners);
    assert!(
        listener_names.contains(&"connect_terminate"),
        "{listener_names:?}"
    );
    let main = listeners
        .iter()
        .find(|l| l["name"] == "main_internal")
        .expect("main_internal");
    let chains = main["filterChains"].as_array().unwrap();
    assert!(!chains.is_empty());
    for chain in chains {
        let m = &chain["filterChainMatch"];
        assert_eq!(
            m["prefixRanges"][0]["addressPrefix"], "10.44.0.3",
            "{chain}"
        );
        assert!(m.get("transportProtocol").is_none(), "{chain}");
        assert!(
            chain.get("transportSocket").is_none(),
            "plain text in the tunnel"
        );
    }
    let text = serde_json::to_string(main).unwrap();
    assert!(
        text.contains("io.istio.peer_principal"),
        "the tunnel's peer is the identity: {text}"
    );
    let clusters = resources(&ctx, &p, TypeUrl::Cluster, &[]);
    assert!(names(&clusters).contains(&"main_internal"));

    for (what, ctx, p) in [
        ("no ENABLE_HBONE", &ctx, web(&[])),
        (
            "ambient off",
            &crate::testing::push_context(&policy),
            web(&[("ENABLE_HBONE", "true")]),
        ),
    ] {
        let listeners = resources(ctx, &p, TypeUrl::Listener, &[]);
        assert!(!names(&listeners).contains(&"connect_terminate"), "{what}");
        let clusters = resources(ctx, &p, TypeUrl::Cluster, &[]);
        assert!(!names(&clusters).contains(&"main_internal"), "{what}");
    }
}

/// Under ambient multi-network a waypoint in `west` reaches `east`'s endpoints over double
/// HBONE through `east`'s gateway (an `istio-remote` Gateway standing for it): istiod's extra
/// listeners and clusters, and one endpoint per gateway in place of the far endpoints, pointing at
/// `inner_connect_originate` with the gateway as the outer destination and the service's hostname
/// and port as both tunnels' authority. Without the switch (or with the waypoint one off) none
/// of it.
/// A mesh of two networks for double HBONE: `far` has endpoints in `west`, two in `east` (whose
/// gateway an `istio-remote` Gateway stands for) and one in a network without a gateway.
fn double_hbone_mesh() -> String {
    format!(
        "{MESH}---\n{}",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: ""
  meshNetworks: |
    networks:
      west: {endpoints: [{fromRegistry: Kubernetes}], gateways: []}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: far, namespace: shop, labels: {istio.io/use-waypoint: waypoint, istio.io/dataplane-mode: ambient}}
spec:
  hosts: [far.shop.svc.cluster.local]
  addresses: [10.96.0.40]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
  - {address: 10.44.0.11, network: west}
  - {address: 10.55.0.3, network: east}
  - {address: 10.55.0.4, network: east}
  - {address: 10.66.0.3, network: nowhere}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: east-gw, namespace: shop, labels: {topology.istio.io/network: east}}
spec:
  gatewayClassName: istio-remote
  addresses: [{type: IPAddress, value: 192.0.2.70}]
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
"#
    )
}

/// The internal listener an endpoint leads to.
fn listener_of(e: &Value) -> String {
    e["endpoint"]["address"]["envoyInternalAddress"]["serverListenerName"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_waypoint_reaches_another_network_over_double_hbone() {
    let multi = double_hbone_mesh();
    let context = |on: bool, waypoint: bool| {
        let mesh = crate::model::mesh::MeshSettings {
            ambient_multi_network: on,
            ambient_multi_network_waypoint: waypoint,
            ..Default::default()
        };
        let (mesh, _) = mesh.with_mesh_config(&crate::testing::store(&multi).snapshot());
        crate::testing::push_context_with(&multi, mesh)
    };
    let p = crate::testing::proxy(
        "waypoint~10.44.0.2~waypoint-0.shop~shop.svc.cluster.local",
        &[("NETWORK", "west")],
        &[("gateway.networking.k8s.io/gateway-name", "waypoint")],
    );
    let ctx = context(true, true);
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    assert_eq!(
        names(&listeners),
        [
            "connect_terminate",
            "main_internal",
            "connect_originate",
            "inner_connect_originate",
            "outer_connect_originate"
        ]
    );
    let clusters = resources(&ctx, &p, TypeUrl::Cluster, &[]);
    let cluster_names = names(&clusters);
    assert_eq!(
        &cluster_names[cluster_names.len() - 3..],
        [
            "connect_originate",
            "inner_connect_originate",
            "outer_connect_originate"
        ]
    );
    let far = "inbound-vip|80|http|far.shop.svc.cluster.local";
    let eds = resources(&ctx, &p, TypeUrl::Endpoint, &[far]);
    let endpoints: Vec<&Value> = eds[0]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["lbEndpoints"].as_array().unwrap())
        .collect();
    assert_eq!(
        endpoints.len(),
        2,
        "west's directly, east's through one gateway: {}",
        eds[0]
    );
    assert_eq!(listener_of(endpoints[0]), "connect_originate");
    let through = endpoints[1];
    assert_eq!(listener_of(through), "inner_connect_originate");
    assert_eq!(through["loadBalancingWeight"], 2, "east's two endpoints");
    let metadata = &through["metadata"]["filterMetadata"];
    assert_eq!(
        metadata["envoy.filters.listener.original_dst"]["local"],
        "192.0.2.70:15008"
    );
    assert_eq!(
        metadata["istio"]["double_hbone"]["hbone_target_address"],
        "far.shop.svc.cluster.local:80"
    );
    for (on, waypoint) in [(false, true), (true, false)] {
        let ctx = context(on, waypoint);
        assert_eq!(
            names(&resources(&ctx, &p, TypeUrl::Listener, &[])),
            ["connect_terminate", "main_internal", "connect_originate"]
        );
    }
    // With multi-network on but the waypoint's switch off, as istiod: the far networks'
    // endpoints are left out, never reached directly.
    let eds = resources(&context(true, false), &p, TypeUrl::Endpoint, &[far]);
    let addresses: Vec<String> = eds[0]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["lbEndpoints"].as_array().unwrap())
        .map(|e| e["endpoint"]["address"].to_string())
        .collect();
    assert_eq!(addresses.len(), 1, "{addresses:?}");
    assert!(addresses[0].contains("10.44.0.11"), "{addresses:?}");
}

/// An ingress gateway sending HBONE, with AMBIENT_ENABLE_MULTI_NETWORK_INGRESS: the same tunnels
/// as a waypoint's, its service cluster choosing them by the endpoint's `tunnel: http` mark.
#[test]
fn an_ingress_gateway_reaches_another_network_over_double_hbone() {
    let multi = double_hbone_mesh();
    let ingress = |on: bool| {
        let mesh = crate::model::mesh::MeshSettings {
            ambient_multi_network: true,
            ambient_multi_network_ingress: on,
            send_hbone: true,
            ..Default::default()
        };
        let (mesh, _) = mesh.with_mesh_config(&crate::testing::store(&multi).snapshot());
        crate::testing::push_context_with(&multi, mesh)
    };
    let gateway = crate::testing::proxy(
        "router~10.44.0.20~ingress-0.shop~shop.svc.cluster.local",
        &[("NETWORK", "west")],
        &[("istio", "ingressgateway")],
    );
    let ctx = ingress(true);
    let listeners = resources(&ctx, &gateway, TypeUrl::Listener, &[]);
    let listener_names = names(&listeners);
    assert!(
        listener_names.ends_with(&["inner_connect_originate", "outer_connect_originate"]),
        "{listener_names:?}"
    );
    let outer = &listeners[listeners.len() - 1];
    assert_eq!(
        outer["filterChains"][0]["filters"][0]["typedConfig"]["tunnelingConfig"]["headersToAdd"][0]
            ["header"]["value"],
        "gateway"
    );
    let cluster = "outbound|80||far.shop.svc.cluster.local";
    let eds = resources(&ctx, &gateway, TypeUrl::Endpoint, &[cluster]);
    let through = eds[0]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["lbEndpoints"].as_array().unwrap())
        .find(|e| listener_of(e) == "inner_connect_originate")
        .expect("the far network through its gateway");
    assert_eq!(
        through["metadata"]["filterMetadata"]["envoy.transport_socket_match"]["tunnel"],
        "http"
    );
    let ctx = ingress(false);
    assert!(
        !names(&resources(&ctx, &gateway, TypeUrl::Listener, &[]))
            .contains(&"inner_connect_originate"),
        "off by default, as istiod"
    );
}

/// A WasmPlugin (or TrafficExtension) targeting the waypoint's Gateway is enforced at the
/// waypoint, as istiod's buildWaypointHTTPFilters inserts it: in every HTTP chain of
/// `main_internal`, an AUTHN plugin before the JWT and RBAC filters, the module served by ECDS.
/// Before, it was attached and then skipped: an authenticating plugin the user asked for was not
/// enforced. The tunnel ends never get it.
#[test]
fn a_wasm_plugin_targeting_the_waypoint_runs_in_its_http_chains() {
    let p = waypoint();
    let mesh = format!(
        "{MESH}---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {{name: auth, namespace: shop}}
spec:
  targetRefs: [{{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}}]
  url: oci://registry.example.com/auth:1
  phase: AUTHN
"
    );
    let ctx = crate::testing::push_context(&mesh);
    let listeners = resources(&ctx, &p, TypeUrl::Listener, &[]);
    let http_filters = |listener: &Value| -> Vec<Vec<String>> {
        listener["filterChains"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|chain| chain["filters"].as_array().cloned().unwrap_or_default())
            .filter_map(|f| {
                f["typedConfig"]["httpFilters"].as_array().map(|hf| {
                    hf.iter()
                        .map(|x| x["name"].as_str().unwrap_or_default().to_string())
                        .collect()
                })
            })
            .collect()
    };
    let main = listeners
        .iter()
        .find(|l| l["name"] == "main_internal")
        .unwrap();
    let chains = http_filters(main);
    assert!(!chains.is_empty());
    for filters in &chains {
        let plugin = filters.iter().position(|f| f.contains("shop.auth"));
        let rbac = filters.iter().position(|f| f == "envoy.filters.http.rbac");
        assert!(plugin.is_some(), "{filters:?}");
        assert!(rbac.is_none_or(|r| plugin < Some(r)), "{filters:?}");
    }
    let terminate = listeners
        .iter()
        .find(|l| l["name"] == "connect_terminate")
        .unwrap();
    assert!(
        http_filters(terminate)
            .iter()
            .flatten()
            .all(|f| !f.contains("shop.auth"))
    );
    let name = chains[0].iter().find(|f| f.contains("shop.auth")).unwrap();
    let ecds = resources(&ctx, &p, TypeUrl::ExtensionConfig, &[name.as_str()]);
    assert_eq!(names(&ecds), [name.as_str()]);
}
