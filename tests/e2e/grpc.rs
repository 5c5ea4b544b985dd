//! Proxyless gRPC clients (Python grpcio and Node grpc-js-xds, `xds:///` targets) and gRPC through
//! Envoy, with config from Rudder.

use crate::common;
use crate::common::peers::{Envoy, free_port, peer, peers_dir};
use crate::common::{Daemon, eventually};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const NS: &str = "shop";
const HOST: &str = "echo.shop.svc.cluster.local";

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// A Python gRPC server answering with its name; killed on drop.
struct EchoServer {
    child: Child,
    port: u16,
}

impl EchoServer {
    fn start(python: &Path, name: &str) -> EchoServer {
        EchoServer::launch(python, "server", name, None)
    }

    /// `mode` is `server`, or `xds-server` with `xds_bootstrap` (a proxyless xDS server).
    fn launch(python: &Path, mode: &str, name: &str, xds_bootstrap: Option<&Path>) -> EchoServer {
        let port = free_port();
        let mut cmd = Command::new(python);
        cmd.arg(script("grpc_peer.py"))
            .args([mode, name, &port.to_string()])
            .stdout(Stdio::piped());
        if let Some(boot) = xds_bootstrap {
            cmd.env("GRPC_XDS_BOOTSTRAP", boot);
        }
        let mut child = cmd.spawn().expect("start grpc server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        EchoServer { child, port }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A long-lived client process: one channel, many rounds of calls.
struct Client {
    child: Child,
    stdin: ChildStdin,
    out: mpsc::Receiver<String>,
}

impl Client {
    fn start(mut cmd: Command) -> Client {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start grpc client");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, out) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Client { child, stdin, out }
    }

    /// Makes `n` calls with the given metadata; returns answers (backend names or `error:CODE`).
    fn calls(&mut self, n: usize, metadata: &[&str]) -> BTreeMap<String, usize> {
        writeln!(self.stdin, "{n} {}", metadata.join(" ")).unwrap();
        let line = self
            .out
            .recv_timeout(Duration::from_secs(120))
            .expect("client answered");
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bootstrap(dir: &Path, xds: std::net::SocketAddr) -> PathBuf {
    let path = dir.join("bootstrap.json");
    let doc = serde_json::json!({
        "xds_servers": [{"server_uri": xds.to_string(), "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
        "node": {
            "id": format!("sidecar~127.0.0.1~grpc-client.{NS}~{NS}.svc.cluster.local"),
            "metadata": {"GENERATOR": "grpc", "NAMESPACE": NS},
            "locality": {}
        }
    });
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn config(port: u16, endpoints: &[(&str, &str, u16)], w1: i32, w2: i32) -> String {
    let mut y = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\nspec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: grpc, protocol: GRPC}}]\n  resolution: STATIC\n  workloadSelector: {{labels: {{app: echo}}}}\n"
    );
    for (name, version, p) in endpoints {
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: \"{name}\", namespace: {NS}}}\nspec: {{address: 127.0.0.1, ports: {{grpc: {p}}}, labels: {{app: echo, version: \"{version}\"}}}}\n"
        ));
    }
    y.push_str(&format!(
        r#"---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: echo, namespace: {NS}}}
spec:
  host: echo
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo, namespace: {NS}}}
spec:
  hosts: [echo]
  http:
  - match: [{{headers: {{x-version: {{exact: v2}}}}}}]
    route: [{{destination: {{host: echo, subset: v2}}}}]
  - match: [{{headers: {{x-fault: {{exact: deny}}}}}}]
    fault: {{abort: {{grpcStatus: PERMISSION_DENIED, percentage: {{value: 100}}}}}}
    route: [{{destination: {{host: echo, subset: v1}}}}]
  - route:
    - {{destination: {{host: echo, subset: v1}}, weight: {w1}}}
    - {{destination: {{host: echo, subset: v2}}, weight: {w2}}}
"#
    ));
    y
}

fn only(counts: &BTreeMap<String, usize>, name: &str) -> bool {
    counts.len() == 1 && counts.contains_key(name)
}

/// The same behaviour asked of every proxyless client.
fn proxyless_scenario(python: &Path, make_client: impl Fn(&Path, &str) -> Command) {
    let (v1, v2, v1b) = (
        EchoServer::start(python, "v1"),
        EchoServer::start(python, "v2"),
        EchoServer::start(python, "v1b"),
    );
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    let two = [("echo-v1", "v1", v1.port), ("echo-v2", "v2", v2.port)];
    common::write_atomic(&cfg.join("echo.yaml"), &config(port, &two, 100, 0));
    let daemon = Daemon::start(
        &cfg,
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let boot = bootstrap(dir.path(), daemon.addr("grpc-xds"));
    let mut client = Client::start(make_client(&boot, &format!("xds:///{HOST}:{port}")));

    assert!(only(&client.calls(10, &[]), "v1"), "weight 100/0");
    assert!(
        only(&client.calls(10, &["x-version=v2"]), "v2"),
        "header match to subset v2"
    );
    assert!(
        only(
            &client.calls(3, &["x-fault=deny"]),
            "error:PERMISSION_DENIED"
        ),
        "fault injection abort"
    );

    common::write_atomic(&cfg.join("echo.yaml"), &config(port, &two, 0, 100));
    eventually(60, "split moved to v2 on the same channel", || {
        only(&client.calls(10, &[]), "v2")
    });

    let three = [
        ("echo-v1", "v1", v1.port),
        ("echo-v2", "v2", v2.port),
        ("echo-v1b", "v1", v1b.port),
    ];
    common::write_atomic(&cfg.join("echo.yaml"), &config(port, &three, 100, 0));
    eventually(60, "added endpoint serves", || {
        client.calls(20, &[]).contains_key("v1b")
    });
    common::write_atomic(&cfg.join("echo.yaml"), &config(port, &two, 100, 0));
    eventually(60, "removed endpoint gone", || {
        only(&client.calls(20, &[]), "v1")
    });
}

#[test]
fn python_grpcio_proxyless_client() {
    let Some(python) = peer("venv/bin/python") else {
        return;
    };
    let py = python.clone();
    proxyless_scenario(&python, move |boot, target| {
        let mut cmd = Command::new(&py);
        cmd.arg(script("grpc_peer.py"))
            .args(["client", target])
            .env("GRPC_XDS_BOOTSTRAP", boot);
        cmd
    });
}

#[test]
fn node_grpc_js_xds_proxyless_client() {
    let Some(python) = peer("venv/bin/python") else {
        return;
    };
    if peer("node/node_modules/@grpc/grpc-js-xds").is_none() {
        return;
    }
    proxyless_scenario(&python, |boot, target| {
        let mut cmd = Command::new("node");
        cmd.arg(script("grpc_peer.js"))
            .arg(target)
            .env("GRPC_XDS_BOOTSTRAP", boot);
        cmd
    });
}

/// Plain gRPC clients through an Envoy sidecar: HTTP/2 upstreams and subset routing by header.
#[test]
fn grpc_through_envoy() {
    let Some(python) = peer("venv/bin/python") else {
        return;
    };
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (v1, v2) = (
        EchoServer::start(&python, "v1"),
        EchoServer::start(&python, "v2"),
    );
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("echo.yaml"),
        config(
            port,
            &[("echo-v1", "v1", v1.port), ("echo-v2", "v2", v2.port)],
            100,
            0,
        ),
    )
    .unwrap();
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    let mut cmd = Command::new(&python);
    cmd.arg(script("grpc_peer.py")).args([
        "client",
        &format!("127.0.0.1:{port}"),
        &format!("{HOST}:{port}"),
    ]);
    let mut client = Client::start(cmd);
    eventually(30, "envoy serves gRPC", || {
        only(&client.calls(5, &[]), "v1")
    });
    assert!(only(&client.calls(10, &["x-version=v2"]), "v2"));
    assert!(only(
        &client.calls(3, &["x-fault=deny"]),
        "error:PERMISSION_DENIED"
    ));
    let _ = peers_dir();
}

/// A proxyless gRPC *server* gets its inbound listener from Rudder and enforces
/// AuthorizationPolicy itself (gRPC's RBAC filter): a request with the denied header is refused
/// with PERMISSION_DENIED, others are served.
#[test]
fn proxyless_grpc_server_enforces_authorization_policy() {
    let Some(python) = peer("venv/bin/python") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("policy.yaml"),
        format!(
            "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: deny-flagged, namespace: {NS}}}\n\
spec:\n  selector: {{matchLabels: {{app: echo}}}}\n  action: DENY\n  rules:\n  - when: [{{key: \"request.headers[x-deny]\", values: [\"yes\"]}}]\n"
        ),
    )
    .unwrap();
    let daemon = Daemon::start(dir.path(), &[]);
    let boot = dir.path().join("server-bootstrap.json");
    let doc = serde_json::json!({
        "xds_servers": [{"server_uri": daemon.addr("grpc-xds").to_string(), "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
        "node": {
            "id": format!("sidecar~127.0.0.1~echo-server.{NS}~{NS}.svc.cluster.local"),
            "metadata": {"GENERATOR": "grpc", "NAMESPACE": NS, "LABELS": {"app": "echo"}},
            "locality": {}
        },
        "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s"
    });
    std::fs::write(&boot, doc.to_string()).unwrap();
    let server = EchoServer::launch(&python, "xds-server", "guarded", Some(&boot));
    let mut cmd = Command::new(&python);
    cmd.arg(script("grpc_peer.py"))
        .args(["client", &format!("127.0.0.1:{}", server.port)]);
    let mut client = Client::start(cmd);
    eventually(
        60,
        "the xDS server serves once its listener arrives",
        || only(&client.calls(1, &[]), "guarded"),
    );
    assert!(
        only(&client.calls(3, &["x-deny=yes"]), "error:PERMISSION_DENIED"),
        "the RBAC filter from the AuthorizationPolicy refuses flagged calls"
    );
    assert!(only(&client.calls(3, &[]), "guarded"));
    drop(server);
}

/// A bootstrap for a proxyless gRPC peer (`id` its node id, `metadata` its node metadata) whose
/// certificate provider `default` serves the workload certificate of `identity` (namespace, service
/// account) issued by the daemon's CA, as istio-agent would write it.
fn mtls_bootstrap(
    daemon: &Daemon,
    dir: &Path,
    file: &str,
    id: &str,
    metadata: serde_json::Value,
    identity: (&str, &str),
) -> PathBuf {
    // The daemon writes its root once it listens.
    eventually(30, "the CA's root written", || {
        daemon.ca_dir.path().join("ca-key.pem").exists()
    });
    let read = |f: &str| std::fs::read_to_string(daemon.ca_dir.path().join(f)).unwrap();
    let ca = rudder::ca::Authority::from_pem(
        &read("ca-cert.pem"),
        &read("ca-key.pem"),
        "",
        "",
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    )
    .unwrap();
    let (chain, key) = ca
        .issue_workload(&rudder::ca::Identity {
            trust_domain: "cluster.local".into(),
            namespace: identity.0.into(),
            service_account: identity.1.into(),
        })
        .unwrap();
    let (cert_file, key_file, root_file) = (
        dir.join(format!("{file}-cert.pem")),
        dir.join(format!("{file}-key.pem")),
        dir.join(format!("{file}-root.pem")),
    );
    std::fs::write(&cert_file, chain.concat()).unwrap();
    std::fs::write(&key_file, key).unwrap();
    std::fs::write(&root_file, read("ca-cert.pem")).unwrap();
    let path = dir.join(format!("{file}.json"));
    let doc = serde_json::json!({
        "xds_servers": [{"server_uri": daemon.addr("grpc-xds").to_string(), "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
        "node": {"id": id, "metadata": metadata, "locality": {}},
        "certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {
            "certificate_file": cert_file, "private_key_file": key_file,
            "ca_certificate_file": root_file, "refresh_interval": "600s"}}},
        "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s"
    });
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

/// A proxyless gRPC server under PeerAuthentication STRICT takes mTLS only, as istiod
/// configures it (its certificate provider), and its RBAC then sees its clients' identities: a
/// client of the mesh (DestinationRule ISTIO_MUTUAL: mTLS from its own certificate provider) is
/// served, a DENY on another namespace refuses that namespace's client, a plaintext client gets
/// nothing. Before, the server's listener had no TLS, so STRICT and identity rules did nothing.
#[test]
fn proxyless_grpc_server_takes_mtls_under_strict_and_denies_by_namespace() {
    let Some(python) = peer("venv/bin/python") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    let daemon = Daemon::start(
        &cfg,
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let server_boot = mtls_bootstrap(
        &daemon,
        dir.path(),
        "server",
        &format!("sidecar~127.0.0.1~echo-server.{NS}~{NS}.svc.cluster.local"),
        serde_json::json!({"GENERATOR": "grpc", "NAMESPACE": NS, "LABELS": {"app": "echo"}}),
        (NS, "echo"),
    );
    let server = EchoServer::launch(&python, "xds-server", "secure", Some(&server_boot));
    let port = free_port();
    common::write_atomic(
        &cfg.join("mesh.yaml"),
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\nspec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: grpc, protocol: GRPC}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{grpc: {}}}, serviceAccount: echo}}]\n\
---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: {NS}}}\nspec: {{host: {HOST}, trafficPolicy: {{tls: {{mode: ISTIO_MUTUAL}}}}}}\n\
---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: default, namespace: {NS}}}\nspec: {{mtls: {{mode: STRICT}}}}\n\
---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: deny-evil, namespace: {NS}}}\nspec:\n  selector: {{matchLabels: {{app: echo}}}}\n  action: DENY\n  rules: [{{from: [{{source: {{namespaces: [evil]}}}}]}}]\n",
            server.port
        ),
    );
    let client_in = |ns: &str| {
        let boot = mtls_bootstrap(
            &daemon,
            dir.path(),
            &format!("client-{ns}"),
            &format!("sidecar~127.0.0.1~client.{ns}~{ns}.svc.cluster.local"),
            serde_json::json!({"GENERATOR": "grpc", "NAMESPACE": ns}),
            (ns, "client"),
        );
        let mut cmd = Command::new(&python);
        cmd.arg(script("grpc_peer.py"))
            .args(["xds-client", &format!("xds:///{HOST}:{port}")])
            .env("GRPC_XDS_BOOTSTRAP", boot);
        Client::start(cmd)
    };
    let mut mesh_client = client_in(NS);
    eventually(60, "a mesh client served over mTLS", || {
        only(&mesh_client.calls(1, &[]), "secure")
    });
    let mut evil = client_in("evil");
    eventually(
        60,
        "the DENY on its namespace refuses the other client",
        || only(&evil.calls(1, &[]), "error:PERMISSION_DENIED"),
    );
    let mut plain = Command::new(&python);
    plain
        .arg(script("grpc_peer.py"))
        .args(["client", &format!("127.0.0.1:{}", server.port)]);
    let mut plain = Client::start(plain);
    assert!(
        !plain.calls(2, &[]).contains_key("secure"),
        "a plaintext client of a STRICT server"
    );
    assert!(only(&mesh_client.calls(3, &[]), "secure"));
    drop(server);
}

/// A GRPCRoute on a Gateway API Gateway, through a gateway Envoy from a config directory: a
/// method and header match sends calls to one backend, the rest to the other, over HTTP/2.
#[test]
fn grpc_route_through_a_gateway_envoy() {
    let Some(python) = peer("venv/bin/python") else {
        return;
    };
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (v1, v2) = (
        EchoServer::start(&python, "v1"),
        EchoServer::start(&python, "v2"),
    );
    let port = free_port();
    let entry = |name: &str, backend: u16| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{hosts: [{name}.internal], location: MESH_INTERNAL, resolution: STATIC, ports: [{{number: 50051, name: grpc, protocol: GRPC}}], endpoints: [{{address: 127.0.0.1, ports: {{grpc: {backend}}}}}]}}\n"
        )
    };
    let yaml = format!(
        "{}{}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: grpc-gw, namespace: {NS}}}
spec:
  gatewayClassName: istio
  listeners: [{{name: grpc, port: {port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: echo, namespace: {NS}}}
spec:
  parentRefs: [{{name: grpc-gw}}]
  rules:
  - matches: [{{method: {{service: rudder.test.Echo, method: Who}}, headers: [{{name: x-version, value: v2}}]}}]
    backendRefs: [{{group: networking.istio.io, kind: Hostname, name: v2.internal, port: 50051}}]
  - backendRefs: [{{group: networking.istio.io, kind: Hostname, name: v1.internal, port: 50051}}]
",
        entry("v1", v1.port),
        entry("v2", v2.port)
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("grpc-route.yaml"), yaml).unwrap();
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _gateway = Envoy::boot(
        &envoy_bin,
        daemon.addr("grpc-xds"),
        &common::peers::Bootstrap {
            node_type: "router",
            pod: "grpc-gw-istio-0",
            namespace: NS,
            labels: "gateway.networking.k8s.io/gateway-name: grpc-gw",
            ..Default::default()
        },
    );
    let mut cmd = Command::new(&python);
    cmd.arg(script("grpc_peer.py"))
        .args(["client", &format!("127.0.0.1:{port}")]);
    let mut client = Client::start(cmd);
    eventually(30, "the gateway serves gRPC", || {
        only(&client.calls(5, &[]), "v1")
    });
    assert!(only(&client.calls(10, &["x-version=v2"]), "v2"));
    assert!(only(&client.calls(5, &["x-version=v3"]), "v1"));
}
