//! Fixtures for tests and benchmarks (feature `testing`, and every unit test): a store or a push
//! context from Istio YAML, and proxies as their xDS nodes describe them. One copy, so tests build
//! their inputs the way the daemon does.

use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::store::StoreWriter;
use crate::xds::context::PushContext;
use crate::xds::proxy::Proxy;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use std::sync::Arc;

/// A store holding every object of `yaml`, which must be valid; the writer, to change it further.
/// Istio kinds are read as files mode reads them; Kubernetes' own (Service, EndpointSlice, Pod,
/// Namespace, Node, Secret) as the Kubernetes source stores them.
pub fn store(yaml: &str) -> StoreWriter {
    let mut istio = String::new();
    let mut kubernetes = Vec::new();
    for doc in yaml.split("\n---") {
        let value: serde_json::Value = match serde_saphyr::from_str(doc) {
            Ok(v) => v,
            Err(_) => serde_json::Value::Null,
        };
        match kubernetes_object(&value) {
            Some(config) => kubernetes.push(config),
            None => {
                istio.push_str("\n---\n");
                istio.push_str(doc);
            }
        }
    }
    let writer = StoreWriter::from_yaml(&istio);
    for config in kubernetes {
        writer.upsert(config);
    }
    writer
}

/// A Kubernetes object of a kind the Kubernetes source watches, converted as it converts them.
fn kubernetes_object(doc: &serde_json::Value) -> Option<crate::config::Config> {
    use crate::source::kube::convert::IntoConfig;
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret, Service};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    fn typed<T: serde::de::DeserializeOwned + IntoConfig>(
        doc: &serde_json::Value,
    ) -> Option<crate::config::Config> {
        let object: T = serde_json::from_value(doc.clone())
            .unwrap_or_else(|e| panic!("not a valid Kubernetes object: {e}: {doc}"));
        Some(object.into_config())
    }
    let api_version = doc.get("apiVersion")?.as_str()?;
    match (api_version, doc.get("kind")?.as_str()?) {
        ("v1", "Service") => typed::<Service>(doc),
        ("v1", "Pod") => typed::<Pod>(doc),
        ("v1", "Namespace") => typed::<Namespace>(doc),
        ("v1", "Node") => typed::<Node>(doc),
        ("v1", "Secret") => typed::<Secret>(doc),
        ("discovery.k8s.io/v1", "EndpointSlice") => typed::<EndpointSlice>(doc),
        ("networking.k8s.io/v1", "Ingress") => {
            typed::<k8s_openapi::api::networking::v1::Ingress>(doc)
        }
        ("networking.k8s.io/v1", "IngressClass") => {
            typed::<k8s_openapi::api::networking::v1::IngressClass>(doc)
        }
        _ => None,
    }
}

/// The push context (version 1) of the objects of `yaml` under `mesh`.
pub fn push_context_with(yaml: &str, mesh: MeshSettings) -> PushContext {
    let snapshot = store(yaml).snapshot();
    let registry = Arc::new(Registry::build(&snapshot, &mesh.domain_suffix));
    PushContext::new(1, snapshot, registry, mesh)
}

/// The push context (version 1) of the objects of `yaml` under the mesh config they hold (the
/// `istio` ConfigMap of the root namespace, if any), as the daemon would read it.
pub fn push_context_with_mesh_config(yaml: &str) -> PushContext {
    let (mesh, _) = MeshSettings::default().with_mesh_config(&store(yaml).snapshot());
    push_context_with(yaml, mesh)
}

/// The push context (version 1) of the objects of `yaml` under the default mesh settings.
pub fn push_context(yaml: &str) -> PushContext {
    push_context_with(yaml, MeshSettings::default())
}

/// A string-valued metadata field, or a struct of them (`LABELS`).
fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_string())),
    }
}

/// The proxy an xDS node with `id` (`sidecar~IP~POD.NS~NS.svc.cluster.local`, `router~…`) and
/// string `metadata` describes; `labels` become its `LABELS`.
pub fn proxy(id: &str, metadata: &[(&str, &str)], labels: &[(&str, &str)]) -> Proxy {
    let mut fields: std::collections::BTreeMap<String, Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), string(v)))
        .collect();
    if !labels.is_empty() {
        let labels = Struct {
            fields: labels
                .iter()
                .map(|(k, v)| (k.to_string(), string(v)))
                .collect(),
        };
        fields.insert(
            "LABELS".into(),
            Value {
                kind: Some(Kind::StructValue(labels)),
            },
        );
    }
    let node = Node {
        id: id.into(),
        user_agent_name: "envoy".into(),
        metadata: (!fields.is_empty()).then(|| Struct {
            fields: fields.into_iter().collect(),
        }),
        ..Default::default()
    };
    Proxy::from_node(Some(&node)).expect("a valid node id")
}

/// A sidecar at 10.0.0.9 in namespace `ns` with string `metadata`.
pub fn sidecar(ns: &str, metadata: &[(&str, &str)]) -> Proxy {
    proxy(
        &format!("sidecar~10.0.0.9~p.{ns}~{ns}.svc.cluster.local"),
        metadata,
        &[],
    )
}
