//! A waypoint, as ambient runs it: a real Envoy takes the config Rudder sends a `waypoint` proxy
//! and serves HBONE between two "ztunnels" (Envoys that originate and terminate HBONE as ztunnel
//! does: mTLS with workload certificates from Rudder's SDS, HTTP/2 CONNECT to the destination's
//! port 15008). The waypoint and the workloads live in network namespaces of their own, so the
//! waypoint binds 15008 on every address as it does in a pod.

use crate::common::netns::{self, Pod};
use crate::common::peers::{Bootstrap, Envoy, envoy_binary, request_at};
use crate::common::{Daemon, eventually, write};
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

const WAYPOINT_IP: &str = "10.47.0.2";
const NODE_IP: &str = "10.47.0.3";
pub(crate) const XDS_PORT: u16 = 15010;
pub(crate) const SECURE_PORT: u16 = 15012;
const DOMAIN: &str = "istiod.istio-system.svc";
/// The VIP of `web`, the service bound to the waypoint.
const WEB_VIP: &str = "10.96.0.20";

fn mesh(extra: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: waypoint, namespace: shop, labels: {{gateway.istio.io/managed: istio.io-mesh-controller, istio.io/waypoint-for: all}}}}
spec:
  hosts: [waypoint.shop.svc.cluster.local]
  addresses: [10.96.0.100]
  ports: [{{number: 15008, name: mesh, protocol: TCP}}]
  resolution: STATIC
  endpoints: [{{address: {WAYPOINT_IP}, serviceAccount: waypoint}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: web, namespace: shop, labels: {{istio.io/use-waypoint: waypoint, istio.io/dataplane-mode: ambient, istio.io/ingress-use-waypoint: "true"}}}}
spec:
  hosts: [web.shop.svc.cluster.local]
  addresses: [{WEB_VIP}]
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  # One workload (one address) with two ports: it sends its own traffic through the waypoint.
  endpoints:
  - {{address: {NODE_IP}, ports: {{http: 8081}}, serviceAccount: web, labels: {{version: v1, istio.io/use-waypoint: waypoint}}}}
  - {{address: {NODE_IP}, ports: {{http: 8082}}, serviceAccount: web, labels: {{version: v2, istio.io/use-waypoint: waypoint}}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: web, namespace: shop}}
spec:
  host: web.shop.svc.cluster.local
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: shop}}
spec:
  hosts: [web.shop.svc.cluster.local]
  http:
  - match: [{{headers: {{x-version: {{exact: v2}}}}}}]
    route: [{{destination: {{host: web.shop.svc.cluster.local, subset: v2}}}}]
  - match: [{{uri: {{prefix: /teapot}}}}]
    fault: {{abort: {{httpStatus: 418, percentage: {{value: 100}}}}}}
    route: [{{destination: {{host: web.shop.svc.cluster.local, subset: v1}}}}]
  - match: [{{uri: {{prefix: /flaky}}}}]
    retries: {{attempts: 3, retryOn: 5xx}}
    route: [{{destination: {{host: web.shop.svc.cluster.local, subset: v1}}}}]
  - route:
    - {{destination: {{host: web.shop.svc.cluster.local, subset: v1}}, weight: 50}}
    - {{destination: {{host: web.shop.svc.cluster.local, subset: v2}}, weight: 50}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: web-deny-admin, namespace: shop}}
spec:
  targetRefs: [{{kind: ServiceEntry, group: networking.istio.io, name: web}}]
  action: DENY
  rules: [{{to: [{{operation: {{paths: [/admin]}}}}]}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: clients-only, namespace: shop}}
spec:
  targetRefs: [{{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}}]
  rules: [{{from: [{{source: {{principals: [cluster.local/ns/shop/sa/client, cluster.local/ns/shop/sa/ingress]}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: ingress, namespace: shop}}
spec:
  selector: {{istio: ingress}}
  servers: [{{port: {{number: 8080, name: http, protocol: HTTP}}, hosts: [web.example.com]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web-ingress, namespace: shop}}
spec:
  hosts: [web.example.com]
  gateways: [ingress]
  http: [{{route: [{{destination: {{host: web.shop.svc.cluster.local, port: {{number: 80}}}}}}]}}]
{extra}"#
    )
}

/// An HTTP/1.1 server answering `name path`, except that every other request to `/flaky` gets a
/// 503 (a retry reaches the next attempt).
pub(crate) fn flaky_backend(addr: &str, name: &'static str) {
    let listener = TcpListener::bind(addr).unwrap();
    static CALLS: AtomicU32 = AtomicU32::new(0);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                loop {
                    let Some((line, _headers)) =
                        crate::common::peers::read_request_head(&mut reader)
                    else {
                        return;
                    };
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    let fail = path.starts_with("/flaky")
                        && CALLS.fetch_add(1, Ordering::Relaxed).is_multiple_of(2);
                    let (status, body) = if fail {
                        ("503 Service Unavailable", "try again".to_string())
                    } else {
                        ("200 OK", format!("{name} {path}"))
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// The bootstrap extension istio-agent's bootstrap enables: internal listeners.
pub(crate) const INTERNAL_LISTENERS: &str = "
bootstrap_extensions:
- name: envoy.bootstrap.internal_listener
  typed_config: {\"@type\": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener}";

/// TLS of HBONE with the certificate of `identity` (files in `certs`) and the mesh root (flow
/// style); `extra` goes into the TLS context.
pub(crate) fn hbone_tls(direction: &str, certs: &Path, identity: &str, extra: &str) -> String {
    let file = |f: String| certs.join(f).display().to_string();
    format!(
        "{{name: envoy.transport_sockets.tls, typed_config: {{\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.{direction}TlsContext, {extra}common_tls_context: {{alpn_protocols: [h2], tls_params: {{tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3}}, tls_certificates: [{{certificate_chain: {{filename: {}}}, private_key: {{filename: {}}}}}], validation_context: {{trusted_ca: {{filename: {}}}}}}}}}}}",
        file(format!("{identity}.pem")),
        file(format!("{identity}.key")),
        file("root-cert.pem".into()),
    )
}

/// A static Envoy bootstrap: an admin on a free port, then `resources` (YAML under
/// `static_resources`).
pub(crate) fn static_bootstrap(resources: &str) -> String {
    format!(
        "admin:\n  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\nstatic_resources:\n{resources}"
    )
}

/// Workload certificates of `identities` (service accounts of `shop`) signed by the mesh's CA
/// in `ca_dir`, with the root, written into `certs`.
pub(crate) fn issue(ca_dir: &Path, certs: &Path, identities: &[&str]) {
    let read = |f: &str| std::fs::read_to_string(ca_dir.join(f)).unwrap();
    let ca = rudder::ca::Authority::from_pem(
        &read("ca-cert.pem"),
        &read("ca-key.pem"),
        "",
        "",
        std::time::Duration::from_secs(3600),
        std::time::Duration::from_secs(3600),
    )
    .unwrap();
    std::fs::write(certs.join("root-cert.pem"), read("root-cert.pem")).unwrap();
    for sa in identities {
        let (chain, key) = ca
            .issue_workload(&rudder::ca::Identity {
                trust_domain: "cluster.local".into(),
                namespace: "shop".into(),
                service_account: sa.to_string(),
            })
            .unwrap();
        std::fs::write(certs.join(format!("{sa}.pem")), chain.concat()).unwrap();
        std::fs::write(certs.join(format!("{sa}.key")), key).unwrap();
    }
}

/// The files of one scenario under `dir`: the mesh (`cfg/mesh.yaml`), the CA's tokens (`token:
/// ns/sa` lines) and the directory the mesh CA is made in; returns (config dir, tokens, CA dir).
pub(crate) fn scenario(dir: &Path, mesh: &str, tokens: &str) -> (PathBuf, PathBuf, PathBuf) {
    let cfg = dir.join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    write(&cfg, "mesh.yaml", mesh);
    let token_file = dir.join("tokens.yaml");
    std::fs::write(&token_file, tokens).unwrap();
    let ca_dir = dir.join("ca");
    std::fs::create_dir(&ca_dir).unwrap();
    (cfg, token_file, ca_dir)
}

/// The daemon of an ambient install in the calling thread's pod, switched on as the chart's
/// `profile: ambient` does it (`PILOT_ENABLE_AMBIENT=true` in its environment): xDS on every
/// address of `XDS_PORT`, its TLS port on `SECURE_PORT` with the mesh CA in `ca_dir` and the
/// tokens of `tokens`.
fn ambient_daemon(cfg: &Path, ca_dir: &Path, tokens: &Path) -> Daemon {
    ambient_daemon_env(cfg, ca_dir, tokens, &[])
}

/// [`ambient_daemon`] with more of istiod's switches in its environment.
pub(crate) fn ambient_daemon_env(
    cfg: &Path,
    ca_dir: &Path,
    tokens: &Path,
    env: &[(&str, Option<&str>)],
) -> Daemon {
    let secure = format!("0.0.0.0:{SECURE_PORT}");
    Daemon::spawn_env(
        &format!("0.0.0.0:{XDS_PORT}"),
        &[
            "--config-source",
            "files",
            "--config-dir",
            cfg.to_str().unwrap(),
            "--secure-grpc-addr",
            &secure,
            "--ca-dir",
            ca_dir.to_str().unwrap(),
            "--ca-token-file",
            tokens.to_str().unwrap(),
        ],
        &[&[("PILOT_ENABLE_AMBIENT", Some("true"))], env].concat(),
    )
}

/// A proxy of namespace `shop` fed over TLS by the daemon at `istiod` (verified with the mesh
/// `root`), with istio-agent's internal-listener bootstrap extension.
pub(crate) fn mesh_proxy(envoy: &Path, istiod: [u8; 4], root: &Path, proxy: Bootstrap) -> Envoy {
    Envoy::boot(
        envoy,
        SocketAddr::from((istiod, SECURE_PORT)),
        &Bootstrap {
            namespace: "shop",
            tls: Some((root, DOMAIN)),
            top_extra: INTERNAL_LISTENERS,
            ..proxy
        },
    )
}

/// A source ztunnel: what the client sends to `listen` goes to the waypoint in an HBONE tunnel
/// whose destination is `destination` (the service's VIP and port, or a workload's address),
/// with the certificate of `identity`.
fn source_ztunnel(listen: u16, certs: &Path, identity: &str, destination: &str) -> String {
    source_ztunnel_to(WAYPOINT_IP, listen, certs, identity, destination)
}

/// [`source_ztunnel`] with the tunnels going to `peer`'s port 15008.
pub(crate) fn source_ztunnel_to(
    peer: &str,
    listen: u16,
    certs: &Path,
    identity: &str,
    destination: &str,
) -> String {
    static_bootstrap(&format!(
        r#"  clusters:
  - name: waypoint
    type: STATIC
    connect_timeout: 2s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{allow_connect: true}}}}
    load_assignment:
      cluster_name: waypoint
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {peer}, port_value: 15008}}}}}}}}]}}]
    transport_socket: {tls}
  listeners:
  - name: outbound
    address: {{socket_address: {{address: 127.0.0.1, port_value: {listen}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: hbone
          cluster: waypoint
          tunneling_config: {{hostname: "{destination}"}}
"#,
        tls = hbone_tls("Upstream", certs, identity, ""),
    ))
}

/// The destination ztunnel: HBONE on `NODE_IP:15008` (client certificates of the mesh required),
/// each tunnel's `:authority` (`ip:port`) reaching that application port (port 9090, which no
/// application listens on, reaching 8081: what only a tunnel can reach).
fn destination_ztunnel(certs: &Path) -> String {
    let app = |port: u16| {
        format!(
            r#"  - name: app-{port}
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: app-{port}
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {NODE_IP}, port_value: {port}}}}}}}}}]}}]
"#
        )
    };
    let vhost_to = |port: u16, app: u16| {
        format!(
            r#"              - name: port-{port}
                domains: ["{NODE_IP}:{port}"]
                routes:
                - match: {{connect_matcher: {{}}}}
                  route: {{cluster: app-{app}, upgrade_configs: [{{upgrade_type: CONNECT, connect_config: {{}}}}]}}
"#
        )
    };
    let vhost = |port: u16| vhost_to(port, port);
    static_bootstrap(&format!(
        r#"  clusters:
{}{}  listeners:
  - name: hbone
    address: {{socket_address: {{address: {NODE_IP}, port_value: 15008}}}}
    filter_chains:
    - transport_socket: {tls}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: hbone
          http2_protocol_options: {{allow_connect: true}}
          upgrade_configs: [{{upgrade_type: CONNECT}}]
          route_config:
            virtual_hosts:
{}{}{}          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
"#,
        app(8081),
        app(8082),
        vhost(8081),
        vhost(8082),
        // Port 9090 of the node has no listener: only a tunnel reaches it (`direct`).
        vhost_to(9090, 8081),
        tls = hbone_tls(
            "Downstream",
            certs,
            "web",
            "require_client_certificate: true, "
        ),
    ))
}

/// Requests through the waypoint from two sources (an allowed client and an intruder), with the
/// waypoint's routing, faults, retries and L7 policy applied.
#[test]
fn a_waypoint_routes_and_authorizes_hbone_traffic_between_ztunnels() {
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let waypoint_pod = Pod::new(WAYPOINT_IP);
    let node = Pod::new(NODE_IP);
    netns::link(&waypoint_pod, &node);
    let dir = tempfile::tempdir().unwrap();
    // `direct`: an ambient workload without a waypoint, which a sidecar reaches over HBONE.
    let (cfg, tokens, ca_dir) = scenario(
        dir.path(),
        &mesh(&format!(
            r#"---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: direct, namespace: shop, labels: {{istio.io/dataplane-mode: ambient}}}}
spec:
  hosts: [direct.shop.svc.cluster.local]
  addresses: [10.96.0.30]
  ports: [{{number: 8090, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {NODE_IP}, ports: {{http: 9090}}, serviceAccount: web}}]
"#
        )),
        "waypoint-token: shop/waypoint\nclient-token: shop/client\nintruder-token: shop/intruder\nweb-token: shop/web\ningress-token: shop/ingress\n",
    );
    let root = ca_dir.join("root-cert.pem");
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (envoy, root, cfg, ca_dir, tokens) = (&envoy, &root, &cfg, &ca_dir, &tokens);
    let (waypoint_pod, node) = (&waypoint_pod, &node);
    std::thread::scope(|s| {
        s.spawn(move || {
            waypoint_pod.enter();
            let _daemon = ambient_daemon(cfg, ca_dir, tokens);
            up_tx.send(()).unwrap();
            let _waypoint = mesh_proxy(
                envoy,
                [127, 0, 0, 1],
                root,
                Bootstrap {
                    node_type: "waypoint",
                    pod: "waypoint-0",
                    labels: "gateway.networking.k8s.io/gateway-name: waypoint",
                    metadata: "",
                    ip: WAYPOINT_IP,
                    token: Some("waypoint-token"),
                    ..Bootstrap::default()
                },
            );
            // An ingress gateway sends `web` (labelled istio.io/ingress-use-waypoint) through
            // the waypoint: its routes and policies apply to what enters the mesh.
            let _gateway = mesh_proxy(
                envoy,
                [127, 0, 0, 1],
                root,
                Bootstrap {
                    node_type: "router",
                    pod: "ingress-0",
                    labels: "istio: ingress",
                    metadata: "",
                    ip: WAYPOINT_IP,
                    token: Some("ingress-token"),
                    ..Bootstrap::default()
                },
            );
            let gateway = SocketAddr::from(([127, 0, 0, 1], 8080));
            let host = "web.example.com";
            let mut last = (0, String::new());
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                eventually(40, "a request from the ingress gateway", || {
                    last = request_at(gateway, host, "/in", &[("x-version", "v2")]);
                    last == (200, "v2 /in".into())
                });
                assert_eq!(
                    request_at(gateway, host, "/admin", &[]).0,
                    403,
                    "the waypoint's DENY policy applies to ingress traffic"
                );
                assert_eq!(
                    request_at(gateway, host, "/teapot", &[]).0,
                    418,
                    "and its fault"
                );
            }));
            let _ = done_rx.recv();
            if let Err(e) = outcome {
                eprintln!("last answer from the gateway: {last:?}");
                std::panic::resume_unwind(e);
            }
        });
        s.spawn(move || {
            node.enter();
            up_rx.recv().unwrap();
            flaky_backend(&format!("{NODE_IP}:8081"), "v1");
            flaky_backend(&format!("{NODE_IP}:8082"), "v2");
            let certs = tempfile::tempdir().unwrap();
            // The CA writes its key, its certificate and the root in turn: the root last.
            eventually(20, "the mesh CA", || ca_dir.join("root-cert.pem").exists());
            issue(ca_dir, certs.path(), &["web", "client", "intruder"]);
            let (client_port, intruder_port) = (18080, 18081);
            let _destination = Envoy::run_static(envoy, &destination_ztunnel(certs.path()));
            let service = format!("{WEB_VIP}:80");
            let workload = format!("{NODE_IP}:8081");
            let _client = Envoy::run_static(
                envoy,
                &source_ztunnel(client_port, certs.path(), "client", &service),
            );
            let _intruder = Envoy::run_static(
                envoy,
                &source_ztunnel(intruder_port, certs.path(), "intruder", &service),
            );
            // The v1 workload sends its own traffic through the waypoint too.
            let (to_workload, intruder_to_workload) = (18082, 18083);
            let _client_direct = Envoy::run_static(
                envoy,
                &source_ztunnel(to_workload, certs.path(), "client", &workload),
            );
            let _intruder_direct = Envoy::run_static(
                envoy,
                &source_ztunnel(intruder_to_workload, certs.path(), "intruder", &workload),
            );
            // A sidecar (no capture: its outbound listeners on loopback) reaching `direct`, an
            // ambient workload: through its own connect_originate, HBONE to the node's ztunnel.
            let _sidecar = mesh_proxy(
                envoy,
                [10, 47, 0, 2],
                root,
                Bootstrap {
                    node_type: "sidecar",
                    pod: "client-0",
                    labels: "app: client",
                    metadata: "INTERCEPTION_MODE: NONE, ",
                    ip: NODE_IP,
                    token: Some("client-token"),
                    ..Bootstrap::default()
                },
            );
            let web = "web.shop.svc.cluster.local";
            let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
            let mut last = (0, String::new());
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                eventually(40, "a request through the waypoint", || {
                    last = request_at(at(client_port), web, "/hello", &[("x-version", "v2")]);
                    last == (200, "v2 /hello".into())
                });
                // The weight split: both versions answer.
                let mut seen = std::collections::BTreeSet::new();
                for _ in 0..40 {
                    seen.insert(request_at(at(client_port), web, "/split", &[]).1);
                }
                assert_eq!(
                    seen,
                    ["v1 /split".to_string(), "v2 /split".to_string()].into(),
                    "a 50/50 split reaches both subsets"
                );
                assert_eq!(
                    request_at(at(client_port), web, "/teapot", &[]).0,
                    418,
                    "the fault is injected at the waypoint"
                );
                for _ in 0..4 {
                    assert_eq!(
                        request_at(at(client_port), web, "/flaky", &[]),
                        (200, "v1 /flaky".into()),
                        "the retry policy retries the backend's 503"
                    );
                }
                assert_eq!(
                    request_at(at(client_port), web, "/admin", &[]).0,
                    403,
                    "the service's DENY policy"
                );
                assert_eq!(
                    request_at(at(intruder_port), web, "/hello", &[]).0,
                    403,
                    "the waypoint's ALLOW policy names the client's identity, not the intruder's"
                );
                // Workload-addressed traffic: the waypoint's own policy applies, the service's
                // routes and policies do not.
                eventually(20, "a request to the workload through the waypoint", || {
                    last = request_at(at(to_workload), web, "/admin", &[("x-version", "v2")]);
                    last == (200, "v1 /admin".into())
                });
                assert_eq!(
                    request_at(at(intruder_to_workload), web, "/hello", &[]).0,
                    403,
                    "the waypoint's ALLOW policy applies to workload traffic"
                );
                eventually(30, "a sidecar's request over HBONE", || {
                    last = request_at(at(8090), "direct.shop.svc.cluster.local", "/side", &[]);
                    last == (200, "v1 /side".into())
                });
            }));
            let _ = done_tx.send(());
            if let Err(e) = outcome {
                eprintln!("last answer: {last:?}");
                std::panic::resume_unwind(e);
            }
        });
    });
}

/// A sidecar whose metadata says ENABLE_HBONE (ambient on) takes HBONE tunnels from ztunnel on
/// 15008 under STRICT mTLS, with its policies applied to the tunnel's peer; a tunnel to an
/// address that is not the sidecar's (its loopback) reaches nothing.
#[test]
fn a_sidecar_with_enable_hbone_takes_tunnels_from_ztunnel() {
    const NODE: &str = "10.48.0.2";
    const SIDECAR: &str = "10.48.0.3";
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let node = Pod::new(NODE);
    let app_pod = Pod::new(SIDECAR);
    netns::link(&node, &app_pod);
    let dir = tempfile::tempdir().unwrap();
    let (cfg, tokens, ca_dir) = scenario(
        dir.path(),
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: app, namespace: shop}}
spec:
  hosts: [app.shop.svc.cluster.local]
  addresses: [10.96.0.40]
  ports: [{{number: 8080, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {SIDECAR}, serviceAccount: app, labels: {{app: app, security.istio.io/tlsMode: istio}}}}]
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: default, namespace: istio-system}}
spec: {{mtls: {{mode: STRICT}}}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: clients-only, namespace: shop}}
spec:
  selector: {{matchLabels: {{app: app}}}}
  rules: [{{from: [{{source: {{principals: [cluster.local/ns/shop/sa/client]}}}}]}}]
"#
        ),
        "app-token: shop/app\n",
    );
    let root = ca_dir.join("root-cert.pem");
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (envoy, root, cfg, ca_dir, tokens) = (&envoy, &root, &cfg, &ca_dir, &tokens);
    let (node, app_pod) = (&node, &app_pod);
    std::thread::scope(|s| {
        s.spawn(move || {
            app_pod.enter();
            flaky_backend(&format!("{SIDECAR}:8080"), "app");
            flaky_backend("127.0.0.1:8081", "local-only");
            up_rx.recv().unwrap();
            let _sidecar = mesh_proxy(
                envoy,
                [10, 48, 0, 2],
                root,
                Bootstrap {
                    node_type: "sidecar",
                    pod: "app-0",
                    labels: "app: app",
                    metadata: "ENABLE_HBONE: 'true', ",
                    ip: SIDECAR,
                    token: Some("app-token"),
                    ..Bootstrap::default()
                },
            );
            let _ = done_rx.recv();
        });
        s.spawn(move || {
            node.enter();
            let _daemon = ambient_daemon(cfg, ca_dir, tokens);
            up_tx.send(()).unwrap();
            let certs = tempfile::tempdir().unwrap();
            // The CA writes its key, its certificate and the root in turn: the root last.
            eventually(20, "the mesh CA", || ca_dir.join("root-cert.pem").exists());
            issue(ca_dir, certs.path(), &["client", "intruder"]);
            let to_app = format!("{SIDECAR}:8080");
            let tunnel = |listen: u16, identity: &str, destination: &str| {
                Envoy::run_static(
                    envoy,
                    &source_ztunnel_to(SIDECAR, listen, certs.path(), identity, destination),
                )
            };
            let _client = tunnel(18090, "client", &to_app);
            let _intruder = tunnel(18091, "intruder", &to_app);
            let _loopback = tunnel(18092, "client", "127.0.0.1:8081");
            let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
            let host = "app.shop.svc.cluster.local";
            let mut last = (0, String::new());
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                eventually(40, "a request over HBONE to the sidecar", || {
                    last = request_at(at(18090), host, "/hello", &[]);
                    last == (200, "app /hello".into())
                });
                assert_eq!(
                    request_at(at(18091), host, "/hello", &[]).0,
                    403,
                    "the sidecar's ALLOW policy names the tunnel peer's identity"
                );
                assert_ne!(
                    request_at(at(18092), host, "/hello", &[]).0,
                    200,
                    "a tunnel reaches only the sidecar's own addresses"
                );
            }));
            let _ = done_tx.send(());
            if let Err(e) = outcome {
                eprintln!("last answer: {last:?}");
                std::panic::resume_unwind(e);
            }
        });
    });
}
