//! CA bundles from ConfigMaps at a Gateway API gateway, through a real Envoy: BackendTLSPolicy
//! (the gateway originates TLS to the backend with the policy's hostname as SNI, trusts the CA
//! of the ConfigMap the policy names, served over SDS as `configmap://`, and checks the
//! backend's certificate is for that hostname) and the Gateway's `tls.frontend` validation
//! (clients must present a certificate from the ConfigMap's CA).

use crate::common::peers::{TlsServer, free_port, peer, request};
use crate::common::{Daemon, eventually, http_get, metric, write};

fn policy(hostname: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: secure-tls, namespace: shop}}\nspec:\n  targetRefs: [{{group: networking.istio.io, kind: ServiceEntry, name: secure}}]\n  validation:\n    caCertificateRefs: [{{group: \"\", kind: ConfigMap, name: backend-ca}}]\n    hostname: {hostname}\n"
    )
}

/// Files mode: a gateway routes to a ServiceEntry whose DestinationRule says plain text; a
/// BackendTLSPolicy then makes it originate TLS, verified against the ConfigMap's CA and the
/// policy's hostname.
#[test]
fn a_backend_tls_policy_originates_verified_tls_to_the_backend() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let backend = TlsServer::start(certs.path(), "backend.example.com");
    let ca = std::fs::read_to_string(certs.path().join("server.pem")).unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let indented: String = ca.lines().map(|l| format!("    {l}\n")).collect();
    write(
        dir.path(),
        "gateway.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: secure, namespace: shop}}
spec:
  hosts: [secure.internal]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  endpoints: [{{address: 127.0.0.1, ports: {{http: {backend}}}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: shop}}
spec:
  gatewayClassName: istio
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: to-secure, namespace: shop}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{group: networking.istio.io, kind: Hostname, name: secure.internal, port: 80}}]}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: secure-plain, namespace: shop, creationTimestamp: "2024-01-01T00:00:00Z"}}
spec:
  host: secure.internal
  trafficPolicy: {{tls: {{mode: DISABLE}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: backend-ca, namespace: shop}}
data:
  ca.crt: |
{indented}"#,
            backend = backend.port
        ),
    );
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let _gateway = crate::gateway_api::files_mode_gateway(&envoy_bin, &daemon, "shop");
    // Without a policy the gateway speaks plain HTTP to a TLS server: no answer it can use.
    eventually(30, "the route is served", || {
        let (status, _) = request(port, "any.example", "/", &[]);
        status != 0 && status != 404
    });
    assert_ne!(request(port, "any.example", "/", &[]).0, 200);

    // The policy wins over the user's DestinationRule of the Service's namespace (which says
    // plain text), as istiod orders its generated rules (no creation time) first. Files mode
    // keeps a creationTimestamp written in the file, as a cluster's objects have one.
    write(dir.path(), "policy.yaml", &policy("backend.example.com"));
    eventually(30, "TLS to the backend, verified", || {
        let (status, body) = request(port, "any.example", "/", &[]);
        status == 200 && body.contains("s_server")
    });

    // The backend's certificate is not for the policy's hostname: refused.
    write(dir.path(), "policy.yaml", &policy("other.example.com"));
    eventually(30, "a certificate for another name is refused", || {
        request(port, "any.example", "/", &[]).0 == 503
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
    let (_, config) = http_get(daemon.addr("monitoring"), "/debug/configz");
    assert!(config.contains("BackendTLSPolicy"), "the policy is served");
}

/// Kubernetes mode: a ConfigMap's `ca.crt` is served over SDS as `configmap://<ns>/<name>` (to
/// any proxy, as istiod serves it), follows an edit, and an edit of another key or of another
/// ConfigMap pushes nothing new. On the fake API server, and a real one with KUBECONFIG.
#[test]
fn a_configmaps_ca_bundle_is_served_over_sds() {
    use crate::common::ads::Sotw;
    use serde_json::json;
    const SDS: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
    for c in crate::common::cluster::Cluster::all("bundle") {
        let ns = c.ns.clone();
        let ca = |pem: &str, other: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "backend-ca", "namespace": ns},
                   "data": {"ca.crt": pem, "other": other}})
        };
        let first = "-----BEGIN CERTIFICATE-----\nZmlyc3Q=\n-----END CERTIFICATE-----\n";
        let second = "-----BEGIN CERTIFICATE-----\nc2Vjb25k\n-----END CERTIFICATE-----\n";
        c.apply(ca(first, "a"));
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let name = format!("configmap://{ns}/backend-ca");
        c.rt.block_on(async {
            let id = format!("router~10.9.9.9~gw-0.{ns}~{ns}.svc.cluster.local");
            let mut s = Sotw::open(daemon.addr("grpc-xds"), &id).await.unwrap();
            let cds = s.recv().await;
            s.ack(&cds, &[]).await;
            s.send(SDS, &[&name], "", "", None).await;
            let mut resp = s.recv().await;
            while resp.type_url != SDS {
                s.ack(&resp, &[]).await;
                resp = s.recv().await;
            }
            let text = |r: &envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse| {
                r.resources
                    .iter()
                    .map(|a| String::from_utf8_lossy(&a.value).to_string())
                    .collect::<String>()
            };
            assert!(text(&resp).contains("Zmlyc3Q="), "the bundle is served");
            s.ack(&resp, &[&name]).await;
            c.put(ca(second, "a")).await;
            loop {
                let next = s.recv().await;
                s.ack(&next, &[&name]).await;
                if next.type_url == SDS && text(&next).contains("c2Vjb25k") {
                    break;
                }
            }
            // Another key of it, or another ConfigMap without a bundle: the store keeps only
            // `ca.crt`, so nothing changes and nothing is pushed.
            c.put(ca(second, "b")).await;
            c.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "unrelated", "namespace": ns}, "data": {"k": "v"}}))
                .await;
            c.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "unrelated", "namespace": ns}, "data": {"k": "w"}}))
                .await;
            let after_first = s.recv_within(std::time::Duration::from_secs(2)).await;
            // The new ConfigMap is one store change (an SDS push may follow it once); its edit
            // is none.
            if let Some(r) = after_first {
                assert_eq!(r.type_url, SDS, "only SDS is pushed for ConfigMaps");
                s.ack(&r, &[&name]).await;
            }
            assert!(s.quiet(1500).await, "an edit outside ca.crt pushes nothing");
        });
    }
}

/// The leader writes a BackendTLSPolicy's status through the API server: the targeted Service
/// and the Gateway routing to it as ancestors, `Accepted` and `ResolvedRefs`; a CA reference to
/// a ConfigMap that does not exist turns `ResolvedRefs` false (`InvalidCACertificateRef`). On the
/// fake API server, and a real one with KUBECONFIG and the Gateway API CRDs.
#[test]
fn backend_tls_policy_status_through_the_api_server() {
    use serde_json::json;
    for c in crate::common::cluster::Cluster::all("btlsstatus") {
        crate::gateway_api::install_gateway_api(&c);
        if !c.is_fake()
            && c.get_json(
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "backendtlspolicies.gateway.networking.k8s.io"}}),
            )
            .is_none()
        {
            eprintln!("no BackendTLSPolicy CRD in this cluster: skipping");
            continue;
        }
        let ns = c.ns.clone();
        let pem = "-----BEGIN CERTIFICATE-----\nQQ==\n-----END CERTIFICATE-----\n";
        c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "backend-ca", "namespace": ns}, "data": {"ca.crt": pem}}));
        c.apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "secure", "namespace": ns},
            "spec": {"ports": [{"name": "https", "port": 443}]}}));
        c.apply(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": ns},
            "spec": {"gatewayClassName": "istio", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}));
        c.apply(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "to-secure", "namespace": ns},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "secure", "port": 443}]}]}}));
        let policy = |ca: &str| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
                "metadata": {"name": "secure-tls", "namespace": ns},
                "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "secure"}],
                         "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}],
                                        "hostname": "secure.example.com"}}})
        };
        c.apply(policy("backend-ca"));
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let ancestors = || {
            c.get_json(policy("backend-ca"))
                .map(|p| p["status"]["ancestors"].clone())
                .unwrap_or_default()
        };
        let reason = |a: &serde_json::Value, i: usize, kind: &str| -> String {
            a[i]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
                .map(|c| {
                    format!(
                        "{}/{}",
                        c["status"].as_str().unwrap_or(""),
                        c["reason"].as_str().unwrap_or("")
                    )
                })
                .unwrap_or_default()
        };
        eventually(30, "the policy's status", || {
            let a = ancestors();
            a[0]["ancestorRef"]["kind"] == "Service"
                && a[1]["ancestorRef"]["kind"] == "Gateway"
                && reason(&a, 0, "Accepted") == "True/Accepted"
                && reason(&a, 1, "ResolvedRefs") == "True/ResolvedRefs"
        });
        c.apply(policy("no-such-configmap"));
        eventually(30, "the missing bundle in the status", || {
            reason(&ancestors(), 0, "ResolvedRefs") == "False/InvalidCACertificateRef"
        });
    }
}

/// A Gateway's `tls.frontend.default.validation`: its HTTPS listener asks clients for a
/// certificate and admits only one from the ConfigMap's CA, as istiod configures it (`MUTUAL`
/// with the bundle as `caCertCredentialName`). On the fake API server, and a real one with
/// KUBECONFIG and the Gateway API CRDs.
#[test]
fn a_gateway_checks_client_certificates_against_a_configmaps_ca() {
    use crate::gateway::{HOST, boot_gateway, https_get, https_get_as, web_certificates};
    use serde_json::json;
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in crate::common::cluster::Cluster::all("frontend") {
        crate::gateway_api::install_gateway_api(&c);
        let ns = c.ns.clone();
        let backend = crate::common::peers::Backend::start("backend");
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
        c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "client-ca", "namespace": ns}, "data": {"ca.crt": certs.ca}}));
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "echo", "namespace": ns},
            "spec": {"hosts": ["echo.internal"], "location": "MESH_INTERNAL", "resolution": "STATIC",
                     "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
                     "endpoints": [{"address": "127.0.0.1", "ports": {"http": backend.port}}]}}));
        let https_port = free_port();
        c.apply(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": ns},
            "spec": {"gatewayClassName": "istio",
                     "listeners": [{"name": "https", "port": https_port, "protocol": "HTTPS", "hostname": HOST,
                                    "tls": {"certificateRefs": [{"name": "web-cert"}]}}],
                     "tls": {"frontend": {"default": {"validation": {
                         "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "client-ca"}]}}}}}}));
        c.apply(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"parentRefs": [{"name": "gw"}],
                     "rules": [{"backendRefs": [{"group": "networking.istio.io", "kind": "Hostname",
                                                 "name": "echo.internal", "port": 80}]}]}}),
        );
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
        let client = Some((certs.client_chain.as_str(), certs.client_key.as_str()));
        eventually(
            60,
            "a client with a certificate from the CA is served",
            || https_get_as(https_port, &certs.ca, "/in", client) == (200, "backend /in".into()),
        );
        assert_ne!(
            https_get(https_port, &certs.ca, "/no-cert").0,
            200,
            "a client without a certificate is refused"
        );
        assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
    }
}
