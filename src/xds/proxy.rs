//! Who is connected: the proxy identity parsed from the xDS node.

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as ValueKind};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ProxyType {
    Sidecar,
    Router,
    Ztunnel,
    Waypoint,
}

/// Which generator family serves the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Generator {
    /// Envoy: full listeners with filter chains.
    Envoy,
    /// Proxyless gRPC: API listeners named `host:port`.
    Grpc,
}

/// istio-proxy's telemetry filters the proxy reported having (`node.extensions`, by category and
/// config type): upstream Envoy has none of them, and a filter Envoy does not know is a NACK.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct IstioExtensions {
    /// `istio.metadata_exchange` in HTTP connection managers (the peer metadata filter).
    pub http_peer_metadata: bool,
    /// `istio.stats` as an HTTP filter.
    pub http_stats: bool,
    /// `istio.stats` as a network filter.
    pub tcp_stats: bool,
    /// `istio.metadata_exchange` as a listener network filter.
    pub tcp_metadata_exchange: bool,
    /// `istio.metadata_exchange` as a cluster (upstream network) filter.
    pub upstream_metadata_exchange: bool,
}

pub const PEER_METADATA_TYPE: &str = "io.istio.http.peer_metadata.Config";
pub const STATS_TYPE: &str = "stats.PluginConfig";
pub const METADATA_EXCHANGE_TYPE: &str = "envoy.tcp.metadataexchange.config.MetadataExchange";

impl IstioExtensions {
    fn of(node: &Node) -> IstioExtensions {
        let has = |category: &str, type_name: &str| {
            node.extensions.iter().any(|e| {
                !e.disabled
                    && e.category == category
                    && e.type_urls
                        .iter()
                        .any(|t| t.strip_prefix("type.googleapis.com/").unwrap_or(t) == type_name)
            })
        };
        IstioExtensions {
            http_peer_metadata: has("envoy.filters.http", PEER_METADATA_TYPE),
            http_stats: has("envoy.filters.http", STATS_TYPE),
            tcp_stats: has("envoy.filters.network", STATS_TYPE),
            tcp_metadata_exchange: has("envoy.filters.network", METADATA_EXCHANGE_TYPE),
            upstream_metadata_exchange: has(
                "envoy.filters.upstream_network",
                METADATA_EXCHANGE_TYPE,
            ),
        }
    }

    pub fn any(&self) -> bool {
        *self != IstioExtensions::default()
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Proxy {
    pub id: String,
    pub proxy_type: ProxyType,
    pub ip: String,
    pub pod_name: String,
    pub namespace: String,
    pub dns_domain: String,
    pub labels: BTreeMap<String, String>,
    pub metadata: BTreeMap<String, String>,
    pub generator: Generator,
    /// `INTERCEPTION_MODE: NONE`: no iptables, so outbound listeners must bind real ports on loopback.
    pub interception_none: bool,
    /// Every address of the proxy (node id and `INSTANCE_IPS`) is IPv6.
    pub ipv6_only: bool,
    /// `region/zone/subzone`: the node's locality, else the `istio-locality` label (`a.b.c`).
    pub locality: String,
    pub user_agent: String,
    pub istio_version: String,
    /// Who the stream proved to be (token or client certificate on the TLS port); `None` on the
    /// plaintext port or when nothing was presented. Workload certificates and gateway secrets are
    /// only served to a verified identity.
    pub identity: Option<crate::model::identity::Identity>,
    /// Why this identity may not be sent its namespace's Secrets (its service account may not list
    /// them, as istiod checks); `None` when it may.
    pub secrets_refused: Option<String>,
    /// `PROXY_CONFIG` of the node metadata (what istio-agent sends: mesh `defaultConfig` with the
    /// pod's `proxy.istio.io/config`), as JSON; istiod reads it before the mesh default.
    pub proxy_config: Option<serde_json::Value>,
    /// The client's address (`ip:port`), for the debug pages.
    pub peer: String,
    /// istio-proxy's telemetry filters, where the proxy has them.
    pub istio_extensions: IstioExtensions,
}

impl Proxy {
    /// A boolean node-metadata flag as istio-agent writes them (`"true"`).
    pub fn flag(&self, key: &str) -> bool {
        self.metadata
            .get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// `ISTIO_META_DNS_CAPTURE`: istio-agent answers the pod's DNS queries (its NameTable).
    pub fn dns_capture(&self) -> bool {
        self.flag("DNS_CAPTURE")
    }

    /// Whether this proxy matches ServiceEntries' auto-allocated addresses as VIPs, as istiod's
    /// `nodeUsesAutoallocatedIPs`: allocation is on (the mesh's, or the proxy's own
    /// `DNS_AUTO_ALLOCATE`) and the proxy consumes them (DNS capture, or a waypoint).
    pub fn uses_auto_allocated_ips(&self, mesh_allocates: bool) -> bool {
        let allocation = mesh_allocates || self.flag("DNS_AUTO_ALLOCATE");
        let consumes = self.dns_capture() || self.proxy_type == ProxyType::Waypoint;
        allocation && consumes
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProxyError {
    #[error("node is required on the first request")]
    MissingNode,
    #[error("invalid node id {0:?}: expected type~ip~pod.namespace~namespace.svc.cluster.local")]
    BadId(String),
    #[error("unknown proxy type {0:?} in node id")]
    BadType(String),
}

fn value_string(v: &Value) -> Option<String> {
    match v.kind.as_ref()? {
        ValueKind::StringValue(s) => Some(s.clone()),
        ValueKind::NumberValue(n) => Some(n.to_string()),
        ValueKind::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A protobuf `Value` as JSON.
fn value_json(v: &Value) -> serde_json::Value {
    match v.kind.as_ref() {
        Some(ValueKind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(ValueKind::NumberValue(n)) => serde_json::Number::from_f64(*n)
            .map(|n| {
                // Integral numbers as integers, so they read back as the integers they were.
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                    .map_or(serde_json::Value::Number(n), |f| (f as i64).into())
            })
            .unwrap_or(serde_json::Value::Null),
        Some(ValueKind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(ValueKind::StructValue(s)) => serde_json::Value::Object(
            s.fields
                .iter()
                .map(|(k, v)| (k.clone(), value_json(v)))
                .collect(),
        ),
        Some(ValueKind::ListValue(l)) => {
            serde_json::Value::Array(l.values.iter().map(value_json).collect())
        }
        Some(ValueKind::NullValue(_)) | None => serde_json::Value::Null,
    }
}

fn struct_strings(s: &Struct) -> BTreeMap<String, String> {
    s.fields
        .iter()
        .filter_map(|(k, v)| value_string(v).map(|s| (k.clone(), s)))
        .collect()
}

impl Proxy {
    /// The id istiod knows a proxy by (`pod.namespace`, the node id's third part): what
    /// `istioctl proxy-status` lists and `istioctl proxy-status <pod>` asks for.
    pub fn istio_id(&self) -> &str {
        self.id.split('~').nth(2).unwrap_or(&self.id)
    }

    /// The node type the node id starts with (`sidecar`, `router`, `ztunnel`), as istiod reports
    /// it.
    pub fn node_type(&self) -> &str {
        self.id.split('~').next().unwrap_or_default()
    }

    /// A debugging client (istioctl and other ADSC-based tools: `GENERATOR=event`), not a proxy:
    /// left out of the sync status and the proxy counts, as istiod leaves out nodes without proxy
    /// config.
    pub fn is_debug_client(&self) -> bool {
        self.metadata.get("GENERATOR").is_some_and(|g| g == "event")
    }

    pub fn from_node(node: Option<&Node>) -> Result<Proxy, ProxyError> {
        let node = node.ok_or(ProxyError::MissingNode)?;
        let parts: Vec<&str> = node.id.split('~').collect();
        if parts.len() != 4 || parts.iter().any(|p| p.is_empty()) {
            return Err(ProxyError::BadId(node.id.clone()));
        }
        let proxy_type = match parts[0] {
            "sidecar" => ProxyType::Sidecar,
            "router" => ProxyType::Router,
            "ztunnel" => ProxyType::Ztunnel,
            "waypoint" => ProxyType::Waypoint,
            other => return Err(ProxyError::BadType(other.to_string())),
        };
        let empty = Struct::default();
        let meta_struct = node.metadata.as_ref().unwrap_or(&empty);
        let metadata = struct_strings(meta_struct);
        let labels = match meta_struct
            .fields
            .get("LABELS")
            .and_then(|v| v.kind.as_ref())
        {
            Some(ValueKind::StructValue(s)) => struct_strings(s),
            _ => BTreeMap::new(),
        };
        let (pod_name, pod_ns) = parts[2].split_once('.').unwrap_or((parts[2], ""));
        let namespace = metadata
            .get("NAMESPACE")
            .cloned()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| pod_ns.to_string());
        let dns_domain = parts[3].to_string();
        let user_agent = node.user_agent_name.clone();
        let is_grpc_agent = user_agent.to_ascii_lowercase().starts_with("grpc");
        let generator = if metadata.get("GENERATOR").is_some_and(|g| g == "grpc") || is_grpc_agent {
            Generator::Grpc
        } else {
            Generator::Envoy
        };
        let ipv6_only = std::iter::once(parts[1])
            .chain(
                metadata
                    .get("INSTANCE_IPS")
                    .map(String::as_str)
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|ip| !ip.is_empty()),
            )
            .all(|ip| matches!(ip.parse::<std::net::IpAddr>(), Ok(std::net::IpAddr::V6(_))));
        let locality = match node.locality.as_ref() {
            Some(l) if !l.region.is_empty() || !l.zone.is_empty() || !l.sub_zone.is_empty() => {
                format!("{}/{}/{}", l.region, l.zone, l.sub_zone)
            }
            _ => labels
                .get("istio-locality")
                .map(|l| l.replace('.', "/"))
                .unwrap_or_default(),
        };
        Ok(Proxy {
            locality,
            id: node.id.clone(),
            ipv6_only,
            proxy_type,
            ip: parts[1].to_string(),
            pod_name: pod_name.to_string(),
            namespace: if namespace.is_empty() {
                "default".into()
            } else {
                namespace
            },
            dns_domain,
            labels,
            interception_none: metadata
                .get("INTERCEPTION_MODE")
                .is_some_and(|m| m == "NONE"),
            istio_version: metadata.get("ISTIO_VERSION").cloned().unwrap_or_default(),
            identity: None,
            secrets_refused: None,
            proxy_config: meta_struct.fields.get("PROXY_CONFIG").map(value_json),
            peer: String::new(),
            metadata,
            generator,
            user_agent,
            istio_extensions: IstioExtensions::of(node),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, meta: &[(&str, &str)], agent: &str) -> Node {
        Node {
            id: id.into(),
            user_agent_name: agent.into(),
            metadata: Some(Struct {
                fields: meta
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.to_string(),
                            Value {
                                kind: Some(ValueKind::StringValue(v.to_string())),
                            },
                        )
                    })
                    .collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn parses_istio_node_ids() {
        let p = Proxy::from_node(Some(&node(
            "sidecar~10.1.2.3~web-1.shop~shop.svc.cluster.local",
            &[],
            "envoy",
        )))
        .unwrap();
        assert_eq!(
            (
                p.proxy_type,
                p.ip.as_str(),
                p.pod_name.as_str(),
                p.namespace.as_str()
            ),
            (ProxyType::Sidecar, "10.1.2.3", "web-1", "shop")
        );
        assert_eq!(p.generator, Generator::Envoy);
        let g = Proxy::from_node(Some(&node(
            "sidecar~10.0.0.1~c.ns~ns.svc.cluster.local",
            &[("GENERATOR", "grpc")],
            "",
        )))
        .unwrap();
        assert_eq!(g.generator, Generator::Grpc);
        let ua = Proxy::from_node(Some(&node(
            "sidecar~10.0.0.1~c.ns~ns.svc.cluster.local",
            &[],
            "gRPC Python",
        )))
        .unwrap();
        assert_eq!(ua.generator, Generator::Grpc);
        let none = Proxy::from_node(Some(&node(
            "router~1.1.1.1~gw.istio-system~istio-system.svc.cluster.local",
            &[("INTERCEPTION_MODE", "NONE"), ("NAMESPACE", "gw-ns")],
            "envoy",
        )))
        .unwrap();
        assert!(none.interception_none);
        assert_eq!(none.namespace, "gw-ns", "metadata NAMESPACE wins");
    }

    #[test]
    fn rejects_bad_nodes() {
        assert_eq!(Proxy::from_node(None).unwrap_err(), ProxyError::MissingNode);
        assert!(matches!(
            Proxy::from_node(Some(&node("just-a-name", &[], ""))),
            Err(ProxyError::BadId(_))
        ));
        assert!(matches!(
            Proxy::from_node(Some(&node("alien~1~a.b~c", &[], ""))),
            Err(ProxyError::BadType(_))
        ));
    }
}
