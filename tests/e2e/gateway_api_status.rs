//! The status checks of the Gateway API conformance profiles Rudder claims (HTTPRoute, GRPCRoute,
//! TLSRoute, Mesh), as the suite's tests look them up: for each route the first parent's
//! `Accepted` and `ResolvedRefs` with their reasons, and a listener's `ResolvedRefs` and
//! supported kinds. Our own scenarios, written from the suite's expectations (invalid parent
//! port, section and namespace; unknown, missing and not-permitted backends; a listener that
//! does not take the route's kind; a TLS hostname no listener serves; mesh parents). On the fake
//! API server, and a real one with KUBECONFIG and the Gateway API CRDs (experimental channel for
//! TLSRoute).

use crate::common::cluster::Cluster;
use crate::common::{eventually, http_get};
use crate::gateway_api::install_gateway_api;
use serde_json::{Value, json};

const GROUP: &str = "gateway.networking.k8s.io";

/// One route and what its first parent's status must say: (`Accepted` status, reason) and
/// (`ResolvedRefs` status, reason).
struct Scenario {
    kind: &'static str,
    name: &'static str,
    namespace_suffix: &'static str,
    spec: Value,
    accepted: (&'static str, &'static str),
    resolved: (&'static str, &'static str),
}

fn scenarios(ns: &str, other: &str) -> Vec<Scenario> {
    let echo = json!({"name": "echo", "port": 80});
    let on = |section: &str| json!([{"name": "gw", "sectionName": section}]);
    let ok = ("True", "Accepted");
    let resolved = ("True", "ResolvedRefs");
    let http = |parents: Value, backends: Value| json!({"parentRefs": parents, "rules": [{"backendRefs": backends}]});
    vec![
        Scenario {
            kind: "HTTPRoute",
            name: "valid",
            namespace_suffix: "",
            spec: http(on("http"), json!([echo])),
            accepted: ok,
            resolved,
        },
        Scenario {
            kind: "HTTPRoute",
            name: "unknown-backend-kind",
            namespace_suffix: "",
            spec: http(
                on("http"),
                json!([{"group": "unknown.example.com", "kind": "Thing", "name": "x"}]),
            ),
            accepted: ok,
            resolved: ("False", "InvalidKind"),
        },
        Scenario {
            kind: "HTTPRoute",
            name: "nonexistent-backend",
            namespace_suffix: "",
            spec: http(on("http"), json!([{"name": "nonexistent", "port": 80}])),
            accepted: ok,
            resolved: ("False", "BackendNotFound"),
        },
        Scenario {
            kind: "HTTPRoute",
            name: "no-matching-port",
            namespace_suffix: "",
            spec: http(json!([{"name": "gw", "port": 81}]), json!([echo])),
            accepted: ("False", "NoMatchingParent"),
            resolved,
        },
        Scenario {
            kind: "HTTPRoute",
            name: "no-matching-section",
            namespace_suffix: "",
            spec: http(on("nope"), json!([echo])),
            accepted: ("False", "NoMatchingParent"),
            resolved,
        },
        Scenario {
            kind: "HTTPRoute",
            name: "section-not-matching-port",
            namespace_suffix: "",
            spec: http(
                json!([{"name": "gw", "sectionName": "http", "port": 8080}]),
                json!([echo]),
            ),
            accepted: ("False", "NoMatchingParent"),
            resolved,
        },
        Scenario {
            kind: "HTTPRoute",
            name: "cross-namespace-parent",
            namespace_suffix: "-other",
            spec: http(
                json!([{"name": "gw", "namespace": ns, "sectionName": "http"}]),
                json!([echo]),
            ),
            accepted: ("False", "NotAllowedByListeners"),
            resolved,
        },
        Scenario {
            kind: "HTTPRoute",
            name: "cross-namespace-backend",
            namespace_suffix: "",
            spec: http(
                on("http"),
                json!([{"name": "echo", "namespace": other, "port": 80}]),
            ),
            accepted: ok,
            resolved: ("False", "RefNotPermitted"),
        },
        Scenario {
            kind: "HTTPRoute",
            name: "disallowed-kind",
            namespace_suffix: "",
            spec: http(on("grpc-only"), json!([echo])),
            accepted: ("False", "NotAllowedByListeners"),
            resolved,
        },
        Scenario {
            kind: "GRPCRoute",
            name: "grpc-valid",
            namespace_suffix: "",
            spec: http(on("grpc-only"), json!([echo])),
            accepted: ok,
            resolved,
        },
        Scenario {
            kind: "TLSRoute",
            name: "tls-no-matching-hostname",
            namespace_suffix: "",
            spec: json!({"parentRefs": on("tls"), "hostnames": ["other.example.org"],
                         "rules": [{"backendRefs": [{"name": "echo", "port": 80}]}]}),
            accepted: ("False", "NoMatchingListenerHostname"),
            resolved,
        },
        Scenario {
            kind: "TLSRoute",
            name: "tls-nonexistent-backend",
            namespace_suffix: "",
            spec: json!({"parentRefs": on("tls"), "hostnames": ["tls.example.com"],
                         "rules": [{"backendRefs": [{"name": "nonexistent", "port": 443}]}]}),
            accepted: ok,
            resolved: ("False", "BackendNotFound"),
        },
        Scenario {
            kind: "HTTPRoute",
            name: "mesh-service",
            namespace_suffix: "",
            spec: http(
                json!([{"group": "", "kind": "Service", "name": "echo", "port": 80}]),
                json!([echo]),
            ),
            accepted: ok,
            resolved,
        },
        Scenario {
            kind: "HTTPRoute",
            name: "mesh-service-entry",
            namespace_suffix: "",
            spec: http(
                json!([{"group": "networking.istio.io", "kind": "ServiceEntry", "name": "external"}]),
                json!([{"group": "networking.istio.io", "kind": "Hostname", "name": "external.example.com", "port": 80}]),
            ),
            accepted: ok,
            resolved,
        },
        Scenario {
            kind: "HTTPRoute",
            name: "mesh-missing-service-entry",
            namespace_suffix: "",
            spec: http(
                json!([{"group": "networking.istio.io", "kind": "ServiceEntry", "name": "absent"}]),
                json!([echo]),
            ),
            accepted: ("False", "NoMatchingParent"),
            resolved,
        },
    ]
}

/// Whether `cond` holds within `secs` (the caller reports what it last saw).
fn until(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

fn condition(conditions: &Value, kind: &str) -> Option<(String, String)> {
    conditions.as_array()?.iter().find_map(|c| {
        (c["type"] == kind).then(|| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
    })
}

#[test]
fn route_and_listener_status_as_the_conformance_suite_checks_it() {
    for c in Cluster::all("gateway-api-status") {
        let ns = c.ns.clone();
        let other = format!("{ns}-other");
        install_gateway_api(&c);
        for n in [&ns, &other] {
            c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}));
            c.apply(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "echo", "namespace": n},
                "spec": {"ports": [{"name": "http", "port": 80}]}}));
        }
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "external", "namespace": ns},
            "spec": {"hosts": ["external.example.com"], "location": "MESH_EXTERNAL",
                     "resolution": "DNS", "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}]}}));
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": ns},
            "spec": {"gatewayClassName": "istio", "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "grpc-only", "port": 8080, "protocol": "HTTP",
                 "allowedRoutes": {"kinds": [{"kind": "GRPCRoute"}]}},
                {"name": "tls", "port": 443, "protocol": "TLS", "hostname": "tls.example.com",
                 "tls": {"mode": "Passthrough"}}]}}),
        );
        c.apply(
            json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
            "metadata": {"name": "bad-kinds", "namespace": ns},
            "spec": {"gatewayClassName": "istio", "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP",
                 "allowedRoutes": {"kinds": [{"kind": "FooRoute"}]}}]}}),
        );
        let all = scenarios(&ns, &other);
        for s in &all {
            c.apply(json!({"apiVersion": format!("{GROUP}/v1"), "kind": s.kind,
                "metadata": {"name": s.name, "namespace": format!("{ns}{}", s.namespace_suffix)},
                "spec": s.spec}));
        }
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        for s in &all {
            let route_ns = format!("{ns}{}", s.namespace_suffix);
            let mut seen = None;
            let met = until(30, || {
                let route = c.get_json(json!({"apiVersion": format!("{GROUP}/v1"), "kind": s.kind,
                    "metadata": {"name": s.name, "namespace": route_ns}}));
                let conditions = route
                    .as_ref()
                    .map(|r| r["status"]["parents"][0]["conditions"].clone())
                    .unwrap_or(Value::Null);
                let got = (
                    condition(&conditions, "Accepted"),
                    condition(&conditions, "ResolvedRefs"),
                );
                let want = |(status, reason): (&str, &str)| Some((status.into(), reason.into()));
                let met = got == (want(s.accepted), want(s.resolved));
                seen = Some(got);
                met
            });
            assert!(
                met,
                "{} {route_ns}/{}: want Accepted {:?}, ResolvedRefs {:?}; status says {seen:?}",
                s.kind, s.name, s.accepted, s.resolved
            );
        }
        // A listener naming only a kind it cannot serve: ResolvedRefs false, InvalidRouteKinds,
        // no supported kinds. The listener taking only GRPCRoute counts the one GRPCRoute.
        eventually(60, "the listeners' status", || {
            let listener = |gw: &str, index: usize| {
                c.get_json(
                    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
                    "metadata": {"name": gw, "namespace": ns}}),
                )
                .map(|g| g["status"]["listeners"][index].clone())
                .unwrap_or(Value::Null)
            };
            let bad = listener("bad-kinds", 0);
            let grpc = listener("gw", 1);
            condition(&bad["conditions"], "ResolvedRefs")
                == Some(("False".into(), "InvalidRouteKinds".into()))
                && bad["supportedKinds"] == json!([])
                && grpc["attachedRoutes"] == 1
        });
        drop(daemon);
    }
}
