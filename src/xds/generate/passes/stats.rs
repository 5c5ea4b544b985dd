//! Istio's standard metrics (`istio_requests_total`, `istio_request_duration_milliseconds`,
//! `istio_tcp_*`, ...), configured as istiod 1.30 configures them (`model/telemetry.go`,
//! `networking/core/listener_builder.go`, `networkfilter.go`, `cluster_builder.go`): a finishing
//! pass that adds istio-proxy's filters to what was built.
//!
//! - Metadata exchange, so each side knows its peer: the peer metadata filter
//!   (`istio.metadata_exchange`) first in every HTTP connection manager (inbound: discover the
//!   downstream peer and answer with our own; elsewhere: the upstream's), the TCP metadata
//!   exchange first in inbound TCP chains (and gateway chains of ISTIO_MUTUAL servers), and on
//!   outbound clusters as a cluster filter, with `istio-peer-exchange` offered first in their
//!   ISTIO_MUTUAL ALPN.
//! - `istio.stats` with the Telemetry API's `metrics` (and MeshConfig `defaultProviders.metrics`)
//!   merged as istiod merges them: per Prometheus provider, per mode (client for outbound and
//!   gateways, server inbound), overrides of tags (CEL values, removals) and metrics dropped, a
//!   mode disabled whole, the TCP reporting interval. Before the router in HTTP connection
//!   managers, before the TCP proxy in TCP chains.
//!
//! These filters exist only in istio-proxy. istiod sends them to every proxy; Rudder sends each
//! only to a proxy that reports having it (`node.extensions`, by category and config type), so an
//! upstream Envoy is never sent a filter it would refuse. The pass runs after TrafficExtensions
//! (whose anchors are the security filters at the front of each chain) and before EnvoyFilter
//! patches (which may patch these filters, as under istiod).

use crate::config::mesh::is_prometheus_provider;
use crate::config::telemetry::{IstioMetric, MetricSelector, Metrics, TagOperation, WorkloadMode};
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Built, Class, Pass, Typed};
use crate::xds::generate::typed_listener::{Chain, ListenerRole, NetworkFilter, TCP_PROXY};
use crate::xds::proxy::{METADATA_EXCHANGE_TYPE, PEER_METADATA_TYPE, STATS_TYPE};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, Filter as ClusterFilter};
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    DownstreamTlsContext, UpstreamTlsContext,
};
use envoy_types::pb::google::protobuf::{Any, ListValue, Struct, Value, value};
use prost::{Message, Name};
use std::collections::{BTreeMap, BTreeSet};

/// istio-proxy's stats filter config, compiled from `proto/istio/proxy/stats.proto`.
pub mod pb {
    tonic::include_proto!("stats");
}

/// The name istiod gives both filters (HTTP and network) of each kind.
pub const STATS_FILTER: &str = "istio.stats";
pub const METADATA_EXCHANGE_FILTER: &str = "istio.metadata_exchange";
const ROUTER: &str = "envoy.filters.http.router";
const PEER_EXCHANGE_ALPN: &str = "istio-peer-exchange";

/// istiod's names of the standard metrics in Prometheus (without the `istio_` prefix).
fn prometheus_name(metric: &str) -> &str {
    match metric {
        "REQUEST_COUNT" => "requests_total",
        "REQUEST_DURATION" => "request_duration_milliseconds",
        "REQUEST_SIZE" => "request_bytes",
        "RESPONSE_SIZE" => "response_bytes",
        "TCP_OPENED_CONNECTIONS" => "tcp_connections_opened_total",
        "TCP_CLOSED_CONNECTIONS" => "tcp_connections_closed_total",
        "TCP_SENT_BYTES" => "tcp_sent_bytes_total",
        "TCP_RECEIVED_BYTES" => "tcp_received_bytes_total",
        "GRPC_REQUEST_MESSAGES" => "request_messages_total",
        "GRPC_RESPONSE_MESSAGES" => "response_messages_total",
        custom => custom,
    }
}

/// Every standard metric but ALL_METRICS, by name, sorted (istiod's `allMetrics`).
fn all_metrics() -> Vec<String> {
    let mut names: Vec<String> = [
        IstioMetric::REQUEST_COUNT,
        IstioMetric::REQUEST_DURATION,
        IstioMetric::REQUEST_SIZE,
        IstioMetric::RESPONSE_SIZE,
        IstioMetric::TCP_OPENED_CONNECTIONS,
        IstioMetric::TCP_CLOSED_CONNECTIONS,
        IstioMetric::TCP_SENT_BYTES,
        IstioMetric::TCP_RECEIVED_BYTES,
        IstioMetric::GRPC_REQUEST_MESSAGES,
        IstioMetric::GRPC_RESPONSE_MESSAGES,
    ]
    .iter()
    .map(|m| format!("{m:?}"))
    .collect();
    names.sort();
    names
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Client,
    Server,
}

fn modes(selector: Option<&MetricSelector>) -> Vec<Mode> {
    match selector.map(|s| s.mode) {
        Some(WorkloadMode::CLIENT) => vec![Mode::Client],
        Some(WorkloadMode::SERVER) => vec![Mode::Server],
        _ => vec![Mode::Client, Mode::Server],
    }
}

fn is_all_metrics(selector: Option<&MetricSelector>) -> bool {
    match selector {
        Some(s) if s.custom_metric.is_some() => false,
        Some(MetricSelector {
            metric: Some(m), ..
        }) => *m == IstioMetric::ALL_METRICS,
        _ => true,
    }
}

fn matched_metrics(selector: Option<&MetricSelector>) -> Vec<String> {
    match selector {
        Some(MetricSelector {
            custom_metric: Some(c),
            ..
        }) => vec![c.clone()],
        Some(MetricSelector {
            metric: Some(m), ..
        }) if *m != IstioMetric::ALL_METRICS => vec![format!("{m:?}")],
        _ => all_metrics(),
    }
}

/// One metric's override after merging: dropped or not, tags upserted (`Some(CEL)`) or removed.
#[derive(Debug, Clone, Default, PartialEq)]
struct MetricOverride {
    disabled: Option<bool>,
    tags: BTreeMap<String, Option<String>>,
}

/// What one mode of one provider reports.
#[derive(Debug, Clone, Default, PartialEq)]
struct ModeMetrics {
    disabled: bool,
    overrides: BTreeMap<String, MetricOverride>,
}

/// One provider's metrics after merging (istiod's `metricsConfig`).
#[derive(Debug, Clone, Default, PartialEq)]
struct ProviderMetrics {
    client: ModeMetrics,
    server: ModeMetrics,
    reporting_interval: Option<std::time::Duration>,
}

/// istiod's `mergeMetrics`: the Telemetries' `metrics` (root namespace, namespace, workload, in
/// that order: later ones win) over the mesh's default providers, by provider.
fn merge_metrics(metrics: &[&Metrics], defaults: &[String]) -> BTreeMap<String, ProviderMetrics> {
    type Modes = BTreeMap<Mode, BTreeMap<String, MetricOverride>>;
    let mut providers: BTreeMap<String, Modes> = BTreeMap::new();
    if metrics.is_empty() {
        for p in defaults {
            providers.insert(p.clone(), Modes::new());
        }
    }
    let names =
        |m: &Metrics| -> Vec<String> { m.providers.iter().map(|p| p.name.clone()).collect() };
    let mut in_scope: Vec<String> = defaults.to_vec();
    for m in metrics {
        let n = names(m);
        if !n.is_empty() {
            in_scope = n;
        }
    }
    let in_scope: BTreeSet<String> = in_scope.into_iter().collect();
    let mut parent: Vec<String> = defaults.to_vec();
    let mut disabled_all: BTreeSet<(String, Mode)> = BTreeSet::new();
    let mut intervals: BTreeMap<String, std::time::Duration> = BTreeMap::new();
    for m in metrics {
        let mut provider_names = names(m);
        if provider_names.is_empty() {
            provider_names = parent.clone();
        }
        parent = provider_names.clone();
        for provider in provider_names.iter().filter(|p| in_scope.contains(*p)) {
            if let Some(i) = &m.reporting_interval {
                intervals.insert(provider.clone(), i.as_std());
            }
            let modes_of = providers.entry(provider.clone()).or_insert_with(|| {
                [
                    (Mode::Client, BTreeMap::new()),
                    (Mode::Server, BTreeMap::new()),
                ]
                .into()
            });
            for o in &m.overrides {
                let selector = o.match_.as_ref();
                if is_all_metrics(selector) && o.disabled == Some(true) {
                    for mode in modes(selector) {
                        disabled_all.insert((provider.clone(), mode));
                    }
                    continue;
                }
                let metric_names = matched_metrics(selector);
                for mode in modes(selector) {
                    disabled_all.remove(&(provider.clone(), mode));
                    let by_metric = modes_of.entry(mode).or_default();
                    for metric in &metric_names {
                        let entry = by_metric.entry(metric.clone()).or_default();
                        if o.disabled.is_some() {
                            entry.disabled = o.disabled;
                        }
                        for (tag, change) in &o.tag_overrides {
                            let value = match change.operation {
                                TagOperation::REMOVE => None,
                                TagOperation::UPSERT => {
                                    Some(change.value.clone().unwrap_or_default())
                                }
                            };
                            entry.tags.insert(tag.clone(), value);
                        }
                    }
                }
            }
        }
    }
    providers
        .into_iter()
        .map(|(provider, modes_of)| {
            let mut out = ProviderMetrics {
                reporting_interval: intervals.get(&provider).copied(),
                ..Default::default()
            };
            for (mode, by_metric) in modes_of {
                let target = match mode {
                    Mode::Client => &mut out.client,
                    Mode::Server => &mut out.server,
                };
                if disabled_all.contains(&(provider.clone(), mode)) {
                    target.disabled = true;
                    continue;
                }
                target.overrides = by_metric;
            }
            (provider, out)
        })
        .collect()
}

/// The `istio.stats` configs for a listener class, one per Prometheus provider in effect
/// (istiod's `generateStatsConfig`); none where metrics are off for that class.
fn stats_configs(
    ctx: &PushContext,
    scope: &ScopeView,
    class: Class,
    served: Option<&crate::model::Service>,
) -> Vec<Any> {
    let telemetries = super::access_log::applicable_for(ctx, scope, served);
    let metrics: Vec<&Metrics> = telemetries.iter().flat_map(|t| &t.metrics).collect();
    let merged = merge_metrics(&metrics, &ctx.mesh.default_metrics);
    merged
        .iter()
        .filter(|(name, _)| is_prometheus_provider(&ctx.mesh.extension_providers, name))
        .filter_map(|(_, p)| {
            // A waypoint reports as istiod's waypoints do: the server side of its services.
            let mode = if matches!(class, Class::SidecarInbound | Class::Waypoint) {
                &p.server
            } else {
                &p.client
            };
            if mode.disabled {
                return None;
            }
            let config = pb::PluginConfig {
                disable_host_header_fallback: matches!(
                    class,
                    Class::SidecarInbound | Class::Gateway | Class::Waypoint
                ),
                tcp_reporting_duration: p.reporting_interval.map(|d| prost_types::Duration {
                    seconds: d.as_secs() as i64,
                    nanos: d.subsec_nanos() as i32,
                }),
                metrics: mode
                    .overrides
                    .iter()
                    .map(|(name, o)| pb::MetricConfig {
                        name: prometheus_name(name).to_string(),
                        drop: o.disabled.unwrap_or(false),
                        dimensions: o
                            .tags
                            .iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                            .collect(),
                        tags_to_remove: o
                            .tags
                            .iter()
                            .filter(|(_, v)| v.is_none())
                            .map(|(k, _)| k.clone())
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                reporter: if class == Class::Waypoint {
                    pb::Reporter::ServerGateway as i32
                } else {
                    pb::Reporter::Unspecified as i32
                },
                ..Default::default()
            };
            Some(Any {
                type_url: format!("type.googleapis.com/{STATS_TYPE}"),
                value: config.encode_to_vec(),
            })
        })
        .collect()
}

/// JSON as a protobuf `Value`, by hand: `proto_merge::from_json` would do it through the
/// descriptor pool, which every istio-proxy scope would then keep loaded.
fn json(v: serde_json::Value) -> Value {
    let kind = match v {
        serde_json::Value::Null => value::Kind::NullValue(0),
        serde_json::Value::Bool(b) => value::Kind::BoolValue(b),
        serde_json::Value::Number(n) => value::Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => value::Kind::StringValue(s),
        serde_json::Value::Array(a) => value::Kind::ListValue(ListValue {
            values: a.into_iter().map(json).collect(),
        }),
        serde_json::Value::Object(o) => value::Kind::StructValue(Struct {
            fields: o.into_iter().map(|(k, v)| (k, json(v))).collect(),
        }),
    };
    Value { kind: Some(kind) }
}

/// `xds.type.v3.TypedStruct`, which envoy-types does not generate: a config given as a Struct
/// that the proxy converts into the message `type_url` names.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypedStruct {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Struct>,
}

pub const TYPED_STRUCT_TYPE: &str = "type.googleapis.com/xds.type.v3.TypedStruct";

/// A config istio-proxy reads from a TypedStruct of `type_name` (as istiod sends these two).
fn typed_struct(type_name: &str, fields: serde_json::Value) -> Any {
    let value = match json(fields).kind {
        Some(value::Kind::StructValue(s)) => Some(s),
        _ => None,
    };
    Any {
        type_url: TYPED_STRUCT_TYPE.into(),
        value: TypedStruct {
            type_url: format!("type.googleapis.com/{type_name}"),
            value,
        }
        .encode_to_vec(),
    }
}

/// istiod's `SidecarInboundMetadataFilter` / `SidecarOutboundMetadataFilter(SkipHeaders)`.
fn peer_metadata_filter(inbound: bool, skip_external: bool) -> HttpFilter {
    let config = if inbound {
        serde_json::json!({
            "downstream_discovery": [{"istio_headers": {}}, {"workload_discovery": {}}],
            "downstream_propagation": [{"istio_headers": {}}],
        })
    } else {
        let headers = if skip_external {
            serde_json::json!({"skip_external_clusters": true})
        } else {
            serde_json::json!({})
        };
        serde_json::json!({
            "upstream_discovery": [{"istio_headers": {}}, {"workload_discovery": {}}],
            "upstream_propagation": [{"istio_headers": headers}],
        })
    };
    HttpFilter {
        name: METADATA_EXCHANGE_FILTER.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(typed_struct(
            PEER_METADATA_TYPE,
            config,
        ))),
        ..Default::default()
    }
}

fn metadata_exchange_config() -> Any {
    typed_struct(
        METADATA_EXCHANGE_TYPE,
        serde_json::json!({"protocol": PEER_EXCHANGE_ALPN, "enable_discovery": true}),
    )
}

fn tcp_metadata_exchange_filter() -> NetworkFilter {
    encoded_filter(METADATA_EXCHANGE_FILTER, metadata_exchange_config())
}

/// A network filter of Istio's own, its config packed.
fn encoded_filter(name: &str, config: Any) -> NetworkFilter {
    NetworkFilter::encoded(name, filter::ConfigType::TypedConfig(config))
}

/// Whether a gateway filter chain terminates ISTIO_MUTUAL (the mesh's workload certificate,
/// client certificates required): only there does istiod add the TCP metadata exchange.
fn istio_mutual_chain(chain: &Chain) -> bool {
    let Some(transport_socket::ConfigType::TypedConfig(config)) = chain
        .transport_socket
        .as_ref()
        .and_then(|t| t.config_type.as_ref())
    else {
        return false;
    };
    if config.type_url != DownstreamTlsContext::type_url() {
        return false;
    }
    DownstreamTlsContext::decode(config.value.as_slice()).is_ok_and(|tls| {
        tls.require_client_certificate.is_some_and(|r| r.value)
            && tls.common_tls_context.is_some_and(|c| {
                c.tls_certificate_sds_secret_configs
                    .iter()
                    .any(|s| s.name == "default")
            })
    })
}

/// `istio-peer-exchange` offered first where the cluster speaks Istio's mTLS (istiod's
/// `ALPNInMeshWithMxc`), so the peer's metadata exchange engages.
fn offer_peer_exchange(socket: &mut Option<TransportSocket>) {
    let Some(transport_socket::ConfigType::TypedConfig(config)) =
        socket.as_mut().and_then(|t| t.config_type.as_mut())
    else {
        return;
    };
    if config.type_url != UpstreamTlsContext::type_url() {
        return;
    }
    let Ok(mut tls) = UpstreamTlsContext::decode(config.value.as_slice()) else {
        return;
    };
    let Some(common) = tls.common_tls_context.as_mut() else {
        return;
    };
    if common.alpn_protocols.first().map(String::as_str) == Some("istio") {
        common.alpn_protocols.insert(0, PEER_EXCHANGE_ALPN.into());
        config.value = tls.encode_to_vec();
    }
}

/// Whether istiod adds the cluster-side metadata exchange: outbound service clusters (default
/// and subsets) and the passthrough cluster.
fn exchanges_metadata(c: &Cluster) -> bool {
    c.name.starts_with("outbound|") || c.name == "PassthroughCluster"
}

pub struct IstioTelemetry;

impl Pass for IstioTelemetry {
    fn name(&self) -> &'static str {
        "istio_telemetry"
    }

    fn applies(&self, _ctx: &PushContext, scope: &ScopeView) -> bool {
        scope.istio_extensions.any()
    }

    fn apply(&self, ctx: &PushContext, scope: &ScopeView, resources: &mut Vec<Typed>) {
        let ext = scope.istio_extensions;
        // Built once per scope, cloned into each place.
        let filters = Prebuilt {
            cluster_mx: ClusterFilter {
                name: METADATA_EXCHANGE_FILTER.into(),
                typed_config: Some(metadata_exchange_config()),
                ..Default::default()
            },
            tcp_mx: tcp_metadata_exchange_filter(),
            inbound_peer: peer_metadata_filter(true, false),
            outbound_peer: peer_metadata_filter(false, scope.skip_mx_headers),
        };
        // The stats configs of each class, computed on first use.
        let mut stats: [Option<Vec<Any>>; 3] = Default::default();
        // A waypoint's: per service it serves (its Telemetry may target it), on `main_internal`.
        let mut by_service: std::collections::HashMap<String, Vec<Any>> = Default::default();
        for r in resources.iter_mut() {
            let class = r.class;
            // HBONE's plumbing (a sidecar's or gateway's tunnel ends) carries no traffic of its
            // own to report: the chains inside the tunnel do, as istiod's.
            if class != Class::Waypoint && r.listener_role() == Some(ListenerRole::TunnelEnd) {
                continue;
            }
            if class == Class::Waypoint {
                let Built::Listener(listener) = &mut r.built else {
                    continue;
                };
                if listener.role != ListenerRole::Destinations {
                    continue;
                }
                for chain in listener.chains.iter_mut() {
                    let served = super::access_log::served_by_chain(ctx, chain.id());
                    let configs = by_service
                        .entry(served.map(|s| s.hostname.clone()).unwrap_or_default())
                        .or_insert_with(|| stats_configs(ctx, scope, class, served));
                    add_to_chain(chain, class, ext, configs, &filters);
                }
                continue;
            }
            let slot = match class {
                Class::SidecarInbound => 0,
                Class::SidecarOutbound => 1,
                Class::Gateway => 2,
                _ => continue,
            };
            let configs: &[Any] =
                stats[slot].get_or_insert_with(|| stats_configs(ctx, scope, class, None));
            match &mut r.built {
                Built::Cluster(c)
                    if ext.upstream_metadata_exchange
                        && class != Class::SidecarInbound
                        && exchanges_metadata(c) =>
                {
                    c.filters.push(filters.cluster_mx.clone());
                    offer_peer_exchange(&mut c.transport_socket);
                    for m in &mut c.transport_socket_matches {
                        offer_peer_exchange(&mut m.transport_socket);
                    }
                }
                Built::Listener(listener) => {
                    for chain in listener.all_chains() {
                        add_to_chain(chain, class, ext, configs, &filters);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The filters that are the same everywhere in a scope.
struct Prebuilt {
    cluster_mx: ClusterFilter,
    tcp_mx: NetworkFilter,
    inbound_peer: HttpFilter,
    outbound_peer: HttpFilter,
}

/// The filters of one filter chain: TCP chains (a TCP proxy) and HTTP connection managers.
fn add_to_chain(
    chain: &mut Chain,
    class: Class,
    ext: crate::xds::proxy::IstioExtensions,
    configs: &[Any],
    prebuilt: &Prebuilt,
) {
    if let Some(at) = chain.filters.iter().position(|f| f.name == TCP_PROXY) {
        if ext.tcp_stats {
            let filters = configs
                .iter()
                .map(|c| encoded_filter(STATS_FILTER, c.clone()));
            chain.filters.splice(at..at, filters);
        }
        let mx = match class {
            Class::SidecarInbound => true,
            Class::Gateway => istio_mutual_chain(chain),
            _ => false,
        };
        if ext.tcp_metadata_exchange && mx {
            chain.filters.insert(0, prebuilt.tcp_mx.clone());
        }
        return;
    }
    for hcm in chain.http_connection_managers() {
        if ext.http_stats
            && let Some(at) = hcm.http_filters.iter().position(|h| h.name == ROUTER)
        {
            let filters = configs.iter().map(|c| HttpFilter {
                name: STATS_FILTER.into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(c.clone())),
                ..Default::default()
            });
            hcm.http_filters.splice(at..at, filters);
        }
        // istio-proxy's waypoint metadata filters are not sent (docs/decisions.md).
        if ext.http_peer_metadata && class != Class::Waypoint {
            let peer = if class == Class::SidecarInbound {
                &prebuilt.inbound_peer
            } else {
                &prebuilt.outbound_peer
            };
            hcm.http_filters.insert(0, peer.clone());
        }
    }
}

#[cfg(test)]
mod tests;
