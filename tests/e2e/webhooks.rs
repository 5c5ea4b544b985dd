//! The admission webhooks on the HTTPS port, as the API server calls them: AdmissionReview v1 over TLS
//! with the serving certificate our CA issued.

use crate::common;
use crate::common::{Daemon, http_get, https_request, metric};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const SERVER_NAME: &str = "istiod.istio-system.svc";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A files-mode daemon, once ready (its CA root written).
fn daemon() -> (Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    common::eventually(30, "daemon ready", || {
        http_get(d.addr("http"), "/ready").0 == 200
    });
    (d, dir)
}

fn root_pem(d: &Daemon) -> String {
    std::fs::read_to_string(d.ca_dir.path().join("root-cert.pem")).unwrap()
}

fn review(
    operation: &str,
    resource: (&str, &str, &str),
    kind: &str,
    ns: &str,
    object: Value,
) -> Value {
    let (group, version, plural) = resource;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{kind}-{operation}"),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "name": object["metadata"]["name"].as_str().unwrap_or(""),
            "namespace": ns,
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": if operation == "DELETE" { Value::Null } else { object.clone() },
            "oldObject": if operation == "DELETE" { object } else { Value::Null },
            "dryRun": false
        }
    })
}

/// POSTs a review and returns its response part.
fn post(d: &Daemon, path: &str, body: &Value) -> Value {
    let (status, text) = https_request(
        d.addr("webhook"),
        &root_pem(d),
        SERVER_NAME,
        "POST",
        path,
        "application/json",
        body.to_string().as_bytes(),
    )
    .expect("webhook request");
    assert_eq!(status, 200, "{text}");
    let out: Value = serde_json::from_str(&text).expect("JSON review");
    assert_eq!(out["kind"], "AdmissionReview", "{out}");
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1", "{out}");
    out["response"].clone()
}

fn istio_object(kind: &str, api_version: &str, name: &str, spec: &Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('y') {
        format!("{}ies", &lower[..lower.len() - 1])
    } else {
        format!("{lower}s")
    }
}

#[test]
fn validation_allows_valid_and_denies_invalid_objects_of_every_kind() {
    let (d, _dir) = daemon();
    let text = std::fs::read_to_string(fixtures().join("admission/cases.yaml")).unwrap();
    let cases: Vec<Value> = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(cases.len(), 12, "one case per Istio kind");
    for case in &cases {
        let kind = case["kind"].as_str().unwrap();
        let api_version = case["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap();
        let resource = (group, version, plural(kind));
        let res = (resource.0, resource.1, resource.2.as_str());

        let valid = istio_object(kind, api_version, "good", &case["valid"]);
        let r = post(
            &d,
            "/validate",
            &review("CREATE", res, kind, "default", valid),
        );
        assert_eq!(r["allowed"], true, "{kind} valid: {r}");
        assert_eq!(r["uid"], format!("uid-{kind}-CREATE"));

        let invalid = istio_object(kind, api_version, "bad", &case["invalid"]);
        let r = post(
            &d,
            "/validate",
            &review("UPDATE", res, kind, "default", invalid),
        );
        assert_eq!(r["allowed"], false, "{kind} invalid: {r}");
        let message = r["status"]["message"].as_str().unwrap_or_default();
        let want = case["message"].as_str().unwrap();
        assert!(
            message.starts_with("configuration is invalid: ") && message.contains(want),
            "{kind}: {message:?} should name {want:?}"
        );
        assert!(
            message.contains(&format!("{kind} default/bad")),
            "{message}"
        );
    }
    assert_eq!(metric(&d, "galley_validation_passed{"), 12.0);
    assert_eq!(
        metric(
            &d,
            "galley_validation_failed{group=\"networking.istio.io\",version=\"v1\",resource=\"virtualservices\",reason=\"invalid_resource\"}"
        ),
        1.0
    );
    assert_eq!(metric(&d, "galley_validation_failed{"), 12.0);
}

#[test]
fn validation_explains_what_it_cannot_judge_and_keeps_serving() {
    let (d, _dir) = daemon();
    let root = root_pem(&d);
    let vs = ("networking.istio.io", "v1", "virtualservices");
    let raw = |content_type: &str, body: &[u8]| {
        https_request(
            d.addr("webhook"),
            &root,
            SERVER_NAME,
            "POST",
            "/validate",
            content_type,
            body,
        )
        .expect("request")
    };

    // Not a review at all: an AdmissionReview that denies, saying why.
    let (status, text) = raw("application/json", b"{not json");
    assert_eq!(status, 200);
    let out: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(out["response"]["allowed"], false);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("could not decode body"),
        "{out}"
    );
    // A review without a request.
    let (_, text) = raw(
        "application/json",
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    );
    assert!(text.contains("no request"), "{text}");
    // Wrong content type, empty body, oversized body: HTTP errors, counted.
    assert_eq!(raw("text/plain", b"{}").0, 415);
    assert_eq!(raw("application/json", b"").0, 400);
    let huge = vec![b' '; 9 * 1024 * 1024];
    assert_eq!(raw("application/json", &huge).0, 413);
    assert_eq!(
        metric(&d, "galley_validation_http_error{status=\"415\"}"),
        1.0
    );

    // A kind that is not Istio's.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let r = post(
        &d,
        "/validate",
        &review(
            "CREATE",
            ("", "v1", "configmaps"),
            "ConfigMap",
            "default",
            cm,
        ),
    );
    assert_eq!(r["allowed"], false);
    assert_eq!(
        r["status"]["message"],
        "unrecognized type v1, Kind=ConfigMap"
    );

    // Fields that do not exist, values of the wrong type: decoding errors naming the field.
    let bad = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "typo"}, "spec": {"hosts": ["a"], "htp": []}});
    let r = post(
        &d,
        "/validate",
        &review("CREATE", vs, "VirtualService", "default", bad),
    );
    let message = r["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("error decoding configuration:") && message.contains("htp"),
        "{message}"
    );
    let bad = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "type"}, "spec": {"hosts": "a"}});
    let r = post(
        &d,
        "/validate",
        &review("CREATE", vs, "VirtualService", "default", bad),
    );
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("spec.hosts"),
        "{r}"
    );
    assert_eq!(
        metric(
            &d,
            "galley_validation_failed{group=\"networking.istio.io\",version=\"v1\",resource=\"virtualservices\",reason=\"crd_conversion_error\"}"
        ),
        2.0
    );

    // Deleting is never blocked, even an object that would be invalid.
    let old = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "old"}, "spec": {"hosts": ["*"]}});
    let r = post(
        &d,
        "/validate",
        &review("DELETE", vs, "VirtualService", "default", old),
    );
    assert_eq!(r["allowed"], true);

    // Still serving.
    assert_eq!(http_get(d.addr("http"), "/ready").0, 200);
    let (status, _) = https_request(
        d.addr("webhook"),
        &root,
        SERVER_NAME,
        "GET",
        "/ready",
        "text/plain",
        b"",
    )
    .unwrap();
    assert_eq!(status, 200);
}

#[test]
fn webhook_certificate_chains_to_our_root_for_the_istiod_service_name() {
    let (d, _dir) = daemon();
    let root = root_pem(&d);
    for name in [
        SERVER_NAME,
        "istiod.istio-system.svc.cluster.local",
        "127.0.0.1",
    ] {
        let (status, _) = https_request(
            d.addr("webhook"),
            &root,
            name,
            "GET",
            "/ready",
            "text/plain",
            b"",
        )
        .unwrap();
        assert_eq!(status, 200, "{name}");
    }
    // A name the certificate does not carry, and a root that is not ours, fail the handshake.
    let err = https_request(
        d.addr("webhook"),
        &root,
        "evil.example.com",
        "GET",
        "/ready",
        "text/plain",
        b"",
    )
    .unwrap_err();
    assert!(
        err.contains("certificate") || err.contains("Certificate"),
        "{err}"
    );
    let other = rcgen::CertificateParams::new(vec!["x".to_string()])
        .unwrap()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    assert!(
        https_request(
            d.addr("webhook"),
            &other,
            SERVER_NAME,
            "GET",
            "/ready",
            "text/plain",
            b""
        )
        .is_err()
    );
    // openssl agrees: the chain the port presents verifies against our root.
    let out = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &d.addr("webhook").to_string(),
            "-servername",
            SERVER_NAME,
            "-verify_return_error",
            "-verify_hostname",
            SERVER_NAME,
            "-CAfile",
        ])
        .arg(d.ca_dir.path().join("root-cert.pem"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Verify return code: 0 (ok)"), "{text}");
}

/// Posts a pod for injection and returns the pod the API server would store (the patch applied).
fn injected(d: &Daemon, pod: &Value) -> (Value, Value) {
    injected_at(d, "/inject", pod)
}

/// `injected` through another webhook path (a remote cluster's `/inject/cluster/<id>/net/<n>`).
fn injected_at(d: &Daemon, path: &str, pod: &Value) -> (Value, Value) {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let r = post(
        d,
        path,
        &review("CREATE", ("", "v1", "pods"), "Pod", ns, pod.clone()),
    );
    assert_eq!(r["allowed"], true, "{r}");
    let mut out = pod.clone();
    if let Some(patch) = r["patch"].as_str() {
        assert_eq!(r["patchType"], "JSONPatch");
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut out, &patch).expect("patch applies to the pod as sent");
    }
    (out, r)
}

/// Compares with the expected pod in the fixtures (`RUDDER_UPDATE_GOLDEN=1` rewrites it).
fn assert_golden(name: &str, actual: &Value) {
    let path = fixtures().join(format!("inject/{name}.expected.json"));
    if std::env::var_os("RUDDER_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(actual).unwrap() + "\n").unwrap();
    }
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        actual,
        &expected,
        "{name}: injected pod differs from {}:\n{}",
        path.display(),
        serde_json::to_string_pretty(actual).unwrap()
    );
}

#[test]
fn injection_output_matches_the_expected_pods() {
    let (d, _dir) = daemon();
    for name in ["deployment-pod", "annotated-pod"] {
        let input: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures().join(format!("inject/{name}.input.json"))).unwrap(),
        )
        .unwrap();
        let (pod, _) = injected(&d, &input);
        assert_golden(name, &pod);
        // The result parses as a Kubernetes Pod.
        let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod.clone()).unwrap();
        let spec = typed.spec.unwrap();
        assert!(spec.containers.iter().any(|c| c.name == "istio-proxy"));
        // Injecting the result again changes nothing.
        let (again, r) = injected(&d, &pod);
        assert!(r["patch"].is_null(), "{r}");
        assert_eq!(again, pod);
    }
    assert_eq!(metric(&d, "sidecar_injection_success_total"), 2.0);
}

#[test]
fn injection_respects_the_pod_opt_in_and_opt_out() {
    let (d, _dir) = daemon();
    let pod = |labels: Value, annotations: Value| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "apps", "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "app", "image": "app:1"}]}})
    };
    let has_proxy = |p: &Value| {
        p["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "istio-proxy")
    };
    // No namespace label here (files mode): only a pod that opts in is injected.
    assert!(!has_proxy(&injected(&d, &pod(json!({}), json!({}))).0));
    assert!(has_proxy(
        &injected(
            &d,
            &pod(json!({"sidecar.istio.io/inject": "true"}), json!({}))
        )
        .0
    ));
    assert!(has_proxy(
        &injected(&d, &pod(json!({"istio.io/rev": "default"}), json!({}))).0
    ));
    assert!(!has_proxy(
        &injected(
            &d,
            &pod(json!({"sidecar.istio.io/inject": "false"}), json!({}))
        )
        .0
    ));
    // Host-network pods never.
    let mut host = pod(json!({"sidecar.istio.io/inject": "true"}), json!({}));
    host["spec"]["hostNetwork"] = true.into();
    assert!(!has_proxy(&injected(&d, &host).0));
    // An UPDATE is not an injection.
    let r = post(
        &d,
        "/inject",
        &review(
            "UPDATE",
            ("", "v1", "pods"),
            "Pod",
            "apps",
            pod(json!({"sidecar.istio.io/inject": "true"}), json!({})),
        ),
    );
    assert_eq!(r["allowed"], true);
    assert!(r["patch"].is_null());
    // A proxy config annotation that is not YAML: the pod is refused with the reason.
    let r = post(
        &d,
        "/inject",
        &review(
            "CREATE",
            ("", "v1", "pods"),
            "Pod",
            "apps",
            pod(
                json!({"sidecar.istio.io/inject": "true"}),
                json!({"proxy.istio.io/config": "[unclosed"}),
            ),
        ),
    );
    assert_eq!(r["allowed"], false);
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("proxy.istio.io/config"),
        "{r}"
    );
    assert_eq!(
        metric(&d, "sidecar_injection_failure_total{type=\"proxy_config\"}"),
        1.0
    );
    assert!(metric(&d, "sidecar_injection_skip_total") >= 4.0);
    assert_eq!(metric(&d, "sidecar_injection_requests_total"), 7.0);
}

/// The daemon's peak resident memory, in MiB (Linux).
fn peak_rss_mib(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        / 1024
}

/// A VirtualService review of about 5 MiB: `hosts` values, each a short string.
fn huge_review(hosts: usize, host: &str, i: usize) -> Vec<u8> {
    let spec = json!({"hosts": vec![host; hosts]});
    let vs = istio_object(
        "VirtualService",
        "networking.istio.io/v1",
        &format!("huge-{i}"),
        &spec,
    );
    review(
        "CREATE",
        ("networking.istio.io", "v1", "virtualservices"),
        "VirtualService",
        "default",
        vs,
    )
    .to_string()
    .into_bytes()
}

#[test]
fn a_flood_of_huge_reviews_stays_within_its_memory_budget_and_real_reviews_are_judged() {
    let (d, _dir) = daemon();
    let root = root_pem(&d);
    let addr = d.addr("webhook");
    // 24 callers at once: half send value bombs (refused before decoding), half reviews just under
    // the JSON value limit (decoded a few at a time, or refused while too many bytes are held).
    let flood: Vec<_> = (0..24)
        .map(|i| {
            let body = if i % 2 == 0 {
                huge_review(1_500_000, "h", i)
            } else {
                huge_review(380_000, "h-0123456789", i)
            };
            let root = root.clone();
            std::thread::spawn(move || {
                https_request(
                    addr,
                    &root,
                    SERVER_NAME,
                    "POST",
                    "/validate",
                    "application/json",
                    &body,
                )
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let good = istio_object(
        "VirtualService",
        "networking.istio.io/v1",
        "good",
        &json!({"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews"}}]}]}),
    );
    let response = post(
        &d,
        "/validate",
        &review(
            "CREATE",
            ("networking.istio.io", "v1", "virtualservices"),
            "VirtualService",
            "default",
            good,
        ),
    );
    assert_eq!(response["allowed"], true, "{response}");
    let statuses: Vec<u16> = flood
        .into_iter()
        .map(|t| t.join().unwrap().map(|(s, _)| s).unwrap_or(0))
        .collect();
    assert!(
        statuses.iter().filter(|s| **s == 413).count() >= 12,
        "{statuses:?}"
    );
    let peak = peak_rss_mib(&d);
    eprintln!("peak RSS {peak} MiB; statuses {statuses:?}");
    assert!(peak < 384, "peak RSS {peak} MiB");
    assert!(
        metric(
            &d,
            "rudder_webhook_refused_total{reason=\"too_many_json_values\"}"
        ) >= 12.0
    );
}

#[test]
fn idle_and_slow_webhook_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[
            "--webhook-idle-timeout",
            "1s",
            "--webhook-body-timeout",
            "1s",
        ],
    );
    common::eventually(30, "daemon ready", || {
        http_get(d.addr("http"), "/ready").0 == 200
    });
    let root = root_pem(&d);
    let tls = |tcp: std::net::TcpStream| {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut root.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(SERVER_NAME).unwrap();
        let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
        rustls::StreamOwned::new(conn, tcp)
    };
    use std::io::{Read, Write};
    let open = || {
        let tcp = std::net::TcpStream::connect(d.addr("webhook")).unwrap();
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        tls(tcp)
    };
    // Connects and sends nothing after the handshake.
    let mut idle = open();
    idle.conn.complete_io(&mut idle.sock).unwrap();
    // Sends headers and only part of the body it announced.
    let mut slow = open();
    slow.write_all(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersion\":",
    )
    .unwrap();
    let mut buf = Vec::new();
    // The server closes each: reading ends (EOF or an error), well before the 20 s read timeout.
    let started = std::time::Instant::now();
    let _ = idle.read_to_end(&mut buf);
    let mut answer = Vec::new();
    let _ = slow.read_to_end(&mut answer);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "closed by the server, not by the client's read timeout"
    );
    let (status, _) = common::parse_response(&answer);
    assert_eq!(status, 408, "{}", String::from_utf8_lossy(&answer));
    assert!(metric(&d, "rudder_webhook_refused_total{reason=\"body_timeout\"}") >= 1.0);
}

/// What the store says of a pod's ProxyConfig reaches the injected pod, as istiod injects it:
/// MeshConfig `defaultConfig.proxyMetadata` and a ProxyConfig selecting the pod become the proxy's
/// environment and `PROXY_CONFIG`, the ProxyConfig's image type the image's suffix.
#[test]
fn injection_applies_mesh_defaults_and_proxy_config_objects() {
    let dir = tempfile::tempdir().unwrap();
    common::write(
        dir.path(),
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultConfig:\n      proxyMetadata: {ISTIO_META_DNS_CAPTURE: \"true\"}\n",
    );
    common::write(
        dir.path(),
        "proxyconfig.yaml",
        "apiVersion: networking.istio.io/v1beta1\nkind: ProxyConfig\nmetadata: {name: web, namespace: shop}\nspec: {selector: {matchLabels: {app: web}}, concurrency: 2, environmentVariables: {FROM_PROXYCONFIG: \"yes\"}, image: {imageType: distroless}}\n",
    );
    let d = Daemon::start(dir.path(), &[]);
    common::eventually(30, "daemon ready", || {
        http_get(d.addr("http"), "/ready").0 == 200
    });
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web", "sidecar.istio.io/inject": "true"}},
        "spec": {"containers": [{"name": "app", "image": "example/web"}]}
    });
    let (out, _) = injected(&d, &pod);
    let proxy = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "istio-proxy")
        .expect("injected")
        .clone();
    let var = |n: &str| {
        proxy["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .and_then(|e| e["value"].as_str())
            .map(String::from)
    };
    assert_eq!(var("ISTIO_META_DNS_CAPTURE").as_deref(), Some("true"));
    assert_eq!(var("FROM_PROXYCONFIG").as_deref(), Some("yes"));
    let config: Value = serde_json::from_str(&var("PROXY_CONFIG").unwrap()).unwrap();
    assert_eq!(config["concurrency"], 2);
    assert!(
        proxy["image"].as_str().unwrap().ends_with("-distroless"),
        "{}",
        proxy["image"]
    );
}

/// A remote cluster's webhook (Istio's remote profile) calls `/inject/cluster/<id>/net/<network>`:
/// its pods get that cluster and network, as istiod injects them; a pod's own network label wins
/// over the path's, and the pod is labelled with its network.
#[test]
fn the_webhook_path_names_a_remote_pods_cluster_and_network() {
    let (d, _dir) = daemon();
    let pod = |mut labels: Value| {
        labels["sidecar.istio.io/inject"] = json!("true");
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "apps", "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "app:1"}]}})
    };
    // The proxy is a container, or a native sidecar among the init containers.
    let proxy_env = |p: &Value, name: &str| -> Option<String> {
        ["containers", "initContainers"]
            .iter()
            .filter_map(|list| p["spec"][list].as_array())
            .flatten()
            .find(|c| c["name"] == "istio-proxy")?["env"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str().map(str::to_string))
    };
    let (out, _) = injected_at(&d, "/inject/cluster/west/net/network2", &pod(json!({})));
    assert_eq!(
        proxy_env(&out, "ISTIO_META_CLUSTER_ID").as_deref(),
        Some("west")
    );
    assert_eq!(
        proxy_env(&out, "ISTIO_META_NETWORK").as_deref(),
        Some("network2")
    );
    assert_eq!(
        out["metadata"]["labels"]["topology.istio.io/network"],
        "network2"
    );

    let labelled = pod(json!({"topology.istio.io/network": "own"}));
    let (out, _) = injected_at(&d, "/inject/cluster/west/net/network2", &labelled);
    assert_eq!(
        proxy_env(&out, "ISTIO_META_NETWORK").as_deref(),
        Some("own")
    );
    assert_eq!(
        out["metadata"]["labels"]["topology.istio.io/network"],
        "own"
    );

    // The plain path: the injector's own cluster, and no network.
    let (out, _) = injected(&d, &pod(json!({})));
    assert_eq!(
        proxy_env(&out, "ISTIO_META_CLUSTER_ID").as_deref(),
        Some("Kubernetes")
    );
    assert_eq!(proxy_env(&out, "ISTIO_META_NETWORK"), None);
}
