//! istiod's debug xDS types, answered on both gRPC ports as istiod answers them (its `statusgen.go`
//! and `debuggen.go`): `istio.io/debug/syncz` (every proxy's sync state as CSDS `ClientConfig`s),
//! `istio.io/debug/config_dump` (one proxy's config as Envoy admin dumps) and `istio.io/debug`
//! (an HTTP debug page by path). `istioctl proxy-status`, `istioctl x version` and
//! `istioctl x internal-debug` ask these.
//!
//! Only a verified caller is answered (on the plaintext port nobody is); a caller outside the
//! system namespace sees only its own namespace's proxies, and of the pages only `config_dump`.

use super::XdsServer;
use super::status::{ConnectionStatus, XdsStatus};
use crate::xds::context::PushContext;
use crate::xds::generate;
use crate::xds::proxy::Proxy;
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
use std::future::Future;
use std::pin::Pin;
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

/// The HTTP debug pages (`/debug/<path>` of the monitoring port), served to `istio.io/debug`.
/// The admin server provides them; `caller_namespace` restricts a page to one namespace's proxies.
pub trait DebugPages: Send + Sync {
    fn page(
        &self,
        path_and_query: String,
        caller_namespace: Option<String>,
    ) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send>>;
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
        "version": env!("CARGO_PKG_VERSION"),
        "revision": option_env!("RUDDER_GIT_REVISION").unwrap_or("unknown"),
        "golang_version": "",
        "status": "Clean",
        "tag": format!("rudder-{}", env!("CARGO_PKG_VERSION")),
    })
}

/// One proxy's sync state per type, as istiod's `debugSyncStatus`.
fn config_status(status: &super::status::TypeStatus) -> ConfigStatus {
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
    // Rudder serves no extension configs (ECDS) yet: the dump has them empty.
    let extensions = admin::EcdsConfigDump::default();
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
