use super::render::{owner_url, rewrite_probes};
use super::*;
use crate::config::{Config, ObjectMeta};
use crate::store::{Change, StoreWriter};
use serde_json::{Map, json};

fn namespace(name: &str, labels: &[(&str, &str)]) -> Config {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config {
        api_version: "v1".into(),
        kind: Kind::Namespace,
        metadata: ObjectMeta {
            name: name.into(),
            labels,
            ..Default::default()
        },
        spec: Spec::Namespace(Box::default()),
        status: None,
    }
}

fn injector_config_map(config: &str, values: &str) -> Config {
    let cm = k8s_openapi::api::core::v1::ConfigMap {
        data: Some(
            [
                ("config".to_string(), config.to_string()),
                ("values".to_string(), values.to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    Config {
        api_version: "v1".into(),
        kind: Kind::ConfigMap,
        metadata: ObjectMeta {
            name: INJECTOR_CONFIGMAP.into(),
            namespace: "istio-system".into(),
            ..Default::default()
        },
        spec: Spec::ConfigMap(Box::new(cm)),
        status: None,
    }
}

fn injector() -> Injector {
    injector_and_writer().0
}

/// An injector, and the writer of the store it reads.
fn injector_and_writer() -> (Injector, StoreWriter) {
    let store = StoreWriter::default();
    store.apply(vec![
        Change::Upsert(namespace("on", &[("istio-injection", "enabled")])),
        Change::Upsert(namespace("off", &[("istio-injection", "disabled")])),
        Change::Upsert(namespace("rev", &[("istio.io/rev", "default")])),
        Change::Upsert(namespace("canary", &[("istio.io/rev", "canary")])),
        Change::Upsert(namespace("plain", &[])),
    ]);
    (
        Injector::new(InjectorSettings::default(), store.reader()),
        store,
    )
}

fn pod(labels: Value, annotations: Value) -> Value {
    json!({"metadata": {"name": "p", "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "app"}]}})
}

#[test]
fn selection_follows_namespace_labels_then_pod_label_and_annotation() {
    let inj = injector();
    let t = Template::default();
    let none = || pod(json!({}), json!({}));
    let cases = [
        ("on", none(), true),
        ("on", pod(json!({INJECT_LABEL: "false"}), json!({})), false),
        ("on", pod(json!({}), json!({INJECT_LABEL: "false"})), false),
        ("off", pod(json!({INJECT_LABEL: "true"}), json!({})), false),
        ("rev", none(), true),
        ("canary", none(), false),
        ("plain", none(), false),
        ("plain", pod(json!({INJECT_LABEL: "true"}), json!({})), true),
        // The annotation alone does not select in an unlabelled namespace (it is not in the object selector).
        (
            "plain",
            pod(json!({}), json!({INJECT_LABEL: "true"})),
            false,
        ),
        (
            "plain",
            pod(json!({"istio.io/rev": "default"}), json!({})),
            true,
        ),
        ("unknown", none(), false),
        (
            "kube-system",
            pod(json!({INJECT_LABEL: "true"}), json!({})),
            false,
        ),
        (
            "on",
            pod(json!({}), json!({STATUS_ANNOTATION: "{}"})),
            false,
        ),
    ];
    for (ns, p, want) in cases {
        let got = inj.decide(&t, ns, &p) == Decision::Inject;
        assert_eq!(got, want, "namespace {ns}, pod {p}");
    }
    let mut host = none();
    host["spec"]["hostNetwork"] = true.into();
    assert!(
        matches!(inj.decide(&t, "on", &host), Decision::Skip(why) if why.contains("host network"))
    );
}

/// istiod's revision tags: namespaces and pods labelled with a tag of this revision are ours; a
/// tag of another revision is not.
#[test]
fn revision_tags_select_like_the_revision() {
    let store = StoreWriter::default();
    store.apply(vec![
        Change::Upsert(namespace("stable", &[("istio.io/rev", "prod-stable")])),
        Change::Upsert(namespace("other", &[("istio.io/rev", "prod-canary")])),
        Change::Upsert(namespace("plain", &[])),
    ]);
    let settings = InjectorSettings {
        revision: "1-30".into(),
        revision_tags: vec!["prod-stable".into()],
        ..InjectorSettings::default()
    };
    let inj = Injector::new(settings, store.reader());
    let t = Template::default();
    let none = || pod(json!({}), json!({}));
    let tagged = |tag: &str| pod(json!({"istio.io/rev": tag}), json!({}));
    for (ns, p, want) in [
        ("stable", none(), true),
        (
            "stable",
            pod(json!({INJECT_LABEL: "false"}), json!({})),
            false,
        ),
        ("other", none(), false),
        ("plain", tagged("prod-stable"), true),
        ("plain", tagged("1-30"), true),
        ("plain", tagged("prod-canary"), false),
        ("plain", none(), false),
    ] {
        let got = inj.decide(&t, ns, &p) == Decision::Inject;
        assert_eq!(got, want, "namespace {ns}, pod {p}");
    }
}

/// `enableNamespacesByDefault`: unlabelled namespaces are injected unless the pod says no or
/// names another revision.
#[test]
fn namespaces_by_default_injects_unlabelled_namespaces() {
    let inj = injector();
    let data = BTreeMap::from([(
        "values".to_string(),
        r#"{"sidecarInjectorWebhook": {"enableNamespacesByDefault": true}}"#.to_string(),
    )]);
    let t = Template::from_configmap(&data).unwrap();
    assert!(t.namespaces_by_default);
    assert_eq!(
        inj.decide(&t, "plain", &pod(json!({}), json!({}))),
        Decision::Inject
    );
    for p in [
        pod(json!({INJECT_LABEL: "false"}), json!({})),
        pod(json!({"istio.io/rev": "canary"}), json!({})),
    ] {
        assert!(
            matches!(inj.decide(&t, "plain", &p), Decision::Skip(_)),
            "{p}"
        );
    }
    assert!(matches!(
        inj.decide(&t, "off", &pod(json!({}), json!({}))),
        Decision::Skip(_)
    ));
}

#[test]
fn policy_and_selectors_from_the_configmap() {
    let (inj, writer) = injector_and_writer();
    let config = "policy: disabled\nalwaysInjectSelector:\n- matchLabels: {always: \"yes\"}\nneverInjectSelector:\n- matchExpressions: [{key: never, operator: Exists}]\ninjectedAnnotations: {team: mesh}\ntemplates:\n  sidecar: |\n    {{ .Values.global.hub }}\n";
    writer.apply(vec![Change::Upsert(injector_config_map(config, "{}"))]);
    let t = inj.template();
    assert!(!t.policy_enabled);
    assert_eq!(t.injected_annotations["team"], "mesh");
    assert_eq!(
        inj.decide(&t, "on", &pod(json!({}), json!({}))),
        Decision::Skip("injection policy is disabled and the pod does not opt in".into())
    );
    assert_eq!(
        inj.decide(&t, "on", &pod(json!({}), json!({INJECT_LABEL: "true"}))),
        Decision::Inject
    );
    assert_eq!(
        inj.decide(&t, "on", &pod(json!({"always": "yes"}), json!({}))),
        Decision::Inject
    );

    let enabled = "policy: enabled\nneverInjectSelector:\n- matchExpressions: [{key: never, operator: Exists}]\n";
    writer.apply(vec![Change::Upsert(injector_config_map(enabled, ""))]);
    let t = inj.template();
    assert!(t.policy_enabled);
    assert!(matches!(
        inj.decide(&t, "on", &pod(json!({"never": "x"}), json!({}))),
        Decision::Skip(_)
    ));
    // An explicit yes beats the never selector.
    assert_eq!(
        inj.decide(
            &t,
            "on",
            &pod(json!({"never": "x"}), json!({INJECT_LABEL: "true"}))
        ),
        Decision::Inject
    );
}

#[test]
fn a_broken_configmap_keeps_the_last_good_template() {
    let (inj, writer) = injector_and_writer();
    writer.apply(vec![Change::Upsert(injector_config_map(
        "policy: disabled\n",
        "",
    ))]);
    assert!(!inj.template().policy_enabled);
    writer.apply(vec![Change::Upsert(injector_config_map(
        "policy: sometimes\n",
        "",
    ))]);
    assert!(!inj.template().policy_enabled, "kept");
    writer.apply(vec![Change::Upsert(injector_config_map("", "{not json"))]);
    assert!(!inj.template().policy_enabled, "kept");
}

#[test]
fn values_set_image_resources_and_capture() {
    let values = r#"{"global": {"hub": "registry.example.com/istio", "tag": 1.29, "imagePullPolicy": "IfNotPresent",
        "meshID": "mesh1", "network": "net1", "multiCluster": {"clusterName": "east"},
        "proxy": {"resources": {"requests": {"cpu": "10m"}}, "logLevel": "debug", "statusPort": 15999,
                  "excludeIPRanges": "10.0.0.0/8", "holdApplicationUntilProxyStarts": true}},
        "sidecarInjectorWebhook": {"rewriteAppHTTPProbe": false}}"#;
    let data = [("values".to_string(), values.to_string())].into();
    let t = Template::from_configmap(&data).unwrap();
    assert_eq!(t.image, "registry.example.com/istio/proxyv2:1.29");
    assert_eq!(t.pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(t.resources, json!({"requests": {"cpu": "10m"}}));
    assert_eq!(t.log_level, "debug");
    assert_eq!(t.status_port, 15999);
    assert_eq!(t.exclude_ip_ranges, "10.0.0.0/8");
    assert!(t.hold_application && !t.rewrite_probes);
    assert_eq!(t.cluster_id.as_deref(), Some("east"));

    let distroless = r#"{"global": {"tag": "1.30.1", "variant": "distroless"}}"#;
    let data = [("values".to_string(), distroless.to_string())].into();
    assert_eq!(
        Template::from_configmap(&data).unwrap().image,
        "docker.io/istio/proxyv2:1.30.1-distroless"
    );

    let full = r#"{"global": {"proxy": {"image": "my.registry/proxy:v1"}}}"#;
    let data = [("values".to_string(), full.to_string())].into();
    assert_eq!(
        Template::from_configmap(&data).unwrap().image,
        "my.registry/proxy:v1"
    );

    let settings = InjectorSettings::default();
    let t = Template::from_configmap(&[("values".to_string(), values.to_string())].into()).unwrap();
    let out = inject(
        &settings,
        &t,
        &Default::default(),
        "ns",
        &pod(json!({}), json!({})),
    )
    .unwrap();
    let containers = out["spec"]["containers"].as_array().unwrap();
    assert_eq!(
        containers[0]["name"], PROXY_CONTAINER,
        "hold: the proxy starts first"
    );
    assert_eq!(
        containers[0]["lifecycle"]["postStart"]["exec"]["command"],
        json!(["pilot-agent", "wait"])
    );
    let env = containers[0]["env"].as_array().unwrap();
    let var = |n: &str| {
        env.iter()
            .find(|e| e["name"] == n)
            .map(|e| e["value"].clone())
    };
    assert_eq!(var("ISTIO_META_CLUSTER_ID"), Some("east".into()));
    assert_eq!(var("ISTIO_META_MESH_ID"), Some("mesh1".into()));
    assert_eq!(var("ISTIO_META_NETWORK"), Some("net1".into()));
    let init = &out["spec"]["initContainers"][0];
    let args: Vec<&str> = init["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("-x"), "10.0.0.0/8");
    assert_eq!(after("-d"), "15090,15021,15999");
    assert_eq!(
        out["metadata"]["annotations"]["prometheus.io/port"],
        "15999"
    );
}

#[test]
fn workloads_are_named_after_their_controllers() {
    let owned = |kind: &str, name: &str, labels: Value| {
        json!({"metadata": {"generateName": format!("{name}-"), "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": name, "controller": true}]}})
    };
    let w = workload_of(&owned(
        "ReplicaSet",
        "web-7c9d8f6b5",
        json!({"pod-template-hash": "7c9d8f6b5"}),
    ));
    assert_eq!(
        (w.name.as_str(), w.kind.as_str(), w.api_version.as_str()),
        ("web", "Deployment", "apps/v1")
    );
    assert_eq!(
        owner_url(&w, "prod"),
        "kubernetes://apis/apps/v1/namespaces/prod/deployments/web"
    );
    let w = workload_of(&owned("ReplicaSet", "bare-rs", json!({})));
    assert_eq!(
        (w.name.as_str(), w.kind.as_str()),
        ("bare-rs", "ReplicaSet")
    );
    let w = workload_of(&owned("Job", "backup-28912345", json!({})));
    assert_eq!((w.name.as_str(), w.kind.as_str()), ("backup", "CronJob"));
    let w = workload_of(&owned("StatefulSet", "db", json!({})));
    assert_eq!((w.name.as_str(), w.kind.as_str()), ("db", "StatefulSet"));
    let w = workload_of(&json!({"metadata": {"name": "solo"}}));
    assert_eq!((w.name.as_str(), w.kind.as_str()), ("solo", "Pod"));
    assert_eq!(
        owner_url(&w, "x"),
        "kubernetes://apis/v1/namespaces/x/pods/solo"
    );
}

#[test]
fn probes_point_at_the_agent_and_keep_their_timing() {
    let mut c = json!({"name": "app", "ports": [{"name": "http", "containerPort": 8080}],
        "livenessProbe": {"httpGet": {"path": "/live", "port": "http"}, "periodSeconds": 7, "timeoutSeconds": 2},
        "readinessProbe": {"grpc": {"port": 9090}},
        "startupProbe": {"exec": {"command": ["true"]}}});
    let mut probers = Map::new();
    rewrite_probes(&mut c, 15020, &mut probers);
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"path": "/app-health/app/livez", "port": 15020, "scheme": "HTTP"}, "periodSeconds": 7, "timeoutSeconds": 2})
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"]["path"],
        "/app-health/app/readyz"
    );
    assert_eq!(
        c["startupProbe"],
        json!({"exec": {"command": ["true"]}}),
        "exec probes run in the container"
    );
    assert_eq!(
        Value::Object(probers),
        json!({
            "/app-health/app/livez": {"httpGet": {"path": "/live", "port": 8080}, "timeoutSeconds": 2},
            "/app-health/app/readyz": {"grpc": {"port": 9090}},
        })
    );
}

/// A pod of the `istio/gateway` Helm chart, as the chart's Deployment writes it: its own
/// `istio-proxy` with `image: auto`, resources and a status port, asking for the gateway template.
fn chart_gateway_pod() -> Value {
    json!({
        "metadata": {
            "name": "istio-ingressgateway-7d9f-abcde",
            "labels": {"app": "istio-ingressgateway", "istio": "ingressgateway", INJECT_LABEL: "true", "pod-template-hash": "7d9f"},
            "annotations": {TEMPLATES_ANNOTATION: "gateway"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "istio-ingressgateway-7d9f", "controller": true}],
        },
        "spec": {
            "serviceAccountName": "istio-ingressgateway",
            "containers": [{
                "name": "istio-proxy",
                "image": "auto",
                "ports": [{"containerPort": 15021, "protocol": "TCP", "name": "status-port"}],
                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
            }],
        },
    })
}

/// istiod's `gateway` template: the chart's container becomes a router agent (the chart's own
/// fields kept, `image: auto` replaced), with no init container, no capture, no sidecar label, and
/// the sysctl that lets it bind low ports.
#[test]
fn gateway_pods_get_the_gateway_template() {
    let settings = InjectorSettings::default();
    let t = Template::default();
    let out = inject(
        &settings,
        &t,
        &Default::default(),
        "istio-ingress",
        &chart_gateway_pod(),
    )
    .unwrap();
    let containers = out["spec"]["containers"].as_array().unwrap();
    assert_eq!(
        containers.len(),
        1,
        "the chart's istio-proxy, not a second one"
    );
    let proxy = &containers[0];
    assert_eq!(proxy["image"], t.image.as_str());
    let args: Vec<&str> = proxy["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(&args[..2], ["proxy", "router"]);
    assert_eq!(
        proxy["resources"],
        json!({"limits": {"cpu": "2", "memory": "1Gi"}})
    );
    assert_eq!(proxy["securityContext"]["runAsUser"], 1337);
    assert_eq!(proxy["securityContext"]["allowPrivilegeEscalation"], false);
    let ports: Vec<u64> = proxy["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["containerPort"].as_u64())
        .collect();
    assert_eq!(ports, [15090, 15021]);
    let env = |name: &str| {
        proxy["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
    };
    assert_eq!(env("ISTIO_META_APP_CONTAINERS").unwrap()["value"], "");
    assert_eq!(
        env("ISTIO_META_WORKLOAD_NAME").unwrap()["value"],
        "istio-ingressgateway"
    );
    assert!(env("ISTIO_KUBE_APP_PROBERS").is_none());
    assert!(out["spec"]["initContainers"].is_null());
    assert_eq!(
        out["spec"]["securityContext"]["sysctls"],
        json!([{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}])
    );
    let volumes = out["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().any(|v| v["name"] == "istio-token"));
    let labels = &out["metadata"]["labels"];
    assert!(labels["security.istio.io/tlsMode"].is_null());
    assert_eq!(
        labels["service.istio.io/canonical-name"],
        "istio-ingressgateway"
    );
    let status: Value = serde_json::from_str(
        out["metadata"]["annotations"][STATUS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(status["containers"], json!(["istio-proxy"]));
    assert_eq!(status["initContainers"], json!([]));
}

/// A sidecar pod that customises its own istio-proxy keeps one proxy container, its fields over
/// the template's; a template Rudder does not render is refused by name, never injected as a sidecar.
#[test]
fn a_declared_proxy_is_overlaid_and_unknown_templates_are_refused() {
    let settings = InjectorSettings::default();
    let t = Template::default();
    let mut p = pod(json!({}), json!({}));
    p["spec"]["containers"].as_array_mut().unwrap().push(
        json!({"name": "istio-proxy", "image": "auto", "resources": {"requests": {"cpu": "50m"}}}),
    );
    let out = inject(&settings, &t, &Default::default(), "on", &p).unwrap();
    let proxies: Vec<&Value> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "istio-proxy")
        .collect();
    assert_eq!(proxies.len(), 1);
    assert_eq!(
        proxies[0]["resources"]["requests"]["cpu"], "50m",
        "the pod's request over the template's"
    );
    assert_eq!(proxies[0]["args"][1], "sidecar");
    let app = out["spec"]["containers"][0]["name"].as_str();
    assert_eq!(app, Some("app"));

    let custom = pod(json!({}), json!({TEMPLATES_ANNOTATION: "sidecar,spire"}));
    let err = inject(&settings, &t, &Default::default(), "on", &custom).unwrap_err();
    assert!(err.to_string().contains("spire"), "{err}");
}

/// The pod's effective ProxyConfig reaches what is injected, as istiod's template writes it: mesh
/// `defaultConfig` and ProxyConfig objects in `PROXY_CONFIG`, `proxyMetadata` as environment
/// variables of the proxy and the init container, a ProxyConfig's image type as the image's tag
/// suffix (the annotation's winning over it); the gateway template gets the same.
#[test]
fn proxy_config_objects_and_mesh_defaults_reach_the_pod() {
    let (injector, writer) = injector_and_writer();
    writer.apply_yaml(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultConfig:
      proxyMetadata: {ISTIO_META_DNS_CAPTURE: "true"}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: web, namespace: shop}
spec: {selector: {matchLabels: {app: web}}, concurrency: 3, environmentVariables: {EXTRA: "1"}, image: {imageType: distroless}}
"#,
    );
    let t = Template::default();
    let web = pod(json!({"app": "web"}), json!({}));
    let sources = injector.proxy_config_sources("shop", &web);
    let out = inject(&injector.settings, &t, &sources, "shop", &web).unwrap();
    let proxy = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == PROXY_CONTAINER)
        .unwrap()
        .clone();
    let var = |c: &Value, n: &str| {
        c["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == n)
            .map(|e| e["value"].clone())
    };
    assert_eq!(var(&proxy, "ISTIO_META_DNS_CAPTURE"), Some("true".into()));
    assert_eq!(var(&proxy, "EXTRA"), Some("1".into()));
    let config: Value =
        serde_json::from_str(var(&proxy, "PROXY_CONFIG").unwrap().as_str().unwrap()).unwrap();
    assert_eq!(config["concurrency"], 3);
    assert_eq!(config["proxyMetadata"]["ISTIO_META_DNS_CAPTURE"], "true");
    assert!(proxy["image"].as_str().unwrap().ends_with("-distroless"));
    let init = &out["spec"]["initContainers"][0];
    assert_eq!(var(init, "ISTIO_META_DNS_CAPTURE"), Some("true".into()));

    let typed = pod(
        json!({"app": "web"}),
        json!({"sidecar.istio.io/proxyImageType": "debug"}),
    );
    let out = inject(&injector.settings, &t, &sources, "shop", &typed).unwrap();
    let image = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == PROXY_CONTAINER)
        .unwrap()["image"]
        .clone();
    assert!(image.as_str().unwrap().ends_with("-debug"), "{image}");

    let gateway = chart_gateway_pod();
    let sources = injector.proxy_config_sources("istio-ingress", &gateway);
    let out = inject(&injector.settings, &t, &sources, "istio-ingress", &gateway).unwrap();
    let proxy = &out["spec"]["containers"][0];
    assert_eq!(var(proxy, "ISTIO_META_DNS_CAPTURE"), Some("true".into()));
}

/// A proxy that takes HBONE (`ISTIO_META_ENABLE_HBONE`, which `profile: ambient` puts in the
/// mesh's proxy metadata) is labelled `networking.istio.io/tunnel: http`, as istiod's template
/// does, so ztunnel tunnels to it; a pod's own value of the label is kept.
#[test]
fn pods_whose_proxy_takes_hbone_are_labelled_for_tunnels() {
    let (injector, writer) = injector_and_writer();
    let t = Template::default();
    let web = pod(json!({"app": "web"}), json!({}));
    let tunnel = |injector: &Injector, pod: &Value| {
        let sources = injector.proxy_config_sources("shop", pod);
        let out = inject(&injector.settings, &t, &sources, "shop", pod).unwrap();
        out["metadata"]["labels"]["networking.istio.io/tunnel"].clone()
    };
    assert!(
        tunnel(&injector, &web).is_null(),
        "not without the metadata"
    );
    writer.apply_yaml(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultConfig:
      proxyMetadata: {ISTIO_META_ENABLE_HBONE: "true"}
"#,
    );
    assert_eq!(tunnel(&injector, &web), "http");
    let own = pod(
        json!({"app": "web", "networking.istio.io/tunnel": "none"}),
        json!({}),
    );
    assert_eq!(tunnel(&injector, &own), "none");
}

/// `security.istio.io/tlsMode` is `istio` unless the pod says otherwise, as istiod's template
/// writes it (a pod labelled `disabled` keeps its clients off mTLS).
#[test]
fn a_pods_own_tls_mode_label_is_kept() {
    let injector = injector();
    let t = Template::default();
    let mode = |pod: &Value| {
        let sources = injector.proxy_config_sources("shop", pod);
        let out = inject(&injector.settings, &t, &sources, "shop", pod).unwrap();
        out["metadata"]["labels"]["security.istio.io/tlsMode"].clone()
    };
    assert_eq!(mode(&pod(json!({"app": "web"}), json!({}))), "istio");
    assert_eq!(
        mode(&pod(
            json!({"app": "web", "security.istio.io/tlsMode": "disabled"}),
            json!({})
        )),
        "disabled"
    );
}

/// A managed waypoint's pod (`inject.istio.io/templates: waypoint`, as Rudder's deployer writes
/// it) runs the agent as a waypoint, with istiod's waypoint ports and no low-port sysctl.
#[test]
fn waypoint_pods_run_the_agent_as_a_waypoint() {
    let mut pod = chart_gateway_pod();
    pod["metadata"]["annotations"][TEMPLATES_ANNOTATION] = "waypoint".into();
    let out = inject(
        &InjectorSettings::default(),
        &Template::default(),
        &Default::default(),
        "shop",
        &pod,
    )
    .unwrap();
    let proxy = &out["spec"]["containers"][0];
    let args: Vec<&str> = proxy["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(&args[..2], ["proxy", "waypoint"]);
    let ports: Vec<u64> = proxy["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["containerPort"].as_u64())
        .collect();
    assert!(
        ports.contains(&15021) && ports.contains(&15020),
        "{ports:?}"
    );
    assert!(out["spec"]["securityContext"]["sysctls"].is_null());
}
