//! Metrics, debug endpoints, the debug UI in a real browser, and runtime log levels.

use crate::common;
use crate::common::ads::{EDS, RDS, Sotw};
use crate::common::{Daemon, eventually, http_get, metric, rudder};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const MESH: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1, labels: {version: v1}}, {address: 10.0.0.2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec: {host: reviews, subsets: [{name: v1, labels: {version: v1}}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http: [{route: [{destination: {host: reviews, subset: v1}}]}]
"#;

const PROXY: &str = "sidecar~10.9.9.9~client-1.shop~shop.svc.cluster.local";

fn json(d: &Daemon, path: &str) -> Value {
    let (code, body) = http_get(d.addr("monitoring"), path);
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// The test mesh's one file.
fn write(dir: &Path, text: &str) {
    common::write(dir, "mesh.yaml", text);
}

/// A daemon with one connected proxy (a Rust ADS client) subscribed to CDS, EDS and RDS.
fn with_proxy(
    extra: &[&str],
    body: impl FnOnce(&Daemon, &Path, &tokio::runtime::Runtime, &mut Sotw),
) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), MESH);
    let mut args = vec!["--debounce-after", "20ms", "--file-debounce", "20ms"];
    args.extend_from_slice(extra);
    let daemon = Daemon::start(dir.path(), &args);
    eventually(30, "ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut s = rt.block_on(async {
        let mut s = Sotw::open(daemon.addr("grpc-xds"), PROXY).await.unwrap();
        let cds = s.recv().await;
        s.ack(&cds, &[]).await;
        s.send(
            EDS,
            &["outbound|9080|v1|reviews.shop.svc.cluster.local"],
            "",
            "",
            None,
        )
        .await;
        let eds = s.recv().await;
        s.ack(&eds, &["outbound|9080|v1|reviews.shop.svc.cluster.local"])
            .await;
        s.send(RDS, &["9080"], "", "", None).await;
        let rds = s.recv().await;
        s.ack(&rds, &["9080"]).await;
        s
    });
    body(&daemon, dir.path(), &rt, &mut s);
}

#[test]
fn debug_endpoints_answer_with_their_json_shapes() {
    with_proxy(&[], |d, dir, rt, s| {
        eventually(10, "synced", || {
            json(d, "/debug/syncz")[0]["types"]["rds"]["state"] == "SYNCED"
        });
        let syncz = json(d, "/debug/syncz");
        // istiod's shape: the proxy by istiod's id, nonces sent and acknowledged per type...
        assert_eq!(syncz[0]["proxy"], "client-1.shop", "{syncz}");
        assert_eq!(syncz[0]["proxy_type"], "sidecar");
        assert_eq!(syncz[0]["cluster_id"], "Kubernetes");
        assert!(syncz[0]["cluster_sent"].is_string(), "{syncz}");
        assert_eq!(syncz[0]["cluster_sent"], syncz[0]["cluster_acked"]);
        assert_eq!(syncz[0]["route_sent"], syncz[0]["route_acked"]);
        let rds =
            &syncz[0]["resources"]["type.googleapis.com/envoy.config.route.v3.RouteConfiguration"];
        assert_eq!(rds["sent"], syncz[0]["route_sent"], "{syncz}");
        assert!(rds["sentTime"].as_str().unwrap().starts_with("20"), "{rds}");
        // ...and Rudder's view beside it.
        assert_eq!(syncz[0]["node"], PROXY);
        for t in ["cds", "eds", "rds"] {
            assert_eq!(syncz[0]["types"][t]["state"], "SYNCED", "{syncz}");
        }
        assert_eq!(
            json(d, "/debug/syncz?namespace=other"),
            serde_json::json!([])
        );
        // istioctl version reads the build from /version.
        assert!(json(d, "/version")["clientVersion"]["version"].is_string());
        let adsz = json(d, "/debug/adsz");
        assert_eq!(adsz["totalClients"], 1);
        assert_eq!(adsz["clients"][0]["proxy"]["namespace"], "shop");
        // istiod's fields for each client.
        let client = &adsz["clients"][0];
        assert!(client["connectionId"].is_string() && client["connectedAt"].is_string());
        assert!(
            client["address"]
                .as_str()
                .unwrap()
                .starts_with("127.0.0.1:"),
            "{client}"
        );
        assert!(
            client["watches"][EDS].as_array().unwrap().len() == 1,
            "{client}"
        );
        let connections = json(d, "/debug/connections");
        assert_eq!(connections["totalClients"], 1);
        assert_eq!(connections["clients"][0]["address"], client["address"]);
        // Every page istiod's index links to that Rudder has answers, in a shape of its own
        // kind (JSON), with or without a proxy.
        let pages: Vec<String> = serde_json::from_value(json(d, "/debug/list")).unwrap();
        assert!(
            pages.contains(&"syncz".to_string()) && pages.len() >= 20,
            "{pages:?}"
        );
        for page in &pages {
            for query in ["", "?proxyID=client-1.shop"] {
                let (code, body) = http_get(d.addr("monitoring"), &format!("/debug/{page}{query}"));
                let needs_proxy =
                    ["config_dump", "edsz", "ndsz", "ecdsz", "resourcez"].contains(&page.as_str());
                if needs_proxy && query.is_empty() {
                    assert_eq!(code, 400, "{page}: {body}");
                    continue;
                }
                assert_eq!(code, 200, "{page}{query}: {body}");
                if page != "log" {
                    serde_json::from_str::<Value>(&body)
                        .unwrap_or_else(|e| panic!("{page}{query}: {e}: {body}"));
                }
            }
        }
        // The pages `istioctl bug-report` collects from istiod (its `istioDebugURLs`): none
        // answers 404, which the collector would record as a broken control plane.
        for page in [
            "adsz",
            "authorizationz",
            "cachez",
            "clusterz",
            "configz",
            "endpointShardz",
            "endpointz",
            "inject",
            "krtz",
            "instancesz",
            "mcsz",
            "mesh",
            "networkz",
            "push_status",
            "registryz",
            "resourcesz",
            "syncz",
            "telemetryz",
            "ambientz",
        ] {
            let (code, body) = http_get(d.addr("monitoring"), &format!("/debug/{page}"));
            assert_eq!(code, 200, "{page}: {body}");
            serde_json::from_str::<Value>(&body)
                .unwrap_or_else(|e| panic!("bug-report's {page}: {e}: {body}"));
        }
        let authz = json(d, "/debug/authorizationz");
        assert_eq!(
            authz["authorization_policies"]["root_namespace"], "istio-system",
            "{authz}"
        );
        let cache = json(d, "/debug/cachez");
        assert!(
            cache[EDS].as_array().is_some_and(|names| names
                .iter()
                .any(|n| n == "outbound|9080|v1|reviews.shop.svc.cluster.local")),
            "the client's EDS was built and cached: {cache}"
        );
        assert!(json(d, "/debug/cachez?sizes=true")["total"].is_string());
        let kinds = json(d, "/debug/resourcesz");
        assert!(
            kinds
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"] == "AuthorizationPolicy" && k["group"] == "security.istio.io"),
            "{kinds}"
        );
        assert_eq!(json(d, "/debug/krtz"), serde_json::json!([]));
        assert_eq!(json(d, "/debug/mcsz"), serde_json::json!([]));
        assert_eq!(
            json(d, "/debug/instancesz")["client-1.shop"],
            serde_json::json!([]),
            "the client's address is in no endpoint"
        );
        assert!(json(d, "/debug/endpointShardz")["reviews.shop.svc.cluster.local"]["shop"]["Shards"]["Kubernetes"].as_array().unwrap().len() == 2);
        let edsz = json(d, "/debug/edsz?proxyID=client-1.shop");
        assert_eq!(
            edsz["configs"][0]["clusterName"], "outbound|9080|v1|reviews.shop.svc.cluster.local",
            "{edsz}"
        );
        assert_eq!(
            json(d, "/debug/ndsz?proxyID=client-1.shop"),
            serde_json::json!({})
        );
        assert_eq!(json(d, "/debug/clusterz")[0]["id"], "Kubernetes");
        assert!(json(d, "/debug/inject")["image"].is_string());
        assert_eq!(
            json(d, "/debug/telemetryz"),
            serde_json::json!({"telemetries": []})
        );
        let registry = json(d, "/debug/registryz");
        assert_eq!(registry[0]["hostname"], "reviews.shop.svc.cluster.local");
        assert_eq!(registry[0]["ports"][0]["number"], 9080);
        let endpoints = json(d, "/debug/endpointz");
        assert_eq!(endpoints[0]["endpoints"].as_array().unwrap().len(), 2);
        let configz = json(d, "/debug/configz");
        assert_eq!(configz["items"].as_array().unwrap().len(), 3);
        assert!(json(d, "/debug/mesh")["trustDomain"] == "cluster.local");
        assert!(json(d, "/version")["version"].is_string());

        // The config dump in istiod's shape: Envoy's admin ConfigDump in proto3 JSON, found by
        // istiod's proxy id.
        let dump = json(d, "/debug/config_dump?proxyID=client-1.shop");
        let kinds: Vec<&str> = dump["configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["@type"].as_str().unwrap().rsplit('.').next().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "BootstrapConfigDump",
                "ClustersConfigDump",
                "ListenersConfigDump",
                "ScopedRoutesConfigDump",
                "RoutesConfigDump",
                "SecretsConfigDump",
                "EcdsConfigDump"
            ]
        );
        let clusters = &dump["configs"][1]["dynamicActiveClusters"];
        assert!(
            clusters
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["cluster"]["name"] == "outbound|9080|v1|reviews.shop.svc.cluster.local"),
            "{clusters}"
        );
        let routes = &dump["configs"][4]["dynamicRouteConfigs"][0]["routeConfig"];
        assert_eq!(routes["name"], "9080", "{routes}");
        // Envoy's own field names on request, to diff with the proxy's /config_dump; one type.
        let proto = json(d, "/debug/config_dump?proxyID=client-1.shop&names=proto");
        assert!(
            proto["configs"][1]["dynamic_active_clusters"].is_array(),
            "{proto}"
        );
        let only = json(d, "/debug/config_dump?proxyID=client-1.shop&types=cds");
        assert!(
            only["configs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["@type"] == "type.googleapis.com/envoy.config.cluster.v3.Cluster"),
            "{only}"
        );
        let eds = json(d, "/debug/config_dump?proxyID=client-1.shop&include_eds");
        assert!(
            eds["configs"][2]["dynamicEndpointConfigs"].is_array(),
            "{eds}"
        );

        // Provenance: each generated resource names the objects it came from.
        let dump = json(d, &format!("/debug/resourcez?proxyID={PROXY}"));
        let find = |t: &str, n: &str| {
            dump["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["type"] == t && r["name"] == n)
                .cloned()
                .unwrap_or_else(|| panic!("no {t} {n}"))
        };
        let subset = find("cds", "outbound|9080|v1|reviews.shop.svc.cluster.local");
        assert_eq!(
            subset["sources"],
            serde_json::json!(["DestinationRule/shop/reviews", "ServiceEntry/shop/reviews"])
        );
        assert!(
            find("rds", "9080")["sources"]
                .as_array()
                .unwrap()
                .contains(&"VirtualService/shop/reviews".into())
        );
        assert_eq!(
            subset["config"]["name"], "outbound|9080|v1|reviews.shop.svc.cluster.local",
            "the resource as proto3 JSON"
        );
        let (code, body) = http_get(d.addr("monitoring"), "/debug/config_dump?proxyID=nobody");
        assert_eq!(code, 404);
        assert!(
            body.starts_with("Proxy not connected to this Pilot instance"),
            "{body}"
        );
        assert_eq!(http_get(d.addr("monitoring"), "/debug/config_dump").0, 400);

        // Push status says why a push happened.
        write(dir, &MESH.replace("10.0.0.2", "10.0.0.3"));
        rt.block_on(async {
            let push = s.recv().await;
            assert_eq!(push.type_url, EDS);
        });
        let status = json(d, "/debug/push_status");
        let last = status["pushes"]
            .as_array()
            .unwrap()
            .last()
            .cloned()
            .unwrap();
        assert_eq!(last["full"], false);
        assert_eq!(last["reason"], "endpoint");
        assert!(
            last["triggers"][0]
                .as_str()
                .unwrap()
                .contains("ServiceEntry shop/reviews"),
            "{last}"
        );
        assert_eq!(last["proxies"], 1);
    });
}

#[test]
fn metrics_move_as_pushes_happen() {
    with_proxy(&[], |d, dir, rt, s| {
        let before = |n: &str| metric(d, n);
        let (cds, conv, queue, config) = (
            before("pilot_xds_pushes{type=\"cds\"}"),
            before("pilot_proxy_convergence_time_count"),
            before("pilot_proxy_queue_time_count"),
            before("pilot_push_triggers{type=\"config\"}"),
        );
        assert_eq!(before("pilot_xds{"), 1.0);
        assert!(before("pilot_services") >= 1.0);
        assert!(before("process_resident_memory_bytes") > 1e6);
        assert!(before("process_cpu_seconds_total") > 0.0);
        write(
            dir,
            &MESH.replace(
                "subset: v1}}]}]",
                "subset: v1}, weight: 100}], timeout: 5s}]",
            ),
        );
        rt.block_on(async {
            loop {
                let r = s.recv().await;
                s.ack(
                    &r,
                    if r.type_url == RDS {
                        &["9080"]
                    } else if r.type_url == EDS {
                        &["outbound|9080|v1|reviews.shop.svc.cluster.local"]
                    } else {
                        &[]
                    },
                )
                .await;
                if r.type_url == RDS {
                    break;
                }
            }
        });
        eventually(10, "metrics updated", || {
            metric(d, "pilot_proxy_convergence_time_count") > conv
        });
        assert!(metric(d, "pilot_push_triggers{type=\"config\"}") > config);
        assert!(metric(d, "pilot_proxy_queue_time_count") > queue);
        assert!(metric(d, "pilot_xds_pushes{type=\"rds\"}") >= 2.0);
        assert!(metric(d, "pilot_debounce_time_count") >= 1.0);
        assert_eq!(
            metric(d, "pilot_xds_pushes{type=\"cds\"}"),
            cds,
            "an unchanged CDS is not resent"
        );
        let m = http_get(d.addr("monitoring"), "/metrics").1;
        assert!(m.contains("# TYPE pilot_xds_push_time histogram"), "{m}");
        // More of istiod's series, with its names, labels and buckets.
        // istiod's version fields carry the Istio release Rudder implements (istioctl warns of
        // skew against the proxies' by it); Rudder's own version has a series of its own.
        assert!(
            m.contains(&format!(
                "istio_build{{component=\"pilot\",tag=\"{}\"}} 1",
                rudder::metrics::ISTIO_VERSION
            )),
            "{m}"
        );
        assert!(
            m.contains(&format!(
                "rudder_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{m}"
        );
        assert!(
            metric(d, "pilot_xds_config_size_bytes_count{type=\"cds\"}") >= 1.0,
            "{m}"
        );
        assert!(
            m.contains("pilot_xds_config_size_bytes_bucket{le=\"4000000\",type=\"cds\"}"),
            "{m}"
        );
        assert!(metric(d, "pilot_xds_send_time_count") >= 1.0, "{m}");
        for series in [
            "pilot_xds_write_timeout ",
            "pilot_virt_services ",
            "pilot_eds_no_instances ",
            "pilot_vservice_dup_domain ",
            "pilot_destrule_subsets ",
        ] {
            assert!(m.contains(series), "{series}: {m}");
        }
        // Prometheus text 0.0.4, as the content type says, with istiod's counter names (no
        // `_total`, which istiod's exporter does not write); every sample under its TYPE's name.
        assert!(!m.contains("# EOF") && !m.contains("# UNIT"), "{m}");
        assert!(m.contains("# TYPE pilot_xds_pushes counter\n"), "{m}");
        assert!(!m.contains("pilot_xds_pushes_total"), "{m}");
        // istiod's bucket boundaries, which alerts and dashboards name.
        for le in ["0.1", "0.5", "1", "3", "30", "+Inf"] {
            assert!(
                m.contains(&format!(
                    "pilot_proxy_convergence_time_bucket{{le=\"{le}\"}}"
                )),
                "le={le}: {m}"
            );
        }
        // istiod 1.31's 0.5 s bucket on the push and debounce histograms (1.30 lacks it).
        assert!(m.contains("pilot_debounce_time_bucket{le=\"0.5\"}"), "{m}");
        // The CA's time left, computed when scraped: a fresh root has about ten years.
        let left = metric(d, "citadel_server_root_cert_expiry_seconds ");
        assert!(left > 86400.0 * 365.0, "root expiry seconds {left}: {m}");
        assert!(
            metric(d, "pilot_inbound_updates{type=\"config\"}") >= 1.0,
            "{m}"
        );
        let mut typed = std::collections::HashSet::new();
        for line in m.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') && !line.is_empty() {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
                    .unwrap_or(name);
                assert!(typed.contains(family), "{name} has no TYPE line of its own");
            }
        }
    });
}

#[test]
fn log_levels_change_at_runtime() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), MESH);
    let daemon = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    eventually(30, "ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let addr = daemon.addr("monitoring").to_string();
    let show = rudder().args(["log", "--addr", &addr]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("\"level\":\"info\""),
        "{show:?}"
    );
    let bad = rudder()
        .args(["log", "--addr", &addr, "ads:loud"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("unknown level"),
        "{bad:?}"
    );
    let unknown = rudder()
        .args(["log", "--addr", &addr, "nosuchscope:debug"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(1));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        said.contains("unknown scope \"nosuchscope\"") && said.contains("ads"),
        "{unknown:?}"
    );
    // Debug lines of the push pipeline appear only after the change.
    let set = rudder()
        .args(["log", "--addr", &addr, "ads:debug,default:info"])
        .output()
        .unwrap();
    assert!(set.status.success(), "{set:?}");
    assert!(String::from_utf8_lossy(&set.stdout).contains("rudder::xds=debug"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut s = Sotw::open(daemon.addr("grpc-xds"), PROXY).await.unwrap();
        s.recv().await;
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut saw_debug = false;
    while std::time::Instant::now() < deadline && !saw_debug {
        if let Ok(line) = daemon
            .log
            .recv_timeout(std::time::Duration::from_millis(200))
        {
            saw_debug = line.contains("DEBUG") && line.contains("rudder::xds");
        }
    }
    assert!(
        saw_debug,
        "a debug line from rudder::xds after raising its level"
    );
}

/// The debug UI clicked through in headless Chromium (Playwright) with real Envoys connected: the
/// walk in `tests/peers/ui_peer.py` (proxies with a NACK's reason, filter and search with URLs,
/// the back button, a proxy's resources as foldable Envoy JSON with their provenance, a push
/// landing without losing the open resource or the scroll, a diff between two pushes, log levels,
/// the process, istiod's page list, a deep link), failing on any console error.
/// `RUDDER_UI_SHOTS=<dir>` keeps its screenshots (docs/observability.md shows them).
#[test]
fn the_debug_ui_is_clicked_through_with_real_envoys() {
    let (Some(envoy_bin), Some(python)) = (
        common::peers::envoy_binary(),
        common::peers::peer("venv/bin/python"),
    ) else {
        return;
    };
    if !Path::new("/usr/bin/chromium").exists() {
        if std::env::var("RUDDER_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
            panic!("chromium is missing: run scripts/setup-peers.sh");
        }
        eprintln!("skipping: chromium not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), MESH);
    let d = Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    eventually(30, "ready", || http_get(d.addr("http"), "/ready").0 == 200);
    let xds = d.addr("grpc-xds");
    let _sidecar = common::peers::Envoy::start(&envoy_bin, xds, "shop", false);
    let _gateway = common::peers::Envoy::boot(
        &envoy_bin,
        xds,
        &common::peers::Bootstrap {
            node_type: "router",
            pod: "gw-0",
            namespace: "shop",
            labels: "app: gw",
            delta: true,
            ..Default::default()
        },
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // A proxy whose last routes were rejected: the UI must say why.
    let _nacker = rt.block_on(async {
        let mut s = Sotw::open(xds, "sidecar~10.9.9.8~nacker-0.shop~shop.svc.cluster.local")
            .await
            .unwrap();
        let cds = s.recv().await;
        s.ack(&cds, &[]).await;
        s.send(RDS, &["9080"], "", "", None).await;
        let rds = s.recv().await;
        s.send(
            RDS,
            &["9080"],
            &rds.nonce,
            "",
            Some("route 9080 has no virtual host"),
        )
        .await;
        s
    });
    eventually(30, "both Envoys and the NACK are seen", || {
        let (_, body) = http_get(d.addr("monitoring"), "/debug/ui/summary");
        let summary: Value = serde_json::from_str(&body).unwrap_or_default();
        summary["proxies"] == 3 && summary["nacked"] == 1
    });
    let shots = std::env::var("RUDDER_UI_SHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| dir.path().join("shots"));
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/ui_peer.py");
    let out = Command::new(python)
        .arg(script)
        .arg(format!("http://{}", d.addr("monitoring")))
        .arg(dir.path().join("mesh.yaml"))
        .arg(&shots)
        .output()
        .expect("run the UI walk");
    assert!(
        out.status.success(),
        "the UI walk failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shots.join("diff.png").exists());
}

/// `--log-format json` writes istiod's keys: time, level, scope, msg.
#[test]
fn json_logs_use_istiods_keys() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), MESH);
    let ca = tempfile::tempdir().unwrap();
    let mut child = rudder()
        .args([
            "--log-format",
            "json",
            "serve",
            "--config-source",
            "files",
            "--config-dir",
        ])
        .arg(dir.path())
        .arg("--ca-dir")
        .arg(ca.path())
        .args(common::LOOPBACK_PORTS)
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let line = std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("listening"))
        .expect("a listening line");
    let _ = child.kill();
    let _ = child.wait();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["level"], "info", "{line}");
    assert_eq!(v["msg"], "listening", "{line}");
    assert_eq!(v["scope"], "cmd", "{line}");
    assert!(v["time"].as_str().unwrap().ends_with('Z'), "{line}");
    assert!(v["server"].is_string(), "fields follow: {line}");
}

/// `/metrics` as Prometheus reads it: `promtool check metrics` parses it (a body that does not
/// match its content type fails here), and its lint finds nothing but istiod's own names, which
/// Rudder keeps on purpose (docs/metrics.md lists them).
#[test]
fn metrics_pass_promtool() {
    let promtool = Path::new("/usr/bin/promtool");
    if !promtool.exists() {
        if std::env::var("RUDDER_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
            panic!("promtool is missing: run scripts/setup-peers.sh");
        }
        eprintln!("skipping: promtool not installed");
        return;
    }
    let istiod_names: Vec<String> = include_str!("../../docs/metrics.md")
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            l.split('|')
                .nth(1)
                .unwrap_or_default()
                .split(',')
                .map(|n| n.trim().trim_matches('`').to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    with_proxy(&[], |d, _dir, _rt, _s| {
        let body = http_get(d.addr("monitoring"), "/metrics").1;
        let mut child = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run promtool");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !report.contains("error while linting"),
            "promtool cannot parse /metrics: {report}"
        );
        for line in report.lines().filter(|l| !l.trim().is_empty()) {
            let name = line.split_whitespace().next().unwrap_or_default();
            assert!(
                istiod_names.iter().any(|n| n == name),
                "promtool lint on a series that is not istiod's: {line}"
            );
        }
    });
}

/// ControlZ, as `istioctl admin log` uses it (its requests: `GET /scopej/`, `PUT /scopej/<scope>`
/// with its `ScopeInfo`, expecting 202 Accepted): the scopes and their levels, a level changed
/// for one scope, the others left as they are, and the change in force (the same filter
/// `/debug/log` shows). Before, nothing listened on 9876.
#[test]
fn istioctl_admin_log_reads_and_sets_levels_through_controlz() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), MESH);
    let daemon = Daemon::start(dir.path(), &[]);
    let ctrlz = daemon.addr("controlz");
    let (status, body) = http_get(ctrlz, "/scopej/");
    assert_eq!(status, 200, "{body}");
    let scopes: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
    let level = |scopes: &[serde_json::Value], name: &str| {
        scopes
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["output_level"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(level(&scopes, "default").as_deref(), Some("info"));
    assert_eq!(level(&scopes, "ads").as_deref(), Some("info"));
    let (status, _) = common::http_send_json(
        ctrlz,
        "PUT",
        "/scopej/ads",
        r#"{"name":"ads","output_level":"debug","stack_trace_level":"none"}"#,
    );
    assert_eq!(status, 202);
    let (_, one) = http_get(ctrlz, "/scopej/ads");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&one).unwrap()["output_level"],
        "debug"
    );
    let (_, all) = http_get(ctrlz, "/scopej/");
    let scopes: Vec<serde_json::Value> = serde_json::from_str(&all).unwrap();
    assert_eq!(level(&scopes, "default").as_deref(), Some("info"));
    assert_eq!(level(&scopes, "ca").as_deref(), Some("info"));
    let (_, filter) = http_get(daemon.addr("monitoring"), "/debug/log");
    assert!(filter.contains("rudder::xds=debug"), "{filter}");
    let (status, _) = common::http_send_json(
        ctrlz,
        "PUT",
        "/scopej/nosuchscope",
        r#"{"name":"nosuchscope","output_level":"debug"}"#,
    );
    assert_eq!(status, 404);
    let (status, page) = http_get(ctrlz, "/");
    assert_eq!(status, 200);
    assert!(page.contains("ControlZ") && page.contains("ads"), "{page}");
}
