//! Kubernetes objects into store objects. Server-side bookkeeping (managedFields) is dropped, and Pods
//! keep only what the mesh reads, so 10,000 pods stay cheap.

use crate::config::{Config, Kind, ObjectMeta, Spec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;

pub fn meta(m: &K8sMeta) -> ObjectMeta {
    ObjectMeta {
        name: m.name.clone().unwrap_or_default(),
        namespace: m.namespace.clone().unwrap_or_default(),
        labels: m.labels.clone().unwrap_or_default(),
        annotations: m.annotations.clone().unwrap_or_default(),
        resource_version: m.resource_version.clone().unwrap_or_default(),
        generation: m.generation,
        uid: m.uid.clone().unwrap_or_default(),
        creation_timestamp: m.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        cluster: String::new(),
    }
}

fn config(kind: Kind, api_version: &str, m: &K8sMeta, spec: Spec) -> Config {
    Config {
        api_version: api_version.into(),
        kind,
        metadata: meta(m),
        spec,
        status: None,
    }
}

/// A watched Kubernetes object that becomes a store object.
pub trait IntoConfig {
    fn into_config(self) -> Config;
}

fn slim_meta(m: &mut K8sMeta) {
    m.managed_fields = None;
}

impl IntoConfig for k8s_openapi::api::core::v1::Service {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        // Status conditions (ambient's, written by the leader) and the resourceVersion a write
        // bumps are not config: a status write leaves the store unchanged and pushes nothing.
        // A LoadBalancer's addresses are kept: Gateway and Ingress status report them.
        self.status = self
            .status
            .take()
            .and_then(|s| s.load_balancer)
            .filter(|lb| lb.ingress.as_ref().is_some_and(|i| !i.is_empty()))
            .map(|lb| k8s_openapi::api::core::v1::ServiceStatus {
                load_balancer: Some(lb),
                conditions: None,
            });
        self.metadata.resource_version = None;
        let m = self.metadata.clone();
        config(Kind::Service, "v1", &m, Spec::Service(Box::new(self)))
    }
}

impl IntoConfig for k8s_openapi::api::discovery::v1::EndpointSlice {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        let m = self.metadata.clone();
        config(
            Kind::EndpointSlice,
            "discovery.k8s.io/v1",
            &m,
            Spec::EndpointSlice(Box::new(self)),
        )
    }
}

impl IntoConfig for k8s_openapi::api::core::v1::Pod {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        // The mesh needs labels, service account, node, IPs and readiness; not container specs.
        if let Some(spec) = self.spec.as_mut() {
            spec.containers.iter_mut().for_each(|c| {
                c.env = None;
                c.volume_mounts = None;
                c.command = None;
                c.args = None;
            });
            spec.volumes = None;
        }
        if let Some(status) = self.status.as_mut() {
            status.container_statuses = None;
            status.init_container_statuses = None;
        }
        let m = self.metadata.clone();
        config(Kind::Pod, "v1", &m, Spec::Pod(Box::new(self)))
    }
}

impl IntoConfig for k8s_openapi::api::core::v1::Namespace {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        let m = self.metadata.clone();
        config(Kind::Namespace, "v1", &m, Spec::Namespace(Box::new(self)))
    }
}

impl IntoConfig for k8s_openapi::api::core::v1::Node {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        // Locality comes from labels; node status (images, conditions) is large and unused.
        self.status = None;
        let m = self.metadata.clone();
        config(Kind::Node, "v1", &m, Spec::Node(Box::new(self)))
    }
}

impl IntoConfig for k8s_openapi::api::core::v1::ConfigMap {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        let m = self.metadata.clone();
        config(Kind::ConfigMap, "v1", &m, Spec::ConfigMap(Box::new(self)))
    }
}

impl IntoConfig for k8s_openapi::api::core::v1::Secret {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        self.metadata.annotations = None;
        let m = self.metadata.clone();
        config(Kind::Secret, "v1", &m, Spec::Secret(Box::new(self)))
    }
}

impl IntoConfig for k8s_openapi::api::networking::v1::Ingress {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        // Status is what the leader writes (the ingress addresses), not config.
        self.status = None;
        self.metadata.resource_version = None;
        let m = self.metadata.clone();
        config(
            Kind::Ingress,
            "networking.k8s.io/v1",
            &m,
            Spec::Ingress(Box::new(self)),
        )
    }
}

impl IntoConfig for k8s_openapi::api::networking::v1::IngressClass {
    fn into_config(mut self) -> Config {
        slim_meta(&mut self.metadata);
        let m = self.metadata.clone();
        config(
            Kind::IngressClass,
            "networking.k8s.io/v1",
            &m,
            Spec::IngressClass(Box::new(self)),
        )
    }
}
