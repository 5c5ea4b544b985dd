//! Seeing a change before it happens. `rudder shadow` against a live control plane: a Rudder
//! daemon plays istiod (its xDS and debug types are istiod's, and its proxies are connected to
//! it), and the shadow reads the same cluster as a canary revision would, with its own mesh
//! ConfigMap and its own revision-labelled VirtualService: the differences reported must be
//! exactly those the two configs imply (the fake API server always; a real one too when
//! `KUBECONFIG` is set). `rudder what-if` against a files-mode daemon and its connected proxies.
//! A real Envoy's `/config_dump` read by the same diff engine as the daemon's own dump of it.

use crate::common::ads::{LDS, RDS, Sotw, node_with_metadata};
use crate::common::ca::channel;
use crate::common::cluster::{Cluster, istio_crd};
use crate::common::{eventually, http_get, rudder};
use envoy_types::pb::envoy::config::core::v3::Node;
use rudder::compare::control_plane::{ControlPlane, Tls};
use rudder::compare::diff;
use rudder::xds::types::TypeUrl;
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn istio_objects(c: &Cluster, apps: &str) {
    if c.is_fake() {
        for (plural, kind) in [
            ("serviceentries", "ServiceEntry"),
            ("destinationrules", "DestinationRule"),
            ("virtualservices", "VirtualService"),
        ] {
            c.apply(istio_crd("networking.istio.io", plural, kind));
        }
    }
    c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apps}}));
    c.apply(
        json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": "ext", "namespace": apps},
        "spec": {"hosts": ["ext.example.com"], "location": "MESH_EXTERNAL", "resolution": "STATIC",
                 "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
                 "endpoints": [{"address": "10.9.0.1"}]}}),
    );
    c.apply(
        json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": "db", "namespace": apps},
        "spec": {"hosts": ["db.example.com"], "location": "MESH_EXTERNAL", "resolution": "STATIC",
                 "ports": [{"number": 5432, "name": "tcp", "protocol": "TCP"}],
                 "endpoints": [{"address": "10.9.0.2"}]}}),
    );
    // The database's own connect timeout: the mesh's does not reach it on either side.
    c.apply(
        json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
        "metadata": {"name": "db", "namespace": apps},
        "spec": {"host": "db.example.com",
                 "trafficPolicy": {"connectionPool": {"tcp": {"connectTimeout": "2s"}}}}}),
    );
    // The route each revision has for ext.example.com: 5 s for the default one, 7 s for canary.
    for (rev, timeout) in [("default", "5s"), ("canary", "7s")] {
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": format!("ext-{rev}"), "namespace": apps, "labels": {"istio.io/rev": rev}},
            "spec": {"hosts": ["ext.example.com"],
                     "http": [{"timeout": timeout, "route": [{"destination": {"host": "ext.example.com"}}]}]}}));
    }
    // The canary revision's mesh config.
    c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio-canary", "namespace": c.ns},
        "data": {"mesh": "connectTimeout: 4s\n"}}));
}

/// A proxy's node as the test's proxies connect with it.
fn node(id: &str, ns: &str) -> Node {
    node_with_metadata(id, &[("NAMESPACE", ns), ("SERVICE_ACCOUNT", "default")])
}

fn shadow(
    istiod: &str,
    c: &Cluster,
    dir: &std::path::Path,
    extra: &[&str],
) -> (i32, String, String) {
    against_istiod("shadow", istiod, c, dir, extra)
}

/// `rudder COMMAND` against `istiod` as the canary revision, with the system namespace's token.
fn against_istiod(
    command: &str,
    istiod: &str,
    c: &Cluster,
    dir: &std::path::Path,
    extra: &[&str],
) -> (i32, String, String) {
    let (ca, token) = (dir.join("root.pem"), dir.join("token"));
    std::fs::write(&ca, c.ca_root()).unwrap();
    std::fs::write(&token, c.token("default")).unwrap();
    let kubeconfig = c.kubeconfig.to_string_lossy().to_string();
    let out = rudder()
        .args([command, "--istiod", istiod])
        .arg("--ca-file")
        .arg(&ca)
        .arg("--token-file")
        .arg(&token)
        .args(["--config-source", "kubernetes", "--kubeconfig", &kubeconfig])
        .args(["--tls-server-name", "istiod.istio-system.svc"])
        .args(["--system-namespace", &c.ns, "--revision", "canary"])
        .args(extra)
        .env_remove("RUST_LOG")
        .output()
        .expect("run rudder shadow");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The report's differences of one proxy.
fn differences<'a>(report: &'a Value, proxy: &str) -> &'a Vec<Value> {
    report["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["proxy"] == proxy)
        .unwrap_or_else(|| panic!("{proxy} not in {report:#}"))["differences"]
        .as_array()
        .unwrap()
}

#[test]
fn shadow_reports_exactly_what_the_canary_config_changes_per_proxy() {
    for c in Cluster::all("shadow") {
        let apps = format!("{}-apps", c.ns);
        istio_objects(&c, &apps);
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let sidecar = format!("sidecar~10.1.0.5~web-0.{apps}~{apps}.svc.cluster.local");
        let gateway = format!(
            "router~10.1.0.6~gw-0.{ns}~{ns}.svc.cluster.local",
            ns = c.ns
        );
        let root = c.ca_root();
        // Each proxy as istio-agent connects it: the TLS port, its service account's token.
        let connect = |id: String, ns: String| {
            let addr = daemon.addr("grpc-xds-tls");
            let token = c.token_in(&ns, "default");
            let root = root.clone();
            c.rt.block_on(async move {
                let channel = channel(addr, &root, "istiod.istio-system.svc", None)
                    .await
                    .unwrap();
                let node = node(&id, &ns);
                let mut s = Sotw::open_as(channel, Some(node), Some(&token))
                    .await
                    .unwrap();
                // As a sidecar: clusters, listeners, then the routes they name.
                let cds = s.recv().await;
                s.ack(&cds, &[]).await;
                s.send(LDS, &[], "", "", None).await;
                let lds = s.recv().await;
                s.ack(&lds, &[]).await;
                if id.starts_with("sidecar") {
                    s.send(RDS, &["80"], "", "", None).await;
                    let rds = s.recv().await;
                    s.ack(&rds, &["80"]).await;
                }
                s
            })
        };
        let _sidecar = connect(sidecar.clone(), apps.clone());
        let _gateway = connect(gateway.clone(), c.ns.clone());
        let dir = tempfile::tempdir().unwrap();
        let istiod = daemon.addr("grpc-xds-tls").to_string();

        let (code, out, err) = shadow(&istiod, &c, dir.path(), &["--json"]);
        assert_eq!(code, 1, "differences fail the run\n{out}\n{err}");
        let report: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
        assert_eq!(report["summary"]["proxies"], 2, "{report:#}");
        assert_eq!(report["summary"]["differing"], 2, "{report:#}");

        let sidecar_diffs = differences(&report, &sidecar);
        let mut timed_out = Vec::new();
        for d in sidecar_diffs {
            match d["type"].as_str().unwrap() {
                // The mesh's connect timeout, on every cluster it reaches.
                "cds" => {
                    assert_eq!(d["path"], "/connectTimeout", "{d:#}");
                    assert_eq!(
                        (&d["left"], &d["right"]),
                        (&json!("10s"), &json!("4s")),
                        "{d:#}"
                    );
                    timed_out.push(d["resource"].as_str().unwrap().to_string());
                }
                // The VirtualService of each revision: the route's timeout, its name and its
                // config object, nothing else.
                "rds" => {
                    let path = d["path"].as_str().unwrap();
                    assert_eq!(d["resource"], "80", "{d:#}");
                    assert!(
                        path.starts_with("/virtualHosts[ext.example.com:80]/routes[0]/"),
                        "{d:#}"
                    );
                    assert!(
                        d["sources"].as_array().unwrap().iter().any(|s| s
                            .as_str()
                            .unwrap()
                            .ends_with(&format!("VirtualService/{apps}/ext-canary"))),
                        "Rudder's provenance names the canary's VirtualService: {d:#}"
                    );
                }
                _ => panic!("unexpected difference {d:#}"),
            }
        }
        assert!(
            timed_out.contains(&"outbound|80||ext.example.com".to_string()),
            "{timed_out:?}"
        );
        assert!(
            !timed_out.contains(&"outbound|5432||db.example.com".to_string()),
            "a DestinationRule's own timeout is not the mesh's: {timed_out:?}"
        );
        let timeout = sidecar_diffs
            .iter()
            .find(|d| d["path"].as_str().unwrap().ends_with("/route/timeout"))
            .unwrap_or_else(|| panic!("{sidecar_diffs:#?}"));
        assert_eq!(
            (&timeout["left"], &timeout["right"]),
            (&json!("5s"), &json!("7s"))
        );
        // The sidecar of another namespace is not served to the system token: istiod's config
        // dump stands in, and says so; the gateway of the system namespace is subscribed to.
        let sidecar_report = report["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["proxy"] == sidecar.as_str())
            .unwrap();
        let notes = sidecar_report["notes"].to_string();
        assert!(notes.contains("config dump"), "{sidecar_report:#}");

        let gateway_report = report["proxies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["proxy"] == gateway.as_str())
            .unwrap();
        assert!(
            gateway_report.get("notes").is_none(),
            "subscribed to as the gateway: {gateway_report:#}"
        );
        for d in differences(&report, &gateway) {
            assert_eq!(
                (&d["type"], &d["path"]),
                (&json!("cds"), &json!("/connectTimeout")),
                "{d:#}"
            );
        }

        // The same comparison between two real daemons: the canary revision served by a second
        // Rudder, each proxy subscribed to on both with its own token. What the shadow built in
        // process is what a daemon of that revision serves.
        let canary = c.rudder(&["--revision", "canary", "--lease-name", "rudder-canary"]);
        eventually(60, "canary ready", || {
            http_get(canary.addr("http"), "/ready").0 == 200
        });
        for (id, ns) in [(&sidecar, &apps), (&gateway, &c.ns)] {
            let token = c.token_in(ns, "default");
            let subscribed = |addr: std::net::SocketAddr| {
                let (token, root, system) = (token.clone(), root.clone(), c.ns.clone());
                let node = node(id, ns);
                c.rt.block_on(async move {
                    let tls = Tls {
                        ca_pem: root,
                        server_name: "istiod.istio-system.svc".into(),
                    };
                    ControlPlane::connect(&addr.to_string(), &system, Some(tls), Some(token))
                        .await
                        .unwrap()
                        .subscribe(&node)
                        .await
                        .unwrap()
                })
            };
            let (a, b) = (
                subscribed(daemon.addr("grpc-xds-tls")),
                subscribed(canary.addr("grpc-xds-tls")),
            );
            assert!(a.resources.contains_key(&TypeUrl::Endpoint), "{a:?}");
            let between: BTreeSet<(String, String, String)> = diff(&a, &b)
                .into_iter()
                .map(|d| (d.type_url.short().to_string(), d.resource, d.path))
                .collect();
            let shadowed: BTreeSet<(String, String, String)> = differences(&report, id)
                .iter()
                .map(|d| {
                    let s = |k: &str| d[k].as_str().unwrap().to_string();
                    (s("type"), s("resource"), s("path"))
                })
                .collect();
            assert_eq!(between, shadowed, "{id}");
        }

        // Accepted differences, with their reasons, pass the run; the text report names them.
        let allow = dir.path().join("allow.yaml");
        std::fs::write(
            &allow,
            "- type: cds\n  path: /connectTimeout\n  reason: the canary's mesh config sets 4s\n\
             - type: rds\n  resource: \"80\"\n  path: \"/virtualHosts[ext.example.com:80]/*\"\n  reason: canary route\n",
        )
        .unwrap();
        let (code, out, err) = shadow(
            &istiod,
            &c,
            dir.path(),
            &["--allow", allow.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        eprintln!("{out}");
        assert!(
            out.contains("2 proxies: 2 identical, 0 differing, 0 unsupported"),
            "{out}"
        );
        assert!(
            out.contains("allowed: the canary's mesh config sets 4s"),
            "{out}"
        );
        assert!(
            out.contains("      istiod: \"5s\"\n      rudder: \"7s\""),
            "{out}"
        );

        // A control plane that cannot be reached is an error, not a pass.
        let (code, _, err) = shadow("127.0.0.1:1", &c, dir.path(), &[]);
        assert_eq!(code, 2, "{err}");

        // precheck with istiod: the proxies that differ are a blocker, unless accepted.
        let istiod = daemon.addr("grpc-xds-tls").to_string();
        let (code, out, err) = against_istiod("precheck", &istiod, &c, dir.path(), &[]);
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(
            out.contains("Shadow of istiod: 2 proxies, 2 differing, 0 not compared"),
            "{out}"
        );
        assert!(out.contains("2 of 2 proxies differ from istiod"), "{out}");
        let (code, out, err) = against_istiod(
            "precheck",
            &istiod,
            &c,
            dir.path(),
            &["--allow", allow.to_str().unwrap()],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("Verdict: GO"), "{out}");
    }
}

const CHANGE: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews.bookinfo.svc.cluster.local]
  http:
  - name: canary
    timeout: 3s
    route:
    - destination: {host: reviews.bookinfo.svc.cluster.local, subset: v9}
"#;

fn what_if(
    daemon: &crate::common::Daemon,
    dir: &std::path::Path,
    change: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let file = dir.join("change.yaml");
    std::fs::write(&file, change).unwrap();
    let config = dir.join("config");
    let out = rudder()
        .args(["what-if", "--config-source", "files", "--config-dir"])
        .arg(&config)
        .arg("-f")
        .arg(&file)
        .args(["--daemon", &daemon.addr("monitoring").to_string()])
        .args(extra)
        .env_remove("RUST_LOG")
        .output()
        .expect("run rudder what-if");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn what_if_names_the_connected_proxies_a_change_reaches_with_its_route_and_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir(&config).unwrap();
    for f in ["services.yaml", "routing.yaml"] {
        std::fs::copy(format!("examples/{f}"), config.join(f)).unwrap();
    }
    let daemon = crate::common::Daemon::start(&config, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = daemon.addr("grpc-xds");
    // A productpage sidecar reaches reviews; a sidecar of another namespace, scoped to it, does not.
    let _connected = rt.block_on(async {
        let mut out = Vec::new();
        for (id, ns) in [
            (
                "sidecar~10.0.0.9~productpage-1.bookinfo~bookinfo.svc.cluster.local",
                "bookinfo",
            ),
            ("sidecar~10.0.0.7~tool-1.ops~ops.svc.cluster.local", "ops"),
        ] {
            let mut s = Sotw::open_with_metadata(addr, id, &[("NAMESPACE", ns)])
                .await
                .unwrap();
            let cds = s.recv().await;
            s.ack(&cds, &[]).await;
            out.push(s);
        }
        out
    });
    crate::common::write(
        &config,
        "ops-sidecar.yaml",
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: ops}\n\
         spec:\n  egress:\n  - hosts: [\"./*\"]\n",
    );
    eventually(30, "both proxies listed", || {
        http_get(daemon.addr("monitoring"), "/debug/adsz")
            .1
            .matches("connectionId")
            .count()
            == 2
    });

    let (code, out, err) = what_if(&daemon, dir.path(), CHANGE, &["--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    assert_eq!(report["summary"]["proxies"], 2, "{report:#}");
    assert_eq!(report["summary"]["differing"], 1, "{report:#}");
    let productpage = "sidecar~10.0.0.9~productpage-1.bookinfo~bookinfo.svc.cluster.local";
    let changed = differences(&report, productpage);
    assert!(
        changed
            .iter()
            .all(|d| d["type"] == "rds" && d["resource"] == "9080"),
        "{changed:#?}"
    );
    assert!(
        changed
            .iter()
            .any(|d| d["path"].as_str().unwrap().ends_with("/route/timeout") && d["right"] == "3s"),
        "{changed:#?}"
    );
    assert!(
        changed.iter().any(|d| d["sources"]
            .to_string()
            .contains("VirtualService/bookinfo/reviews")),
        "{changed:#?}"
    );
    assert!(differences(&report, "sidecar~10.0.0.7~tool-1.ops~ops.svc.cluster.local").is_empty());
    // The subset no DestinationRule defines: the analysis message the change would raise.
    let raised = report["analysis"]["raised"].to_string();
    assert!(
        raised.contains("IST0101") && raised.contains("v9"),
        "{report:#}"
    );

    // Removing the VirtualService instead: the route goes back to the plain service route.
    let (code, out, err) = what_if(&daemon, dir.path(), CHANGE, &["--delete"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("2 proxies: 1 unchanged, 1 changed, 0 unsupported"),
        "{out}"
    );

    // A change admission would refuse is refused here, with the reason, and nothing compared.
    let bad = CHANGE.replace("timeout: 3s", "timeout: soon");
    let (code, out, err) = what_if(&daemon, dir.path(), &bad, &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("timeout"), "{err}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn precheck_reads_the_cluster_as_a_switch_would_and_says_no_go_with_the_reasons() {
    for c in Cluster::all("precheck") {
        if c.is_fake() {
            for (plural, kind) in [
                ("gateways", "Gateway"),
                ("virtualservices", "VirtualService"),
            ] {
                c.apply(istio_crd("networking.istio.io", plural, kind));
            }
        }
        let apps = format!("{}-apps", c.ns);
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": apps, "labels": {"istio.io/rev": "canary"}}}));
        c.apply(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "web", "namespace": apps},
            "spec": {"hosts": ["web"], "http": [{"route": [{"destination": {"host": "web"}}]}]}}),
        );
        // A field Rudder accepts without honouring: a blocker, named with the object.
        c.apply(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": apps},
            "spec": {"selector": {"istio": "ingressgateway"},
                     "servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"},
                                  "hosts": ["*"], "bind": "10.0.0.1"}]}}),
        );
        // istiod as its chart renders it (no pods: nothing runs it here).
        c.apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "istiod", "namespace": c.ns, "labels": {"app": "istiod"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "istiod"}},
                "template": {"metadata": {"labels": {"app": "istiod"}}, "spec": {"containers": [{
                    "name": "discovery", "image": "docker.io/istio/pilot:1.30.3",
                    "args": ["discovery", "--monitoringAddr=:15014", "--log_output_level=default:info",
                             "--domain", "cluster.local", "--keepaliveMaxServerConnectionAge", "30m"],
                    "env": [{"name": "PILOT_ENABLE_ANALYSIS", "value": "false"},
                            {"name": "PILOT_ENABLE_QUIC_LISTENERS", "value": "true"}]}]}}}}));
        let webhook = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": format!("istio-revision-tag-prod-{}", c.ns),
                         "labels": {"istio.io/rev": "canary", "istio.io/tag": "prod"}},
            "webhooks": []});
        c.apply(webhook.clone());
        let kubeconfig = c.kubeconfig.to_string_lossy().to_string();
        let run = |json: bool| {
            let mut cmd = rudder();
            cmd.args([
                "precheck",
                "--config-source",
                "kubernetes",
                "--kubeconfig",
                &kubeconfig,
            ])
            .args(["--system-namespace", &c.ns])
            .env_remove("RUST_LOG");
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().expect("run rudder precheck");
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        };
        let (code, out, err) = run(true);
        assert_eq!(code, 1, "no-go\n{out}\n{err}");
        let report: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
        assert_eq!(report["verdict"]["go"], false);
        assert!(
            report["objects"]["VirtualService"].as_u64().unwrap() >= 1,
            "{report:#}"
        );
        let unhonoured = report["unhonoured"].to_string();
        assert!(
            unhonoured.contains(&format!("Gateway {apps}/edge: spec.servers[0].bind")),
            "{report:#}"
        );
        let env = report["env_unread"].to_string();
        assert!(env.contains("PILOT_ENABLE_QUIC_LISTENERS"), "{report:#}");
        assert!(
            !env.contains("PILOT_ENABLE_ANALYSIS"),
            "read by Rudder: {report:#}"
        );
        assert_eq!(
            report["flags_refused"],
            json!([]),
            "the chart's flags all start Rudder"
        );
        assert!(
            report["revisions"]["canary"].to_string().contains("prod"),
            "{report:#}"
        );
        assert_eq!(
            report["namespaces"][&apps], "istio.io/rev=canary",
            "{report:#}"
        );

        let (code, out, _) = run(false);
        assert_eq!(code, 1);
        assert!(out.contains("Verdict: NO-GO ("), "{out}");
        assert!(out.contains("Revision canary (tags: prod)"), "{out}");

        // Without what blocks, a go.
        c.delete(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": apps}}),
        );
        c.delete(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "istiod", "namespace": c.ns}}));
        if c.is_fake() {
            let (code, out, err) = run(false);
            assert_eq!(code, 0, "{out}\n{err}");
            assert!(out.contains("Verdict: GO"), "{out}");
        }
        c.delete(webhook);
        c.delete(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apps}}));
    }
}

/// The diff engine reads a real Envoy's `/config_dump` (proto field names, what Envoy holds) and
/// the daemon's dump of that Envoy (JSON names, what Rudder sent) as the same config; after a
/// change, Envoy's new dump against the daemon's old one shows exactly the change.
#[test]
fn a_real_envoys_config_dump_is_what_the_daemon_says_it_sent() {
    use rudder::compare::{ProxyConfig, diff};
    let Some(envoy_bin) = crate::common::peers::peer("venv/bin/envoy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for f in ["services.yaml", "routing.yaml"] {
        std::fs::copy(format!("examples/{f}"), dir.path().join(f)).unwrap();
    }
    let daemon = crate::common::Daemon::start(
        dir.path(),
        &["--debounce-after", "20ms", "--file-debounce", "20ms"],
    );
    let envoy =
        crate::common::peers::Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), "bookinfo", false);
    let envoy_view = || {
        let (_, text) = http_get(envoy.admin, "/config_dump?include_eds");
        ProxyConfig::from_config_dump_json(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let rudder_view = || {
        let (status, text) = http_get(
            daemon.addr("monitoring"),
            "/debug/config_dump?proxyID=client-0.bookinfo&include_eds",
        );
        assert_eq!(status, 200, "{text}");
        ProxyConfig::from_config_dump_json(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    eventually(30, "Envoy holds routes and endpoints", || {
        let v = envoy_view();
        v.get(rudder::xds::types::TypeUrl::Route).count() > 0
            && v.get(rudder::xds::types::TypeUrl::Endpoint).count() > 0
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = diff(&rudder_view(), &envoy_view());
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Envoy holds other than what the daemon sent: {left:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let before = rudder_view();
    assert!(
        before.types.len() >= 4,
        "clusters, endpoints, listeners, routes: {:?}",
        before.types
    );

    let routing = std::fs::read_to_string(dir.path().join("routing.yaml")).unwrap();
    crate::common::write(
        dir.path(),
        "routing.yaml",
        &routing
            .replace("weight: 90", "weight: 80")
            .replace("weight: 10", "weight: 20"),
    );
    let mut changed = Vec::new();
    eventually(30, "Envoy has the new weights", || {
        changed = diff(&before, &envoy_view());
        !changed.is_empty()
    });
    for d in &changed {
        assert_eq!(d.type_url, rudder::xds::types::TypeUrl::Route, "{d:?}");
        assert!(d.path.contains("/route/weightedClusters/clusters"), "{d:?}");
    }
    let weights: Vec<_> = changed
        .iter()
        .filter_map(|d| d.right.as_ref())
        .map(|v| v.to_string())
        .collect();
    assert!(
        weights.iter().any(|w| w.contains("80")) && weights.iter().any(|w| w.contains("20")),
        "{changed:#?}"
    );
}
