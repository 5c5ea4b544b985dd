//! Istio's standard metrics: istio-proxy's metadata exchange and `istio.stats` filters go to the
//! proxies that report having them (`node.extensions`), never to an upstream Envoy, which would
//! refuse them. Upstream Envoy runs here; istio-proxy's side of the contract is checked with an
//! xDS client of ours that reports istio-proxy's extensions, the configs read with descriptors
//! written from istio-proxy's protos (see the unit tests of `xds::generate::passes::stats`).

use crate::common::ads::{Delta, LDS};
use crate::common::peers::{Backend, Envoy, free_port, peer, request_full};
use crate::common::{Daemon, eventually, http_get, metric, write};
use envoy_types::pb::envoy::config::core::v3::{Extension, Node};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use prost::{Message, Name};

const NS: &str = "shop";
const HOST: &str = "web.shop.svc.cluster.local";

fn config(dir: &std::path::Path, port: u16, backend: u16) {
    write(
        dir,
        "web.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {backend}}}}}]\n"
        ),
    );
    // The istiod chart's mesh config names the Prometheus provider; a Telemetry overrides tags.
    write(
        dir,
        "mesh.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultProviders: {metrics: [prometheus]}\n---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: mesh-default, namespace: istio-system}\nspec:\n  metrics:\n  - providers: [{name: prometheus}]\n    overrides:\n    - match: {metric: REQUEST_COUNT}\n      tagOverrides: {request_host: {value: request.host}}\n",
    );
}

/// With Istio's standard metrics on (default provider and a Telemetry), an upstream Envoy gets
/// none of istio-proxy's filters, accepts everything and serves traffic.
#[test]
fn upstream_envoy_is_never_sent_istio_proxys_filters() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    let backend = Backend::start("v1");
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), port, backend.port);
    let daemon = Daemon::start(dir.path(), &[]);
    let envoy = Envoy::start(&envoy_bin, daemon.addr("grpc-xds"), NS, false);
    eventually(30, "traffic flows", || {
        request_full(port, HOST, "/", &[]).status == 200
    });
    let (_, dump) = http_get(envoy.admin, "/config_dump");
    assert!(!dump.contains("istio.stats"), "no istio.stats");
    assert!(
        !dump.contains("istio.metadata_exchange"),
        "no metadata exchange"
    );
    assert_eq!(metric(&daemon, "pilot_total_xds_rejects"), 0.0);
}

/// A node that reports istio-proxy's extensions gets the peer metadata filter first and
/// `istio.stats` (with the Telemetry's override) before the router.
#[test]
fn an_istio_proxy_node_gets_the_telemetry_filters() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    config(dir.path(), port, 9);
    let daemon = Daemon::start(dir.path(), &[]);
    let extension = |category: &str, type_name: &str| Extension {
        name: type_name.into(),
        category: category.into(),
        type_urls: vec![type_name.into()],
        ..Default::default()
    };
    let node = Node {
        id: format!("sidecar~10.0.0.9~app-1.{NS}~{NS}.svc.cluster.local"),
        extensions: vec![
            extension("envoy.filters.http", "io.istio.http.peer_metadata.Config"),
            extension("envoy.filters.http", "stats.PluginConfig"),
            extension("envoy.filters.network", "stats.PluginConfig"),
            extension(
                "envoy.filters.network",
                "envoy.tcp.metadataexchange.config.MetadataExchange",
            ),
            extension(
                "envoy.filters.upstream_network",
                "envoy.tcp.metadataexchange.config.MetadataExchange",
            ),
        ],
        ..Default::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut s = Delta::open(
            daemon.addr("grpc-xds"),
            DeltaDiscoveryRequest {
                node: Some(node),
                type_url: LDS.into(),
                ..Default::default()
            },
        )
        .await;
        let resp = s.recv().await;
        let listener = resp
            .resources
            .iter()
            .filter_map(|r| r.resource.as_ref())
            .map(|a| Listener::decode(a.value.as_slice()).unwrap())
            .find(|l| l.name == format!("0.0.0.0_{port}"))
            .expect("the service's listener");
        let hcm = listener
            .filter_chains
            .iter()
            .flat_map(|c| &c.filters)
            .find_map(|f| match &f.config_type {
                Some(filter::ConfigType::TypedConfig(a))
                    if a.type_url == HttpConnectionManager::type_url() =>
                {
                    HttpConnectionManager::decode(a.value.as_slice()).ok()
                }
                _ => None,
            })
            .expect("an HTTP connection manager");
        let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names.first(), Some(&"istio.metadata_exchange"), "{names:?}");
        assert_eq!(
            &names[names.len() - 2..],
            ["istio.stats", "envoy.filters.http.router"],
            "{names:?}"
        );
        let stats = &hcm.http_filters[names.len() - 2];
        let Some(
            envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType::TypedConfig(any),
        ) = &stats.config_type
        else {
            panic!("a typed config");
        };
        assert_eq!(any.type_url, "type.googleapis.com/stats.PluginConfig");
        let text = String::from_utf8_lossy(&any.value);
        assert!(text.contains("requests_total") && text.contains("request.host"));
    });
}
