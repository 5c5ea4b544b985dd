//! A running control plane (istiod, or a Rudder daemon) read as istioctl reads it: the proxies it
//! serves (`istio.io/debug/syncz`, with each one's node metadata from the `adsz` debug page),
//! and the config of each, by subscribing as that proxy would (CDS and LDS, then the endpoints,
//! routes and filter configs they name) or, where the control plane refuses that identity, from
//! its `istio.io/debug/config_dump` of the proxy (which has no endpoints).

use super::config::{NAMED, ProxyConfig};
use crate::xds::proxy::{METADATA_EXCHANGE_TYPE, PEER_METADATA_TYPE, STATS_TYPE};
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::config::core::v3::{Extension, Locality, Node};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::envoy::service::status::v3::ClientConfig;
use envoy_types::pb::google::protobuf::{ListValue, Struct, Value, value::Kind};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

const SYNCZ: &str = "istio.io/debug/syncz";
const CONFIG_DUMP: &str = "istio.io/debug/config_dump";
const DEBUG: &str = "istio.io/debug";

/// How long one answer may take: a control plane that does not answer is an error, not a hang.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// Node metadata that would make the control plane act on the subscription rather than just
/// answer it: a VM's WorkloadGroup, which registers a WorkloadEntry for it.
const ACTING_METADATA: &[&str] = &["AUTO_REGISTER_GROUP"];

#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
    #[error("--ca-file: {0}")]
    Tls(String),
    #[error("the control plane refused {what}: {status}")]
    Refused {
        what: String,
        status: Box<tonic::Status>,
    },
    #[error("no answer to {0} within {ANSWER_WAIT:?}")]
    Timeout(String),
    #[error("bad answer to {0}: {1}")]
    Answer(String, String),
}

/// The TLS a control plane's secure port is reached with.
pub struct Tls {
    /// The root the serving certificate chains to (istiod's `istio-ca-root-cert`).
    pub ca_pem: String,
    /// The name the serving certificate is checked for (`istiod.istio-system.svc`).
    pub server_name: String,
}

/// One proxy a control plane serves: its node as the control plane saw it.
#[derive(Debug, Clone)]
pub struct ServedProxy {
    /// `pod.namespace`, as istioctl names proxies.
    pub name: String,
    pub node: Node,
    /// What could not be learnt of the node (no `adsz` entry): the comparison may differ for it.
    pub partial: bool,
}

pub struct ControlPlane {
    addr: String,
    /// The control plane's namespace: istioctl's debug node claims it, as the token's does.
    namespace: String,
    channel: Channel,
    token: Option<String>,
}

impl ControlPlane {
    pub async fn connect(
        addr: &str,
        namespace: &str,
        tls: Option<Tls>,
        token: Option<String>,
    ) -> Result<ControlPlane, ControlPlaneError> {
        let connect = |e: String| ControlPlaneError::Connect(addr.to_string(), e);
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint = Channel::from_shared(format!("{scheme}://{addr}"))
            .map_err(|e| connect(e.to_string()))?
            .connect_timeout(Duration::from_secs(10));
        if let Some(tls) = tls {
            endpoint = endpoint
                .tls_config(
                    ClientTlsConfig::new()
                        .ca_certificate(Certificate::from_pem(tls.ca_pem))
                        .domain_name(tls.server_name),
                )
                .map_err(|e| ControlPlaneError::Tls(e.to_string()))?;
        }
        let channel = endpoint.connect().await.map_err(|e| {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                let cause = s.to_string();
                if !text.contains(&cause) {
                    text = format!("{text}: {cause}");
                }
                source = s.source();
            }
            connect(text)
        })?;
        Ok(ControlPlane {
            addr: addr.to_string(),
            namespace: namespace.to_string(),
            channel,
            token: token.map(|t| t.trim().to_string()),
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    async fn open(
        &self,
        first: DiscoveryRequest,
    ) -> Result<
        (
            mpsc::Sender<DiscoveryRequest>,
            tonic::Streaming<DiscoveryResponse>,
        ),
        tonic::Status,
    > {
        let (tx, rx) = mpsc::channel(8);
        tx.send(first)
            .await
            .map_err(|_| tonic::Status::internal("request channel closed"))?;
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        if let Some(token) = &self.token {
            let value = format!("Bearer {token}")
                .parse()
                .map_err(|_| tonic::Status::invalid_argument("the token is not a header value"))?;
            request.metadata_mut().insert("authorization", value);
        }
        let stream = AggregatedDiscoveryServiceClient::new(self.channel.clone())
            .max_decoding_message_size(256 * 1024 * 1024)
            .stream_aggregated_resources(request)
            .await?
            .into_inner();
        Ok((tx, stream))
    }

    /// One debug request as istioctl sends it (a `GENERATOR=event` node), and its one answer.
    async fn ask(
        &self,
        type_url: &str,
        name: Option<&str>,
    ) -> Result<DiscoveryResponse, ControlPlaneError> {
        let what = match name {
            Some(n) => format!("{type_url} {n}"),
            None => type_url.to_string(),
        };
        let ns = &self.namespace;
        let node = Node {
            id: format!("sidecar~127.0.0.1~rudder-shadow.{ns}~{ns}.svc.cluster.local"),
            metadata: Some(strings(&[("GENERATOR", "event"), ("NAMESPACE", ns)])),
            ..Default::default()
        };
        let request = DiscoveryRequest {
            node: Some(node),
            type_url: type_url.to_string(),
            resource_names: name.map(|n| vec![n.to_string()]).unwrap_or_default(),
            response_nonce: "rudder-shadow".into(),
            ..Default::default()
        };
        let refused = |status: tonic::Status| ControlPlaneError::Refused {
            what: what.clone(),
            status: Box::new(status),
        };
        let (_tx, mut rx) = self.open(request).await.map_err(refused)?;
        next_answer(&mut rx, &what).await
    }

    /// Every proxy the control plane serves (`syncz`), each with its type (the `syncz` debug
    /// page) and the node metadata, labels and locality it connected with (`adsz`). istiod keeps
    /// no node id: it is rebuilt from the type, the first of `INSTANCE_IPS`, the proxy's
    /// `pod.namespace` and `domain_suffix`, as istio-agent builds it.
    pub async fn proxies(
        &self,
        domain_suffix: &str,
    ) -> Result<Vec<ServedProxy>, ControlPlaneError> {
        let syncz = self.ask(SYNCZ, None).await?;
        let mut names = BTreeSet::new();
        for any in &syncz.resources {
            let config = ClientConfig::decode(any.value.as_slice())
                .map_err(|e| ControlPlaneError::Answer(SYNCZ.into(), e.to_string()))?;
            if let Some(node) = config.node {
                names.insert(node.id);
            }
        }
        let types: BTreeMap<String, String> = self
            .page("syncz")
            .await?
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let name = s.get("proxy")?.as_str()?.to_string();
                let kind = s.get("proxy_type")?.as_str()?.to_string();
                Some((name, kind))
            })
            .collect();
        let adsz = self.page("adsz").await?;
        let clients: BTreeMap<String, &serde_json::Value> = adsz
            .get("clients")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| Some((istio_id(c.get("connectionId")?.as_str()?), c)))
            .collect();
        Ok(names
            .into_iter()
            .map(|name| {
                let client = clients.get(&name).copied();
                let kind = types.get(&name).map_or("sidecar", String::as_str);
                let (node, partial) = node_of(&name, kind, client, domain_suffix);
                let partial = partial || !types.contains_key(&name);
                ServedProxy {
                    name,
                    node,
                    partial,
                }
            })
            .collect())
    }

    /// An `istio.io/debug` page, as JSON.
    async fn page(&self, path: &str) -> Result<serde_json::Value, ControlPlaneError> {
        let answer = self.ask(DEBUG, Some(path)).await?;
        let body = answer
            .resources
            .first()
            .map(|r| r.value.as_slice())
            .unwrap_or_default();
        serde_json::from_slice(body).map_err(|e| {
            let start = String::from_utf8_lossy(&body[..body.len().min(200)]).to_string();
            ControlPlaneError::Answer(format!("the {path} page"), format!("{e}: {start}"))
        })
    }

    /// The config the control plane sends `node`: subscribed as the proxy would, or, when the
    /// control plane refuses to serve that node to this caller, its config dump of the proxy.
    /// The second says which.
    pub async fn config(
        &self,
        proxy: &ServedProxy,
    ) -> Result<(ProxyConfig, Source), ControlPlaneError> {
        match self.subscribe(&proxy.node).await {
            Ok(config) => Ok((config, Source::Subscribed)),
            Err(ControlPlaneError::Refused { status, .. })
                if matches!(
                    status.code(),
                    tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
                ) =>
            {
                Ok((self.config_dump(&proxy.name).await?, Source::ConfigDump))
            }
            Err(e) => Err(e),
        }
    }

    /// The control plane's `istio.io/debug/config_dump` of a proxy: clusters, listeners, routes
    /// and filter configs, no endpoints.
    pub async fn config_dump(&self, proxy_id: &str) -> Result<ProxyConfig, ControlPlaneError> {
        let answer = self.ask(CONFIG_DUMP, Some(proxy_id)).await?;
        let mut config = ProxyConfig::default();
        for section in &answer.resources {
            config
                .add_section(section)
                .map_err(|e| ControlPlaneError::Answer(CONFIG_DUMP.into(), e.to_string()))?;
        }
        if config.types.is_empty() {
            return Err(ControlPlaneError::Answer(
                CONFIG_DUMP.into(),
                format!("no config for {proxy_id} (not connected to this instance?)"),
            ));
        }
        Ok(config)
    }

    /// Subscribes as `node`: clusters and listeners, then what they name; ACKs each answer.
    pub async fn subscribe(&self, node: &Node) -> Result<ProxyConfig, ControlPlaneError> {
        let mut node = node.clone();
        if let Some(m) = node.metadata.as_mut() {
            for key in ACTING_METADATA {
                m.fields.remove(*key);
            }
        }
        let what = format!("a subscription as {}", node.id);
        let refused = |status: tonic::Status| ControlPlaneError::Refused {
            what: what.clone(),
            status: Box::new(status),
        };
        let request = |type_url: TypeUrl, names: Vec<String>, first: bool| DiscoveryRequest {
            node: first.then(|| node.clone()),
            type_url: type_url.url().to_string(),
            resource_names: names,
            ..Default::default()
        };
        let (tx, mut rx) = self
            .open(request(TypeUrl::Cluster, Vec::new(), true))
            .await
            .map_err(refused)?;
        let send = |r: DiscoveryRequest| {
            let tx = tx.clone();
            async move { tx.send(r).await.is_ok() }
        };
        send(request(TypeUrl::Listener, Vec::new(), false)).await;
        let mut config = ProxyConfig::default();
        let mut waiting: BTreeSet<TypeUrl> = BTreeSet::from([TypeUrl::Cluster, TypeUrl::Listener]);
        let mut asked_for_named = false;
        while !waiting.is_empty() {
            let types: Vec<&str> = waiting.iter().map(|t| t.short()).collect();
            let answer = next_answer(&mut rx, &format!("{what} ({})", types.join(", "))).await?;
            let Some(type_url) = TypeUrl::parse(&answer.type_url) else {
                continue;
            };
            config.hold(type_url);
            if let Some(list) = config.resources.get_mut(&type_url) {
                list.clear();
            }
            for any in &answer.resources {
                config.insert_any(type_url, any);
            }
            waiting.remove(&type_url);
            let ack = DiscoveryRequest {
                type_url: answer.type_url.clone(),
                version_info: answer.version_info.clone(),
                response_nonce: answer.nonce.clone(),
                resource_names: config.names_asked(type_url).into_iter().collect(),
                ..Default::default()
            };
            send(ack).await;
            if !asked_for_named
                && config.types.contains(&TypeUrl::Cluster)
                && config.types.contains(&TypeUrl::Listener)
            {
                asked_for_named = true;
                for type_url in NAMED {
                    let names = config.names_asked(type_url);
                    if names.is_empty() {
                        // Nothing to ask for: held, and empty.
                        config.hold(type_url);
                    } else {
                        waiting.insert(type_url);
                        send(request(type_url, names.into_iter().collect(), false)).await;
                    }
                }
            }
        }
        Ok(config)
    }
}

/// The next answer on a stream, within [`ANSWER_WAIT`]; `what` names the request in the error.
async fn next_answer(
    rx: &mut tonic::Streaming<DiscoveryResponse>,
    what: &str,
) -> Result<DiscoveryResponse, ControlPlaneError> {
    let refused = |status: tonic::Status| ControlPlaneError::Refused {
        what: what.to_string(),
        status: Box::new(status),
    };
    match tokio::time::timeout(ANSWER_WAIT, rx.message()).await {
        Ok(Ok(Some(answer))) => Ok(answer),
        Ok(Ok(None)) => Err(refused(tonic::Status::cancelled("stream ended"))),
        Ok(Err(status)) => Err(refused(status)),
        Err(_) => Err(ControlPlaneError::Timeout(what.to_string())),
    }
}

/// Where a control plane's config for a proxy came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Subscribed as the proxy: every type, endpoints included.
    Subscribed,
    /// The control plane's config dump of the proxy: no endpoints.
    ConfigDump,
}

fn strings(fields: &[(&str, &str)]) -> Struct {
    Struct {
        fields: fields
            .iter()
            .map(|(k, v)| (k.to_string(), string(v)))
            .collect(),
    }
}

fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_string())),
    }
}

/// A JSON value as a protobuf `Value` (node metadata is a `Struct`).
fn value(json: &serde_json::Value) -> Value {
    let kind = match json {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(a) => Kind::ListValue(ListValue {
            values: a.iter().map(value).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(Struct {
            fields: o.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
        }),
    };
    Value { kind: Some(kind) }
}

/// The proxies of an `adsz` page read over HTTP (a daemon's `/debug/adsz`), debug clients left
/// out.
pub fn proxies_of_adsz(page: &serde_json::Value, domain_suffix: &str) -> Vec<ServedProxy> {
    page.get("clients")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            c.pointer("/metadata/GENERATOR")
                .and_then(serde_json::Value::as_str)
                != Some("event")
        })
        .filter_map(|c| {
            let name = istio_id(c.get("connectionId")?.as_str()?);
            let kind = c
                .pointer("/proxy/id")
                .and_then(serde_json::Value::as_str)
                .and_then(|id| id.split('~').next())
                .unwrap_or("sidecar");
            let (node, partial) = node_of(&name, kind, Some(c), domain_suffix);
            Some(ServedProxy {
                name,
                node,
                partial,
            })
        })
        .collect()
}

/// istiod's proxy id (`pod.namespace`) of a connection id (`<proxy id>-<counter>`; Rudder's
/// starts with the whole node id).
fn istio_id(connection: &str) -> String {
    let id = match connection.rsplit_once('-') {
        Some((id, n)) if n.chars().all(|c| c.is_ascii_digit()) => id,
        _ => connection,
    };
    proxy_name(id)
}

/// istioctl's name of a proxy (`pod.namespace`) from its node id
/// (`type~ip~pod.namespace~domain`); anything else as it is.
pub fn proxy_name(node_id: &str) -> String {
    match node_id.split('~').collect::<Vec<_>>().as_slice() {
        [_, _, name, _] => name.to_string(),
        _ => node_id.to_string(),
    }
}

/// The node `name` connected with, from its `adsz` client (istiod's: `metadata` is its whole
/// `NodeMetadata`; Rudder's adds the parsed `proxy`, with the node id and the istio-proxy
/// extensions it reported). Partial when there is no client, or no address to put in the id.
fn node_of(
    name: &str,
    kind: &str,
    client: Option<&serde_json::Value>,
    domain_suffix: &str,
) -> (Node, bool) {
    let empty = serde_json::Value::Null;
    let client = client.unwrap_or(&empty);
    let mut metadata = match client.get("metadata").map(value).and_then(|v| v.kind) {
        Some(Kind::StructValue(s)) => s,
        _ => Struct::default(),
    };
    if !metadata.fields.contains_key("LABELS")
        && let Some(labels) = client.get("labels").filter(|l| l.is_object())
    {
        metadata.fields.insert("LABELS".into(), value(labels));
    }
    let namespace = match metadata
        .fields
        .get("NAMESPACE")
        .and_then(|v| v.kind.as_ref())
    {
        Some(Kind::StringValue(ns)) => ns.clone(),
        _ => name
            .rsplit_once('.')
            .map(|(_, ns)| ns.to_string())
            .unwrap_or_default(),
    };
    let ip = match metadata
        .fields
        .get("INSTANCE_IPS")
        .and_then(|v| v.kind.as_ref())
    {
        Some(Kind::StringValue(ips)) => ips.split(',').next().map(str::trim).map(str::to_string),
        _ => None,
    };
    let given = client
        .pointer("/proxy/id")
        .and_then(serde_json::Value::as_str);
    let partial = given.is_none() && (client.is_null() || ip.is_none());
    let id = given.map(str::to_string).unwrap_or_else(|| {
        format!(
            "{kind}~{}~{name}~{namespace}.svc.{domain_suffix}",
            ip.as_deref().unwrap_or("0.0.0.0")
        )
    });
    let locality = client.get("locality").map(|l| {
        let s = |k: &str| {
            l.get(k)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Locality {
            region: s("region"),
            zone: s("zone"),
            sub_zone: s("sub_zone"),
        }
    });
    // istiod does not say which extensions a proxy has: its proxies are istio-proxy, which has
    // them all. Rudder says, for each proxy.
    let extensions = match client.pointer("/proxy/istio_extensions") {
        Some(e) => serde_json::from_value::<IstioExtensionFlags>(e.clone())
            .map(|f| f.extensions())
            .unwrap_or_default(),
        None => IstioExtensionFlags::all().extensions(),
    };
    let node = Node {
        id,
        metadata: Some(metadata),
        locality,
        extensions,
        user_agent_name: client
            .pointer("/proxy/user_agent")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("envoy")
            .to_string(),
        ..Default::default()
    };
    (node, partial)
}

/// `xds::proxy::IstioExtensions` as Rudder's `adsz` prints it.
#[derive(serde::Deserialize)]
struct IstioExtensionFlags {
    http_peer_metadata: bool,
    http_stats: bool,
    tcp_stats: bool,
    tcp_metadata_exchange: bool,
    upstream_metadata_exchange: bool,
}

impl IstioExtensionFlags {
    fn all() -> IstioExtensionFlags {
        IstioExtensionFlags {
            http_peer_metadata: true,
            http_stats: true,
            tcp_stats: true,
            tcp_metadata_exchange: true,
            upstream_metadata_exchange: true,
        }
    }

    /// The node extensions istio-proxy reports for these.
    fn extensions(&self) -> Vec<Extension> {
        let ext = |on: bool, category: &str, type_name: &str| {
            on.then(|| Extension {
                name: type_name.to_string(),
                category: category.to_string(),
                type_urls: vec![format!("type.googleapis.com/{type_name}")],
                ..Default::default()
            })
        };
        [
            ext(
                self.http_peer_metadata,
                "envoy.filters.http",
                PEER_METADATA_TYPE,
            ),
            ext(self.http_stats, "envoy.filters.http", STATS_TYPE),
            ext(self.tcp_stats, "envoy.filters.network", STATS_TYPE),
            ext(
                self.tcp_metadata_exchange,
                "envoy.filters.network",
                METADATA_EXCHANGE_TYPE,
            ),
            ext(
                self.upstream_metadata_exchange,
                "envoy.filters.upstream_network",
                METADATA_EXCHANGE_TYPE,
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::proxy::{IstioExtensions, Proxy};
    use serde_json::json;

    #[test]
    fn an_istiod_adsz_client_becomes_the_node_it_connected_with() {
        let client = json!({
            "connectionId": "app-7d9.shop-42",
            "labels": {"app": "app", "version": "v1"},
            "metadata": {"NAMESPACE": "shop", "INTERCEPTION_MODE": "REDIRECT", "INSTANCE_IPS": "10.1.2.3,fd00::3",
                         "PROXY_CONFIG": {"concurrency": 2}, "AUTO_REGISTER_GROUP": "vm"},
            "locality": {"region": "eu", "zone": "eu-1"},
        });
        assert_eq!(istio_id("app-7d9.shop-42"), "app-7d9.shop");
        let (node, partial) = node_of("app-7d9.shop", "sidecar", Some(&client), "cluster.local");
        assert!(!partial);
        assert_eq!(
            node.id,
            "sidecar~10.1.2.3~app-7d9.shop~shop.svc.cluster.local"
        );
        let proxy = Proxy::from_node(Some(&node)).unwrap();
        assert_eq!(proxy.namespace, "shop");
        assert_eq!(proxy.labels["version"], "v1");
        assert_eq!(proxy.locality, "eu/eu-1/");
        assert_eq!(proxy.proxy_config, Some(json!({"concurrency": 2})));
        assert!(
            proxy.istio_extensions.http_stats && proxy.istio_extensions.upstream_metadata_exchange
        );
    }

    #[test]
    fn a_rudder_adsz_client_keeps_the_extensions_its_proxy_reported() {
        let client = json!({
            "connectionId": "router~10.0.0.1~gw.ns~ns.svc.cluster.local-1",
            "metadata": {"NAMESPACE": "ns"},
            "proxy": {"id": "router~10.0.0.1~gw.ns~ns.svc.cluster.local", "user_agent": "envoy",
                      "istio_extensions": serde_json::to_value(IstioExtensions::default()).unwrap()},
        });
        assert_eq!(
            istio_id("router~10.0.0.1~gw.ns~ns.svc.cluster.local-1"),
            "gw.ns"
        );
        let (node, partial) = node_of("gw.ns", "router", Some(&client), "cluster.local");
        assert!(!partial);
        let proxy = Proxy::from_node(Some(&node)).unwrap();
        assert_eq!(proxy.id, "router~10.0.0.1~gw.ns~ns.svc.cluster.local");
        assert!(!proxy.istio_extensions.any());
        // A proxy adsz does not list is known by its name and type only.
        let (node, partial) = node_of("x.ns", "router", None, "cluster.local");
        assert!(partial);
        assert_eq!(node.id, "router~0.0.0.0~x.ns~ns.svc.cluster.local");
    }
}
