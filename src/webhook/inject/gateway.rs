//! istiod's `gateway` injection template, asked for by `inject.istio.io/templates: gateway` (the
//! `istio/gateway` Helm chart's pods): the agent runs as a router, with no init container, no
//! traffic capture and no probe rewriting; the pod may bind low ports without privileges. The
//! same pod with the agent run as a waypoint (`proxy waypoint`, istiod's `waypoint` template's
//! container) for managed waypoints.

use super::overlay;
use super::pod::{InjectError, PROXY_CONTAINER, STATUS_ANNOTATION, string_map};
use super::proxy_config::ProxyConfigSources;
use super::render::{
    ProxyEnv, annotation, array_at, metadata_env, object_at, proxy_config, proxy_env, proxy_image,
};
use super::render::{add_volumes, containers_of, volume_mounts, volumes, workload_of};
use super::settings::{InjectorSettings, Template};
use crate::model::workload::canonical;
use serde_json::{Value, json};

const UNPRIVILEGED_PORTS: &str = "net.ipv4.ip_unprivileged_port_start";

/// What the agent runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Router,
    Waypoint,
}

/// The pod with the gateway's `istio-proxy` rendered (over the pod's own `istio-proxy`, if any).
pub fn inject(
    settings: &InjectorSettings,
    template: &Template,
    sources: &ProxyConfigSources,
    namespace: &str,
    pod: &Value,
    role: Role,
) -> Result<Value, InjectError> {
    let mut out = pod.clone();
    let annotations = string_map(&pod["metadata"]["annotations"]);
    let labels = string_map(&pod["metadata"]["labels"]);
    let workload = workload_of(pod);
    let (canonical_name, canonical_revision) = canonical(&labels, &workload.name);
    let (app_names, pod_ports) = containers_of(pod);
    let interception = annotation(&annotations, "sidecar.istio.io/interceptionMode")
        .unwrap_or("REDIRECT")
        .to_string();
    let config = proxy_config(settings, template, sources, &annotations)?;
    let image = proxy_image(template, &annotations, &config);
    let mut env = proxy_env(&ProxyEnv {
        settings,
        template,
        namespace,
        workload: &workload,
        interception: &interception,
        proxy_config: Value::Object(config.clone()).to_string(),
        pod_ports,
        app_containers: &app_names,
        divisor: "1",
    });
    env.extend(metadata_env(&config));
    let mut proxy = json!({
        "name": PROXY_CONTAINER,
        "image": image,
        "ports": match role {
            Role::Router => json!([{"containerPort": 15090, "protocol": "TCP", "name": "http-envoy-prom"}]),
            Role::Waypoint => json!([
                {"containerPort": 15020, "protocol": "TCP", "name": "metrics"},
                {"containerPort": 15021, "protocol": "TCP", "name": "status-port"},
                {"containerPort": 15090, "protocol": "TCP", "name": "http-envoy-prom"},
            ]),
        },
        "args": [
            "proxy",
            match role {
                Role::Router => "router",
                Role::Waypoint => "waypoint",
            },
            "--domain",
            format!("$(POD_NAMESPACE).svc.{}", settings.domain_suffix),
            format!("--proxyLogLevel={}", annotation(&annotations, "sidecar.istio.io/logLevel").unwrap_or(&template.log_level)),
            format!("--proxyComponentLogLevel={}", annotation(&annotations, "sidecar.istio.io/componentLogLevel").unwrap_or(&template.component_log_level)),
            format!("--log_output_level={}", annotation(&annotations, "sidecar.istio.io/agentLogLevel").unwrap_or("default:info")),
        ],
        "securityContext": {"runAsUser": 1337, "runAsGroup": 1337},
        "env": env,
        "readinessProbe": {
            "httpGet": {"path": "/healthz/ready", "port": 15021},
            "periodSeconds": 15, "timeoutSeconds": 3, "failureThreshold": 4,
        },
        "volumeMounts": volume_mounts(),
    });
    if let Some(policy) = &template.pull_policy {
        proxy["imagePullPolicy"] = policy.clone().into();
    }

    let spec = object_at(out.as_object_mut().ok_or(InjectError::NotAnObject)?, "spec")?;
    let pod_containers = array_at(spec, "containers")?;
    match pod_containers
        .iter_mut()
        .find(|c| c["name"] == PROXY_CONTAINER)
    {
        Some(own) => *own = overlay::container(&proxy, own),
        None => pod_containers.push(proxy),
    }
    if role == Role::Router {
        let security = object_at(spec, "securityContext")?;
        let sysctls = array_at(security, "sysctls")?;
        if !sysctls.iter().any(|s| s["name"] == UNPRIVILEGED_PORTS) {
            sysctls.push(json!({"name": UNPRIVILEGED_PORTS, "value": "0"}));
        }
    }
    let volumes = volumes();
    let volume_names: Vec<&str> = volumes.iter().filter_map(|v| v["name"].as_str()).collect();
    add_volumes(spec, &volumes)?;

    let meta = object_at(
        out.as_object_mut().ok_or(InjectError::NotAnObject)?,
        "metadata",
    )?;
    let annotations_out = object_at(meta, "annotations")?;
    if let Some(first) = app_names.first() {
        for key in [
            "kubectl.kubernetes.io/default-logs-container",
            "kubectl.kubernetes.io/default-container",
        ] {
            annotations_out
                .entry(key)
                .or_insert_with(|| first.clone().into());
        }
    }
    annotations_out.insert("istio.io/rev".into(), settings.revision.clone().into());
    let status = json!({
        "initContainers": [],
        "containers": [PROXY_CONTAINER],
        "volumes": volume_names,
        "imagePullSecrets": null,
        "revision": settings.revision,
    });
    annotations_out.insert(STATUS_ANNOTATION.into(), status.to_string().into());
    let labels_out = object_at(meta, "labels")?;
    labels_out.insert(
        "service.istio.io/canonical-name".into(),
        canonical_name.into(),
    );
    labels_out.insert(
        "service.istio.io/canonical-revision".into(),
        canonical_revision.into(),
    );
    Ok(out)
}
