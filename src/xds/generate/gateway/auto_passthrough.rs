//! Gateway servers in `AUTO_PASSTHROUGH` TLS mode (the east-west gateway of a multi-network
//! mesh), as istiod builds them (`builtAutoPassthroughFilterChains`,
//! `buildOutboundSniDnatClusters`): a client's mTLS connection names its destination in the SNI,
//! `outbound_.<port>_.<subset>_.<host>`, and the gateway passes the TLS through, unopened, to an
//! endpoint of that service port (and subset). One filter chain per service port and subset of the
//! services the server's hosts cover, matching that SNI and Istio's mTLS ALPNs, each a TCP proxy to
//! an SNI-DNAT cluster of the same name: the service's endpoints without TLS of the gateway's own
//! (the client's passes through), and only endpoints that speak Istio's mTLS, so nothing reaches a
//! workload without it. No authorization filters, as istiod: the gateway cannot see inside.

use crate::config::networking::Location;
use crate::xds::context::{PushContext, ScopeView};
use crate::xds::generate::finish::{Built, Typed};
use crate::xds::generate::shared::cluster;
use crate::xds::generate::shared::network::{Destination, tcp_proxy};
use crate::xds::generate::shared::util::sni_dnat_name;
use crate::xds::generate::typed_listener::Chain;
use envoy_types::pb::envoy::config::listener::v3::FilterChainMatch;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;

/// The ALPNs of Istio's mTLS (istiod's `allIstioMtlsALPNs`).
const MTLS_ALPNS: [&str; 5] = [
    "istio",
    "istio-peer-exchange",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
];

/// The services an AUTO_PASSTHROUGH server with `hosts` (without their `namespace/`) reaches:
/// the mesh's own (not MESH_EXTERNAL) whose hostname the hosts cover, with each of their ports
/// and their DestinationRule's subsets, as (SNI-DNAT name, service, port, subset).
fn targets<'a>(
    ctx: &'a PushContext,
    scope: &'a ScopeView,
    hosts: &[&str],
) -> Vec<(String, &'a crate::model::Service, u32, Option<&'a str>)> {
    let mut out = Vec::new();
    for svc in &scope.services {
        if svc.location == Location::MESH_EXTERNAL
            || !hosts
                .iter()
                .any(|h| crate::config::host::subset_of(&svc.hostname, h))
        {
            continue;
        }
        let dr = ctx
            .destination_rule_for(&scope.namespace, &scope.labels, svc)
            .map(|d| &d.spec);
        for port in &svc.ports {
            out.push((
                sni_dnat_name(port.number, "", &svc.hostname),
                svc.as_ref(),
                port.number,
                None,
            ));
            for subset in dr.map(|d| d.subsets.as_slice()).unwrap_or_default() {
                out.push((
                    sni_dnat_name(port.number, &subset.name, &svc.hostname),
                    svc.as_ref(),
                    port.number,
                    Some(subset.name.as_str()),
                ));
            }
        }
    }
    out
}

/// The filter chains of an AUTO_PASSTHROUGH server.
pub(in crate::xds::generate) fn filter_chains(
    ctx: &PushContext,
    scope: &ScopeView,
    hosts: &[&str],
) -> Vec<Chain> {
    targets(ctx, scope, hosts)
        .into_iter()
        .map(|(name, service, port, _)| Chain {
            name: name.clone(),
            filter_chain_match: Some(FilterChainMatch {
                server_names: vec![name.clone()],
                application_protocols: MTLS_ALPNS.iter().map(|a| a.to_string()).collect(),
                ..Default::default()
            }),
            filters: vec![tcp_proxy(
                &name,
                tcp_proxy::ClusterSpecifier::Cluster(name.clone()),
                Some(Destination {
                    ctx,
                    scope,
                    service,
                    port,
                }),
            )],
            ..Default::default()
        })
        .collect()
}

/// The SNI-DNAT clusters of a gateway with an AUTO_PASSTHROUGH server (istiod builds them for
/// every mesh service in the gateway's view; the caller asks only for such a gateway): the
/// outbound cluster of each service port and subset, renamed, with no TLS of its own.
pub fn clusters(ctx: &PushContext, scope: &ScopeView) -> Vec<Typed> {
    targets(ctx, scope, &["*"])
        .into_iter()
        .filter_map(|(name, service, port, subset)| {
            let mut typed = cluster::outbound(ctx, scope, service, port, subset)?;
            let Built::Cluster(c) = &mut typed.built else {
                return None;
            };
            c.name = name.clone();
            if let Some(eds) = c.eds_cluster_config.as_mut() {
                eds.service_name = name.clone();
            }
            c.transport_socket = None;
            c.transport_socket_matches.clear();
            typed.name = name;
            Some(typed)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::types::TypeUrl;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use prost::Message;

    const MESH: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints:
  - {address: 10.0.0.1, labels: {version: v1, security.istio.io/tlsMode: istio}}
  - {address: 10.0.0.2, labels: {version: v1}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: shop}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: shop}
spec:
  host: web.shop.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
  subsets: [{name: v1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: cross-network, namespace: shop}
spec:
  selector: {istio: eastwestgateway}
  servers:
  - port: {number: 15443, name: tls, protocol: TLS}
    tls: {mode: AUTO_PASSTHROUGH}
    hosts: ["*.local"]
"#;

    /// The gateway's listener has a chain per mesh service port and subset its hosts cover
    /// (external services left out), matching the SNI and Istio's ALPNs; the clusters of the
    /// same names carry no TLS of their own; their endpoints are the mTLS-capable ones.
    #[test]
    fn chains_clusters_and_endpoints_are_istiods() {
        let ctx = crate::testing::push_context(MESH);
        let gw = crate::testing::proxy(
            "router~10.0.0.5~eastwest-0.shop~shop.svc.cluster.local",
            &[],
            &[("istio", "eastwestgateway")],
        );
        let scope = ctx.scope(&gw);
        let generate = |t: TypeUrl, names: Option<&std::collections::BTreeSet<String>>| {
            crate::xds::generate::generate(&ctx, &gw, &scope, t, names)
        };
        let listener = generate(TypeUrl::Listener, None)
            .iter()
            .map(|r| Listener::decode(r.any.value.as_slice()).unwrap())
            .find(|l| l.name == "0.0.0.0_15443")
            .expect("the gateway listener");
        let names: Vec<&str> = listener
            .filter_chains
            .iter()
            .flat_map(|c| &c.filter_chain_match.as_ref().unwrap().server_names)
            .map(String::as_str)
            .collect();
        assert_eq!(
            names,
            [
                "outbound_.80_._.web.shop.svc.cluster.local",
                "outbound_.80_.v1_.web.shop.svc.cluster.local"
            ]
        );
        let alpns = &listener.filter_chains[0]
            .filter_chain_match
            .as_ref()
            .unwrap()
            .application_protocols;
        assert_eq!(alpns, &MTLS_ALPNS.map(String::from).to_vec());

        let clusters: Vec<Cluster> = generate(TypeUrl::Cluster, None)
            .iter()
            .map(|r| Cluster::decode(r.any.value.as_slice()).unwrap())
            .collect();
        let dnat = clusters
            .iter()
            .find(|c| c.name == "outbound_.80_.v1_.web.shop.svc.cluster.local")
            .expect("the subset's SNI-DNAT cluster");
        assert!(dnat.transport_socket.is_none() && dnat.transport_socket_matches.is_empty());
        assert_eq!(
            dnat.eds_cluster_config.as_ref().unwrap().service_name,
            dnat.name
        );
        assert!(
            clusters
                .iter()
                .all(|c| !c.name.contains("api.example.com") || c.name.starts_with("outbound|"))
        );

        let eds_name: std::collections::BTreeSet<String> =
            ["outbound_.80_._.web.shop.svc.cluster.local".to_string()].into();
        let endpoints = |ctx: &PushContext| -> usize {
            let scope = ctx.scope(&gw);
            let resources = crate::xds::generate::generate(
                ctx,
                &gw,
                &scope,
                TypeUrl::Endpoint,
                Some(&eds_name),
            );
            let cla = ClusterLoadAssignment::decode(resources[0].any.value.as_slice()).unwrap();
            cla.endpoints.iter().map(|l| l.lb_endpoints.len()).sum()
        };
        // As istiod's `checkMtlsEnabled`: the DestinationRule's ISTIO_MUTUAL says every endpoint
        // takes mTLS; without it, only the endpoint with a proxy does.
        assert_eq!(endpoints(&ctx), 2, "the DestinationRule decides");
        let without_rule = crate::testing::push_context(&MESH.replace(
            "trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}",
            "trafficPolicy: {}",
        ));
        assert_eq!(
            endpoints(&without_rule),
            1,
            "only the endpoint that speaks Istio's mTLS"
        );

        // A sidecar gets none of this.
        let sidecar = crate::testing::sidecar("shop", &[]);
        let sidecar_scope = ctx.scope(&sidecar);
        assert!(
            crate::xds::generate::generate(&ctx, &sidecar, &sidecar_scope, TypeUrl::Cluster, None)
                .iter()
                .all(|r| !r.name.starts_with("outbound_."))
        );
    }
}
