//! Everything a varied set of proxies receives from a varied mesh, written out whole when
//! `RUDDER_OUTPUT_SNAPSHOT` names a file: a restructuring runs `scripts/output-snapshot.sh` before
//! and after and compares the two files byte for byte. Without the variable the test still builds
//! every resource, so a panic anywhere in the generators fails it. Workload certificates are random
//! per run, so SDS is left out.

use super::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Istio's published shapes (the examples the daemon serves, Istio's own fixtures), a waypoint's
/// mesh, ambient pods, and the Gateway API and Ingress, so every proxy role has something to build.
pub(super) fn mesh() -> String {
    let files = [
        include_str!("../../../../examples/services.yaml"),
        include_str!("../../../../examples/routing.yaml"),
        include_str!("../../../../examples/ingress.yaml"),
        include_str!("../../../../tests/fixtures/istio/bookinfo-gateway.yaml"),
        include_str!("../../../../tests/fixtures/istio/destination-rule-all.yaml"),
        include_str!("../../../../tests/fixtures/istio/egress.yaml"),
        include_str!("../../../../tests/fixtures/istio/extensions.yaml"),
        include_str!("../../../../tests/fixtures/istio/security.yaml"),
        include_str!("../../../../tests/fixtures/istio/virtual-service-routing.yaml"),
        crate::xds::generate::waypoint::tests::MESH,
        AMBIENT_PODS,
        GATEWAY_API,
    ];
    files.join("\n---\n")
}

/// The Gateway API and Kubernetes kinds: routes of every kind through a Gateway of its own (with a
/// ListenerSet, a certificate, a grant and a BackendTLSPolicy with its CA), an HTTPRoute with
/// every core filter and a missing backend, a mesh (GAMMA) route, an Ingress and its class, a node.
const GATEWAY_API: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: istio}
spec: {controllerName: istio.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: edge}
spec:
  gatewayClassName: istio
  allowedListeners: {namespaces: {from: Same}}
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
  - {name: https, port: 443, protocol: HTTPS, hostname: secure.example.com, tls: {mode: Terminate, certificateRefs: [{name: edge-cert}]}}
  - {name: tcp, port: 9000, protocol: TCP}
  - {name: tls, port: 8443, protocol: TLS, tls: {mode: Passthrough}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: edge}
spec:
  parentRef: {name: edge}
  listeners: [{name: admin, port: 8081, protocol: HTTP, hostname: admin.example.com}]
---
apiVersion: v1
kind: Secret
metadata: {name: edge-cert, namespace: edge}
type: kubernetes.io/tls
data: {tls.crt: "", tls.key: ""}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: apps}
spec: {clusterIP: 10.96.7.1, ports: [{name: http, port: 8080}, {name: grpc, port: 9090, appProtocol: grpc}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: edge}
spec:
  parentRefs: [{name: edge}, {group: gateway.networking.k8s.io, kind: ListenerSet, name: extra}]
  rules: [{backendRefs: [{name: api, namespace: apps, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-edge, namespace: apps}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: edge}, {group: gateway.networking.k8s.io, kind: GRPCRoute, namespace: edge}, {group: gateway.networking.k8s.io, kind: TCPRoute, namespace: edge}, {group: gateway.networking.k8s.io, kind: TLSRoute, namespace: edge}]
  to: [{group: '', kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: rpc, namespace: edge}
spec:
  parentRefs: [{name: edge, sectionName: http}]
  hostnames: [rpc.example.com]
  rules: [{backendRefs: [{name: api, namespace: apps, port: 9090}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: raw, namespace: edge}
spec:
  parentRefs: [{name: edge, sectionName: tcp}]
  rules: [{backendRefs: [{name: api, namespace: apps, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: pass, namespace: edge}
spec:
  parentRefs: [{name: edge, sectionName: tls}]
  hostnames: [pass.example.com]
  rules: [{backendRefs: [{name: api, namespace: apps, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: api-tls, namespace: apps}
spec:
  targetRefs: [{group: "", kind: Service, name: api, sectionName: http}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: api-ca}], hostname: api.example.com}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: api-ca, namespace: apps}
data: {ca.crt: "not a certificate"}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: apps}
spec:
  ingressClassName: istio
  rules:
  - host: shop.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 8080}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: istio}
spec: {controller: istio.io/ingress-controller}
---
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {topology.kubernetes.io/region: r1, topology.kubernetes.io/zone: z1}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shaped, namespace: edge}
spec:
  parentRefs: [{name: edge, sectionName: http}]
  hostnames: [shaped.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 301}
  - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-canary, value: "1"}]}]
    filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: x-from, value: edge}], remove: [x-debug]}}
    - {type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v2}}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: api, namespace: apps, port: 8080}}}
    backendRefs: [{name: api, namespace: apps, port: 8080, weight: 90}, {name: missing, port: 80, weight: 10}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: reviews-canary, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: reviews, port: 9080}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /v2}}]
    backendRefs: [{name: reviews, port: 9080}]
"#;

const AMBIENT_PODS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {istio.io/dataplane-mode: ambient}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web, version: v1}}
spec: {serviceAccountName: web, nodeName: node-a, containers: [{name: app}]}
status: {phase: Running, podIP: 10.44.0.3, podIPs: [{ip: 10.44.0.3}]}
---
apiVersion: v1
kind: Pod
metadata: {name: client-0, namespace: shop, labels: {app: client}}
spec: {serviceAccountName: client, nodeName: node-a, containers: [{name: app}]}
status: {phase: Running, podIP: 10.44.0.7, podIPs: [{ip: 10.44.0.7}]}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: bookinfo}
spec:
  clusterIP: 10.96.1.10
  selector: {app: reviews}
  ports: [{name: http, port: 9080, targetPort: 9080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: reviews-1, namespace: bookinfo, labels: {kubernetes.io/service-name: reviews}}
addressType: IPv4
ports: [{name: http, port: 9080}]
endpoints:
- addresses: [10.0.0.11]
  targetRef: {kind: Pod, name: reviews-v1-0, namespace: bookinfo}
---
apiVersion: v1
kind: Pod
metadata: {name: reviews-v1-0, namespace: bookinfo, labels: {app: reviews, version: v1, security.istio.io/tlsMode: istio}}
spec: {serviceAccountName: bookinfo-reviews, nodeName: node-a, containers: [{name: app}]}
status: {phase: Running, podIP: 10.0.0.11, podIPs: [{ip: 10.0.0.11}]}
"#;

/// `p` as its stream proved it runs as `service_account` (a sidecar with a certificate).
fn with_identity(mut p: Proxy, service_account: &str) -> Proxy {
    p.identity = Some(crate::model::identity::Identity {
        trust_domain: "cluster.local".into(),
        namespace: p.namespace.clone(),
        service_account: service_account.into(),
    });
    p
}

/// One proxy of each role and generator.
pub(super) fn proxies() -> Vec<(&'static str, Proxy)> {
    use crate::testing::proxy;
    let reviews = proxy(
        "sidecar~10.0.0.11~reviews-v1-0.bookinfo~bookinfo.svc.cluster.local",
        &[],
        &[
            ("app", "reviews"),
            ("version", "v1"),
            ("security.istio.io/tlsMode", "istio"),
        ],
    );
    vec![
        ("sidecar-default", crate::testing::sidecar("default", &[])),
        (
            "sidecar-bookinfo-dns",
            proxy(
                "sidecar~10.0.0.9~productpage-0.bookinfo~bookinfo.svc.cluster.local",
                &[
                    ("ISTIO_META_DNS_CAPTURE", "true"),
                    ("ISTIO_META_DNS_AUTO_ALLOCATE", "true"),
                ],
                &[("app", "productpage"), ("version", "v1")],
            ),
        ),
        (
            "sidecar-reviews",
            with_identity(reviews, "bookinfo-reviews"),
        ),
        (
            "grpc-foo",
            proxy(
                "sidecar~10.0.0.10~client-0.foo~foo.svc.cluster.local",
                &[("GENERATOR", "grpc")],
                &[("app", "client")],
            ),
        ),
        (
            "ingressgateway",
            proxy(
                "router~10.0.0.5~istio-ingressgateway-0.istio-system~istio-system.svc.cluster.local",
                &[],
                &[("istio", "ingressgateway")],
            ),
        ),
        (
            "egressgateway",
            proxy(
                "router~10.0.0.6~istio-egressgateway-0.istio-system~istio-system.svc.cluster.local",
                &[],
                &[("istio", "egressgateway")],
            ),
        ),
        (
            "waypoint",
            proxy(
                "waypoint~10.44.0.2~waypoint-0.shop~shop.svc.cluster.local",
                &[],
                &[("gateway.networking.k8s.io/gateway-name", "waypoint")],
            ),
        ),
        (
            "gateway-api",
            proxy(
                "router~10.0.0.30~edge-istio-0.edge~edge.svc.cluster.local",
                &[],
                &[("gateway.networking.k8s.io/gateway-name", "edge")],
            ),
        ),
        (
            "ztunnel",
            proxy(
                "ztunnel~10.0.1.1~ztunnel-abc.istio-system~istio-system.svc.cluster.local",
                &[("NODE_NAME", "node-a")],
                &[("app", "ztunnel")],
            ),
        ),
    ]
}

pub(super) const GRPC_TARGETS: [&str; 3] = [
    "reviews.bookinfo.svc.cluster.local:9080",
    "web.shop.svc.cluster.local:80",
    "details.bookinfo.svc.cluster.local:9080",
];

/// Every string under `key` anywhere in `value`.
fn strings_under(value: &Value, key: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::String(s) if k == key => {
                        out.insert(s.clone());
                    }
                    _ => strings_under(v, key, out),
                }
            }
        }
        Value::Array(list) => list.iter().for_each(|v| strings_under(v, key, out)),
        _ => {}
    }
}

/// The names a proxy would ask for of a named type, read from what refers to them.
fn asked_names(type_url: TypeUrl, listeners: &[Value], clusters: &[Value]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    match type_url {
        TypeUrl::Route => listeners
            .iter()
            .for_each(|l| strings_under(l, "routeConfigName", &mut names)),
        TypeUrl::Endpoint => {
            for c in clusters.iter().filter(|c| c["type"] == "EDS") {
                let service = c["edsClusterConfig"]["serviceName"].as_str();
                if let Some(name) = service.or(c["name"].as_str()) {
                    names.insert(name.to_string());
                }
            }
        }
        _ => {
            // SDS and ECDS names sit beside their config source.
            let key = if type_url == TypeUrl::Secret {
                "sdsConfig"
            } else {
                "configDiscovery"
            };
            for v in listeners.iter().chain(clusters) {
                names_beside(v, key, &mut names);
            }
        }
    }
    names
}

fn names_beside(value: &Value, key: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if map.contains_key(key)
                && let Some(Value::String(name)) = map.get("name")
            {
                out.insert(name.clone());
            }
            map.values().for_each(|v| names_beside(v, key, out));
        }
        Value::Array(list) => list.iter().for_each(|v| names_beside(v, key, out)),
        _ => {}
    }
}

fn as_json(resources: &[Arc<crate::xds::resource::Resource>]) -> Vec<Value> {
    resources
        .iter()
        .map(|r| {
            crate::envoy::json::to_json(&r.any.type_url, &r.any.value, Default::default()).unwrap()
        })
        .collect()
}

/// The names `p` (called `label`) asks for of `type_url`, `None` for all: read from what the
/// proxy's listeners, clusters and routes refer to.
pub(super) fn asked(
    ctx: &PushContext,
    p: &Proxy,
    label: &str,
    type_url: TypeUrl,
) -> Option<BTreeSet<String>> {
    let grpc = label.starts_with("grpc");
    let listeners = as_json(&resources_of(ctx, p, TypeUrl::Listener, grpc, &[], &[]));
    let clusters = as_json(&resources_of(
        ctx,
        p,
        TypeUrl::Cluster,
        grpc,
        &listeners,
        &[],
    ));
    names_for(ctx, p, type_url, grpc, &listeners, &clusters)
}

/// The names `p` asks for of `type_url` after receiving `listeners` and `clusters`; `None`:
/// every one (a wildcard subscription).
fn names_for(
    ctx: &PushContext,
    p: &Proxy,
    type_url: TypeUrl,
    grpc: bool,
    listeners: &[Value],
    clusters: &[Value],
) -> Option<BTreeSet<String>> {
    let wildcard = match type_url {
        TypeUrl::Listener | TypeUrl::Cluster => !grpc,
        TypeUrl::NameTable | TypeUrl::Address | TypeUrl::Authorization => true,
        _ => false,
    };
    if wildcard {
        return None;
    }
    Some(match type_url {
        TypeUrl::Listener if grpc => GRPC_TARGETS.iter().map(|s| s.to_string()).collect(),
        TypeUrl::Cluster if grpc => {
            let mut names = BTreeSet::new();
            for route in as_json(&resources_of(ctx, p, TypeUrl::Route, grpc, listeners, &[])) {
                strings_under(&route, "cluster", &mut names);
            }
            names
        }
        _ => asked_names(type_url, listeners, clusters),
    })
}

/// What `p` would receive of `type_url`, after asking for `listeners`' and `clusters`' names.
fn resources_of(
    ctx: &PushContext,
    p: &Proxy,
    type_url: TypeUrl,
    grpc: bool,
    listeners: &[Value],
    clusters: &[Value],
) -> Vec<Arc<crate::xds::resource::Resource>> {
    let scope = ctx.scope(p);
    let names = names_for(ctx, p, type_url, grpc, listeners, clusters);
    generate(ctx, p, &scope, type_url, names.as_ref())
}

#[test]
fn output_snapshot() {
    let ctx = crate::testing::push_context_with_mesh_config(&mesh());
    let mut out = String::new();
    let mut total = 0;
    for (label, p) in proxies() {
        let grpc = label.starts_with("grpc");
        let listeners = as_json(&resources_of(&ctx, &p, TypeUrl::Listener, grpc, &[], &[]));
        let clusters = as_json(&resources_of(
            &ctx,
            &p,
            TypeUrl::Cluster,
            grpc,
            &listeners,
            &[],
        ));
        for type_url in TypeUrl::ALL {
            // ztunnel asks for its two types only, and only ztunnel asks for them.
            let for_ztunnel = matches!(type_url, TypeUrl::Address | TypeUrl::Authorization);
            if (label == "ztunnel") != for_ztunnel {
                continue;
            }
            let resources = resources_of(&ctx, &p, type_url, grpc, &listeners, &clusters);
            for (resource, json) in resources.iter().zip(as_json(&resources)) {
                total += 1;
                let pretty = serde_json::to_string_pretty(&json).unwrap();
                writeln!(out, "== {label} {type_url:?} {}\n{pretty}", resource.name).unwrap();
            }
        }
    }
    assert!(
        total > 100,
        "a varied mesh gives every proxy something: {total} resources"
    );
    if let Ok(path) = std::env::var("RUDDER_OUTPUT_SNAPSHOT") {
        std::fs::write(&path, out).unwrap();
    }
}
