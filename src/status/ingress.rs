//! The status istiod writes on the Kubernetes Ingresses it serves: `status.loadBalancer.ingress`,
//! the addresses of the ingress gateway's Service (MeshConfig `ingressService`, in the root
//! namespace): its LoadBalancer's ingress, its external IPs, or an ExternalName.

use super::producer::Input;
use crate::config::{ConfigKey, Kind, Spec};
use crate::model::ingress::served;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub struct IngressStatus;

impl super::producer::FieldsProducer for IngressStatus {
    fn name(&self) -> &'static str {
        "ingress"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Ingress]
    }
    fn enabled(&self, settings: &super::producer::Settings) -> bool {
        settings.ingress_status
    }
    fn statuses(&self, input: &Input) -> BTreeMap<ConfigKey, Value> {
        // The mesh's ingress settings, as the push read them.
        let settings = &input.mesh.ingress;
        let addresses = addresses(input, &settings.service);
        input
            .snapshot
            .list(Kind::Ingress)
            .filter(|e| match &e.config.spec {
                Spec::Ingress(i) => served(input.snapshot, settings, i),
                _ => false,
            })
            .map(|e| {
                (
                    e.config.key(),
                    json!({"loadBalancer": {"ingress": addresses}}),
                )
            })
            .collect()
    }
    fn merge(&self, _kind: Kind, current: &Value, wanted: &Value, _now: &str) -> Value {
        let mut out = if current.is_object() {
            current.clone()
        } else {
            json!({})
        };
        out["loadBalancer"] = wanted["loadBalancer"].clone();
        out
    }
}

/// The ingress gateway Service's addresses, as istiod's `runningAddresses` reads them.
fn addresses(input: &Input, service: &str) -> Vec<Value> {
    let Some(e) = input
        .snapshot
        .get_named(Kind::Service, &input.mesh.root_namespace, service)
    else {
        return Vec::new();
    };
    let Spec::Service(svc) = &e.config.spec else {
        return Vec::new();
    };
    let spec = svc.spec.clone().unwrap_or_default();
    if spec.type_.as_deref() == Some("ExternalName") {
        return spec
            .external_name
            .into_iter()
            .map(|h| json!({"hostname": h}))
            .collect();
    }
    let mut out: Vec<Value> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| match (i.ip, i.hostname) {
            (Some(ip), _) if !ip.is_empty() => Some(json!({"ip": ip})),
            (_, Some(h)) => Some(json!({"hostname": h})),
            _ => None,
        })
        .collect();
    out.extend(
        spec.external_ips
            .into_iter()
            .flatten()
            .map(|ip| json!({"ip": ip})),
    );
    out
}
