//! Generator and store benchmarks: CDS/EDS/LDS/RDS for one sidecar in meshes of 1,000 and 5,000
//! services, the push context build, the store's batch apply, the file source reloading an
//! edited file, and what one endpoint change costs the push loop as the mesh grows (1,000, 5,000
//! and 20,000 services), and reading a SotW ACK of 1,000 names. `cargo bench --bench generators`.
//! Each generation uses a fresh push context, so the per-scope cache does not hide the work.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rudder::config::parse_yaml;
use rudder::model::mesh::MeshSettings;
use rudder::source::file::{FileSource, check_text};
use rudder::store::{Change, StoreWriter};
use rudder::xds::context::PushContext;
use rudder::xds::generate;
use rudder::xds::proxy::Proxy;
use rudder::xds::types::TypeUrl;
use std::hint::black_box;
use std::sync::Arc;

/// The daemon's allocator, so allocation-heavy work (a registry rebuild) costs what it costs there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `n` ServiceEntries across 10 namespaces, each with 3 endpoints and an HTTP and a TCP port, and a
/// VirtualService for every tenth.
fn mesh_yaml(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let ns = format!("ns{}", i % 10);
        out.push_str(&format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc{i}, namespace: {ns}}}\nspec:\n  hosts: [svc{i}.{ns}.svc.cluster.local]\n  addresses: [240.{}.{}.{}]\n  ports: [{{number: 80, name: http, protocol: HTTP}}, {{number: 9000, name: tcp, protocol: TCP}}]\n  resolution: STATIC\n  endpoints: [{{address: 10.{}.{}.1}}, {{address: 10.{}.{}.2}}, {{address: 10.{}.{}.3}}]\n---\n",
            i / 65536, (i / 256) % 256, i % 256, i / 256, i % 256, i / 256, i % 256, i / 256, i % 256
        ));
        if i % 10 == 0 {
            out.push_str(&format!(
                "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: vs{i}, namespace: {ns}}}\nspec:\n  hosts: [svc{i}.{ns}.svc.cluster.local]\n  http: [{{route: [{{destination: {{host: svc{i}.{ns}.svc.cluster.local}}}}], timeout: 5s, retries: {{attempts: 3}}}}]\n---\n"
            ));
        }
    }
    out
}

fn store_with(n: usize) -> StoreWriter {
    rudder::testing::store(&mesh_yaml(n))
}

fn sidecar() -> Proxy {
    rudder::testing::proxy(
        "sidecar~10.99.0.1~client.ns0~ns0.svc.cluster.local",
        &[],
        &[],
    )
}

fn generators(c: &mut Criterion) {
    let proxy = sidecar();
    for n in [1000, 5000] {
        let store = store_with(n);
        let mesh = MeshSettings::default();
        let mut group = c.benchmark_group(format!("generate/{n}-services"));
        group.sample_size(10);
        group.bench_function("push-context", |b| {
            b.iter(|| black_box(rudder::xds::push::initial_context(&store, &mesh, None)))
        });
        for (name, type_url) in [
            ("cds", TypeUrl::Cluster),
            ("eds", TypeUrl::Endpoint),
            ("lds", TypeUrl::Listener),
            ("rds", TypeUrl::Route),
        ] {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_batched(
                    || rudder::xds::push::initial_context(&store, &mesh, None),
                    |ctx| {
                        let scope = ctx.scope(&proxy);
                        // Named types: ask for everything the wildcard types announce.
                        let names: std::collections::BTreeSet<String> = match type_url {
                            TypeUrl::Endpoint => {
                                generate::generate(&ctx, &proxy, &scope, TypeUrl::Cluster, None)
                                    .iter()
                                    .map(|r| r.name.to_string())
                                    .collect()
                            }
                            TypeUrl::Route => ["80".to_string(), "9000".to_string()].into(),
                            _ => Default::default(),
                        };
                        let names = (!names.is_empty()).then_some(&names);
                        black_box(generate::generate(&ctx, &proxy, &scope, type_url, names))
                    },
                    criterion::BatchSize::LargeInput,
                )
            });
        }
        // The cost of MeshConfig's access log, a finishing pass over every listener.
        let logged = MeshSettings {
            access_log: Some(rudder::model::mesh::AccessLogSettings {
                path: "/dev/stdout".into(),
                json: false,
                format: String::new(),
                listener: true,
            }),
            ..MeshSettings::default()
        };
        // The cost of Telemetry tracing, a second finishing pass over every connection manager.
        let traced_yaml = format!(
            "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    extensionProviders:\n    - name: zipkin\n      zipkin: {{service: svc0.ns0.svc.cluster.local, port: 80}}\n---\napiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: mesh-default, namespace: istio-system}}\nspec:\n  tracing: [{{providers: [{{name: zipkin}}]}}]\n",
            mesh_yaml(n)
        );
        let traced = rudder::testing::store(&traced_yaml);
        let traced_mesh = MeshSettings::default()
            .with_mesh_config(&traced.snapshot())
            .0;
        // The cost of EnvoyFilter patches, the first finishing pass: ten root-namespace
        // EnvoyFilters, each inserting a Lua filter before the router of every outbound HTTP
        // connection manager and merging a connect timeout into every cluster.
        let mut patched_yaml = mesh_yaml(n);
        for i in 0..10 {
            patched_yaml.push_str(&format!(
                "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {{name: ef{i}, namespace: istio-system}}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    match: {{context: SIDECAR_OUTBOUND, listener: {{filterChain: {{filter: {{name: envoy.filters.network.http_connection_manager, subFilter: {{name: envoy.filters.http.router}}}}}}}}}}\n    patch: {{operation: INSERT_BEFORE, value: {{name: lua{i}, typed_config: {{\"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, defaultSourceCode: {{inlineString: \"function envoy_on_request(h) end\"}}}}}}}}\n  - applyTo: CLUSTER\n    match: {{context: SIDECAR_OUTBOUND}}\n    patch: {{operation: MERGE, value: {{connect_timeout: {}s}}}}\n---\n",
                i + 1
            ));
        }
        let patched = rudder::testing::store(&patched_yaml);
        for (name, type_url) in [
            ("lds-envoy-filters", TypeUrl::Listener),
            ("cds-envoy-filters", TypeUrl::Cluster),
        ] {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_batched(
                    || rudder::xds::push::initial_context(&patched, &mesh, None),
                    |ctx| {
                        let scope = ctx.scope(&proxy);
                        black_box(generate::generate(&ctx, &proxy, &scope, type_url, None))
                    },
                    criterion::BatchSize::LargeInput,
                )
            });
        }
        // The cost of Istio's standard metrics for an istio-proxy (one that reports the
        // telemetry filters): the metadata exchange and istio.stats on every connection manager
        // and TCP chain, the exchange on every outbound cluster; the chart's default provider.
        let mut istio_proxy = sidecar();
        istio_proxy.istio_extensions = rudder::xds::proxy::IstioExtensions {
            http_peer_metadata: true,
            http_stats: true,
            tcp_stats: true,
            tcp_metadata_exchange: true,
            upstream_metadata_exchange: true,
        };
        let metrics_yaml = format!(
            "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    defaultProviders: {{metrics: [prometheus]}}\n",
            mesh_yaml(n)
        );
        let metrics_store = rudder::testing::store(&metrics_yaml);
        let metrics_mesh = MeshSettings::default()
            .with_mesh_config(&metrics_store.snapshot())
            .0;
        for (name, type_url) in [
            ("lds-istio-telemetry", TypeUrl::Listener),
            ("cds-istio-telemetry", TypeUrl::Cluster),
        ] {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_batched(
                    || rudder::xds::push::initial_context(&metrics_store, &metrics_mesh, None),
                    |ctx| {
                        let scope = ctx.scope(&istio_proxy);
                        black_box(generate::generate(
                            &ctx,
                            &istio_proxy,
                            &scope,
                            type_url,
                            None,
                        ))
                    },
                    criterion::BatchSize::LargeInput,
                )
            });
        }
        // The cost of multi-network features: an east-west gateway (an AUTO_PASSTHROUGH
        // server: a chain and an SNI-DNAT cluster per service port) and split-horizon EDS (a
        // sidecar's endpoints with meshNetworks naming gateways; every endpoint here is in the
        // sidecar's network, so this is the filter's own cost).
        let east_west_yaml = format!(
            "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: \"\"\n  meshNetworks: |\n    networks:\n      west: {{gateways: [{{address: 192.0.2.9, port: 15443}}]}}\n---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: cross-network, namespace: ns0}}\nspec:\n  selector: {{istio: eastwestgateway}}\n  servers:\n  - port: {{number: 15443, name: tls, protocol: TLS}}\n    tls: {{mode: AUTO_PASSTHROUGH}}\n    hosts: [\"*.local\"]\n",
            mesh_yaml(n)
        );
        let east_west = rudder::testing::store(&east_west_yaml);
        let east_west_mesh = MeshSettings::default()
            .with_mesh_config(&east_west.snapshot())
            .0;
        let gateway = rudder::testing::proxy(
            "router~10.99.0.2~eastwest-0.ns0~ns0.svc.cluster.local",
            &[],
            &[("istio", "eastwestgateway")],
        );
        for (name, type_url) in [
            ("lds-auto-passthrough", TypeUrl::Listener),
            ("cds-auto-passthrough", TypeUrl::Cluster),
        ] {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_batched(
                    || rudder::xds::push::initial_context(&east_west, &east_west_mesh, None),
                    |ctx| {
                        let scope = ctx.scope(&gateway);
                        black_box(generate::generate(&ctx, &gateway, &scope, type_url, None))
                    },
                    criterion::BatchSize::LargeInput,
                )
            });
        }
        let east = rudder::testing::proxy(
            "sidecar~10.99.0.1~client.ns0~ns0.svc.cluster.local",
            &[("NETWORK", "east")],
            &[],
        );
        for (name, store, mesh, proxy) in [
            ("eds-split-horizon", &east_west, &east_west_mesh, &east),
            ("eds-one-network", &store, &mesh, &proxy),
        ] {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_batched(
                    || rudder::xds::push::initial_context(store, mesh, None),
                    |ctx| {
                        let scope = ctx.scope(proxy);
                        let names: std::collections::BTreeSet<String> =
                            generate::generate(&ctx, proxy, &scope, TypeUrl::Cluster, None)
                                .iter()
                                .map(|r| r.name.to_string())
                                .collect();
                        black_box(generate::generate(
                            &ctx,
                            proxy,
                            &scope,
                            TypeUrl::Endpoint,
                            Some(&names),
                        ))
                    },
                    criterion::BatchSize::LargeInput,
                )
            });
        }
        for (name, store, mesh) in [
            ("lds-tracing", &traced, &traced_mesh),
            ("lds-access-log", &store, &logged),
        ] {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_batched(
                    || rudder::xds::push::initial_context(store, mesh, None),
                    |ctx| {
                        let scope = ctx.scope(&proxy);
                        black_box(generate::generate(
                            &ctx,
                            &proxy,
                            &scope,
                            TypeUrl::Listener,
                            None,
                        ))
                    },
                    criterion::BatchSize::LargeInput,
                )
            });
        }
        group.finish();
    }
}

/// One endpoint of one service moves: what the push loop does before any proxy is written to (the
/// snapshot, the registry updated from it, the routing index kept, the decision of what to push and
/// the new push context), against rebuilding the registry and routing index whole as every push did
/// before. The first should grow with the change, not the mesh.
fn one_change(c: &mut Criterion) {
    let mut group = c.benchmark_group("one-endpoint-change");
    group.sample_size(10);
    for n in [1000, 5000, 20000] {
        let store = store_with(n);
        let before = store.snapshot();
        let old = rudder::model::Registry::build(&before, "cluster.local");
        let moved = parse_yaml(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: svc0, namespace: ns0}\nspec:\n  hosts: [svc0.ns0.svc.cluster.local]\n  addresses: [240.0.0.0]\n  ports: [{number: 80, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.1}, {address: 10.0.0.2}, {address: 10.0.0.9}]\n",
            "default",
        )
        .configs;
        store.apply(moved.into_iter().map(Change::Upsert).collect());
        let kinds: std::collections::BTreeSet<_> = [rudder::config::Kind::ServiceEntry].into();
        let mesh = MeshSettings::default();
        let routing = Arc::new(rudder::xds::context::Routing::build(&before, &mesh));
        group.bench_function(BenchmarkId::new("incremental", n), |b| {
            b.iter(|| {
                let snapshot = store.snapshot();
                let (new, delta) = old.update(
                    &before,
                    &snapshot,
                    "cluster.local",
                    &[],
                    &Default::default(),
                );
                assert_eq!(delta.eds_hosts.len(), 1);
                let routing = routing.reuse_or_build(&before, &snapshot, &mesh);
                let decision = rudder::xds::push::decide::decide(&kinds, false, delta, &new);
                let context =
                    PushContext::with_routing(2, snapshot, Arc::new(new), mesh.clone(), routing);
                black_box((decision, context))
            })
        });
        group.bench_function(BenchmarkId::new("whole-rebuild", n), |b| {
            b.iter(|| {
                let snapshot = store.snapshot();
                let new = rudder::model::Registry::build(&snapshot, "cluster.local");
                let delta = old.delta(&new);
                let decision = rudder::xds::push::decide::decide(&kinds, false, delta, &new);
                let context = PushContext::new(2, snapshot, Arc::new(new), mesh.clone());
                black_box((decision, context))
            })
        });
    }
    group.finish();
}

/// A sidecar's full push after one VirtualService changed: with the previous push's clusters and
/// endpoints kept (their inputs did not change: `generate::inputs`), and with every type rebuilt
/// as before. Both generate CDS, EDS (every cluster's), LDS and RDS.
fn one_route_change(c: &mut Criterion) {
    let mut group = c.benchmark_group("one-route-change");
    group.sample_size(10);
    let proxy = sidecar();
    let full_push = |ctx: &PushContext| {
        let scope = ctx.scope(&proxy);
        let clusters = generate::generate(ctx, &proxy, &scope, TypeUrl::Cluster, None);
        let names: std::collections::BTreeSet<String> =
            clusters.iter().map(|r| r.name.to_string()).collect();
        let routes: std::collections::BTreeSet<String> =
            ["80".to_string(), "9000".to_string()].into();
        black_box((
            clusters,
            generate::generate(ctx, &proxy, &scope, TypeUrl::Endpoint, Some(&names)),
            generate::generate(ctx, &proxy, &scope, TypeUrl::Listener, None),
            generate::generate(ctx, &proxy, &scope, TypeUrl::Route, Some(&routes)),
        ))
    };
    for n in [1000, 5000] {
        let store = store_with(n);
        let mesh = MeshSettings::default();
        let first = rudder::xds::push::initial_context(&store, &mesh, None);
        full_push(&first);
        store.apply_yaml(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: vs0, namespace: ns0}\nspec:\n  hosts: [svc0.ns0.svc.cluster.local]\n  http: [{route: [{destination: {host: svc0.ns0.svc.cluster.local}}], timeout: 7s}]\n",
        );
        group.bench_function(BenchmarkId::new("keeping", n), |b| {
            b.iter_batched(
                || {
                    rudder::xds::push::initial_context(&store, &mesh, None)
                        .keeping(&first, generate::inputs::reads)
                },
                |ctx| full_push(&ctx),
                criterion::BatchSize::LargeInput,
            )
        });
        group.bench_function(BenchmarkId::new("rebuilding", n), |b| {
            b.iter_batched(
                || rudder::xds::push::initial_context(&store, &mesh, None),
                |ctx| full_push(&ctx),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn store(c: &mut Criterion) {
    let mut group = c.benchmark_group("store");
    group.sample_size(10);
    for n in [1000, 5000] {
        let parsed = parse_yaml(&mesh_yaml(n), "default");
        group.bench_function(BenchmarkId::new("apply-batch", n), |b| {
            b.iter_batched(
                || parsed.configs.clone(),
                |configs| {
                    let store = StoreWriter::default();
                    black_box(store.apply(configs.into_iter().map(Change::Upsert).collect()))
                },
                criterion::BatchSize::LargeInput,
            )
        });
        let store = store_with(n);
        let one = parsed.configs[0].clone();
        group.bench_function(BenchmarkId::new("update-one", n), |b| {
            let mut port = 80u32;
            b.iter(|| {
                let mut c = one.clone();
                port = port % 60000 + 1;
                if let rudder::config::Spec::ServiceEntry(se) = &mut c.spec {
                    se.ports[0].number = port;
                }
                black_box(store.upsert(c))
            })
        });
        group.bench_function(BenchmarkId::new("snapshot", n), |b| {
            b.iter(|| black_box(store.snapshot()))
        });
    }
    group.finish();
}

/// The file source reloading a file of `n` services after one object changed, against parsing and
/// validating the whole file (what every edit cost before documents were parsed apart).
fn file_source(c: &mut Criterion) {
    let mut group = c.benchmark_group("file-source");
    group.sample_size(10);
    for n in [1000, 5000] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("mesh.yaml");
        let text = mesh_yaml(n);
        let edited = text.replacen("address: 10.0.0.1}", "address: 10.0.0.9}", 1);
        assert_ne!(text, edited);
        std::fs::write(&path, &text).expect("write");
        let store = StoreWriter::default();
        let metrics = std::sync::Arc::new(rudder::source::metrics::FileMetrics::register(
            &mut rudder::metrics::Registry::new(),
        ));
        let mut source = FileSource::new(dir.path(), "default", store, metrics);
        source.sync();
        let mut flip = false;
        group.bench_function(BenchmarkId::new("reload-one-edit", n), |b| {
            b.iter(|| {
                flip = !flip;
                std::fs::write(&path, if flip { &edited } else { &text }).expect("write");
                black_box(source.sync())
            })
        });
        group.bench_function(BenchmarkId::new("check-whole-file", n), |b| {
            b.iter(|| black_box(check_text(&path, &text, "default")))
        });
    }
    group.finish();
}

/// A Kubernetes-sourced mesh of `n` Services in 10 namespaces, each with one EndpointSlice of
/// three endpoints pointing at its three pods, as the Kubernetes source stores them.
fn kubernetes_store(n: usize) -> StoreWriter {
    use rudder::source::kube::convert::IntoConfig;
    use serde_json::json;
    let mut configs = Vec::new();
    for i in 0..n {
        let ns = format!("ns{}", i % 10);
        let name = format!("svc{i}");
        configs.push(
            serde_json::from_value::<k8s_openapi::api::core::v1::Service>(json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"clusterIP": format!("10.96.{}.{}", i / 250, i % 250),
                    "selector": {"app": name}, "ports": [{"name": "http", "port": 80}]},
            }))
            .expect("a Service")
            .into_config(),
        );
        let endpoints: Vec<serde_json::Value> = (0..3)
            .map(|p| {
                let pod = format!("{name}-{p}");
                let ip = format!("10.{}.{}.{}", 1 + p, i / 250, i % 250);
                configs.push(
                    serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(json!({
                        "metadata": {"name": pod, "namespace": ns, "labels": {"app": name}},
                        "spec": {"nodeName": "node-1", "containers": []},
                        "status": {"phase": "Running", "podIP": ip,
                            "conditions": [{"type": "Ready", "status": "True"}]},
                    }))
                    .expect("a Pod")
                    .into_config(),
                );
                json!({"addresses": [ip], "conditions": {"ready": true},
                    "targetRef": {"kind": "Pod", "name": pod, "namespace": ns}})
            })
            .collect();
        configs.push(slice(&ns, &name, endpoints));
    }
    let store = StoreWriter::default();
    store.apply(configs.into_iter().map(Change::Upsert).collect());
    store
}

fn slice(ns: &str, service: &str, endpoints: Vec<serde_json::Value>) -> rudder::config::Config {
    use rudder::source::kube::convert::IntoConfig;
    serde_json::from_value::<k8s_openapi::api::discovery::v1::EndpointSlice>(serde_json::json!({
        "metadata": {"name": format!("{service}-abcde"), "namespace": ns,
            "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": endpoints,
    }))
    .expect("an EndpointSlice")
    .into_config()
}

/// One EndpointSlice update (a pod of service 0 goes unready) in a Kubernetes-sourced mesh: the
/// registry updated from it against rebuilt whole, as `one-endpoint-change` for ServiceEntries.
fn one_slice_change(c: &mut Criterion) {
    let mut group = c.benchmark_group("one-slice-change");
    group.sample_size(10);
    for n in [1000, 5000, 20000] {
        let store = kubernetes_store(n);
        let before = store.snapshot();
        let old = rudder::model::Registry::build(&before, "cluster.local");
        let endpoints = (0..3)
            .map(|p| {
                serde_json::json!({"addresses": [format!("10.{}.0.0", 1 + p)],
                    "conditions": {"ready": p != 0},
                    "targetRef": {"kind": "Pod", "name": format!("svc0-{p}"), "namespace": "ns0"}})
            })
            .collect();
        store.apply(vec![Change::Upsert(slice("ns0", "svc0", endpoints))]);
        group.bench_function(BenchmarkId::new("incremental", n), |b| {
            b.iter(|| {
                let (new, delta) = old.update(
                    &before,
                    &store.snapshot(),
                    "cluster.local",
                    &[],
                    &Default::default(),
                );
                assert_eq!(delta.eds_hosts.len(), 1);
                black_box(new)
            })
        });
        group.bench_function(BenchmarkId::new("whole-rebuild", n), |b| {
            b.iter(|| {
                black_box(rudder::model::Registry::build(
                    &store.snapshot(),
                    "cluster.local",
                ))
            })
        });
    }
    group.finish();
}

/// Reading a SotW ACK of an unscoped mesh: 1,000 endpoint names, each ~60 bytes, as every SotW
/// proxy resends them after every push.
fn sotw_ack(c: &mut Criterion) {
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use prost::Message;
    let ack = DiscoveryRequest {
        version_info: "2026-12-04T02:00:00Z/42".into(),
        type_url: TypeUrl::Endpoint.url().into(),
        response_nonce: "a1b2c3".into(),
        resource_names: (0..1000)
            .map(|i| {
                format!(
                    "outbound|{}||svc-{i}.ns{}.svc.cluster.local",
                    8000 + i % 50,
                    i % 10
                )
            })
            .collect(),
        ..Default::default()
    };
    let encoded = prost::bytes::Bytes::from(ack.encode_to_vec());
    c.bench_function("sotw-ack/decode-and-digest/1000", |b| {
        b.iter(|| {
            let sotw = rudder::xds::wire::SotwRequest::decode(encoded.clone()).unwrap();
            black_box(sotw.names_digest())
        })
    });
    c.bench_function("sotw-ack/decode/1000", |b| {
        b.iter(|| black_box(rudder::xds::wire::SotwRequest::decode(encoded.clone()).unwrap()))
    });
}

/// The Gateway API at the scale of docs/performance.md: 1,000 HTTPRoutes on 50 Gateways over a
/// mesh of 1,000 services: the translation alone, the push context with and without it, and
/// what one of the Gateways' proxies is sent (its listeners and its port's routes).
fn gateway_api(c: &mut Criterion) {
    let (routes, gateways) = (1000, 50);
    let mut yaml = mesh_yaml(1000);
    for g in 0..gateways {
        yaml.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw-{g}, namespace: ns0}}\nspec:\n  gatewayClassName: istio\n  listeners: [{{name: http, port: 80, protocol: HTTP, hostname: \"*.gw{g}.example\", allowedRoutes: {{namespaces: {{from: All}}}}}}]\n---\n"
        ));
    }
    for r in 0..routes {
        let (g, ns) = (r % gateways, format!("ns{}", r % 10));
        let backend = |i: usize, w: u32| {
            format!(
                "{{group: networking.istio.io, kind: Hostname, name: svc{i}.ns{}.svc.cluster.local, port: 80, weight: {w}}}",
                i % 10
            )
        };
        yaml.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-{r}, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw-{g}, namespace: ns0}}]\n  hostnames: [r{r}.gw{g}.example]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /api}}, headers: [{{name: x-canary, value: \"1\"}}]}}]\n    backendRefs: [{}]\n  - backendRefs: [{}, {}]\n---\n",
            backend((r + 1) % 1000, 1),
            backend(r % 1000, 90),
            backend((r + 1) % 1000, 10)
        ));
    }
    let with = rudder::testing::store(&yaml);
    let without = store_with(1000);
    let mesh = MeshSettings::default();
    let router = rudder::testing::proxy(
        "router~10.99.0.2~gw-0-istio-0.ns0~ns0.svc.cluster.local",
        &[],
        &[("gateway.networking.k8s.io/gateway-name", "gw-0")],
    );
    let mut group = c.benchmark_group("gateway-api/1000-routes-50-gateways");
    group.sample_size(10);
    group.bench_function("translate", |b| {
        let snapshot = with.snapshot();
        b.iter(|| {
            black_box(rudder::model::gateway_api::translate(
                &snapshot,
                "cluster.local",
            ))
        })
    });
    for (name, store) in [
        ("push-context-with", &with),
        ("push-context-without", &without),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| black_box(rudder::xds::push::initial_context(store, &mesh, None)))
        });
    }
    // BackendTLSPolicy (session 22): one per service of the mesh, each with a CA ConfigMap;
    // what it adds to a push context, and to a sidecar's clusters (every one now originates
    // TLS).
    let mut policies = yaml.clone();
    for i in 0..1000 {
        let ns = format!("ns{}", i % 10);
        policies.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: tls{i}, namespace: {ns}}}\nspec:\n  targetRefs: [{{group: networking.istio.io, kind: ServiceEntry, name: svc{i}, sectionName: http}}]\n  validation: {{caCertificateRefs: [{{group: \"\", kind: ConfigMap, name: ca}}], hostname: svc{i}.example.com}}\n---\n"
        ));
    }
    let with_policies = rudder::testing::store(&policies);
    group.bench_function("translate-with-1000-backend-tls-policies", |b| {
        let snapshot = with_policies.snapshot();
        b.iter(|| {
            black_box(rudder::model::gateway_api::translate(
                &snapshot,
                "cluster.local",
            ))
        })
    });
    group.bench_function("push-context-with-1000-backend-tls-policies", |b| {
        b.iter(|| {
            black_box(rudder::xds::push::initial_context(
                &with_policies,
                &mesh,
                None,
            ))
        })
    });
    // ListenerSet (session 22): the 50 Gateways allow them and each gets one with 4 listeners;
    // the translation and push context against the same scene without them.
    let mut sets = yaml.replace(
        "gatewayClassName: istio\n  listeners:",
        "gatewayClassName: istio\n  allowedListeners: {namespaces: {from: Same}}\n  listeners:",
    );
    for g in 0..gateways {
        sets.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata: {{name: ls-{g}, namespace: ns0}}\nspec:\n  parentRef: {{name: gw-{g}}}\n  listeners: [{{name: a, port: 8081, protocol: HTTP}}, {{name: b, port: 8082, protocol: HTTP}}, {{name: c, port: 8083, protocol: HTTP}}, {{name: d, port: 8084, protocol: HTTP}}]\n---\n"
        ));
    }
    let with_sets = rudder::testing::store(&sets);
    group.bench_function("translate-with-50-listener-sets", |b| {
        let snapshot = with_sets.snapshot();
        b.iter(|| {
            black_box(rudder::model::gateway_api::translate(
                &snapshot,
                "cluster.local",
            ))
        })
    });
    group.bench_function("push-context-with-50-listener-sets", |b| {
        b.iter(|| black_box(rudder::xds::push::initial_context(&with_sets, &mesh, None)))
    });
    let side = sidecar();
    for (name, store) in [
        ("sidecar-cds-without-policies", &with),
        ("sidecar-cds-with-1000-backend-tls-policies", &with_policies),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || rudder::xds::push::initial_context(store, &mesh, None),
                |ctx| {
                    let scope = ctx.scope(&side);
                    black_box(generate::generate(
                        &ctx,
                        &side,
                        &scope,
                        TypeUrl::Cluster,
                        None,
                    ))
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.bench_function("gateway-lds-rds", |b| {
        b.iter_batched(
            || rudder::xds::push::initial_context(&with, &mesh, None),
            |ctx| {
                let scope = ctx.scope(&router);
                let names: std::collections::BTreeSet<String> = ["http.80".to_string()].into();
                black_box(generate::generate(
                    &ctx,
                    &router,
                    &scope,
                    TypeUrl::Listener,
                    None,
                ));
                black_box(generate::generate(
                    &ctx,
                    &router,
                    &scope,
                    TypeUrl::Route,
                    Some(&names),
                ))
            },
            criterion::BatchSize::LargeInput,
        )
    });
}

/// Waypoints (session 23): one waypoint serving the 100 services of `ns0` in the 1,000-service
/// mesh (each with a VirtualService for every tenth), against a sidecar of the same mesh: the
/// waypoint's LDS and CDS (fresh push context each time, so no cache hides the work) and the
/// endpoints of one of its `inbound-vip` clusters.
fn waypoint(c: &mut Criterion) {
    let mut yaml = mesh_yaml(1000);
    yaml.push_str(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns0, labels: {istio.io/use-waypoint: waypoint, istio.io/dataplane-mode: ambient}}\n---\n\
apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: waypoint, namespace: ns0, labels: {gateway.istio.io/managed: istio.io-mesh-controller}}\n\
spec: {hosts: [waypoint.ns0.svc.cluster.local], addresses: [240.255.0.1], ports: [{number: 15008, name: mesh, protocol: TCP}], resolution: STATIC, endpoints: [{address: 10.99.0.3}]}\n---\n",
    );
    let store = rudder::testing::store(&yaml);
    let mesh = MeshSettings::default();
    let waypoint = rudder::testing::proxy(
        "waypoint~10.99.0.3~waypoint-0.ns0~ns0.svc.cluster.local",
        &[],
        &[("gateway.networking.k8s.io/gateway-name", "waypoint")],
    );
    let side = sidecar();
    let mut group = c.benchmark_group("waypoint/100-of-1000-services");
    group.sample_size(10);
    // The ambient index is built once per push and shared by every waypoint and ztunnel: its
    // own row, and built in the set-up of the others.
    let warm = || {
        let ctx = rudder::xds::push::initial_context(&store, &mesh, None);
        black_box(rudder::xds::generate::ztunnel::index(&ctx));
        ctx
    };
    group.bench_function("ambient-index", |b| {
        b.iter_batched(
            || rudder::xds::push::initial_context(&store, &mesh, None),
            |ctx| black_box(rudder::xds::generate::ztunnel::index(&ctx)),
            criterion::BatchSize::LargeInput,
        )
    });
    for (name, proxy, type_url) in [
        ("waypoint-lds", &waypoint, TypeUrl::Listener),
        ("waypoint-cds", &waypoint, TypeUrl::Cluster),
        ("sidecar-lds", &side, TypeUrl::Listener),
        ("sidecar-cds", &side, TypeUrl::Cluster),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                warm,
                |ctx| {
                    let scope = ctx.scope(proxy);
                    black_box(generate::generate(&ctx, proxy, &scope, type_url, None))
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    // A sidecar sending HBONE to the ambient workloads (ns0's 100 services, 300 endpoints):
    // its clusters (the hbone socket match on each) and the endpoints of ns0's clusters.
    let sending = MeshSettings {
        send_hbone: true,
        ..MeshSettings::default()
    };
    let ns0_clusters: std::collections::BTreeSet<String> = (0..1000)
        .step_by(10)
        .map(|i| format!("outbound|80||svc{i}.ns0.svc.cluster.local"))
        .collect();
    for (name, mesh, type_url, names) in [
        (
            "sidecar-cds-sending-hbone",
            &sending,
            TypeUrl::Cluster,
            None,
        ),
        (
            "sidecar-eds-100-ambient-clusters",
            &mesh,
            TypeUrl::Endpoint,
            Some(&ns0_clusters),
        ),
        (
            "sidecar-eds-100-ambient-clusters-sending-hbone",
            &sending,
            TypeUrl::Endpoint,
            Some(&ns0_clusters),
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let ctx = rudder::xds::push::initial_context(&store, mesh, None);
                    black_box(rudder::xds::generate::ztunnel::index(&ctx));
                    ctx
                },
                |ctx| {
                    let scope = ctx.scope(&side);
                    black_box(generate::generate(&ctx, &side, &scope, type_url, names))
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    let names: std::collections::BTreeSet<String> =
        ["inbound-vip|80|http|svc0.ns0.svc.cluster.local".to_string()].into();
    group.bench_function("waypoint-eds-one-cluster", |b| {
        b.iter_batched(
            warm,
            |ctx| {
                let scope = ctx.scope(&waypoint);
                black_box(generate::generate(
                    &ctx,
                    &waypoint,
                    &scope,
                    TypeUrl::Endpoint,
                    Some(&names),
                ))
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// One cluster's ambient workloads: `services` global Services in namespace `amb` (ambient), each
/// with 10 pods behind an EndpointSlice, the cluster's system namespace in `network`; cluster
/// `c` numbers the pod IPs.
fn ambient_cluster_yaml(c: usize, services: usize, network: &str) -> String {
    let mut out = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: istio-system, labels: {{topology.istio.io/network: {network}}}}}\n---\n\
apiVersion: v1\nkind: Namespace\nmetadata: {{name: amb, labels: {{istio.io/dataplane-mode: ambient}}}}\n---\n"
    );
    for s in 0..services {
        out.push_str(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: svc{s}, namespace: amb, labels: {{istio.io/global: \"true\"}}}}\nspec: {{clusterIP: 10.96.{}.{}, ports: [{{name: http, port: 80, targetPort: 8080}}]}}\n---\n",
            s / 250, s % 250
        ));
        let mut endpoints = String::new();
        for i in 0..10 {
            let ip = format!("10.{c}{}.{}.{i}", s / 250, s % 250);
            out.push_str(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: svc{s}-{i}, namespace: amb, labels: {{app: svc{s}}}}}\nspec: {{serviceAccountName: svc{s}, nodeName: node-{i}}}\nstatus: {{phase: Running, podIP: {ip}, podIPs: [{{ip: {ip}}}], conditions: [{{type: Ready, status: \"True\"}}]}}\n---\n"
            ));
            endpoints.push_str(&format!(
                "{{addresses: [{ip}], conditions: {{ready: true}}, targetRef: {{kind: Pod, name: svc{s}-{i}, namespace: amb}}}}, "
            ));
        }
        out.push_str(&format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: svc{s}-x, namespace: amb, labels: {{kubernetes.io/service-name: svc{s}}}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints: [{endpoints}]\n---\n"
        ));
    }
    out
}

/// Ambient across networks (session 25, #50): three clusters of 300 global services and 3,000
/// pods each, the config cluster and `east` in `net1`, `west` in `net2` behind an east-west
/// gateway. The ambient index (what every ztunnel is served) with the switch off (the config
/// cluster's 3,000 pods) and on (6,000 pods of the local network, 300 split-horizon workloads),
/// and the east-west gateway's LDS and CDS.
fn ambient_multi_network(c: &mut Criterion) {
    use rudder::config::Kind;
    let services = 300;
    let combined = rudder::testing::store(&format!(
        "{}apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio, namespace: istio-system}}\ndata:\n  mesh: |\n    serviceScopeConfigs:\n    - servicesSelector: {{matchLabels: {{istio.io/global: \"true\"}}}}\n      scope: GLOBAL\n",
        ambient_cluster_yaml(1, services, "net1")
    ));
    for (i, (cluster, network)) in [("east", "net1"), ("west", "net2")].into_iter().enumerate() {
        let remote = rudder::testing::store(&ambient_cluster_yaml(i + 2, services, network));
        let snapshot = remote.snapshot();
        for kind in [
            Kind::Namespace,
            Kind::Pod,
            Kind::Service,
            Kind::EndpointSlice,
        ] {
            for e in snapshot.list(kind) {
                let mut config = (*e.config).clone();
                config.metadata.cluster = cluster.to_string();
                combined.upsert(config);
            }
        }
    }
    let gateway = rudder::config::Config::from_json(
        serde_json::json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "eastwest", "namespace": "istio-system", "labels": {"topology.istio.io/network": "net2"}},
            "spec": {"gatewayClassName": "istio-east-west", "listeners": [{"name": "mesh", "port": 15008, "protocol": "HBONE", "tls": {"mode": "Terminate"}}]},
            "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.7"}]}}),
        "default",
    )
    .ok()
    .flatten()
    .map(|mut g| {
        g.metadata.cluster = "west".into();
        g
    });
    if let Some(g) = gateway {
        combined.upsert(g);
    }
    let mesh_for = |on: bool| {
        let base = MeshSettings {
            ambient_multi_network: on,
            ..MeshSettings::default()
        };
        base.with_mesh_config(&combined.snapshot()).0
    };
    let (off, on) = (mesh_for(false), mesh_for(true));
    let mut group = c.benchmark_group("ambient-multi-network/3-clusters-x-3000-pods");
    group.sample_size(10);
    for (name, mesh) in [("ambient-index-off", &off), ("ambient-index-on", &on)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || rudder::xds::push::initial_context(&combined, mesh, None),
                |ctx| black_box(rudder::xds::generate::ztunnel::index(&ctx)),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    let east_west = rudder::testing::proxy(
        "waypoint~10.99.0.5~eastwest-0.istio-system~istio-system.svc.cluster.local",
        &[("NETWORK", "net1")],
        &[("gateway.istio.io/managed", "istio.io-eastwest-controller")],
    );
    for (name, type_url) in [
        ("east-west-lds", TypeUrl::Listener),
        ("east-west-cds", TypeUrl::Cluster),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let ctx = rudder::xds::push::initial_context(&combined, &on, None);
                    black_box(rudder::xds::generate::ztunnel::index(&ctx));
                    ctx
                },
                |ctx| {
                    let scope = ctx.scope(&east_west);
                    black_box(generate::generate(&ctx, &east_west, &scope, type_url, None))
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// `n` Kubernetes Services in 10 namespaces, an HTTP and a TCP port each and an EndpointSlice of
/// three ready pods: with a cluster IP, or headless (`clusterIP: None`, a StatefulSet's).
fn kubernetes_yaml(n: usize, headless: bool) -> String {
    let mut out = String::new();
    for i in 0..n {
        let ns = format!("ns{}", i % 10);
        let ip = if headless {
            "None".to_string()
        } else {
            format!("10.96.{}.{}", i / 256, i % 256)
        };
        out.push_str(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: svc{i}, namespace: {ns}}}\nspec: {{clusterIP: {ip}, ports: [{{name: http, port: 80}}, {{name: tcp, port: 9000}}]}}\n---\n\
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: svc{i}-1, namespace: {ns}, labels: {{kubernetes.io/service-name: svc{i}}}}}\naddressType: IPv4\n\
ports: [{{name: http, port: 80}}, {{name: tcp, port: 9000}}]\n\
endpoints: [{{addresses: [10.{a}.{b}.1], conditions: {{ready: true}}}}, {{addresses: [10.{a}.{b}.2], conditions: {{ready: true}}}}, {{addresses: [10.{a}.{b}.3], conditions: {{ready: true}}}}]\n---\n",
            a = i / 256,
            b = i % 256
        ));
    }
    out
}

/// What the production paths of #62 cost a push at 1,000 services: a sidecar's LDS when the
/// services are headless (a listener per endpoint on the TCP port) against the same services
/// with cluster IPs, and the DNS proxy's NameTable against LDS of the same mesh.
fn production_paths(c: &mut Criterion) {
    let mesh = MeshSettings::default();
    let plain = rudder::testing::proxy(
        "sidecar~10.99.0.1~client.ns0~ns0.svc.cluster.local",
        &[],
        &[],
    );
    let capturing = rudder::testing::proxy(
        "sidecar~10.99.0.1~client.ns0~ns0.svc.cluster.local",
        &[("DNS_CAPTURE", "true")],
        &[],
    );
    let mut group = c.benchmark_group("production-paths/1000-services");
    group.sample_size(10);
    for (name, headless, proxy, type_url) in [
        ("lds-cluster-ips", false, &plain, TypeUrl::Listener),
        ("lds-headless", true, &plain, TypeUrl::Listener),
        ("nds-cluster-ips", false, &capturing, TypeUrl::NameTable),
        ("nds-headless", true, &capturing, TypeUrl::NameTable),
    ] {
        let store = rudder::testing::store(&kubernetes_yaml(1000, headless));
        group.bench_function(name, |b| {
            b.iter_batched(
                || rudder::xds::push::initial_context(&store, &mesh, None),
                |ctx| {
                    let scope = ctx.scope(proxy);
                    black_box(generate::generate(&ctx, proxy, &scope, type_url, None))
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    // EDS of every outbound cluster: Kubernetes endpoints without pods, and ServiceEntry
    // endpoints with a proxy (`tlsMode: istio`) under a PeerAuthentication per namespace, so
    // each endpoint's mTLS mark reads its namespace's policies (#65).
    let all_clusters: std::collections::BTreeSet<String> = (0..1000)
        .flat_map(|i| {
            let ns = i % 10;
            [80, 9000].map(|port| format!("outbound|{port}||svc{i}.ns{ns}.svc.cluster.local"))
        })
        .collect();
    let mut mtls_yaml = String::new();
    for i in 0..1000 {
        let (ns, a, b) = (i % 10, i / 256, i % 256);
        mtls_yaml.push_str(&format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc{i}, namespace: ns{ns}}}\n\
spec: {{hosts: [svc{i}.ns{ns}.svc.cluster.local], addresses: [10.96.{a}.{b}], location: MESH_INTERNAL, resolution: STATIC, \
ports: [{{number: 80, name: http, protocol: HTTP}}, {{number: 9000, name: tcp, protocol: TCP}}], \
endpoints: [{{address: 10.{a}.{b}.1, labels: {{app: svc{i}, version: v1, security.istio.io/tlsMode: istio}}}}, \
{{address: 10.{a}.{b}.2, labels: {{app: svc{i}, version: v1, security.istio.io/tlsMode: istio}}}}, \
{{address: 10.{a}.{b}.3, labels: {{app: svc{i}, version: v2, security.istio.io/tlsMode: istio}}}}]}}\n---\n"
        ));
    }
    for ns in 0..10 {
        mtls_yaml.push_str(&format!(
            "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: default, namespace: ns{ns}}}\nspec: {{mtls: {{mode: STRICT}}}}\n---\n"
        ));
    }
    for (name, yaml) in [
        ("eds-all-clusters-kubernetes", kubernetes_yaml(1000, false)),
        ("eds-all-clusters-mtls-endpoints", mtls_yaml),
    ] {
        let store = rudder::testing::store(&yaml);
        group.bench_function(name, |b| {
            b.iter_batched(
                || rudder::xds::push::initial_context(&store, &mesh, None),
                |ctx| {
                    let scope = ctx.scope(&plain);
                    black_box(generate::generate(
                        &ctx,
                        &plain,
                        &scope,
                        TypeUrl::Endpoint,
                        Some(&all_clusters),
                    ))
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    one_route_change,
    production_paths,
    ambient_multi_network,
    waypoint,
    gateway_api,
    sotw_ack,
    generators,
    one_change,
    one_slice_change,
    store,
    file_source
);
criterion_main!(benches);
