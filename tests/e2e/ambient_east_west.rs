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
    static_bootstrap,
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
      west: {{endpoints: [{{fromRegistry: Kubernetes}}], gateways: []}}
---
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
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {GATEWAY_IP}, port_value: 15008}}}}}}}}]}}]
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
    static_bootstrap(&format!(
        r#"  clusters:
  - name: app
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: app
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {NODE_IP}, port_value: 8081}}}}}}}}]}}]
  listeners:
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
            - name: web
              domains: ["{WEB}"]
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
            eventually(20, "the mesh CA", || ca_dir.join("ca-key.pem").exists());
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
            eventually(20, "the mesh CA", || ca_dir.join("ca-key.pem").exists());
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
