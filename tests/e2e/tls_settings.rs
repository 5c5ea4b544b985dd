//! MeshConfig `tlsDefaults` through real Envoys, files mode: a gateway's HTTPS server takes the
//! mesh's minimum version, curves and cipher suites (a TLS 1.2 client is refused once the mesh
//! asks for 1.3, and a server's own `minProtocolVersion` wins over the mesh's), a DestinationRule's
//! SIMPLE origination takes its curves, and every curve Rudder sends is one Envoy accepts (no
//! NACK), while one it does not know is left out.

use crate::common::peers::{Backend, TlsServer, free_port, peer, request};
use crate::common::{Daemon, eventually, metric, write};
use crate::gateway::{HOST, https_get, web_certificates};

/// Whether an `openssl s_client` limited to `version` (`-tls1_2`, `-tls1_3`) completes a
/// handshake with the server on `port`.
fn handshakes(port: u16, version: &str) -> bool {
    let out = std::process::Command::new("timeout")
        .args(["5", "openssl", "s_client", version, "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", HOST])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("Cipher is ") && !text.contains("Cipher is (NONE)")
}

#[test]
fn mesh_tls_defaults_shape_gateway_and_origination_tls() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let certs = web_certificates();
    let files = tempfile::tempdir().unwrap();
    let (crt, key) = (files.path().join("web.crt"), files.path().join("web.key"));
    std::fs::write(&crt, &certs.chain).unwrap();
    std::fs::write(&key, &certs.key).unwrap();
    let upstream_certs = tempfile::tempdir().unwrap();
    let upstream = TlsServer::start(upstream_certs.path(), "upstream.example.com");
    let upstream_ca = upstream_certs.path().join("server.pem");
    let backend = Backend::start("backend");
    let (mesh_min, own_min, plain) = (free_port(), free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let mesh = |extra_curve: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    tlsDefaults:\n      minProtocolVersion: TLSV1_3\n      ecdhCurves: [X25519, P-256, P-384, P-521{extra_curve}]\n      cipherSuites: [ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA256]\n"
        )
    };
    write(dir.path(), "mesh.yaml", &mesh(""));
    write(
        dir.path(),
        "gateway.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: backend, namespace: shop}}
spec:
  hosts: [backend.internal]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  endpoints: [{{address: 127.0.0.1, ports: {{http: {backend}}}}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: upstream, namespace: shop}}
spec:
  hosts: [upstream.internal]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports: [{{number: 443, name: http, protocol: HTTP}}]
  endpoints: [{{address: 127.0.0.1, ports: {{http: {upstream}}}}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: upstream, namespace: shop}}
spec:
  host: upstream.internal
  trafficPolicy: {{tls: {{mode: SIMPLE, sni: upstream.example.com, caCertificates: {ca}}}}}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: gw, namespace: shop}}
spec:
  selector: {{gateway.networking.k8s.io/gateway-name: gw}}
  servers:
  - port: {{number: {mesh_min}, name: mesh-min, protocol: HTTPS}}
    hosts: ["*"]
    tls: {{mode: SIMPLE, serverCertificate: {crt}, privateKey: {key}}}
  - port: {{number: {own_min}, name: own-min, protocol: HTTPS}}
    hosts: ["*"]
    tls: {{mode: SIMPLE, serverCertificate: {crt}, privateKey: {key}, minProtocolVersion: TLSV1_2}}
  - port: {{number: {plain}, name: plain, protocol: HTTP}}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: shop}}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{{uri: {{prefix: /upstream}}}}]
    route: [{{destination: {{host: upstream.internal, port: {{number: 443}}}}}}]
  - route: [{{destination: {{host: backend.internal, port: {{number: 80}}}}}}]
"#,
            backend = backend.port,
            upstream = upstream.port,
            ca = upstream_ca.display(),
            crt = crt.display(),
            key = key.display(),
        ),
    );
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let _gateway = crate::gateway_api::files_mode_gateway(&envoy_bin, &daemon, "shop");
    eventually(30, "HTTPS served at TLS 1.3", || {
        https_get(mesh_min, &certs.ca, "/a") == (200, "backend /a".into())
    });
    assert!(handshakes(mesh_min, "-tls1_3"));
    assert!(
        !handshakes(mesh_min, "-tls1_2"),
        "the mesh's minimum refuses TLS 1.2"
    );
    eventually(30, "the server's own minimum wins", || {
        handshakes(own_min, "-tls1_2")
    });
    // SIMPLE origination with the mesh's curves and ciphers reaches the TLS server.
    eventually(30, "TLS originated to the upstream", || {
        let (status, body) = request(plain, "any.example", "/upstream", &[]);
        status == 200 && body.contains("s_server")
    });
    // A curve Envoy does not know (or no longer accepts, though istiod lists it) is left out
    // rather than sent: Envoy would reject the listener and the cluster.
    write(
        dir.path(),
        "mesh.yaml",
        &mesh(", X25519MLKEM768, P-999, P-224, X25519Kyber768Draft00"),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        https_get(mesh_min, &certs.ca, "/b"),
        (200, "backend /b".into())
    );
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}
