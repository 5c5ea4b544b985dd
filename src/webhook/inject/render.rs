//! Rendering: the pod with `istio-init` and `istio-proxy` added, as istiod's default `sidecar`
//! template writes them (environment, iptables arguments, probes rewritten to the agent).

use super::pod::{
    INIT_CONTAINER, InjectError, PROXY_CONTAINER, STATUS_ANNOTATION, pod_name, string_map,
};
use super::proxy_config::{ProxyConfigSources, proxy_metadata};
use super::settings::{InjectorSettings, Template};
use crate::model::workload::{Workload, canonical, workload_from_owner};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Envoy's Prometheus port, the health port and the agent's status port: never captured inbound.
const PROXY_PORTS_EXCLUDED: &[u16] = &[15090, 15021];

pub fn workload_of(pod: &Value) -> Workload {
    let meta = &pod["metadata"];
    let labels = string_map(&meta["labels"]);
    let controller = meta["ownerReferences"].as_array().and_then(|refs| {
        refs.iter()
            .find(|r| r["controller"].as_bool() == Some(true))
    });
    let controller = controller.map(|owner| {
        (
            owner["kind"].as_str().unwrap_or(""),
            owner["name"].as_str().unwrap_or(""),
            owner["apiVersion"].as_str().unwrap_or(""),
        )
    });
    workload_from_owner(&pod_name(pod), &labels, controller)
}

pub(super) fn owner_url(w: &Workload, namespace: &str) -> String {
    format!(
        "kubernetes://apis/{}/namespaces/{namespace}/{}s/{}",
        w.api_version,
        w.kind.to_lowercase(),
        w.name
    )
}

pub(super) fn annotation<'a>(
    annotations: &'a BTreeMap<String, String>,
    key: &str,
) -> Option<&'a str> {
    annotations.get(key).map(String::as_str)
}

/// The pod with the sidecar added: what the JSONPatch turns the submitted pod into.
pub fn sidecar(
    settings: &InjectorSettings,
    template: &Template,
    sources: &ProxyConfigSources,
    namespace: &str,
    pod: &Value,
) -> Result<Value, InjectError> {
    let mut out = pod.clone();
    let annotations = string_map(&pod["metadata"]["annotations"]);
    let labels = string_map(&pod["metadata"]["labels"]);
    let workload = workload_of(pod);
    let status_port = annotation(&annotations, "status.sidecar.istio.io/port")
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(template.status_port);
    let interception = annotation(&annotations, "sidecar.istio.io/interceptionMode")
        .unwrap_or("REDIRECT")
        .to_string();
    let proxy_config = proxy_config(settings, template, sources, &annotations)?;
    let image = proxy_image(template, &annotations, &proxy_config);
    let metadata = metadata_env(&proxy_config);
    // As istiod's template: a proxy that takes HBONE (ISTIO_META_ENABLE_HBONE) is labelled so
    // ztunnel and other proxies tunnel to it.
    let enable_hbone = proxy_metadata(&proxy_config)
        .iter()
        .any(|(k, v)| k == "ISTIO_META_ENABLE_HBONE" && v == "true");
    let hold = proxy_config
        .get("holdApplicationUntilProxyStarts")
        .and_then(Value::as_bool)
        .unwrap_or(template.hold_application);
    let proxy_config = Value::Object(proxy_config).to_string();
    let resources = resources(template, &annotations);

    let (app_names, pod_ports) = containers_of(pod);

    let rewrite = template.rewrite_probes
        && annotation(&annotations, "sidecar.istio.io/rewriteAppHTTPProbers") != Some("false");
    let mut probers = Map::new();
    if rewrite && let Some(containers) = out["spec"]["containers"].as_array_mut() {
        for c in containers {
            rewrite_probes(c, status_port, &mut probers);
        }
    }

    let mut env = proxy_env(&ProxyEnv {
        settings,
        template,
        namespace,
        workload: &workload,
        interception: &interception,
        proxy_config,
        pod_ports,
        app_containers: &app_names,
        divisor: "0",
    });
    if !probers.is_empty() {
        env.push(
            json!({"name": "ISTIO_KUBE_APP_PROBERS", "value": Value::Object(probers).to_string()}),
        );
    }
    env.extend(metadata.iter().cloned());

    let proxy = proxy_container(
        settings,
        template,
        &annotations,
        image,
        env,
        &resources,
        hold,
    );
    // istio-init, unless traffic is not captured.
    let init: Option<Value> = (interception != "NONE").then(|| {
        init_container(
            template,
            &annotations,
            &interception,
            status_port,
            &resources,
            &metadata,
        )
    });

    let volumes = volumes();
    let volume_names: Vec<&str> = volumes.iter().filter_map(|v| v["name"].as_str()).collect();
    let status = json!({
        "initContainers": init.iter().filter_map(|c| c["name"].as_str()).collect::<Vec<_>>(),
        "containers": [PROXY_CONTAINER],
        "volumes": volume_names,
        "imagePullSecrets": null,
        "revision": settings.revision,
    });

    add_to_spec(&mut out, proxy, init, &volumes, hold)?;
    annotate(
        &mut out,
        settings,
        template,
        &Injected {
            annotations: &annotations,
            labels: &labels,
            workload_name: &workload.name,
            status_port,
            default_container: app_names.first().cloned(),
            status,
            enable_hbone,
        },
    )?;
    Ok(out)
}

/// The `istio-proxy` container istiod's `sidecar` template renders.
fn proxy_container(
    settings: &InjectorSettings,
    template: &Template,
    annotations: &BTreeMap<String, String>,
    image: String,
    env: Vec<Value>,
    resources: &Value,
    hold: bool,
) -> Value {
    let mut proxy = json!({
        "name": PROXY_CONTAINER,
        "image": image,
        "args": [
            "proxy",
            "sidecar",
            "--domain",
            format!("$(POD_NAMESPACE).svc.{}", settings.domain_suffix),
            format!("--proxyLogLevel={}", annotation(annotations, "sidecar.istio.io/logLevel").unwrap_or(&template.log_level)),
            format!("--proxyComponentLogLevel={}", annotation(annotations, "sidecar.istio.io/componentLogLevel").unwrap_or(&template.component_log_level)),
            "--log_output_level=default:info",
        ],
        "env": env,
        "ports": [{"containerPort": 15090, "protocol": "TCP", "name": "http-envoy-prom"}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz/ready", "port": 15021},
            "failureThreshold": 4, "periodSeconds": 15, "timeoutSeconds": 3,
        },
        "startupProbe": {
            "httpGet": {"path": "/healthz/ready", "port": 15021},
            "failureThreshold": 600, "periodSeconds": 1, "timeoutSeconds": 3,
        },
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": template.privileged,
            "capabilities": {"drop": ["ALL"]},
            "privileged": template.privileged,
            "readOnlyRootFilesystem": true,
            "runAsGroup": 1337,
            "runAsNonRoot": true,
            "runAsUser": 1337,
        },
        "volumeMounts": volume_mounts(),
    });
    if let Some(policy) = &template.pull_policy {
        proxy["imagePullPolicy"] = policy.clone().into();
    }
    if hold {
        proxy["lifecycle"] = json!({"postStart": {"exec": {"command": ["pilot-agent", "wait"]}}});
    }

    proxy
}

/// `istio-init`: the container that installs the traffic capture (`istio-iptables`).
fn init_container(
    template: &Template,
    annotations: &BTreeMap<String, String>,
    interception: &str,
    status_port: u16,
    resources: &Value,
    metadata: &[Value],
) -> Value {
    let mut init = json!({
        "name": INIT_CONTAINER,
        "image": template.image,
        "args": iptables_args(template, annotations, interception, status_port),
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
            "privileged": false,
            "readOnlyRootFilesystem": false,
            "runAsGroup": 0,
            "runAsNonRoot": false,
            "runAsUser": 0,
        },
    });
    if let Some(policy) = &template.pull_policy {
        init["imagePullPolicy"] = policy.clone().into();
    }
    if !metadata.is_empty() {
        init["env"] = Value::Array(metadata.to_vec());
    }
    init
}

/// The rendered containers and volumes put into the pod's spec: the pod's own `istio-proxy`
/// (customised) overlays the rendered one where it stands; `istio-init` goes first.
fn add_to_spec(
    out: &mut Value,
    proxy: Value,
    init: Option<Value>,
    volumes: &[Value],
    hold: bool,
) -> Result<(), InjectError> {
    let spec = object_at(out.as_object_mut().ok_or(InjectError::NotAnObject)?, "spec")?;
    let containers = array_at(spec, "containers")?;
    // The pod's own istio-proxy (customised) goes over the rendered one, where it stands.
    if let Some(own) = containers.iter_mut().find(|c| c["name"] == PROXY_CONTAINER) {
        *own = super::overlay::container(&proxy, own);
    } else if hold {
        containers.insert(0, proxy);
    } else {
        containers.push(proxy);
    }
    if let Some(init) = init {
        // First, so other init containers' traffic is already captured (istiod does the same).
        array_at(spec, "initContainers")?.insert(0, init);
    }
    add_volumes(spec, volumes)
}

/// The rendered volumes the pod does not have yet (by name), added to its spec; the pod's own
/// volume of a name is kept.
pub(super) fn add_volumes(
    spec: &mut Map<String, Value>,
    volumes: &[Value],
) -> Result<(), InjectError> {
    let pod_volumes = array_at(spec, "volumes")?;
    for v in volumes {
        if !pod_volumes.iter().any(|p| p["name"] == v["name"]) {
            pod_volumes.push(v.clone());
        }
    }
    Ok(())
}

/// What the pod's metadata is given besides the containers.
struct Injected<'a> {
    annotations: &'a BTreeMap<String, String>,
    labels: &'a BTreeMap<String, String>,
    workload_name: &'a str,
    status_port: u16,
    default_container: Option<String>,
    status: Value,
    enable_hbone: bool,
}

/// The annotations and labels istiod's template sets on an injected pod: the default
/// container, Prometheus scraping, the injection status, mTLS and tunnel labels, canonical names.
fn annotate(
    out: &mut Value,
    settings: &InjectorSettings,
    template: &Template,
    injected: &Injected,
) -> Result<(), InjectError> {
    let annotations = injected.annotations;
    let labels = injected.labels;
    let (canonical_name, canonical_revision) = canonical(labels, injected.workload_name);
    let meta = object_at(
        out.as_object_mut().ok_or(InjectError::NotAnObject)?,
        "metadata",
    )?;
    let default_container = injected.default_container.clone();
    let annotations_out = object_at(meta, "annotations")?;
    let mut set_if_absent = |k: &str, v: String| {
        annotations_out
            .entry(k.to_string())
            .or_insert(Value::String(v));
    };
    if let Some(first) = default_container {
        set_if_absent("kubectl.kubernetes.io/default-container", first.clone());
        set_if_absent("kubectl.kubernetes.io/default-logs-container", first);
    }
    if annotations.get("prometheus.io/scrape").map(String::as_str) != Some("false") {
        set_if_absent("prometheus.io/scrape", "true".into());
        set_if_absent("prometheus.io/port", injected.status_port.to_string());
        set_if_absent("prometheus.io/path", "/stats/prometheus".into());
    }
    for (k, v) in &template.injected_annotations {
        set_if_absent(k, v.clone());
    }
    annotations_out.insert("istio.io/rev".into(), settings.revision.clone().into());
    annotations_out.insert(STATUS_ANNOTATION.into(), injected.status.to_string().into());
    let labels_out = object_at(meta, "labels")?;
    // As istiod's template: the pod's own value is kept (`disabled` keeps clients off mTLS).
    if !labels.contains_key("security.istio.io/tlsMode") {
        labels_out.insert("security.istio.io/tlsMode".into(), "istio".into());
    }
    if injected.enable_hbone && !labels.contains_key(TUNNEL_LABEL) {
        labels_out.insert(TUNNEL_LABEL.into(), "http".into());
    }
    labels_out.insert(
        "service.istio.io/canonical-name".into(),
        canonical_name.into(),
    );
    labels_out.insert(
        "service.istio.io/canonical-revision".into(),
        canonical_revision.into(),
    );
    Ok(())
}

pub(super) fn object_at<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Map<String, Value>, InjectError> {
    let slot = obj
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().ok_or(InjectError::NotAnObject)
}

pub(super) fn array_at<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Vec<Value>, InjectError> {
    let slot = obj
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut().ok_or(InjectError::NotAnObject)
}

/// `PROXY_CONFIG`: the pod's effective ProxyConfig (mesh `defaultConfig`, ProxyConfig objects,
/// the `proxy.istio.io/config` annotation: `proxy_config::ProxyConfigSources`) with the discovery
/// address and the template's hold setting as defaults.
pub(super) fn proxy_config(
    settings: &InjectorSettings,
    template: &Template,
    sources: &ProxyConfigSources,
    annotations: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, InjectError> {
    let mut own = None;
    if let Some(text) = annotations.get("proxy.istio.io/config") {
        let parsed: Value =
            serde_saphyr::from_str(text).map_err(|e| InjectError::ProxyConfig(e.to_string()))?;
        match parsed {
            Value::Object(m) => own = Some(m),
            Value::Null => {}
            other => {
                return Err(InjectError::ProxyConfig(format!(
                    "expected a mapping, found {other}"
                )));
            }
        }
    }
    let mut config = sources.effective(own);
    config
        .entry("discoveryAddress")
        .or_insert_with(|| settings.discovery_address.clone().into());
    if template.hold_application {
        config
            .entry("holdApplicationUntilProxyStarts")
            .or_insert(true.into());
    }
    Ok(config)
}

/// The proxy's image, as istiod's `ProxyImage`: the `sidecar.istio.io/proxyImage` annotation, else
/// the template's image with the image type the `sidecar.istio.io/proxyImageType` annotation or the
/// ProxyConfig's `image.imageType` asks for (`default` none) in place of the values' variant.
pub(super) fn proxy_image(
    template: &Template,
    annotations: &BTreeMap<String, String>,
    config: &Map<String, Value>,
) -> String {
    if let Some(image) = annotation(annotations, "sidecar.istio.io/proxyImage") {
        return image.to_string();
    }
    let kind = annotation(annotations, "sidecar.istio.io/proxyImageType").or_else(|| {
        config
            .get("image")
            .and_then(|i| i.get("imageType"))
            .and_then(Value::as_str)
    });
    match kind {
        Some(_) if template.base_image.is_empty() => template.image.clone(),
        Some("" | "default") => template.base_image.clone(),
        Some(kind) => format!("{}-{kind}", template.base_image),
        None => template.image.clone(),
    }
}

/// The label of a pod whose proxy takes HBONE itself.
const TUNNEL_LABEL: &str = "networking.istio.io/tunnel";

/// The ProxyConfig's `proxyMetadata` as environment entries, as istiod's template writes them.
pub(super) fn metadata_env(config: &Map<String, Value>) -> Vec<Value> {
    proxy_metadata(config)
        .into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

/// The template's resources with the pod's `sidecar.istio.io/proxyCPU`-style overrides.
fn resources(template: &Template, annotations: &BTreeMap<String, String>) -> Value {
    let mut r = template.resources.clone();
    for (key, section, resource) in [
        ("sidecar.istio.io/proxyCPU", "requests", "cpu"),
        ("sidecar.istio.io/proxyMemory", "requests", "memory"),
        ("sidecar.istio.io/proxyCPULimit", "limits", "cpu"),
        ("sidecar.istio.io/proxyMemoryLimit", "limits", "memory"),
    ] {
        if let Some(v) = annotations.get(key) {
            if !r[section].is_object() {
                r[section] = json!({});
            }
            r[section][resource] = v.clone().into();
        }
    }
    r
}

fn iptables_args(
    template: &Template,
    annotations: &BTreeMap<String, String>,
    interception: &str,
    status_port: u16,
) -> Vec<String> {
    let pick = |key: &str, default: &str| {
        annotations
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let mut excluded_inbound: Vec<String> = PROXY_PORTS_EXCLUDED
        .iter()
        .map(u16::to_string)
        .chain([status_port.to_string()])
        .collect();
    let extra = pick(
        "traffic.sidecar.istio.io/excludeInboundPorts",
        &template.exclude_inbound_ports,
    );
    excluded_inbound.extend(
        extra
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from),
    );
    let mut args: Vec<String> = [
        "istio-iptables",
        "-p",
        "15001",
        "-z",
        "15006",
        "-u",
        "1337",
        "-m",
        interception,
        "-i",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(pick(
        "traffic.sidecar.istio.io/includeOutboundIPRanges",
        &template.include_ip_ranges,
    ));
    args.push("-x".into());
    args.push(pick(
        "traffic.sidecar.istio.io/excludeOutboundIPRanges",
        &template.exclude_ip_ranges,
    ));
    args.push("-b".into());
    args.push(pick(
        "traffic.sidecar.istio.io/includeInboundPorts",
        &template.include_inbound_ports,
    ));
    args.push("-d".into());
    args.push(excluded_inbound.join(","));
    let outbound = pick(
        "traffic.sidecar.istio.io/excludeOutboundPorts",
        &template.exclude_outbound_ports,
    );
    if !outbound.is_empty() {
        args.push("-o".into());
        args.push(outbound);
    }
    args.push("--log_output_level=default:info".into());
    args
}

/// Points the container's HTTP, TCP and gRPC probes at the agent's status port, which runs the
/// original probe from inside the pod (mTLS would otherwise reject the kubelet), and records the
/// originals for `ISTIO_KUBE_APP_PROBERS`.
pub(super) fn rewrite_probes(
    container: &mut Value,
    status_port: u16,
    probers: &mut Map<String, Value>,
) {
    let Some(name) = container["name"].as_str().map(String::from) else {
        return;
    };
    let named_ports: BTreeMap<String, Value> = container["ports"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| Some((p["name"].as_str()?.to_string(), p["containerPort"].clone())))
                .collect()
        })
        .unwrap_or_default();
    for (probe_key, suffix) in [
        ("livenessProbe", "livez"),
        ("readinessProbe", "readyz"),
        ("startupProbe", "startupz"),
    ] {
        let Some(probe) = container.get_mut(probe_key).and_then(Value::as_object_mut) else {
            continue;
        };
        let handler = ["httpGet", "tcpSocket", "grpc"]
            .into_iter()
            .find(|h| probe.get(*h).is_some_and(Value::is_object));
        let Some(handler) = handler else { continue };
        let mut original = probe.remove(handler).unwrap_or(Value::Null);
        if let Some(port) = original["port"].as_str().and_then(|p| named_ports.get(p)) {
            original["port"] = port.clone();
        }
        let path = format!("/app-health/{name}/{suffix}");
        let mut prober = json!({ handler: original });
        if let Some(t) = probe.get("timeoutSeconds") {
            prober["timeoutSeconds"] = t.clone();
        }
        probers.insert(path.clone(), prober);
        probe.insert(
            "httpGet".into(),
            json!({"path": path, "port": status_port, "scheme": "HTTP"}),
        );
    }
}

/// What the agent's environment is made of (the same for the sidecar and gateway templates).
pub(super) struct ProxyEnv<'a> {
    pub settings: &'a InjectorSettings,
    pub template: &'a Template,
    pub namespace: &'a str,
    pub workload: &'a Workload,
    pub interception: &'a str,
    /// `PROXY_CONFIG`, as JSON.
    pub proxy_config: String,
    /// Every container port of the pod.
    pub pod_ports: Vec<Value>,
    pub app_containers: &'a [String],
    /// The `resourceFieldRef` divisor: "0" in istiod's sidecar template, "1" in its gateway one.
    pub divisor: &'a str,
}

/// The `istio-proxy` container's environment, as istiod's templates write it.
pub(super) fn proxy_env(e: &ProxyEnv) -> Vec<Value> {
    let (settings, template) = (e.settings, e.template);
    let field = |path: &str| json!({"fieldRef": {"fieldPath": path}});
    let resource = |res: &str| json!({"resourceFieldRef": {"resource": res, "divisor": e.divisor}});
    let mut env = vec![
        json!({"name": "PILOT_CERT_PROVIDER", "value": "istiod"}),
        json!({"name": "CA_ADDR", "value": template.ca_address.clone().unwrap_or_else(|| settings.discovery_address.clone())}),
        json!({"name": "POD_NAME", "valueFrom": field("metadata.name")}),
        json!({"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")}),
        json!({"name": "INSTANCE_IP", "valueFrom": field("status.podIP")}),
        json!({"name": "SERVICE_ACCOUNT", "valueFrom": field("spec.serviceAccountName")}),
        json!({"name": "HOST_IP", "valueFrom": field("status.hostIP")}),
        json!({"name": "ISTIO_CPU_LIMIT", "valueFrom": resource("limits.cpu")}),
        json!({"name": "PROXY_CONFIG", "value": e.proxy_config}),
        json!({"name": "ISTIO_META_POD_PORTS", "value": Value::Array(e.pod_ports.clone()).to_string()}),
        json!({"name": "ISTIO_META_APP_CONTAINERS", "value": e.app_containers.join(",")}),
        json!({"name": "GOMEMLIMIT", "valueFrom": resource("limits.memory")}),
        json!({"name": "GOMAXPROCS", "valueFrom": resource("limits.cpu")}),
        json!({"name": "ISTIO_META_CLUSTER_ID", "value": template.cluster_id.clone().unwrap_or_else(|| settings.cluster_id.clone())}),
        json!({"name": "ISTIO_META_NODE_NAME", "valueFrom": field("spec.nodeName")}),
        json!({"name": "ISTIO_META_INTERCEPTION_MODE", "value": e.interception}),
        json!({"name": "ISTIO_META_WORKLOAD_NAME", "value": e.workload.name}),
        json!({"name": "ISTIO_META_OWNER", "value": owner_url(e.workload, e.namespace)}),
        json!({"name": "ISTIO_META_MESH_ID", "value": template.mesh_id.clone().unwrap_or_else(|| settings.trust_domain.clone())}),
        json!({"name": "TRUST_DOMAIN", "value": settings.trust_domain}),
    ];
    if let Some(network) = &template.network {
        env.push(json!({"name": "ISTIO_META_NETWORK", "value": network}));
    }
    env
}

/// The volumes the agent mounts (the same for the sidecar and gateway templates).
pub(super) fn volumes() -> [Value; 8] {
    [
        json!({"name": "workload-socket", "emptyDir": {}}),
        json!({"name": "credential-socket", "emptyDir": {}}),
        json!({"name": "workload-certs", "emptyDir": {}}),
        json!({"name": "istio-envoy", "emptyDir": {"medium": "Memory"}}),
        json!({"name": "istio-data", "emptyDir": {}}),
        json!({"name": "istio-podinfo", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        ]}}),
        json!({"name": "istio-token", "projected": {"sources": [
            {"serviceAccountToken": {"audience": "istio-ca", "expirationSeconds": 43200, "path": "istio-token"}},
        ]}}),
        json!({"name": "istiod-ca-cert", "configMap": {"name": "istio-ca-root-cert"}}),
    ]
}

/// Where the agent's volumes are mounted in `istio-proxy`.
pub(super) fn volume_mounts() -> Value {
    json!([
        {"name": "workload-socket", "mountPath": "/var/run/secrets/workload-spiffe-uds"},
        {"name": "credential-socket", "mountPath": "/var/run/secrets/credential-uds"},
        {"name": "workload-certs", "mountPath": "/var/run/secrets/workload-spiffe-credentials"},
        {"name": "istiod-ca-cert", "mountPath": "/var/run/secrets/istio"},
        {"name": "istio-data", "mountPath": "/var/lib/istio/data"},
        {"name": "istio-envoy", "mountPath": "/etc/istio/proxy"},
        {"name": "istio-token", "mountPath": "/var/run/secrets/tokens"},
        {"name": "istio-podinfo", "mountPath": "/etc/istio/pod"},
    ])
}

/// The pod's application containers by name (its own `istio-proxy` aside) and every container
/// port (`ISTIO_META_APP_CONTAINERS`, `ISTIO_META_POD_PORTS`).
pub(super) fn containers_of(pod: &Value) -> (Vec<String>, Vec<Value>) {
    let containers = pod["spec"]["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let names = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .filter(|n| *n != PROXY_CONTAINER)
        .map(String::from)
        .collect();
    let ports = containers
        .iter()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .collect();
    (names, ports)
}
