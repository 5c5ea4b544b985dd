//! Helpers shared by the end-to-end tests: run the real `rudder` binary and talk to it over HTTP.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub mod netns;
pub mod peers;

pub fn rudder() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rudder"))
}

/// `rudder serve` flags that put every server on a loopback ephemeral port.
pub const LOOPBACK_PORTS: [&str; 12] = [
    "--monitoring-addr",
    "127.0.0.1:0",
    "--http-addr",
    "127.0.0.1:0",
    "--grpc-addr",
    "127.0.0.1:0",
    "--secure-grpc-addr",
    "127.0.0.1:0",
    "--https-addr",
    "127.0.0.1:0",
    "--ctrlz-addr",
    "127.0.0.1:0",
];

/// A running `rudder serve`, killed on drop.
pub struct Daemon {
    pub child: Child,
    /// The CA directory (files mode), kept for the daemon's lifetime.
    pub ca_dir: tempfile::TempDir,
    /// Listening addresses by server name ("monitoring", "http", ...), read from the log.
    pub addrs: HashMap<String, SocketAddr>,
    /// The log lines up to the last listening address (`log` has the ones after).
    pub startup: Vec<String>,
    pub log: mpsc::Receiver<String>,
}

impl Daemon {
    /// Starts `rudder serve` on loopback ephemeral ports and waits until every server is listening.
    pub fn start(config_dir: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_on(config_dir, "127.0.0.1:0", extra)
    }

    /// Like `start`, with the xDS gRPC server on `grpc_addr` (a fixed port lets a test restart it).
    pub fn start_on(config_dir: &Path, grpc_addr: &str, extra: &[&str]) -> Daemon {
        let mut args: Vec<&str> = vec!["--config-source", "files", "--config-dir"];
        let dir = config_dir.to_string_lossy().to_string();
        args.push(&dir);
        args.extend_from_slice(extra);
        Daemon::spawn(grpc_addr, &args)
    }

    /// `rudder serve` with arbitrary flags (after the listen addresses).
    pub fn spawn(grpc_addr: &str, extra: &[&str]) -> Daemon {
        Daemon::spawn_env(grpc_addr, extra, &[])
    }

    /// `spawn` with environment changes: `(name, Some(value))` sets, `(name, None)` removes.
    pub fn spawn_env(grpc_addr: &str, extra: &[&str], env: &[(&str, Option<&str>)]) -> Daemon {
        let ca_dir = tempfile::tempdir().unwrap();
        let ca_path = ca_dir.path().to_string_lossy().to_string();
        // Loopback ephemeral ports unless `extra` gives an address of its own.
        let mut args: Vec<&str> = vec!["serve"];
        for (flag, value) in [
            ("--monitoring-addr", "127.0.0.1:0"),
            ("--http-addr", "127.0.0.1:0"),
            ("--grpc-addr", grpc_addr),
            ("--secure-grpc-addr", "127.0.0.1:0"),
            ("--https-addr", "127.0.0.1:0"),
            ("--ctrlz-addr", "127.0.0.1:0"),
            ("--ca-dir", ca_path.as_str()),
        ] {
            if !extra.contains(&flag) {
                args.extend([flag, value]);
            }
        }
        let mut command = rudder();
        for (name, value) in env {
            match value {
                Some(v) => command.env(name, v),
                None => command.env_remove(name),
            };
        }
        if !env.iter().any(|(name, _)| *name == "RUST_LOG") {
            command.env("RUST_LOG", "info");
        }
        let mut child = command
            .args(&args)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rudder");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[rudder] {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut addrs = HashMap::new();
        let mut startup = Vec::new();
        const SERVERS: [&str; 5] = ["monitoring", "http", "grpc-xds", "webhook", "grpc-xds-tls"];
        while !SERVERS.iter().all(|s| addrs.contains_key(*s)) {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .expect("rudder did not start listening");
            if let Some((server, addr)) = parse_listening(&line) {
                addrs.insert(server, addr);
            }
            startup.push(line);
        }
        Daemon {
            child,
            ca_dir,
            addrs,
            startup,
            log: rx,
        }
    }

    pub fn addr(&self, server: &str) -> SocketAddr {
        self.addrs[server]
    }

    /// Sends SIGTERM and returns the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..200 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("rudder did not exit after SIGTERM");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_listening(line: &str) -> Option<(String, SocketAddr)> {
    if !line.contains("listening") {
        return None;
    }
    let server = line
        .split("server=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .trim_matches('"');
    let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
    Some((server.to_string(), addr.parse().ok()?))
}

/// A GET through the tests' HTTP client: the status code and body; status 0 when the daemon
/// closed without answering. Not reaching the address at all fails the test.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    answered(addr, http::send(addr, &http::Request::get(path)))
}

/// A request with a JSON body (`PUT`, `POST`): the status code and body.
pub fn http_send_json(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let req = http::Request {
        method,
        path,
        content_type: "application/json",
        body: body.as_bytes(),
        ..Default::default()
    };
    answered(addr, http::send(addr, &req))
}

fn answered(addr: SocketAddr, result: Result<(u16, String), String>) -> (u16, String) {
    match result {
        Ok(answer) => answer,
        Err(e) if e.starts_with(http::CONNECT) => panic!("{addr}: {e}"),
        Err(_) => (0, String::new()),
    }
}

/// Status and body of a raw HTTP/1.1 response (chunked bodies decoded).
/// (status, body) of a raw HTTP/1.1 response; status 0 when there is none.
pub fn parse_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// Waits until the push loop has judged every change the store holds: `rudder_push_judged_revision`
/// equals `rudder_config_revision` in one scrape. What a test waits for instead of sleeping before
/// it asserts that something pushed nothing.
pub fn settled(d: &Daemon) {
    eventually(30, "the push loop judged every change", || {
        let (_, text) = http_get(d.addr("monitoring"), "/metrics");
        let value = |name: &str| {
            text.lines().find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
        };
        let store = value("rudder_config_revision");
        store.is_some() && store == value("rudder_push_judged_revision")
    });
}

/// Waits until the leader's status writer has finished `n` more rounds (every object judged,
/// differences written) than it had when called.
pub fn status_rounds(d: &Daemon, n: f64) {
    let start = metric(d, "rudder_status_rounds_total");
    eventually(60, "status rounds", || {
        metric(d, "rudder_status_rounds_total") >= start + n
    });
}

/// The sum of every sample on `/metrics` whose line starts with `prefix` (a name, or a name and labels).
pub fn metric(d: &Daemon, prefix: &str) -> f64 {
    let (_, text) = http_get(d.addr("monitoring"), "/metrics");
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Writes `text` into `dir/file` atomically ([`write_atomic`]): how tests change a daemon's config.
pub fn write(dir: &Path, file: &str, text: &str) {
    write_atomic(&dir.join(file), text);
}

/// [`eventually`] for async tests, whose runtime must keep running while they wait.
pub async fn eventually_async(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Polls `cond` until it holds; panics with `what` after `secs` seconds.
pub fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for: {what}");
}
pub mod ads;
pub mod ca;
pub mod cluster;
pub mod fake_k8s;
pub mod http;

/// Replaces a watched config file atomically (write aside, then rename), as editors and Kubernetes
/// ConfigMap mounts do. A plain truncate-then-write can be seen half-way: an empty file, which
/// legitimately means "no objects".
pub fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp-write");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One HTTPS request over HTTP/1.1 that verifies the server's chain against `root_pem` for
/// `server_name`: returns the status and body, or the TLS/IO error.
pub fn https_request(
    addr: SocketAddr,
    root_pem: &str,
    server_name: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> Result<(u16, String), String> {
    use std::sync::Arc;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut root_pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
        .map_err(|e| e.to_string())?;
    let req = http::Request {
        method,
        path,
        content_type,
        body,
        ..Default::default()
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let tcp = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| e.to_string())?;
                let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                    .connect(name, tcp)
                    .await
                    .map_err(|e| e.to_string())?;
                http::send_over(tls, server_name, &req).await
            })
        })
        .join()
        .unwrap_or_else(|_| Err("the request thread panicked".into()))
    })
}
