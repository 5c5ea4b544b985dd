//! Ambient across networks, the data path: a real Envoy takes the config Rudder sends an ambient
//! east-west gateway (a `waypoint` proxy of an `istio-east-west` Gateway, with
//! AMBIENT_ENABLE_MULTI_NETWORK) and carries double HBONE as ztunnel sends it to another network:
//! the outer tunnel ends at the gateway, which hands the inner one, still encrypted, to the
//! destination's ztunnel. The "ztunnels" are Envoys speaking HBONE as ztunnel does (the outer and
//! inner `:authority` both `<service hostname>:<port>`). Files mode names the gateway's network
//! through `meshNetworks`.

use crate::common::eventually;
use crate::common::netns::{self, Pod};
use crate::common::peers::Envoy;
use crate::common::peers::{Bootstrap, envoy_binary, request_at};
use crate::waypoint::{
    INTERNAL_LISTENERS, ambient_daemon_env, flaky_backend, hbone_tls, issue, mesh_proxy, scenario,
    source_ztunnel_to, static_bootstrap,
};
use std::net::SocketAddr;
use std::path::Path;

const GATEWAY_IP: &str = "10.49.0.2";
const NODE_IP: &str = "10.49.0.3";
const WEB: &str = "web.shop.svc.cluster.local:80";

/// Network `west` (this control plane's, as `meshNetworks` names the cluster): `web` global and
/// in the ambient mesh, its workload at the node; `local` in the mesh but not global.
fn mesh() -> String {
    format!(
        r#"{}---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: web, namespace: shop, labels: {{istio.io/global: "true", istio.io/dataplane-mode: ambient}}}}
spec:
  hosts: [web.shop.svc.cluster.local]
  addresses: [10.96.0.20]
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {NODE_IP}, ports: {{http: 8081}}, serviceAccount: web, network: west}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: local, namespace: shop, labels: {{istio.io/dataplane-mode: ambient}}}}
spec:
  hosts: [local.shop.svc.cluster.local]
  addresses: [10.96.0.21]
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {NODE_IP}, ports: {{http: 8081}}, serviceAccount: web, network: west}}]
"#,
        mesh_config("west")
    )
}

/// The `istio` ConfigMap of a control plane of `network` (its cluster's, by `meshNetworks`), with
/// services labelled `istio.io/global` shared across networks.
fn mesh_config(network: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: istio, namespace: istio-system}}
data:
  mesh: |
    serviceScopeConfigs:
    - servicesSelector: {{matchLabels: {{istio.io/global: "true"}}}}
      scope: GLOBAL
  meshNetworks: |
    networks:
      {network}: {{endpoints: [{{fromRegistry: Kubernetes}}], gateways: []}}
"#
    )
}

const H2_CONNECT: &str = r#"typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {allow_connect: true}}"#;

/// A ztunnel of another network sending to `authority` through the gateway: what the client
/// sends to `listen` goes in an inner HBONE tunnel (TLS with `identity`'s certificate, end to
/// end to the destination) inside an outer one to the gateway's 15008, both to `authority`.
fn double_hbone_client(listen: u16, certs: &Path, identity: &str, authority: &str) -> String {
    double_hbone_client_to(GATEWAY_IP, listen, certs, identity, authority)
}

/// [`double_hbone_client`] through the gateway at `gateway`.
fn double_hbone_client_to(
    gateway: &str,
    listen: u16,
    certs: &Path,
    identity: &str,
    authority: &str,
) -> String {
    let tls = hbone_tls("Upstream", certs, identity, "");
    let bootstrap = static_bootstrap(&format!(
        r#"  clusters:
  - name: inner
    type: STATIC
    connect_timeout: 2s
    {H2_CONNECT}
    load_assignment:
      cluster_name: inner
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{envoy_internal_address: {{server_listener_name: outer}}}}}}}}]}}]
    transport_socket: {tls}
  - name: outer
    type: STATIC
    connect_timeout: 2s
    {H2_CONNECT}
    load_assignment:
      cluster_name: outer
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {gateway}, port_value: 15008}}}}}}}}]}}]
    transport_socket: {tls}
  listeners:
  - name: app
    address: {{socket_address: {{address: 127.0.0.1, port_value: {listen}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: inner
          cluster: inner
          tunneling_config: {{hostname: "{authority}"}}
  - name: outer
    internal_listener: {{}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: outer
          cluster: outer
          tunneling_config: {{hostname: "{authority}"}}
"#
    ));
    format!("{bootstrap}{INTERNAL_LISTENERS}\n")
}

/// The destination's ztunnel: HBONE on the node's 15008 (mesh client certificates required),
/// a tunnel to `web`'s hostname and port reaching its workload's port 8081.
fn destination_ztunnel(certs: &Path) -> String {
    destination_ztunnel_at(NODE_IP, NODE_IP, &[WEB], certs)
}

/// [`destination_ztunnel`] at `ip`, for tunnels to `authorities`, the application at `app`:8081.
fn destination_ztunnel_at(ip: &str, app: &str, authorities: &[&str], certs: &Path) -> String {
    let domains = authorities
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    static_bootstrap(&format!(
        r#"  clusters:
  - name: app
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: app
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {app}, port_value: 8081}}}}}}}}]}}]
  listeners:
  - name: hbone
    address: {{socket_address: {{address: {ip}, port_value: 15008}}}}
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
            - name: web
              domains: [{domains}]
              routes:
              - match: {{connect_matcher: {{}}}}
                route: {{cluster: app, upgrade_configs: [{{upgrade_type: CONNECT, connect_config: {{}}}}]}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
"#,
        tls = hbone_tls(
            "Downstream",
            certs,
            "web",
            "require_client_certificate: true, "
        ),
    ))
}

#[test]
fn an_east_west_gateway_carries_double_hbone_to_the_destinations_ztunnel() {
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let gateway_pod = Pod::new(GATEWAY_IP);
    let node = Pod::new(NODE_IP);
    netns::link(&gateway_pod, &node);
    let dir = tempfile::tempdir().unwrap();
    let (cfg, tokens, ca_dir) = scenario(dir.path(), &mesh(), "eastwest-token: shop/eastwest\n");
    let root = ca_dir.join("root-cert.pem");
    let (envoy, root, cfg, ca_dir, tokens) = (&envoy, &root, &cfg, &ca_dir, &tokens);
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            node.enter();
            up_rx.recv().unwrap();
            flaky_backend(&format!("{NODE_IP}:8081"), "web");
            let certs = tempfile::tempdir().unwrap();
            // The CA writes its key, its certificate and the root in turn: the root last.
            eventually(20, "the mesh CA", || ca_dir.join("root-cert.pem").exists());
            issue(ca_dir, certs.path(), &["web"]);
            let _destination = Envoy::run_static(envoy, &destination_ztunnel(certs.path()));
            let _ = done_rx.recv();
        });
        gateway_pod.run(move || {
            let _daemon = ambient_daemon_env(
                cfg,
                ca_dir,
                tokens,
                &[("AMBIENT_ENABLE_MULTI_NETWORK", Some("true"))],
            );
            up_tx.send(()).unwrap();
            let _gateway = mesh_proxy(
                envoy,
                [127, 0, 0, 1],
                root,
                Bootstrap {
                    node_type: "waypoint",
                    pod: "eastwest-0",
                    labels: "gateway.istio.io/managed: istio.io-eastwest-controller, gateway.networking.k8s.io/gateway-name: eastwest",
                    metadata: "NETWORK: west, ",
                    ip: GATEWAY_IP,
                    token: Some("eastwest-token"),
                    ..Bootstrap::default()
                },
            );
            let certs = tempfile::tempdir().unwrap();
            // The CA writes its key, its certificate and the root in turn: the root last.
            eventually(20, "the mesh CA", || ca_dir.join("root-cert.pem").exists());
            issue(ca_dir, certs.path(), &["client"]);
            let (to_web, to_local) = (18090, 18091);
            let _client = Envoy::run_static(
                envoy,
                &double_hbone_client(to_web, certs.path(), "client", WEB),
            );
            let _not_shared = Envoy::run_static(
                envoy,
                &double_hbone_client(
                    to_local,
                    certs.path(),
                    "client",
                    "local.shop.svc.cluster.local:80",
                ),
            );
            let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
            let mut last = (0, String::new());
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                eventually(40, "a request across the east-west gateway", || {
                    last = request_at(at(to_web), "web.shop.svc.cluster.local", "/hello", &[]);
                    last == (200, "web /hello".into())
                });
                let refused = request_at(at(to_local), "local.shop.svc.cluster.local", "/", &[]);
                assert_ne!(
                    refused.0, 200,
                    "a service that is not global is not reachable from another network"
                );
            }));
            done_tx.send(()).unwrap();
            if let Err(e) = outcome {
                eprintln!("last answer: {last:?}");
                std::panic::resume_unwind(e);
            }
        });
    });
}

/// Two networks, each with its own control plane (multi-primary), sharing the mesh CA: `far` is
/// global and bound to waypoint `waypoint` in both, `plain` global without a waypoint; their
/// workload is in `east`. A client in `west` sends to `far`'s VIP through west's waypoint, which
/// applies its routes and sends double HBONE through east's gateway (an `istio-remote` Gateway in
/// west's config) to the workload's ztunnel; west's ingress gateway, with
/// AMBIENT_ENABLE_MULTI_NETWORK_INGRESS, sends `plain` the same way. A client that skips `far`'s
/// waypoint and tunnels to the east-west gateway itself is refused there.
#[test]
fn a_waypoint_and_an_ingress_gateway_reach_a_workload_of_another_network() {
    const WEST_IP: &str = "10.50.0.2";
    const EAST_IP: &str = "10.50.0.3";
    const WORKLOAD_IP: &str = "10.50.0.5";
    const FAR: &str = "far.shop.svc.cluster.local:80";
    // A real ztunnel of west, when one is built here (RUDDER_ZTUNNEL; CI cannot fetch it).
    const CLIENT_IP: &str = "10.51.0.2";
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let west = Pod::new(WEST_IP);
    let east = Pod::new(EAST_IP);
    netns::link(&west, &east);
    // The workload's node: another address of east's namespace.
    let status = std::process::Command::new("ip")
        .args([
            "-n",
            &east.name,
            "addr",
            "add",
            &format!("{WORKLOAD_IP}/32"),
            "dev",
            "lo",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let ztunnel = real_ztunnel();
    let client = ztunnel
        .as_ref()
        .map(|_| client_namespace(&west, &east, CLIENT_IP));
    let config = |network: &str, extra: &str| {
        format!(
            r#"{}---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: waypoint, namespace: shop, labels: {{gateway.istio.io/managed: istio.io-mesh-controller}}}}
spec:
  hosts: [waypoint.shop.svc.cluster.local]
  addresses: [10.96.0.100]
  ports: [{{number: 15008, name: mesh, protocol: TCP}}]
  resolution: STATIC
  endpoints: [{{address: {WEST_IP}, serviceAccount: waypoint, network: west}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: far, namespace: shop, labels: {{istio.io/global: "true", istio.io/use-waypoint: waypoint, istio.io/dataplane-mode: ambient}}}}
spec:
  hosts: [far.shop.svc.cluster.local]
  addresses: [10.96.0.40]
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {WORKLOAD_IP}, ports: {{http: 8081}}, serviceAccount: web, network: east}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: plain, namespace: shop, labels: {{istio.io/global: "true", istio.io/dataplane-mode: ambient}}}}
spec:
  hosts: [plain.shop.svc.cluster.local]
  addresses: [10.96.0.41]
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: {WORKLOAD_IP}, ports: {{http: 8081}}, serviceAccount: web, network: east}}]
{extra}"#,
            mesh_config(network)
        )
    };
    let west_dir = tempfile::tempdir().unwrap();
    let east_dir = tempfile::tempdir().unwrap();
    let remote_gateway = format!(
        r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: east-gw, namespace: shop, labels: {{topology.istio.io/network: east}}, annotations: {{gateway.istio.io/service-account: eastwest}}}}
spec:
  gatewayClassName: istio-remote
  addresses: [{{type: IPAddress, value: {EAST_IP}}}]
  listeners: [{{name: mesh, port: 15008, protocol: HBONE}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: ingress, namespace: shop}}
spec:
  selector: {{istio: ingressgateway}}
  servers: [{{port: {{number: 8080, name: http, protocol: HTTP}}, hosts: [plain.example.com]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: plain, namespace: shop}}
spec:
  hosts: [plain.example.com]
  gateways: [ingress]
  http: [{{route: [{{destination: {{host: plain.shop.svc.cluster.local, port: {{number: 80}}}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: near, namespace: shop, labels: {{istio.io/dataplane-mode: ambient}}}}
spec:
  hosts: [near.shop.svc.cluster.local]
  addresses: [10.96.0.42]
  ports: [{{number: 80, name: http, protocol: HTTP, targetPort: 8090}}]
  resolution: STATIC
  workloadSelector: {{labels: {{app: near}}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: client-0, namespace: shop}}
spec: {{address: {CLIENT_IP}, serviceAccount: client, labels: {{app: near, istio.io/dataplane-mode: ambient}}}}
"#
    );
    let (west_cfg, west_tokens, ca_dir) = scenario(
        west_dir.path(),
        &config("west", &remote_gateway),
        "waypoint-token: shop/waypoint\ningress-token: shop/ingress\nclient-token: shop/client\n",
    );
    let (east_cfg, east_tokens, _) = scenario(
        east_dir.path(),
        &config("east", ""),
        "eastwest-token: shop/eastwest\n",
    );
    let root = ca_dir.join("root-cert.pem");
    let multi = [("AMBIENT_ENABLE_MULTI_NETWORK", Some("true"))];
    let (envoy, root, ca_dir) = (&envoy, &root, &ca_dir);
    let (west_cfg, west_tokens, east_cfg, east_tokens) =
        (&west_cfg, &west_tokens, &east_cfg, &east_tokens);
    let (ca_tx, ca_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            east.enter();
            // One mesh CA for both control planes, as Istio's plugged-in CA certificates give.
            ca_rx.recv().unwrap();
            let _daemon = ambient_daemon_env(east_cfg, ca_dir, east_tokens, &multi);
            // Only the workload's ztunnel reaches it: nothing in west can connect to it directly.
            flaky_backend("127.0.0.1:8081", "far");
            let certs = tempfile::tempdir().unwrap();
            issue(ca_dir, certs.path(), &["web"]);
            let _destination = Envoy::run_static(
                envoy,
                &destination_ztunnel_at(
                    WORKLOAD_IP,
                    "127.0.0.1",
                    &[FAR, "plain.shop.svc.cluster.local:80"],
                    certs.path(),
                ),
            );
            let _gateway = mesh_proxy(
                envoy,
                [127, 0, 0, 1],
                root,
                Bootstrap {
                    node_type: "waypoint",
                    pod: "eastwest-0",
                    labels: "gateway.istio.io/managed: istio.io-eastwest-controller",
                    metadata: "NETWORK: east, ",
                    ip: EAST_IP,
                    token: Some("eastwest-token"),
                    ..Bootstrap::default()
                },
            );
            let _ = done_rx.recv();
        });
        west.run(move || {
            let _daemon = ambient_daemon_env(
                west_cfg,
                ca_dir,
                west_tokens,
                &[
                    multi[0],
                    ("AMBIENT_ENABLE_MULTI_NETWORK_INGRESS", Some("true")),
                ],
            );
            // The CA writes its key, its certificate and the root in turn: the root last.
            eventually(20, "the mesh CA", || ca_dir.join("root-cert.pem").exists());
            ca_tx.send(()).unwrap();
            let _waypoint = mesh_proxy(
                envoy,
                [127, 0, 0, 1],
                root,
                Bootstrap {
                    node_type: "waypoint",
                    pod: "waypoint-0",
                    labels: "gateway.networking.k8s.io/gateway-name: waypoint",
                    metadata: "NETWORK: west, ",
                    ip: WEST_IP,
                    token: Some("waypoint-token"),
                    ..Bootstrap::default()
                },
            );
            let _ingress = mesh_proxy(
                envoy,
                [127, 0, 0, 1],
                root,
                Bootstrap {
                    node_type: "router",
                    pod: "ingress-0",
                    labels: "istio: ingressgateway",
                    metadata: "NETWORK: west, ",
                    ip: WEST_IP,
                    token: Some("ingress-token"),
                    ..Bootstrap::default()
                },
            );
            let certs = tempfile::tempdir().unwrap();
            issue(ca_dir, certs.path(), &["client"]);
            let (through_waypoint, skipping) = (18092, 18093);
            let _client = Envoy::run_static(
                envoy,
                &source_ztunnel_to(
                    WEST_IP,
                    through_waypoint,
                    certs.path(),
                    "client",
                    "10.96.0.40:80",
                ),
            );
            let _skipping = Envoy::run_static(
                envoy,
                &double_hbone_client_to(EAST_IP, skipping, certs.path(), "client", FAR),
            );
            let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
            let mut last = (0, String::new());
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                eventually(
                    40,
                    "a request through the waypoint into the far network",
                    || {
                        last = request_at(
                            at(through_waypoint),
                            "far.shop.svc.cluster.local",
                            "/far",
                            &[],
                        );
                        last == (200, "far /far".into())
                    },
                );
                eventually(
                    40,
                    "a request through the ingress gateway into the far network",
                    || {
                        last = request_at(at(8080), "plain.example.com", "/in", &[]);
                        last == (200, "far /in".into())
                    },
                );
                let refused = request_at(at(skipping), "far.shop.svc.cluster.local", "/", &[]);
                assert_ne!(
                    refused.0, 200,
                    "a tunnel that skipped the service's waypoint is refused at the gateway"
                );
                if let (Some(bin), Some(client)) = (&ztunnel, &client) {
                    client.run(|| {
                        let _ztunnel = RealZtunnel::start(bin, WEST_IP, root, "client-token");
                        // `near`: a service of its own network whose workload is this one, so
                        // ztunnel's HBONE goes to its own inbound (Rudder's certificate and
                        // policies on both ends) and on to the application.
                        flaky_backend(&format!("{CLIENT_IP}:8090"), "near");
                        eventually(60, "the real ztunnel reaching `near` over HBONE", || {
                            last = socks5_get([10, 96, 0, 42], 80, "near.shop.svc.cluster.local")
                                .unwrap_or_default();
                            last.0 == 200 && last.1.starts_with("near /")
                        });
                        eventually(
                            60,
                            "the real ztunnel reaching `plain` across networks",
                            || {
                                last =
                                    socks5_get([10, 96, 0, 41], 80, "plain.shop.svc.cluster.local")
                                        .unwrap_or_default();
                                last.0 == 200 && last.1.starts_with("far /")
                            },
                        );
                        // `far` through its waypoint: ztunnel's HBONE to the waypoint, the
                        // waypoint's double HBONE on.
                        eventually(
                            60,
                            "the real ztunnel reaching `far` through its waypoint",
                            || {
                                last =
                                    socks5_get([10, 96, 0, 40], 80, "far.shop.svc.cluster.local")
                                        .unwrap_or_default();
                                last.0 == 200 && last.1.starts_with("far /")
                            },
                        );
                    });
                }
            }));
            done_tx.send(()).unwrap();
            if let Err(e) = outcome {
                eprintln!("last answer: {last:?}");
                std::panic::resume_unwind(e);
            }
        });
    });
}

/// A ztunnel built from its repository (`RUDDER_ZTUNNEL`, the binary); `None` (the step skipped,
/// said so) where there is none: CI cannot fetch it.
fn real_ztunnel() -> Option<std::path::PathBuf> {
    let bin = std::env::var_os("RUDDER_ZTUNNEL")
        .map(std::path::PathBuf::from)
        .filter(|p| p.exists());
    if bin.is_none() {
        eprintln!("skipping the real ztunnel step: RUDDER_ZTUNNEL names no ztunnel binary");
    }
    bin
}

/// A third namespace at `ip` behind `west` (which forwards for it), so a ztunnel there has its
/// ports to itself; `east` routes back to it through `west`.
fn client_namespace(west: &Pod, east: &Pod, ip: &str) -> Pod {
    let client = Pod::new(ip);
    let run = |args: &[&str]| {
        let status = std::process::Command::new("ip")
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "ip {args:?}");
    };
    let (a, b) = (
        format!("zw{}", std::process::id() % 100_000),
        format!("zc{}", std::process::id() % 100_000),
    );
    run(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
    run(&["link", "set", &a, "netns", &west.name]);
    run(&["link", "set", &b, "netns", &client.name]);
    run(&["-n", &west.name, "addr", "add", "10.51.0.1/24", "dev", &a]);
    run(&["-n", &west.name, "link", "set", &a, "up"]);
    run(&[
        "-n",
        &client.name,
        "addr",
        "add",
        &format!("{ip}/24"),
        "dev",
        &b,
    ]);
    run(&["-n", &client.name, "link", "set", &b, "up"]);
    run(&[
        "-n",
        &client.name,
        "route",
        "add",
        "default",
        "via",
        "10.51.0.1",
    ]);
    run(&[
        "-n",
        &east.name,
        "route",
        "add",
        "10.51.0.0/24",
        "via",
        &west.ip,
    ]);
    let forward = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &west.name,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])
        .status()
        .unwrap();
    assert!(forward.success());
    client
}

/// A real ztunnel in dedicated mode for workload `shop/client-0`, fed by the control plane at
/// `istiod` (xDS and CA on 15012, verified with `root`), its SOCKS5 port on 15080; stopped on drop.
struct RealZtunnel {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl RealZtunnel {
    fn start(bin: &Path, istiod: &str, root: &Path, token: &str) -> RealZtunnel {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("istio-token");
        std::fs::write(&token_file, token).unwrap();
        let address = format!("https://{istiod}:15012");
        let child = std::process::Command::new(bin)
            .current_dir(dir.path())
            .env("PROXY_MODE", "dedicated")
            .env("PROXY_WORKLOAD_INFO", "shop/client-0/client")
            // Its own pod, which the control plane checks the token's identity against.
            .env("POD_NAMESPACE", "shop")
            .env("POD_NAME", "client-0")
            .env("SERVICE_ACCOUNT", "client")
            .env("XDS_ADDRESS", &address)
            .env("CA_ADDRESS", &address)
            .env("XDS_ROOT_CA", root)
            .env("CA_ROOT_CA", root)
            .env("ALT_XDS_HOSTNAME", "istiod.istio-system.svc")
            .env("ALT_CA_HOSTNAME", "istiod.istio-system.svc")
            .env("AUTH_TOKEN", &token_file)
            .env("NETWORK", "west")
            .env("UNSTABLE_ENABLE_SOCKS5", "true")
            .env("RUST_LOG", "info")
            .spawn()
            .unwrap();
        RealZtunnel { child, _dir: dir }
    }
}

impl Drop for RealZtunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /` for `host` at `ip:port` through the SOCKS5 port of the ztunnel in this namespace:
/// (status, body), `None` when the connection fails.
fn socks5_get(ip: [u8; 4], port: u16, host: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", 15080)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    s.write_all(&[5, 1, 0]).ok()?;
    let mut hello = [0u8; 2];
    s.read_exact(&mut hello).ok()?;
    let [hi, lo] = port.to_be_bytes();
    s.write_all(&[5, 1, 0, 1, ip[0], ip[1], ip[2], ip[3], hi, lo])
        .ok()?;
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).ok()?;
    if reply[1] != 0 {
        return None;
    }
    s.write_all(format!("GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())?;
    Some((status, body))
}
