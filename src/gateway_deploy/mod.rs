//! Automated deployment of managed Gateway API Gateways, as istiod's deployment controller does
//! (`pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go`): for each Gateway of class
//! `istio` without a `Hostname` address, the leader applies a ServiceAccount, a Deployment and a
//! Service named `<gateway>-istio` (or the `gateway.istio.io/name-override` /
//! `gateway.istio.io/service-account` annotations), owned by the Gateway so that Kubernetes
//! deletes them with it, labelled and annotated from `spec.infrastructure` (else the Gateway's own
//! labels and annotations), the Service's ports from the listeners. Objects already there and not
//! labelled `gateway.istio.io/managed` are left alone, as istiod leaves them.
//!
//! Deployment parameters (class defaults, `infrastructure.parametersRef`) are applied as istiod
//! applies them ([`overlay`]); the leader reads them from the API server at each reconcile and
//! reconciles every 30 seconds too, so an edited ConfigMap is followed.
//!
//! The Deployment's pods ask for the gateway injection template (`inject.istio.io/templates:
//! gateway`), the `istio/gateway` chart's way: Rudder's injector fills in the proxy container, so
//! managed gateways and chart-installed ones run the same pod.

pub mod overlay;

use crate::config::gateway_api::{CONTROLLER, Gateway};
use crate::config::{Config, Kind, Spec};
use crate::model::gateway_api::{
    GATEWAY_NAME_LABEL, class_controller, is_managed, managed_service_name,
};
use crate::store::{Snapshot, Store};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The field manager of the objects applied, and the label value marking them (istiod's).
const MANAGER: &str = "istio.io/gateway-controller";
pub const MANAGED_LABEL: &str = "gateway.istio.io/managed";
const MANAGED_VALUE: &str = crate::model::waypoint::GATEWAY_CONTROLLER;
const CLASS_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";
use crate::config::gateway_api::SERVICE_ACCOUNT_ANNOTATION;
const SERVICE_TYPE_ANNOTATION: &str = "networking.istio.io/service-type";
/// Annotations of the Gateway that are about the Gateway, never copied to what it deploys.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    "gateway.istio.io/name-override",
    "gateway.istio.io/service-account",
    "gateway.istio.io/controller-version",
];

/// The objects a managed Gateway of an Istio class should have, as JSON to apply; none for a
/// Gateway Rudder does not deploy (another class, a waypoint, a manual deployment).
pub fn desired(snapshot: &Snapshot, config: &Config, revision: &str) -> Vec<Value> {
    desired_with(snapshot, config, revision, &[]).unwrap_or_default()
}

/// [`desired`] with deployment `parameters` (ConfigMap data, class defaults first) applied; an
/// error when a parameter cannot be applied (the Gateway is then left as it is, as istiod).
pub fn desired_with(
    snapshot: &Snapshot,
    config: &Config,
    revision: &str,
    parameters: &[BTreeMap<String, String>],
) -> Result<Vec<Value>, String> {
    overlay::apply(rendered(snapshot, config, revision), parameters)
}

/// The Gateway's objects before parameters, the autoscaler and disruption budget included
/// (they are kept only when a parameter describes them).
fn rendered(snapshot: &Snapshot, config: &Config, revision: &str) -> Vec<Value> {
    let Spec::KubernetesGateway(gw) = &config.spec else {
        return Vec::new();
    };
    let Some(controller) = class_controller(snapshot, &gw.gateway_class_name) else {
        return Vec::new();
    };
    // An ambient east-west gateway is deployed as a waypoint is (istiod's `waypoint` template),
    // with its own managed label and, reached from other networks, a LoadBalancer Service.
    let east_west = controller == crate::config::gateway_api::EAST_WEST_CONTROLLER;
    let waypoint = crate::config::gateway_api::waypoint_like(&controller);
    if !(controller == CONTROLLER || waypoint) || !is_managed(gw) {
        return Vec::new();
    }
    let meta = &config.metadata;
    let (name, ns) = (&meta.name, &meta.namespace);
    let deployment = managed_service_name(config, gw, &controller);
    let account = meta
        .annotations
        .get(SERVICE_ACCOUNT_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| deployment.clone());
    let infra = gw.infrastructure.as_ref();
    let mut labels: BTreeMap<String, String> = match infra.filter(|i| !i.labels.is_empty()) {
        Some(i) => i.labels.clone(),
        None => meta.labels.clone(),
    };
    let annotations: BTreeMap<String, String> = match infra.filter(|i| !i.annotations.is_empty()) {
        Some(i) => i.annotations.clone(),
        None => meta.annotations.clone(),
    }
    .into_iter()
    .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
    .collect();
    labels.insert(GATEWAY_NAME_LABEL.into(), name.clone());
    labels.insert(CLASS_LABEL.into(), gw.gateway_class_name.clone());
    let owner = json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                        "name": name, "uid": meta.uid}]);
    let mut managed_labels = labels.clone();
    managed_labels.insert(
        MANAGED_LABEL.into(),
        if east_west {
            crate::model::waypoint::EAST_WEST_CONTROLLER
        } else if waypoint {
            crate::model::waypoint::MESH_CONTROLLER
        } else {
            MANAGED_VALUE
        }
        .into(),
    );
    let mut pod_labels = managed_labels.clone();
    if waypoint {
        // A waypoint is never itself captured by ztunnel.
        pod_labels.insert("istio.io/dataplane-mode".into(), "none".into());
    }
    pod_labels.insert("service.istio.io/canonical-name".into(), deployment.clone());
    pod_labels.insert(
        "service.istio.io/canonical-revision".into(),
        "latest".into(),
    );
    if revision.is_empty() || revision == "default" {
        pod_labels.insert("sidecar.istio.io/inject".into(), "true".into());
    } else {
        pod_labels.insert("istio.io/rev".into(), revision.into());
    }
    let mut pod_annotations = annotations.clone();
    pod_annotations.insert(
        "inject.istio.io/templates".into(),
        if waypoint { "waypoint" } else { "gateway" }.into(),
    );
    pod_annotations.insert(
        "istio.io/rev".into(),
        if revision.is_empty() {
            "default"
        } else {
            revision
        }
        .into(),
    );
    pod_annotations.insert("prometheus.io/path".into(), "/stats/prometheus".into());
    pod_annotations.insert("prometheus.io/port".into(), "15020".into());
    pod_annotations.insert("prometheus.io/scrape".into(), "true".into());
    let service_type = meta
        .annotations
        .get(SERVICE_TYPE_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| {
            if waypoint && !east_west {
                "ClusterIP"
            } else {
                "LoadBalancer"
            }
            .into()
        });
    let mut service_annotations = annotations.clone();
    if waypoint && !east_west {
        // As istiod: a waypoint is reached close to its clients.
        service_annotations
            .entry("networking.istio.io/traffic-distribution".into())
            .or_insert_with(|| "PreferClose".into());
    }
    let pod_security = if waypoint {
        json!({})
    } else {
        json!({"sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]})
    };
    let mut service_spec = json!({
        "ipFamilyPolicy": "PreferDualStack",
        "ports": service_ports(gw, &crate::model::gateway_api::listener_set_listeners(snapshot, ns, name, gw)),
        "selector": {GATEWAY_NAME_LABEL: name},
        "type": service_type,
    });
    if service_type == "LoadBalancer"
        && let Some(a) = gw.addresses.first()
    {
        service_spec["loadBalancerIP"] = a.value.clone().into();
    }
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": account, "namespace": ns, "labels": managed_labels,
                            "annotations": annotations, "ownerReferences": owner}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": deployment, "namespace": ns, "labels": managed_labels,
                            "annotations": annotations, "ownerReferences": owner},
               "spec": {
                   "selector": {"matchLabels": {GATEWAY_NAME_LABEL: name}},
                   "template": {
                       "metadata": {"labels": pod_labels, "annotations": pod_annotations},
                       "spec": {
                           "serviceAccountName": account,
                           "securityContext": pod_security,
                           "containers": [{"name": "istio-proxy", "image": "auto"}]}}}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": deployment, "namespace": ns, "labels": managed_labels,
                            "annotations": service_annotations, "ownerReferences": owner},
               "spec": service_spec}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": deployment, "namespace": ns, "labels": managed_labels,
                            "annotations": annotations, "ownerReferences": owner},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                           "name": deployment}}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": deployment, "namespace": ns, "labels": managed_labels,
                            "annotations": annotations, "ownerReferences": owner},
               "spec": {"selector": {"matchLabels": {GATEWAY_NAME_LABEL: name}}}}),
    ]
}

/// The status port, then one port per listener port (named after the listener, `.` made `-`,
/// at most 63 characters), with the listener's protocol as `appProtocol`: the Gateway's
/// listeners, then those its ListenerSets add.
fn service_ports(gw: &Gateway, from_sets: &[crate::config::gateway_api::Listener]) -> Vec<Value> {
    let mut ports = vec![
        json!({"name": "status-port", "port": 15021, "protocol": "TCP", "appProtocol": "tcp"}),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (i, l) in gw.listeners.iter().chain(from_sets).enumerate() {
        if !seen.insert(l.port) {
            continue;
        }
        let mut name: String = l.name.replace('.', "-");
        name.truncate(63);
        if name.is_empty() {
            name = format!("{}-{i}", l.protocol.to_ascii_lowercase());
        }
        ports.push(json!({"name": name, "port": l.port, "protocol": "TCP",
                          "appProtocol": l.protocol.to_ascii_lowercase()}));
    }
    ports
}

fn api_resource(obj: &Value) -> Option<ApiResource> {
    let api_version = obj["apiVersion"].as_str()?;
    let kind = obj["kind"].as_str()?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "ServiceAccount" => "serviceaccounts",
        "Deployment" => "deployments",
        "Service" => "services",
        "HorizontalPodAutoscaler" => "horizontalpodautoscalers",
        "PodDisruptionBudget" => "poddisruptionbudgets",
        _ => return None,
    };
    Some(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        plural,
    ))
}

/// Applies the managed Gateways' objects while this replica leads.
pub struct GatewayDeployer {
    pub client: kube::Client,
    pub store: Arc<Store>,
    /// This control plane's revision (`istio.io/rev` on the pods).
    pub revision: String,
    /// Where the class defaults ConfigMaps live (istiod's system namespace).
    pub system_namespace: String,
}

/// How often the leader reconciles without an event: parameters live in ConfigMaps it does
/// not watch.
const RESYNC: Duration = Duration::from_secs(30);

impl GatewayDeployer {
    pub async fn run(self, mut leading: watch::Receiver<bool>, cancel: CancellationToken) {
        let mut events = self.store.subscribe();
        // What was applied, by (kind, namespace, name): applied again only when it changes.
        let mut applied: BTreeMap<(String, String, String), Value> = BTreeMap::new();
        loop {
            if *leading.borrow_and_update() {
                let snapshot = self.store.snapshot();
                self.reconcile(&snapshot, &mut applied).await;
            } else {
                applied.clear();
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(RESYNC) => {}
                changed = leading.changed() => if changed.is_err() { return },
                ev = events.recv() => {
                    let relevant = match &ev {
                        Ok(e) => matches!(e.key.kind, Kind::KubernetesGateway | Kind::GatewayClass),
                        Err(_) => true,
                    };
                    if !relevant {
                        continue;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    async fn reconcile(
        &self,
        snapshot: &Snapshot,
        applied: &mut BTreeMap<(String, String, String), Value>,
    ) {
        for e in snapshot.list_local(Kind::KubernetesGateway) {
            let Spec::KubernetesGateway(gw) = &e.config.spec else {
                continue;
            };
            // Only managed Gateways need their parameters read.
            let base = rendered(snapshot, &e.config, &self.revision);
            if base.is_empty() {
                continue;
            }
            let parameters = match self.parameters(&e.config, gw).await {
                Ok(p) => p,
                Err(why) => {
                    warn!(gateway = %e.config.key(), "not deployed: {why}");
                    continue;
                }
            };
            let objects = match overlay::apply(base, &parameters) {
                Ok(o) => o,
                Err(why) => {
                    warn!(gateway = %e.config.key(), "not deployed: {why}");
                    continue;
                }
            };
            for obj in objects {
                let key = (
                    obj["kind"].as_str().unwrap_or_default().to_string(),
                    obj["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    obj["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
                if applied.get(&key) == Some(&obj) {
                    continue;
                }
                match self.apply(&key, &obj).await {
                    Ok(true) => {
                        info!(kind = %key.0, namespace = %key.1, name = %key.2, "applied for a managed Gateway");
                        applied.insert(key, obj);
                    }
                    Ok(false) => {
                        applied.insert(key, obj);
                    }
                    Err(e) => {
                        warn!(kind = %key.0, namespace = %key.1, name = %key.2, error = %e, "cannot apply for a managed Gateway; will retry");
                    }
                }
            }
        }
    }

    /// The deployment parameters of a managed Gateway, lowest precedence first: its class's
    /// defaults (the oldest ConfigMap of the system namespace labelled for the class), then
    /// its `infrastructure.parametersRef` ConfigMap, which must exist.
    async fn parameters(
        &self,
        config: &Config,
        gw: &Gateway,
    ) -> Result<Vec<BTreeMap<String, String>>, String> {
        use k8s_openapi::api::core::v1::ConfigMap;
        let mut out = Vec::new();
        let system: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.system_namespace);
        let selector = format!("{}={}", overlay::DEFAULTS_FOR_CLASS, gw.gateway_class_name);
        let mut defaults = system
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .map_err(|e| format!("cannot list the class defaults: {e}"))?
            .items;
        defaults.sort_by(|a, b| {
            (&a.metadata.creation_timestamp, &a.metadata.name)
                .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
        });
        out.extend(defaults.into_iter().next().and_then(|c| c.data));
        if let Some(r) = gw
            .infrastructure
            .as_ref()
            .and_then(|i| i.parameters_ref.as_ref())
        {
            if !(r.group.is_empty() && r.kind == "ConfigMap") {
                return Err(format!(
                    "unknown infrastructure parameters type {}/{}",
                    r.group, r.kind
                ));
            }
            let own: Api<ConfigMap> =
                Api::namespaced(self.client.clone(), &config.metadata.namespace);
            let cm = own
                .get_opt(&r.name)
                .await
                .map_err(|e| format!("cannot read parametersRef {}: {e}", r.name))?
                .ok_or_else(|| {
                    format!(
                        "parametersRef targeting configmap {}/{}, but configmap does not exist",
                        config.metadata.namespace, r.name
                    )
                })?;
            out.push(cm.data.unwrap_or_default());
        }
        Ok(out)
    }

    /// Server-side applies `obj` unless an object of that name exists that Rudder (or istiod)
    /// does not manage; true when applied.
    async fn apply(
        &self,
        key: &(String, String, String),
        obj: &Value,
    ) -> Result<bool, kube::Error> {
        let Some(ar) = api_resource(obj) else {
            return Ok(false);
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &key.1, &ar);
        if let Some(existing) = api.get_opt(&key.2).await?
            && !existing
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(MANAGED_LABEL))
        {
            debug!(kind = %key.0, namespace = %key.1, name = %key.2, "exists and is not managed; left alone");
            return Ok(false);
        }
        let params = PatchParams::apply(MANAGER).force();
        api.patch(&key.2, &params, &Patch::Apply(obj)).await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_managed_gateway_gets_an_account_a_deployment_and_a_service() {
        let store = Store::from_yaml(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: edge
  uid: u-1
  labels: {team: web}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}', note: kept}
spec:
  gatewayClassName: istio
  addresses: [{value: 10.0.0.9}]
  allowedListeners: {namespaces: {from: Same}}
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: a.b, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: c}]}}
  - {name: other, port: 443, protocol: HTTPS, hostname: x.example, tls: {certificateRefs: [{name: c}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: more, namespace: edge}
spec:
  parentRef: {name: gw}
  listeners: [{name: admin, port: 8081, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: manual, namespace: edge}
spec:
  gatewayClassName: istio
  addresses: [{type: Hostname, value: ingress}]
  listeners: [{name: http, port: 80, protocol: HTTP}]
",
        );
        let snapshot = store.snapshot();
        let get = |name: &str| {
            snapshot
                .get_named(Kind::KubernetesGateway, "edge", name)
                .unwrap()
                .config
                .clone()
        };
        assert!(desired(&snapshot, &get("manual"), "").is_empty());
        let objs = desired(&snapshot, &get("gw"), "");
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Deployment", "Service"]);
        for o in &objs {
            assert_eq!(o["metadata"]["name"], "gw-istio");
            assert_eq!(o["metadata"]["ownerReferences"][0]["uid"], "u-1");
            assert_eq!(o["metadata"]["labels"]["team"], "web");
            assert_eq!(o["metadata"]["labels"][MANAGED_LABEL], MANAGED_VALUE);
            assert_eq!(o["metadata"]["annotations"]["note"], "kept");
            assert!(
                o["metadata"]["annotations"]
                    .get("kubectl.kubernetes.io/last-applied-configuration")
                    .is_none()
            );
        }
        let pod = &objs[1]["spec"]["template"]["metadata"];
        assert_eq!(pod["labels"][GATEWAY_NAME_LABEL], "gw");
        assert_eq!(pod["labels"]["sidecar.istio.io/inject"], "true");
        assert_eq!(pod["annotations"]["inject.istio.io/templates"], "gateway");
        let svc = &objs[2]["spec"];
        assert_eq!(svc["type"], "LoadBalancer");
        assert_eq!(svc["loadBalancerIP"], "10.0.0.9");
        let ports: Vec<(String, u64)> = svc["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["port"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ports,
            [
                ("status-port".to_string(), 15021),
                ("http".into(), 80),
                ("a-b".into(), 443),
                // A ListenerSet's listener is served by the Gateway's Service too.
                ("admin".into(), 8081)
            ]
        );
    }

    /// A Gateway of class istio-waypoint (as `istioctl waypoint apply` writes it) is deployed as
    /// istiod deploys waypoints: named after the Gateway, a ClusterIP Service with the HBONE
    /// port, pods that run the agent as a waypoint and that ztunnel never captures.
    #[test]
    fn a_waypoint_gateway_gets_a_waypoint_deployment() {
        let store = Store::from_yaml(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: waypoint
  namespace: shop
  uid: u-2
  labels: {istio.io/waypoint-for: service}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
",
        );
        let snapshot = store.snapshot();
        let config = snapshot
            .get_named(Kind::KubernetesGateway, "shop", "waypoint")
            .unwrap()
            .config
            .clone();
        let objs = desired(&snapshot, &config, "");
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Deployment", "Service"]);
        for o in &objs {
            assert_eq!(o["metadata"]["name"], "waypoint");
            assert_eq!(
                o["metadata"]["labels"][MANAGED_LABEL],
                "istio.io-mesh-controller"
            );
            assert_eq!(o["metadata"]["labels"]["istio.io/waypoint-for"], "service");
        }
        let pod = &objs[1]["spec"]["template"]["metadata"];
        assert_eq!(pod["annotations"]["inject.istio.io/templates"], "waypoint");
        assert_eq!(pod["labels"]["istio.io/dataplane-mode"], "none");
        let svc = &objs[2];
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(
            svc["metadata"]["annotations"]["networking.istio.io/traffic-distribution"],
            "PreferClose"
        );
        assert_eq!(svc["spec"]["ports"][1]["port"], 15008);
        assert_eq!(svc["spec"]["ports"][1]["appProtocol"], "hbone");
    }

    /// A Gateway of class istio-east-west is deployed as istiod deploys ambient east-west
    /// gateways once AMBIENT_ENABLE_MULTI_NETWORK has the leader create that class: a waypoint
    /// with the east-west controller's label, its network label carried to the pods, and a
    /// LoadBalancer Service that other networks reach. Without the class object it is not ours.
    #[test]
    fn an_east_west_gateway_is_deployed_where_its_class_exists() {
        let gateway = "
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: eastwest
  namespace: istio-system
  uid: u-3
  labels: {topology.istio.io/network: west}
spec:
  gatewayClassName: istio-east-west
  listeners: [{name: mesh, port: 15008, protocol: HBONE, tls: {mode: Terminate}}]
";
        let class = "
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: istio-east-west}
spec: {controllerName: istio.io/eastwest-controller}
---
";
        let objects = |yaml: &str| {
            let store = Store::from_yaml(yaml);
            let snapshot = store.snapshot();
            let config = snapshot
                .get_named(Kind::KubernetesGateway, "istio-system", "eastwest")
                .unwrap()
                .config
                .clone();
            desired(&snapshot, &config, "")
        };
        assert!(objects(gateway).is_empty(), "no class object: not ours");
        let objs = objects(&format!("{class}{gateway}"));
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Deployment", "Service"]);
        for o in &objs {
            assert_eq!(o["metadata"]["name"], "eastwest");
            assert_eq!(
                o["metadata"]["labels"][MANAGED_LABEL],
                "istio.io-eastwest-controller"
            );
        }
        let pod = &objs[1]["spec"]["template"]["metadata"];
        assert_eq!(pod["annotations"]["inject.istio.io/templates"], "waypoint");
        assert_eq!(pod["labels"]["topology.istio.io/network"], "west");
        let svc = &objs[2];
        assert_eq!(svc["spec"]["type"], "LoadBalancer");
        assert_eq!(svc["spec"]["ports"][1]["port"], 15008);
    }
}
