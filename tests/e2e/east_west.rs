//! A multi-network mesh, as istiod configures it: the east-west gateway (a Gateway server in
//! `AUTO_PASSTHROUGH` mode) passes a client's mTLS through to the service its SNI names
//! (`outbound_.<port>_._.<host>`) — a real Envoy is the gateway, `openssl s_client` the client
//! (with Istio's ALPN), `openssl s_server` the workload — and a sidecar is sent the other
//! network's endpoints as that network's gateway (split-horizon EDS).

use crate::common::peers::{Bootstrap, Envoy, TlsServer, free_port, peer};
use crate::common::{Daemon, eventually, http_get, metric, write};
use std::io::Write;
use std::process::{Command, Stdio};

const NS: &str = "shop";

/// A GET over TLS to the gateway at `port` with server name `sni` (and ALPN `istio` when
/// `alpn`): what came back.
fn through_gateway(port: u16, sni: &str, alpn: bool) -> String {
    let mut cmd = Command::new("timeout");
    cmd.args(["5", "openssl", "s_client", "-quiet", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", sni]);
    if alpn {
        cmd.args(["-alpn", "istio"]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"GET / HTTP/1.0\r\n\r\n");
    }
    let out = child.wait_with_output().expect("s_client output");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A client's mTLS connection with Istio's ALPN reaches the workload its SNI names, through the
/// gateway, untouched; a workload without a proxy (no `tlsMode: istio`) is never reached, and a
/// connection without Istio's ALPN matches nothing.
#[test]
fn an_auto_passthrough_gateway_forwards_by_sni() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let workload = TlsServer::start(certs.path(), "web.shop.svc.cluster.local");
    let gateway_port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mesh.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [web.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{{number: 8443, name: tls, protocol: TLS}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1, ports: {{tls: {port}}}, labels: {{security.istio.io/tlsMode: istio}}}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: legacy, namespace: {NS}}}
spec:
  hosts: [legacy.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{{number: 8443, name: tls, protocol: TLS}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1, ports: {{tls: {port}}}}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: cross-network, namespace: {NS}}}
spec:
  selector: {{istio: eastwestgateway}}
  servers:
  - port: {{number: {gateway_port}, name: tls, protocol: TLS}}
    tls: {{mode: AUTO_PASSTHROUGH}}
    hosts: ["*.local"]
"#,
            port = workload.port
        ),
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let gateway = Envoy::boot(
        &envoy_bin,
        daemon.addr("grpc-xds"),
        &Bootstrap {
            node_type: "router",
            pod: "eastwest-0",
            namespace: NS,
            labels: "istio: eastwestgateway",
            metadata: "",
            ..Bootstrap::default()
        },
    );
    let sni = "outbound_.8443_._.web.shop.svc.cluster.local";
    eventually(30, "the workload answers through the gateway", || {
        through_gateway(gateway_port, sni, true).contains("HTTP/1.0 200 ok")
    });
    let (_, clusters) = http_get(gateway.admin, "/clusters");
    assert!(clusters.contains(sni), "the SNI-DNAT cluster is there");
    assert!(
        !through_gateway(
            gateway_port,
            "outbound_.8443_._.legacy.shop.svc.cluster.local",
            true
        )
        .contains("200 ok"),
        "a workload without Istio's mTLS is not reached"
    );
    assert!(
        !through_gateway(gateway_port, sni, false).contains("200 ok"),
        "without Istio's ALPN nothing matches"
    );
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// Split-horizon EDS through a real Envoy: a sidecar of network `east` (`ISTIO_META_NETWORK`)
/// is sent its own network's endpoint directly and the `west` endpoints as the `west` gateway
/// from `meshNetworks`; Envoy accepts it.
#[test]
fn a_sidecar_reaches_other_networks_through_their_gateways() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mesh.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: ""
  meshNetworks: |
    networks:
      west: {gateways: [{address: 192.0.2.9, port: 15443}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
  - {address: 10.1.0.1, network: east, labels: {security.istio.io/tlsMode: istio}}
  - {address: 10.2.0.1, network: west, labels: {security.istio.io/tlsMode: istio}}
"#,
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::boot(
        &envoy_bin,
        daemon.addr("grpc-xds"),
        &Bootstrap {
            namespace: NS,
            metadata: "INTERCEPTION_MODE: NONE, NETWORK: east, ",
            ..Bootstrap::default()
        },
    );
    eventually(30, "the gateway stands in for the west endpoint", || {
        let (_, dump) = http_get(envoy.admin, "/config_dump?include_eds");
        dump.contains("192.0.2.9") && dump.contains("10.1.0.1") && !dump.contains("10.2.0.1")
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}
