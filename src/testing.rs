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
pub fn store(yaml: &str) -> StoreWriter {
    StoreWriter::from_yaml(yaml)
}

/// The push context (version 1) of the objects of `yaml` under `mesh`.
pub fn push_context_with(yaml: &str, mesh: MeshSettings) -> PushContext {
    let snapshot = store(yaml).snapshot();
    let registry = Arc::new(Registry::build(&snapshot, &mesh.domain_suffix));
    PushContext::new(1, snapshot, registry, mesh)
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
