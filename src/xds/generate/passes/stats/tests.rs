//! The telemetry filters as istio-proxy reads them: each config decoded with descriptors written
//! from istio-proxy's protos (strictly: a field the filter does not know fails), and compared
//! with what istiod sends for the same Telemetry.

use super::*;
use crate::envoy::json::{Names, to_json};
use crate::xds::generate::generate;
use crate::xds::proxy::{IstioExtensions, Proxy};
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::config::core::v3::{Extension, Node};
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

/// Every filter istio-proxy has.
const ISTIO_PROXY: IstioExtensions = IstioExtensions {
    http_peer_metadata: true,
    http_stats: true,
    tcp_stats: true,
    tcp_metadata_exchange: true,
    upstream_metadata_exchange: true,
};

/// The workload at 10.0.0.9 (namespace `a`) serves HTTP on 80 and TCP on 5432, and calls `web`.
const MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: app, namespace: a}\n\
spec: {hosts: [app.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 80, name: http, protocol: HTTP}, {number: 5432, name: tcp, protocol: TCP}], resolution: STATIC, \
endpoints: [{address: 10.0.0.9, labels: {app: app, security.istio.io/tlsMode: istio}}]}\n---\n\
apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: web, namespace: a}\n\
spec: {hosts: [web.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}], resolution: STATIC, \
endpoints: [{address: 10.0.0.20, labels: {security.istio.io/tlsMode: istio}}]}\n";

const MESH_CONFIG: &str = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultProviders: {metrics: [prometheus]}\n";

use crate::testing::push_context_with_mesh_config as ctx;

fn sidecar(ext: IstioExtensions) -> Proxy {
    let mut p = crate::testing::proxy(
        "sidecar~10.0.0.9~app-1.a~a.svc.cluster.local",
        &[],
        &[("app", "app")],
    );
    p.identity = Some(crate::model::identity::Identity {
        trust_domain: "cluster.local".into(),
        namespace: "a".into(),
        service_account: "default".into(),
    });
    p.istio_extensions = ext;
    p
}

fn listeners(ctx: &PushContext, p: &Proxy) -> Vec<Listener> {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Listener, None)
        .iter()
        .map(|r| Listener::decode(r.any.value.as_slice()).unwrap())
        .collect()
}

fn clusters(ctx: &PushContext, p: &Proxy) -> Vec<Cluster> {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Cluster, None)
        .iter()
        .map(|r| Cluster::decode(r.any.value.as_slice()).unwrap())
        .collect()
}

fn hcms(l: &Listener) -> Vec<HttpConnectionManager> {
    l.filter_chains
        .iter()
        .chain(l.default_filter_chain.as_ref())
        .flat_map(|c| &c.filters)
        .filter_map(|f| match &f.config_type {
            Some(filter::ConfigType::TypedConfig(a))
                if a.type_url == HttpConnectionManager::type_url() =>
            {
                HttpConnectionManager::decode(a.value.as_slice()).ok()
            }
            _ => None,
        })
        .collect()
}

fn named<'a>(ls: &'a [Listener], name: &str) -> &'a Listener {
    ls.iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

/// A TypedStruct's config read as istio-proxy reads it: the message its type URL names, from the
/// Struct, refusing unknown fields.
fn typed_struct_json(a: &Any) -> (String, serde_json::Value) {
    assert_eq!(a.type_url, TYPED_STRUCT_TYPE);
    let ts = TypedStruct::decode(a.value.as_slice()).unwrap();
    let fields = to_json(
        "google.protobuf.Struct",
        &ts.value.unwrap_or_default().encode_to_vec(),
        Names::Proto,
    )
    .unwrap();
    let name = ts
        .type_url
        .trim_start_matches("type.googleapis.com/")
        .to_string();
    crate::envoy::proto_merge::check_json(&name, &fields, true)
        .unwrap_or_else(|e| panic!("{name} refuses {fields}: {e}"));
    (name, fields)
}

/// An `istio.stats` config as the filter decodes it (proto field names, as istiod's tests print
/// it).
fn stats_json(a: &Any) -> serde_json::Value {
    assert_eq!(a.type_url, "type.googleapis.com/stats.PluginConfig");
    to_json(&a.type_url, &a.value, Names::Proto).unwrap()
}

fn http_config(f: &HttpFilter) -> &Any {
    match &f.config_type {
        Some(http_filter::ConfigType::TypedConfig(a)) => a,
        other => panic!("{}: {other:?}", f.name),
    }
}

fn network_config(f: &Filter) -> &Any {
    match &f.config_type {
        Some(filter::ConfigType::TypedConfig(a)) => a,
        other => panic!("{}: {other:?}", f.name),
    }
}

/// An upstream Envoy (no istio-proxy extensions) is sent none of istio-proxy's filters, whatever
/// the Telemetry says; istio-proxy gets them everywhere istiod puts them.
#[test]
fn only_proxies_that_have_the_filters_get_them() {
    let ctx = ctx(&format!("{MESH}{MESH_CONFIG}"));
    let plain = sidecar(IstioExtensions::default());
    let text = format!("{:?}", listeners(&ctx, &plain));
    assert!(
        !text.contains(STATS_FILTER),
        "no istio.stats for upstream Envoy"
    );
    assert!(!text.contains(METADATA_EXCHANGE_FILTER));
    let plain_clusters = clusters(&ctx, &plain);
    assert!(plain_clusters.iter().all(|c| c.filters.is_empty()));
    assert_eq!(istio_alpn(&plain_clusters), ["istio"]);

    let istio = sidecar(ISTIO_PROXY);
    let ls = listeners(&ctx, &istio);
    // Every HTTP connection manager: the peer metadata filter first, istio.stats just before the
    // router.
    for l in &ls {
        for hcm in hcms(l) {
            let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
            assert_eq!(
                names.first(),
                Some(&METADATA_EXCHANGE_FILTER),
                "{}: {names:?}",
                l.name
            );
            assert_eq!(
                &names[names.len() - 2..],
                [STATS_FILTER, ROUTER],
                "{}: {names:?}",
                l.name
            );
        }
    }
    // Inbound TCP: the TCP metadata exchange first, istio.stats before the TCP proxy.
    let inbound = named(&ls, "virtualInbound");
    let tcp_chain = inbound
        .filter_chains
        .iter()
        .find(|c| {
            c.filter_chain_match
                .as_ref()
                .and_then(|m| m.destination_port)
                .is_some_and(|p| p.value == 5432)
                && c.filters.iter().any(|f| f.name == TCP_PROXY)
        })
        .expect("the inbound TCP chain of 5432");
    let names: Vec<&str> = tcp_chain.filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names.first(), Some(&METADATA_EXCHANGE_FILTER), "{names:?}");
    assert_eq!(
        &names[names.len() - 2..],
        [STATS_FILTER, TCP_PROXY],
        "{names:?}"
    );
    let (type_name, mx) = typed_struct_json(network_config(&tcp_chain.filters[0]));
    assert_eq!(type_name, METADATA_EXCHANGE_TYPE);
    assert_eq!(
        mx,
        serde_json::json!({"protocol": "istio-peer-exchange", "enable_discovery": true})
    );
    // Outbound TCP: istio.stats, no listener-side exchange (the cluster does it).
    let outbound = named(&ls, "0.0.0.0_9000");
    for chain in &outbound.filter_chains {
        let names: Vec<&str> = chain.filters.iter().map(|f| f.name.as_str()).collect();
        assert!(!names.contains(&METADATA_EXCHANGE_FILTER), "{names:?}");
        assert!(names.contains(&STATS_FILTER), "{names:?}");
    }
    // Outbound clusters: the exchange as a cluster filter, `istio-peer-exchange` offered first
    // where Istio's mTLS applies.
    let web = clusters(&ctx, &istio)
        .into_iter()
        .find(|c| c.name == "outbound|9000||web.a.svc.cluster.local")
        .unwrap();
    assert_eq!(web.filters.len(), 1);
    assert_eq!(web.filters[0].name, METADATA_EXCHANGE_FILTER);
    assert_eq!(
        istio_alpn(&clusters(&ctx, &istio)),
        ["istio-peer-exchange", "istio"]
    );
}

/// The ALPN of the ISTIO_MUTUAL socket of `web`'s TCP cluster.
fn istio_alpn(cs: &[Cluster]) -> Vec<String> {
    cs.iter()
        .find(|c| c.name == "outbound|9000||web.a.svc.cluster.local")
        .into_iter()
        .flat_map(|c| &c.transport_socket_matches)
        .find(|m| m.name == "tlsMode-istio")
        .and_then(|m| m.transport_socket.as_ref())
        .and_then(|t| match &t.config_type {
            Some(transport_socket::ConfigType::TypedConfig(a)) => {
                UpstreamTlsContext::decode(a.value.as_slice()).ok()
            }
            _ => None,
        })
        .and_then(|t| t.common_tls_context)
        .map(|c| c.alpn_protocols)
        .unwrap_or_default()
}

/// The peer metadata filter's config, inbound and outbound, is istiod's, and reads as
/// `io.istio.http.peer_metadata.Config`; `metadataExchangeHeaders: IN_MESH` keeps the headers off
/// requests leaving the mesh.
#[test]
fn peer_metadata_configs_are_istiods() {
    let ctx = ctx(MESH);
    let ls = listeners(&ctx, &sidecar(ISTIO_PROXY));
    let first = |l: &Listener| {
        let hcm = hcms(l)
            .into_iter()
            .next()
            .expect("an HTTP connection manager");
        typed_struct_json(http_config(&hcm.http_filters[0]))
    };
    let (type_name, inbound) = first(named(&ls, "virtualInbound"));
    assert_eq!(type_name, PEER_METADATA_TYPE);
    assert_eq!(
        inbound,
        serde_json::json!({
            "downstream_discovery": [{"istio_headers": {}}, {"workload_discovery": {}}],
            "downstream_propagation": [{"istio_headers": {}}],
        })
    );
    let (_, outbound) = first(named(&ls, "0.0.0.0_8080"));
    assert_eq!(
        outbound,
        serde_json::json!({
            "upstream_discovery": [{"istio_headers": {}}, {"workload_discovery": {}}],
            "upstream_propagation": [{"istio_headers": {}}],
        })
    );
    let mut in_mesh = sidecar(ISTIO_PROXY);
    in_mesh.proxy_config = Some(serde_json::json!({
        "proxyHeaders": {"metadataExchangeHeaders": {"mode": "IN_MESH"}}
    }));
    let ls = listeners(&ctx, &in_mesh);
    let (_, outbound) = first(named(&ls, "0.0.0.0_8080"));
    assert_eq!(
        outbound["upstream_propagation"],
        serde_json::json!([{"istio_headers": {"skip_external_clusters": true}}])
    );
}

fn telemetry(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{spec}\n"
    )
}

/// The `istio.stats` configs (outbound HTTP, inbound HTTP) for `yaml` on top of the mesh.
fn stats_of(yaml: &str) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let ctx = ctx(&format!("{MESH}{yaml}"));
    let ls = listeners(&ctx, &sidecar(ISTIO_PROXY));
    let of = |l: &Listener| -> Vec<serde_json::Value> {
        hcms(l)
            .into_iter()
            .next()
            .unwrap()
            .http_filters
            .iter()
            .filter(|f| f.name == STATS_FILTER)
            .map(|f| stats_json(http_config(f)))
            .collect()
    };
    (
        of(named(&ls, "0.0.0.0_8080")),
        of(named(&ls, "virtualInbound")),
    )
}

const OVERRIDES: &str = "  metrics:\n  - providers: [{name: prometheus}]\n    overrides:\n    - match: {metric: REQUEST_COUNT}\n      tagOverrides:\n        remove: {operation: REMOVE}\n        add: {value: bar}\n";

/// Telemetry `metrics` merged as istiod merges them, giving istiod's configs for the same
/// inputs (the expected values are those istiod's own tests hold for these Telemetries).
#[test]
fn metrics_overrides_merge_as_istiods() {
    // No provider anywhere: no stats filter (the metadata exchange stays).
    assert_eq!(stats_of(""), (vec![], vec![]));
    // The chart's default provider: the plain filter, inbound without the Host fallback.
    let (out, inbound) = stats_of(MESH_CONFIG);
    assert_eq!(out, [serde_json::json!({})]);
    assert_eq!(
        inbound,
        [serde_json::json!({"disable_host_header_fallback": true})]
    );
    // Tag overrides of one metric.
    let (out, _) = stats_of(&telemetry("istio-system", "mesh", OVERRIDES));
    assert_eq!(
        out,
        [serde_json::json!({"metrics": [
            {"dimensions": {"add": "bar"}, "name": "requests_total", "tags_to_remove": ["remove"]}
        ]})]
    );
    // Everything disabled in the root namespace, overrides in the namespace: the namespace wins.
    let disabled = "  metrics:\n  - providers: [{name: prometheus}]\n    overrides:\n    - match: {metric: ALL_METRICS}\n      disabled: true\n";
    let (out, inbound) = stats_of(&format!(
        "{}{}",
        telemetry("istio-system", "mesh", disabled),
        telemetry("a", "ns", OVERRIDES)
    ));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["metrics"][0]["name"], "requests_total");
    assert_eq!(inbound.len(), 1);
    // Disabled for clients only: outbound has no filter, inbound keeps it.
    let client_off = "  metrics:\n  - providers: [{name: prometheus}]\n    overrides:\n    - match: {mode: CLIENT}\n      disabled: true\n";
    let (out, inbound) = stats_of(&telemetry("istio-system", "mesh", client_off));
    assert!(out.is_empty());
    assert_eq!(inbound.len(), 1);
    // One metric dropped; the TCP reporting interval.
    let dropped = "  metrics:\n  - providers: [{name: prometheus}]\n    reportingInterval: 10s\n    overrides:\n    - match: {metric: REQUEST_DURATION, mode: SERVER}\n      disabled: true\n";
    let (out, inbound) = stats_of(&telemetry("istio-system", "mesh", dropped));
    assert_eq!(out, [serde_json::json!({"tcp_reporting_duration": "10s"})]);
    assert_eq!(
        inbound,
        [serde_json::json!({
            "disable_host_header_fallback": true,
            "tcp_reporting_duration": "10s",
            "metrics": [{"name": "request_duration_milliseconds", "drop": true}]
        })]
    );
    // Overrides of all metrics list each standard metric, by istiod's order.
    let all = "  metrics:\n  - providers: [{name: prometheus}]\n    overrides:\n    - tagOverrides: {add: {value: bar}}\n";
    let (out, _) = stats_of(&telemetry("istio-system", "mesh", all));
    let names: Vec<&str> = out[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "request_messages_total",
            "response_messages_total",
            "requests_total",
            "request_duration_milliseconds",
            "request_bytes",
            "response_bytes",
            "tcp_connections_closed_total",
            "tcp_connections_opened_total",
            "tcp_received_bytes_total",
            "tcp_sent_bytes_total"
        ]
    );
    // A provider that is not Prometheus gives no filter.
    let other = "  metrics:\n  - providers: [{name: stackdriver}]\n";
    assert_eq!(
        stats_of(&telemetry("istio-system", "mesh", other)).0.len(),
        0
    );
}

/// What a node reports decides which filters it is sent: by category and config type, the
/// `type.googleapis.com/` prefix or not, a disabled extension not counted.
#[test]
fn node_extensions_say_which_filters_a_proxy_has() {
    let ext = |category: &str, type_url: &str, disabled: bool| Extension {
        name: "x".into(),
        category: category.into(),
        type_urls: vec![type_url.into()],
        disabled,
        ..Default::default()
    };
    let node = Node {
        id: "sidecar~10.0.0.9~app-1.a~a.svc.cluster.local".into(),
        extensions: vec![
            ext("envoy.filters.http", "stats.PluginConfig", false),
            ext(
                "envoy.filters.network",
                "type.googleapis.com/stats.PluginConfig",
                false,
            ),
            ext("envoy.filters.http", PEER_METADATA_TYPE, true),
            ext(
                "envoy.filters.upstream_network",
                METADATA_EXCHANGE_TYPE,
                false,
            ),
            ext(
                "envoy.filters.http",
                "envoy.extensions.filters.http.router.v3.Router",
                false,
            ),
        ],
        ..Default::default()
    };
    let p = Proxy::from_node(Some(&node)).unwrap();
    assert_eq!(
        p.istio_extensions,
        IstioExtensions {
            http_stats: true,
            tcp_stats: true,
            upstream_metadata_exchange: true,
            ..Default::default()
        }
    );
}

/// HBONE's plumbing on a sidecar (`connect_originate` when it sends HBONE, `connect_terminate`
/// when it takes it) reports nothing itself, as istiod's: the chains inside the tunnel do.
#[test]
fn hbone_tunnel_ends_carry_no_stats() {
    let yaml = format!("{MESH}{MESH_CONFIG}");
    let (mut mesh, _) = crate::model::mesh::MeshSettings::default()
        .with_mesh_config(&crate::testing::store(&yaml).snapshot());
    mesh.send_hbone = true;
    mesh.sidecar_hbone_listen = true;
    let ctx = crate::testing::push_context_with(&yaml, mesh);
    let mut p = sidecar(ISTIO_PROXY);
    p.metadata.insert("ENABLE_HBONE".into(), "true".into());
    let ls = listeners(&ctx, &p);
    for name in ["connect_originate", "connect_terminate"] {
        let l = named(&ls, name);
        let text = format!("{l:?}");
        assert!(!text.contains("istio.stats"), "{name}: {text}");
    }
    let main = named(&ls, "main_internal");
    assert!(
        format!("{main:?}").contains("istio.stats"),
        "the chains inside the tunnel report"
    );
}
