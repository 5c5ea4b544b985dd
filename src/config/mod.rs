//! Istio's config API as Rust types, and the parser that turns YAML documents into them.
//!
//! Documents are parsed to a generic JSON value first so that one document can be dispatched on its
//! `apiVersion`/`kind`, then into the typed spec with `serde_path_to_error` so every error names the
//! field path, as Istio's own messages do.

pub mod common;
pub mod crd;
pub mod extensions;
pub mod gateway_api;
pub mod host;
pub mod internal_annotations;
mod kind;
pub mod mesh;
pub mod networking;
pub mod security;
pub mod telemetry;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub use kind::{Family, Kind, KindInfo, Scope};

/// The Kubernetes object metadata Rudder keeps. Other metadata fields (managedFields, ownerReferences...)
/// are accepted and dropped: they do not change what the mesh does.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// The Kubernetes cluster the object was read from: empty for the config cluster (and files),
    /// else the ID a remote secret names it by. Not part of any API object's YAML.
    #[serde(skip)]
    pub cluster: String,
}

/// The typed spec of one config object. Variants are unboxed: every `Config` lives behind one `Arc` in
/// the store, so the size difference costs at most a few hundred bytes per object.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Spec {
    VirtualService(networking::VirtualService),
    DestinationRule(networking::DestinationRule),
    Gateway(networking::Gateway),
    ServiceEntry(networking::ServiceEntry),
    Sidecar(networking::Sidecar),
    WorkloadEntry(networking::WorkloadEntry),
    WorkloadGroup(networking::WorkloadGroup),
    EnvoyFilter(networking::EnvoyFilter),
    PeerAuthentication(security::PeerAuthentication),
    AuthorizationPolicy(security::AuthorizationPolicy),
    RequestAuthentication(security::RequestAuthentication),
    Telemetry(telemetry::Telemetry),
    WasmPlugin(extensions::WasmPlugin),
    TrafficExtension(extensions::TrafficExtension),
    ProxyConfig(networking::ProxyConfig),
    GatewayClass(gateway_api::GatewayClass),
    KubernetesGateway(gateway_api::Gateway),
    HTTPRoute(gateway_api::HttpRoute),
    GRPCRoute(gateway_api::GrpcRoute),
    TCPRoute(gateway_api::TcpRoute),
    TLSRoute(gateway_api::TlsRoute),
    ReferenceGrant(gateway_api::ReferenceGrant),
    BackendTLSPolicy(gateway_api::BackendTlsPolicy),
    ListenerSet(gateway_api::ListenerSet),
    Service(Box<k8s_openapi::api::core::v1::Service>),
    EndpointSlice(Box<k8s_openapi::api::discovery::v1::EndpointSlice>),
    Pod(Box<k8s_openapi::api::core::v1::Pod>),
    Namespace(Box<k8s_openapi::api::core::v1::Namespace>),
    Secret(Box<k8s_openapi::api::core::v1::Secret>),
    Node(Box<k8s_openapi::api::core::v1::Node>),
    ConfigMap(Box<k8s_openapi::api::core::v1::ConfigMap>),
    Ingress(Box<k8s_openapi::api::networking::v1::Ingress>),
    IngressClass(Box<k8s_openapi::api::networking::v1::IngressClass>),
}

impl Spec {
    /// Whether this is a WasmPlugin or TrafficExtension whose module is pulled with a registry
    /// credential (`imagePullSecret`): a Secret change may then change what the proxies fetch.
    pub fn names_pull_secret(&self) -> bool {
        match self {
            Spec::WasmPlugin(w) => !w.image_pull_secret.is_empty(),
            Spec::TrafficExtension(t) => t
                .wasm
                .as_ref()
                .is_some_and(|w| !w.image_pull_secret.is_empty()),
            _ => false,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Spec::VirtualService(_) => Kind::VirtualService,
            Spec::DestinationRule(_) => Kind::DestinationRule,
            Spec::Gateway(_) => Kind::Gateway,
            Spec::ServiceEntry(_) => Kind::ServiceEntry,
            Spec::Sidecar(_) => Kind::Sidecar,
            Spec::WorkloadEntry(_) => Kind::WorkloadEntry,
            Spec::WorkloadGroup(_) => Kind::WorkloadGroup,
            Spec::EnvoyFilter(_) => Kind::EnvoyFilter,
            Spec::PeerAuthentication(_) => Kind::PeerAuthentication,
            Spec::AuthorizationPolicy(_) => Kind::AuthorizationPolicy,
            Spec::RequestAuthentication(_) => Kind::RequestAuthentication,
            Spec::Telemetry(_) => Kind::Telemetry,
            Spec::WasmPlugin(_) => Kind::WasmPlugin,
            Spec::TrafficExtension(_) => Kind::TrafficExtension,
            Spec::ProxyConfig(_) => Kind::ProxyConfig,
            Spec::GatewayClass(_) => Kind::GatewayClass,
            Spec::KubernetesGateway(_) => Kind::KubernetesGateway,
            Spec::HTTPRoute(_) => Kind::HTTPRoute,
            Spec::GRPCRoute(_) => Kind::GRPCRoute,
            Spec::TCPRoute(_) => Kind::TCPRoute,
            Spec::TLSRoute(_) => Kind::TLSRoute,
            Spec::ReferenceGrant(_) => Kind::ReferenceGrant,
            Spec::BackendTLSPolicy(_) => Kind::BackendTLSPolicy,
            Spec::ListenerSet(_) => Kind::ListenerSet,
            Spec::Service(_) => Kind::Service,
            Spec::EndpointSlice(_) => Kind::EndpointSlice,
            Spec::Pod(_) => Kind::Pod,
            Spec::Namespace(_) => Kind::Namespace,
            Spec::Node(_) => Kind::Node,
            Spec::ConfigMap(_) => Kind::ConfigMap,
            Spec::Secret(_) => Kind::Secret,
            Spec::Ingress(_) => Kind::Ingress,
            Spec::IngressClass(_) => Kind::IngressClass,
        }
    }

    /// Deserializes `value` as the spec of `kind`, naming the failing field path on error.
    fn from_value(kind: Kind, value: serde_json::Value) -> Result<Spec, (String, String)> {
        fn typed<T: serde::de::DeserializeOwned>(
            value: serde_json::Value,
        ) -> Result<T, (String, String)> {
            serde_path_to_error::deserialize(value).map_err(|e| {
                let path = e.path().to_string();
                let field = if path == "." {
                    "spec".to_string()
                } else {
                    format!("spec.{path}")
                };
                (field, e.into_inner().to_string())
            })
        }
        Ok(match kind {
            Kind::VirtualService => Spec::VirtualService(typed(value)?),
            Kind::DestinationRule => Spec::DestinationRule(typed(value)?),
            Kind::Gateway => Spec::Gateway(typed(value)?),
            Kind::ServiceEntry => Spec::ServiceEntry(typed(value)?),
            Kind::Sidecar => Spec::Sidecar(typed(value)?),
            Kind::WorkloadEntry => Spec::WorkloadEntry(typed(value)?),
            Kind::WorkloadGroup => Spec::WorkloadGroup(typed(value)?),
            Kind::EnvoyFilter => Spec::EnvoyFilter(typed(value)?),
            Kind::PeerAuthentication => Spec::PeerAuthentication(typed(value)?),
            Kind::AuthorizationPolicy => Spec::AuthorizationPolicy(typed(value)?),
            Kind::RequestAuthentication => Spec::RequestAuthentication(typed(value)?),
            Kind::Telemetry => Spec::Telemetry(typed(value)?),
            Kind::WasmPlugin => Spec::WasmPlugin(typed(value)?),
            Kind::TrafficExtension => Spec::TrafficExtension(typed(value)?),
            Kind::ProxyConfig => Spec::ProxyConfig(typed(value)?),
            Kind::GatewayClass => Spec::GatewayClass(typed(value)?),
            Kind::KubernetesGateway => Spec::KubernetesGateway(typed(value)?),
            Kind::HTTPRoute => Spec::HTTPRoute(typed(value)?),
            Kind::GRPCRoute => Spec::GRPCRoute(typed(value)?),
            Kind::TCPRoute => Spec::TCPRoute(typed(value)?),
            Kind::TLSRoute => Spec::TLSRoute(typed(value)?),
            Kind::ReferenceGrant => Spec::ReferenceGrant(typed(value)?),
            Kind::BackendTLSPolicy => Spec::BackendTLSPolicy(typed(value)?),
            Kind::ListenerSet => Spec::ListenerSet(typed(value)?),
            k => {
                return Err((
                    "kind".into(),
                    format!("{k} objects are not read from config documents"),
                ));
            }
        })
    }
}

/// One Istio config object: what `kubectl get -o yaml` shows, typed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub api_version: String,
    pub kind: Kind,
    pub metadata: ObjectMeta,
    pub spec: Spec,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

impl Config {
    /// `status.addresses`, the one part of a status kept as config (a ServiceEntry's allocated
    /// VIPs, a remote east-west gateway's reach).
    pub fn status_addresses(&self) -> &[serde_json::Value] {
        self.status
            .as_ref()
            .and_then(|s| s.get("addresses"))
            .and_then(|a| a.as_array())
            .map_or(&[], Vec::as_slice)
    }

    /// How istiod orders objects that compete for the same thing (a host, a gateway port): the
    /// oldest first (creationTimestamp), then namespace and name.
    pub fn age_key(&self) -> (Option<&str>, &str, &str) {
        (
            self.metadata.creation_timestamp.as_deref(),
            self.metadata.namespace.as_str(),
            self.metadata.name.as_str(),
        )
    }

    pub fn key(&self) -> ConfigKey {
        ConfigKey {
            kind: self.kind,
            namespace: self.metadata.namespace.clone(),
            name: self.metadata.name.clone(),
            cluster: self.metadata.cluster.clone(),
        }
    }

    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            kind: self.kind.name().to_string(),
            namespace: self.metadata.namespace.clone(),
            name: self.metadata.name.clone(),
        }
    }
}

/// Identifies one object in the store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConfigKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// Empty for the config cluster; a remote cluster's ID for what its watchers read
    /// (`ObjectMeta::cluster`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
}

impl ConfigKey {
    /// The key of an object of the config cluster (or of files).
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> ConfigKey {
        ConfigKey {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            cluster: String::new(),
        }
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)?;
        if !self.cluster.is_empty() {
            write!(f, " (cluster {})", self.cluster)?;
        }
        Ok(())
    }
}

/// Names an object in an error message, even one whose kind Rudder does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Why a document is not a valid Istio config object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not YAML at all; nothing in it can be trusted.
    #[error("invalid YAML: {0}")]
    Syntax(String),
    /// The document cannot be identified as an object (no kind, no name, not a mapping...).
    #[error("document {document}: {message}")]
    Document { document: usize, message: String },
    /// The object is identified, but a field is wrong.
    #[error("{object}: {field}: {message}")]
    Invalid {
        object: ObjectRef,
        field: String,
        message: String,
    },
}

/// A document that parsed but is not one of Istio's kinds (a Deployment, a Service...). Not an error:
/// config directories and `rudder validate` inputs routinely mix them in, and istioctl skips them too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub document: usize,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// Everything one YAML text holds.
#[derive(Debug, Default)]
pub struct Parsed {
    pub configs: Vec<Config>,
    pub skipped: Vec<Skipped>,
    pub errors: Vec<ConfigError>,
    /// YAML documents in the text (empty ones included): where the next text's numbering starts
    /// when one file is parsed in parts.
    pub documents: usize,
}

/// Parses every document of a (multi-document) YAML text. Objects without a namespace get
/// `default_namespace`. `kind: List` documents are flattened, as kubectl does.
pub fn parse_yaml(text: &str, default_namespace: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let documents = match yaml_documents(text) {
        Ok(docs) => docs,
        Err(e) => {
            parsed.errors.push(ConfigError::Syntax(e));
            return parsed;
        }
    };
    parsed.documents = documents.len();
    for (index, doc) in documents.into_iter().enumerate() {
        let document = index + 1;
        if is_list(&doc) {
            let items = match doc.get("items") {
                Some(serde_json::Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            };
            for item in items {
                parse_object(item, document, default_namespace, &mut parsed);
            }
        } else {
            parse_object(doc, document, default_namespace, &mut parsed);
        }
    }
    parsed
}

/// The documents of a YAML text as JSON values, read as kubectl reads them.
pub fn yaml_documents(text: &str) -> Result<Vec<serde_json::Value>, String> {
    let mut docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple_with_options(text, yaml_options())
            .map_err(|e| e.to_string())?;
    docs.iter_mut().for_each(flow_sequence_scalars);
    Ok(docs)
}

/// In a flow sequence YAML 1.2 reads `[1.2.3.4, 2001:db8::]` as a string and a one-entry mapping
/// (`2001:db8:` with no value: the last `:` before `]` is a mapping indicator). kubectl and
/// istioctl (go-yaml) read two strings, and no Istio field holds such a mapping in a list, so the
/// entry is turned back into the scalar it was written as.
fn flow_sequence_scalars(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Array(items) => {
            for item in items.iter_mut() {
                let scalar = match &*item {
                    serde_json::Value::Object(m) if m.len() == 1 => m
                        .iter()
                        .next()
                        .filter(|(k, v)| v.is_null() && k.contains(':'))
                        .map(|(k, _)| format!("{k}:")),
                    _ => None,
                };
                match scalar {
                    Some(s) => *item = serde_json::Value::String(s),
                    None => flow_sequence_scalars(item),
                }
            }
        }
        serde_json::Value::Object(m) => m.values_mut().for_each(flow_sequence_scalars),
        _ => {}
    }
}

/// serde-saphyr's defaults cap a stream at 1,024 documents and 250,000 nodes: fine for one manifest,
/// too small for a generated config directory with thousands of objects. These caps still bound work
/// per file; the anchor/alias limits that stop "billion laughs" expansion stay at their defaults.
fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 200_000;
    budget.max_nodes = 20_000_000;
    budget.max_events = 60_000_000;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

fn is_list(doc: &serde_json::Value) -> bool {
    doc.get("kind").and_then(|k| k.as_str()) == Some("List")
        && doc.get("apiVersion").and_then(|k| k.as_str()) == Some("v1")
}

fn parse_object(
    doc: serde_json::Value,
    document: usize,
    default_namespace: &str,
    parsed: &mut Parsed,
) {
    match Config::from_document(doc, document, default_namespace) {
        Ok(Some(config)) => parsed.configs.push(config),
        Ok(None) => {}
        Err(DocumentOutcome::Skipped(s)) => parsed.skipped.push(s),
        Err(DocumentOutcome::Error(e)) => parsed.errors.push(e),
    }
}

enum DocumentOutcome {
    Skipped(Skipped),
    Error(ConfigError),
}

impl Config {
    /// `Ok(None)` for an empty document.
    fn from_document(
        doc: serde_json::Value,
        document: usize,
        default_namespace: &str,
    ) -> Result<Option<Config>, DocumentOutcome> {
        let doc_error =
            |message: String| DocumentOutcome::Error(ConfigError::Document { document, message });
        let mut obj = match doc {
            serde_json::Value::Null => return Ok(None),
            serde_json::Value::Object(obj) => obj,
            other => {
                return Err(doc_error(format!(
                    "expected a Kubernetes object (a mapping), found {}",
                    json_type_name(&other)
                )));
            }
        };
        let api_version = match obj.get("apiVersion") {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(doc_error("apiVersion is required".into())),
        };
        let kind_name = match obj.get("kind") {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(doc_error("kind is required".into())),
        };
        let metadata: ObjectMeta = match obj.remove("metadata") {
            None => ObjectMeta::default(),
            Some(value) => {
                serde_json::from_value(value).map_err(|e| doc_error(format!("metadata: {e}")))?
            }
        };
        let (group, version) = api_version
            .split_once('/')
            .unwrap_or(("", api_version.as_str()));
        if api_version == "v1" && kind_name == "ConfigMap" && metadata.name == mesh::MESH_CONFIGMAP
        {
            return mesh_config_map(obj, metadata, default_namespace).map(Some);
        }
        // A CA bundle (key `ca.crt`) a BackendTLSPolicy may name: kept with that key alone.
        if api_version == "v1"
            && kind_name == "ConfigMap"
            && obj
                .get("data")
                .is_some_and(|d| d.get(crate::config::CA_BUNDLE_KEY).is_some())
        {
            let mut config = mesh_config_map(obj, metadata, default_namespace)?;
            if let Spec::ConfigMap(cm) = &mut config.spec
                && let Some(data) = cm.data.as_mut()
            {
                data.retain(|k, _| k == CA_BUNDLE_KEY);
            }
            return Ok(Some(config));
        }
        let Some(kind) = Kind::from_group_kind(group, &kind_name) else {
            if group.ends_with(".istio.io") {
                return Err(doc_error(format!(
                    "unknown Istio kind {kind_name:?} in {api_version}"
                )));
            }
            return Err(DocumentOutcome::Skipped(Skipped {
                document,
                api_version,
                kind: kind_name,
                namespace: if metadata.namespace.is_empty() {
                    default_namespace.to_string()
                } else {
                    metadata.namespace
                },
                name: metadata.name,
            }));
        };
        let mut meta = metadata;
        if kind.cluster_scoped() {
            meta.namespace.clear();
        } else if meta.namespace.is_empty() {
            meta.namespace = default_namespace.to_string();
        }
        let object = ObjectRef {
            kind: kind_name,
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
        };
        let invalid = |field: &str, message: String| invalid_field(&object, field, message);
        if !kind.served_versions().contains(&version) {
            return Err(invalid(
                "apiVersion",
                format!(
                    "{api_version} is not served for {kind}; use one of {}",
                    kind.served_versions()
                        .iter()
                        .map(|v| format!("{group}/{v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if meta.name.is_empty() {
            return Err(invalid("metadata.name", "name is required".into()));
        }
        for key in obj.keys() {
            if !matches!(key.as_str(), "apiVersion" | "kind" | "spec" | "status") {
                return Err(invalid(key, format!("unknown field {key:?}")));
            }
        }
        let spec_value = match obj.remove("spec") {
            None | Some(serde_json::Value::Null) => serde_json::Value::Object(Default::default()),
            Some(v) => v,
        };
        let spec = Spec::from_value(kind, spec_value)
            .map_err(|(field, message)| invalid(&field, message))?;
        Ok(Some(Config {
            api_version,
            kind,
            metadata: meta,
            spec,
            status: obj.remove("status"),
        }))
    }
}

fn invalid_field(object: &ObjectRef, field: &str, message: String) -> DocumentOutcome {
    DocumentOutcome::Error(ConfigError::Invalid {
        object: object.clone(),
        field: field.to_string(),
        message,
    })
}

/// The key of a ConfigMap holding a CA bundle (what BackendTLSPolicy's `caCertificateRefs` name).
pub const CA_BUNDLE_KEY: &str = "ca.crt";

/// The mesh ConfigMap (`istio`, key `mesh`) given as a file: what istiod reads from its
/// `--meshConfig` file, so mesh-wide settings work without a cluster. Its MeshConfig is checked
/// here; settings take effect when it is in the root namespace.
fn mesh_config_map(
    mut obj: serde_json::Map<String, serde_json::Value>,
    mut meta: ObjectMeta,
    default_namespace: &str,
) -> Result<Config, DocumentOutcome> {
    if meta.namespace.is_empty() {
        meta.namespace = default_namespace.to_string();
    }
    let object = ObjectRef {
        kind: "ConfigMap".into(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    };
    let invalid = |field: &str, message: String| invalid_field(&object, field, message);
    for key in obj.keys() {
        if !matches!(key.as_str(), "apiVersion" | "kind" | "data") {
            return Err(invalid(key, format!("unknown field {key:?}")));
        }
    }
    let data: BTreeMap<String, String> = match obj.remove("data") {
        None | Some(serde_json::Value::Null) => BTreeMap::new(),
        Some(v) => serde_json::from_value(v).map_err(|e| invalid("data", e.to_string()))?,
    };
    if let Some(text) = data.get(mesh::MESH_KEY) {
        mesh::MeshConfig::parse(text).map_err(|e| invalid("data.mesh", e))?;
    }
    let config_map = k8s_openapi::api::core::v1::ConfigMap {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(meta.name.clone()),
            namespace: Some(meta.namespace.clone()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    Ok(Config {
        api_version: "v1".into(),
        kind: Kind::ConfigMap,
        metadata: meta,
        spec: Spec::ConfigMap(Box::new(config_map)),
        status: None,
    })
}

impl Config {
    /// Parses one Istio object as the API server returns it (JSON), with the same rules as YAML.
    pub fn from_json(
        value: serde_json::Value,
        default_namespace: &str,
    ) -> Result<Option<Config>, ConfigError> {
        match Config::from_document(value, 1, default_namespace) {
            Ok(c) => Ok(c),
            Err(DocumentOutcome::Error(e)) => Err(e),
            Err(DocumentOutcome::Skipped(s)) => Err(ConfigError::Document {
                document: 1,
                message: format!("{} {} is not an Istio kind", s.api_version, s.kind),
            }),
        }
    }
}

fn json_type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

/// Shared, immutable config object as the store hands it out.
pub type SharedConfig = Arc<Config>;
