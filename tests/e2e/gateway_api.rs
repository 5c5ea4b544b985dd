//! The Kubernetes Gateway API through a real Envoy acting as the Gateway's proxy, configured by
//! Rudder from the fake API server (and a real one with KUBECONFIG and the Gateway API CRDs):
//! HTTPRoute matches, filters and precedence as the spec's conformance scenarios exercise them,
//! HTTPS with a `certificateRefs` Secret over SDS, ReferenceGrant for a cross-namespace
//! backend, and the status the leader writes (GatewayClass, Gateway listeners, route parents).

use crate::common::cluster::{Cluster, istio_crd};
use crate::common::peers::{Backend, free_port, peer, request, request_full};
use crate::common::{eventually, http_get};
use crate::gateway::{HOST, boot_gateway, https_get, web_certificates};
use serde_json::{Value, json};

const GROUP: &str = "gateway.networking.k8s.io";

/// A Gateway API CRD as the fake API server needs it: its served versions and scope.
fn gateway_api_crd(plural: &str, kind: &str, versions: &[&str], namespaced: bool) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"name": v, "served": true, "storage": i == 0}))
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("{plural}.{GROUP}")},
           "spec": {"group": GROUP, "scope": if namespaced { "Namespaced" } else { "Cluster" },
                    "names": {"plural": plural, "kind": kind, "singular": kind.to_lowercase()},
                    "versions": versions}})
}

pub(crate) fn install_gateway_api(c: &Cluster) {
    if !c.is_fake() {
        return;
    }
    for (plural, kind, versions, namespaced) in [
        (
            "gatewayclasses",
            "GatewayClass",
            &["v1", "v1beta1"][..],
            false,
        ),
        ("gateways", "Gateway", &["v1", "v1beta1"][..], true),
        ("httproutes", "HTTPRoute", &["v1", "v1beta1"][..], true),
        ("grpcroutes", "GRPCRoute", &["v1"][..], true),
        ("referencegrants", "ReferenceGrant", &["v1beta1"][..], true),
        ("tlsroutes", "TLSRoute", &["v1", "v1alpha2"][..], true),
        (
            "backendtlspolicies",
            "BackendTLSPolicy",
            &["v1", "v1alpha3"][..],
            true,
        ),
        ("listenersets", "ListenerSet", &["v1"][..], true),
    ] {
        c.apply(gateway_api_crd(plural, kind, versions, namespaced));
    }
    c.apply(istio_crd(
        "networking.istio.io",
        "serviceentries",
        "ServiceEntry",
    ));
}

/// The backend `echo` in `ns`, and the backendRef that names it: a Service with an
/// EndpointSlice at 127.0.0.1 on the fake (a real API server refuses loopback endpoints: there,
/// a ServiceEntry host, which istiod serves as `kind: Hostname`).
fn echo_backend(c: &Cluster, ns: &str, port: u16) -> Value {
    if c.is_fake() {
        c.apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": ns},
            "spec": {"clusterIP": "10.96.0.40", "ports": [{"name": "http", "port": 80, "targetPort": port}]}}));
        c.apply(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "echo-x", "namespace": ns, "labels": {"kubernetes.io/service-name": "echo"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}));
        json!({"name": "echo", "namespace": ns, "port": 80})
    } else {
        let host = format!("echo.{ns}.internal");
        c.apply(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "echo", "namespace": ns},
            "spec": {"hosts": [host], "location": "MESH_INTERNAL", "resolution": "STATIC",
                     "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
                     "endpoints": [{"address": "127.0.0.1", "ports": {"http": port}}]}}),
        );
        json!({"group": "networking.istio.io", "kind": "Hostname", "name": host, "port": 80})
    }
}

/// The proxy of Gateway `gw` of `namespace` in files mode, on the plaintext xDS port: a router
/// pod labelled with the Gateway's name (without Services, that label is how it is found).
pub(crate) fn files_mode_gateway(
    envoy_bin: &std::path::Path,
    daemon: &crate::common::Daemon,
    namespace: &str,
) -> crate::common::peers::Envoy {
    crate::common::peers::Envoy::boot(
        envoy_bin,
        daemon.addr("grpc-xds"),
        &crate::common::peers::Bootstrap {
            node_type: "router",
            pod: "gw-istio-0",
            namespace,
            labels: "gateway.networking.k8s.io/gateway-name: gw",
            ..Default::default()
        },
    )
}

fn condition<'a>(conditions: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == kind)
}

/// The route's condition `kind` for its first parent, as the API server has it.
fn route_condition(c: &Cluster, ns: &str, name: &str, kind: &str) -> Option<Value> {
    let route = c.get_json(
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": ns}}),
    )?;
    condition(&route["status"]["parents"][0]["conditions"], kind).cloned()
}

#[test]
fn http_routes_through_a_gateway_envoy_with_status() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("gateway-api") {
        let ns = c.ns.clone();
        let apps = format!("{ns}-apps");
        install_gateway_api(&c);
        for n in [&ns, &apps] {
            c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}));
        }
        let backend = Backend::start("backend");
        let echo = echo_backend(&c, &ns, backend.port);
        let certs = web_certificates();
        let b64 = |s: &str| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(s)
        };
        c.apply(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "web-cert", "namespace": ns},
            "data": {"tls.crt": b64(&certs.chain), "tls.key": b64(&certs.key)}}),
        );
        let (http_port, https_port, passthrough_port) = (free_port(), free_port(), free_port());
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": ns},
            "spec": {"gatewayClassName": "istio", "listeners": [
                {"name": "http", "port": http_port, "protocol": "HTTP", "hostname": "*.example.com",
                 "allowedRoutes": {"namespaces": {"from": "All"}}},
                {"name": "https", "port": https_port, "protocol": "HTTPS", "hostname": HOST,
                 "tls": {"certificateRefs": [{"name": "web-cert"}]}},
                {"name": "passthrough", "port": passthrough_port, "protocol": "TLS", "hostname": HOST,
                 "tls": {"mode": "Passthrough"}}]}}),
        );
        // Passed through, still encrypted, to the Gateway's own HTTPS listener.
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "self-tls", "namespace": ns},
            "spec": {"hosts": ["self-tls.internal"], "location": "MESH_EXTERNAL", "resolution": "STATIC",
                     "ports": [{"number": 443, "name": "tls", "protocol": "TLS"}],
                     "endpoints": [{"address": "127.0.0.1", "ports": {"tls": https_port}}]}}));
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "TLSRoute",
            "metadata": {"name": "pass", "namespace": ns},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "passthrough"}],
                     "hostnames": [HOST],
                     "rules": [{"backendRefs": [{"group": "networking.istio.io", "kind": "Hostname",
                                                 "name": "self-tls.internal", "port": 443}]}]}}),
        );
        c.apply(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "http"}],
                     "hostnames": ["a.example.com"],
                     "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                 "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}},
                             {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-route", "value": "web"}]}}],
                 "backendRefs": [echo.clone()]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
                 "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "hostname": "new.example.com", "statusCode": 301}}]},
                {"matches": [{"path": {"type": "Exact", "value": "/exact"}, "headers": [{"name": "x-version", "value": "2"}]}],
                 "filters": [{"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "x-matched", "value": "exact-v2"}]}}],
                 "backendRefs": [echo.clone()]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": [echo.clone()]}]}}));
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
            "metadata": {"name": "secure", "namespace": ns},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "https"}],
                     "rules": [{"backendRefs": [echo.clone()]}]}}),
        );
        // From another namespace, to a backend of the Gateway's: only with a ReferenceGrant
        // (a `Hostname` backend has no namespace: the fake's Service only).
        let cross = echo.clone();
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
            "metadata": {"name": "cross", "namespace": apps},
            "spec": {"parentRefs": [{"name": "gw", "namespace": ns, "sectionName": "http"}],
                     "hostnames": ["b.example.com"],
                     "rules": [{"backendRefs": [cross]}]}}),
        );
        // The gateway's service account may not read Secrets, as with the chart's RBAC and
        // istiod's deployment template (a real cluster grants it nothing): the listener's
        // reference is what authorises its certificate.
        c.refuse_secret_list(&ns, "gateway");
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let _gw = boot_gateway(
            &c,
            &daemon,
            &envoy_bin,
            "gw-istio-0",
            "gateway.networking.k8s.io/gateway-name: gw",
            "",
        );
        eventually(60, "the HTTPRoute served", || {
            request(http_port, "a.example.com", "/api/items", &[]).0 == 200
        });
        // ReplacePrefixMatch `/` drops the prefix; the header is set on the way.
        assert_eq!(
            request(
                http_port,
                "a.example.com",
                "/api/items",
                &[("x-echo-headers", "x-route")]
            ),
            (200, "backend /items x-route=web".into())
        );
        // A prefix matches whole path segments: `/apix` is the catch-all's, unrewritten.
        assert_eq!(
            request(http_port, "a.example.com", "/apix", &[]),
            (200, "backend /apix".into())
        );
        let redirect = request_full(http_port, "a.example.com", "/old/page", &[]);
        assert_eq!(redirect.status, 301);
        assert_eq!(
            redirect.header("location"),
            Some("https://new.example.com/old/page")
        );
        // The exact match with a header wins over the catch-all; without the header it does not.
        let exact = request_full(http_port, "a.example.com", "/exact", &[("x-version", "2")]);
        assert_eq!(
            (exact.status, exact.header("x-matched")),
            (200, Some("exact-v2"))
        );
        let other = request_full(http_port, "a.example.com", "/exact", &[]);
        assert_eq!((other.status, other.header("x-matched")), (200, None));
        // A hostname no route names: 404.
        assert_eq!(request(http_port, "c.example.com", "/", &[]).0, 404);
        // HTTPS with the listener's certificate from its Secret.
        eventually(60, "the HTTPS listener served", || {
            https_get(https_port, &certs.ca, "/tls").0 == 200
        });
        assert_eq!(
            https_get(https_port, &certs.ca, "/tls"),
            (200, "backend /tls".into())
        );
        // TLS passed through by SNI to the HTTPS listener, which terminates it.
        eventually(60, "the TLSRoute passes TLS through", || {
            https_get(passthrough_port, &certs.ca, "/passed") == (200, "backend /passed".into())
        });
        if c.is_fake() {
            // The cross-namespace backend without a grant: refused, and said so.
            eventually(60, "the cross-namespace route answers 500", || {
                request(http_port, "b.example.com", "/", &[]).0 == 500
            });
            eventually(60, "RefNotPermitted in the route's status", || {
                route_condition(&c, &apps, "cross", "ResolvedRefs")
                    .is_some_and(|r| r["reason"] == "RefNotPermitted" && r["status"] == "False")
            });
            c.apply(
                json!({"apiVersion": format!("{GROUP}/v1beta1"), "kind": "ReferenceGrant",
                "metadata": {"name": "from-apps", "namespace": ns},
                "spec": {"from": [{"group": GROUP, "kind": "HTTPRoute", "namespace": apps}],
                         "to": [{"group": "", "kind": "Service"}]}}),
            );
            eventually(60, "the granted route served", || {
                request(http_port, "b.example.com", "/granted", &[])
                    == (200, "backend /granted".into())
            });
            eventually(60, "ResolvedRefs once granted", || {
                route_condition(&c, &apps, "cross", "ResolvedRefs")
                    .is_some_and(|r| r["status"] == "True")
            });
        }
        // The leader's status: the class it created, the Gateway's listeners, the routes.
        eventually(60, "GatewayClass istio created and accepted", || {
            c.get_json(
                json!({"apiVersion": format!("{GROUP}/v1"), "kind": "GatewayClass",
                "metadata": {"name": "istio"}}),
            )
            .is_some_and(|gc| {
                condition(&gc["status"]["conditions"], "Accepted")
                    .is_some_and(|a| a["status"] == "True")
            })
        });
        eventually(60, "the Gateway's listener status", || {
            let Some(gw) = c.get_json(
                json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": ns}}),
            ) else {
                return false;
            };
            let l = &gw["status"]["listeners"];
            condition(&gw["status"]["conditions"], "Accepted")
                .is_some_and(|a| a["status"] == "True")
                && l[0]["name"] == "http"
                && l[0]["attachedRoutes"] == 2
                && l[1]["attachedRoutes"] == 1
                && condition(&l[1]["conditions"], "ResolvedRefs")
                    .is_some_and(|r| r["status"] == "True")
        });
        // The managed Gateway deployed: its account, Deployment and Service, owned by it.
        if c.is_fake() {
            for (api_version, kind) in [
                ("v1", "ServiceAccount"),
                ("apps/v1", "Deployment"),
                ("v1", "Service"),
            ] {
                eventually(60, &format!("the managed Gateway's {kind}"), || {
                    c.get_json(json!({"apiVersion": api_version, "kind": kind,
                        "metadata": {"name": "gw-istio", "namespace": ns}}))
                        .is_some_and(|o| {
                            o["metadata"]["ownerReferences"][0]["name"] == "gw"
                                && o["metadata"]["labels"]["gateway.istio.io/managed"]
                                    == "istio.io-gateway-controller"
                        })
                });
            }
            let svc = c
                .get_json(json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "gw-istio", "namespace": ns}}))
                .unwrap();
            let ports: Vec<u64> = svc["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["port"].as_u64().unwrap())
                .collect();
            assert_eq!(
                ports,
                [
                    15021,
                    u64::from(http_port),
                    u64::from(https_port),
                    u64::from(passthrough_port)
                ]
            );
        }
        let accepted = route_condition(&c, &ns, "web", "Accepted").expect("web's status");
        assert_eq!(accepted["status"], "True");
        assert_eq!(accepted["observedGeneration"], 1);
        drop(daemon);
    }
}

/// Files mode: the Gateway API from a config directory, no cluster. Backends are ServiceEntry
/// hosts (`kind: Hostname`). A gateway Envoy splits by weight, matches query parameters and
/// methods, and proxies TCP; a sidecar Envoy follows an HTTPRoute attached to a ServiceEntry
/// (GAMMA); a Service parent, which files mode has none of, is not accepted.
#[test]
fn routes_from_a_config_directory_in_files_mode() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (a, b, tcp) = (
        Backend::start("a"),
        Backend::start("b"),
        Backend::start("tcp"),
    );
    let (http_port, tcp_port, mesh_port) = (free_port(), free_port(), free_port());
    let entry = |name: &str, host: &str, port: u16, backend: u16, protocol: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: shop}}\nspec: {{hosts: [{host}], location: MESH_INTERNAL, resolution: STATIC, ports: [{{number: {port}, name: p, protocol: {protocol}}}], endpoints: [{{address: 127.0.0.1, ports: {{p: {backend}}}}}]}}\n"
        )
    };
    let mut yaml = String::new();
    yaml += &entry("a", "a.internal", 80, a.port, "HTTP");
    yaml += &entry("b", "b.internal", 80, b.port, "HTTP");
    yaml += &entry("tcp", "tcp.internal", 9000, tcp.port, "TCP");
    yaml += &entry("reviews", "reviews.example.com", mesh_port, a.port, "HTTP");
    yaml += &format!(
        r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: shop}}
spec:
  gatewayClassName: istio
  listeners:
  - {{name: http, port: {http_port}, protocol: HTTP}}
  - {{name: tcp, port: {tcp_port}, protocol: TCP}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: split, namespace: shop}}
spec:
  parentRefs: [{{name: gw, sectionName: http}}]
  rules:
  - matches: [{{queryParams: [{{name: only, value: b}}]}}]
    backendRefs: [{{group: networking.istio.io, kind: Hostname, name: b.internal, port: 80}}]
  - matches: [{{method: DELETE}}]
    backendRefs: []
  - backendRefs:
    - {{group: networking.istio.io, kind: Hostname, name: a.internal, port: 80, weight: 1}}
    - {{group: networking.istio.io, kind: Hostname, name: b.internal, port: 80, weight: 1}}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {{name: raw, namespace: shop}}
spec:
  parentRefs: [{{name: gw, sectionName: tcp}}]
  rules: [{{backendRefs: [{{group: networking.istio.io, kind: Hostname, name: tcp.internal, port: 9000}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: reviews-canary, namespace: shop}}
spec:
  parentRefs: [{{group: networking.istio.io, kind: ServiceEntry, name: reviews, port: {mesh_port}}}]
  rules:
  - matches: [{{headers: [{{name: x-canary, value: "yes"}}]}}]
    backendRefs: [{{group: networking.istio.io, kind: Hostname, name: b.internal, port: 80}}]
  - backendRefs: [{{group: networking.istio.io, kind: Hostname, name: a.internal, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: no-such-service, namespace: shop}}
spec:
  parentRefs: [{{group: "", kind: Service, name: reviews}}]
  rules: [{{backendRefs: [{{group: networking.istio.io, kind: Hostname, name: b.internal, port: 80}}]}}]
"#
    );
    let dir = tempfile::tempdir().unwrap();
    crate::common::write(dir.path(), "gateway-api.yaml", &yaml);
    let daemon = crate::common::Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    eventually(30, "ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let xds = daemon.addr("grpc-xds");
    let _gateway = files_mode_gateway(&envoy_bin, &daemon, "shop");
    let _sidecar = crate::common::peers::Envoy::start(&envoy_bin, xds, "shop", false);
    eventually(30, "the gateway routes", || {
        request(http_port, "any.example", "/", &[]).0 == 200
    });
    let seen = crate::common::peers::tally(http_port, "any.example", "/", &[], 40);
    assert!(
        seen.get("a").is_some_and(|n| *n > 0) && seen.get("b").is_some_and(|n| *n > 0),
        "weights 1:1 reach both backends: {seen:?}"
    );
    assert_eq!(
        crate::common::peers::tally(http_port, "any.example", "/?only=b", &[], 10)
            .keys()
            .collect::<Vec<_>>(),
        ["b"]
    );
    // A rule without backends answers 404; it matches DELETE only.
    let delete = crate::common::http::Request {
        method: "DELETE",
        host: "any.example",
        ..crate::common::http::Request::get("/gone")
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], http_port));
    assert_eq!(
        crate::common::http::send_full(addr, &delete)
            .unwrap()
            .status,
        404
    );
    eventually(30, "the TCP listener proxies", || {
        request(tcp_port, "whatever", "/raw", &[]) == (200, "tcp /raw".into())
    });
    // /debug says what each of the gateway's resources comes from, and how routes attached.
    let (_, body) = http_get(
        daemon.addr("monitoring"),
        "/debug/resourcez?proxyID=gw-istio-0",
    );
    let dump: Value = serde_json::from_str(&body).expect("resourcez JSON");
    let sources = |name: &str| -> Vec<String> {
        dump["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| {
                r["sources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        sources(&format!("0.0.0.0_{http_port}")),
        ["Gateway.gateway.networking.k8s.io/shop/gw"]
    );
    assert_eq!(
        sources(&format!("http.{http_port}")),
        [
            "Gateway.gateway.networking.k8s.io/shop/gw",
            "HTTPRoute/shop/split"
        ]
    );
    let (_, body) = http_get(daemon.addr("monitoring"), "/debug/gateway_api");
    let api: Value = serde_json::from_str(&body).expect("gateway_api JSON");
    let parents = &api["routes"]["TCPRoute/shop/raw"]["parents"];
    assert_eq!(parents[0]["accepted"]["status"], true, "{api}");
    assert_eq!(
        api["gateways"]["Gateway.gateway.networking.k8s.io/shop/gw"]["listeners"][1]["attachedRoutes"],
        1
    );
    // A Service parent does not exist in files mode: not accepted, and routes nothing.
    let parents = &api["routes"]["HTTPRoute/shop/no-such-service"]["parents"];
    assert_eq!(
        parents[0]["accepted"]["reason"], "NoMatchingParent",
        "{api}"
    );
    // GAMMA on a ServiceEntry: the sidecar's route for its host follows the HTTPRoute.
    eventually(30, "the sidecar follows the HTTPRoute", || {
        request(
            mesh_port,
            "reviews.example.com",
            "/r",
            &[("x-canary", "yes")],
        ) == (200, "b /r".into())
    });
    assert_eq!(
        request(mesh_port, "reviews.example.com", "/r", &[]),
        (200, "a /r".into())
    );
}

/// A listener that accepts connections and never answers: what a request timeout cuts short.
fn silent_backend() -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(8).flatten() {
            held.push(stream);
        }
    });
    (port, handle)
}

/// Listener isolation (a specific hostname's listener takes its host from the wildcard one on
/// the same port), `allowedRoutes` by namespace labels (a namespace labelled later attaches its
/// route), and a request timeout, through a gateway Envoy from the API server.
#[test]
fn listener_isolation_namespace_selectors_and_timeouts() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("gateway-api-isolation") {
        let ns = c.ns.clone();
        let team = format!("{ns}-team");
        install_gateway_api(&c);
        for n in [&ns, &team] {
            c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}));
        }
        let (wide, narrow, shared) = (
            Backend::start("wide"),
            Backend::start("narrow"),
            Backend::start("team"),
        );
        let (silent, _hold) = silent_backend();
        let host_of = |name: &str, port: u16, in_ns: &str| {
            let host = format!("{name}.{in_ns}.internal");
            c.apply(
                json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                "metadata": {"name": name, "namespace": in_ns},
                "spec": {"hosts": [host], "location": "MESH_INTERNAL", "resolution": "STATIC",
                         "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
                         "endpoints": [{"address": "127.0.0.1", "ports": {"http": port}}]}}),
            );
            json!({"group": "networking.istio.io", "kind": "Hostname", "name": host, "port": 80})
        };
        let (wide_ref, narrow_ref, team_ref, silent_ref) = (
            host_of("wide", wide.port, &ns),
            host_of("narrow", narrow.port, &ns),
            host_of("team", shared.port, &team),
            host_of("silent", silent, &ns),
        );
        let port = free_port();
        c.apply(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
            "metadata": {"name": "iso", "namespace": ns},
            "spec": {"gatewayClassName": "istio", "listeners": [
                {"name": "wildcard", "port": port, "protocol": "HTTP", "hostname": "*.example.com",
                 "allowedRoutes": {"namespaces": {"from": "Selector",
                     "selector": {"matchLabels": {"expose": "yes"}}}}},
                {"name": "specific", "port": port, "protocol": "HTTP", "hostname": "a.example.com"}]}}));
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"expose": "yes"}}}));
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
            "metadata": {"name": "wide", "namespace": ns},
            "spec": {"parentRefs": [{"name": "iso", "sectionName": "wildcard"}],
                     "rules": [
                        {"matches": [{"path": {"type": "PathPrefix", "value": "/slow"}}],
                         "timeouts": {"request": "500ms"}, "backendRefs": [silent_ref]},
                        {"backendRefs": [wide_ref]}]}}),
        );
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
            "metadata": {"name": "narrow", "namespace": ns},
            "spec": {"parentRefs": [{"name": "iso", "sectionName": "specific"}],
                     "rules": [{"backendRefs": [narrow_ref]}]}}),
        );
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
            "metadata": {"name": "team", "namespace": team},
            "spec": {"parentRefs": [{"name": "iso", "namespace": ns, "sectionName": "wildcard"}],
                     "hostnames": ["team.example.com"],
                     "rules": [{"backendRefs": [team_ref]}]}}),
        );
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let _gw = boot_gateway(
            &c,
            &daemon,
            &envoy_bin,
            "iso-istio-0",
            "gateway.networking.k8s.io/gateway-name: iso",
            "",
        );
        eventually(60, "the wildcard listener served", || {
            request(port, "b.example.com", "/", &[]) == (200, "wide /".into())
        });
        // The specific listener keeps its hostname; the wildcard one serves the rest.
        assert_eq!(
            request(port, "a.example.com", "/", &[]),
            (200, "narrow /".into())
        );
        // A backend that never answers: cut at the route's request timeout.
        let started = std::time::Instant::now();
        assert_eq!(request(port, "b.example.com", "/slow", &[]).0, 504);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // The team namespace is not selected: its route is not served (the wildcard listener's
        // own route answers), and the status says so.
        assert_eq!(
            request(port, "team.example.com", "/", &[]),
            (200, "wide /".into())
        );
        if c.is_fake() {
            eventually(60, "NotAllowedByListeners", || {
                route_condition(&c, &team, "team", "Accepted")
                    .is_some_and(|a| a["reason"] == "NotAllowedByListeners")
            });
        }
        // Labelled, the namespace's route attaches.
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": team, "labels": {"expose": "yes"}}}));
        eventually(60, "the selected namespace's route served", || {
            request(port, "team.example.com", "/", &[]) == (200, "team /".into())
        });
        drop(daemon);
    }
}

/// A Kubernetes Ingress of class `istio` through the ingress gateway Envoy, as istiod serves it:
/// port 80 (the ingress gateway's own), a `Prefix` path matching whole segments, a named
/// Service port, and the ingress Service's address written into the Ingress's status. On the
/// fake API server only: its Service has a loopback endpoint a real one refuses.
#[test]
fn a_kubernetes_ingress_is_served_by_the_ingress_gateway() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    if std::net::TcpListener::bind("0.0.0.0:80").is_err() {
        eprintln!("skipping: port 80 is taken (the ingress gateway listens there, as istiod's)");
        return;
    }
    let c = Cluster::fake("ingress");
    let ns = c.ns.clone();
    c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    let backend = Backend::start("backend");
    c.apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": ns},
        "spec": {"clusterIP": "10.96.0.41", "ports": [{"name": "web", "port": 8000, "targetPort": backend.port}]}}));
    c.apply(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "echo-x", "namespace": ns, "labels": {"kubernetes.io/service-name": "echo"}},
        "addressType": "IPv4", "ports": [{"name": "web", "port": backend.port, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}));
    c.apply(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "istio-ingressgateway", "namespace": ns},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.42", "selector": {"istio": "ingressgateway"},
                 "ports": [{"name": "http2", "port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}));
    c.apply(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "istio"}, "spec": {"controller": "istio.io/ingress-controller"}}),
    );
    c.apply(json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": ns},
        "spec": {"ingressClassName": "istio", "rules": [{"host": "shop.example.com", "http": {"paths": [
            {"path": "/api", "pathType": "Prefix",
             "backend": {"service": {"name": "echo", "port": {"name": "web"}}}}]}}]}}));
    let daemon = c.rudder(&[]);
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let _gw = boot_gateway(
        &c,
        &daemon,
        &envoy_bin,
        "istio-ingressgateway-0",
        "istio: ingressgateway",
        "",
    );
    eventually(60, "the Ingress served on port 80", || {
        request(80, "shop.example.com", "/api/items", &[]) == (200, "backend /api/items".into())
    });
    // A Prefix path matches whole segments; other hosts are not the Ingress's.
    assert_eq!(request(80, "shop.example.com", "/apix", &[]).0, 404);
    assert_eq!(request(80, "other.example.com", "/api", &[]).0, 404);
    eventually(
        60,
        "the ingress gateway's address in the Ingress status",
        || {
            c.get_json(
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "shop", "namespace": ns}}),
            )
            .is_some_and(|i| i["status"]["loadBalancer"]["ingress"][0]["ip"] == "203.0.113.7")
        },
    );
    drop(daemon);
}

/// A backend that answers `recorder <path>` and records each request's path: what a mirror
/// sends to it can be seen.
fn recording_backend() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while let Some((line, _)) = crate::common::peers::read_request_head(&mut reader) {
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    record.lock().unwrap().push(path.clone());
                    let body = format!("recorder {path}");
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

/// HTTPRoute filters and matches as the spec's conformance scenarios exercise them, through a
/// gateway Envoy from a config directory: a request mirror, CORS preflights, a redirect to
/// another port, a host rewrite, a regular-expression header match, a backend's own header
/// filter, and 500 when every backend weighs nothing.
#[test]
fn http_route_filters_through_a_gateway_envoy() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let (recorder, mirrored) = recording_backend();
    let port = free_port();
    let entry = |name: &str, backend: u16| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: edge}}\nspec: {{hosts: [{name}.internal], location: MESH_INTERNAL, resolution: STATIC, ports: [{{number: 80, name: http, protocol: HTTP}}], endpoints: [{{address: 127.0.0.1, ports: {{http: {backend}}}}}]}}\n"
        )
    };
    let to = |name: &str| {
        format!("{{group: networking.istio.io, kind: Hostname, name: {name}.internal, port: 80}}")
    };
    let yaml = format!(
        r#"{}{}{}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: edge}}
spec:
  gatewayClassName: istio
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: filters, namespace: edge}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [www.example.com]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /mirror}}}}]
    filters: [{{type: RequestMirror, requestMirror: {{backendRef: {mirror}, percent: 100}}}}]
    backendRefs: [{a_ref}]
  - matches: [{{path: {{type: PathPrefix, value: /cors}}}}]
    filters:
    - type: CORS
      cors: {{allowOrigins: ["https://app.example.com"], allowMethods: [GET, POST], allowHeaders: [x-custom], maxAge: 600}}
    backendRefs: [{a_ref}]
  - matches: [{{path: {{type: PathPrefix, value: /moved}}}}]
    filters: [{{type: RequestRedirect, requestRedirect: {{scheme: https, port: 8443, path: {{type: ReplacePrefixMatch, replacePrefixMatch: /new}}}}}}]
  - matches: [{{path: {{type: PathPrefix, value: /host}}}}]
    filters: [{{type: URLRewrite, urlRewrite: {{hostname: rewritten.example.com}}}}]
    backendRefs: [{a_ref}]
  - matches: [{{path: {{type: PathPrefix, value: /env}}, headers: [{{type: RegularExpression, name: x-env, value: "prod|staging"}}]}}]
    backendRefs:
    - {{group: networking.istio.io, kind: Hostname, name: b.internal, port: 80, filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{add: [{{name: x-backend, value: b}}]}}}}]}}
  - matches: [{{path: {{type: PathPrefix, value: /nothing}}}}]
    backendRefs: [{{group: networking.istio.io, kind: Hostname, name: a.internal, port: 80, weight: 0}}]
  - backendRefs: [{a_ref}]
"#,
        entry("a", a.port),
        entry("b", b.port),
        entry("recorder", recorder),
        mirror = to("recorder"),
        a_ref = to("a"),
    );
    let dir = tempfile::tempdir().unwrap();
    crate::common::write(dir.path(), "routes.yaml", &yaml);
    let daemon = crate::common::Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    eventually(30, "ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let _gateway = files_mode_gateway(&envoy_bin, &daemon, "edge");
    const HOST: &str = "www.example.com";
    eventually(30, "the gateway routes", || {
        request(port, HOST, "/", &[]) == (200, "a /".into())
    });
    // The mirror gets a copy; the client gets the backend's answer.
    assert_eq!(
        request(port, HOST, "/mirror/1", &[]),
        (200, "a /mirror/1".into())
    );
    eventually(10, "the mirror received the copy", || {
        mirrored.lock().unwrap().iter().any(|p| p == "/mirror/1")
    });
    // A preflight from an allowed origin is answered by the gateway; another origin is not.
    let preflight = |origin: &str| {
        let req = crate::common::http::Request {
            method: "OPTIONS",
            host: HOST,
            headers: &[
                ("origin", origin),
                ("access-control-request-method", "POST"),
            ],
            ..crate::common::http::Request::get("/cors")
        };
        crate::common::http::send_full(std::net::SocketAddr::from(([127, 0, 0, 1], port)), &req)
            .unwrap()
    };
    let allowed = preflight("https://app.example.com");
    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(allowed.header("access-control-max-age"), Some("600"));
    assert_eq!(
        preflight("https://evil.example.com").header("access-control-allow-origin"),
        None
    );
    // A redirect to another scheme and port, the matched prefix replaced.
    let moved = request_full(port, HOST, "/moved/page", &[]);
    assert_eq!(moved.status, 302);
    assert_eq!(
        moved.header("location"),
        Some("https://www.example.com:8443/new/page")
    );
    // The host the backend sees is rewritten.
    assert_eq!(
        request(port, HOST, "/host", &[("x-echo-headers", "host")]),
        (200, "a /host host=rewritten.example.com".into())
    );
    // A regular-expression header match, and the backend's own header filter.
    assert_eq!(
        request(
            port,
            HOST,
            "/env",
            &[("x-env", "staging"), ("x-echo-headers", "x-backend")]
        ),
        (200, "b /env x-backend=b".into())
    );
    assert_eq!(
        request(port, HOST, "/env", &[("x-env", "dev")]),
        (200, "a /env".into())
    );
    // Every backend weighs nothing: 500.
    assert_eq!(request(port, HOST, "/nothing", &[]).0, 500);
}

/// GAMMA from the API server: an HTTPRoute attached to a Service steers a sidecar Envoy's calls
/// to that Service by header, one attached to a ServiceEntry its calls to the entry's host, and
/// the routes' status accepts both and names a parent Service that does not exist. On the fake API server only (loopback endpoints).
#[test]
fn a_route_attached_to_a_service_steers_sidecars() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let c = Cluster::fake("gamma");
    let ns = c.ns.clone();
    install_gateway_api(&c);
    c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    let (v1, v2) = (Backend::start("v1"), Backend::start("v2"));
    let port = free_port();
    for (name, ip, backend) in [
        ("reviews", "10.96.0.51", &v1),
        ("reviews-v2", "10.96.0.52", &v2),
    ] {
        c.apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": port, "targetPort": backend.port}]}}));
        c.apply(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-x"), "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": backend.port, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}));
    }
    c.apply(
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
        "metadata": {"name": "canary", "namespace": ns},
        "spec": {"parentRefs": [{"group": "", "kind": "Service", "name": "reviews", "port": port}],
                 "rules": [
                    {"matches": [{"headers": [{"name": "x-canary", "value": "yes"}]}],
                     "backendRefs": [{"name": "reviews-v2", "port": port}]},
                    {"backendRefs": [{"name": "reviews", "port": port}]}]}}),
    );
    c.apply(
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
        "metadata": {"name": "orphan", "namespace": ns},
        "spec": {"parentRefs": [{"group": "", "kind": "Service", "name": "missing"}],
                 "rules": [{"backendRefs": [{"name": "reviews", "port": port}]}]}}),
    );
    // An external service routed the same way: a ServiceEntry parent.
    c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": "payments", "namespace": ns},
        "spec": {"hosts": ["payments.example.com"], "location": "MESH_EXTERNAL", "resolution": "STATIC",
                 "ports": [{"number": port, "name": "http", "protocol": "HTTP"}],
                 "endpoints": [{"address": "127.0.0.1", "ports": {"http": v1.port}}]}}));
    c.apply(
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute",
        "metadata": {"name": "payments-canary", "namespace": ns},
        "spec": {"parentRefs": [{"group": "networking.istio.io", "kind": "ServiceEntry", "name": "payments"}],
                 "rules": [
                    {"matches": [{"headers": [{"name": "x-canary", "value": "yes"}]}],
                     "backendRefs": [{"name": "reviews-v2", "port": port}]},
                    {"backendRefs": [{"group": "networking.istio.io", "kind": "Hostname", "name": "payments.example.com", "port": port}]}]}}),
    );
    let daemon = c.rudder(&[]);
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let root_dir = tempfile::tempdir().unwrap();
    let root_path = root_dir.path().join("root.pem");
    std::fs::write(&root_path, c.ca_root()).unwrap();
    let token = c.token("client");
    let _sidecar = crate::common::peers::Envoy::boot(
        &envoy_bin,
        daemon.addr("grpc-xds-tls"),
        &crate::common::peers::Bootstrap {
            namespace: &ns,
            tls: Some((&root_path, "istiod.istio-system.svc")),
            token: Some(&token),
            ..Default::default()
        },
    );
    let host = format!("reviews.{ns}.svc.cluster.local");
    eventually(60, "the sidecar routes to reviews", || {
        request(port, &host, "/r", &[]) == (200, "v1 /r".into())
    });
    assert_eq!(
        request(port, &host, "/r", &[("x-canary", "yes")]),
        (200, "v2 /r".into())
    );
    eventually(60, "the route's parent accepted", || {
        route_condition(&c, &ns, "canary", "Accepted").is_some_and(|a| a["status"] == "True")
    });
    eventually(60, "a missing parent Service named", || {
        route_condition(&c, &ns, "orphan", "Accepted")
            .is_some_and(|a| a["reason"] == "NoMatchingParent")
    });
    assert_eq!(
        request(port, "payments.example.com", "/p", &[("x-canary", "yes")]),
        (200, "v2 /p".into())
    );
    assert_eq!(
        request(port, "payments.example.com", "/p", &[]),
        (200, "v1 /p".into())
    );
    eventually(60, "the ServiceEntry parent accepted", || {
        route_condition(&c, &ns, "payments-canary", "Accepted")
            .is_some_and(|a| a["status"] == "True")
    });
    drop(daemon);
}

/// A managed Gateway's deployment parameters, as istiod applies them: the class defaults (a
/// ConfigMap of the system namespace — the test's, here — labelled for the class) under the
/// Gateway's own
/// `infrastructure.parametersRef`; the Deployment takes both, strategic-merged, and a
/// PodDisruptionBudget exists because a parameter describes one. Only the fake API server
/// (creating system-namespace ConfigMaps is not for a shared cluster).
#[test]
fn a_managed_gateway_is_deployed_with_its_parameters() {
    let c = Cluster::fake("gateway-params");
    let ns = c.ns.clone();
    install_gateway_api(&c);
    c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio-defaults", "namespace": ns,
                     "labels": {"gateway.istio.io/defaults-for-class": "istio"}},
        "data": {"deployment": "spec:\n  replicas: 2\n  minReadySeconds: 7\n"}}));
    c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "gw-params", "namespace": ns},
        "data": {"deployment": "spec:\n  replicas: 3\n",
                 "podDisruptionBudget": "spec:\n  minAvailable: 1\n"}}));
    c.apply(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": ns},
        "spec": {"gatewayClassName": "istio",
                 "infrastructure": {"parametersRef": {"group": "", "kind": "ConfigMap", "name": "gw-params"}},
                 "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}}));
    let daemon = c.rudder(&[]);
    eventually(60, "the Deployment takes both parameters", || {
        c.get_json(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "edge-istio", "namespace": ns}}))
            .is_some_and(|d| d["spec"]["replicas"] == 3 && d["spec"]["minReadySeconds"] == 7)
    });
    eventually(60, "the disruption budget the parameters describe", || {
        c.get_json(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "edge-istio", "namespace": ns}}),
        )
        .is_some_and(|p| {
            p["spec"]["minAvailable"] == 1
                && p["spec"]["selector"]["matchLabels"]["gateway.networking.k8s.io/gateway-name"]
                    == "edge"
                && p["metadata"]["ownerReferences"][0]["name"] == "edge"
        })
    });
    assert!(
        c.get_json(
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "edge-istio", "namespace": ns}})
        )
        .is_none(),
        "no autoscaler without a parameter for one"
    );
    drop(daemon);
}

/// A ListenerSet adds a listener to a Gateway that allows it; a real Envoy, the Gateway's proxy,
/// serves it and the route attached to the ListenerSet (files mode).
#[test]
fn a_listener_set_adds_a_listener_to_its_gateway() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("extra");
    let (http_port, extra_port) = (free_port(), free_port());
    let yaml = format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: extra, namespace: shop}}
spec: {{hosts: [extra.internal], location: MESH_INTERNAL, resolution: STATIC, ports: [{{number: 80, name: http, protocol: HTTP}}], endpoints: [{{address: 127.0.0.1, ports: {{http: {backend}}}}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: shop}}
spec:
  gatewayClassName: istio
  allowedListeners: {{namespaces: {{from: Same}}}}
  listeners: [{{name: http, port: {http_port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: more, namespace: shop}}
spec:
  parentRef: {{name: gw}}
  listeners: [{{name: extra, port: {extra_port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: to-extra, namespace: shop}}
spec:
  parentRefs: [{{group: gateway.networking.k8s.io, kind: ListenerSet, name: more}}]
  rules: [{{backendRefs: [{{group: networking.istio.io, kind: Hostname, name: extra.internal, port: 80}}]}}]
"#,
        backend = backend.port
    );
    let dir = tempfile::tempdir().unwrap();
    crate::common::write(dir.path(), "gateway-api.yaml", &yaml);
    let daemon = crate::common::Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let _gateway = files_mode_gateway(&envoy_bin, &daemon, "shop");
    eventually(30, "the ListenerSet's listener serves its route", || {
        request(extra_port, "any.example", "/x", &[]) == (200, "extra /x".into())
    });
    // The Gateway's own listener has no route: the ListenerSet's route is not bound there.
    assert_eq!(request(http_port, "any.example", "/x", &[]).0, 404);
    assert_eq!(
        crate::common::metric(&daemon, "pilot_total_xds_rejects"),
        0.0
    );
}

/// The leader writes a ListenerSet's status and its Gateway's `attachedListenerSets` through the
/// API server (the fake, and a real one with KUBECONFIG and the Gateway API CRDs).
#[test]
fn listener_set_status_through_the_api_server() {
    for c in Cluster::all("listenerset") {
        install_gateway_api(&c);
        if !c.is_fake()
            && c.get_json(
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "listenersets.gateway.networking.k8s.io"}}),
            )
            .is_none()
        {
            eprintln!("no ListenerSet CRD in this cluster: skipping");
            continue;
        }
        let ns = c.ns.clone();
        c.apply(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": ns},
            "spec": {"gatewayClassName": "istio", "addresses": [{"type": "Hostname", "value": "ingress"}],
                     "allowedListeners": {"namespaces": {"from": "Same"}},
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}));
        let set = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ListenerSet",
            "metadata": {"name": "more", "namespace": ns},
            "spec": {"parentRef": {"name": "gw"},
                     "listeners": [{"name": "admin", "port": 8081, "protocol": "HTTP"}]}});
        c.apply(set.clone());
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        eventually(
            30,
            "the ListenerSet accepted, the Gateway counting it",
            || {
                let accepted = c
                    .get_json(set.clone())
                    .and_then(|s| condition(&s["status"]["conditions"], "Accepted").cloned())
                    .is_some_and(|a| a["status"] == "True");
                let counted = c
                    .get_json(
                        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
                    "metadata": {"name": "gw", "namespace": ns}}),
                    )
                    .is_some_and(|g| g["status"]["attachedListenerSets"] == 1);
                accepted && counted
            },
        );
    }
}
