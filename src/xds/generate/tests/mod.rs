//! Generator tests, by what they build; the helpers every file uses are here.

use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::store::StoreWriter;
use crate::xds::context::PushContext;
use crate::xds::generate::*;
use crate::xds::types::TypeUrl;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use prost::Message;

mod cache_keys;
mod clusters;
mod envoy_filters;
mod finishing;
mod gateways;
mod listeners;
mod routes;
mod scopes;
mod security;
mod snapshot;

fn ctx(yaml: &str) -> PushContext {
    crate::testing::push_context(yaml)
}

use crate::testing::push_context_with;

fn proxy(ns: &str, meta: &[(&str, &str)]) -> Proxy {
    crate::testing::sidecar(ns, meta)
}

fn se(ns: &str, name: &str, proto: &str) -> String {
    format!(
        "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {ns}}}\n\
spec: {{hosts: [{name}.{ns}.svc.cluster.local], ports: [{{number: 80, name: p, protocol: {proto}}}], resolution: STATIC, endpoints: [{{address: 10.1.1.1, labels: {{version: v1}}}}]}}\n"
    )
}

fn clusters_of(ctx: &PushContext, p: &Proxy) -> Vec<Cluster> {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Cluster, None)
        .iter()
        .map(|r| Cluster::decode(r.any.value.as_slice()).unwrap())
        .collect()
}

fn cluster(ctx: &PushContext, p: &Proxy, name: &str) -> Cluster {
    clusters_of(ctx, p)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no cluster {name}"))
}

fn route_config(ctx: &PushContext, p: &Proxy, name: &str) -> RouteConfiguration {
    let scope = ctx.scope(p);
    let names = [name.to_string()].into_iter().collect();
    let r = generate(ctx, p, &scope, TypeUrl::Route, Some(&names));
    RouteConfiguration::decode(r[0].any.value.as_slice()).unwrap()
}

/// A sidecar at `ip` in namespace `vms` with the labels every VM of one WorkloadGroup shares.
/// A proxy with node id `id` and the single label `app: <app>`.
fn labelled(id: &str, app: &str) -> Proxy {
    crate::testing::proxy(id, &[], &[("app", app)])
}

fn vm_at(ip: &str) -> Proxy {
    labelled(&format!("sidecar~{ip}~vm.vms~vms.svc.cluster.local"), "vm")
}

/// A proxy at 10.0.0.9 that proved an identity (as on the TLS port with a token).
fn verified(ns: &str) -> Proxy {
    let mut p = proxy(ns, &[]);
    p.identity = Some(crate::model::identity::Identity {
        trust_domain: "cluster.local".into(),
        namespace: ns.into(),
        service_account: "default".into(),
    });
    p.labels.insert("app".into(), "app".into());
    p
}

fn listener_named(ctx: &PushContext, p: &Proxy, name: &str) -> Listener {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Listener, None)
        .iter()
        .map(|r| Listener::decode(r.any.value.as_slice()).unwrap())
        .find(|l| l.name == name)
        .unwrap_or_else(|| {
            panic!(
                "no listener {name} in {:?}",
                generate(ctx, p, &scope, TypeUrl::Listener, None)
                    .iter()
                    .map(|r| r.name.to_string())
                    .collect::<Vec<_>>()
            )
        })
}

use envoy_types::pb::envoy::config::listener::v3::Listener;

/// The workload at 10.0.0.9 serves `app` on ports 80 (HTTP) and 5432 (TCP).
fn workload_yaml(extra: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: app, namespace: a}}\n\
spec: {{hosts: [app.a.svc.cluster.local], location: MESH_INTERNAL, ports: [{{number: 80, name: http, protocol: HTTP}}, {{number: 5432, name: tcp, protocol: TCP}}], resolution: STATIC, \
endpoints: [{{address: 10.0.0.9, labels: {{app: app, security.istio.io/tlsMode: istio}}}}]}}\n{extra}"
    )
}

fn inbound_chains(l: &Listener) -> Vec<(String, String)> {
    l.filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.clone().unwrap_or_default();
            (c.name.clone(), m.transport_protocol)
        })
        .collect()
}

/// Services sharing port 443 and 3306 the way real meshes do: Kubernetes' API with a VIP, two
/// external TLS hosts without one, a TCP database with a VIP and an unnamed (sniffed) port.
const OUTBOUND_MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: kube, namespace: a}\n\
spec: {hosts: [kubernetes.default.svc.cluster.local], addresses: [10.96.0.1], ports: [{number: 443, name: https, protocol: HTTPS}], resolution: STATIC, endpoints: [{address: 10.1.0.1}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ext, namespace: a}\n\
spec: {hosts: [api.example.com, pay.example.com], ports: [{number: 443, name: tls, protocol: TLS}], resolution: DNS, location: MESH_EXTERNAL}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: db, namespace: a}\n\
spec: {hosts: [db.a.svc.cluster.local], addresses: [10.96.0.5], ports: [{number: 3306, name: mysql, protocol: TCP}], resolution: STATIC, endpoints: [{address: 10.1.0.5}]}\n\
---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: web, namespace: a}\n\
spec: {hosts: [web.a.svc.cluster.local], addresses: [10.96.0.7], ports: [{number: 8080, name: web}], resolution: STATIC, endpoints: [{address: 10.1.0.7}]}\n";

fn listeners_of(ctx: &PushContext, p: &Proxy) -> Vec<Listener> {
    let scope = ctx.scope(p);
    generate(ctx, p, &scope, TypeUrl::Listener, None)
        .iter()
        .map(|r| Listener::decode(r.any.value.as_slice()).unwrap())
        .collect()
}

/// The clusters (with weights) the TCP proxy of `chain` sends to.
fn tcp_targets(
    chain: &envoy_types::pb::envoy::config::listener::v3::FilterChain,
) -> Vec<(String, u32)> {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
        TcpProxy, tcp_proxy,
    };
    chain
        .filters
        .iter()
        .filter(|f| f.name == "envoy.filters.network.tcp_proxy")
        .flat_map(|f| {
            let Some(
                envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a),
            ) = &f.config_type
            else {
                return Vec::new();
            };
            match TcpProxy::decode(a.value.as_slice())
                .unwrap()
                .cluster_specifier
            {
                Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => vec![(c, 100)],
                Some(tcp_proxy::ClusterSpecifier::WeightedClusters(w)) => {
                    w.clusters.into_iter().map(|c| (c.name, c.weight)).collect()
                }
                None => Vec::new(),
            }
        })
        .collect()
}

fn listener_filter_names(l: &Listener) -> Vec<&str> {
    l.listener_filters.iter().map(|f| f.name.as_str()).collect()
}
