//! CustomResourceDefinitions for the Istio kinds, generated from the config model: the schema the API
//! server enforces is the one Rudder parses with. `rudder crds` prints them; the Helm chart ships the
//! output (a test keeps the two equal).
//!
//! schemars describes the Rust types in JSON Schema; Kubernetes wants a *structural* OpenAPI v3 subset
//! (one type per node, no `$ref`, no `additionalProperties` next to `properties`, only the keywords
//! `JSONSchemaProps` knows). `structural` does that conversion.

use super::{Kind, extensions, networking, security, telemetry};
use serde_json::{Map, Value, json};

/// Keywords of Kubernetes' `JSONSchemaProps` kept from the generated schema.
const KEPT: &[&str] = &[
    "type",
    "format",
    "description",
    "properties",
    "additionalProperties",
    "items",
    "enum",
    "required",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
];

fn spec_schema(kind: Kind) -> Option<Value> {
    let settings = schemars::generate::SchemaSettings::openapi3();
    let generator = settings.into_generator();
    let schema = match kind {
        Kind::VirtualService => generator.into_root_schema_for::<networking::VirtualService>(),
        Kind::DestinationRule => generator.into_root_schema_for::<networking::DestinationRule>(),
        Kind::Gateway => generator.into_root_schema_for::<networking::Gateway>(),
        Kind::ServiceEntry => generator.into_root_schema_for::<networking::ServiceEntry>(),
        Kind::Sidecar => generator.into_root_schema_for::<networking::Sidecar>(),
        Kind::WorkloadEntry => generator.into_root_schema_for::<networking::WorkloadEntry>(),
        Kind::WorkloadGroup => generator.into_root_schema_for::<networking::WorkloadGroup>(),
        Kind::EnvoyFilter => generator.into_root_schema_for::<networking::EnvoyFilter>(),
        Kind::PeerAuthentication => {
            generator.into_root_schema_for::<security::PeerAuthentication>()
        }
        Kind::AuthorizationPolicy => {
            generator.into_root_schema_for::<security::AuthorizationPolicy>()
        }
        Kind::RequestAuthentication => {
            generator.into_root_schema_for::<security::RequestAuthentication>()
        }
        Kind::Telemetry => generator.into_root_schema_for::<telemetry::Telemetry>(),
        Kind::WasmPlugin => generator.into_root_schema_for::<extensions::WasmPlugin>(),
        Kind::TrafficExtension => generator.into_root_schema_for::<extensions::TrafficExtension>(),
        Kind::ProxyConfig => generator.into_root_schema_for::<networking::ProxyConfig>(),
        // The Gateway API's CRDs are its project's; Kubernetes kinds are built in.
        Kind::GatewayClass
        | Kind::KubernetesGateway
        | Kind::HTTPRoute
        | Kind::GRPCRoute
        | Kind::TCPRoute
        | Kind::TLSRoute
        | Kind::ReferenceGrant
        | Kind::BackendTLSPolicy
        | Kind::ListenerSet
        | Kind::Service
        | Kind::EndpointSlice
        | Kind::Pod
        | Kind::Namespace
        | Kind::Node
        | Kind::ConfigMap
        | Kind::Secret
        | Kind::Ingress
        | Kind::IngressClass => return None,
    };
    let root = schema.to_value();
    let mut defs = Map::new();
    for path in [
        &["components", "schemas"][..],
        &["$defs"][..],
        &["definitions"][..],
    ] {
        let mut node = &root;
        for seg in path {
            node = &node[*seg];
        }
        if let Some(m) = node.as_object() {
            defs.extend(m.clone());
        }
    }
    Some(structural(&root, &defs, &mut Vec::new()))
}

/// Converts a JSON Schema node into Kubernetes' structural schema subset.
///
/// `$ref`s are inlined; a type that contains itself is spelled out once and below that accepted as
/// is (`x-kubernetes-preserve-unknown-fields`), left to Rudder's own validation.
pub fn structural(node: &Value, defs: &Map<String, Value>, resolving: &mut Vec<String>) -> Value {
    let preserve = || json!({"x-kubernetes-preserve-unknown-fields": true});
    let Some(obj) = node.as_object() else {
        // `true` (anything goes), e.g. a free-form `serde_json::Value`.
        return preserve();
    };
    if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        if resolving.iter().any(|r| r == name) {
            return preserve();
        }
        let mut resolved = match defs.get(name) {
            Some(def) => {
                resolving.push(name.to_string());
                let out = structural(def, defs, resolving);
                resolving.pop();
                out
            }
            None => preserve(),
        };
        if let (Some(desc), Some(out)) = (obj.get("description"), resolved.as_object_mut()) {
            out.insert("description".into(), desc.clone());
        }
        return resolved;
    }
    let mut out = Map::new();
    for (k, v) in obj {
        if KEPT.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    if let Some(c) = obj.get("const") {
        out.insert("enum".into(), json!([c]));
    }
    // One type per node: `["string", "null"]` is a nullable string.
    if let Some(Value::Array(types)) = obj.get("type") {
        let real: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if real.len() < types.len() {
            out.insert("nullable".into(), true.into());
        }
        match real.as_slice() {
            [one] => {
                out.insert("type".into(), (*one).clone());
            }
            _ => return preserve(),
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        let Some(Value::Array(members)) = obj.get(key) else {
            continue;
        };
        let is_null = |m: &Value| {
            m["type"] == "null"
                || m.get("const") == Some(&Value::Null)
                || m["enum"]
                    .as_array()
                    .is_some_and(|e| e.iter().all(Value::is_null))
        };
        let real: Vec<Value> = members
            .iter()
            .filter(|m| !is_null(m))
            .map(|m| structural(m, defs, resolving))
            .collect();
        if real.len() < members.len() {
            out.insert("nullable".into(), true.into());
        }
        let enums: Option<Vec<Value>> = real
            .iter()
            .map(|m| m["enum"].as_array().cloned())
            .collect::<Option<Vec<_>>>()
            .map(|v| v.into_iter().flatten().collect());
        if let [one] = real.as_slice() {
            if let Some(m) = one.as_object() {
                for (k, v) in m {
                    out.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        } else if let Some(values) = enums.filter(|v| !v.is_empty()) {
            out.insert("enum".into(), Value::Array(values));
            if let Some(t) = real.first().and_then(|m| m.get("type")) {
                out.insert("type".into(), t.clone());
            }
        } else if !real.is_empty() && real.iter().all(|m| m.get("properties").is_some()) {
            // A protobuf oneof (an enum of single-field objects): one object with every field, as
            // Istio's own CRDs describe oneofs; "exactly one" is Rudder's validation's job.
            let mut props = Map::new();
            for m in &real {
                if let Some(p) = m["properties"].as_object() {
                    for (k, v) in p {
                        props.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
            out.insert("type".into(), "object".into());
            out.insert("properties".into(), Value::Object(props));
        } else {
            // A union of shapes Kubernetes cannot express structurally: accept it and let
            // Rudder's validation (the webhook) judge.
            out.remove("type");
            out.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
        }
    }
    if let Some(Value::Array(values)) = out.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    match out.get("format").and_then(Value::as_str) {
        Some("int32" | "int64") => {}
        _ => {
            out.remove("format");
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let converted: Map<String, Value> = props
            .iter()
            .map(|(k, v)| (k.clone(), structural(v, defs, resolving)))
            .collect();
        out.insert("properties".into(), Value::Object(converted));
        out.insert("type".into(), "object".into());
        // Unknown fields are pruned by the API server and refused by our validation.
        out.remove("additionalProperties");
    } else if let Some(extra) = obj.get("additionalProperties") {
        if extra.is_object() || extra == &Value::Bool(true) {
            out.insert(
                "additionalProperties".into(),
                structural(extra, defs, resolving),
            );
        } else {
            out.remove("additionalProperties");
        }
    }
    if let Some(items) = obj.get("items") {
        out.insert("items".into(), structural(items, defs, resolving));
    }
    if let Some(Value::Array(req)) = out.get("required")
        && req.is_empty()
    {
        out.remove("required");
    }
    if !out.contains_key("type") && !out.contains_key("x-kubernetes-preserve-unknown-fields") {
        out.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    }
    Value::Object(out)
}

/// The CRD for one Istio kind: every version Rudder serves, the oldest one stored (as Istio's own
/// CRDs, so objects already in etcd keep their storage version on a switch from istiod).
pub fn crd(kind: Kind) -> Option<Value> {
    let spec = spec_schema(kind)?;
    let versions = kind.served_versions();
    let storage = versions.last().copied().unwrap_or("v1");
    let group = kind.group();
    let plural = kind.plural();
    let category = group.replace('.', "-");
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            json!({
                "name": v,
                "served": true,
                "storage": *v == storage,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": spec,
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            })
        })
        .collect();
    Some(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.{group}"),
            "labels": {"app.kubernetes.io/part-of": "rudder", "istio": kind.name().to_lowercase()},
        },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind.name(),
                "listKind": format!("{}List", kind.name()),
                "plural": plural,
                "singular": kind.name().to_lowercase(),
                "shortNames": kind.info().short_names,
                "categories": ["istio-io", category],
            },
            "versions": versions,
        },
    }))
}

/// Every Istio CRD as one multi-document YAML text.
pub fn all_yaml() -> String {
    let mut out = String::from(
        "# Generated by `rudder crds` from Rudder's config model. Do not edit: regenerate.\n",
    );
    for kind in Kind::ISTIO {
        if let Some(crd) = crd(kind) {
            out.push_str("---\n");
            match serde_saphyr::to_string(&crd) {
                Ok(text) => out.push_str(&text),
                Err(e) => out.push_str(&format!("# {kind}: could not render: {e}\n")),
            }
        }
    }
    out
}
