//! Real Envoy 1.40 sidecars (SotW and Delta ADS) routing real HTTP traffic with config from Rudder.

use crate::common;
use crate::common::peers::{
    Backend, Bootstrap, Envoy, TlsServer, free_port, peer, request, request_full, tally,
};
use crate::common::{Daemon, eventually, http_get, metric, write};

const NS: &str = "shop";
const HOST: &str = "web.shop.svc.cluster.local";

fn services(port: u16, entries: &[(&str, &str, u16)]) -> String {
    let mut y = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  workloadSelector: {{labels: {{app: web}}}}\n"
    );
    for (name, version, backend) in entries {
        y.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: \"{name}\", namespace: {NS}}}\nspec: {{address: 127.0.0.1, ports: {{http: {backend}}}, labels: {{app: web, version: \"{version}\"}}}}\n"
        ));
    }
    y.push_str(&format!(
        "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  host: web\n  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]\n"
    ));
    y
}

fn routing(w1: i32, w2: i32) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [web]
  http:
  - name: header-to-v2
    match: [{{headers: {{x-version: {{exact: v2}}}}}}]
    route: [{{destination: {{host: web, subset: v2}}}}]
  - name: api-to-v2
    match: [{{uri: {{prefix: /api}}}}]
    route: [{{destination: {{host: web, subset: v2}}}}]
  - name: fault
    match: [{{uri: {{exact: /teapot}}}}]
    fault: {{abort: {{httpStatus: 418, percentage: {{value: 100}}}}}}
    route: [{{destination: {{host: web, subset: v1}}}}]
  - name: slow
    match: [{{uri: {{exact: /slow}}}}]
    fault: {{delay: {{fixedDelay: 400ms, percentage: {{value: 100}}}}}}
    route: [{{destination: {{host: web, subset: v1}}}}]
  - name: split
    route:
    - {{destination: {{host: web, subset: v1}}, weight: {w1}}}
    - {{destination: {{host: web, subset: v2}}, weight: {w2}}}
"#
    )
}

fn connection_ids(daemon: &Daemon) -> Vec<String> {
    let (_, body) = http_get(daemon.addr("monitoring"), "/debug/adsz");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn only(counts: &std::collections::BTreeMap<String, usize>, name: &str) -> bool {
    counts.len() == 1 && counts.contains_key(name)
}

fn scenario(delta: bool) {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (v1, v2, v2b) = (
        Backend::start("v1"),
        Backend::start("v2"),
        Backend::start("v2b"),
    );
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(
            port,
            &[("web-v1", "v1", v1.port), ("web-v2", "v2", v2.port)],
        ),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, delta);

    eventually(30, "envoy routes to v1", || {
        request(port, HOST, "/", &[]).1.starts_with("v1 ")
    });
    assert!(
        only(&tally(port, HOST, "/", &[], 20), "v1"),
        "weight 100/0 sends everything to v1"
    );
    assert!(
        only(
            &tally(
                port,
                &format!("web.shop:{port}"),
                "/",
                &[("x-version", "v2")],
                10
            ),
            "v2"
        ),
        "header match to subset v2 (short host domain)"
    );
    assert!(
        only(&tally(port, HOST, "/api/items", &[], 10), "v2"),
        "prefix match"
    );
    assert_eq!(
        request(port, HOST, "/teapot", &[]).0,
        418,
        "fault injection abort"
    );
    let conns = connection_ids(&daemon);
    assert_eq!(conns.len(), 1);

    // Shift the split: converges without the proxy reconnecting.
    write(dir.path(), "routing.yaml", &routing(0, 100));
    eventually(30, "split moved to v2", || {
        only(&tally(port, HOST, "/", &[], 10), "v2")
    });
    write(dir.path(), "routing.yaml", &routing(50, 50));
    eventually(30, "50/50 reaches both", || {
        tally(port, HOST, "/", &[], 40).len() == 2
    });
    assert_eq!(connection_ids(&daemon), conns, "same ADS stream throughout");
    assert!(
        metric(&daemon, "rudder_xds_cache_reads_total{type=\"kept\"}") > 0.0,
        "a route change sends the clusters and endpoints the push before built, not rebuilt"
    );

    // Endpoint add and remove reach the proxy through EDS-only pushes.
    let eds_pushes = metric(&daemon, "pilot_push_triggers{type=\"endpoint\"}");
    write(
        dir.path(),
        "services.yaml",
        &services(
            port,
            &[
                ("web-v1", "v1", v1.port),
                ("web-v2", "v2", v2.port),
                ("web-v2b", "v2", v2b.port),
            ],
        ),
    );
    eventually(30, "new endpoint serves", || {
        tally(port, HOST, "/", &[("x-version", "v2")], 30).contains_key("v2b")
    });
    write(
        dir.path(),
        "services.yaml",
        &services(
            port,
            &[("web-v1", "v1", v1.port), ("web-v2", "v2", v2.port)],
        ),
    );
    eventually(30, "removed endpoint gone", || {
        only(&tally(port, HOST, "/", &[("x-version", "v2")], 20), "v2")
    });
    assert!(
        metric(&daemon, "pilot_push_triggers{type=\"endpoint\"}") >= eds_pushes + 2.0,
        "endpoint changes were EDS-only pushes"
    );

    // An invalid object never reaches the proxy: the file is rejected and routing stays as it was.
    write(dir.path(), "routing.yaml", &routing(0, 0));
    eventually(30, "bad file reported", || {
        http_get(daemon.addr("monitoring"), "/debug/sources")
            .1
            .contains("total destination weight = 0")
    });
    assert_eq!(
        tally(port, HOST, "/", &[], 40).len(),
        2,
        "still the last good 50/50 split"
    );
    assert_eq!(
        metric(&daemon, "pilot_total_xds_rejects"),
        0.0,
        "Envoy never had to reject anything"
    );
    let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
    assert!(!syncz.contains("NACKED"), "{syncz}");
}

#[test]
fn envoy_sotw_routes_shifts_injects_faults_and_follows_endpoints() {
    scenario(false);
}

#[test]
fn envoy_delta_routes_shifts_injects_faults_and_follows_endpoints() {
    scenario(true);
}

/// Envoy keeps its last config while the control plane is down, reconnects, and takes new config.
#[test]
fn envoy_reconnects_after_control_plane_restart() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (v1, v2) = (Backend::start("v1"), Backend::start("v2"));
    let port = free_port();
    let grpc = format!("127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(
            port,
            &[("web-v1", "v1", v1.port), ("web-v2", "v2", v2.port)],
        ),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    let daemon = Daemon::start_on(dir.path(), &grpc, &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "envoy routes to v1", || {
        request(port, HOST, "/", &[]).1.starts_with("v1 ")
    });

    assert!(daemon.terminate().success());
    assert!(
        only(&tally(port, HOST, "/", &[], 10), "v1"),
        "traffic keeps flowing on the last config"
    );
    write(dir.path(), "routing.yaml", &routing(0, 100));
    let daemon = Daemon::start_on(dir.path(), &grpc, &["--debounce-after", "20ms"]);
    eventually(60, "reconnected envoy takes the new config", || {
        only(&tally(port, HOST, "/", &[], 10), "v2")
    });
    assert_eq!(connection_ids(&daemon).len(), 1);
}

/// With iptables interception (Istio's default), listeners are the virtual outbound/inbound pair plus
/// per-port listeners that do not bind; Envoy must accept every type, including the inbound chains for
/// its own service ports.
#[test]
fn envoy_accepts_redirect_mode_listeners() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    // The sidecar's own address (127.0.0.1) is an endpoint of `web`: it gets an inbound chain for it.
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", 18080), ("web-v2", "v2", 18081)]),
    );
    write(dir.path(), "routing.yaml", &routing(50, 50));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start_with(&envoy_bin, daemon.addr("grpc-xds"), NS, false, "");
    eventually(30, "every type ACKed", || {
        let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
        ["cds", "eds", "lds", "rds"]
            .iter()
            .all(|t| syncz.contains(&format!("\"{t}\":{{\"acked\"")))
            && syncz.matches("SYNCED").count() == 4
    });
    let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
    assert!(!syncz.contains("NACKED"), "{syncz}");
    let (_, listeners) = http_get(envoy.admin, "/listeners");
    for name in [
        "virtualOutbound",
        "virtualInbound",
        &format!("0.0.0.0_{port}"),
    ] {
        assert!(listeners.contains(name), "{name} missing from {listeners}");
    }
    let (_, clusters) = http_get(envoy.admin, "/clusters");
    assert!(
        clusters.contains("inbound|18080||"),
        "inbound cluster for the sidecar's own port"
    );
}

/// Connection-pool settings that need an upstream protocol (per-connection request caps, idle
/// timeouts, stream limits, following the client's protocol) are accepted by Envoy on a plain
/// HTTP/1.1 service and traffic still flows; Envoy rejects the cluster if the protocol is left unset.
#[test]
fn envoy_accepts_http1_connection_pool_settings() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let with_pool = |pool: &str| {
        services(port, &[("web-v1", "v1", v1.port)]).replace(
            "  subsets:",
            &format!("  trafficPolicy: {{connectionPool: {pool}}}\n  subsets:"),
        )
    };
    write(
        dir.path(),
        "services.yaml",
        &with_pool(
            "{tcp: {idleTimeout: 30s}, http: {maxRequestsPerConnection: 1, maxConcurrentStreams: 10}}",
        ),
    );
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "envoy routes to v1", || {
        request(port, HOST, "/", &[]).1.starts_with("v1 ")
    });
    assert!(only(&tally(port, HOST, "/", &[], 5), "v1"));
    let (_, clusters) = http_get(envoy.admin, "/config_dump?resource=dynamic_active_clusters");
    assert!(
        clusters.contains("max_requests_per_connection"),
        "{clusters}"
    );

    write(
        dir.path(),
        "services.yaml",
        &with_pool("{http: {maxRequestsPerConnection: 2, useClientProtocol: true}}"),
    );
    eventually(30, "client-protocol cluster applied", || {
        let (_, clusters) = http_get(envoy.admin, "/config_dump?resource=dynamic_active_clusters");
        clusters.contains("use_downstream_protocol_config")
    });
    assert!(only(&tally(port, HOST, "/", &[], 5), "v1"));
    let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
    assert!(!syncz.contains("NACKED"), "{syncz}");
}

/// DestinationRule TLS origination verifies the server as istiod configures it: against
/// `caCertificates`, else the system roots (a self-signed server is refused, never trusted
/// blindly), for the requested host when nothing pins it (automatic SNI and SAN validation),
/// with `subjectAltNames` pinned; only `insecureSkipVerify` turns verification off.
#[test]
fn envoy_originates_tls_and_verifies_the_server() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let server = TlsServer::start(certs.path(), HOST);
    let ca = certs.path().join("server.pem");
    let port = free_port();
    let with_tls = |tls: &str| {
        services(port, &[("web-v1", "v1", server.port)]).replace(
            "  subsets:",
            &format!("  trafficPolicy: {{tls: {tls}}}\n  subsets:"),
        )
    };
    write(dir.path(), "services.yaml", &with_tls("{mode: SIMPLE}"));
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "cluster warmed", || {
        let (_, clusters) = http_get(envoy.admin, "/clusters");
        clusters.contains(&format!("outbound|{port}||{HOST}"))
    });
    let status = |path: &str| request(port, HOST, path, &[]).0;
    eventually(30, "listener serving", || status("/") != 0);
    assert_eq!(
        status("/"),
        503,
        "a self-signed server is not in the system roots"
    );

    let trusted = format!("{{mode: SIMPLE, caCertificates: {}}}", ca.display());
    write(dir.path(), "services.yaml", &with_tls(&trusted));
    eventually(30, "server verified against caCertificates", || {
        status("/") == 200
    });

    // Automatic SAN validation (istiod's VERIFY_CERTIFICATE_AT_CLIENT, on by default): the same
    // server reached as another host, with no `sni` or `subjectAltNames`, must present a
    // certificate for that host; a certificate of a trusted CA for another name is refused.
    let alias = "alias.shop.svc.cluster.local";
    write(
        dir.path(),
        "alias.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: alias, namespace: {NS}}}\nspec:\n  hosts: [{alias}]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {}}}}}]\n---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: alias, namespace: {NS}}}\nspec:\n  host: {alias}\n  trafficPolicy: {{tls: {trusted}}}\n",
            server.port
        ),
    );
    eventually(30, "the alias is routed", || {
        request(port, alias, "/", &[]).0 != 404 && request(port, alias, "/", &[]).0 != 0
    });
    assert_eq!(
        request(port, alias, "/", &[]).0,
        503,
        "a trusted certificate for another name"
    );
    assert_eq!(status("/"), 200, "the server's own name still verifies");

    let pinned = format!(
        "{{mode: SIMPLE, caCertificates: {}, subjectAltNames: [other.example.com]}}",
        ca.display()
    );
    write(dir.path(), "services.yaml", &with_tls(&pinned));
    eventually(30, "a server with another name is refused", || {
        status("/") == 503
    });

    write(
        dir.path(),
        "services.yaml",
        &with_tls("{mode: SIMPLE, insecureSkipVerify: true}"),
    );
    eventually(30, "insecureSkipVerify accepts any server", || {
        status("/") == 200
    });
    let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
    assert!(!syncz.contains("NACKED"), "{syncz}");
}

/// A DestinationRule edit that changes only clusters applies at once: endpoints are resent with
/// the updated clusters, so Envoy does not keep them warming (and the old policy serving) until
/// its 15 s initial-fetch timeout. Both protocols.
fn cluster_update_applies_without_warming_timeout(delta: bool) {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let with_policy = |policy: &str| {
        services(port, &[("web-v1", "v1", v1.port)]).replace(
            "  subsets:",
            &format!("  trafficPolicy: {policy}\n  subsets:"),
        )
    };
    write(
        dir.path(),
        "services.yaml",
        &with_policy("{connectionPool: {http: {maxRetries: 3}}}"),
    );
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, delta);
    eventually(30, "envoy routes to v1", || {
        request(port, HOST, "/", &[]).1.starts_with("v1 ")
    });
    write(
        dir.path(),
        "services.yaml",
        &with_policy("{connectionPool: {http: {maxRetries: 7}}}"),
    );
    // Well inside Envoy's 15 s warming timeout: the edit is not waiting for it.
    eventually(5, "updated cluster active", || {
        let (_, clusters) = http_get(envoy.admin, "/config_dump?resource=dynamic_active_clusters");
        clusters.contains("\"max_retries\": 7")
    });
    let (_, warming) = http_get(
        envoy.admin,
        "/config_dump?resource=dynamic_warming_clusters",
    );
    assert!(!warming.contains("outbound|"), "{warming}");
    assert!(only(&tally(port, HOST, "/", &[], 5), "v1"));
}

#[test]
fn envoy_sotw_applies_cluster_updates_without_warming_timeout() {
    cluster_update_applies_without_warming_timeout(false);
}

#[test]
fn envoy_delta_applies_cluster_updates_without_warming_timeout() {
    cluster_update_applies_without_warming_timeout(true);
}

/// A backend that accepts a WebSocket upgrade (101) and then echoes what it receives.
fn websocket_backend() -> u16 {
    use std::io::{BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if common::peers::read_request_head(&mut reader).is_none() {
                    return;
                }
                let mut writer = stream;
                let _ = writer.write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                );
                let mut buf = [0u8; 1024];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 || writer.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// WebSocket upgrades pass through the sidecar (istiod enables them on every HTTP connection
/// manager), and a VirtualService `corsPolicy` is answered by Envoy: a matching preflight never
/// reaches the backend, a matching request gets the allow-origin header.
#[test]
fn envoy_passes_websocket_upgrades_and_applies_cors_policies() {
    use std::io::{Read, Write};
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let ws = websocket_backend();
    let web = Backend::start("web");
    let (ws_port, web_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mesh.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: ws, namespace: {NS}}}
spec:
  hosts: [ws.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{{number: {ws_port}, name: http, protocol: HTTP, targetPort: {ws}}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [{HOST}]
  location: MESH_INTERNAL
  ports: [{{number: {web_port}, name: http, protocol: HTTP, targetPort: {}}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [web]
  http:
  - corsPolicy:
      allowOrigins: [{{exact: "https://shop.example"}}]
      allowMethods: [GET, POST]
      maxAge: 24h
    route: [{{destination: {{host: web}}}}]
"#,
            web.port
        ),
    );
    let daemon = Daemon::start(dir.path(), &[]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "envoy routes to web", || {
        request(web_port, HOST, "/", &[]).1 == "web /"
    });

    // CORS: a matching preflight is answered by Envoy itself.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", web_port)).unwrap();
    write!(
        s,
        "OPTIONS /cart HTTP/1.1\r\nHost: {HOST}\r\nOrigin: https://shop.example\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let lower = raw.to_ascii_lowercase();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(
        lower.contains("access-control-allow-origin: https://shop.example")
            && lower.contains("access-control-allow-methods: get,post")
            && lower.contains("access-control-max-age: 86400"),
        "{raw}"
    );
    assert!(
        !raw.contains("web /cart"),
        "the preflight reached the backend: {raw}"
    );

    // WebSocket: the upgrade goes through, then bytes flow both ways.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", ws_port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    write!(
        s,
        "GET /chat HTTP/1.1\r\nHost: ws.shop.svc.cluster.local\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s.write_all(b"ping").unwrap();
    let mut echoed = [0u8; 4];
    s.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"ping");
}

/// A backend answering `name <path>`, or 503 once `fails` is set.
fn failing_backend(name: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let fails = std::sync::Arc::new(AtomicBool::new(false));
    let flag = fails.clone();
    let (port, _) = scripted_backend(move |line, _| {
        let path = line.split_whitespace().nth(1).unwrap_or("/");
        if flag.load(Ordering::Relaxed) {
            (503, "down".into(), Default::default())
        } else {
            (200, format!("{name} {path}"), Default::default())
        }
    });
    (port, fails)
}

/// istio.io's locality failover task: with outlier detection on, a client in `us/east/a` sends
/// only to the endpoint in its own zone; when that endpoint fails, traffic fails over to the
/// region the DestinationRule names.
#[test]
fn envoy_prefers_its_own_locality_and_fails_over() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (local_port, local_fails) = failing_backend("local");
    let remote = Backend::start("remote");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mesh.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [{HOST}]
  location: MESH_INTERNAL
  ports: [{{number: {port}, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints:
  - {{address: 127.0.0.1, ports: {{http: {}}}, locality: us/east/a}}
  - {{address: 127.0.0.1, ports: {{http: {}}}, locality: eu/west/a}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: web, namespace: {NS}}}
spec:
  host: web
  trafficPolicy:
    outlierDetection: {{consecutive5xxErrors: 1, interval: 1s, baseEjectionTime: 1m, maxEjectionPercent: 100}}
    loadBalancer:
      localityLbSetting: {{enabled: true, failover: [{{from: us, to: eu}}]}}
"#,
            local_port, remote.port
        ),
    );
    let daemon = Daemon::start(dir.path(), &[]);
    let _envoy = Envoy::boot(
        &envoy_bin,
        daemon.addr("grpc-xds"),
        &Bootstrap {
            namespace: NS,
            labels: "app: client, istio-locality: us.east.a",
            ..Bootstrap::default()
        },
    );
    eventually(30, "envoy routes to web", || {
        request(port, HOST, "/", &[]).0 == 200
    });
    assert!(
        only(&tally(port, HOST, "/", &[], 20), "local"),
        "every request stays in the client's zone"
    );
    // The local endpoint starts failing: one 5xx ejects it (consecutive5xxErrors: 1).
    local_fails.store(true, std::sync::atomic::Ordering::Relaxed);
    eventually(15, "failover to eu", || {
        only(&tally(port, HOST, "/", &[], 5), "remote")
    });
}

/// A backend whose answer to each request (status, body, delay) `handle` decides from the request
/// line and headers; every request head is recorded in the returned log.
fn scripted_backend(
    handle: impl Fn(&str, &[String]) -> (u16, String, std::time::Duration) + Send + Sync + 'static,
) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (handle, seen) = (std::sync::Arc::new(handle), log.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (handle, seen) = (handle.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while let Some((line, headers)) = common::peers::read_request_head(&mut reader) {
                    seen.lock()
                        .unwrap()
                        .push(format!("{line}\n{}", headers.join("\n")));
                    let (status, body, delay) = handle(&line, &headers);
                    std::thread::sleep(delay);
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if writer.write_all(resp.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, log)
}

/// istio.io's request timeouts, circuit breaking and mirroring tasks, each checked by its
/// documented outcome: a slow backend answers 504 past the route's timeout; concurrent requests
/// beyond the connection pool get 503 from Envoy (`x-envoy-overloaded`); every request to v1 is
/// mirrored to v2 with the `-shadow` host, and only v1's answer comes back.
#[test]
fn envoy_applies_timeouts_circuit_breakers_and_mirrors() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let slow = |line: &str, _: &[String]| {
        let delay = if line.contains("/slow") { 1500 } else { 300 };
        (
            200,
            "slow".to_string(),
            std::time::Duration::from_millis(delay),
        )
    };
    let (slow_port, _) = scripted_backend(slow);
    let (v1_port, _) = scripted_backend(|_, _| (200, "v1".into(), Default::default()));
    let (v2_port, v2_seen) = scripted_backend(|_, _| (200, "v2".into(), Default::default()));
    let (slow_svc, web_svc) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mesh.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: slow, namespace: {NS}}}
spec:
  hosts: [slow.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{{number: {slow_svc}, name: http, protocol: HTTP, targetPort: {slow_port}}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: slow, namespace: {NS}}}
spec:
  hosts: [slow]
  http:
  - timeout: 0.5s
    route: [{{destination: {{host: slow}}}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: slow, namespace: {NS}}}
spec:
  host: slow
  trafficPolicy:
    connectionPool:
      tcp: {{maxConnections: 1}}
      http: {{http1MaxPendingRequests: 1, maxRequestsPerConnection: 1}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [{HOST}]
  location: MESH_INTERNAL
  ports: [{{number: {web_svc}, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints:
  - {{address: 127.0.0.1, ports: {{http: {v1_port}}}, labels: {{version: v1}}}}
  - {{address: 127.0.0.1, ports: {{http: {v2_port}}}, labels: {{version: v2}}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: web, namespace: {NS}}}
spec:
  host: web
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [web]
  http:
  - route: [{{destination: {{host: web, subset: v1}}, weight: 100}}]
    mirror: {{host: web, subset: v2}}
    mirrorPercentage: {{value: 100.0}}
"#
        ),
    );
    let daemon = Daemon::start(dir.path(), &[]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    let slow_host = "slow.shop.svc.cluster.local";
    eventually(30, "envoy routes to slow", || {
        request(slow_svc, slow_host, "/", &[]).0 == 200
    });

    // Request timeouts: past 0.5 s Envoy answers 504.
    assert_eq!(request(slow_svc, slow_host, "/slow", &[]).0, 504);

    // Circuit breaking: one connection, one pending request; the rest overflow with 503.
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| request(slow_svc, slow_host, "/", &[]).0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(statuses.contains(&503), "the pool overflowed: {statuses:?}");

    // Mirroring: v1 answers, v2 sees a copy with the shadow host.
    eventually(30, "envoy routes to web", || {
        request(web_svc, HOST, "/m", &[]) == (200, "v1".into())
    });
    eventually(10, "the mirror reached v2", || {
        v2_seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.starts_with("GET /m ") && r.contains("-shadow"))
    });
}

/// DestinationRule fields Envoy must accept and act on: slow start (`warmup`), a retry budget,
/// cookie attributes on consistent hashing, and a PROXY protocol header on upstream connections.
#[test]
fn envoy_applies_warmup_retry_budget_cookie_attributes_and_proxy_protocol() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (backend, seen) = scripted_backend(|_, _| (200, "ok".into(), Default::default()));
    let (port, other) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mesh.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [{HOST}]
  location: MESH_INTERNAL
  ports: [{{number: {port}, name: http, protocol: HTTP, targetPort: {backend}}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: web, namespace: {NS}}}
spec:
  host: web
  trafficPolicy:
    proxyProtocol: {{version: V1}}
    retryBudget: {{percent: 25, minRetryConcurrency: 5}}
    loadBalancer:
      simple: ROUND_ROBIN
      warmup: {{duration: 30s, minimumPercent: 20, aggression: 2}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: sticky, namespace: {NS}}}
spec:
  hosts: [sticky.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{{number: {other}, name: http, protocol: HTTP, targetPort: {backend}}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: sticky, namespace: {NS}}}
spec:
  host: sticky
  trafficPolicy:
    loadBalancer:
      consistentHash:
        httpCookie: {{name: session, ttl: 60s, attributes: [{{name: SameSite, value: Strict}}]}}
"#
        ),
    );
    let daemon = Daemon::start(dir.path(), &[]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "envoy routes to web", || {
        request(port, HOST, "/", &[]).0 == 200
    });
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|r| r.starts_with("PROXY TCP4 127.0.0.1 ")),
        "the upstream connection starts with a PROXY header"
    );
    let (_, clusters) = http_get(envoy.admin, "/config_dump?resource=dynamic_active_clusters");
    for want in ["slow_start_config", "retry_budget", "min_weight_percent"] {
        assert!(clusters.contains(want), "{want}: {clusters}");
    }
    // Cookie attributes: Envoy sets the session cookie with them.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", other)).unwrap();
    use std::io::{Read, Write};
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: sticky.shop.svc.cluster.local\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let lower = raw.to_ascii_lowercase();
    assert!(
        lower.contains("set-cookie: session=") && lower.contains("samesite=strict"),
        "{raw}"
    );
    let (_, syncz) = http_get(daemon.addr("monitoring"), "/debug/syncz");
    assert!(!syncz.contains("NACKED"), "{syncz}");
}

/// DestinationRule `tunnel`: TCP to the service goes through an HTTP CONNECT tunnel to the
/// target the rule names, the service's endpoint being the tunnel proxy.
#[test]
fn envoy_tunnels_tcp_through_http_connect() {
    use std::io::{BufRead, BufReader, Read, Write};
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    // A CONNECT proxy that records what it was asked for and then echoes the tunnelled bytes.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                let Some((line, _)) = common::peers::read_request_head(&mut reader) else {
                    return;
                };
                seen.lock().unwrap().push(line);
                let _ = writer.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
                let mut buf = String::new();
                while reader.read_line(&mut buf).unwrap_or(0) > 0 {
                    if writer.write_all(buf.as_bytes()).is_err() {
                        return;
                    }
                    buf.clear();
                }
            });
        }
    });
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mesh.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: db, namespace: {NS}}}
spec:
  hosts: [db.shop.svc.cluster.local]
  location: MESH_EXTERNAL
  ports: [{{number: {port}, name: tcp, protocol: TCP, targetPort: {proxy_port}}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: db, namespace: {NS}}}
spec:
  host: db.shop.svc.cluster.local
  trafficPolicy:
    tunnel: {{protocol: CONNECT, targetHost: db.internal.example, targetPort: 5432}}
"#
        ),
    );
    let daemon = Daemon::start(dir.path(), &[]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    let echo = || -> String {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return String::new();
        };
        s.set_read_timeout(Some(std::time::Duration::from_secs(3)))
            .unwrap();
        let _ = s.write_all(b"hello\n");
        let mut buf = [0u8; 16];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).to_string()
    };
    eventually(30, "bytes through the tunnel", || echo() == "hello\n");
    assert!(
        asked
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("CONNECT db.internal.example:5432 ")),
        "{:?}",
        asked.lock().unwrap()
    );
}

/// Two DestinationRules for one host in one namespace, each with one subset: istiod merges them,
/// so a route to either subset reaches its endpoints through a real Envoy (one rule winning would
/// leave the other subset without a cluster: 503).
#[test]
fn destination_rules_for_one_host_merge_their_subsets() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (v1, v2) = (Backend::start("v1"), Backend::start("v2"));
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let one_rule = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: web, namespace: shop}\nspec:\n  host: web\n  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]\n";
    let two_rules = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: web-v1, namespace: shop, creationTimestamp: \"2024-01-01T00:00:00Z\"}\nspec:\n  host: web\n  subsets: [{name: v1, labels: {version: v1}}]\n---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: web-v2, namespace: shop, creationTimestamp: \"2024-01-02T00:00:00Z\"}\nspec:\n  host: web\n  subsets: [{name: v2, labels: {version: v2}}]\n";
    let services = services(
        port,
        &[("web-v1", "v1", v1.port), ("web-v2", "v2", v2.port)],
    )
    .replace(one_rule, two_rules);
    assert!(services.contains("web-v2, namespace: shop"));
    write(dir.path(), "services.yaml", &services);
    write(dir.path(), "routing.yaml", &routing(100, 0));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "envoy routes to v1", || {
        request(port, HOST, "/", &[]).1.starts_with("v1 ")
    });
    assert!(
        only(&tally(port, HOST, "/", &[("x-version", "v2")], 10), "v2"),
        "subset v2 of the second rule is served"
    );
}

/// Header operations and hashing as istiod translates them, through a real Envoy: `:authority` in
/// `headers.request.set` rewrites the host (Envoy refuses it as a header); a single destination's
/// headers join the route's; weighted destinations set their own response headers; a subset's
/// consistent hash makes the route hash, so one user sticks to one endpoint.
#[test]
fn envoy_applies_header_operations_and_subset_hashing_as_istiod() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (v1, v1b, v2) = (
        Backend::start("v1"),
        Backend::start("v1b"),
        Backend::start("v2"),
    );
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let services = services(
        port,
        &[
            ("web-v1", "v1", v1.port),
            ("web-v1b", "v1", v1b.port),
            ("web-v2", "v2", v2.port),
        ],
    )
    .replace(
        "subsets: [{name: v1, labels: {version: v1}}",
        "subsets: [{name: v1, labels: {version: v1}, trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}}",
    );
    assert!(services.contains("x-user"));
    write(dir.path(), "services.yaml", &services);
    write(
        dir.path(),
        "routing.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: {NS}}}
spec:
  hosts: [web]
  http:
  - name: authority
    match: [{{uri: {{prefix: /authority}}, statPrefix: authority-stats}}]
    headers:
      request: {{set: {{":authority": rewritten.example, x-set: "1"}}}}
    route:
    - destination: {{host: web, subset: v2}}
      headers:
        request: {{add: {{x-dest: d1}}}}
        response: {{set: {{x-dest-resp: r1}}}}
  - name: weighted
    match: [{{uri: {{prefix: /weighted}}}}]
    headers:
      response: {{add: {{x-route: r}}}}
    route:
    - {{destination: {{host: web, subset: v1}}, weight: 50, headers: {{response: {{set: {{x-from: v1}}}}}}}}
    - {{destination: {{host: web, subset: v2}}, weight: 50, headers: {{response: {{set: {{x-from: v2}}}}}}}}
  - name: sticky
    route: [{{destination: {{host: web, subset: v1}}}}]
"#
        ),
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    let echo = [("x-echo-headers", "host,x-set,x-dest")];
    eventually(30, "the host is rewritten", || {
        let got = request_full(port, HOST, "/authority", &echo);
        if got.status != 200 {
            eprintln!("authority route answered {got:?}");
        }
        got.body == "v2 /authority host=rewritten.example x-set=1 x-dest=d1"
            && got.header("x-dest-resp") == Some("r1")
    });
    // The match's statPrefix names the route's statistics.
    let (_, stats) = http_get(envoy.admin, "/stats?filter=authority-stats");
    assert!(stats.contains(".route.authority-stats."), "{stats}");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let got = request_full(port, HOST, "/weighted", &[]);
        let backend = got.body.split(' ').next().unwrap_or_default().to_string();
        let from = got.header("x-from").unwrap_or_default();
        assert!(backend.starts_with(from) && !from.is_empty(), "{got:?}");
        assert_eq!(got.header("x-route"), Some("r"), "{got:?}");
        seen.insert(from.to_string());
    }
    assert_eq!(seen.len(), 2, "both weighted destinations answered");
    for user in ["alice", "bob", "carol"] {
        let backends = tally(port, HOST, "/sticky", &[("x-user", user)], 20);
        assert_eq!(
            backends.len(),
            1,
            "{user} stays on one endpoint: {backends:?}"
        );
    }
}

/// MeshConfig's access log through a real Envoy, as istiod configures it: `accessLogFile` with
/// Istio's text format, then `accessLogEncoding: JSON` with Istio's fields, switched at runtime.
#[test]
fn envoy_writes_the_mesh_access_log_in_istios_formats() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log_file = logs.path().join("access.log");
    let mesh = |extra: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    accessLogFile: {}\n{extra}",
            log_file.display()
        )
    };
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    write(dir.path(), "mesh.yaml", &mesh(""));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    let read = || std::fs::read_to_string(&log_file).unwrap_or_default();
    eventually(30, "a text access log line", || {
        request(port, HOST, "/logged", &[("user-agent", "rudder-test")]);
        read().lines().any(|l| {
            l.contains("\"GET /logged HTTP/1.1\" 200")
                && l.contains("\"rudder-test\"")
                && l.contains("outbound|")
                && l.ends_with(" split")
        })
    });
    write(
        dir.path(),
        "mesh.yaml",
        &mesh("    accessLogEncoding: JSON\n"),
    );
    eventually(30, "a JSON access log line", || {
        request(port, HOST, "/json", &[]);
        read().lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| {
                v["path"] == "/json" && v["response_code"] == 200 && v["route_name"] == "split"
            })
        })
    });
}

/// The Telemetry API's access logging through a real Envoy: a root-namespace Telemetry names a
/// MeshConfig file provider with JSON labels and a CEL filter (only failures are logged), then a
/// namespace Telemetry disables logging for the proxy's namespace.
#[test]
fn envoy_logs_as_telemetry_access_logging_says() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log_file = logs.path().join("telemetry.log");
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    write(
        dir.path(),
        "mesh.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: failures\n      envoyFileAccessLog:\n        path: {}\n        logFormat:\n          labels: {{path: \"%REQ(:PATH)%\", code: \"%RESPONSE_CODE%\"}}\n",
            log_file.display()
        ),
    );
    write(
        dir.path(),
        "telemetry.yaml",
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  accessLogging:\n  - providers: [{name: failures}]\n    filter: {expression: 'response.code >= 400'}\n",
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    let read = || std::fs::read_to_string(&log_file).unwrap_or_default();
    let lines = || -> Vec<serde_json::Value> {
        read()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    eventually(30, "the failed request is logged", || {
        request(port, HOST, "/fine", &[]);
        request(port, HOST, "/teapot", &[]);
        lines()
            .iter()
            .any(|v| v["path"] == "/teapot" && v["code"] == 418)
    });
    assert!(
        lines().iter().all(|v| v["path"] != "/fine"),
        "the CEL filter keeps successes out: {}",
        read()
    );
    write(
        dir.path(),
        "off.yaml",
        &format!(
            "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: quiet, namespace: {NS}}}\nspec:\n  accessLogging: [{{disabled: true}}]\n"
        ),
    );
    // Disabled for the namespace: once the change is in, failures are no longer logged.
    eventually(30, "logging disabled for the namespace", || {
        let before = lines().len();
        for _ in 0..3 {
            request(port, HOST, "/teapot", &[]);
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
        lines().len() == before
    });
}

/// Every shape of CEL expression Rudder's admission lets through (`validation::cel`), served in
/// a Telemetry access-log filter: a real Envoy accepts each one, so an admitted filter is never
/// a rejected config.
#[test]
fn envoy_accepts_every_cel_filter_rudder_admits() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    write(
        dir.path(),
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: stdout\n      envoyFileAccessLog: {path: /dev/stdout}\n",
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    for expression in [
        "response.code >= 500 || request.headers['x-debug'] == 'true'",
        "connection.mtls && request.url_path.startsWith('/api')",
        "!has(request.headers.authorization)",
        "xds.cluster_name == 'outbound|80||a.b.svc.cluster.local' ? true : false",
        "[1, 2, 3,].size() > 2 && {'a': 1.5e3, 'b': -2}.size() == 2",
        "r'raw\\d' != 'x' && b'\\x00\\101' != b'' && \"\\u00e9\" != ''",
        "int(response.code) in [200, 204] // a comment",
        "-9223372036854775808 < 0 && 0x1F == 31 && 3u > 2u && .1 < 1.0",
        "google.protobuf.Duration{seconds: 10} != null && 'x' + 'y' == 'xy'",
    ] {
        assert_eq!(
            rudder::validation::cel::check_for_envoy(expression),
            Ok(()),
            "{expression}"
        );
        write(
            dir.path(),
            "telemetry.yaml",
            &format!(
                "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  accessLogging:\n  - providers: [{{name: stdout}}]\n    filter: {{expression: {}}}\n",
                serde_json::to_string(expression).unwrap()
            ),
        );
        let marker = expression.split(' ').next().unwrap_or_default().to_string();
        eventually(30, "Envoy holds the filter", || {
            let (_, dump) = http_get(envoy.admin, "/config_dump?resource=dynamic_listeners");
            dump.contains("envoy.access_loggers.extension_filters.cel")
                && dump.contains(&marker.replace('\\', "\\\\").replace('"', "\\\""))
        });
        assert_eq!(
            common::metric(&daemon, "pilot_total_xds_rejects"),
            0.0,
            "Envoy refused {expression}"
        );
    }
}

/// A Zipkin collector: keeps the body of every request it gets (spans, as JSON) and accepts it.
fn zipkin_collector() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while let Some((_, headers)) = common::peers::read_request_head(&mut reader) {
                    let length: usize = headers
                        .iter()
                        .find_map(|h| h.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    let chunked = headers.iter().any(|h| h.contains("chunked"));
                    let mut body = Vec::new();
                    if chunked {
                        // Chunks: a hexadecimal size line, the data, CRLF; size 0 ends it.
                        loop {
                            let mut size = String::new();
                            if std::io::BufRead::read_line(&mut reader, &mut size).unwrap_or(0) == 0
                            {
                                return;
                            }
                            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                            let mut chunk = vec![0; n + 2];
                            if reader.read_exact(&mut chunk).is_err() {
                                return;
                            }
                            if n == 0 {
                                break;
                            }
                            body.extend_from_slice(&chunk[..n]);
                        }
                    } else {
                        body.resize(length, 0);
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                    }
                    kept.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&body).into_owned());
                    let _ = writer.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n");
                }
            });
        }
    });
    (port, bodies)
}

/// Telemetry tracing through a real Envoy, as istiod configures it: a root Telemetry names a
/// MeshConfig Zipkin provider with full sampling and a custom tag, and the sidecar's spans reach
/// the collector with Istio's service tags and the custom one.
#[test]
fn envoy_reports_spans_as_telemetry_tracing_says() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let (collector, spans) = zipkin_collector();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    write(
        dir.path(),
        "zipkin.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: zipkin, namespace: istio-system}}\nspec:\n  hosts: [zipkin.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{{number: 9411, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {collector}}}}}]\n"
        ),
    );
    write(
        dir.path(),
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: zipkin\n      zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n",
    );
    write(
        dir.path(),
        "telemetry.yaml",
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  tracing:\n  - providers: [{name: zipkin}]\n    randomSamplingPercentage: 100\n    useRequestIdForTraceSampling: false\n    customTags: {team: {literal: {value: checkout}}}\n",
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(60, "spans at the collector", || {
        request(port, HOST, "/traced", &[]);
        spans.lock().unwrap().iter().any(|body| {
            body.contains("\"team\":\"checkout\"")
                && body.contains("\"istio.namespace\":\"shop\"")
                && body.contains("/traced")
        })
    });
}

/// Sampling at 0% reports no span; the same Telemetry changed to 100% reports every request
/// (the requests sent at 0% never show up at the collector, though spans flush in order).
#[test]
fn zero_percent_sampling_reports_nothing_and_a_change_to_100_reports_all() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let (collector, spans) = zipkin_collector();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    write(
        dir.path(),
        "zipkin.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: zipkin, namespace: istio-system}}\nspec:\n  hosts: [zipkin.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{{number: 9411, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {collector}}}}}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: zipkin\n      zipkin: {{service: zipkin.istio-system.svc.cluster.local, port: 9411}}\n"
        ),
    );
    let telemetry = |percent: u32| {
        format!(
            "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing: [{{providers: [{{name: zipkin}}], randomSamplingPercentage: {percent}}}]\n"
        )
    };
    write(dir.path(), "telemetry.yaml", &telemetry(0));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the tracer is in place", || {
        http_get(envoy.admin, "/config_dump")
            .1
            .contains("envoy.tracers.zipkin")
            && request(port, HOST, "/", &[]).0 == 200
    });
    for _ in 0..20 {
        assert_eq!(request(port, HOST, "/unsampled", &[]).0, 200);
    }
    write(dir.path(), "telemetry.yaml", &telemetry(100));
    eventually(60, "spans at 100%", || {
        request(port, HOST, "/sampled", &[]);
        spans.lock().unwrap().iter().any(|b| b.contains("/sampled"))
    });
    assert!(
        !spans
            .lock()
            .unwrap()
            .iter()
            .any(|b| b.contains("/unsampled")),
        "nothing was reported at 0%"
    );
}

/// `disableContextPropagation` as istiod sets it for proxies of Istio 1.30 or later: the
/// sidecar still traces but no longer writes the trace context into the upstream request (the
/// backend sees no `x-b3-traceid`), where before it did.
#[test]
fn trace_context_stops_at_the_proxy_when_telemetry_says_so() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let (collector, _spans) = zipkin_collector();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    write(
        dir.path(),
        "zipkin.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: zipkin, namespace: istio-system}}\nspec:\n  hosts: [zipkin.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{{number: 9411, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {collector}}}}}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: zipkin\n      zipkin: {{service: zipkin.istio-system.svc.cluster.local, port: 9411}}\n"
        ),
    );
    let telemetry = |disable: bool| {
        format!(
            "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing:\n  - providers: [{{name: zipkin}}]\n    randomSamplingPercentage: 100\n    disableContextPropagation: {disable}\n"
        )
    };
    write(dir.path(), "telemetry.yaml", &telemetry(false));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start_with(
        &envoy_bin,
        daemon.addr("grpc-xds"),
        NS,
        false,
        "INTERCEPTION_MODE: NONE, ISTIO_VERSION: '1.30.0', ",
    );
    let trace_id = || {
        let (status, body) = request(port, HOST, "/", &[("x-echo-headers", "x-b3-traceid")]);
        let sent = body
            .split_whitespace()
            .find_map(|w| w.strip_prefix("x-b3-traceid="))
            .is_some_and(|v| !v.is_empty());
        (status, sent)
    };
    eventually(30, "the trace context reaches the backend", || {
        trace_id() == (200, true)
    });
    write(dir.path(), "telemetry.yaml", &telemetry(true));
    eventually(30, "the trace context stops at the proxy", || {
        trace_id() == (200, false)
    });
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// Datadog, SkyWalking, OpenTelemetry (resource detectors, Dynatrace sampler, HTTP headers) and
/// Zipkin (HTTP service, W3C propagation) tracers as istiod configures them for an Istio 1.30
/// proxy are accepted by a real Envoy, which keeps serving traffic with each (nothing rejected).
#[test]
fn every_tracer_istiod_builds_is_accepted() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let collector = free_port();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(dir.path(), "routing.yaml", &routing(100, 0));
    write(
        dir.path(),
        "collector.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: collector, namespace: istio-system}}\nspec:\n  hosts: [collector.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{{number: 8126, name: grpc, protocol: GRPC}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{grpc: {collector}}}}}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: dd\n      datadog: {{service: collector.istio-system.svc.cluster.local, port: 8126}}\n    - name: sw\n      skywalking: {{service: collector.istio-system.svc.cluster.local, port: 8126}}\n    - name: otel\n      opentelemetry: {{service: collector.istio-system.svc.cluster.local, port: 8126, http: {{path: /v1/traces, timeout: 2s, headers: [{{name: api-token, value: t}}]}}, resourceDetectors: {{environment: {{}}}}, dynatraceSampler: {{tenant: abc, clusterId: 7}}}}\n    - name: z\n      zipkin: {{service: collector.istio-system.svc.cluster.local, port: 8126, timeout: 2s, traceContextOption: USE_B3_WITH_W3C_PROPAGATION, headers: [{{name: x-token, value: t}}]}}\n"
        ),
    );
    let telemetry = |provider: &str| {
        format!(
            "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing: [{{providers: [{{name: {provider}}}], randomSamplingPercentage: 100}}]\n"
        )
    };
    write(dir.path(), "telemetry.yaml", &telemetry("dd"));
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    // An Istio 1.30 proxy: Zipkin's collector comes as an HTTP service with W3C propagation.
    let envoy = Envoy::start_with(
        &envoy_bin,
        daemon.addr("grpc-xds"),
        NS,
        false,
        "INTERCEPTION_MODE: NONE, ISTIO_VERSION: '1.30.0', ",
    );
    for (provider, tracer) in [
        ("dd", "envoy.tracers.datadog"),
        ("sw", "envoy.tracers.skywalking"),
        ("otel", "envoy.tracers.opentelemetry.samplers.dynatrace"),
        ("z", "USE_B3_WITH_W3C_PROPAGATION"),
    ] {
        write(dir.path(), "telemetry.yaml", &telemetry(provider));
        eventually(30, tracer, || {
            http_get(envoy.admin, "/config_dump").1.contains(tracer)
                && request(port, HOST, "/", &[]).0 == 200
        });
    }
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// The `envoyOtelAls` provider: Envoy's OpenTelemetry access logger, accepted by a real Envoy,
/// sends each request's entry over OTLP/gRPC to the collector's cluster (the collector here
/// only records that an HTTP/2 connection arrives).
#[test]
fn envoy_sends_access_logs_to_an_opentelemetry_collector() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (collector_port, prefaces) = h2_collector();
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(
        dir.path(),
        "collector.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: otel, namespace: istio-system}}\nspec:\n  hosts: [otel-collector.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{{number: 4317, name: grpc, protocol: GRPC}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{grpc: {collector_port}}}}}]\n"
        ),
    );
    write(
        dir.path(),
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: otel\n      envoyOtelAls:\n        service: otel-collector.istio-system.svc.cluster.local\n        port: 4317\n        logFormat: {labels: {path: \"%REQ(:PATH)%\"}}\n",
    );
    write(
        dir.path(),
        "telemetry.yaml",
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  accessLogging: [{providers: [{name: otel}]}]\n",
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the sidecar routes", || {
        request(port, HOST, "/logged", &[]).0 == 200
    });
    let (_, dump) = http_get(envoy.admin, "/config_dump");
    assert!(
        dump.contains("envoy.access_loggers.open_telemetry")
            && dump.contains("otel_envoy_accesslog"),
        "Envoy took the OpenTelemetry access logger"
    );
    eventually(30, "log entries sent to the collector", || {
        request(port, HOST, "/logged", &[]);
        prefaces.load(std::sync::atomic::Ordering::Relaxed) > 0
    });
}

/// A collector that only counts the HTTP/2 connections arriving (a gRPC stream's preface): enough
/// to see that Envoy streams access logs to it. Returns its port and the count.
fn h2_collector() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Read;
    let collector = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = collector.local_addr().unwrap().port();
    let prefaces = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = prefaces.clone();
    std::thread::spawn(move || {
        for mut stream in collector.incoming().flatten() {
            let mut head = [0u8; 24];
            if stream.read_exact(&mut head).is_ok() && head.starts_with(b"PRI * HTTP/2.0") {
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    (port, prefaces)
}

/// The `envoyHttpAls` and `envoyTcpAls` providers: a real Envoy takes Envoy's HTTP and TCP gRPC
/// access loggers (on its HTTP connection managers and TCP proxies alike, as istiod writes them)
/// and streams each request's entry to the access-log service.
#[test]
fn envoy_streams_access_logs_to_a_grpc_access_log_service() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let (collector_port, prefaces) = h2_collector();
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(
        dir.path(),
        "collector.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: als, namespace: istio-system}}\nspec:\n  hosts: [als.istio-system.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports: [{{number: 9001, name: grpc, protocol: GRPC}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{grpc: {collector_port}}}}}]\n"
        ),
    );
    write(
        dir.path(),
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: http-als\n      envoyHttpAls:\n        service: als.istio-system.svc.cluster.local\n        port: 9001\n        additionalRequestHeadersToLog: [x-user]\n    - name: tcp-als\n      envoyTcpAls:\n        service: als.istio-system.svc.cluster.local\n        port: 9001\n",
    );
    write(
        dir.path(),
        "telemetry.yaml",
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  accessLogging: [{providers: [{name: http-als}, {name: tcp-als}]}]\n",
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "the sidecar routes", || {
        request(port, HOST, "/logged", &[]).0 == 200
    });
    let (_, dump) = http_get(envoy.admin, "/config_dump");
    assert!(
        dump.contains("envoy.access_loggers.http_grpc")
            && dump.contains("http_envoy_accesslog")
            && dump.contains("envoy.tcp_grpc_access_log")
            && dump.contains("tcp_envoy_accesslog"),
        "Envoy took both gRPC access loggers"
    );
    eventually(30, "log entries streamed to the access-log service", || {
        request(port, HOST, "/logged", &[("x-user", "ada")]);
        prefaces.load(std::sync::atomic::Ordering::Relaxed) > 0
    });
}

/// A proxy without traffic capture (`INTERCEPTION_MODE: NONE`, VMs and pods without iptables):
/// a request for a host the mesh does not know, on a service's HTTP port, meets istiod's
/// catch-all virtual host as with capture: 502 under REGISTRY_ONLY (was 404: no virtual host),
/// the passthrough under ALLOW_ANY, while the service's own host is served.
#[test]
fn without_capture_unknown_hosts_meet_the_catch_all_virtual_host() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "services.yaml",
        &services(port, &[("web-v1", "v1", v1.port)]),
    );
    write(
        dir.path(),
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
    );
    let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
    let _envoy = Envoy::start_with(
        &envoy_bin,
        daemon.addr("grpc-xds"),
        NS,
        false,
        "INTERCEPTION_MODE: NONE, ",
    );
    eventually(30, "the service served without capture", || {
        request(port, HOST, "/", &[]).0 == 200
    });
    let (status, body) = request(port, "unknown.example.com", "/", &[]);
    assert_eq!(status, 502, "{body}");
    write(
        dir.path(),
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    outboundTrafficPolicy: {mode: ALLOW_ANY}\n",
    );
    // ALLOW_ANY: the catch-all passes through, as istiod's; without capture a connection has no
    // other original destination than the proxy's own listener, so Envoy finds no upstream
    // (503 at once, no loop back into itself).
    eventually(30, "ALLOW_ANY's passthrough", || {
        request(port, "unknown.example.com", "/", &[]) == (503, "no healthy upstream".into())
    });
    assert_eq!(request(port, HOST, "/", &[]).0, 200);
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// `ISTIO_META_HTTP10: "1"` lets an application speak HTTP/1.0 through its proxy, as istiod's
/// `enableHTTP10`: a real Envoy answers an HTTP/1.0 request from the backend instead of 426.
#[test]
fn http10_metadata_lets_http_1_0_through() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let v1 = Backend::start("v1");
    let dir = tempfile::tempdir().unwrap();
    let status_of_http10 = |port: u16| -> String {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return String::new();
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        let _ = write!(s, "GET /old HTTP/1.0\r\nHost: {HOST}\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.lines().next().unwrap_or_default().to_string()
    };
    for (metadata, want) in [("HTTP10: '1', ", "200"), ("", "426")] {
        let port = free_port();
        write(
            dir.path(),
            "services.yaml",
            &services(port, &[("web-v1", "v1", v1.port)]),
        );
        let daemon = Daemon::start(dir.path(), &["--debounce-after", "20ms"]);
        let _envoy = Envoy::start_with(
            &envoy_bin,
            daemon.addr("grpc-xds"),
            NS,
            false,
            &format!("INTERCEPTION_MODE: NONE, {metadata}"),
        );
        eventually(30, "the service served", || {
            request(port, HOST, "/", &[]).0 == 200
        });
        let status = status_of_http10(port);
        assert!(status.contains(want), "{metadata:?}: {status}");
        assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
    }
}
