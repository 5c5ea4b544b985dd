//! Sidecars tested the way they run in a pod: the client and its Envoy in a network namespace of
//! their own with istio-iptables' NAT rules (outbound redirected to 15001, inbound to 15006), the
//! servers in a second namespace. Outbound listeners, protocol sniffing, SNI and passthrough are
//! exercised through real capture, not through listeners bound for the test.

use crate::common;
use crate::common::netns::{self, PROXY_UID, Pod};
use crate::common::peers::{Backend, Bootstrap, Envoy, envoy_binary, request_at};
use crate::common::{Daemon, eventually, write};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const CLIENT_IP: &str = "10.44.0.2";
const SERVER_IP: &str = "10.44.0.3";
const XDS_PORT: u16 = 15010;

/// Answers every connection with `reply` once the client has sent something (a ClientHello, a
/// request): shows which server a connection reached.
fn reporter(addr: &str, reply: &'static str) {
    let listener = TcpListener::bind(addr).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                if stream.read(&mut buf).unwrap_or(0) > 0 {
                    let _ = stream.write_all(reply.as_bytes());
                }
            });
        }
    });
}

/// Echoes lines back: a TCP protocol that is not HTTP.
fn echo(addr: &str) {
    let listener = TcpListener::bind(addr).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if writeln!(writer, "{line}").is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// A TLS ClientHello naming `sni`, as any TLS client sends first.
fn client_hello(sni: &str) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

/// Sends `first` to `addr` and returns what comes back ("" when the connection is refused or
/// closed without an answer).
fn exchange(addr: &str, first: &[u8]) -> String {
    let addr: SocketAddr = addr.parse().unwrap();
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(3)) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).ok();
    if s.write_all(first).is_err() {
        return String::new();
    }
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).trim().to_string()
}

const MESH: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  addresses: [10.96.0.7]
  location: MESH_INTERNAL
  ports: [{number: 8080, name: web}]
  resolution: STATIC
  endpoints:
  - {address: 10.44.0.3, ports: {web: 8080}, labels: {version: v1}}
  - {address: 10.44.0.3, ports: {web: 8081}, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: shop}
spec:
  host: web
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [web]
  http:
  - match: [{headers: {x-version: {exact: v2}}}]
    route: [{destination: {host: web, subset: v2}}]
  - route: [{destination: {host: web, subset: v1}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: shop}
spec:
  hosts: [echo.shop.svc.cluster.local]
  addresses: [10.96.0.8]
  location: MESH_INTERNAL
  ports: [{number: 9000, name: echo}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.3}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: pay, namespace: shop}
spec:
  hosts: [pay.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.3, ports: {tls: 8443}}]
# The address IP auto-allocation wrote: a VIP only for proxies that capture DNS (this client does
# not), so pay.example.com stays on its SNI chain of the port's shared listener.
status:
  addresses: [{host: pay.example.com, value: 240.240.0.9}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: shop}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
"#;

/// TCP traffic shifting (istio.io's task): a `tcp` route with weights between two subsets.
fn tcp_shift(v1: u32, v2: u32) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: tcp-echo, namespace: shop}}
spec:
  hosts: [tcp-echo.shop.svc.cluster.local]
  addresses: [10.96.0.11]
  location: MESH_INTERNAL
  ports: [{{number: 9001, name: tcp, protocol: TCP}}]
  resolution: STATIC
  endpoints:
  - {{address: 10.44.0.3, ports: {{tcp: 9001}}, labels: {{version: v1}}}}
  - {{address: 10.44.0.3, ports: {{tcp: 9002}}, labels: {{version: v2}}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: tcp-echo, namespace: shop}}
spec:
  host: tcp-echo
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: tcp-echo, namespace: shop}}
spec:
  hosts: [tcp-echo]
  tcp:
  - match: [{{port: 9001}}]
    route:
    - {{destination: {{host: tcp-echo, port: {{number: 9001}}, subset: v1}}, weight: {v1}}}
    - {{destination: {{host: tcp-echo, port: {{number: 9001}}, subset: v2}}, weight: {v2}}}
"#
    )
}

#[test]
fn captured_sidecar_sniffs_unnamed_ports_routes_by_sni_and_passes_the_rest_through() {
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let client = Pod::new(CLIENT_IP);
    let server = Pod::new(SERVER_IP);
    netns::link(&client, &server);
    client.capture(&[XDS_PORT]);
    let _backends = server.run(|| {
        reporter(&format!("{SERVER_IP}:443"), "passthrough\n");
        reporter(&format!("{SERVER_IP}:8443"), "pay\n");
        reporter(&format!("{SERVER_IP}:9001"), "one\n");
        reporter(&format!("{SERVER_IP}:9002"), "two\n");
        echo(&format!("{SERVER_IP}:9000"));
        [
            Backend::start_on(&format!("{SERVER_IP}:8080"), "web-v1"),
            Backend::start_on(&format!("{SERVER_IP}:8081"), "web-v2"),
        ]
    });
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "mesh.yaml", MESH);
    write(dir.path(), "tcp.yaml", &tcp_shift(100, 0));
    // One thread starts the daemon and Envoy and drives the traffic: Envoy asks to be stopped
    // when the thread that started it ends.
    client.run(|| {
        let _daemon = Daemon::start_on(dir.path(), &format!("0.0.0.0:{XDS_PORT}"), &[]);
        let _envoy = Envoy::boot(
            &envoy,
            SocketAddr::from(([127, 0, 0, 1], XDS_PORT)),
            &Bootstrap {
                namespace: "shop",
                metadata: "",
                ip: CLIENT_IP,
                uid: Some(PROXY_UID),
                ..Bootstrap::default()
            },
        );
        let web: SocketAddr = "10.96.0.7:8080".parse().unwrap();
        let host = "web.shop.svc.cluster.local";
        // The port has no protocol: only sniffing sends it through the HTTP routes.
        let mut last = (0, String::new());
        eventually(30, "the header route on the sniffed port", || {
            last = request_at(web, host, "/a", &[("x-version", "v2")]);
            if last.1 != "web-v2 /a" {
                eprintln!("sniffed port answered {last:?}");
            }
            last.1 == "web-v2 /a"
        });
        for _ in 0..5 {
            assert_eq!(request_at(web, host, "/b", &[]).1, "web-v1 /b");
        }
        // Not HTTP on a sniffed port: proxied as TCP.
        assert_eq!(
            exchange("10.96.0.8:9000", b"hello there\r\n"),
            "hello there"
        );
        // Two TLS hosts without a VIP on 443: pay.example.com by SNI to its endpoint; a host the
        // mesh does not know passes through to the address the client dialled (ALLOW_ANY).
        eventually(10, "SNI routing on 443", || {
            exchange(
                &format!("{SERVER_IP}:443"),
                &client_hello("pay.example.com"),
            ) == "pay"
        });
        assert_eq!(
            exchange(
                &format!("{SERVER_IP}:443"),
                &client_hello("other.example.org")
            ),
            "passthrough"
        );
        // Plain TCP to a port no service uses: the virtual outbound listener passes it through.
        assert_eq!(
            exchange(&format!("{SERVER_IP}:9000"), b"direct\r\n"),
            "direct"
        );
        // TCP traffic shifting: all to v1, then all to v2 once the weights change.
        let tcp_echo = |n: usize| -> Vec<String> {
            (0..n)
                .map(|_| exchange("10.96.0.11:9001", b"hi\r\n"))
                .collect()
        };
        assert!(tcp_echo(10).iter().all(|r| r == "one"));
        write(dir.path(), "tcp.yaml", &tcp_shift(0, 100));
        eventually(10, "TCP weights moved to v2", || {
            tcp_echo(5).iter().all(|r| r == "two")
        });
    });
}

const DOMAIN: &str = "istiod.istio-system.svc";

const MTLS_MESH: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: shop}
spec:
  hosts: [app.shop.svc.cluster.local]
  addresses: [10.96.0.9]
  location: MESH_INTERNAL
  ports: [{number: 9080, name: app}]
  resolution: STATIC
  endpoints:
  - {address: 10.44.0.3, serviceAccount: server, labels: {app: server, security.istio.io/tlsMode: istio}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: shop}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: app, namespace: shop}
spec:
  selector: {matchLabels: {app: server}}
  rules: [{to: [{operation: {paths: [/allowed]}}]}]
"#;

/// Two captured sidecars with mesh mTLS (STRICT): HTTP on a port without a protocol is sniffed by
/// the client, carried over mTLS with an ALPN that says HTTP, and served as HTTP by the server's
/// sidecar, so an AuthorizationPolicy on paths applies to it (served as TCP, an ALLOW rule on
/// paths could match nothing and every request would be refused).
#[test]
fn sniffed_http_over_mesh_mtls_is_authorized_as_http() {
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let client = Pod::new(CLIENT_IP);
    let server = Pod::new(SERVER_IP);
    netns::link(&client, &server);
    let secure_port: u16 = 15012;
    client.capture(&[XDS_PORT, secure_port]);
    server.capture(&[]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    write(&cfg, "mesh.yaml", MTLS_MESH);
    let tokens = dir.path().join("tokens.yaml");
    std::fs::write(
        &tokens,
        "client-token: shop/client\nserver-token: shop/server\n",
    )
    .unwrap();
    let ca_dir = dir.path().join("ca");
    std::fs::create_dir(&ca_dir).unwrap();
    let root = ca_dir.join("root-cert.pem");
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let boot = |ip: &str, pod: &str, labels: &str, token: &str, xds: SocketAddr| {
        Envoy::boot(
            &envoy,
            xds,
            &Bootstrap {
                namespace: "shop",
                pod,
                labels,
                metadata: "",
                ip,
                uid: Some(PROXY_UID),
                tls: Some((&root, DOMAIN)),
                token: Some(token),
                ..Bootstrap::default()
            },
        )
    };
    let (client, server, boot, cfg, ca_dir, tokens) =
        (&client, &server, &boot, &cfg, &ca_dir, &tokens);
    std::thread::scope(|s| {
        s.spawn(move || {
            server.enter();
            // On the pod's IP only: inbound traffic reaches the application there, as with
            // istiod (not on localhost).
            let _app = Backend::start_on(&format!("{SERVER_IP}:9080"), "app");
            up_rx.recv().unwrap();
            let xds = SocketAddr::from(([10, 44, 0, 2], secure_port));
            let _envoy = boot(SERVER_IP, "server-0", "app: server", "server-token", xds);
            let _ = done_rx.recv();
        });
        s.spawn(move || {
            client.enter();
            let secure = format!("0.0.0.0:{secure_port}");
            let _daemon = Daemon::start_on(
                cfg,
                &format!("0.0.0.0:{XDS_PORT}"),
                &[
                    "--secure-grpc-addr",
                    &secure,
                    "--ca-dir",
                    ca_dir.to_str().unwrap(),
                    "--ca-token-file",
                    tokens.to_str().unwrap(),
                ],
            );
            up_tx.send(()).unwrap();
            let xds = SocketAddr::from(([127, 0, 0, 1], secure_port));
            let _envoy = boot(CLIENT_IP, "client-0", "app: client", "client-token", xds);
            let app: SocketAddr = "10.96.0.9:9080".parse().unwrap();
            let host = "app.shop.svc.cluster.local";
            let mut last = (0, String::new());
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                eventually(30, "an allowed path through both sidecars", || {
                    last = request_at(app, host, "/allowed", &[]);
                    last == (200, "app /allowed".into())
                });
                assert_eq!(request_at(app, host, "/denied", &[]).0, 403);
                // The application reads its caller's identity from X-Forwarded-Client-Cert, as
                // with istiod; one the caller wrote itself never arrives.
                let (code, body) = request_at(
                    app,
                    host,
                    "/allowed",
                    &[
                        ("x-echo-headers", "x-forwarded-client-cert"),
                        (
                            "x-forwarded-client-cert",
                            "URI=spiffe://cluster.local/ns/shop/sa/admin",
                        ),
                    ],
                );
                assert_eq!(code, 200, "{body}");
                let xfcc = body
                    .split_once("x-forwarded-client-cert=")
                    .map_or("", |(_, v)| v);
                assert!(
                    xfcc.contains("uri=spiffe://cluster.local/ns/shop/sa/client")
                        && xfcc.starts_with("by=spiffe://cluster.local/ns/shop/sa/server"),
                    "{body}"
                );
                assert!(!xfcc.contains("/sa/admin") && !xfcc.contains(','), "{body}");
                peers_of_another_trust_domain_are_refused(ca_dir);
                authorization_keys_through_real_sidecars(cfg, app, host);
                plain_text_to_a_workload_that_disables_mtls(cfg, app, host);
            }));
            let _ = done_tx.send(());
            if let Err(e) = outcome {
                eprintln!("last answer: {last:?}");
                std::panic::resume_unwind(e);
            }
        });
    });
}

/// Straight to the server's sidecar (as the proxy's user, so the client pod's capture lets it
/// by), with certificates of the mesh's own root: one of the mesh's trust domain is served, one
/// of another trust domain is refused, as istiod validates the peer's trust domain.
fn peers_of_another_trust_domain_are_refused(ca_dir: &Path) {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let read = |f: &str| std::fs::read_to_string(ca_dir.join(f)).unwrap();
    let ca = rudder::ca::Authority::from_pem(
        &read("ca-cert.pem"),
        &read("ca-key.pem"),
        "",
        "",
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let probe = |trust_domain: &str| {
        let (chain, key) = ca
            .issue_workload(&rudder::ca::Identity {
                trust_domain: trust_domain.into(),
                namespace: "shop".into(),
                service_account: "client".into(),
            })
            .unwrap();
        let (cert_file, key_file) = (
            dir.path().join(format!("{trust_domain}.pem")),
            dir.path().join(format!("{trust_domain}.key")),
        );
        std::fs::write(&cert_file, chain.concat()).unwrap();
        std::fs::write(&key_file, key).unwrap();
        for f in [&cert_file, &key_file] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let mut child = std::process::Command::new("timeout")
            .args(["10", "openssl", "s_client", "-quiet", "-connect"])
            .arg(format!("{SERVER_IP}:9080"))
            .arg("-cert")
            .arg(&cert_file)
            .arg("-key")
            .arg(&key_file)
            .args(["-alpn", "istio-http/1.1"])
            .uid(PROXY_UID)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run openssl");
        let _ = child.stdin.take().unwrap().write_all(
            b"GET /allowed HTTP/1.1\r\nHost: app.shop.svc.cluster.local\r\nConnection: close\r\n\r\n",
        );
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let own = probe("cluster.local");
    assert!(
        own.starts_with("HTTP/1.1 200"),
        "the mesh's own trust domain: {own}"
    );
    let foreign = probe("evil.example");
    assert!(
        !foreign.contains("200"),
        "a certificate of the mesh root for another trust domain: {foreign}"
    );
}

/// Each AuthorizationPolicy key in turn on the server's sidecar, each case proven by requests
/// through both sidecars: the first probe of a case differs from the previous case's answer, so
/// waiting for it waits for the new policy.
fn authorization_keys_through_real_sidecars(cfg: &Path, app: SocketAddr, host: &str) {
    let base = MTLS_MESH
        .split("---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy")
        .next()
        .unwrap();
    type Probe<'a> = (&'a str, &'a [(&'a str, &'a str)], u16);
    let cases: &[(&str, &[Probe])] = &[
        (
            "rules: [{from: [{source: {principals: [cluster.local/ns/shop/sa/client]}}]}]",
            &[("/other", &[], 200)],
        ),
        (
            "rules: [{from: [{source: {principals: [cluster.local/ns/shop/sa/other]}}]}]",
            &[("/other", &[], 403)],
        ),
        (
            "rules: [{from: [{source: {serviceAccounts: [shop/client]}}]}]",
            &[("/other", &[], 200)],
        ),
        (
            "rules: [{from: [{source: {serviceAccounts: [shop/other]}}]}]",
            &[("/other", &[], 403)],
        ),
        (
            "rules: [{when: [{key: 'request.headers[x-team]', values: [blue]}]}]",
            &[
                ("/", &[("x-team", "blue")], 200),
                ("/", &[("x-team", "red")], 403),
                ("/", &[], 403),
            ],
        ),
        (
            "rules: [{from: [{source: {namespaces: [shop]}}]}]",
            &[("/", &[], 200)],
        ),
        (
            "rules: [{when: [{key: connection.sni, values: ['outbound_.9080_._.app.example.org']}]}]",
            &[("/", &[], 403)],
        ),
        (
            "rules: [{when: [{key: connection.sni, values: ['outbound_.9080_._.app.shop.svc.cluster.local']}]}]",
            &[("/", &[], 200)],
        ),
        // Another filter's metadata (none here sets it): Envoy takes the rule, which admits nobody.
        (
            "rules: [{when: [{key: 'experimental.envoy.filters.network.mysql_proxy[db.table]', values: ['[update]']}]}]",
            &[("/", &[], 403)],
        ),
        (
            "rules: [{from: [{source: {namespaces: [other]}}]}]",
            &[("/", &[], 403)],
        ),
        (
            "action: DENY\n  rules: [{to: [{operation: {paths: [/admin]}}]}]",
            &[
                ("/ok", &[], 200),
                ("/admin", &[], 403),
                // Normalized before matching (meshConfig pathNormalization BASE).
                ("/x/../admin", &[], 403),
            ],
        ),
    ];
    for (rules, probes) in cases {
        let policy = format!(
            "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: app, namespace: shop}}\nspec:\n  selector: {{matchLabels: {{app: server}}}}\n  {rules}\n"
        );
        write(cfg, "mesh.yaml", &format!("{base}{policy}"));
        let (path, headers, want) = probes[0];
        eventually(30, rules, || request_at(app, host, path, headers).0 == want);
        for (path, headers, want) in &probes[1..] {
            assert_eq!(
                request_at(app, host, path, headers).0,
                *want,
                "{rules}: {path} {headers:?}"
            );
        }
    }
}

/// The server's namespace turns mTLS off (PeerAuthentication DISABLE): the client's automatic
/// mTLS follows, as istiod's, and sends plain text, which the server now serves. Sending mTLS
/// still, the request would meet a server that no longer terminates it. Plain text carries no
/// caller certificate, so the application sees no client identity.
fn plain_text_to_a_workload_that_disables_mtls(cfg: &Path, app: SocketAddr, host: &str) {
    let base = MTLS_MESH
        .split("---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy")
        .next()
        .unwrap()
        .replace(
            "spec: {mtls: {mode: STRICT}}",
            "spec: {mtls: {mode: DISABLE}}",
        );
    write(cfg, "mesh.yaml", &base);
    let mut last = (0, String::new());
    let probe = |last: &mut (u16, String)| {
        *last = request_at(
            app,
            host,
            "/plain",
            &[("x-echo-headers", "x-forwarded-client-cert")],
        );
        last.0 == 200 && !last.1.contains("spiffe://")
    };
    eventually(30, "plain text to the DISABLE workload", || {
        probe(&mut last)
    });
    assert!(probe(&mut last), "{last:?}");
}

/// A Sidecar's `ingress` listener defines the inbound port and sends it to its `defaultEndpoint`
/// (here an application listening on localhost only), where no service names the port; ports
/// nothing declares pass through to the application, but only as the workload's
/// PeerAuthentication allows.
#[test]
fn sidecar_ingress_listener_serves_its_default_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "sidecar.yaml",
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: server, namespace: shop}
spec:
  workloadSelector: {labels: {app: server}}
  ingress:
  - port: {number: 9090, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:7070
"#,
    );
    let apps = [
        ("127.0.0.1:7070".to_string(), "local-app"),
        (format!("{SERVER_IP}:9999"), "unlisted"),
    ];
    with_a_captured_server(dir.path(), &apps, |last| {
        let target: SocketAddr = format!("{SERVER_IP}:9090").parse().unwrap();
        eventually(
            30,
            "the ingress listener's default endpoint answers",
            || {
                *last = request_at(target, "server", "/hi", &[]);
                *last == (200, "local-app /hi".into())
            },
        );
        // A port nothing declares passes through to the application (from 127.0.0.6, which
        // the capture rules let by)...
        let unlisted: SocketAddr = format!("{SERVER_IP}:9999").parse().unwrap();
        assert_eq!(
            request_at(unlisted, "server", "/u", &[]),
            (200, "unlisted /u".into())
        );
        // ...until the workload is STRICT: then plaintext is refused there too (the sidecar
        // has no certificate here, so nothing passes), while the port the policy keeps
        // PERMISSIVE still answers.
        write(
            dir.path(),
            "strict.yaml",
            "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: server, namespace: shop}\n\
spec: {selector: {matchLabels: {app: server}}, mtls: {mode: STRICT}, portLevelMtls: {9090: {mode: PERMISSIVE}}}\n",
        );
        eventually(30, "STRICT closes the undeclared port", || {
            request_at(unlisted, "server", "/u", &[]).0 == 0
        });
        assert_eq!(
            request_at(target, "server", "/hi", &[]),
            (200, "local-app /hi".into())
        );
    });
}

/// MeshConfig `inboundTrafficPolicy`: by default (PASSTHROUGH) a service's inbound traffic
/// reaches the application at the pod's address, so an application listening on localhost only
/// is not reached (503); with `LOCALHOST` it is, as istiod delivers to 127.0.0.1 then.
#[test]
fn inbound_traffic_policy_localhost_reaches_a_localhost_application() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "app.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: app, namespace: shop}}\n\
spec: {{hosts: [app.shop.svc.cluster.local], location: MESH_INTERNAL, resolution: STATIC, \
ports: [{{number: 9090, name: http, protocol: HTTP}}], endpoints: [{{address: {SERVER_IP}, labels: {{app: server}}}}]}}\n"
        ),
    );
    let apps = [("127.0.0.1:9090".to_string(), "local-app")];
    with_a_captured_server(dir.path(), &apps, |last| {
        let target: SocketAddr = format!("{SERVER_IP}:9090").parse().unwrap();
        let host = "app.shop.svc.cluster.local";
        eventually(30, "the sidecar answers for the pod's address", || {
            *last = request_at(target, host, "/a", &[]);
            last.0 == 503
        });
        write(
            dir.path(),
            "mesh.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    inboundTrafficPolicy: {mode: LOCALHOST}\n",
        );
        eventually(30, "LOCALHOST reaches the application on localhost", || {
            *last = request_at(target, host, "/b", &[]);
            *last == (200, "local-app /b".into())
        });
    });
}

/// A captured server pod whose sidecar (`server-0`, labelled `app: server`) a daemon in the
/// client pod feeds from `dir`, with `apps` (address, name) listening in it; `check` runs in the
/// client pod once both are up, keeping its last answer in the `(status, body)` it is given,
/// which is printed when it fails. Returns at once without Envoy or network namespaces.
fn with_a_captured_server(
    dir: &Path,
    apps: &[(String, &'static str)],
    check: impl FnOnce(&mut (u16, String)) + Send,
) {
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let client = Pod::new(CLIENT_IP);
    let server = Pod::new(SERVER_IP);
    netns::link(&client, &server);
    server.capture(&[]);
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (client, server, envoy) = (&client, &server, &envoy);
    std::thread::scope(|s| {
        s.spawn(move || {
            server.enter();
            let _apps: Vec<Backend> = apps
                .iter()
                .map(|(addr, name)| Backend::start_on(addr, name))
                .collect();
            up_rx.recv().unwrap();
            let _envoy = Envoy::boot(
                envoy,
                SocketAddr::from(([10, 44, 0, 2], XDS_PORT)),
                &Bootstrap {
                    namespace: "shop",
                    pod: "server-0",
                    labels: "app: server",
                    metadata: "",
                    ip: SERVER_IP,
                    uid: Some(PROXY_UID),
                    ..Bootstrap::default()
                },
            );
            let _ = done_rx.recv();
        });
        s.spawn(move || {
            client.enter();
            let _daemon = Daemon::start_on(dir, &format!("0.0.0.0:{XDS_PORT}"), &[]);
            up_tx.send(()).unwrap();
            let mut last = (0, String::new());
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&mut last)));
            let _ = done_tx.send(());
            if let Err(e) = outcome {
                eprintln!("last answer: {last:?}");
                std::panic::resume_unwind(e);
            }
        });
    });
}

/// Debug endpoints from another pod need a bearer token of the system namespace (as istiod);
/// from localhost, and `/metrics` from anywhere, they do not.
#[test]
fn debug_endpoints_need_a_system_namespace_token_from_other_pods() {
    if !netns::available() {
        return;
    }
    let control = Pod::new(CLIENT_IP);
    let other = Pod::new(SERVER_IP);
    netns::link(&control, &other);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    let tokens = dir.path().join("tokens.yaml");
    std::fs::write(
        &tokens,
        "ops-token: istio-system/admin\napp-token: shop/app\n",
    )
    .unwrap();
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (control, other, cfg, tokens) = (&control, &other, &cfg, &tokens);
    std::thread::scope(|s| {
        s.spawn(move || {
            control.enter();
            let daemon = Daemon::start_on(
                cfg,
                "127.0.0.1:0",
                &[
                    "--monitoring-addr",
                    "0.0.0.0:15014",
                    "--ca-token-file",
                    tokens.to_str().unwrap(),
                ],
            );
            eventually(30, "ready", || {
                common::http_get(daemon.addr("http"), "/ready").0 == 200
            });
            let local = SocketAddr::from(([127, 0, 0, 1], 15014));
            assert_eq!(
                common::http_get(local, "/debug/configz").0,
                200,
                "localhost"
            );
            up_tx.send(()).unwrap();
            let _ = done_rx.recv();
        });
        s.spawn(move || {
            other.enter();
            up_rx.recv().unwrap();
            let remote: SocketAddr = format!("{CLIENT_IP}:15014").parse().unwrap();
            let outcome = std::panic::catch_unwind(|| {
                let get = |path: &str, token: Option<&str>| {
                    let headers: Vec<(&str, String)> = token
                        .map(|t| vec![("authorization", format!("Bearer {t}"))])
                        .unwrap_or_default();
                    let headers: Vec<(&str, &str)> =
                        headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    request_at(remote, "istiod", path, &headers).0
                };
                assert_eq!(get("/metrics", None), 200, "metrics stay open");
                assert_eq!(get("/debug/configz", None), 401);
                assert_eq!(get("/debug/log", Some("forged")), 401);
                assert_eq!(get("/debug/configz", Some("app-token")), 403);
                assert_eq!(get("/debug/configz", Some("ops-token")), 200);
            });
            let _ = done_tx.send(());
            if let Err(e) = outcome {
                std::panic::resume_unwind(e);
            }
        });
    });
}

const REGISTRY_ONLY_MESH: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: shop}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 8080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.3}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: sniffed, namespace: shop}
spec:
  hosts: [sniffed.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 8081, name: web}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.3}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"#;

/// REGISTRY_ONLY through a captured sidecar, as istiod answers: a host the registry knows is
/// served on its port (declared HTTP, or sniffed without a VIP), any other host on that port gets
/// 502 from the `block_all` virtual host, and a port no service uses is closed.
#[test]
fn registry_only_answers_502_for_unknown_hosts_on_known_ports() {
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let client = Pod::new(CLIENT_IP);
    let server = Pod::new(SERVER_IP);
    netns::link(&client, &server);
    client.capture(&[XDS_PORT]);
    let _backends = server.run(|| {
        [
            Backend::start_on(&format!("{SERVER_IP}:8080"), "api"),
            Backend::start_on(&format!("{SERVER_IP}:8081"), "sniffed"),
            Backend::start_on(&format!("{SERVER_IP}:8082"), "unlisted"),
        ]
    });
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "mesh.yaml", REGISTRY_ONLY_MESH);
    client.run(|| {
        let _daemon = Daemon::start_on(dir.path(), &format!("0.0.0.0:{XDS_PORT}"), &[]);
        let _envoy = Envoy::boot(
            &envoy,
            SocketAddr::from(([127, 0, 0, 1], XDS_PORT)),
            &Bootstrap {
                namespace: "shop",
                metadata: "",
                ip: CLIENT_IP,
                uid: Some(PROXY_UID),
                ..Bootstrap::default()
            },
        );
        let at = |port: u16| SocketAddr::from(([10, 44, 0, 3], port));
        eventually(30, "the registered host is served", || {
            let got = request_at(at(8080), "api.example.com", "/a", &[]);
            if got.1 != "api /a" {
                eprintln!("registered host answered {got:?}");
            }
            got.1 == "api /a"
        });
        let unknown = request_at(at(8080), "other.example.org", "/a", &[]);
        assert_eq!(unknown.0, 502, "unknown host on a known port: {unknown:?}");
        let sniffed = request_at(at(8081), "sniffed.example.com", "/b", &[]);
        assert_eq!(sniffed.1, "sniffed /b", "sniffed known host: {sniffed:?}");
        let unknown = request_at(at(8081), "other.example.org", "/b", &[]);
        assert_eq!(
            unknown.0, 502,
            "unknown host on a sniffed port: {unknown:?}"
        );
        let unlisted = request_at(at(8082), "other.example.org", "/c", &[]);
        assert_eq!(
            unlisted.0, 0,
            "a port no service uses is closed: {unlisted:?}"
        );
    });
}

/// Two headless services (resolution NONE, no VIP: StatefulSets such as Kafka and ZooKeeper) on
/// one TCP port, each pod at an address of its own. As istiod, each endpoint gets its own outbound
/// listener (`<podIP>_<port>`), so a connection to a pod's address (what `kafka-0.kafka.…`
/// resolves to) is served with that pod's service's config. Before, both services shared the
/// port's wildcard listener and the first took every connection: here the second's TCP route
/// (to a port of its own) was never applied.
const HEADLESS: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: kafka, namespace: shop}
spec:
  hosts: [kafka.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 9092, name: tcp-kafka, protocol: TCP}]
  resolution: NONE
  workloadSelector: {labels: {app: kafka}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: kafka-0, namespace: shop}
spec: {address: 10.44.0.3, labels: {app: kafka}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zk, namespace: shop}
spec:
  hosts: [zk.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 9092, name: tcp-zk, protocol: TCP}]
  resolution: NONE
  workloadSelector: {labels: {app: zk}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: zk-0, namespace: shop}
spec: {address: 10.44.0.4, labels: {app: zk}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zk-admin, namespace: shop}
spec:
  hosts: [zk-admin.shop.svc.cluster.local]
  addresses: [10.96.0.30]
  location: MESH_INTERNAL
  ports: [{number: 9093, name: tcp-admin, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.44.0.4}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: zk, namespace: shop}
spec:
  hosts: [zk.shop.svc.cluster.local]
  tcp:
  - route: [{destination: {host: zk-admin.shop.svc.cluster.local, port: {number: 9093}}}]
"#;

#[test]
fn each_pod_of_a_headless_service_is_reached_as_itself() {
    let Some(envoy) = envoy_binary() else { return };
    if !netns::available() {
        return;
    }
    let client = Pod::new(CLIENT_IP);
    let server = Pod::new(SERVER_IP);
    netns::link(&client, &server);
    // A second pod address on the server side (its own StatefulSet's pod).
    server.run(|| {
        let out = std::process::Command::new("ip")
            .args(["addr", "add", "10.44.0.4/32", "dev", "lo"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    client.capture(&[XDS_PORT]);
    server.run(|| {
        reporter("10.44.0.3:9092", "kafka-0\n");
        reporter("10.44.0.4:9092", "zk-0\n");
        reporter("10.44.0.4:9093", "zk-admin\n");
    });
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "mesh.yaml", HEADLESS);
    client.run(|| {
        let daemon = Daemon::start_on(dir.path(), &format!("0.0.0.0:{XDS_PORT}"), &[]);
        let _envoy = Envoy::boot(
            &envoy,
            SocketAddr::from(([127, 0, 0, 1], XDS_PORT)),
            &Bootstrap {
                namespace: "shop",
                metadata: "",
                ip: CLIENT_IP,
                uid: Some(PROXY_UID),
                ..Bootstrap::default()
            },
        );
        eventually(30, "the second headless service's route", || {
            exchange("10.44.0.4:9092", b"hi\r\n") == "zk-admin"
        });
        assert_eq!(exchange("10.44.0.3:9092", b"hi\r\n"), "kafka-0");
        let (_, dump) = common::http_get(
            daemon.addr("monitoring"),
            "/debug/config_dump?proxyID=client-0.shop&types=lds",
        );
        for name in ["10.44.0.3_9092", "10.44.0.4_9092"] {
            assert!(dump.contains(name), "no listener {name}");
        }
    });
}
