//! Replays every input the fuzzers ever saved as a reproducer (`fuzz/regressions/<target>/`) through
//! the same entry points, plus hand-made hostile inputs: none may panic. See docs/reliability.md.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let data = std::fs::read(entry.path()).unwrap();
        run(&data);
        n += 1;
    }
    n
}

#[test]
fn config_yaml_reproducers_and_hostile_yaml() {
    replay("config_yaml", rudder::robustness::config_yaml);
    for text in [
        "a: &a [*a]",
        "- &a [*a, *a, *a]\n- &b [*a, *a, *a]\n- &c [*b, *b, *b]\n- &d [*c, *c, *c]\n- &e [*d, *d, *d]\n- [*e, *e, *e]",
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: x}\nspec: {hosts: [\"\\u0000\"], http: [{timeout: 99999999999999999999h}]}",
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: x}\nspec: {host: a, trafficPolicy: {connectionPool: {tcp: {maxConnections: -1}}}}",
        &"[".repeat(10_000),
        "\u{feff}---\n...\n---\n",
    ] {
        rudder::robustness::config_yaml(text.as_bytes());
    }
    // Telemetry filters are parsed as CEL at admission: hostile expressions are refused, not a
    // crash (nesting, unterminated literals, escapes, non-ASCII, huge numbers).
    for expression in [
        "(".repeat(5_000),
        "!".repeat(50_000),
        "a".to_string() + &".b".repeat(50_000),
        "'\\u12".to_string(),
        "\"\\U0010FFFF\\x".to_string(),
        "r'\u{1F600}' == b\"\\377\"".to_string(),
        "1".repeat(400),
        "[".repeat(3_000) + &"]".repeat(3_000),
        "{".repeat(3_000),
        "a ? b ? c ? d : e".to_string(),
    ] {
        let doc = format!(
            "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: x, namespace: y}}\nspec: {{accessLogging: [{{filter: {{expression: {}}}}}]}}\n",
            serde_json::to_string(&expression).unwrap()
        );
        rudder::robustness::config_yaml(doc.as_bytes());
        let _ = rudder::validation::cel::check(&expression);
    }
}

#[test]
fn discovery_request_reproducers_and_hostile_requests() {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use prost::Message;
    replay("discovery_request", rudder::robustness::discovery_request);
    let cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    for (id, type_url, names) in [
        (
            "sidecar~10.0.0.1~a.default~default.svc.cluster.local",
            cds,
            vec![],
        ),
        ("sidecar~~~", cds, vec!["x".to_string()]),
        (
            "router~not-an-ip~gw.ns~ns.svc",
            "type.googleapis.com/envoy.config.listener.v3.Listener",
            vec![],
        ),
        (
            "sidecar~10.0.0.1~a.default~default.svc.cluster.local",
            "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            vec!["80".into(), "".into(), "\u{0}".into()],
        ),
        (
            "sidecar~10.0.0.1~a.default~default.svc.cluster.local",
            "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            vec!["outbound|99999999||x".into(), "|||".into()],
        ),
    ] {
        let req = DiscoveryRequest {
            node: Some(Node {
                id: id.into(),
                ..Default::default()
            }),
            type_url: type_url.into(),
            resource_names: names,
            ..Default::default()
        };
        rudder::robustness::discovery_request(&req.encode_to_vec());
    }
    rudder::robustness::discovery_request(&[0xff; 64]);
}

#[test]
fn csr_reproducers_and_hostile_csrs() {
    replay("csr", rudder::robustness::csr);
    for text in [
        "",
        "-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n",
        "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n",
        "-----BEGIN CERTIFICATE REQUEST-----\n////\n-----END CERTIFICATE REQUEST-----\n",
    ] {
        rudder::robustness::csr(text.as_bytes());
    }
}

#[test]
fn admission_review_reproducers_and_hostile_reviews() {
    replay("admission_review", rudder::robustness::admission_review);
    for text in [
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{},"namespace":"x","object":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}},"spec":{"containers":"not a list"}}}}"#,
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{},"namespace":"x","object":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}},"spec":{"volumes":7,"initContainers":{}}}}}"#,
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"networking.istio.io","version":"v1","kind":"VirtualService"},"resource":{"group":"networking.istio.io","version":"v1","resource":"virtualservices"},"operation":"CREATE","userInfo":{},"object":{"metadata":{"name":"x"},"spec":[]}}}"#,
    ] {
        rudder::robustness::admission_review(text.as_bytes());
    }
}
