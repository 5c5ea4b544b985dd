//! The Kubernetes source against an API server: the in-process fake (always), and a real one too when
//! `KUBECONFIG` is set (each run in its own namespace). Scenarios that need the fake's fault hooks
//! (compaction, injected 429s, blocked lists, CRD churn) say so and are skipped on a real cluster.

use crate::common;
use crate::common::ads::{CDS, EDS, RDS, Sotw, cla_names, claims, cluster_names};
use crate::common::cluster::{Cluster, istio_crd};
use crate::common::{Daemon, eventually, http_get};
use serde_json::{Value, json};
use std::time::Duration;

fn service(ns: &str, name: &str, port: i32) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
           "spec": {"ports": [{"name": "http-web", "port": port, "targetPort": 8080}], "clusterIP": "10.96.0.10"}})
}

fn slice(ns: &str, svc: &str, ips: &[&str], pod: bool) -> Value {
    let endpoints: Vec<Value> = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let mut e = json!({"addresses": [ip], "conditions": {"ready": true}});
            if pod {
                e["targetRef"] =
                    json!({"kind": "Pod", "name": format!("{svc}-{i}"), "namespace": ns});
                e["nodeName"] = json!("node-a");
            }
            e
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": format!("{svc}-slice"), "namespace": ns,
                        "labels": {"kubernetes.io/service-name": svc, "endpointslice.kubernetes.io/managed-by": "rudder-tests"}},
           "addressType": "IPv4", "ports": [{"name": "http-web", "port": 8080, "protocol": "TCP"}], "endpoints": endpoints})
}

/// An integer gauge from `/metrics` (-1 when absent).
fn gauge(d: &Daemon, name: &str) -> i64 {
    let (_, metrics) = http_get(d.addr("monitoring"), "/metrics");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(-1)
}

fn wait_ready(d: &Daemon) {
    eventually(60, "rudder ready", || {
        http_get(d.addr("http"), "/ready").0 == 200
    });
}

fn host(ns: &str, svc: &str) -> String {
    format!("{svc}.{ns}.svc.cluster.local")
}

fn proxy_id(ns: &str) -> String {
    format!("sidecar~10.9.9.9~client.{ns}~{ns}.svc.cluster.local")
}

/// Waits for the next CDS response containing (or not) a cluster, ACKing along the way.
async fn cds_until(s: &mut Sotw, want: &str, present: bool) -> Vec<String> {
    for _ in 0..50 {
        let resp = s.recv().await;
        let names = if resp.type_url == CDS {
            cluster_names(&resp)
        } else {
            Vec::new()
        };
        s.ack(&resp, &[]).await;
        if resp.type_url == CDS && names.iter().any(|n| n == want) == present {
            return names;
        }
    }
    panic!(
        "CDS never {} {want}",
        if present { "contained" } else { "dropped" }
    );
}

#[test]
fn services_and_endpoint_slices_become_clusters_with_eds_only_updates() {
    for c in Cluster::all("svc") {
        let ns = c.ns.clone();
        if c.is_fake() {
            c.apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a",
                "labels": {"topology.kubernetes.io/region": "eu", "topology.kubernetes.io/zone": "eu-1a"}}}));
            c.apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": ns, "labels": {"app": "web", "version": "v1"}},
                "spec": {"serviceAccountName": "web-sa", "nodeName": "node-a", "containers": [{"name": "app", "image": "web"}]}}));
        }
        c.apply(service(&ns, "web", 80));
        c.apply(slice(&ns, "web", &["10.1.0.5"], c.is_fake()));
        let daemon = c.rudder(&[]);
        wait_ready(&daemon);
        let cluster = format!("outbound|80||{}", host(&ns, "web"));
        c.rt.block_on(async {
            let mut s = Sotw::open(daemon.addr("grpc-xds"), &proxy_id(&ns))
                .await
                .unwrap();
            cds_until(&mut s, &cluster, true).await;
            s.send(EDS, &[&cluster], "", "", None).await;
            let eds = s.recv().await;
            let cla = &claims(&eds)[0];
            let text = format!("{cla:?}");
            assert!(text.contains("10.1.0.5") && text.contains("8080"), "{text}");
            if c.is_fake() {
                let loc = cla.endpoints[0].locality.as_ref().unwrap();
                assert_eq!(
                    (loc.region.as_str(), loc.zone.as_str()),
                    ("eu", "eu-1a"),
                    "locality from the node"
                );
            }
            s.ack(&eds, &[&cluster]).await;

            // An endpoint change is an EDS-only push.
            c.put(slice(&ns, "web", &["10.1.0.5", "10.1.0.6"], c.is_fake()))
                .await;
            let push = s.recv().await;
            assert_eq!(push.type_url, EDS, "endpoint changes push only EDS");
            assert_eq!(cla_names(&push), std::slice::from_ref(&cluster));
            assert!(format!("{:?}", claims(&push)[0]).contains("10.1.0.6"));
            s.ack(&push, &[&cluster]).await;
            // The proxy's address is in no endpoint yet (istiod's pilot_no_ip); listed but not
            // ready, it counts in pilot_endpoint_not_ready instead.
            assert_eq!(
                gauge(&daemon, "pilot_no_ip"),
                1,
                "one proxy, in no endpoint"
            );
            assert_eq!(gauge(&daemon, "pilot_endpoint_not_ready"), 0);
            let mut not_ready = slice(&ns, "web", &["10.1.0.5", "10.9.9.9"], false);
            not_ready["endpoints"][1]["conditions"]["ready"] = json!(false);
            c.put(not_ready).await;
            eventually(10, "the proxy's endpoint counted as not ready", || {
                gauge(&daemon, "pilot_endpoint_not_ready") == 1
            });
            assert_eq!(gauge(&daemon, "pilot_no_ip"), 0);

            c.remove(service(&ns, "web", 80)).await;
            cds_until(&mut s, &cluster, false).await;
        });
        let (_, metrics) = http_get(daemon.addr("monitoring"), "/metrics");
        assert!(
            metrics.contains("pilot_k8s_reg_events{type=\"EndpointSlice\""),
            "{metrics}"
        );
        // What the push pipeline received, in istiod's types.
        for kind in ["eds", "svcdelete"] {
            assert!(
                metrics.contains(&format!("pilot_inbound_updates{{type=\"{kind}\"}}")),
                "{kind}: {metrics}"
            );
        }
    }
}

fn crd(plural: &str, kind: &str) -> Value {
    istio_crd("networking.istio.io", plural, kind)
}

/// The fake gets `crds`; a real cluster must have them already (else the caller skips, saying so).
pub(crate) fn crds_installed<const N: usize>(c: &Cluster, crds: [Value; N]) -> bool {
    if c.is_fake() {
        c.rt.block_on(async {
            for crd in crds {
                c.put(crd).await;
            }
        });
        return true;
    }
    let missing: Vec<String> = crds
        .iter()
        .filter(|crd| c.get_json((*crd).clone()).is_none())
        .map(|crd| {
            crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    if !missing.is_empty() {
        eprintln!("CRDs not installed ({missing:?}): skipping");
    }
    missing.is_empty()
}

fn destination_rule(ns: &str, subset: &str) -> Value {
    json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule", "metadata": {"name": "web", "namespace": ns},
           "spec": {"host": "web", "subsets": [{"name": subset, "labels": {"version": "v1"}}]}})
}

#[test]
fn istio_crd_installed_late_is_watched_and_invalid_objects_are_refused() {
    // Installing and deleting CRDs is cluster-wide: only on the fake.
    let c = Cluster::fake("crd");
    let ns = c.ns.clone();
    c.apply(service(&ns, "web", 80));
    let daemon = c.rudder(&[]);
    wait_ready(&daemon);
    let subset_cluster = format!("outbound|80|v1|{}", host(&ns, "web"));
    c.rt.block_on(async {
        let mut s = Sotw::open(daemon.addr("grpc-xds"), &proxy_id(&ns))
            .await
            .unwrap();
        cds_until(&mut s, &format!("outbound|80||{}", host(&ns, "web")), true).await;
        c.put(crd("destinationrules", "DestinationRule")).await;
        c.put(destination_rule(&ns, "v1")).await;
        cds_until(&mut s, &subset_cluster, true).await;
        // An invalid update is refused; the last good version stays.
        c.put(destination_rule(&ns, "Bad_Subset")).await;
        eventually(10, "invalid object counted", || {
            http_get(daemon.addr("monitoring"), "/metrics")
                .1
                .contains("rudder_k8s_invalid_objects_total{kind=\"DestinationRule\"} 1")
        });
        let (_, configz) = http_get(daemon.addr("monitoring"), "/debug/configz");
        assert!(
            configz.contains("\"name\":\"v1\"") && !configz.contains("Bad_Subset"),
            "{configz}"
        );
        // The CRD goes away: so do its objects.
        c.remove(crd("destinationrules", "DestinationRule")).await;
        cds_until(&mut s, &subset_cluster, false).await;
    });
    // Istio config events are counted apart from the registry's, as istiod counts them.
    let (_, metrics) = http_get(daemon.addr("monitoring"), "/metrics");
    assert!(
        metrics.contains("pilot_k8s_cfg_events{type=\"DestinationRule\""),
        "{metrics}"
    );
    assert!(
        !metrics.contains("pilot_k8s_reg_events{type=\"DestinationRule\""),
        "{metrics}"
    );
}

#[test]
fn watch_expiry_and_throttling_relist_without_losing_or_duplicating_state() {
    let c = Cluster::fake("relist");
    let fake = c.fake.as_ref().unwrap();
    let ns = c.ns.clone();
    for svc in ["a", "b"] {
        c.apply(service(&ns, svc, 80));
    }
    let daemon = c.rudder(&[]);
    wait_ready(&daemon);
    let name = |s: &str| format!("outbound|80||{}", host(&ns, s));
    c.rt.block_on(async {
        let mut s = Sotw::open(daemon.addr("grpc-xds"), &proxy_id(&ns))
            .await
            .unwrap();
        cds_until(&mut s, &name("b"), true).await;
        // While watches are down, history moves on and is compacted: the watchers must relist.
        fake.pause_watches();
        c.remove(service(&ns, "a", 80)).await;
        c.put(service(&ns, "c", 80)).await;
        c.put(service(&ns, "b", 81)).await;
        fake.compact();
        fake.fail_next("/api/v1/services", 429, 3);
        fake.resume_watches();
        let names = cds_until(&mut s, &name("c"), true).await;
        assert!(
            !names.contains(&name("a")),
            "deleted during the gap: gone after the relist"
        );
        assert!(
            names.contains(&format!("outbound|81||{}", host(&ns, "b"))),
            "modified during the gap: {names:?}"
        );
        assert!(!names.contains(&name("b")), "no stale port");
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "no duplicates");
    });
    let (_, metrics) = http_get(daemon.addr("monitoring"), "/metrics");
    assert!(
        metrics.contains("rudder_k8s_watch_errors_total{type=\"Service\"}"),
        "410 and 429 were seen and retried: {metrics}"
    );
}

#[test]
fn ready_only_after_every_initial_sync() {
    let c = Cluster::fake("ready");
    let fake = c.fake.as_ref().unwrap();
    c.apply(service(&c.ns, "web", 80));
    fake.block_lists("/api/v1/pods");
    let daemon = c.rudder(&[]);
    // The Services are listed (judged), the pods are not: still not ready.
    eventually(30, "Services listed", || {
        common::metric(
            &daemon,
            "rudder_k8s_watch_events_judged_total{kind=\"Service\"}",
        ) >= 1.0
    });
    let (code, _) = http_get(daemon.addr("http"), "/ready");
    assert_eq!(code, 503, "not ready while pods are not listed");
    fake.unblock_lists();
    wait_ready(&daemon);
}

fn leads(d: &Daemon) -> bool {
    http_get(d.addr("monitoring"), "/metrics")
        .1
        .lines()
        .any(|l| l == "rudder_leader 1")
}

fn leader_count(daemons: &[&Daemon]) -> usize {
    daemons.iter().filter(|d| leads(d)).count()
}

#[test]
fn one_leader_and_takeover_when_it_dies() {
    for c in Cluster::all("leader") {
        let a = c.rudder(&[]);
        let b = c.rudder(&[]);
        eventually(30, "exactly one leader", || leader_count(&[&a, &b]) == 1);
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(leader_count(&[&a, &b]), 1, "never two");
        let a_leads = leads(&a);
        let (mut dead, survivor) = if a_leads { (a, b) } else { (b, a) };
        // Killed without a chance to release: the survivor takes over once the lease expires.
        let _ = dead.child.kill();
        let _ = dead.child.wait();
        eventually(15, "survivor takes over within the lease TTL", || {
            leader_count(&[&survivor]) == 1
        });
    }
}

#[test]
fn mesh_config_discovery_selectors_and_outbound_policy() {
    for c in Cluster::all("mesh") {
        let ns = c.ns.clone();
        let other = format!("{ns}-other");
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"mesh": "on"}}}));
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}));
        c.apply(service(&ns, "inside", 80));
        c.apply(service(&other, "outside", 80));
        let daemon = c.rudder(&[]);
        wait_ready(&daemon);
        let inside = format!("outbound|80||{}", host(&ns, "inside"));
        let outside = format!("outbound|80||{}", host(&other, "outside"));
        c.rt.block_on(async {
            let mut s = Sotw::open(daemon.addr("grpc-xds"), &proxy_id(&ns)).await.unwrap();
            let names = cds_until(&mut s, &inside, true).await;
            assert!(names.contains(&outside), "no selectors: every namespace");
            c.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "istio", "namespace": ns},
                "data": {"mesh": "discoverySelectors:\n- matchLabels: {mesh: \"on\"}\noutboundTrafficPolicy:\n  mode: REGISTRY_ONLY\n"}})).await;
            let names = cds_until(&mut s, &outside, false).await;
            assert!(names.contains(&inside), "selected namespace stays");
            s.send(RDS, &["80"], "", "", None).await;
            loop {
                let r = s.recv().await;
                s.ack(&r, if r.type_url == RDS { &["80"] } else { &[] }).await;
                if r.type_url == RDS {
                    assert!(!format!("{:?}", r.resources).contains("allow_any"), "REGISTRY_ONLY: no passthrough host");
                    break;
                }
            }
            // A mesh config that cannot be read keeps the settings in force (not the flags'
            // defaults, which would bring every namespace back): counted, then a later push
            // still leaves the unselected namespace out.
            c.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "istio", "namespace": ns},
                "data": {"mesh": "outboundTrafficPolicy: [not, a, policy]\n"}})).await;
            eventually(30, "the broken mesh config counted", || {
                common::metric(&daemon, "rudder_mesh_config_errors_total") >= 1.0
            });
            c.put(service(&ns, "later", 80)).await;
            let later = format!("outbound|80||{}", host(&ns, "later"));
            let names = cds_until(&mut s, &later, true).await;
            assert!(!names.contains(&outside), "discoverySelectors kept: {names:?}");
        });
        if !c.is_fake() {
            c.delete(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}));
        }
    }
}

fn ns_obj(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn root_cert_cm(ns: &str, text: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "istio-ca-root-cert", "namespace": ns}, "data": {"root-cert.pem": text}})
}

/// TokenReview-authenticated CSRs, the persisted self-signed root, and the root-cert ConfigMap in every
/// namespace, repaired when deleted or edited. Fake only: it needs tokens the fake can vouch for.
#[test]
fn kubernetes_ca_token_review_persisted_root_and_root_configmaps() {
    let c = Cluster::fake("ca");
    let fake = c.fake.as_ref().unwrap();
    fake.add_token("good", "foo", "bar", &["istio-ca"]);
    fake.add_token(
        "api-audience",
        "foo",
        "bar",
        &["https://kubernetes.default.svc"],
    );
    fake.reject_token("expired", "token has expired");
    for ns in [c.ns.as_str(), "foo", "bar"] {
        c.apply(ns_obj(ns));
    }
    let daemon = c.rudder(&[]);
    wait_ready(&daemon);
    let root = c.ca_root();
    assert!(root.contains("BEGIN CERTIFICATE"));
    for ns in ["foo", "bar", c.ns.as_str()] {
        eventually(20, "root ConfigMap written", || {
            c.get_json(root_cert_cm(ns, ""))
                .is_some_and(|cm| cm["data"]["root-cert.pem"] == root.as_str())
        });
    }
    c.rt.block_on(async {
        let ch = common::ca::channel(
            daemon.addr("grpc-xds-tls"),
            &root,
            "istiod.istio-system.svc",
            None,
        )
        .await
        .unwrap();
        let (csr, _) = common::ca::csr(&["spiffe://cluster.local/ns/foo/sa/bar"]);
        let chain = common::ca::create(ch.clone(), &csr, Some("good"), 0)
            .await
            .expect("TokenReview-authenticated");
        assert_eq!(chain.last().unwrap().trim(), root.trim());
        for (token, text) in [
            ("api-audience", "not for audience istio-ca"),
            ("expired", "token has expired"),
            ("forged", "invalid bearer token"),
        ] {
            let err = common::ca::create(ch.clone(), &csr, Some(token), 0)
                .await
                .expect_err("refused");
            assert_eq!(err.code(), tonic::Code::Unauthenticated, "{token}: {err:?}");
            assert!(err.message().contains(text), "{token}: {err:?}");
        }
    });
    // Deleted or edited ConfigMaps are repaired by the leader; new namespaces get one.
    c.delete(root_cert_cm("foo", ""));
    c.apply(root_cert_cm("bar", "tampered"));
    c.apply(ns_obj("late"));
    for ns in ["foo", "bar", "late"] {
        eventually(20, "root ConfigMap repaired", || {
            c.get_json(root_cert_cm(ns, ""))
                .is_some_and(|cm| cm["data"]["root-cert.pem"] == root.as_str())
        });
    }
    // A restart signs with the same persisted root.
    drop(daemon);
    let again = c.rudder(&[]);
    wait_ready(&again);
    c.rt.block_on(async {
        let ch = common::ca::channel(
            again.addr("grpc-xds-tls"),
            &root,
            "istiod.istio-system.svc",
            None,
        )
        .await
        .expect("same root after restart");
        let (csr, _) = common::ca::csr(&[]);
        assert!(common::ca::create(ch, &csr, Some("good"), 0).await.is_ok());
    });
}

/// A plugged-in CA (Secret `cacerts`): certificates chain leaf → intermediate → root.
#[test]
fn plugged_in_cacerts_sign_under_the_given_root() {
    let c = Cluster::fake("cacerts");
    c.fake
        .as_ref()
        .unwrap()
        .add_token("good", "foo", "bar", &["istio-ca"]);
    // A root, and an intermediate signed by it, as `istioctl`/cert-manager would provide.
    let ca = common::ca::two_level_ca("Plugged Root", "Cluster Intermediate");
    let (root_pem, inter_pem) = (ca.root_pem.clone(), ca.intermediate_pem.clone());
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    c.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cacerts", "namespace": c.ns}, "data": {
        "ca-cert.pem": b64(&inter_pem), "ca-key.pem": b64(&ca.intermediate_key.serialize_pem()),
        "root-cert.pem": b64(&root_pem), "cert-chain.pem": b64(&format!("{inter_pem}{root_pem}"))}}));
    let daemon = c.rudder(&[]);
    wait_ready(&daemon);
    let dir = tempfile::tempdir().unwrap();
    c.rt.block_on(async {
        let ch = common::ca::channel(
            daemon.addr("grpc-xds-tls"),
            &root_pem,
            "istiod.istio-system.svc",
            None,
        )
        .await
        .expect("serving cert chains to the plugged root");
        let (csr, _) = common::ca::csr(&["spiffe://cluster.local/ns/foo/sa/bar"]);
        let chain = common::ca::create(ch, &csr, Some("good"), 0).await.unwrap();
        assert_eq!(chain.len(), 3, "leaf, intermediate, root");
        assert_eq!(chain[2].trim(), root_pem.trim());
        let (ok, out) = common::ca::openssl_verify(dir.path(), &chain);
        assert!(ok, "{out}");
    });
}

/// Two clusters plugged with cert-manager's layout (Secret `cacerts` of type `kubernetes.io/tls`:
/// `tls.crt` the cluster's intermediate, `tls.key` its key in the SEC1 form cert-manager writes an
/// EC key in, `ca.crt` the shared root), each with an intermediate of one root: a workload
/// certificate of either verifies under the other's trust (the root its CA serves), which is what
/// mTLS between the clusters needs. A cluster left with its own self-signed root is not trusted.
#[test]
fn two_clusters_with_cert_manager_cacerts_from_one_root_trust_each_other() {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let (root_pem, intermediates) = common::ca::root_with_intermediates(
        "Mesh Root",
        &["East Intermediate", "West Intermediate"],
    );
    let dir = tempfile::tempdir().unwrap();
    // (leaf, intermediate, the root the cluster's CA serves) per cluster.
    let mut issued: Vec<Vec<String>> = Vec::new();
    let plugged = intermediates.into_iter().map(Some).chain([None]);
    for (name, plugged) in ["east", "west", "alone"].into_iter().zip(plugged) {
        let c = Cluster::fake(&format!("cm-{name}"));
        c.fake
            .as_ref()
            .unwrap()
            .add_token("good", "foo", "bar", &["istio-ca"]);
        let served_root = if let Some((inter_pem, _, key)) = plugged {
            let pkcs8 = dir.path().join(format!("{name}-pkcs8.pem"));
            std::fs::write(&pkcs8, key.serialize_pem()).unwrap();
            let out = std::process::Command::new("openssl")
                .args(["ec", "-in"])
                .arg(&pkcs8)
                .output()
                .expect("openssl ec");
            let sec1 = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(sec1.contains("BEGIN EC PRIVATE KEY"), "{sec1}");
            c.apply(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": "cacerts", "namespace": c.ns},
                "data": {"tls.crt": b64(&inter_pem), "tls.key": b64(&sec1), "ca.crt": b64(&root_pem)}}));
            root_pem.clone()
        } else {
            String::new()
        };
        let daemon = c.rudder(&[]);
        wait_ready(&daemon);
        let served_root = if served_root.is_empty() {
            c.ca_root()
        } else {
            served_root
        };
        let chain = c.rt.block_on(async {
            let ch = common::ca::channel(
                daemon.addr("grpc-xds-tls"),
                &served_root,
                "istiod.istio-system.svc",
                None,
            )
            .await
            .expect("the CA's serving certificate chains to the root it serves");
            let (csr, _) = common::ca::csr(&["spiffe://cluster.local/ns/foo/sa/bar"]);
            common::ca::create(ch, &csr, Some("good"), 0).await.unwrap()
        });
        issued.push(chain);
        drop(daemon);
    }
    let verify = |chain: &[String], root: &str| {
        let mut with_root = chain[..chain.len() - 1].to_vec();
        with_root.push(root.to_string());
        common::ca::openssl_verify(dir.path(), &with_root)
    };
    let (east, west, alone) = (&issued[0], &issued[1], &issued[2]);
    let (ok, out) = verify(east, west.last().unwrap());
    assert!(ok, "east's workload under west's root: {out}");
    let (ok, out) = verify(west, east.last().unwrap());
    assert!(ok, "west's workload under east's root: {out}");
    assert!(
        !verify(alone, east.last().unwrap()).0,
        "a self-signed cluster is not trusted"
    );
}

pub(crate) fn webhook_configuration(
    kind: &str,
    name: &str,
    rev: &str,
    url: &str,
    webhook: Value,
) -> Value {
    let mut hook = json!({
        "clientConfig": {"url": url},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
        "timeoutSeconds": 5,
    });
    for (k, v) in webhook.as_object().unwrap() {
        hook[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name, "labels": {"istio.io/rev": rev}}, "webhooks": [hook]})
}

pub(crate) fn ca_bundles(c: &Cluster, obj: &Value) -> Vec<String> {
    use base64::Engine;
    c.get_json(obj.clone())
        .map(|o| {
            o["webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| {
                    let b64 = w["clientConfig"]["caBundle"].as_str().unwrap_or("");
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .unwrap_or_default();
                    String::from_utf8_lossy(&bytes).to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The webhooks in Kubernetes mode: the leader writes our root into the caBundle of the webhook
/// configurations labelled with our revision (and repairs it), the injector follows namespace labels
/// and ConfigMap `istio-sidecar-injector`. On a real API server the validating webhook is registered
/// by `url` and `kubectl apply` of an invalid VirtualService is denied through it (the API server must
/// reach the test machine: `RUDDER_TEST_WEBHOOK_HOST`, default 127.0.0.1).
#[test]
fn webhooks_get_our_ca_bundle_and_follow_cluster_config() {
    for c in Cluster::all("webhook") {
        let ns = c.ns.clone();
        let rev = format!("t{}", std::process::id());
        let apps = format!("{ns}-apps");
        let host = std::env::var("RUDDER_TEST_WEBHOOK_HOST").unwrap_or_else(|_| "127.0.0.1".into());
        c.apply(ns_obj(&ns));
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apps, "labels": {"istio.io/rev": rev}}}));
        // A namespace labelled with a revision tag of ours (istiod's revision tags).
        let tagged = format!("{ns}-tagged");
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tagged, "labels": {"istio.io/rev": "prod-stable"}}}));
        c.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("istio-sidecar-injector-{rev}"), "namespace": ns},
            "data": {"config": "policy: enabled\n", "values": "{\"global\": {\"hub\": \"registry.example.com/istio\", \"tag\": \"9.9\"}}"}}));
        let daemon = c.rudder(&[
            "--revision",
            &rev,
            "--https-addr",
            "0.0.0.0:0",
            "--serving-dns-names",
            &host,
            "--revision-tags",
            "prod-stable",
        ]);
        wait_ready(&daemon);
        let port = daemon.addr("webhook").port();
        let validator = webhook_configuration(
            "ValidatingWebhookConfiguration",
            &format!("rudder-validator-{rev}"),
            &rev,
            &format!("https://{host}:{port}/validate"),
            json!({"name": "rev.validation.istio.io",
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["networking.istio.io", "security.istio.io"], "apiVersions": ["*"], "resources": ["*"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}),
        );
        let injector = webhook_configuration(
            "MutatingWebhookConfiguration",
            &format!("rudder-injector-{rev}"),
            &rev,
            &format!("https://{host}:{port}/inject"),
            json!({"name": "rev.namespace.sidecar-injector.istio.io",
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "namespaceSelector": {"matchLabels": {"istio.io/rev": rev}}}),
        );
        let unowned = webhook_configuration(
            "ValidatingWebhookConfiguration",
            &format!("someone-else-{rev}"),
            "other",
            &format!("https://{host}:{port}/validate"),
            json!({"name": "other.example.com", "rules": [], "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}),
        );
        for obj in [&validator, &injector, &unowned] {
            c.apply(obj.clone());
        }
        let root = c
            .get_json(root_cert_cm(&ns, ""))
            .or_else(|| {
                eventually(20, "root ConfigMap", || {
                    c.get_json(root_cert_cm(&ns, "")).is_some()
                });
                c.get_json(root_cert_cm(&ns, ""))
            })
            .unwrap()["data"]["root-cert.pem"]
            .as_str()
            .unwrap()
            .to_string();
        for obj in [&validator, &injector] {
            eventually(20, "caBundle written", || {
                ca_bundles(&c, obj) == vec![root.clone()]
            });
        }
        assert_eq!(
            ca_bundles(&c, &unowned),
            vec![String::new()],
            "not ours: untouched"
        );
        // Someone wipes the bundle: repaired.
        c.apply(validator.clone());
        eventually(20, "caBundle repaired", || {
            ca_bundles(&c, &validator) == vec![root.clone()]
        });
        // istiod's patch series, by configuration.
        let validator_name = validator["metadata"]["name"].as_str().unwrap().to_string();
        eventually(10, "patch attempts counted", || {
            common::metric(
                &daemon,
                &format!("webhook_patch_attempts_total{{name=\"{validator_name}\"}}"),
            ) >= 2.0
        });

        // The injector: namespace label and the cluster's template.
        let review = |pod_ns: &str| {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": pod_ns, "operation": "CREATE", "userInfo": {},
                "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": pod_ns},
                    "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}})
        };
        let inject = |pod_ns: &str| {
            let (status, text) = common::https_request(
                daemon.addr("webhook"),
                &root,
                &host,
                "POST",
                "/inject",
                "application/json",
                review(pod_ns).to_string().as_bytes(),
            )
            .unwrap();
            assert_eq!(status, 200, "{text}");
            let out: Value = serde_json::from_str(&text).unwrap();
            out["response"]["patch"].as_str().map(|p| {
                use base64::Engine;
                String::from_utf8(base64::engine::general_purpose::STANDARD.decode(p).unwrap())
                    .unwrap()
            })
        };
        let patch = inject(&apps).expect("namespace labelled with our revision: injected");
        assert!(
            patch.contains("registry.example.com/istio/proxyv2:9.9"),
            "{patch}"
        );
        assert!(inject(&ns).is_none(), "unlabelled namespace: not injected");
        assert!(
            inject(&tagged).is_some(),
            "namespace labelled with a tag of our revision: injected"
        );
        // A tag made outside the daemon's flags, as `istioctl tag set` makes one: a webhook
        // configuration labelled with the tag and our revision. Namespaces using it are ours.
        let blue = format!("{ns}-blue");
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": blue, "labels": {"istio.io/rev": "blue"}}}));
        assert!(inject(&blue).is_none(), "no such tag yet");
        let mut tag_config = webhook_configuration(
            "MutatingWebhookConfiguration",
            &format!("istio-revision-tag-blue-{rev}"),
            &rev,
            &format!("https://{host}:{port}/inject"),
            json!({"name": "rev.namespace.sidecar-injector.istio.io", "rules": [],
                "namespaceSelector": {"matchLabels": {"istio.io/rev": "blue"}}}),
        );
        tag_config["metadata"]["labels"]["istio.io/tag"] = json!("blue");
        c.apply(tag_config.clone());
        eventually(20, "tag from the cluster", || inject(&blue).is_some());

        if !c.is_fake() {
            let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "virtualservices.networking.istio.io"}});
            if c.get_json(crd).is_none() {
                eprintln!("VirtualService CRD not installed: skipping the kubectl apply check");
            } else {
                let bad = format!(
                    "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: bad\n  namespace: {ns}\nspec:\n  hosts: [\"*\"]\n  http:\n  - route:\n    - destination: {{host: a}}\n"
                );
                let dir = tempfile::tempdir().unwrap();
                let file = dir.path().join("bad.yaml");
                std::fs::write(&file, bad).unwrap();
                let out = std::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&c.kubeconfig)
                    .args(["apply", "-f"])
                    .arg(&file)
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    !out.status.success(),
                    "an invalid VirtualService must be denied"
                );
                assert!(
                    stderr.contains("denied the request")
                        && stderr.contains("wildcard host * is not allowed"),
                    "{stderr}"
                );
            }
            for obj in [validator, injector, unowned] {
                c.delete(obj);
            }
            c.delete(ns_obj(&apps));
            c.delete(ns_obj(&tagged));
            c.delete(ns_obj(&blue));
            c.delete(tag_config);
        }
    }
}

/// After an API server outage (every request failing for a while), the watchers relist as soon as
/// it answers again: a deletion made during the outage reaches proxies within seconds, not after
/// a backoff that grew to 30 s (as client-go's, which left deleted services served for a minute).
#[test]
fn watchers_catch_up_at_once_after_an_api_server_outage() {
    let c = Cluster::fake("outage");
    let fake = c.fake.as_ref().unwrap();
    let ns = c.ns.clone();
    for svc in ["a", "b"] {
        c.apply(service(&ns, svc, 80));
    }
    let daemon = c.rudder(&[]);
    wait_ready(&daemon);
    let name = |s: &str| format!("outbound|80||{}", host(&ns, s));
    c.rt.block_on(async {
        let mut s = Sotw::open(daemon.addr("grpc-xds"), &proxy_id(&ns))
            .await
            .unwrap();
        cds_until(&mut s, &name("b"), true).await;
        // The outage: watches end, history is compacted (410 on the next watch) and the relists
        // fail eight times in a row, enough for client-go's backoff to reach half a minute.
        fake.pause_watches();
        c.remove(service(&ns, "a", 80)).await;
        fake.compact();
        fake.fail_next("/api/v1/services", 503, 8);
        fake.resume_watches();
        let started = std::time::Instant::now();
        let names = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            cds_until(&mut s, &name("a"), false),
        )
        .await
        .expect("the deletion reached the proxy after the outage");
        assert!(!names.contains(&name("a")));
        eprintln!(
            "caught up {:?} after the API server came back",
            started.elapsed()
        );
    });
}

/// An API server outage is logged, not shouted: each watcher says once that it fails (and later
/// how many failures it left out), then that it recovered, instead of a line per retry (hundreds
/// in seconds before). Every failure is still counted in `rudder_k8s_watch_errors_total`.
#[test]
fn an_api_server_outage_writes_a_line_per_watcher_not_per_retry() {
    let c = Cluster::fake("outage-log");
    let fake = c.fake.as_ref().unwrap();
    c.apply(service(&c.ns, "a", 80));
    let daemon = c.rudder(&[]);
    wait_ready(&daemon);
    // The replica leads (and made its one-time writes, istiod's GatewayClasses) before the
    // outage: a write the outage refuses is a line of its own, not a watcher's.
    let leading = std::time::Instant::now();
    loop {
        match daemon
            .log
            .recv_timeout(std::time::Duration::from_millis(200))
        {
            Ok(line) if line.contains("leading: writing") => break,
            _ if leading.elapsed() > std::time::Duration::from_secs(30) => {
                panic!("the replica never led")
            }
            _ => {}
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    while daemon.log.try_recv().is_ok() {}
    fake.fail_next("/", 500, usize::MAX);
    fake.pause_watches();
    let outage = std::time::Instant::now();
    let mut lines = Vec::new();
    while outage.elapsed() < std::time::Duration::from_secs(8) {
        if let Ok(line) = daemon
            .log
            .recv_timeout(std::time::Duration::from_millis(200))
        {
            lines.push(line);
        }
    }
    fake.end_failures();
    fake.resume_watches();
    // Every line about a failure: kube's own request errors, and each watcher's or lease's.
    let failed: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    let failing = failed
        .iter()
        .filter_map(|l| l.split(" what=\"").nth(1)?.split('"').next())
        .collect::<std::collections::BTreeSet<_>>();
    let client_lines = failed.iter().filter(|l| l.contains("kube_client")).count();
    assert!(!failing.is_empty(), "the outage is logged: {lines:#?}");
    assert!(
        failed.len() <= failing.len() + 1 && client_lines <= 1,
        "a line per failing watcher or lease, and kube's own request errors once, in an 8 s outage: {failed:#?}"
    );
    let retries = common::metric(&daemon, "rudder_k8s_watch_errors_total{");
    assert!(
        retries > failed.len() as f64,
        "every retry is still counted ({retries} > {})",
        failed.len()
    );
    // A watcher that resumed its watch says so with its next event.
    c.apply(service(&c.ns, "b", 80));
    eventually(30, "the Service watcher says it recovered", || {
        daemon
            .log
            .try_iter()
            .any(|l| l.contains("watch recovered") && l.contains("what=\"Service\""))
    });
}

/// PILOT_ENABLE_ANALYSIS: the leader writes istiod's analysis messages into the status of the
/// objects (IST0101 for a destination that does not exist), clears them once the reference
/// resolves, and a status write is not config: it pushes nothing.
#[test]
fn analysis_results_are_written_into_status_and_push_nothing() {
    for c in Cluster::all("analysis") {
        let ns = c.ns.clone();
        if !crds_installed(
            &c,
            [
                crd("virtualservices", "VirtualService"),
                crd("gateways", "Gateway"),
            ],
        ) {
            continue;
        }
        c.apply(ns_obj(&ns));
        let daemon = c.rudder(&["--enable-analysis", "true", "--analysis-interval", "1s"]);
        wait_ready(&daemon);
        eventually(20, "leading", || leads(&daemon));
        let triggers = || common::metric(&daemon, "pilot_push_triggers{");
        let vs_events = || {
            common::metric(
                &daemon,
                "rudder_k8s_watch_events_judged_total{kind=\"VirtualService\"}",
            )
        };
        common::status_rounds(&daemon, 1.0);
        common::settled(&daemon);
        let (before, events) = (triggers(), vs_events());

        let vs = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "reviews", "namespace": ns},
            "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "ratings"}}]}]}});
        c.apply(vs.clone());
        let status = || {
            c.get_json(vs.clone())
                .map(|o| o["status"].clone())
                .unwrap_or_default()
        };
        eventually(20, "IST0101 written", || {
            status()["validationMessages"][0]["type"]["code"] == "IST0101"
        });
        let written = status();
        assert_eq!(
            written["validationMessages"][0]["level"], "ERROR",
            "{written}"
        );
        assert_eq!(
            written["validationMessages"][0]["documentationUrl"],
            "https://istio.io/v1.30/docs/reference/config/analysis/ist0101/"
        );
        assert_eq!(written["observedGeneration"], "1", "{written}");
        if let Some(fake) = &c.fake {
            // One push for the VirtualService; the status write that followed pushed nothing,
            // and unchanged findings are not written again.
            let writes = fake.status_writes();
            // The VirtualService and the status write came back as watch events and were judged;
            // the push loop judged what changed; a round after the write judged it unchanged.
            eventually(20, "the status write's event judged", || {
                vs_events() >= events + 2.0
            });
            common::settled(&daemon);
            common::status_rounds(&daemon, 1.0);
            assert_eq!(triggers() - before, 1.0, "pushes since the VirtualService");
            assert_eq!(fake.status_writes(), writes, "unchanged findings rewritten");
        }

        // The reference resolves: the message goes.
        c.apply(service(&ns, "ratings", 80));
        eventually(20, "messages cleared", || {
            status()["validationMessages"] == json!([])
        });
        assert!(common::metric(&daemon, "rudder_status_writes_total{reason=\"written\"}") >= 2.0);
        if !c.is_fake() {
            c.delete(vs);
            c.delete(service(&ns, "ratings", 80));
        }
    }
}

/// A namespace deleted: its services leave every proxy's config, and its root ConfigMap, deleted
/// with it, is not written again while the namespace terminates (the API server would refuse).
#[test]
fn a_deleted_namespace_leaves_the_mesh_and_is_not_written_to() {
    for c in Cluster::all("nsdelete") {
        let ns = c.ns.clone();
        let gone = format!("{ns}-gone");
        c.apply(ns_obj(&ns));
        c.apply(ns_obj(&gone));
        c.apply(service(&gone, "web", 80));
        let daemon = c.rudder(&[]);
        wait_ready(&daemon);
        eventually(20, "leading", || leads(&daemon));
        eventually(20, "root ConfigMap in the namespace", || {
            c.get_json(root_cert_cm(&gone, "")).is_some()
        });
        let writes = |reason: &str| {
            common::metric(
                &daemon,
                &format!("rudder_root_cert_configmap_writes_total{{reason=\"{reason}\"}}"),
            )
        };
        let (created, errors) = (writes("created"), writes("error"));
        let web = format!("outbound|80||{}", host(&gone, "web"));
        c.rt.block_on(async {
            let mut s = Sotw::open(daemon.addr("grpc-xds"), &proxy_id(&ns))
                .await
                .unwrap();
            cds_until(&mut s, &web, true).await;
            c.remove(ns_obj(&gone)).await;
            cds_until(&mut s, &web, false).await;
        });
        eventually(120, "namespace gone", || {
            c.get_json(ns_obj(&gone)).is_none()
        });
        // Some resyncs later, still nothing written into it.
        std::thread::sleep(std::time::Duration::from_secs(1));
        assert_eq!(
            writes("error"),
            errors,
            "writes refused by a terminating namespace"
        );
        assert_eq!(
            writes("created"),
            created,
            "ConfigMap recreated in a deleted namespace"
        );
    }
}

/// Rudder as a pod runs it: no kubeconfig anywhere, the API server from
/// `KUBERNETES_SERVICE_HOST`/`PORT` over HTTPS, trusted through the mounted `ca.crt`, and the
/// mounted projected token, which the kubelet replaces before it expires. A daemon that read the
/// token once would lose the API server when the old token expired (every hour by default).
/// Fake only: a real cluster's kubelet does the rotating.
#[test]
fn runs_in_a_pod_on_the_mounted_service_account_and_follows_token_rotation() {
    let c = Cluster::fake_in_cluster("in-pod");
    let fake = c.fake.as_ref().expect("fake");
    let ns = c.ns.clone();
    c.apply(service(&ns, "before", 80));
    let daemon = c.rudder_in_pod(&[]);
    wait_ready(&daemon);
    assert!(fake.api_token_uses("first-projected-token") > 0);
    let before = format!("outbound|80||{}", host(&ns, "before"));
    let mut s = c.rt.block_on(async {
        let mut s = Sotw::open(daemon.addr("grpc-xds"), &proxy_id(&ns))
            .await
            .unwrap();
        cds_until(&mut s, &before, true).await;
        s
    });

    fake.rotate_api_token("second-projected-token");
    // The client re-reads the token file about once a minute.
    eventually(120, "requests with the rotated token", || {
        fake.api_token_uses("second-projected-token") > 0
    });
    fake.revoke_api_token("first-projected-token");
    let first_uses = fake.api_token_uses("first-projected-token");

    c.apply(service(&ns, "after", 80));
    let after = format!("outbound|80||{}", host(&ns, "after"));
    c.rt.block_on(cds_until(&mut s, &after, true));
    assert_eq!(
        fake.api_token_uses("first-projected-token"),
        first_uses,
        "the expired token is not sent again"
    );
    assert!(
        http_get(daemon.addr("http"), "/ready").0 == 200,
        "still ready"
    );
}

/// In an ambient install the leader writes istiod's ambient conditions: `istio.io/WaypointBound`
/// on services that name a waypoint (bound when it exists, not ready when it does not),
/// `ZtunnelAccepted` on AuthorizationPolicies (accepted, accepted without the HTTP parts, or not
/// enforceable by ztunnel). Another controller's conditions are kept; a removed binding removes
/// ours; the writes push nothing.
#[test]
fn ambient_conditions_are_written_into_status_and_push_nothing() {
    for c in Cluster::all("ambient-status") {
        let ns = c.ns.clone();
        if !crds_installed(
            &c,
            [
                crd("serviceentries", "ServiceEntry"),
                istio_crd(
                    "security.istio.io",
                    "authorizationpolicies",
                    "AuthorizationPolicy",
                ),
            ],
        ) {
            continue;
        }
        c.apply(ns_obj(&ns));
        let mut waypoint = service(&ns, "waypoint", 15008);
        waypoint["metadata"]["labels"] =
            json!({"gateway.istio.io/managed": "istio.io-mesh-controller"});
        c.apply(waypoint.clone());
        let mut bound = service(&ns, "reviews", 80);
        bound["metadata"]["labels"] = json!({"istio.io/use-waypoint": "waypoint"});
        c.apply(bound.clone());
        let missing = json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "external", "namespace": ns, "labels": {"istio.io/use-waypoint": "ghost"}},
            "spec": {"hosts": ["api.example.com"], "ports": [{"number": 443, "name": "tls", "protocol": "TLS"}],
                     "resolution": "DNS"}});
        c.apply(missing.clone());
        let policy = |name: &str, action: &str, rules: Value| {
            json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
                   "metadata": {"name": name, "namespace": ns},
                   "spec": {"action": action, "rules": rules}})
        };
        let l4 = policy(
            "l4",
            "ALLOW",
            json!([{"from": [{"source": {"namespaces": [ns]}}]}]),
        );
        let l7 = policy(
            "l7",
            "ALLOW",
            json!([{"to": [{"operation": {"paths": ["/admin"]}}]}]),
        );
        let audit = policy(
            "audit",
            "AUDIT",
            json!([{"to": [{"operation": {"ports": ["80"]}}]}]),
        );
        for p in [&l4, &l7, &audit] {
            c.apply(p.clone());
        }

        let daemon = c.rudder(&["--enable-ambient", "true"]);
        wait_ready(&daemon);
        eventually(20, "leading", || leads(&daemon));
        let condition = |obj: &Value, kind: &str| -> Value {
            c.get_json(obj.clone())
                .and_then(|o| {
                    o["status"]["conditions"]
                        .as_array()
                        .and_then(|l| l.iter().find(|x| x["type"] == kind).cloned())
                })
                .unwrap_or_default()
        };
        // Written in no particular order, at most RUDDER_STATUS_QPS a second: wait for all.
        eventually(20, "conditions written", || {
            condition(&audit, "ZtunnelAccepted")["status"] == "False"
                && condition(&l4, "ZtunnelAccepted").is_object()
                && condition(&l7, "ZtunnelAccepted").is_object()
                && condition(&bound, "istio.io/WaypointBound").is_object()
                && condition(&missing, "istio.io/WaypointBound").is_object()
        });
        let got = condition(&bound, "istio.io/WaypointBound");
        assert_eq!(
            (&got["status"], &got["reason"]),
            (&json!("True"), &json!("WaypointAccepted")),
            "{got}"
        );
        assert!(got["lastTransitionTime"].is_string(), "{got}");
        let got = condition(&missing, "istio.io/WaypointBound");
        assert_eq!(
            (&got["status"], &got["reason"]),
            (&json!("False"), &json!("WaypointIsNotReady")),
            "{got}"
        );
        assert_eq!(
            condition(&waypoint, "istio.io/WaypointBound"),
            Value::Null,
            "a waypoint has no waypoint"
        );
        let got = condition(&l4, "ZtunnelAccepted");
        assert_eq!(
            (&got["status"], &got["reason"], &got["observedGeneration"]),
            (&json!("True"), &json!("Accepted"), &json!("1")),
            "{got}"
        );
        let got = condition(&l7, "ZtunnelAccepted");
        assert_eq!(
            (&got["status"], &got["reason"]),
            (&json!("True"), &json!("UnsupportedValue")),
            "{got}"
        );
        assert!(
            got["message"]
                .as_str()
                .unwrap_or_default()
                .contains("paths"),
            "{got}"
        );

        // Nothing more to write: the writes pushed nothing and are not repeated.
        let triggers = || common::metric(&daemon, "pilot_push_triggers{");
        let writes = || common::metric(&daemon, "rudder_status_writes_total{reason=\"written\"}");
        common::status_rounds(&daemon, 1.0);
        common::settled(&daemon);
        let (pushes, written) = (triggers(), writes());
        // Two more rounds judge every condition unchanged; the store's changes are all judged.
        common::status_rounds(&daemon, 2.0);
        common::settled(&daemon);
        assert_eq!(triggers(), pushes, "a status write pushed");
        assert_eq!(writes(), written, "unchanged conditions rewritten");

        // Another controller's condition stays when ours goes with the binding; the label change
        // is one push, and neither status write (theirs, ours) is another.
        let ours = condition(&bound, "istio.io/WaypointBound");
        c.rt.block_on(async {
            c.api(&bound)
                .patch_status(
                    "reviews",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(json!({"status": {"conditions": [
                        ours,
                        {"type": "example.com/Audited", "status": "True", "reason": "Checked",
                         "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
                )
                .await
                .expect("status patch");
        });
        let mut unbound = bound.clone();
        unbound["metadata"]["labels"] = json!({});
        c.apply(unbound);
        eventually(20, "binding condition removed", || {
            condition(&bound, "istio.io/WaypointBound") == Value::Null
        });
        assert_eq!(
            condition(&bound, "example.com/Audited")["reason"],
            "Checked"
        );
        if c.is_fake() {
            common::status_rounds(&daemon, 1.0);
            common::settled(&daemon);
            assert_eq!(triggers() - pushes, 1.0, "pushes since the label change");
        } else {
            for obj in [waypoint, bound, missing, l4, l7, audit] {
                c.delete(obj);
            }
        }
    }
}

/// A signer outside the mesh, as cert-manager's CSR controller or a cloud CA is: it signs
/// approved `CertificateSigningRequest`s for `signer` with `issuer` (returning leaf and
/// intermediate, not the root) and denies those that ask for service account `denied`.
async fn run_signer(
    api: kube::Api<kube::api::DynamicObject>,
    signer: &str,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    intermediate_pem: String,
) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    loop {
        let list = api
            .list(&Default::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        for csr in list {
            let spec = &csr.data["spec"];
            let status = &csr.data["status"];
            let approved = status["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Approved"));
            if spec["signerName"] != signer
                || !approved
                || !status["certificate"].is_null()
                || status["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Denied"))
            {
                continue;
            }
            let name = csr.metadata.name.clone().unwrap_or_default();
            let request = b64
                .decode(spec["request"].as_str().unwrap_or_default())
                .unwrap_or_default();
            let request = String::from_utf8(request).unwrap_or_default();
            let patch = if request.is_empty() {
                continue;
            } else {
                let params = rcgen::CertificateSigningRequestParams::from_pem(&request).unwrap();
                let asks_denied = params
                    .params
                    .subject_alt_names
                    .iter()
                    .any(|s| format!("{s:?}").contains("/sa/denied"));
                if asks_denied {
                    json!({"status": {"conditions": [status["conditions"][0].clone(),
                        {"type": "Denied", "status": "True", "reason": "Policy", "message": "not this one"}]}})
                } else {
                    let leaf = params.signed_by(&issuer).unwrap();
                    let pem = format!("{}{}", leaf.pem(), intermediate_pem);
                    json!({"status": {"certificate": b64.encode(pem)}})
                }
            };
            let _ = api
                .patch_status(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(patch),
                )
                .await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API with K8S_SIGNER, as istiod's RA mode: Rudder holds no key.
/// Its serving certificate and every workload certificate come from the signer through the CSR
/// API (created, approved, read, deleted); chains end at the external root, which is what the
/// root ConfigMaps carry; a CSR for another identity never reaches the signer, and a refusal by
/// the signer is the caller's error. Fake only: a real cluster has no signer of this name.
#[test]
fn an_external_ca_signs_through_the_kubernetes_csr_api() {
    let c = Cluster::fake("external-ca");
    let fake = c.fake.as_ref().unwrap();
    fake.add_token("good", "foo", "bar", &["istio-ca"]);
    fake.add_token("denied", "foo", "denied", &["istio-ca"]);
    c.apply(ns_obj(&c.ns));
    let ca = common::ca::two_level_ca("External Root", "External Intermediate");
    let (root_pem, inter_pem) = (ca.root_pem.clone(), ca.intermediate_pem.clone());
    let csrs = c.api(
        &json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "any"}}),
    );
    let signer = c.rt.spawn(run_signer(
        csrs.clone(),
        "example.com/mesh",
        rcgen::Issuer::new(ca.intermediate_params, ca.intermediate_key),
        inter_pem.clone(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let root_file = dir.path().join("root-cert.pem");
    std::fs::write(&root_file, &root_pem).unwrap();
    let root_arg = root_file.to_string_lossy().to_string();
    let daemon = c.rudder(&[
        "--external-ca",
        "ISTIOD_RA_KUBERNETES_API",
        "--k8s-signer",
        "example.com/mesh",
        "--external-ca-root",
        &root_arg,
    ]);
    wait_ready(&daemon);
    c.rt.block_on(async {
        let ch = common::ca::channel(
            daemon.addr("grpc-xds-tls"),
            &root_pem,
            "istiod.istio-system.svc",
            None,
        )
        .await
        .expect("the serving certificate comes from the external CA");
        let (csr, _) = common::ca::csr(&["spiffe://cluster.local/ns/foo/sa/bar"]);
        let chain = common::ca::create(ch.clone(), &csr, Some("good"), 0)
            .await
            .expect("signed by the external CA");
        assert_eq!(chain.len(), 3, "leaf, intermediate, and the root appended");
        assert_eq!(chain[1].trim(), inter_pem.trim());
        assert_eq!(chain[2].trim(), root_pem.trim());
        let (ok, out) = common::ca::openssl_verify(dir.path(), &chain);
        assert!(ok, "{out}");

        let (other, _) = common::ca::csr(&["spiffe://cluster.local/ns/foo/sa/admin"]);
        let err = common::ca::create(ch.clone(), &other, Some("good"), 0)
            .await
            .expect_err("another identity");
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");

        let (refused, _) = common::ca::csr(&["spiffe://cluster.local/ns/foo/sa/denied"]);
        let err = common::ca::create(ch, &refused, Some("denied"), 0)
            .await
            .expect_err("the signer refuses");
        assert!(err.message().contains("refused"), "{err:?}");
    });
    eventually(20, "CSR objects cleaned up", || {
        c.rt.block_on(csrs.list(&Default::default()))
            .is_ok_and(|l| l.items.is_empty())
    });
    eventually(20, "root ConfigMap carries the external root", || {
        c.get_json(root_cert_cm(&c.ns, ""))
            .is_some_and(|cm| cm["data"]["root-cert.pem"] == root_pem.as_str())
    });
    signer.abort();
}

/// `rudder-loadgen --kubeconfig` as docs/performance.md runs it, scaled down: the mesh is written as
/// Services, pods and EndpointSlices; every scaling and rolling-restart event reaches every proxy
/// watching it, and new Services reach every Envoy-like proxy. With `PILOT_ENABLE_EDS_DEBOUNCE`
/// off, endpoint changes do not wait for the (here 2 s) quiet period that config changes wait for.
#[test]
fn loadgen_kubernetes_churn_reaches_every_watching_proxy() {
    for c in Cluster::all("loadgen") {
        if !crds_installed(&c, [crd("sidecars", "Sidecar")]) {
            continue;
        }
        let daemon = c.rudder_env(
            &[
                "--max-requests-per-second",
                "100000",
                "--debounce-after",
                "2s",
            ],
            &[("PILOT_ENABLE_EDS_DEBOUNCE", Some("false"))],
        );
        wait_ready(&daemon);
        let json = tempfile::NamedTempFile::new().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rudder-loadgen"))
            .args(["--xds-addr", &daemon.addr("grpc-xds").to_string()])
            .args(["--monitoring-addr", &daemon.addr("monitoring").to_string()])
            .args(["--kubeconfig", &c.kubeconfig.to_string_lossy()])
            .args(["--services", "24", "--namespaces", "3", "--sidecar-scope"])
            .args(["--proxies", "30", "--settle-ms", "300", "--changes", "2"])
            .args(["--scale-rate", "20", "--scale-seconds", "2"])
            .args(["--restart-pods", "12", "--restart-rate", "20"])
            .args(["--json", &json.path().to_string_lossy()])
            .output()
            .expect("run rudder-loadgen");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stdout}{stderr}");
        assert!(stdout.contains("connected and synced 30/30"), "{stdout}");
        let report: Value = serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap();
        for phase in ["scaling", "rolling_restart"] {
            let p = &report["churn"][phase];
            assert!(p["events"].as_u64().unwrap() > 0, "{phase}: {p}");
            assert!(p["proxy_updates"].as_u64().unwrap() > 0, "{phase}: {p}");
            assert_eq!(p["unconverged"], 0, "{phase}: {p}");
            // A debounced push waits at least the quiet period after its last event.
            assert!(p["max_ms"].as_f64().unwrap() < 2000.0, "{phase}: {p}");
        }
        // 12 pods restarted: each a slice write with the new pod and one without the old.
        assert_eq!(report["churn"]["rolling_restart"]["slice_writes"], 24);
        // Two new Services for each of the 20 Envoy-like proxies (the other 10 are gRPC clients).
        assert_eq!(report["churn"]["new_services"]["samples"], 40, "{report}");
    }
}

/// A revision reads its own mesh ConfigMap, as istiod's chart names it (`istio-<revision>`), not
/// the default revision's `istio`. Before, a revision's meshConfig was dropped.
#[test]
fn a_revision_reads_its_own_mesh_configmap() {
    for c in Cluster::all("mesh-rev") {
        let ns = c.ns.clone();
        let mesh = |name: &str, td: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns},
                "data": {"mesh": format!("trustDomain: {td}\n")}})
        };
        c.apply(mesh("istio", "default.example"));
        c.apply(mesh("istio-canary", "canary.example"));
        let daemon = c.rudder(&["--revision", "canary"]);
        wait_ready(&daemon);
        eventually(30, "the revision's mesh config", || {
            http_get(daemon.addr("monitoring"), "/debug/mesh")
                .1
                .contains("\"trustDomain\":\"canary.example\"")
        });
        drop(daemon);
        let daemon = c.rudder(&[]);
        wait_ready(&daemon);
        eventually(30, "the default revision's", || {
            http_get(daemon.addr("monitoring"), "/debug/mesh")
                .1
                .contains("\"trustDomain\":\"default.example\"")
        });
    }
}

/// Gateway API CRDs Rudder does not serve (UDPRoute here), installed in the cluster, are
/// counted and named, not ignored in silence; those it serves are not counted (a real cluster's
/// CRDs are counted as they are).
#[test]
fn unserved_gateway_api_crds_are_counted() {
    for c in Cluster::all("unserved") {
        let daemon = c.rudder(&[]);
        wait_ready(&daemon);
        if c.is_fake() {
            assert!(crds_installed(
                &c,
                [
                    istio_crd("gateway.networking.k8s.io", "httproutes", "HTTPRoute"),
                    istio_crd("gateway.networking.k8s.io", "udproutes", "UDPRoute")
                ]
            ));
            eventually(30, "the unserved Gateway API CRD counted", || {
                common::metric(&daemon, "rudder_k8s_unserved_crds ") == 1.0
            });
        } else {
            let n = common::metric(&daemon, "rudder_k8s_unserved_crds ");
            eprintln!("unserved Gateway API CRDs in this cluster: {n}");
        }
    }
}

/// ServiceEntry IP auto-allocation, as istiod 1.30 does by default: the leader writes an IPv4
/// and an IPv6 address per host into `status.addresses` of a ServiceEntry without its own, the
/// registry keeps them as the VIPs DNS-capturing proxies use, and a ServiceEntry given addresses of its own
/// has them removed.
#[test]
fn service_entries_without_addresses_are_allocated_some() {
    for c in Cluster::all("autoallocate") {
        let ns = c.ns.clone();
        if c.is_fake() {
            c.apply(istio_crd(
                "networking.istio.io",
                "serviceentries",
                "ServiceEntry",
            ));
            c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        }
        let entry = |addresses: Value| {
            json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                "metadata": {"name": "db", "namespace": ns},
                "spec": {"hosts": ["db.external.example"], "addresses": addresses,
                         "ports": [{"number": 5432, "name": "pg", "protocol": "TCP"}],
                         "resolution": "DNS"}})
        };
        c.apply(entry(json!([])));
        let daemon = c.rudder(&[]);
        wait_ready(&daemon);
        let status = || {
            c.get_json(
                json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                "metadata": {"name": "db", "namespace": ns}}),
            )
            .map(|se| se["status"]["addresses"].clone())
            .unwrap_or_default()
        };
        eventually(60, "addresses allocated", || {
            status().as_array().is_some_and(|a| a.len() == 2)
        });
        let allocated = status();
        let values: Vec<&str> = allocated
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["value"].as_str().unwrap())
            .collect();
        assert!(values[0].starts_with("240.240."), "{allocated}");
        assert!(values[1].starts_with("2001:2:"), "{allocated}");
        assert!(
            allocated
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a["host"] == "db.external.example")
        );
        eventually(60, "the registry serves them as VIPs", || {
            let (_, body) = http_get(daemon.addr("monitoring"), "/debug/registryz");
            let services: Value = serde_json::from_str(&body).unwrap_or_default();
            services.as_array().into_iter().flatten().any(|s| {
                s["hostname"] == "db.external.example"
                    && s["auto_allocated"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|x| x == values[0]))
            })
        });
        // Given addresses of its own, the allocated ones are removed.
        c.apply(entry(json!(["10.40.0.9"])));
        eventually(60, "allocated addresses removed", || status().is_null());
        drop(daemon);
    }
}

/// Canary upgrades, as istiod's revisions: each control plane serves config labelled
/// `istio.io/rev` with its own revision and unlabelled config, never config labelled for another
/// revision; relabelling moves an object from one revision to the other.
#[test]
fn each_revision_serves_its_own_config_and_the_unlabelled() {
    for c in Cluster::all("revisions") {
        let ns = c.ns.clone();
        if c.is_fake() {
            c.apply(istio_crd(
                "networking.istio.io",
                "destinationrules",
                "DestinationRule",
            ));
            c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        }
        let rule = |name: &str, revision: Option<&str>| {
            let labels = revision.map_or(json!({}), |r| json!({"istio.io/rev": r}));
            json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"host": host(&ns, "web"), "subsets": [{"name": "s", "labels": {"v": "1"}}]}})
        };
        c.apply(rule("rule-everyone", None));
        c.apply(rule("rule-stable", Some("default")));
        c.apply(rule("rule-canary", Some("canary")));
        let stable = c.rudder(&[]);
        let canary = c.rudder(&["--revision", "canary"]);
        wait_ready(&stable);
        wait_ready(&canary);
        let served = |d: &Daemon, name: &str| {
            http_get(d.addr("monitoring"), "/debug/configz")
                .1
                .contains(&format!("\"name\":\"{name}\""))
        };
        eventually(30, "each revision's rules", || {
            served(&stable, "rule-everyone")
                && served(&stable, "rule-stable")
                && served(&canary, "rule-everyone")
                && served(&canary, "rule-canary")
        });
        assert!(
            !served(&stable, "rule-canary"),
            "the canary's rule reached stable"
        );
        assert!(
            !served(&canary, "rule-stable"),
            "stable's rule reached the canary"
        );
        // Promoted: the canary's rule now names the stable revision.
        c.apply(rule("rule-canary", Some("default")));
        eventually(30, "the relabelled rule moved", || {
            served(&stable, "rule-canary") && !served(&canary, "rule-canary")
        });
    }
}
