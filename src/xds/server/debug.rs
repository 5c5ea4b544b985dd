//! istiod's debug xDS types, answered on both gRPC ports as istiod answers them (its `statusgen.go`
//! and `debuggen.go`): `istio.io/debug/syncz` (every proxy's sync state as CSDS `ClientConfig`s),
//! `istio.io/debug/config_dump` (one proxy's config as Envoy admin dumps) and `istio.io/debug`
//! (an HTTP debug page by path). `istioctl proxy-status`, `istioctl x version` and
//! `istioctl x internal-debug` ask these.
//!
//! Only a verified caller is answered (on the plaintext port nobody is); a caller outside the
//! system namespace sees only its own namespace's proxies, and of the pages only `config_dump`.

pub use super::debug_pages::DebugPages;
use super::status::XdsStatus;
use super::watches::ConnectionStatus;
use super::xds_server::XdsServer;
use crate::xds::context::PushContext;
use crate::xds::generate::{self, ztunnel};
use crate::xds::provenance;
use crate::xds::proxy::{Proxy, ProxyType};
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::admin::v3 as admin;
use envoy_types::pb::envoy::config::core::v3::{ControlPlane, Node, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryResponse, DiscoveryResponse, Resource,
};
use envoy_types::pb::envoy::service::status::v3::{
    ClientConfig, ConfigStatus, client_config::GenericXdsConfig,
};
use envoy_types::pb::google::protobuf::{Any, Struct, Timestamp, Value, value::Kind};
use prost::Message;
use std::collections::BTreeSet;
use std::sync::Arc;
use tonic::Status;

/// Every debug type starts with this.
pub const DEBUG_TYPE: &str = "istio.io/debug";
pub const SYNCZ: &str = "istio.io/debug/syncz";
pub const CONFIG_DUMP: &str = "istio.io/debug/config_dump";

/// Pages a caller outside the system namespace may read through `istio.io/debug` (istiod's
/// `activeNamespaceDebuggers` that Rudder serves).
const NAMESPACE_PAGES: &[&str] = &["config_dump"];

/// What istioctl prints when a proxy is not connected here (it then asks the next replica).
pub const NOT_CONNECTED: &str =
    "Proxy not connected to this Pilot instance. It may be connected to another instance.";

pub fn is_debug_type(type_url: &str) -> bool {
    type_url == DEBUG_TYPE || type_url.starts_with("istio.io/debug/")
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn timestamp(ms: u64) -> Option<Timestamp> {
    (ms > 0).then(|| Timestamp {
        seconds: (ms / 1000) as i64,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    })
}

/// Which proxies a caller may see: `Ok(None)` all of them, `Ok(Some(ns))` those of its own
/// namespace; an unauthenticated caller none.
fn caller_namespace(proxy: &Proxy, system_namespace: &str) -> Result<Option<String>, Status> {
    let Some(identity) = &proxy.identity else {
        tracing::warn!(
            proxy = %proxy.id,
            "refusing debug info to an unauthenticated caller; connect to the TLS port with a token or certificate"
        );
        return Err(Status::unauthenticated("authentication required"));
    };
    Ok((identity.namespace != system_namespace).then(|| identity.namespace.clone()))
}

fn visible(conn: &ConnectionStatus, namespace: Option<&str>) -> bool {
    !conn.proxy.is_debug_client() && namespace.is_none_or(|ns| conn.proxy.namespace == ns)
}

fn string_value(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_string())),
    }
}

/// The control plane as istiod identifies itself in its sync responses (`istioctl x version`
/// reads it): component, instance (the pod) and build.
pub fn control_plane_identifier() -> String {
    serde_json::json!({
        "Component": "istiod",
        "ID": std::env::var("POD_NAME").unwrap_or_default(),
        "Info": build_info(),
    })
    .to_string()
}

/// istiod's `BuildInfo` of this build.
pub fn build_info() -> serde_json::Value {
    serde_json::json!({
        "version": crate::metrics::ISTIO_VERSION,
        "revision": option_env!("RUDDER_GIT_REVISION").unwrap_or("unknown"),
        "golang_version": "",
        "status": "Clean",
        "tag": crate::metrics::ISTIO_VERSION,
        "rudder_version": env!("CARGO_PKG_VERSION"),
    })
}

/// One proxy's sync state per type, as istiod's `debugSyncStatus`.
fn config_status(status: &super::watches::TypeStatus) -> ConfigStatus {
    if status.last_nack.is_some() {
        ConfigStatus::Error
    } else if status.nonce_sent.is_empty() {
        ConfigStatus::NotSent
    } else if status.nonce_acked == status.nonce_sent {
        ConfigStatus::Synced
    } else {
        ConfigStatus::Stale
    }
}

/// Every visible proxy's sync state, as CSDS `ClientConfig`s named by the proxy's id.
pub fn client_configs(
    connections: &[ConnectionStatus],
    namespace: Option<&str>,
    cluster_id: &str,
) -> Vec<ClientConfig> {
    connections
        .iter()
        .filter(|c| visible(c, namespace))
        .map(|c| {
            let proxy = &c.proxy;
            let mut fields = std::collections::BTreeMap::new();
            let cluster = proxy
                .metadata
                .get("CLUSTER_ID")
                .map_or(cluster_id, String::as_str);
            fields.insert("CLUSTER_ID".to_string(), string_value(cluster));
            fields.insert("NAMESPACE".to_string(), string_value(&proxy.namespace));
            fields.insert(
                "ISTIO_VERSION".to_string(),
                string_value(&proxy.istio_version),
            );
            let mut configs: Vec<GenericXdsConfig> =
                c.types
                    .iter()
                    .map(|(type_url, status)| GenericXdsConfig {
                        type_url: type_url.url().to_string(),
                        config_status: config_status(status) as i32,
                        last_updated: timestamp(status.sent_at_ms),
                        error_state: status.last_nack.as_ref().map(|nack| {
                            admin::UpdateFailureState {
                                last_update_attempt: timestamp(status.sent_at_ms),
                                details: nack.to_string(),
                                ..Default::default()
                            }
                        }),
                        ..Default::default()
                    })
                    .collect();
            configs.sort_by(|a, b| a.type_url.cmp(&b.type_url));
            ClientConfig {
                node: Some(Node {
                    id: proxy.istio_id().to_string(),
                    metadata: Some(Struct {
                        fields: fields.into_iter().collect(),
                    }),
                    ..Default::default()
                }),
                generic_xds_configs: configs,
                ..Default::default()
            }
        })
        .collect()
}

fn any<M: prost::Name>(message: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: message.encode_to_vec(),
    }
}

/// A secret as a config dump shows it: a certificate's private key replaced by `[redacted]`.
pub fn redacted(resource: &Any) -> Any {
    let Ok(mut secret) = Secret::decode(resource.value.as_slice()) else {
        return resource.clone();
    };
    if let Some(secret::Type::TlsCertificate(cert)) = &mut secret.r#type {
        cert.private_key = Some(envoy_types::pb::envoy::config::core::v3::DataSource {
            specifier: Some(data_source::Specifier::InlineBytes(b"[redacted]".to_vec())),
            ..Default::default()
        });
    }
    any(&secret)
}

/// What a proxy is sent right now, as Envoy's admin `ConfigDump` the way istiod builds it: the
/// bootstrap and scoped routes empty (istiod does not know them), clusters, listeners, routes,
/// secrets (keys redacted), extension configs, and endpoints only when asked for. A ztunnel's dump
/// is its addresses.
pub fn config_dump(
    ctx: &PushContext,
    conn: &ConnectionStatus,
    include_endpoints: bool,
) -> admin::ConfigDump {
    let proxy = &conn.proxy;
    let scope = ctx.scope(proxy);
    let generated = |type_url: TypeUrl| -> Vec<Arc<crate::xds::resource::Resource>> {
        match conn.types.get(&type_url) {
            Some(status) => {
                let names = (!status.wildcard).then_some(status.names.as_ref());
                generate::generate(ctx, proxy, &scope, type_url, names)
            }
            None => Vec::new(),
        }
    };
    if proxy.proxy_type == crate::xds::proxy::ProxyType::Ztunnel {
        return admin::ConfigDump {
            configs: generated(TypeUrl::Address)
                .iter()
                .map(|r| r.any.clone())
                .collect(),
        };
    }
    let version = ctx.version.to_string();
    let clusters = admin::ClustersConfigDump {
        version_info: version.clone(),
        dynamic_active_clusters: generated(TypeUrl::Cluster)
            .iter()
            .map(|r| admin::clusters_config_dump::DynamicCluster {
                cluster: Some(r.any.clone()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let listeners = admin::ListenersConfigDump {
        version_info: version.clone(),
        dynamic_listeners: generated(TypeUrl::Listener)
            .iter()
            .map(|r| admin::listeners_config_dump::DynamicListener {
                name: r.name.to_string(),
                active_state: Some(admin::listeners_config_dump::DynamicListenerState {
                    version_info: version.clone(),
                    listener: Some(r.any.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let routes = admin::RoutesConfigDump {
        dynamic_route_configs: generated(TypeUrl::Route)
            .iter()
            .map(|r| admin::routes_config_dump::DynamicRouteConfig {
                version_info: version.clone(),
                route_config: Some(r.any.clone()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let secrets = admin::SecretsConfigDump {
        dynamic_active_secrets: generated(TypeUrl::Secret)
            .iter()
            .map(|r| admin::secrets_config_dump::DynamicSecret {
                name: r.name.to_string(),
                version_info: version.clone(),
                secret: Some(redacted(&r.any)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let extensions = admin::EcdsConfigDump {
        ecds_filters: generated(TypeUrl::ExtensionConfig)
            .iter()
            .map(|r| admin::ecds_config_dump::EcdsFilterConfig {
                version_info: version.clone(),
                ecds_filter: Some(crate::xds::generate::passes::traffic_extension::redacted(
                    &r.any,
                )),
                ..Default::default()
            })
            .collect(),
    };
    let mut configs = vec![any(&admin::BootstrapConfigDump::default()), any(&clusters)];
    if include_endpoints {
        configs.push(any(&admin::EndpointsConfigDump {
            dynamic_endpoint_configs: generated(TypeUrl::Endpoint)
                .iter()
                .map(|r| admin::endpoints_config_dump::DynamicEndpointConfig {
                    version_info: version.clone(),
                    endpoint_config: Some(r.any.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }));
    }
    configs.extend([
        any(&listeners),
        any(&admin::ScopedRoutesConfigDump::default()),
        any(&routes),
        any(&secrets),
        any(&extensions),
    ]);
    admin::ConfigDump { configs }
}

/// The connection istiod would pick for `proxy_id`: the first whose id contains it.
pub fn find_connection(
    connections: Vec<ConnectionStatus>,
    proxy_id: &str,
) -> Option<ConnectionStatus> {
    connections
        .into_iter()
        .filter(|c| !c.proxy.is_debug_client())
        .find(|c| c.proxy.istio_id() == proxy_id || c.proxy.id.contains(proxy_id))
}

/// A debug response's resources, or the status the stream ends with.
pub struct DebugAnswer {
    pub resources: Vec<(String, Any)>,
    pub control_plane: Option<ControlPlane>,
}

/// Answers one debug request of a verified caller.
pub async fn answer(
    server: &Arc<XdsServer>,
    caller: &Proxy,
    type_url: &str,
    names: Vec<String>,
) -> Result<DebugAnswer, Status> {
    let status = XdsStatus::new(server.clone());
    let ctx = status.context();
    let namespace = caller_namespace(caller, &ctx.mesh.root_namespace)?;
    let mut answer = DebugAnswer {
        resources: Vec::new(),
        control_plane: None,
    };
    match type_url {
        SYNCZ => {
            answer.control_plane = Some(ControlPlane {
                identifier: control_plane_identifier(),
            });
            for config in client_configs(
                &status.connections(),
                namespace.as_deref(),
                &ctx.mesh.cluster_id,
            ) {
                let name = config
                    .node
                    .as_ref()
                    .map(|n| n.id.clone())
                    .unwrap_or_default();
                answer.resources.push((name, any(&config)));
            }
        }
        CONFIG_DUMP => {
            // As istiod: exactly one proxy, else an empty answer.
            if let [proxy_id] = names.as_slice()
                && let Some(conn) = find_connection(status.connections(), proxy_id)
                && namespace
                    .as_deref()
                    .is_none_or(|ns| conn.proxy.namespace == ns)
            {
                let dump = config_dump(&ctx, &conn, false);
                answer
                    .resources
                    .extend(dump.configs.into_iter().map(|c| (String::new(), c)));
            } else {
                tracing::info!(?names, "config_dump asked for no connected proxy");
            }
        }
        DEBUG_TYPE => {
            let [page] = names.as_slice() else {
                return Err(Status::invalid_argument(
                    "exactly one debug request is required",
                ));
            };
            let path = page.split(['?', '#']).next().unwrap_or_default();
            if namespace.is_some() && !NAMESPACE_PAGES.contains(&path) {
                return Err(Status::permission_denied(format!(
                    "the debug info is not available for current identity: {:?}",
                    caller.identity.as_ref().map(|i| i.uri())
                )));
            }
            let body = match server.debug_pages.get() {
                Some(pages) => pages.page(page.clone(), namespace).await,
                None => b"debug pages are not served yet\n".to_vec(),
            };
            answer.resources.push((
                page.clone(),
                Any {
                    type_url: DEBUG_TYPE.to_string(),
                    value: body,
                },
            ));
        }
        other => {
            return Err(Status::invalid_argument(format!(
                "unknown debug type {other:?}"
            )));
        }
    }
    Ok(answer)
}

/// The answer as a State of the World response.
pub fn sotw_response(
    type_url: &str,
    nonce: String,
    version: String,
    answer: DebugAnswer,
) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: version,
        resources: answer.resources.into_iter().map(|(_, r)| r).collect(),
        type_url: type_url.to_string(),
        nonce,
        control_plane: answer.control_plane,
        ..Default::default()
    }
}

/// The answer as a Delta response: every resource named, sent whole.
pub fn delta_response(
    type_url: &str,
    nonce: String,
    version: String,
    answer: DebugAnswer,
) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        system_version_info: version.clone(),
        resources: answer
            .resources
            .into_iter()
            .map(|(name, resource)| Resource {
                name,
                version: version.clone(),
                resource: Some(resource),
                ..Default::default()
            })
            .collect(),
        type_url: type_url.to_string(),
        nonce,
        control_plane: answer.control_plane,
        ..Default::default()
    }
}

/// The debug views of the xDS server in istiod's shapes (and Rudder's resource view), read by the
/// admin server.
impl XdsStatus {
    /// `/debug/syncz`: each proxy's sync state in istiod's `SyncStatus` shape (its field names;
    /// `*_sent`/`*_acked` are nonces, as `istioctl proxy-status` compares them), optionally of one
    /// namespace, with Rudder's view added: the full node id, the connection, the protocol and
    /// each type's state, versions and NACK.
    pub fn syncz(&self, namespace: Option<&str>) -> Vec<serde_json::Value> {
        let cluster_id = self.context().mesh.cluster_id.clone();
        self.connections()
            .into_iter()
            .filter(|c| !c.proxy.is_debug_client())
            .filter(|c| namespace.is_none_or(|ns| c.proxy.namespace == ns))
            .map(|c| {
                let proxy = &c.proxy;
                let mut entry = serde_json::json!({
                    "cluster_id": proxy.metadata.get("CLUSTER_ID").unwrap_or(&cluster_id),
                    "proxy": proxy.istio_id(),
                    "proxy_type": proxy.node_type(),
                    "istio_version": proxy.istio_version,
                });
                let mut resources = serde_json::Map::new();
                let mut types = serde_json::Map::new();
                for (type_url, st) in c.types.iter() {
                    let short = match type_url {
                        TypeUrl::Cluster => Some("cluster"),
                        TypeUrl::Listener => Some("listener"),
                        TypeUrl::Route => Some("route"),
                        TypeUrl::Endpoint => Some("endpoint"),
                        _ => None,
                    };
                    if let Some(short) = short {
                        if !st.nonce_sent.is_empty() {
                            entry[format!("{short}_sent")] = (*st.nonce_sent).into();
                        }
                        if !st.nonce_acked.is_empty() {
                            entry[format!("{short}_acked")] = (*st.nonce_acked).into();
                        }
                    }
                    let mut resource = serde_json::Map::new();
                    if !st.nonce_sent.is_empty() {
                        resource.insert("sent".into(), (*st.nonce_sent).into());
                    }
                    if !st.nonce_acked.is_empty() {
                        resource.insert("acked".into(), (*st.nonce_acked).into());
                    }
                    resource.insert("sentTime".into(), rfc3339(st.sent_at_ms).into());
                    if let Some(nack) = &st.last_nack {
                        resource.insert("lastError".into(), (**nack).into());
                    }
                    resources.insert(type_url.url().into(), resource.into());
                    types.insert(
                        type_url.short().into(),
                        serde_json::json!({ "state": st.state(), "sent": st.version_sent, "acked": st.version_acked, "error": st.last_nack }),
                    );
                }
                entry["resources"] = resources.into();
                entry["node"] = proxy.id.clone().into();
                entry["connection"] = c.id.clone().into();
                entry["generator"] = serde_json::to_value(proxy.generator).unwrap_or_default();
                entry["namespace"] = proxy.namespace.clone().into();
                entry["delta"] = c.delta.into();
                entry["types"] = types.into();
                entry
            })
            .collect()
    }

    /// `/debug/config_dump`: what the proxy istiod would pick for `proxy_id` (its id contains it) is
    /// sent right now, as Envoy's admin `ConfigDump` in proto3 JSON, as istiod builds it
    /// (`debug::config_dump`); with `types`, only those resources. `None` when no proxy matches,
    /// or the proxy is outside `caller_namespace`.
    pub fn config_dump(
        &self,
        proxy_id: &str,
        include_endpoints: bool,
        types: Option<&[TypeUrl]>,
        names: crate::envoy::json::Names,
        caller_namespace: Option<&str>,
    ) -> Option<serde_json::Value> {
        let conn = find_connection(self.connections(), proxy_id)?;
        if caller_namespace.is_some_and(|ns| conn.proxy.namespace != ns) {
            return None;
        }
        let ctx = self.context();
        let dump = match types {
            Some(types) => {
                let scope = ctx.scope(&conn.proxy);
                let configs = types
                    .iter()
                    .filter_map(|t| conn.types.get(t).map(|status| (*t, status)))
                    .flat_map(|(t, status)| {
                        let names = (!status.wildcard).then_some(status.names.as_ref());
                        generate::generate(&ctx, &conn.proxy, &scope, t, names)
                    })
                    .map(|r| r.any.clone())
                    .collect();
                envoy_types::pb::envoy::admin::v3::ConfigDump { configs }
            }
            None => config_dump(&ctx, &conn, include_endpoints),
        };
        Some(crate::envoy::json::message_or_error(&dump, names))
    }

    /// `/debug/envoy_filters`: each EnvoyFilter with its patch count and the connected proxies it
    /// patches, and every patch that is not applied with the reason (a value that is not its
    /// Envoy type, an unsupported `applyTo`, a proxy metadata match).
    pub fn envoy_filters(&self) -> serde_json::Value {
        let ctx = self.context();
        let compiled = generate::passes::envoy_filter::compiled(&ctx);
        let mut proxies: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for conn in self.connections() {
            if conn.proxy.is_debug_client() {
                continue;
            }
            let scope = ctx.scope(&conn.proxy);
            let filters: BTreeSet<String> =
                generate::passes::envoy_filter::patches_for(&ctx, &scope)
                    .iter()
                    .map(|p| format!("{}/{}", p.filter.namespace, p.filter.name))
                    .collect();
            for f in filters {
                proxies.entry(f).or_default().push(conn.proxy.id.clone());
            }
        }
        let filters: Vec<serde_json::Value> = generate::passes::envoy_filter::envoy_filters(&ctx)
            .into_iter()
            .map(|(name, patches)| {
                serde_json::json!({
                    "proxies": proxies.get(&name).cloned().unwrap_or_default(),
                    "name": name,
                    "patches": patches,
                })
            })
            .collect();
        serde_json::json!({ "envoyFilters": filters, "notApplied": compiled.skipped })
    }

    /// The versions of the pushes whose config `resources` can show, oldest first.
    pub fn past_versions(&self) -> Vec<u64> {
        super::lock::lock(&self.server.past)
            .iter()
            .map(|p| p.version)
            .collect()
    }

    /// `/debug/resourcez`: everything the first connected proxy whose id contains `id` receives
    /// right now (or as the push of `version` made it, while that push is kept: `past_versions`;
    /// without its secrets), resource by resource, with the config objects that produced each
    /// (provenance) and the resource as proto3 JSON; a ztunnel's in ztunnel's own `/config_dump`
    /// shape. `None` when no proxy matches or the push is no longer kept.
    pub fn resources(&self, id: &str, version: Option<u64>) -> Option<serde_json::Value> {
        let conn = find_connection(self.connections(), id)?;
        let current = self.context();
        let ctx = match version {
            Some(v) if v != current.version => Arc::new(
                super::lock::lock(&self.server.past)
                    .iter()
                    .find(|p| p.version == v)?
                    .context(),
            ),
            _ => current,
        };
        let past = ctx.version != self.context().version;
        if conn.proxy.proxy_type == ProxyType::Ztunnel {
            return Some(ztunnel_dump(&ctx, &conn));
        }
        let scope = ctx.scope(&conn.proxy);
        let mut resources = Vec::new();
        for (&type_url, status) in conn.types.iter() {
            if past && type_url == TypeUrl::Secret {
                continue;
            }
            let names = (!status.wildcard).then_some(status.names.as_ref());
            for r in generate::generate(&ctx, &conn.proxy, &scope, type_url, names) {
                let any = if type_url == TypeUrl::Secret {
                    redacted(&r.any)
                } else {
                    r.any.clone()
                };
                let config = crate::envoy::json::to_json(
                    &any.type_url,
                    &any.value,
                    crate::envoy::json::Names::Json,
                )
                .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
                resources.push(serde_json::json!({
                    "type": type_url.short(),
                    "name": r.name,
                    "version": r.version,
                    "sources": provenance::sources(
                        &ctx,
                        &conn.proxy.namespace,
                        conn.proxy.proxy_type == crate::xds::proxy::ProxyType::Router,
                        type_url,
                        &r.name,
                    ),
                    "config": config,
                }));
            }
        }
        Some(
            serde_json::json!({ "proxy": conn.proxy, "pushVersion": ctx.version, "resources": resources }),
        )
    }
}

/// Milliseconds since the epoch as RFC 3339 (istiod's Go `time.Time` in JSON); the zero time when
/// never.
fn rfc3339(ms: u64) -> String {
    let at = ::time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(::time::OffsetDateTime::UNIX_EPOCH);
    if ms == 0 {
        return "0001-01-01T00:00:00Z".into();
    }
    at.format(&::time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// What a ztunnel holds, in ztunnel's own `/config_dump` shape: everything for a wildcard
/// subscription, else the workloads and services it looked up.
fn ztunnel_dump(ctx: &PushContext, conn: &ConnectionStatus) -> serde_json::Value {
    let mut dump = ztunnel::dump::config_dump(&ztunnel::index(ctx));
    if let Some(status) = conn.types.get(&TypeUrl::Address).filter(|s| !s.wildcard) {
        let scope = ctx.scope(&conn.proxy);
        let held: BTreeSet<String> = generate::generate(
            ctx,
            &conn.proxy,
            &scope,
            TypeUrl::Address,
            Some(&status.names),
        )
        .into_iter()
        .map(|r| r.name.to_string())
        .collect();
        for (list, key) in [("workloads", "uid"), ("services", "hostname")] {
            if let Some(items) = dump[list].as_array_mut() {
                items.retain(|item| {
                    let name = match list {
                        "services" => format!(
                            "{}/{}",
                            item["namespace"].as_str().unwrap_or_default(),
                            item[key].as_str().unwrap_or_default()
                        ),
                        _ => item[key].as_str().unwrap_or_default().to_string(),
                    };
                    held.contains(&name)
                });
            }
        }
    }
    dump
}
