//! The Helm chart, linted and rendered by Helm's own library (helm-python-sdk): every manifest is a
//! valid Kubernetes object, RBAC covers every call the controllers make, the daemon accepts the flags
//! the chart passes, the CRDs are the ones generated from the config model, and the dashboard only
//! queries metrics Rudder exports. With KUBECONFIG, a real API server dry-runs everything.

use crate::common;
use crate::common::peers::peer;
use clap::{Args, FromArgMatches};
use rudder::k8s::rbac::{LED_REMOTE_PERMISSIONS, PERMISSIONS, REMOTE_PERMISSIONS, Scope};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const NS: &str = "istio-system";

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/rudder")
}

struct Rendered {
    lint: Value,
    /// Every object of every template, by "Kind/name".
    objects: BTreeMap<String, Value>,
    crds: Vec<Value>,
    /// What `helm install` prints afterwards.
    notes: String,
}

fn render(values: Value) -> Option<Rendered> {
    render_in(NS, values)
}

fn run_helm(namespace: &str, values: &Value) -> Option<std::process::Output> {
    let python = peer("venv/bin/python")?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/helm_chart.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(chart_dir())
        .arg(namespace)
        .arg(values.to_string())
        .output()
        .expect("run helm_chart.py");
    Some(out)
}

/// Helm's error for values the chart must refuse (None when Helm is not installed).
fn render_error(namespace: &str, values: Value) -> Option<String> {
    let out = run_helm(namespace, &values)?;
    assert!(!out.status.success(), "{values} rendered; it should fail");
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}

fn render_in(namespace: &str, values: Value) -> Option<Rendered> {
    let out = run_helm(namespace, &values)?;
    assert!(
        out.status.success(),
        "helm render failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("JSON from helm_chart.py");
    let mut objects = BTreeMap::new();
    let mut notes = String::new();
    for (template, text) in result["manifests"].as_object().unwrap() {
        if template.ends_with("NOTES.txt") {
            notes = text.as_str().unwrap_or_default().to_string();
            continue;
        }
        for doc in yaml_documents(text.as_str().unwrap()) {
            let key = format!(
                "{}/{}",
                doc["kind"].as_str().unwrap(),
                doc["metadata"]["name"].as_str().unwrap()
            );
            assert!(
                objects.insert(key.clone(), doc).is_none(),
                "{key} rendered twice"
            );
        }
    }
    let crds = result["crds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| yaml_documents(c["data"].as_str().unwrap()))
        .collect();
    // Every object, as the API server would judge it: Kubernetes' own OpenAPI schemas, strictly.
    let invalid = result["invalid"].as_array().cloned().unwrap_or_default();
    assert!(
        invalid.is_empty(),
        "objects Kubernetes refuses: {invalid:#?}"
    );
    Some(Rendered {
        lint: result["lint"].clone(),
        objects,
        crds,
        notes,
    })
}

fn yaml_documents(text: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).expect("rendered YAML parses");
    docs.into_iter().filter(|d| d.is_object()).collect()
}

/// Deserializes into the typed Kubernetes object and back: a misspelt field (which the API server
/// would silently drop) makes the two differ.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(obj: &Value) -> T {
    let t: T = serde_json::from_value(obj.clone()).unwrap_or_else(|e| panic!("{e}: {obj}"));
    let back = serde_json::to_value(&t).unwrap();
    assert_eq!(
        &back, obj,
        "fields the Kubernetes type does not know, or wrong shapes"
    );
    t
}

/// A resource quantity (`500m`, `2`, `2048Mi`, `1Gi`, `1e3`) in its base unit.
fn quantity(q: &Value) -> f64 {
    let text = match q {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let units = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, factor) in units {
        if let Some(n) = text.strip_suffix(suffix) {
            return n
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("quantity {text}"))
                * factor;
        }
    }
    text.parse().unwrap_or_else(|_| panic!("quantity {text}"))
}

/// No container asks for more of a resource than its limit allows (the API server refuses it).
fn check_requests_within_limits(obj: &Value) {
    let containers = obj["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten();
    for c in containers {
        let r = &c["resources"];
        for (name, request) in r["requests"].as_object().into_iter().flatten() {
            if let Some(limit) = r["limits"].get(name) {
                assert!(
                    quantity(request) <= quantity(limit),
                    "{} {}: requests {name} {request} over its limit {limit}",
                    obj["kind"],
                    c["name"]
                );
            }
        }
    }
}

fn check_object(obj: &Value) {
    check_requests_within_limits(obj);
    use k8s_openapi::api::{
        admissionregistration::v1 as adm, apps::v1 as apps, autoscaling::v2 as hpa,
        core::v1 as core, policy::v1 as policy, rbac::v1 as rbac,
    };
    match obj["kind"].as_str().unwrap() {
        "Deployment" => drop(typed::<apps::Deployment>(obj)),
        "Service" => drop(typed::<core::Service>(obj)),
        "ServiceAccount" => drop(typed::<core::ServiceAccount>(obj)),
        "ConfigMap" => drop(typed::<core::ConfigMap>(obj)),
        "ClusterRole" => drop(typed::<rbac::ClusterRole>(obj)),
        "ClusterRoleBinding" => drop(typed::<rbac::ClusterRoleBinding>(obj)),
        "Role" => drop(typed::<rbac::Role>(obj)),
        "RoleBinding" => drop(typed::<rbac::RoleBinding>(obj)),
        "ValidatingWebhookConfiguration" => drop(typed::<adm::ValidatingWebhookConfiguration>(obj)),
        "MutatingWebhookConfiguration" => drop(typed::<adm::MutatingWebhookConfiguration>(obj)),
        "PodDisruptionBudget" => drop(typed::<policy::PodDisruptionBudget>(obj)),
        "HorizontalPodAutoscaler" => drop(typed::<hpa::HorizontalPodAutoscaler>(obj)),
        "NetworkPolicy" => drop(typed::<k8s_openapi::api::networking::v1::NetworkPolicy>(
            obj,
        )),
        "EndpointSlice" => drop(typed::<k8s_openapi::api::discovery::v1::EndpointSlice>(obj)),
        other => panic!("unexpected kind {other} in the chart"),
    }
}

fn get<'a>(r: &'a Rendered, key: &str) -> &'a Value {
    r.objects
        .get(key)
        .unwrap_or_else(|| panic!("{key} not rendered; have {:?}", r.objects.keys()))
}

fn rule_allows(rules: &Value, group: &str, resource: &str, verb: &str) -> bool {
    rules.as_array().into_iter().flatten().any(|r| {
        let has = |field: &str, want: &str| {
            r[field]
                .as_array()
                .is_some_and(|a| a.iter().any(|v| v == want || v == "*"))
        };
        has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
    })
}

/// The chart's args, as `rudder` parses them (every flag must exist and take the value given).
fn parse_args(args: &[String]) {
    let cmd = rudder::cmd::serve::ServeArgs::augment_args(
        clap::Command::new("rudder")
            .args_override_self(true)
            .arg(clap::Arg::new("log-level").long("log-level"))
            .arg(
                clap::Arg::new("log-format")
                    .long("log-format")
                    .value_parser(["text", "json"]),
            ),
    );
    let argv = std::iter::once("rudder".to_string()).chain(args.iter().skip(1).cloned());
    let matches = cmd
        .try_get_matches_from(argv)
        .unwrap_or_else(|e| panic!("chart args rejected: {e}"));
    rudder::cmd::serve::ServeArgs::from_arg_matches(&matches).unwrap();
    assert_eq!(args[0], "serve");
}

#[test]
fn chart_lints_and_renders_valid_objects() {
    let Some(r) = render(json!({})) else { return };
    assert!(
        r.lint["errors"].as_array().unwrap().is_empty(),
        "{}",
        r.lint
    );
    for m in r.lint["messages"].as_array().unwrap() {
        assert!(
            m["severity"].as_i64().unwrap() < 2,
            "lint warning or error: {m}"
        );
    }
    for obj in r.objects.values() {
        check_object(obj);
    }

    // Drop-in: the Service is istiod, with istiod's ports.
    let svc = get(&r, "Service/istiod");
    let ports: Vec<(i64, i64)> = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["port"].as_i64().unwrap(),
                p["targetPort"].as_i64().unwrap(),
            )
        })
        .collect();
    for want in [(15010, 15010), (15012, 15012), (15014, 15014), (443, 15017)] {
        assert!(ports.contains(&want), "{ports:?}");
    }

    let deploy = get(&r, "Deployment/istiod");
    let pod = &deploy["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/ready");
    assert!(container["resources"]["requests"].is_object());
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let token = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "istio-token")
        .expect("token volume");
    assert_eq!(
        token["projected"]["sources"][0]["serviceAccountToken"]["audience"],
        "istio-ca"
    );
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    parse_args(&args);
    assert!(
        args.contains(
            &"--serving-dns-names=istiod.istio-system.svc,istiod.istio-system.svc.cluster.local"
                .to_string()
        ),
        "{args:?}"
    );
    let selected = deploy["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    for (k, v) in selected {
        assert_eq!(
            &deploy["spec"]["template"]["metadata"]["labels"][k], v,
            "pods carry {k}"
        );
        assert_eq!(&svc["spec"]["selector"][k], v, "the Service selects {k}");
    }

    // RBAC: every permission the controllers use, granted to the Deployment's service account.
    let sa = pod["serviceAccountName"].as_str().unwrap();
    assert!(r.objects.contains_key(&format!("ServiceAccount/{sa}")));
    let cluster_role = get(&r, "ClusterRole/istiod-clusterrole-istio-system");
    let role = get(&r, "Role/istiod");
    for p in PERMISSIONS.iter().filter(|p| !p.external_ca_only) {
        let rules = match p.scope {
            Scope::Cluster => &cluster_role["rules"],
            Scope::SystemNamespace => &role["rules"],
        };
        for verb in p.verbs {
            assert!(
                rule_allows(rules, p.group, p.resource, verb),
                "{verb} {}/{} (used by {}) is not granted",
                p.group,
                p.resource,
                p.used_by
            );
        }
    }
    // ...and nothing beyond them.
    for (obj, scope) in [
        (cluster_role, Scope::Cluster),
        (role, Scope::SystemNamespace),
    ] {
        for rule in obj["rules"].as_array().unwrap() {
            for group in rule["apiGroups"].as_array().unwrap() {
                for res in rule["resources"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        let needed = PERMISSIONS.iter().any(|p| {
                            !p.external_ca_only
                                && p.scope == scope
                                && p.group == group
                                && p.resource == res
                                && p.verbs.contains(&verb.as_str().unwrap())
                        });
                        assert!(
                            needed,
                            "{verb} {group}/{res} is granted but no controller uses it"
                        );
                    }
                }
            }
        }
    }
    // The reader another control plane's remote secret names: every call made with it granted,
    // and nothing more.
    let reader = get(&r, "ClusterRole/istio-reader-clusterrole-istio-system");
    for p in REMOTE_PERMISSIONS {
        for verb in p.verbs {
            assert!(
                rule_allows(&reader["rules"], p.group, p.resource, verb),
                "{verb} {}/{} (used by {}) is not granted to the reader",
                p.group,
                p.resource,
                p.used_by
            );
        }
    }
    for rule in reader["rules"].as_array().unwrap() {
        for group in rule["apiGroups"].as_array().unwrap() {
            for res in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    assert!(
                        REMOTE_PERMISSIONS.iter().any(|p| p.group == group
                            && p.resource == res
                            && p.verbs.contains(&verb.as_str().unwrap())),
                        "{verb} {group}/{res} is granted to the reader but not used"
                    );
                }
            }
        }
    }
    assert_eq!(
        get(
            &r,
            "ClusterRoleBinding/istio-reader-clusterrole-istio-system"
        )["subjects"][0]["name"],
        "istio-reader-service-account"
    );
    assert!(
        r.objects
            .contains_key("ServiceAccount/istio-reader-service-account")
    );
    for binding in [
        "ClusterRoleBinding/istiod-clusterrole-istio-system",
        "RoleBinding/istiod",
    ] {
        let b = get(&r, binding);
        assert_eq!(b["subjects"][0]["name"], sa);
        assert_eq!(b["subjects"][0]["namespace"], NS);
    }

    // Webhooks: served by the Service, labelled so the leader writes their caBundle.
    let validator = get(
        &r,
        "ValidatingWebhookConfiguration/istio-validator-istio-system",
    );
    let injector = get(&r, "MutatingWebhookConfiguration/istio-sidecar-injector");
    for (config, path) in [(validator, "/validate"), (injector, "/inject")] {
        assert_eq!(config["metadata"]["labels"]["istio.io/rev"], "default");
        for hook in config["webhooks"].as_array().unwrap() {
            assert_eq!(
                hook["clientConfig"]["service"],
                json!({"name": "istiod", "namespace": NS, "path": path, "port": 443})
            );
        }
    }
    assert_eq!(
        injector["webhooks"][0]["namespaceSelector"]["matchExpressions"][0],
        json!({"key": "istio-injection", "operator": "In", "values": ["enabled"]})
    );

    // The mesh and injector ConfigMaps parse with Rudder's own readers.
    let injector_cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(get(&r, "ConfigMap/istio-sidecar-injector").clone()).unwrap();
    let template = rudder::webhook::inject::Template::from_configmap(&injector_cm.data.unwrap())
        .expect("injector ConfigMap parses");
    assert_eq!(template.image, "docker.io/istio/proxyv2:1.30.0");
    assert!(template.policy_enabled);
    let mesh = get(&r, "ConfigMap/istio")["data"]["mesh"]
        .as_str()
        .unwrap()
        .to_string();
    let mesh: rudder::config::mesh::MeshConfig =
        serde_saphyr::from_str(&mesh).expect("mesh parses");
    assert_eq!(mesh.trust_domain.as_deref(), Some("cluster.local"));
    // As istiod's chart: Istio's standard metrics through the built-in Prometheus provider.
    assert_eq!(
        mesh.default_providers.map(|d| d.metrics),
        Some(vec!["prometheus".to_string()])
    );
    // Also as istiod's chart: a mesh config that sets `defaultProviders` says every provider it
    // wants, so one without `metrics` turns Istio's Prometheus metrics off.
    let tracing_only = json!({"meshConfig": {"defaultProviders": {"tracing": ["zipkin"]}}});
    if let Some(r) = render(tracing_only) {
        let mesh: rudder::config::mesh::MeshConfig =
            serde_saphyr::from_str(get(&r, "ConfigMap/istio")["data"]["mesh"].as_str().unwrap())
                .expect("mesh parses");
        let providers = mesh.default_providers.expect("the user's providers");
        assert!(providers.metrics.is_empty(), "{:?}", providers.metrics);
        assert_eq!(providers.tracing, ["zipkin"]);
    }

    assert!(
        !r.objects.contains_key("PodDisruptionBudget/istiod"),
        "one replica by default: no budget, as istiod's chart"
    );
    assert!(r.objects.contains_key("HorizontalPodAutoscaler/istiod"));
    assert!(
        !r.notes.contains("WARNING"),
        "the defaults are all honoured: {}",
        r.notes
    );
    assert!(
        deploy["spec"]["replicas"].is_null(),
        "the HPA owns the replica count"
    );

    dry_run_on_real_cluster();
}

fn args_of(deploy: &Value) -> Vec<String> {
    deploy["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn env_of(deploy: &Value) -> BTreeMap<String, Value> {
    deploy["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e["value"].clone()))
        .collect()
}

fn assert_clean(r: &Rendered) {
    assert!(
        r.lint["errors"].as_array().unwrap().is_empty(),
        "{}",
        r.lint
    );
    for obj in r.objects.values() {
        check_object(obj);
    }
}

#[test]
fn chart_values_for_a_canary_revision() {
    let values = json!({
        "revision": "canary",
        "autoscaleEnabled": false,
        "replicaCount": 3,
        "global": {
            "hub": "registry.example.com/istio",
            "tag": "1.29.1",
            "defaultPodDisruptionBudget": {"enabled": false},
        },
        "base": {"validationFailurePolicy": "Ignore"},
        "rudder": {"dashboard": {"enabled": false}},
    });
    let Some(r) = render(values) else { return };
    assert_clean(&r);
    assert!(r.objects.contains_key("Service/istiod-canary"));
    let deploy = get(&r, "Deployment/istiod-canary");
    assert_eq!(deploy["spec"]["replicas"], 3);
    let args = args_of(deploy);
    parse_args(&args);
    assert!(args.contains(&"--revision=canary".to_string()));
    assert!(args.contains(&"--discovery-address=istiod-canary.istio-system.svc:15012".to_string()));
    assert!(
        !r.objects.contains_key("ConfigMap/istio"),
        "the shared mesh ConfigMap belongs to the default revision"
    );
    let cm = get(
        &r,
        &format!(
            "ConfigMap/{}",
            rudder::webhook::inject::injector_configmap("canary")
        ),
    );
    let data: BTreeMap<String, String> = serde_json::from_value(cm["data"].clone()).unwrap();
    assert_eq!(
        rudder::webhook::inject::Template::from_configmap(&data)
            .unwrap()
            .image,
        "registry.example.com/istio/proxyv2:1.29.1"
    );
    let validator = get(
        &r,
        "ValidatingWebhookConfiguration/istio-validator-canary-istio-system",
    );
    assert_eq!(
        validator["webhooks"][0]["name"],
        "canary.validation.istio.io"
    );
    assert_eq!(validator["webhooks"][0]["failurePolicy"], "Ignore");
    assert_eq!(validator["metadata"]["labels"]["istio.io/rev"], "canary");
    let injector = get(
        &r,
        "MutatingWebhookConfiguration/istio-sidecar-injector-canary",
    );
    assert_eq!(
        injector["webhooks"][0]["namespaceSelector"]["matchExpressions"][0],
        json!({"key": "istio.io/rev", "operator": "In", "values": ["canary"]})
    );
    for absent in [
        "PodDisruptionBudget/istiod-canary",
        "HorizontalPodAutoscaler/istiod-canary",
        "ConfigMap/rudder-canary-dashboard",
    ] {
        assert!(!r.objects.contains_key(absent), "{absent}");
    }
}

/// A values file as an istiod operator writes it (istio-discovery's layout, written here from its
/// documented keys): every key it sets takes effect, in the object istiod's chart puts it in.
#[test]
fn an_istiod_values_file_installs_rudder() {
    let values = json!({
        "autoscaleEnabled": true,
        "autoscaleMin": 2,
        "autoscaleMax": 7,
        "autoscaleBehavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        "cpu": {"targetAverageUtilization": 65},
        "memory": {"targetAverageUtilization": 75},
        "rollingMaxSurge": 1,
        "rollingMaxUnavailable": 0,
        "image": "mirror.example.com/rudder/rudder:0.1.0",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "env": {"PILOT_PUSH_THROTTLE": 50, "PILOT_DEBOUNCE_AFTER": "200ms"},
        "extraContainerArgs": ["--xds-send-timeout=30s"],
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app": "istiod"}}}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "istiod"}}}],
        "podAnnotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
        "podLabels": {"team": "mesh"},
        "deploymentLabels": {"cost-center": "platform"},
        "deploymentAnnotations": {"reloader.example.com/auto": "true"},
        "serviceAnnotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
        "serviceAccountAnnotations": {"iam.example.com/role": "istiod"},
        "sidecarInjectorWebhookAnnotations": {"example.com/owner": "mesh"},
        "volumes": [{"name": "extra", "emptyDir": {}}],
        "volumeMounts": [{"name": "extra", "mountPath": "/extra"}],
        "keepaliveMaxServerConnectionAge": "1h",
        "ipFamilyPolicy": "PreferDualStack",
        "ipFamilies": ["IPv4", "IPv6"],
        "trustedZtunnelNamespace": "kube-system",
        "seccompProfile": {"type": "RuntimeDefault"},
        "pdb": {"maxUnavailable": 1},
        "sidecarInjectorWebhook": {
            "neverInjectSelector": [{"matchLabels": {"job": "batch"}}],
            "rewriteAppHTTPProbe": false,
            "reinvocationPolicy": "IfNeeded",
            "enableNamespacesByDefault": true,
        },
        "meshConfig": {"trustDomain": "corp.example", "accessLogFile": "/dev/stdout"},
        "revisionTags": ["prod"],
        "global": {
            "hub": "mirror.example.com/istio",
            "tag": "1.30.0",
            "variant": "distroless",
            "imagePullPolicy": "Always",
            "imagePullSecrets": ["mirror-pull"],
            "logAsJson": true,
            "logging": {"level": "default:info,ads:debug"},
            "priorityClassName": "system-cluster-critical",
            "proxy": {"clusterDomain": "corp.local", "logLevel": "info", "autoInject": "disabled"},
            "multiCluster": {"clusterName": "east-1"},
            "meshID": "corp",
            "network": "net-east",
            "networkPolicy": {"enabled": true},
            "istiod": {"enableAnalysis": true},
            "externalIstiod": true,
            "meshNetworks": {"net-east": {
                "endpoints": [{"fromRegistry": "east-1"}],
                "gateways": [{"registryServiceName": "istio-eastwestgateway.istio-system.svc.cluster.local", "port": 15443}],
            }},
        },
    });
    let Some(r) = render(values) else { return };
    assert_clean(&r);
    assert!(!r.notes.contains("WARNING"), "{}", r.notes);

    let deploy = get(&r, "Deployment/istiod");
    assert!(deploy["spec"]["replicas"].is_null());
    assert_eq!(deploy["metadata"]["labels"]["cost-center"], "platform");
    assert_eq!(
        deploy["metadata"]["annotations"]["reloader.example.com/auto"],
        "true"
    );
    assert_eq!(
        deploy["spec"]["strategy"]["rollingUpdate"],
        json!({"maxSurge": 1, "maxUnavailable": 0})
    );
    let template = &deploy["spec"]["template"];
    assert_eq!(template["metadata"]["labels"]["team"], "mesh");
    assert_eq!(
        template["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"],
        "true"
    );
    let pod = &template["spec"];
    assert_eq!(pod["nodeSelector"], json!({"pool": "system"}));
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "mirror-pull"}]));
    assert!(pod["affinity"]["podAntiAffinity"].is_object());
    assert_eq!(pod["topologySpreadConstraints"][0]["maxSkew"], 1);
    assert!(
        pod["tolerations"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "dedicated", "operator": "Exists"}))
    );
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "extra")
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"], "mirror.example.com/rudder/rudder:0.1.0",
        "Rudder's image is its own; global.hub/tag/variant are the proxies'"
    );
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["resources"]["requests"]["cpu"], "1");
    assert_eq!(container["volumeMounts"][1]["mountPath"], "/extra");
    let args = args_of(deploy);
    parse_args(&args);
    for want in [
        "--log-format=json",
        "--log-level=default:info,ads:debug",
        "--domain-suffix=corp.local",
        "--trust-domain=corp.example",
        "--keepalive-max-server-connection-age=1h",
        "--revision-tags=prod",
        "--xds-send-timeout=30s",
    ] {
        assert!(args.contains(&want.to_string()), "{want} not in {args:?}");
    }
    let env = env_of(deploy);
    // The cluster ID as istiod's chart passes it, so `pilot.env.CLUSTER_ID` can override it.
    assert_eq!(env["CLUSTER_ID"], "east-1");
    assert!(
        !args_of(deploy)
            .iter()
            .any(|a| a.starts_with("--cluster-id"))
    );
    assert_eq!(env["PILOT_PUSH_THROTTLE"], "50");
    assert_eq!(env["PILOT_DEBOUNCE_AFTER"], "200ms");
    assert_eq!(env["CA_TRUSTED_NODE_ACCOUNTS"], "kube-system/ztunnel");
    assert_eq!(env["PILOT_ENABLE_ANALYSIS"], "true");
    assert_eq!(env["EXTERNAL_ISTIOD"], "true");

    let hpa = get(&r, "HorizontalPodAutoscaler/istiod");
    assert_eq!(hpa["spec"]["minReplicas"], 2);
    assert_eq!(hpa["spec"]["maxReplicas"], 7);
    assert_eq!(
        hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        300
    );
    let targets: Vec<(&str, i64)> = hpa["spec"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["resource"]["name"].as_str().unwrap(),
                m["resource"]["target"]["averageUtilization"]
                    .as_i64()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(targets, [("cpu", 65), ("memory", 75)]);
    assert_eq!(
        get(&r, "PodDisruptionBudget/istiod")["spec"]["maxUnavailable"],
        1
    );

    let svc = get(&r, "Service/istiod");
    assert_eq!(svc["spec"]["ipFamilyPolicy"], "PreferDualStack");
    assert_eq!(
        svc["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-internal"],
        "true"
    );
    assert_eq!(
        get(&r, "ServiceAccount/istiod")["metadata"]["annotations"]["iam.example.com/role"],
        "istiod"
    );
    assert!(r.objects.contains_key("NetworkPolicy/istiod"));
    assert!(r.objects.contains_key("Service/istiod-revision-tag-prod"));

    let injector = get(&r, "MutatingWebhookConfiguration/istio-sidecar-injector");
    assert_eq!(
        injector["metadata"]["annotations"]["example.com/owner"],
        "mesh"
    );
    let names: Vec<&str> = injector["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["reinvocationPolicy"], "IfNeeded");
            w["name"].as_str().unwrap()
        })
        .collect();
    assert!(
        names.contains(&"auto.sidecar-injector.istio.io"),
        "{names:?}"
    );
    let tag = get(&r, "MutatingWebhookConfiguration/istio-revision-tag-prod");
    assert_eq!(tag["metadata"]["labels"]["istio.io/tag"], "prod");
    assert_eq!(
        tag["metadata"]["labels"]["istio.io/rev"], "default",
        "labelled with the revision, so its leader keeps the caBundle"
    );
    assert_eq!(
        tag["webhooks"][0]["namespaceSelector"]["matchExpressions"][0],
        json!({"key": "istio.io/rev", "operator": "In", "values": ["prod"]})
    );

    let cm: BTreeMap<String, String> =
        serde_json::from_value(get(&r, "ConfigMap/istio-sidecar-injector")["data"].clone())
            .unwrap();
    let t = rudder::webhook::inject::Template::from_configmap(&cm).unwrap();
    assert_eq!(
        t.image,
        "mirror.example.com/istio/proxyv2:1.30.0-distroless"
    );
    assert_eq!(t.pull_policy.as_deref(), Some("Always"));
    assert_eq!(t.log_level, "info");
    assert!(!t.policy_enabled && !t.rewrite_probes && t.namespaces_by_default);
    assert_eq!(t.never_inject.len(), 1);
    assert_eq!(t.cluster_id.as_deref(), Some("east-1"));
    assert_eq!(t.mesh_id.as_deref(), Some("corp"));
    assert_eq!(t.network.as_deref(), Some("net-east"));
    let mesh: rudder::config::mesh::MeshConfig =
        serde_saphyr::from_str(get(&r, "ConfigMap/istio")["data"]["mesh"].as_str().unwrap())
            .unwrap();
    assert_eq!(mesh.trust_domain.as_deref(), Some("corp.example"));
    // `meshNetworks` as istiod's chart writes it, which Rudder reads (docs/multicluster.md).
    let networks: Value = serde_saphyr::from_str(
        get(&r, "ConfigMap/istio")["data"]["meshNetworks"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        networks["networks"]["net-east"]["endpoints"][0]["fromRegistry"],
        "east-1"
    );
    assert_eq!(
        networks["networks"]["net-east"]["gateways"][0]["port"],
        15443
    );
}

/// `istiodRemote.enabled`, as istiod's remote profile: the reader may also write what a control
/// plane with EXTERNAL_ISTIOD writes in the remote it leads (`LED_REMOTE_PERMISSIONS`).
#[test]
fn a_remote_profile_reader_may_do_what_a_leading_control_plane_does() {
    let Some(r) = render(json!({"istiodRemote": {"enabled": true}})) else {
        return;
    };
    let reader = get(&r, "ClusterRole/istio-reader-clusterrole-istio-system");
    let leases = get(&r, "Role/istio-reader-leases");
    assert_eq!(
        get(&r, "RoleBinding/istio-reader-leases")["subjects"][0]["name"],
        "istio-reader-service-account"
    );
    for p in LED_REMOTE_PERMISSIONS {
        let rules = match p.scope {
            Scope::Cluster => &reader["rules"],
            Scope::SystemNamespace => &leases["rules"],
        };
        for verb in p.verbs {
            assert!(
                rule_allows(rules, p.group, p.resource, verb),
                "{verb} {}/{} (used by {}) is not granted",
                p.group,
                p.resource,
                p.used_by
            );
        }
    }
}

/// `profile: remote` (primary–remote, as Istio's install steps run it on the remote): no control
/// plane here, the istiod Service standing for the external one at `global.remotePilotAddress`
/// (an EndpointSlice for an IP, ExternalName for a host name), the injection webhook and the
/// reader kept; the control plane's own rights and the validation webhook only on a config
/// cluster.
#[test]
fn the_remote_profile_installs_what_a_remote_cluster_needs() {
    let Some(r) =
        render(json!({"profile": "remote", "global": {"remotePilotAddress": "10.0.0.40"}}))
    else {
        return;
    };
    assert_clean(&r);
    for gone in [
        "Deployment/istiod",
        "HorizontalPodAutoscaler/istiod",
        "ConfigMap/istio",
        "ConfigMap/istio-sidecar-injector",
        "ServiceAccount/istiod",
        "ClusterRole/istiod-clusterrole-istio-system",
        "ValidatingWebhookConfiguration/istio-validator-istio-system",
    ] {
        assert!(!r.objects.contains_key(gone), "{gone} in a remote install");
    }
    let svc = get(&r, "Service/istiod");
    assert!(svc["spec"].get("selector").is_none(), "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["port"], 15012);
    assert_eq!(svc["spec"]["ports"][1]["targetPort"], 15017);
    let slice = get(&r, "EndpointSlice/istiod");
    assert_eq!(slice["endpoints"][0]["addresses"][0], "10.0.0.40");
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "istiod"
    );
    assert!(
        r.objects
            .contains_key("MutatingWebhookConfiguration/istio-sidecar-injector")
    );
    assert!(
        r.objects
            .contains_key("ClusterRole/istio-reader-clusterrole-istio-system")
    );

    let Some(r) = render(
        json!({"profile": "remote", "global": {"remotePilotAddress": "istiod.example.com", "configCluster": true}}),
    ) else {
        return;
    };
    assert_clean(&r);
    let svc = get(&r, "Service/istiod");
    assert_eq!(svc["spec"]["type"], "ExternalName");
    assert_eq!(svc["spec"]["externalName"], "istiod.example.com");
    assert!(!r.objects.contains_key("EndpointSlice/istiod"));
    assert!(!r.objects.contains_key("Deployment/istiod"));
    for kept in [
        "ClusterRole/istiod-clusterrole-istio-system",
        "ValidatingWebhookConfiguration/istio-validator-istio-system",
    ] {
        assert!(r.objects.contains_key(kept), "{kept} on a config cluster");
    }
}

/// The older layout (`pilot.*`, as IstioOperator's `values.pilot` and istiod charts before 1.24
/// write it) and `profile: ambient` are read; the user's values win over the profile.
#[test]
fn pilot_layout_and_ambient_profile() {
    let values = json!({
        "profile": "ambient",
        "pilot": {
            "autoscaleEnabled": false,
            "replicaCount": 2,
            "env": {"PILOT_PUSH_THROTTLE": 20},
            "extraContainerArgs": ["--xds-idle-timeout=60s"],
        },
        "global": {"variant": ""},
    });
    let Some(r) = render(values) else { return };
    assert_clean(&r);
    let deploy = get(&r, "Deployment/istiod");
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert!(!r.objects.contains_key("HorizontalPodAutoscaler/istiod"));
    let env = env_of(deploy);
    assert_eq!(env["PILOT_PUSH_THROTTLE"], "20");
    assert_eq!(env["PILOT_ENABLE_AMBIENT"], "true", "from the profile");
    let args = args_of(deploy);
    parse_args(&args);
    assert!(args.contains(&"--xds-idle-timeout=60s".to_string()));
    let mesh = get(&r, "ConfigMap/istio")["data"]["mesh"].as_str().unwrap();
    assert!(mesh.contains("ISTIO_META_ENABLE_HBONE"), "{mesh}");
    let cm: BTreeMap<String, String> =
        serde_json::from_value(get(&r, "ConfigMap/istio-sidecar-injector")["data"].clone())
            .unwrap();
    assert_eq!(
        rudder::webhook::inject::Template::from_configmap(&cm)
            .unwrap()
            .image,
        "docker.io/istio/proxyv2:1.30.0",
        "the user's global.variant beats the profile's"
    );
}

/// Keys istiod's chart does not have, or values of the wrong shape, fail the install with a
/// message naming them; keys istiod has that Rudder does not act on are named after the install.
#[test]
fn typos_fail_and_unhonoured_values_are_named() {
    for (values, want) in [
        (json!({"autoscaleEnabeld": false}), "autoscaleEnabeld"),
        (json!({"image": {"repository": "x"}}), "/image"),
        (json!({"global": {"proxy": {"imag": "x"}}}), "imag"),
        (json!({"pilot": {"envv": {}}}), "envv"),
        (
            json!({"sidecarInjectorWebhook": {"reinvocationPolicy": "Sometimes"}}),
            "reinvocationPolicy",
        ),
        (json!({"profile": "openshift"}), "profile"),
    ] {
        let Some(err) = render_error(NS, values.clone()) else {
            return;
        };
        assert!(err.contains(want), "{values}: {err}");
    }
    let values = json!({
        "cni": {"enabled": true},
        "global": {"pilotCertProvider": "kubernetes", "proxy": {"tracer": "zipkin"}},
        "telemetry": {"enabled": false},
    });
    let Some(r) = render(values) else { return };
    let notes = &r.notes;
    assert!(notes.contains("WARNING"), "{notes}");
    for path in [
        "cni.enabled",
        "global.pilotCertProvider",
        "global.proxy.tracer",
        "telemetry",
    ] {
        assert!(notes.contains(path), "{path} not named: {notes}");
    }
}

/// `global.resourceScope` splits an install between a cluster admin (cluster-scoped objects) and
/// a namespace owner, as istiod's chart does.
#[test]
fn resource_scope_splits_cluster_and_namespace_objects() {
    let cluster_scoped = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ];
    for scope in ["cluster", "namespace"] {
        let Some(r) = render(json!({"global": {"resourceScope": scope}})) else {
            return;
        };
        assert!(!r.objects.is_empty());
        for key in r.objects.keys() {
            let kind = key.split('/').next().unwrap();
            assert_eq!(
                cluster_scoped.contains(&kind),
                scope == "cluster",
                "{key} rendered with resourceScope {scope}"
            );
        }
    }
}

/// Checks a schema node is structural as Kubernetes requires.
fn assert_structural(node: &Value, path: &str) {
    let obj = node
        .as_object()
        .unwrap_or_else(|| panic!("{path}: not an object"));
    assert!(
        obj.contains_key("type")
            || obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)),
        "{path}: no type"
    );
    assert!(
        !(obj.contains_key("properties") && obj.contains_key("additionalProperties")),
        "{path}: properties and additionalProperties"
    );
    for key in obj.keys() {
        assert!(
            !key.starts_with('$') && key != "const" && key != "default",
            "{path}: {key}"
        );
    }
    if let Some(t) = obj.get("type") {
        assert!(t.is_string(), "{path}: one type per node");
    }
    for (k, v) in obj
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        assert_structural(v, &format!("{path}.{k}"));
    }
    if let Some(items) = obj.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
    if let Some(extra) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        assert_structural(extra, &format!("{path}{{}}"));
    }
}

#[test]
fn crds_are_generated_from_the_config_model() {
    let committed = std::fs::read_to_string(chart_dir().join("crds/istio-crds.yaml")).unwrap();
    assert_eq!(
        committed,
        rudder::config::crd::all_yaml(),
        "charts/rudder/crds is stale: run `cargo run -- crds > charts/rudder/crds/istio-crds.yaml`"
    );
    let crds = yaml_documents(&committed);
    assert_eq!(crds.len(), rudder::config::Kind::ISTIO.len());
    for crd in &crds {
        let typed: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition = serde_json::from_value(crd.clone()).unwrap();
        let kind = rudder::config::Kind::from_name(&typed.spec.names.kind).unwrap();
        let versions: Vec<&str> = typed
            .spec
            .versions
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(versions, kind.served_versions());
        assert_eq!(typed.spec.versions.iter().filter(|v| v.storage).count(), 1);
        for v in &crd["spec"]["versions"].as_array().unwrap()[..] {
            assert_structural(
                &v["schema"]["openAPIV3Schema"],
                &format!("{}.{}", typed.spec.names.kind, v["name"]),
            );
        }
    }
    // Real Istio YAML passes the schema's shape: each fixture's spec fits the CRD's property names.
    let vs = crds
        .iter()
        .find(|c| c["spec"]["names"]["kind"] == "VirtualService")
        .unwrap();
    let http = &vs["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["http"]["items"]["properties"];
    for field in [
        "match",
        "route",
        "redirect",
        "rewrite",
        "timeout",
        "retries",
        "fault",
        "mirror",
        "corsPolicy",
        "headers",
    ] {
        assert!(
            http.get(field).is_some(),
            "VirtualService http.{field} missing from the schema"
        );
    }
    let route_match = &http["match"]["items"]["properties"]["uri"]["properties"];
    for field in ["exact", "prefix", "regex"] {
        assert!(
            route_match.get(field).is_some(),
            "StringMatch oneof field {field}"
        );
    }
    let timeout = &http["timeout"];
    assert_eq!(
        timeout["type"], "string",
        "durations are strings: {timeout}"
    );
    // The chart ships exactly these CRDs.
    let Some(r) = render(json!({})) else { return };
    assert_eq!(r.crds, crds);
}

/// Metric names a PromQL expression refers to (identifiers followed by `{` or `[`).
fn metrics_in(expr: &str) -> Vec<String> {
    let re = regex::Regex::new(r"([a-z_][a-z0-9_]*)\s*[\{\[]").unwrap();
    re.captures_iter(expr)
        .map(|c| c[1].to_string())
        .filter(|m| {
            ![
                "by",
                "rate",
                "sum",
                "max",
                "histogram_quantile",
                "label_values",
            ]
            .contains(&m.as_str())
        })
        .collect()
}

/// The metric families of every query of `dash`, each checked to be one Rudder exports.
fn dashboard_metrics(
    name: &str,
    dash: &Value,
    known: &[&str],
) -> std::collections::BTreeSet<String> {
    let mut exprs = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    let mut used = std::collections::BTreeSet::new();
    for expr in &exprs {
        let names = metrics_in(expr);
        assert!(!names.is_empty(), "{name}: {expr}");
        for metric in names {
            let base = ["_total", "_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| metric.strip_suffix(s).filter(|b| known.contains(b)))
                .unwrap_or(&metric);
            assert!(
                known.contains(&base),
                "{name}: {expr}: {metric} is not a Rudder metric"
            );
            used.insert(base.to_string());
        }
    }
    used
}

/// Rudder's dashboard, and its variants of Istio's control-plane and performance dashboards
/// (written by scripts/dashboards.py), query only series Rudder exports; the variants fill Istio's
/// Go-runtime panels with the async runtime's and the allocator's; the chart ships all three.
#[test]
fn dashboard_queries_only_metrics_rudder_exports() {
    let metrics =
        rudder::cmd::serve::DaemonMetrics::register(Default::default(), Default::default())
            .registry;
    let known = metrics.names();
    let read = |name: &str| -> Value {
        let text = std::fs::read_to_string(chart_dir().join("files").join(name)).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let dash = read("rudder-dashboard.json");
    let used = dashboard_metrics("rudder-dashboard.json", &dash, known);
    assert!(
        used.len() >= 10,
        "panels for pushes, convergence, connections, rejects, CA, webhooks, memory, CPU"
    );
    for must in [
        "pilot_xds_pushes",
        "pilot_proxy_convergence_time",
        "pilot_xds",
        "pilot_total_xds_rejects",
        "citadel_server_csr_count",
        "process_resident_memory_bytes",
        "process_cpu_seconds",
    ] {
        assert!(used.contains(must), "dashboard lacks {must}");
    }
    let variants = [
        "rudder-istio-control-plane-dashboard.json",
        "rudder-istio-performance-dashboard.json",
    ];
    for name in variants {
        let used = dashboard_metrics(name, &read(name), known);
        for must in [
            "rudder_runtime_alive_tasks",
            "rudder_allocator_committed_bytes",
            "process_cpu_seconds",
        ] {
            assert!(used.contains(must), "{name} lacks {must}");
        }
    }
    // The files are what the script writes.
    let script = chart_dir().join("../../scripts/dashboards.py");
    match std::process::Command::new("python3")
        .arg(&script)
        .arg("--check")
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("python3 not runnable ({e}): the dashboards' freshness is not checked"),
    }
    // The chart ships them.
    let Some(r) = render(json!({})) else { return };
    let cm = get(&r, "ConfigMap/rudder-dashboard");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    for name in std::iter::once("rudder-dashboard.json").chain(variants) {
        let shipped: Value = serde_json::from_str(
            cm["data"][name]
                .as_str()
                .unwrap_or_else(|| panic!("{name} not shipped")),
        )
        .unwrap();
        assert_eq!(shipped, read(name), "{name}");
    }
}

/// With KUBECONFIG: the API server accepts every CRD and object of a release in a throwaway
/// namespace (server-side dry run, so nothing cluster-wide changes: an existing Istio keeps its CRDs).
fn dry_run_on_real_cluster() {
    let Some(kubeconfig) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) else {
        eprintln!("KUBECONFIG not set: skipping the real API server dry run");
        return;
    };
    let ns = format!("rudder-helm-{}", std::process::id());
    let kubectl = |args: &[&str], file: Option<&Path>| {
        let mut cmd = std::process::Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&kubeconfig).args(args);
        if let Some(f) = file {
            cmd.arg("-f").arg(f);
        }
        cmd.output().expect("kubectl")
    };
    let created = kubectl(&["create", "namespace", &ns], None);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let r = render_in(&ns, json!({})).expect("rendered");
    let dir = tempfile::tempdir().unwrap();
    let docs: Vec<&Value> = r.crds.iter().chain(r.objects.values()).collect();
    let file = dir.path().join("rendered.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string(),
    )
    .unwrap();
    let out = kubectl(&["apply", "--dry-run=server"], Some(&file));
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"], None);
    assert!(
        out.status.success(),
        "API server refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `env.EXTERNAL_CA` (istiod's RA mode): the CSR API permissions are granted, approval only for
/// the signers in `global.certSigners`; without it, none of them.
#[test]
fn an_external_ca_is_granted_the_csr_api_for_its_signers_only() {
    let values = json!({"env": {"EXTERNAL_CA": "ISTIOD_RA_KUBERNETES_API", "K8S_SIGNER": "example.com/mesh"},
                        "global": {"certSigners": ["example.com/mesh"]}});
    let Some(r) = render(values) else { return };
    let cluster_role = get(&r, "ClusterRole/istiod-clusterrole-istio-system");
    for p in PERMISSIONS.iter().filter(|p| p.external_ca_only) {
        for verb in p.verbs {
            assert!(
                rule_allows(&cluster_role["rules"], p.group, p.resource, verb),
                "{verb} {}/{} is not granted",
                p.group,
                p.resource
            );
        }
    }
    let signers = cluster_role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resources"] == json!(["signers"]))
        .expect("signers rule");
    assert_eq!(signers["resourceNames"], json!(["example.com/mesh"]));
    let env = &get(&r, "Deployment/istiod")["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "K8S_SIGNER" && e["value"] == "example.com/mesh"),
        "{env}"
    );
    assert!(!r.notes.contains("certSigners"), "{}", r.notes);

    let Some(plain) = render(json!({})) else {
        return;
    };
    let rules = &get(&plain, "ClusterRole/istiod-clusterrole-istio-system")["rules"];
    assert!(!rule_allows(
        rules,
        "certificates.k8s.io",
        "certificatesigningrequests",
        "create"
    ));
}

/// The daemon runs with exactly what the chart renders (its arguments, and its environment with
/// the pod fields filled in, as the kubelet would; only the listen addresses are moved to free
/// loopback ports) against an in-cluster API server, and logs: at istiod's scope levels the chart
/// passes (`default:info,ads:debug`), the debug lines of `ads` included; istiod's own flags in
/// `extraContainerArgs` are read as Rudder's, or named as not acted on. Before, the daemon took
/// `--log-level=default:info` for a filter it could not read and wrote no log line at all, and
/// stopped at the first istiod flag.
#[test]
fn the_daemon_runs_and_logs_with_the_charts_rendered_arguments() {
    let Some(r) = render_in(
        "chart-run-ns",
        json!({"global": {"logging": {"level": "default:info,ads:debug"}},
               // istiod's own flags, as an istiod values file carries them.
               "extraContainerArgs": ["--keepaliveMaxServerConnectionAge", "45m", "--profile"]}),
    ) else {
        return;
    };
    let deploy = r
        .objects
        .iter()
        .find(|(k, _)| k.starts_with("Deployment/"))
        .map(|(_, v)| v.clone())
        .expect("a Deployment");
    let args = args_of(&deploy);
    let env: Vec<(String, String)> = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_string();
            let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => "rudder-0".to_string(),
                Some("metadata.namespace") => "chart-run-ns".to_string(),
                Some(other) => panic!("a field the test does not fill: {other}"),
                None => e["value"].as_str().unwrap_or_default().to_string(),
            };
            (name, value)
        })
        .collect();
    let c = common::cluster::Cluster::fake_in_cluster("chart-run");
    // `serve` is the chart's first argument; the test harness puts it first itself.
    assert_eq!(args[0], "serve");
    let mut all: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    all.extend(common::LOOPBACK_PORTS);
    let env: Vec<(&str, Option<&str>)> = env
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_str())))
        .collect();
    let daemon = c.rudder_in_pod_with(&all, &env);
    let after_start = (0..200)
        .map_while(|_| {
            daemon
                .log
                .recv_timeout(std::time::Duration::from_secs(10))
                .ok()
        })
        .take_while(|l| !l.contains("Kubernetes initial sync done"));
    let seen: Vec<String> = daemon.startup.iter().cloned().chain(after_start).collect();
    assert!(
        seen.iter().any(|l| l.contains(" INFO ")),
        "info lines at default:info: {seen:#?}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("log level not understood")),
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.contains("istiod flag accepted but not acted on") && l.contains("--profile")),
        "an istiod flag Rudder does not act on is named: {seen:#?}"
    );
    common::eventually(30, "ads debug lines at ads:debug", || {
        let ads = common::ads::Sotw::open(
            daemon.addr("grpc-xds"),
            "sidecar~10.0.0.1~a.chart-run-ns~chart-run-ns.svc.cluster.local",
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _stream = rt.block_on(ads);
        daemon
            .log
            .try_iter()
            .any(|l| l.contains(" DEBUG ") && l.contains("rudder::xds"))
    });
}

/// istiod's own values file for a production install (istiod's chart values as a platform team
/// sets them: its resources, its image, hub and tag, its flags, its meshConfig, on a revision)
/// renders objects the API server admits, with Rudder's image, the requests given and no limit
/// below them, istiod's flags kept, the revision's mesh ConfigMap carrying meshConfig, and no
/// disruption budget for one replica. Before: a 2048Mi request against a fixed 1Gi limit (refused
/// by Kubernetes), Rudder's image turned into `docker.io/istio/pilot:1.30.0`, and meshConfig
/// dropped on a revision.
#[test]
fn istiods_own_production_values_deploy_rudder() {
    let values = json!({
        "revision": "1-30",
        "image": "pilot",
        "hub": "docker.io/istio",
        "tag": "1.30.0",
        "variant": "distroless",
        "autoscaleEnabled": false,
        "replicaCount": 1,
        "resources": {"requests": {"cpu": "500m", "memory": "2048Mi"}},
        "env": {"PILOT_ENABLE_STATUS": "true", "PILOT_TRACE_SAMPLING": "1"},
        "extraContainerArgs": ["--log_output_level=default:info,ads:debug", "--keepaliveMaxServerConnectionAge=30m"],
        "meshConfig": {"accessLogFile": "/dev/stdout", "enableTracing": false,
                       "defaultConfig": {"gatewayTopology": {"numTrustedProxies": 1}}},
        "global": {"hub": "docker.io/istio", "tag": "1.30.0", "proxy": {"resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}},
    });
    let Some(r) = render_in("istio-system", values) else {
        return;
    };
    let deploy = get(&r, "Deployment/istiod-1-30");
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    let image = container["image"].as_str().unwrap();
    assert!(
        image.starts_with("ghcr.io/rudder-mesh/rudder:") && !image.contains("pilot"),
        "Rudder's image, not istiod's: {image}"
    );
    assert_eq!(container["resources"]["requests"]["memory"], "2048Mi");
    assert!(
        container["resources"]["limits"]["memory"].is_null(),
        "{}",
        container["resources"]
    );
    let args = args_of(deploy);
    assert!(
        args.iter()
            .any(|a| a == "--log_output_level=default:info,ads:debug")
    );
    let mesh = get(&r, "ConfigMap/istio-1-30");
    assert!(
        mesh["data"]["mesh"]
            .as_str()
            .unwrap()
            .contains("numTrustedProxies: 1"),
        "{mesh}"
    );
    assert!(
        !r.objects
            .keys()
            .any(|k| k.starts_with("PodDisruptionBudget/")),
        "no budget for one replica: {:?}",
        r.objects.keys()
    );
    // With more replicas, istiod's budget.
    let Some(r) = render_in(
        "istio-system",
        json!({"autoscaleEnabled": true, "autoscaleMin": 2}),
    ) else {
        return;
    };
    let pdb = get(&r, "PodDisruptionBudget/istiod");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
}
