//! Gateways, mTLS and authorization with real Envoys, configured by Rudder from Kubernetes objects
//! (the fake API server, and a real one with KUBECONFIG and Istio's CRDs installed):
//! - a gateway Envoy terminates TLS for `web.example.com` with a `credentialName` secret it gets
//!   over SDS, and routes by a VirtualService bound to the Gateway;
//! - a sidecar Envoy reaches the gateway's ISTIO_MUTUAL port over mTLS, both sides using workload
//!   certificates from Rudder's CA (SDS `default`/`ROOTCA`);
//! - AuthorizationPolicy: a DENY on a path, then an ALLOW for the sidecar's identity only.

use crate::common;
use crate::common::cluster::{Cluster, istio_crd};
use crate::common::peers::{
    Backend, Bootstrap, Envoy, free_port, peer, read_request_head, request,
};
use crate::common::{eventually, http_get};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const DOMAIN: &str = "istiod.istio-system.svc";
pub(crate) const HOST: &str = "web.example.com";

/// A CA of the test's own, a server certificate for `HOST` and a client certificate from it.
pub(crate) struct WebCerts {
    pub(crate) ca: String,
    pub(crate) chain: String,
    pub(crate) key: String,
    pub(crate) client_chain: String,
    pub(crate) client_key: String,
    /// Another client of the same CA, whose identity no pin names.
    stranger_chain: String,
    stranger_key: String,
}

pub(crate) fn web_certificates() -> WebCerts {
    let (ca_cert, ca_key) = rudder::ca::Authority::generate_root("example").unwrap();
    let ca = rudder::ca::Authority::from_pem(
        &ca_cert,
        &ca_key,
        "",
        "",
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    )
    .unwrap();
    let (chain, key) = ca
        .serving_cert(&[HOST.to_string()], &[], Duration::from_secs(3600))
        .unwrap();
    let (client_chain, client_key) = ca
        .issue_workload(&rudder::ca::Identity {
            trust_domain: "example".into(),
            namespace: "outside".into(),
            service_account: "partner".into(),
        })
        .unwrap();
    let (stranger_chain, stranger_key) = ca
        .issue_workload(&rudder::ca::Identity {
            trust_domain: "example".into(),
            namespace: "outside".into(),
            service_account: "stranger".into(),
        })
        .unwrap();
    WebCerts {
        ca: ca_cert,
        chain: chain.concat(),
        key,
        client_chain: client_chain.concat(),
        client_key,
        stranger_chain: stranger_chain.concat(),
        stranger_key,
    }
}

/// An HTTPS GET to 127.0.0.1:`port` with SNI `HOST`, trusting `ca_pem`: (status, body), or
/// (0, error) when the handshake or connection fails.
pub(crate) fn https_get(port: u16, ca_pem: &str, path: &str) -> (u16, String) {
    https_get_as(port, ca_pem, path, None)
}

/// `https_get`, presenting a client certificate (chain, key) when given.
pub(crate) fn https_get_as(
    port: u16,
    ca_pem: &str,
    path: &str,
    client: Option<(&str, &str)>,
) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let config = match client {
            Some((chain, key)) => config
                .with_client_auth_cert(
                    rustls_pemfile::certs(&mut chain.as_bytes())
                        .map(|c| c.unwrap())
                        .collect(),
                    rustls_pemfile::private_key(&mut key.as_bytes())
                        .unwrap()
                        .unwrap(),
                )
                .unwrap(),
            None => config.with_no_client_auth(),
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(t) => t,
            Err(e) => return (0, e.to_string()),
        };
        let name = rustls::pki_types::ServerName::try_from(HOST).unwrap();
        let tls = match connector.connect(name, tcp).await {
            Ok(t) => t,
            Err(e) => return (0, e.to_string()),
        };
        common::http::send_over(tls, HOST, &common::http::Request::get(path))
            .await
            .unwrap_or_else(|e| (0, e))
    })
}

fn objects(ns: &str, backend: u16, ports: &Ports) -> Vec<Value> {
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    let certs = &ports.cert;
    let (chain, key) = (&certs.chain, &certs.key);
    vec![
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "web-cert", "namespace": ns},
            "data": {"tls.crt": b64(chain), "tls.key": b64(key)}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "web-mtls", "namespace": ns},
            "data": {"tls.crt": b64(chain), "tls.key": b64(key), "ca.crt": b64(&certs.ca)}}),
        // What the passthrough port forwards to: the gateway's own TLS port, still encrypted.
        json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "tls-backend", "namespace": ns},
            "spec": {"hosts": [format!("tls-backend.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                     "ports": [{"number": 443, "name": "tls", "protocol": "TLS"}], "resolution": "STATIC",
                     "endpoints": [{"address": "127.0.0.1", "ports": {"tls": ports.https}}]}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "pass", "namespace": ns},
            "spec": {"hosts": [HOST], "gateways": ["gw"],
                     "tls": [{"match": [{"sniHosts": [HOST], "port": ports.passthrough}],
                              "route": [{"destination": {"host": format!("tls-backend.{ns}.svc.cluster.local"), "port": {"number": 443}}}]}]}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "backend", "namespace": ns},
            "spec": {"hosts": [format!("backend.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                     "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}], "resolution": "STATIC",
                     "endpoints": [{"address": "127.0.0.1", "ports": {"http": backend}}]}}),
        // The gateway's mTLS port, as the sidecar reaches it: plain TCP from the app, mTLS on the wire.
        json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "gateway-mtls", "namespace": ns},
            "spec": {"hosts": [format!("gateway.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                     "ports": [{"number": ports.via_sidecar, "name": "tcp", "protocol": "TCP"}], "resolution": "STATIC",
                     "endpoints": [{"address": "127.0.0.1", "ports": {"tcp": ports.mtls}, "serviceAccount": "gateway"}]}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "gateway-mtls", "namespace": ns},
            "spec": {"host": format!("gateway.{ns}.svc.cluster.local"), "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}}),
        // The same port, registered as a service whose workloads run as another account: the
        // sidecar must refuse the gateway's certificate.
        json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "impostor", "namespace": ns},
            "spec": {"hosts": [format!("impostor.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                     "ports": [{"number": ports.via_impostor, "name": "tcp", "protocol": "TCP"}], "resolution": "STATIC",
                     "endpoints": [{"address": "127.0.0.1", "ports": {"tcp": ports.mtls}, "serviceAccount": "someone-else"}]}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "impostor", "namespace": ns},
            "spec": {"host": format!("impostor.{ns}.svc.cluster.local"), "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": ns},
            "spec": {"selector": {"app": "gw"}, "servers": [
                {"port": {"number": ports.http, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]},
                {"port": {"number": ports.https, "name": "https", "protocol": "HTTPS"}, "hosts": [HOST],
                 "tls": {"mode": "SIMPLE", "credentialName": "web-cert"}},
                {"port": {"number": ports.mtls, "name": "mtls", "protocol": "HTTPS"}, "hosts": ["*"],
                 "tls": {"mode": "ISTIO_MUTUAL"}},
                {"port": {"number": ports.tcp, "name": "tcp", "protocol": "TCP"}, "hosts": ["*"]},
                {"port": {"number": ports.mutual, "name": "mutual", "protocol": "HTTPS"}, "hosts": [HOST],
                 "tls": {"mode": "MUTUAL", "credentialName": "web-mtls"}},
                {"port": {"number": ports.passthrough, "name": "tls-pass", "protocol": "TLS"}, "hosts": [HOST],
                 "tls": {"mode": "PASSTHROUGH"}}]}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "web-tcp", "namespace": ns},
            "spec": {"hosts": ["*"], "gateways": ["gw"],
                     "tcp": [{"route": [{"destination": {"host": format!("backend.{ns}.svc.cluster.local"), "port": {"number": 80}}}]}]}}),
        json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"hosts": [HOST], "gateways": ["gw"],
                     "http": [
                         // Routing on a verified JWT claim (and on its absence).
                         {"match": [{"uri": {"prefix": "/claim-route"},
                                     "headers": {"@request.auth.claims.sub": {"exact": "alice"}}}],
                          "directResponse": {"status": 299}},
                         {"match": [{"uri": {"prefix": "/claim-route"},
                                     "withoutHeaders": {"@request.auth.claims[sub]": {"exact": "alice"}}}],
                          "directResponse": {"status": 298}},
                         {"route": [{"destination": {"host": format!("backend.{ns}.svc.cluster.local"), "port": {"number": 80}}}]}]}}),
        json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": {"name": "deny-admin", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                     // On TCP the path cannot be seen and a DENY rule then covers its whole port (as
                     // in Istio), so it names the HTTP ports.
                     // `{*}` is a URI template (one segment), served with Envoy's uri_template matcher.
                     "rules": [{"to": [{"operation": {"paths": ["/admin*", "/tenants/{*}/secrets"],
                                                      "ports": [ports.http.to_string(), ports.https.to_string()]}}]}]}}),
        // Dry run: evaluated and counted by Envoy, never enforced.
        json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": {"name": "deny-reports-dry-run", "namespace": ns,
                         "annotations": {"istio.io/dry-run": "true"}},
            "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                     "rules": [{"to": [{"operation": {"paths": ["/reports"],
                                                      "ports": [ports.http.to_string()]}}]}]}}),
    ]
}

const ISSUER: &str = "https://issuer.example";

/// A signing key and its JWKS (ES256), as an identity provider publishes them.
fn jwt_issuer() -> (rcgen::KeyPair, String) {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = key.public_key_raw();
    let jwks = json!({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "kid": "k1", "use": "sig",
        "x": b64(&point[1..33]), "y": b64(&point[33..65])}]});
    (key, jwks.to_string())
}

/// A token for `sub` signed with `key` (ES256: the DER signature rewritten as r || s).
fn jwt(key: &rcgen::KeyPair, sub: &str) -> String {
    jwt_from(key, ISSUER, sub)
}

fn jwt_from(key: &rcgen::KeyPair, issuer: &str, sub: &str) -> String {
    jwt_with(key, json!({"iss": issuer, "sub": sub}))
}

/// A token with `claims` (and an expiry an hour away).
fn jwt_with(key: &rcgen::KeyPair, mut claims: serde_json::Value) -> String {
    use base64::Engine;
    use rcgen::SigningKey;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let head = b64(json!({"alg": "ES256", "typ": "JWT", "kid": "k1"})
        .to_string()
        .as_bytes());
    claims["exp"] = exp.into();
    let body = b64(claims.to_string().as_bytes());
    let signing_input = format!("{head}.{body}");
    let der = key.sign(signing_input.as_bytes()).unwrap();
    // SEQUENCE { INTEGER r, INTEGER s }, each integer possibly with a leading zero byte.
    let mut raw = Vec::new();
    let mut at = 2;
    for _ in 0..2 {
        let len = der[at + 1] as usize;
        let int = &der[at + 2..at + 2 + len];
        let int = &int[int.len().saturating_sub(32)..];
        raw.extend(std::iter::repeat_n(0u8, 32 - int.len()));
        raw.extend_from_slice(int);
        at += 2 + len;
    }
    format!("{signing_input}.{}", b64(&raw))
}

/// An external authorizer (Envoy's HTTP ext_authz protocol): 200 when the request carries
/// `x-ext-allow: yes`, else 403. Runs until the test process ends.
fn ext_authz_server() -> u16 {
    use std::io::{BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while let Some((_, headers)) = read_request_head(&mut reader) {
                    let allowed = headers.iter().any(|h| h == "x-ext-allow: yes");
                    let status = if allowed { "200 OK" } else { "403 Forbidden" };
                    let reply = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// An external authorizer speaking Envoy's gRPC ext_authz protocol: OK while `allow` is set,
/// PERMISSION_DENIED otherwise. Runs until the test process ends.
fn grpc_ext_authz_server(allow: Arc<std::sync::atomic::AtomicBool>) -> u16 {
    use envoy_types::pb::envoy::service::auth::v3::authorization_server::{
        Authorization, AuthorizationServer,
    };
    use envoy_types::pb::envoy::service::auth::v3::{CheckRequest, CheckResponse};
    struct Authz(Arc<std::sync::atomic::AtomicBool>);
    #[tonic::async_trait]
    impl Authorization for Authz {
        async fn check(
            &self,
            _request: tonic::Request<CheckRequest>,
        ) -> Result<tonic::Response<CheckResponse>, tonic::Status> {
            let allowed = self.0.load(std::sync::atomic::Ordering::SeqCst);
            Ok(tonic::Response::new(CheckResponse {
                status: Some(envoy_types::pb::google::rpc::Status {
                    code: if allowed { 0 } else { 7 },
                    ..Default::default()
                }),
                ..Default::default()
            }))
        }
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = tonic::transport::Server::builder()
                .add_service(AuthorizationServer::new(Authz(allow)))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await;
        });
    });
    port
}

/// Serves `body` (a JWKS) to every HTTP request, as an identity provider's keys endpoint.
fn jwks_server(body: String) -> u16 {
    use std::io::{BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while read_request_head(&mut reader).is_some() {
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

struct Ports {
    http: u16,
    https: u16,
    mtls: u16,
    tcp: u16,
    mutual: u16,
    passthrough: u16,
    via_sidecar: u16,
    via_impostor: u16,
    cert: WebCerts,
}

#[test]
fn gateway_tls_mtls_between_envoys_and_authorization() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("gateway") {
        let ns = c.ns.clone();
        if c.is_fake() {
            for (group, plural, kind) in [
                ("networking.istio.io", "gateways", "Gateway"),
                ("networking.istio.io", "virtualservices", "VirtualService"),
                ("networking.istio.io", "serviceentries", "ServiceEntry"),
                ("networking.istio.io", "destinationrules", "DestinationRule"),
                (
                    "security.istio.io",
                    "authorizationpolicies",
                    "AuthorizationPolicy",
                ),
                (
                    "security.istio.io",
                    "requestauthentications",
                    "RequestAuthentication",
                ),
            ] {
                c.apply(istio_crd(group, plural, kind));
            }
            c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        }
        let backend = Backend::start("backend");
        let ports = Ports {
            http: free_port(),
            https: free_port(),
            mtls: free_port(),
            tcp: free_port(),
            mutual: free_port(),
            passthrough: free_port(),
            via_sidecar: free_port(),
            via_impostor: free_port(),
            cert: web_certificates(),
        };
        for obj in objects(&ns, backend.port, &ports) {
            c.apply(obj);
        }
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let root_dir = tempfile::tempdir().unwrap();
        let root_path = root_dir.path().join("root.pem");
        std::fs::write(&root_path, c.ca_root()).unwrap();
        let (gw_token, client_token) = (c.token("gateway"), c.token("client"));
        let xds = daemon.addr("grpc-xds-tls");
        let gateway = Envoy::boot(
            &envoy_bin,
            xds,
            &Bootstrap {
                node_type: "router",
                pod: "gw-0",
                namespace: &ns,
                labels: "app: gw",
                metadata: "",
                tls: Some((&root_path, DOMAIN)),
                token: Some(&gw_token),
                ..Bootstrap::default()
            },
        );
        let _sidecar = Envoy::boot(
            &envoy_bin,
            xds,
            &Bootstrap {
                namespace: &ns,
                tls: Some((&root_path, DOMAIN)),
                token: Some(&client_token),
                ..Bootstrap::default()
            },
        );
        let scene = Scene {
            c: &c,
            ns: ns.clone(),
            ports: &ports,
            admin: gateway.admin,
            root_path: &root_path,
        };
        routes_http_and_enforces_deny(&scene);
        let signer = authenticates_requests(&scene);
        fetches_keys_from_the_jwks_uri(&scene, &signer);
        let mesh = asks_an_http_authorizer(&scene);
        terminates_checks_and_passes_tls(&scene);
        proxies_tcp_and_asks_a_grpc_authorizer(&scene, &mesh);
        allows_only_the_sidecar_identity(&scene);
        drop(daemon);
    }
}

/// What the scenarios of the gateway test share: the cluster, the namespace, the ports, the
/// gateway Envoy's admin address and the mesh root certificate. Each scenario builds on the
/// config the ones before it applied.
struct Scene<'a> {
    c: &'a Cluster,
    ns: String,
    ports: &'a Ports,
    admin: std::net::SocketAddr,
    root_path: &'a std::path::Path,
}

/// Plaintext HTTP routed by the bound VirtualService; DENY, path normalisation, dry runs.
fn routes_http_and_enforces_deny(g: &Scene) {
    let ports = g.ports;
    // Plaintext HTTP through the gateway, routed by the bound VirtualService; DENY on /admin.
    eventually(60, "gateway routes HTTP", || {
        request(ports.http, HOST, "/hello", &[]) == (200, "backend /hello".into())
    });
    assert_eq!(request(ports.http, HOST, "/admin/x", &[]).0, 403);
    // Paths are normalised before authorization (MeshConfig pathNormalization BASE), so dot
    // segments cannot walk around a DENY.
    assert_eq!(request(ports.http, HOST, "/public/../admin/x", &[]).0, 403);
    // A dry-run DENY only counts: the request goes through and Envoy's shadow stats record it.
    assert_eq!(request(ports.http, HOST, "/reports", &[]).0, 200);
    let (_, stats) = http_get(g.admin, "/stats?filter=istio_dry_run_deny_");
    assert!(
        stats
            .lines()
            .any(|l| l.contains("rbac.istio_dry_run_deny_.shadow_denied") && !l.ends_with(": 0")),
        "{stats}"
    );
    assert_eq!(
        request(ports.http, HOST, "/tenants/acme/secrets", &[]).0,
        403
    );
    assert_eq!(
        request(ports.http, HOST, "/tenants/acme/public", &[]).0,
        200
    );
    assert_eq!(request(ports.http, "other.example.com", "/", &[]).0, 404);
}

/// RequestAuthentication with inline keys and the AuthorizationPolicy keys it feeds; returns the issuer's key.
fn authenticates_requests(g: &Scene) -> rcgen::KeyPair {
    let (c, ns, ports) = (g.c, &g.ns, g.ports);
    // RequestAuthentication: invalid tokens are refused, valid ones carry a request principal
    // that AuthorizationPolicy checks (only alice may call /jwt).
    let (signer, jwks) = jwt_issuer();
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
        "metadata": {"name": "jwt", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "jwtRules": [{"issuer": ISSUER, "jwks": jwks,
                              "outputClaimToHeaders": [{"header": "x-jwt-sub", "claim": "sub"}]}]}}));
    // The claim copied to a header is what later filters see (a client cannot forge it).
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "claims-header-alice", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                 "rules": [{"to": [{"operation": {"paths": ["/claims"], "ports": [ports.http.to_string()]}}],
                            "when": [{"key": "request.headers[x-jwt-sub]", "notValues": ["alice"]}]}]}}));
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "jwt-only-alice", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                 "rules": [{"from": [{"source": {"notRequestPrincipals": [format!("{ISSUER}/alice")]}}],
                            "to": [{"operation": {"paths": ["/jwt*"], "ports": [ports.http.to_string()]}}]}]}}));
    let bearer = |sub: &str| format!("Bearer {}", jwt(&signer, sub));
    eventually(60, "JWT required on /jwt", || {
        request(ports.http, HOST, "/jwt", &[]).0 == 403
            && request(
                ports.http,
                HOST,
                "/jwt",
                &[("authorization", &bearer("alice"))],
            ) == (200, "backend /jwt".into())
    });
    assert_eq!(
        request(
            ports.http,
            HOST,
            "/jwt",
            &[("authorization", &bearer("bob"))]
        )
        .0,
        403,
        "a valid token of another principal"
    );
    // A route on a claim matches the verified token's payload, not a header a client could send.
    let alice = [("authorization", bearer("alice"))];
    let alice: Vec<(&str, &str)> = alice.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(request(ports.http, HOST, "/claim-route", &alice).0, 299);
    let bob = bearer("bob");
    assert_eq!(
        request(ports.http, HOST, "/claim-route", &[("authorization", &bob)]).0,
        298
    );
    assert_eq!(
        request(ports.http, HOST, "/claim-route", &[]).0,
        298,
        "no token: no claim"
    );
    // istiod's other principal forms: any issuer (`*/sub`) and a subject prefix (`iss/svc-*`).
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "deny-mallory-anywhere", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                 "rules": [{"from": [{"source": {"requestPrincipals": ["*/mallory"]}}],
                            "to": [{"operation": {"paths": ["/forms"], "ports": [ports.http.to_string()]}}]}]}}));
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "only-services", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                 "rules": [{"from": [{"source": {"notRequestPrincipals": [format!("{ISSUER}/svc-*")]}}],
                            "to": [{"operation": {"paths": ["/services"], "ports": [ports.http.to_string()]}}]}]}}));
    eventually(60, "principal forms enforced", || {
        request(
            ports.http,
            HOST,
            "/forms",
            &[("authorization", &bearer("mallory"))],
        )
        .0 == 403
            && request(
                ports.http,
                HOST,
                "/services",
                &[("authorization", &bearer("svc-billing"))],
            ) == (200, "backend /services".into())
    });
    assert_eq!(
        request(
            ports.http,
            HOST,
            "/forms",
            &[("authorization", &bearer("alice"))]
        ),
        (200, "backend /forms".into()),
        "`*/mallory` is mallory only"
    );
    assert_eq!(
        request(
            ports.http,
            HOST,
            "/services",
            &[("authorization", &bearer("alice"))]
        )
        .0,
        403,
        "`iss/svc-*` admits only subjects with that prefix"
    );
    eventually(30, "claims copied to headers", || {
        request(
            ports.http,
            HOST,
            "/claims",
            &[("authorization", &bearer("alice"))],
        )
        .0 == 200
    });
    assert_eq!(
        request(
            ports.http,
            HOST,
            "/claims",
            &[("authorization", &bearer("bob")), ("x-jwt-sub", "alice")]
        )
        .0,
        403,
        "the header carries the token's claim, not the client's"
    );
    assert_eq!(
        request(
            ports.http,
            HOST,
            "/hello",
            &[("authorization", "Bearer not.a.jwt")]
        )
        .0,
        401,
        "an invalid token is refused even where no policy asks for one"
    );
    // The token's claims, audiences and presenter as AuthorizationPolicy `when` keys: each
    // DENY below refuses its path unless the token says so.
    for (path, key, value) in [
        ("/team", "request.auth.claims[team]", "blue"),
        ("/aud", "request.auth.audiences", "svc-a"),
        ("/azp", "request.auth.presenter", "app-1"),
    ] {
        c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": {"name": format!("when{}", path.replace('/', "-")), "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                     "rules": [{"to": [{"operation": {"paths": [path], "ports": [ports.http.to_string()]}}],
                                "when": [{"key": key, "notValues": [value]}]}]}}));
    }
    let token = |claims: serde_json::Value| {
        let mut all = json!({"iss": ISSUER, "sub": "alice"});
        for (k, v) in claims.as_object().unwrap() {
            all[k] = v.clone();
        }
        format!("Bearer {}", jwt_with(&signer, all))
    };
    let cases = [
        ("/team", json!({"team": "blue"}), json!({"team": "red"})),
        ("/aud", json!({"aud": "svc-a"}), json!({"aud": "svc-b"})),
        ("/azp", json!({"azp": "app-1"}), json!({"azp": "app-2"})),
    ];
    for (path, good, bad) in cases {
        let good = token(good);
        let mut last = Default::default();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eventually(60, path, || {
                last = (
                    request(ports.http, HOST, path, &[]),
                    request(ports.http, HOST, path, &[("authorization", &good)]),
                );
                last.0.0 == 403 && last.1 == (200, format!("backend {path}"))
            })
        }));
        if let Err(e) = outcome {
            eprintln!("{path}: without a token {:?}, with {:?}", last.0, last.1);
            std::panic::resume_unwind(e);
        }
        assert_eq!(
            request(ports.http, HOST, path, &[("authorization", &token(bad))]).0,
            403,
            "{path}: a token that says otherwise"
        );
    }
    signer
}

/// Keys published at a jwksUri, fetched by Envoy; a token signed by another key is refused.
fn fetches_keys_from_the_jwks_uri(g: &Scene, signer: &rcgen::KeyPair) {
    let (c, ns, ports) = (g.c, &g.ns, g.ports);
    // Keys published at a jwksUri: Envoy fetches them itself (a cluster for the host is added).
    let (remote_signer, remote_jwks) = jwt_issuer();
    let remote = "https://remote.example";
    let keys_port = jwks_server(remote_jwks);
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
        "metadata": {"name": "jwt-remote", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}},
                 "jwtRules": [{"issuer": remote, "jwksUri": format!("http://127.0.0.1:{keys_port}/jwks")}]}}));
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "remote-only-carol", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "DENY",
                 "rules": [{"from": [{"source": {"notRequestPrincipals": [format!("{remote}/carol")]}}],
                            "to": [{"operation": {"paths": ["/remote*"], "ports": [ports.http.to_string()]}}]}]}}));
    let carol = format!("Bearer {}", jwt_from(&remote_signer, remote, "carol"));
    eventually(60, "keys fetched from the jwksUri", || {
        request(ports.http, HOST, "/remote", &[("authorization", &carol)])
            == (200, "backend /remote".into())
    });
    let forged = format!("Bearer {}", jwt_from(signer, remote, "carol"));
    assert_eq!(
        request(ports.http, HOST, "/remote", &[("authorization", &forged)]).0,
        401,
        "signed with a key the issuer does not publish"
    );
    assert_eq!(request(ports.http, HOST, "/remote", &[]).0, 403);
    assert_eq!(
        request(ports.http, HOST, "/hello", &[]).0,
        200,
        "no token: allowed"
    );
}

/// CUSTOM with an HTTP provider from MeshConfig; returns the mesh config's provider list.
fn asks_an_http_authorizer(g: &Scene) -> String {
    let (c, ns, ports) = (g.c, &g.ns, g.ports);
    // CUSTOM: an external authorizer from MeshConfig decides /ext (and only /ext).
    let authz_port = ext_authz_server();
    c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": "authz", "namespace": ns},
        "spec": {"hosts": [format!("authz.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                 "ports": [{"number": 8000, "name": "http", "protocol": "HTTP"}], "resolution": "STATIC",
                 "endpoints": [{"address": "127.0.0.1", "ports": {"http": authz_port}}]}}));
    let mesh = format!(
        "extensionProviders:\n- name: ext\n  envoyExtAuthzHttp:\n    service: authz.{ns}.svc.cluster.local\n    port: 8000\n    includeRequestHeadersInCheck: [x-ext-allow]\n"
    );
    c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": ns}, "data": {"mesh": mesh}}));
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "ext", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "CUSTOM", "provider": {"name": "ext"},
                 "rules": [{"to": [{"operation": {"paths": ["/ext*"], "ports": [ports.http.to_string()]}}]}]}}));
    eventually(60, "the external authorizer decides /ext", || {
        request(ports.http, HOST, "/ext", &[]).0 == 403
            && request(ports.http, HOST, "/ext", &[("x-ext-allow", "yes")])
                == (200, "backend /ext".into())
    });
    assert_eq!(
        request(ports.http, HOST, "/hello", &[]),
        (200, "backend /hello".into()),
        "requests the CUSTOM rules do not match never reach the authorizer"
    );
    mesh
}

/// SIMPLE, MUTUAL and PASSTHROUGH servers, and mTLS from the sidecar with the server identity pinned.
fn terminates_checks_and_passes_tls(g: &Scene) {
    let ports = g.ports;
    // TLS terminated with the credentialName secret, delivered over SDS.
    let ca_pem = &ports.cert.ca;
    eventually(60, "gateway terminates TLS", || {
        https_get(ports.https, ca_pem, "/secure") == (200, "backend /secure".into())
    });
    assert_eq!(https_get(ports.https, ca_pem, "/admin").0, 403);

    // MUTUAL: the client must present a certificate from the secret's CA (`ca.crt`).
    let client = Some((
        ports.cert.client_chain.as_str(),
        ports.cert.client_key.as_str(),
    ));
    eventually(60, "gateway checks client certificates", || {
        https_get_as(ports.mutual, ca_pem, "/mutual", client) == (200, "backend /mutual".into())
    });
    assert_eq!(
        https_get(ports.mutual, ca_pem, "/mutual").0,
        0,
        "no client certificate"
    );

    // PASSTHROUGH: routed by SNI, still encrypted, to a TLS server (here the SIMPLE port).
    eventually(60, "gateway passes TLS through", || {
        https_get(ports.passthrough, ca_pem, "/pass") == (200, "backend /pass".into())
    });

    // Sidecar → gateway over mTLS with certificates from Rudder's CA.
    eventually(60, "mTLS from the sidecar", || {
        request(ports.via_sidecar, HOST, "/mtls", &[]) == (200, "backend /mtls".into())
    });
    // The server's identity is pinned: the same gateway, reached as a service whose workloads
    // run as another account, is refused by the sidecar.
    assert_eq!(
        request(ports.via_impostor, HOST, "/mtls", &[]).0,
        0,
        "a server certificate of the wrong identity"
    );
    // Without a client certificate the mTLS port refuses the handshake.
    let root_pem = std::fs::read_to_string(g.root_path).unwrap();
    assert_eq!(https_get(ports.mtls, &root_pem, "/").0, 0);
}

/// Plain TCP through the gateway, decided by a gRPC CUSTOM provider; an undefined provider denies.
fn proxies_tcp_and_asks_a_grpc_authorizer(g: &Scene, mesh: &str) {
    let (c, ns, ports) = (g.c, &g.ns, g.ports);
    // Plain TCP through the gateway (the HTTP backend, proxied at L4).
    eventually(60, "gateway proxies TCP", || {
        request(ports.tcp, HOST, "/tcp", &[]) == (200, "backend /tcp".into())
    });

    // CUSTOM with a gRPC provider decides TCP connections too (network ext_authz), and a
    // provider MeshConfig does not define denies instead of letting connections through.
    let grpc_allow = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let grpc_port = grpc_ext_authz_server(grpc_allow.clone());
    c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": "authz-grpc", "namespace": ns},
        "spec": {"hosts": [format!("authz-grpc.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                 "ports": [{"number": 9000, "name": "grpc", "protocol": "GRPC"}], "resolution": "STATIC",
                 "endpoints": [{"address": "127.0.0.1", "ports": {"grpc": grpc_port}}]}}));
    let mesh = format!(
        "{mesh}- name: ext-grpc\n  envoyExtAuthzGrpc:\n    service: authz-grpc.{ns}.svc.cluster.local\n    port: 9000\n"
    );
    c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": ns}, "data": {"mesh": mesh}}));
    // One provider per workload: the HTTP one's policy goes first.
    c.delete(
        json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "ext", "namespace": ns}}),
    );
    let tcp_custom = |provider: &str| {
        json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": {"name": "ext-tcp", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "CUSTOM", "provider": {"name": provider},
                     "rules": [{"to": [{"operation": {"ports": [ports.tcp.to_string()]}}]}]}})
    };
    c.apply(tcp_custom("ext-grpc"));
    eventually(60, "the gRPC authorizer refuses the TCP connection", || {
        request(ports.tcp, HOST, "/tcp", &[]).0 == 0
    });
    grpc_allow.store(true, std::sync::atomic::Ordering::SeqCst);
    eventually(60, "the gRPC authorizer admits the TCP connection", || {
        request(ports.tcp, HOST, "/tcp", &[]) == (200, "backend /tcp".into())
    });
    c.apply(tcp_custom("undefined"));
    eventually(60, "an undefined provider denies", || {
        request(ports.tcp, HOST, "/tcp", &[]).0 == 0
    });
    c.delete(tcp_custom("undefined"));
    eventually(60, "TCP open again without the CUSTOM policy", || {
        request(ports.tcp, HOST, "/tcp", &[]) == (200, "backend /tcp".into())
    });
}

/// ALLOW by principal: the sidecar's mTLS path passes, anonymous HTTPS and TCP are denied.
fn allows_only_the_sidecar_identity(g: &Scene) {
    let (c, ns, ports) = (g.c, &g.ns, g.ports);
    let ca_pem = &ports.cert.ca;
    // ALLOW only the sidecar's identity: the mTLS path passes, the anonymous HTTPS one is denied.
    c.apply(json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "only-client", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "gw"}}, "action": "ALLOW",
                 "rules": [{"from": [{"source": {"principals": [format!("cluster.local/ns/{ns}/sa/client")]}}]}]}}));
    eventually(60, "anonymous callers denied", || {
        https_get(ports.https, ca_pem, "/secure").0 == 403
    });
    assert_eq!(
        request(ports.via_sidecar, HOST, "/mtls", &[]),
        (200, "backend /mtls".into()),
        "the sidecar's identity is allowed"
    );
    assert_eq!(
        request(ports.tcp, HOST, "/tcp", &[]).0,
        0,
        "TCP has no principal either: the network RBAC filter closes the connection"
    );
}

/// Istio's CRDs of `kinds` and the scenario's namespace, on the fake API server (a real cluster
/// has both already).
fn prepare(c: &Cluster, kinds: &[(&str, &str, &str)]) {
    if c.is_fake() {
        for (group, plural, kind) in kinds {
            c.apply(istio_crd(group, plural, kind));
        }
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c.ns}}));
    }
}

/// A gateway Envoy (pod `pod`, labels `labels`, extra node metadata `metadata`) connected to
/// `daemon` over its TLS port with the `gateway` service account's token; the directory holding
/// the root it trusts lives as long as it.
pub(crate) fn boot_gateway(
    c: &Cluster,
    daemon: &common::Daemon,
    envoy_bin: &std::path::Path,
    pod: &str,
    labels: &str,
    metadata: &str,
) -> (Envoy, tempfile::TempDir) {
    let root_dir = tempfile::tempdir().unwrap();
    let root_path = root_dir.path().join("root.pem");
    std::fs::write(&root_path, c.ca_root()).unwrap();
    let token = c.token("gateway");
    let envoy = Envoy::boot(
        envoy_bin,
        daemon.addr("grpc-xds-tls"),
        &Bootstrap {
            node_type: "router",
            pod,
            namespace: &c.ns,
            labels,
            metadata,
            tls: Some((&root_path, DOMAIN)),
            token: Some(&token),
            ..Bootstrap::default()
        },
    );
    (envoy, root_dir)
}

/// The CRDs of the networking kinds gateway scenarios write.
const NETWORKING_KINDS: [(&str, &str, &str); 3] = [
    ("networking.istio.io", "gateways", "Gateway"),
    ("networking.istio.io", "virtualservices", "VirtualService"),
    ("networking.istio.io", "serviceentries", "ServiceEntry"),
];

/// A self-signed certificate for `HOST` made by `openssl` with `newkey` (`rsa:2048`, or `ec` with
/// P-256): (certificate file, key file), both in `dir`.
fn openssl_certificate(dir: &std::path::Path, name: &str, newkey: &[&str]) -> (String, String) {
    let (crt, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-nodes", "-days", "1", "-subj"])
        .arg(format!("/CN={HOST}"))
        .arg("-addext")
        .arg(format!("subjectAltName=DNS:{HOST}"))
        .args(["-newkey"])
        .args(newkey)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "{out:?}");
    (
        crt.to_string_lossy().into_owned(),
        key.to_string_lossy().into_owned(),
    )
}

/// The size in bits of the public key the server on `port` presents to a client offering only
/// `sigalgs` (TLS 1.3), or `None` when the handshake fails.
fn served_key_bits(port: u16, sigalgs: &str) -> Option<u32> {
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-tls1_3", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", HOST, "-sigalgs", sigalgs])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Server public key is "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Gateway server TLS as istiod configures it: MUTUAL and OPTIONAL_MUTUAL admit only client
/// certificates whose SAN is in `subjectAltNames` (any certificate of the CA got in before), and a
/// server with several certificates (`tlsCertificates` files, `credentialNames` Secrets: RSA and
/// ECDSA) presents the one each client can verify (before, neither was read).
#[test]
fn gateway_pins_client_certificates_and_serves_several_certificates() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("gateway-tls") {
        let ns = c.ns.clone();
        prepare(&c, &NETWORKING_KINDS);
        let backend = Backend::start("backend");
        let cert = web_certificates();
        let files = tempfile::tempdir().unwrap();
        let rsa = openssl_certificate(files.path(), "rsa", &["rsa:2048"]);
        let ec = openssl_certificate(
            files.path(),
            "ec",
            &["ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        );
        let (pinned, optional, several_files, several_secrets) =
            (free_port(), free_port(), free_port(), free_port());
        let b64 = |s: &str| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(s)
        };
        let read = |p: &str| std::fs::read_to_string(p).unwrap();
        let partner = "spiffe://example/ns/outside/sa/partner";
        for obj in [
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "web-mtls", "namespace": ns},
                "data": {"tls.crt": b64(&cert.chain), "tls.key": b64(&cert.key), "ca.crt": b64(&cert.ca)}}),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "web-rsa", "namespace": ns},
                "data": {"tls.crt": b64(&read(&rsa.0)), "tls.key": b64(&read(&rsa.1))}}),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "web-ec", "namespace": ns},
                "data": {"tls.crt": b64(&read(&ec.0)), "tls.key": b64(&read(&ec.1))}}),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                "metadata": {"name": "backend", "namespace": ns},
                "spec": {"hosts": [format!("backend.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                         "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}], "resolution": "STATIC",
                         "endpoints": [{"address": "127.0.0.1", "ports": {"http": backend.port}}]}}),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": ns},
                "spec": {"selector": {"app": "gw"}, "servers": [
                    {"port": {"number": pinned, "name": "pinned", "protocol": "HTTPS"}, "hosts": [HOST],
                     "tls": {"mode": "MUTUAL", "credentialName": "web-mtls", "subjectAltNames": [partner]}},
                    {"port": {"number": optional, "name": "optional", "protocol": "HTTPS"}, "hosts": [HOST],
                     "tls": {"mode": "OPTIONAL_MUTUAL", "credentialName": "web-mtls", "subjectAltNames": [partner]}},
                    {"port": {"number": several_files, "name": "files", "protocol": "HTTPS"}, "hosts": [HOST],
                     "tls": {"mode": "SIMPLE", "tlsCertificates": [
                         {"serverCertificate": rsa.0, "privateKey": rsa.1},
                         {"serverCertificate": ec.0, "privateKey": ec.1}]}},
                    {"port": {"number": several_secrets, "name": "secrets", "protocol": "HTTPS"}, "hosts": [HOST],
                     "tls": {"mode": "SIMPLE", "credentialNames": ["web-rsa", "web-ec"]}}]}}),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"hosts": [HOST], "gateways": ["gw"],
                         "http": [{"route": [{"destination": {"host": format!("backend.{ns}.svc.cluster.local"), "port": {"number": 80}}}]}]}}),
        ] {
            c.apply(obj);
        }
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let _gateway = boot_gateway(&c, &daemon, &envoy_bin, "gw-0", "app: gw", "");
        let partner_cert = Some((cert.client_chain.as_str(), cert.client_key.as_str()));
        let stranger = Some((cert.stranger_chain.as_str(), cert.stranger_key.as_str()));
        eventually(60, "the pinned client gets in", || {
            https_get_as(pinned, &cert.ca, "/pinned", partner_cert)
                == (200, "backend /pinned".into())
        });
        assert!(
            !https_get_as(pinned, &cert.ca, "/pinned", stranger)
                .1
                .contains("backend"),
            "a certificate of the same CA for another identity"
        );
        assert_eq!(
            https_get(pinned, &cert.ca, "/pinned").0,
            0,
            "no certificate"
        );
        // OPTIONAL_MUTUAL with pins: Envoy then asks every client for a certificate (it does
        // so for istiod's identical configuration), and checks it against the pins.
        eventually(60, "OPTIONAL_MUTUAL admits the pinned client", || {
            https_get_as(optional, &cert.ca, "/optional", partner_cert)
                == (200, "backend /optional".into())
        });
        assert!(
            !https_get_as(optional, &cert.ca, "/optional", stranger)
                .1
                .contains("backend"),
            "OPTIONAL_MUTUAL: a certificate that is presented is checked against the pins"
        );
        for port in [several_files, several_secrets] {
            eventually(60, "both certificates served", || {
                served_key_bits(port, "ECDSA+SHA256") == Some(256)
                    && served_key_bits(port, "RSA-PSS+SHA256") == Some(2048)
            });
        }
        drop(daemon);
    }
}

/// A gateway decides who the client is as istiod configures it: from the connection
/// (`use_remote_address`), trusting `X-Forwarded-For` only as far as `gatewayTopology`'s
/// `numTrustedProxies` (the proxy's ProxyConfig, here its node metadata). Before, any client
/// wrote the address an ALLOW on `remoteIpBlocks` wanted into `X-Forwarded-For` and got in.
#[test]
fn gateways_trust_forwarded_addresses_only_from_trusted_proxies() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("gateway-xff") {
        let ns = c.ns.clone();
        let mut kinds = NETWORKING_KINDS.to_vec();
        kinds.push((
            "security.istio.io",
            "authorizationpolicies",
            "AuthorizationPolicy",
        ));
        prepare(&c, &kinds);
        let backend = Backend::start("backend");
        let (direct, behind_lb) = (free_port(), free_port());
        for (name, app, port) in [
            ("direct", "gw-direct", direct),
            ("behind-lb", "gw-behind-lb", behind_lb),
        ] {
            c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"selector": {"app": app}, "servers": [
                    {"port": {"number": port, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}}));
            c.apply(
                json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
                "metadata": {"name": format!("only-office-{name}"), "namespace": ns},
                "spec": {"selector": {"matchLabels": {"app": app}}, "action": "ALLOW",
                         "rules": [{"from": [{"source": {"remoteIpBlocks": ["10.9.9.9/32"]}}]}]}}),
            );
        }
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "backend", "namespace": ns},
            "spec": {"hosts": [format!("backend.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                     "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}], "resolution": "STATIC",
                     "endpoints": [{"address": "127.0.0.1", "ports": {"http": backend.port}}]}}));
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"hosts": ["*"], "gateways": ["direct", "behind-lb"],
                     "http": [{"route": [{"destination": {"host": format!("backend.{ns}.svc.cluster.local"), "port": {"number": 80}}}]}]}}));
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let _direct_gw = boot_gateway(&c, &daemon, &envoy_bin, "gw-direct-0", "app: gw-direct", "");
        let _lb_gw = boot_gateway(
            &c,
            &daemon,
            &envoy_bin,
            "gw-behind-lb-0",
            "app: gw-behind-lb",
            "PROXY_CONFIG: {gatewayTopology: {numTrustedProxies: 1}}, ",
        );
        let forged = [("x-forwarded-for", "10.9.9.9")];
        // Behind one trusted proxy, the address it forwarded is the client.
        eventually(60, "the trusted proxy's forwarded address admitted", || {
            request(behind_lb, HOST, "/lb", &forged) == (200, "backend /lb".into())
        });
        assert_eq!(
            request(
                behind_lb,
                HOST,
                "/lb",
                &[("x-forwarded-for", "10.9.9.9, 10.1.1.1")]
            )
            .0,
            403,
            "only the last hop is trusted: the client is 10.1.1.1"
        );
        assert_eq!(
            request(behind_lb, HOST, "/lb", &[]).0,
            403,
            "no forwarded address"
        );
        // Facing clients directly, a forwarded address is only what the client wrote.
        eventually(60, "the direct gateway's policy in force", || {
            request(direct, HOST, "/direct", &[]).0 == 403
        });
        assert_eq!(
            request(direct, HOST, "/direct", &forged).0,
            403,
            "a client forging X-Forwarded-For"
        );
        drop(daemon);
    }
}

/// A RequestAuthentication with only an `issuer` (istiod finds its keys by OIDC discovery,
/// Rudder does not): the issuer's tokens are refused, and a request without a token still
/// passes, as with any RequestAuthentication. Before, the rule was dropped and a token signed
/// by anyone reached the application.
#[test]
fn an_issuer_rudder_cannot_resolve_has_its_tokens_refused() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("gateway-oidc") {
        let ns = c.ns.clone();
        let mut kinds = NETWORKING_KINDS.to_vec();
        kinds.push((
            "security.istio.io",
            "requestauthentications",
            "RequestAuthentication",
        ));
        prepare(&c, &kinds);
        let backend = Backend::start("backend");
        let port = free_port();
        let oidc = "https://oidc.example";
        for obj in [
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": ns},
                "spec": {"selector": {"app": "gw"}, "servers": [
                    {"port": {"number": port, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}}),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                "metadata": {"name": "backend", "namespace": ns},
                "spec": {"hosts": [format!("backend.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                         "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}], "resolution": "STATIC",
                         "endpoints": [{"address": "127.0.0.1", "ports": {"http": backend.port}}]}}),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"hosts": ["*"], "gateways": ["gw"],
                         "http": [{"route": [{"destination": {"host": format!("backend.{ns}.svc.cluster.local"), "port": {"number": 80}}}]}]}}),
            json!({"apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
                "metadata": {"name": "oidc", "namespace": ns},
                "spec": {"selector": {"matchLabels": {"app": "gw"}}, "jwtRules": [{"issuer": oidc}]}}),
        ] {
            c.apply(obj);
        }
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let _gw = boot_gateway(&c, &daemon, &envoy_bin, "gw-0", "app: gw", "");
        let (signer, _) = jwt_issuer();
        let token = format!("Bearer {}", jwt_from(&signer, oidc, "mallory"));
        eventually(60, "the gateway serves", || {
            request(port, HOST, "/open", &[]) == (200, "backend /open".into())
        });
        eventually(60, "the issuer's tokens refused", || {
            request(port, HOST, "/token", &[("authorization", &token)]).0 == 401
        });
        drop(daemon);
    }
}

/// An AuthorizationPolicy attached by `targetRefs` to a Gateway API Gateway is enforced by that
/// Gateway's pods (labelled `gateway.networking.k8s.io/gateway-name`), as istiod attaches it, and
/// by no other gateway. Before, a targeted DENY was enforced nowhere.
#[test]
fn a_policy_targeting_a_gateway_is_enforced_by_its_pods() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("gateway-targetref") {
        let ns = c.ns.clone();
        let mut kinds = NETWORKING_KINDS.to_vec();
        kinds.push((
            "security.istio.io",
            "authorizationpolicies",
            "AuthorizationPolicy",
        ));
        prepare(&c, &kinds);
        let backend = Backend::start("backend");
        let port = free_port();
        let deny = |name: &str, gateway: &str, path: &str| {
            json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway}],
                         "action": "DENY", "rules": [{"to": [{"operation": {"paths": [path]}}]}]}})
        };
        for obj in [
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": ns},
                "spec": {"selector": {"app": "ingress"}, "servers": [
                    {"port": {"number": port, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}}),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                "metadata": {"name": "backend", "namespace": ns},
                "spec": {"hosts": [format!("backend.{ns}.svc.cluster.local")], "location": "MESH_INTERNAL",
                         "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}], "resolution": "STATIC",
                         "endpoints": [{"address": "127.0.0.1", "ports": {"http": backend.port}}]}}),
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"hosts": ["*"], "gateways": ["gw"],
                         "http": [{"route": [{"destination": {"host": format!("backend.{ns}.svc.cluster.local"), "port": {"number": 80}}}]}]}}),
            deny("ingress-admin", "ingress", "/admin"),
            deny("other-reports", "other", "/reports"),
        ] {
            c.apply(obj);
        }
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let _gw = boot_gateway(
            &c,
            &daemon,
            &envoy_bin,
            "ingress-0",
            "app: ingress, gateway.networking.k8s.io/gateway-name: ingress",
            "",
        );
        eventually(60, "the gateway serves", || {
            request(port, HOST, "/open", &[]) == (200, "backend /open".into())
        });
        assert_eq!(
            request(port, HOST, "/admin", &[]).0,
            403,
            "the DENY attached to this gateway's Gateway"
        );
        assert_eq!(
            request(port, HOST, "/reports", &[]),
            (200, "backend /reports".into()),
            "a DENY attached to another Gateway"
        );
        drop(daemon);
    }
}
