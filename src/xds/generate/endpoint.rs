//! EDS: ClusterLoadAssignments, grouped by locality, filtered by subset labels.

use super::cluster::{EffectivePolicy, socket};
use super::finish::{Class, Typed};
use super::util::parse_outbound_cluster;
use crate::model::Endpoint as ModelEndpoint;
use crate::xds::context::{PushContext, ScopeView};
use envoy_types::pb::envoy::config::core::v3::HealthStatus;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use std::collections::BTreeMap;

/// The load assignment for one outbound cluster, or an empty one for a cluster that does not exist
/// (so a client that asked learns it has no endpoints instead of waiting forever).
pub fn load_assignment(ctx: &PushContext, scope: &ScopeView, cluster: &str) -> Typed {
    let mut policy = None;
    // An SNI-DNAT cluster of an AUTO_PASSTHROUGH gateway: only endpoints that speak Istio's
    // mTLS, since the gateway cannot tell whether the passed-through connection is mTLS.
    let sni_dnat = super::auto_passthrough::parse_sni_dnat(cluster);
    let endpoints: Vec<&ModelEndpoint> = match parse_outbound_cluster(cluster).or(sni_dnat) {
        Some((port, subset, host)) => {
            let rule = ctx
                .registry
                .services
                .get(host)
                .and_then(|svc| ctx.destination_rule_for(&scope.namespace, &scope.labels, svc))
                .map(|dr| &dr.spec);
            let subset_rule = rule.and_then(|r| r.subsets.iter().find(|s| s.name == subset));
            policy = Some(EffectivePolicy::resolve(rule, subset_rule, port));
            let selector = if subset.is_empty() {
                None
            } else {
                subset_rule
                    .map(|s| s.labels.clone())
                    .or(Some(BTreeMap::from([(
                        "\u{0}no-such-subset".to_string(),
                        String::new(),
                    )])))
            };
            ctx.registry
                .endpoints(host, port)
                .iter()
                .filter(|e| selector.as_ref().is_none_or(|s| e.matches(s)))
                .filter(|e| sni_dnat.is_none() || tls_mode_metadata(e).is_some())
                .collect()
        }
        None => Vec::new(),
    };
    let mut by_locality: BTreeMap<&str, Vec<&ModelEndpoint>> = BTreeMap::new();
    for e in endpoints {
        by_locality.entry(e.locality.as_str()).or_default().push(e);
    }
    let labels: Vec<Vec<&BTreeMap<String, String>>> = by_locality
        .values()
        .map(|eps| eps.iter().map(|e| &e.labels).collect())
        .collect();
    let mut cla = ClusterLoadAssignment {
        cluster_name: cluster.to_string(),
        endpoints: by_locality
            .into_iter()
            .map(|(locality, eps)| {
                // gRPC ignores localities without a weight; Envoy ignores the weight unless
                // locality-weighted balancing is on. The sum of endpoint weights suits both.
                let weight: u32 = eps.iter().map(|e| e.weight.max(1)).sum();
                LocalityLbEndpoints {
                    load_balancing_weight: Some(UInt32Value { value: weight }),
                    locality: Some(super::locality::parse(locality)),
                    lb_endpoints: eps
                        .into_iter()
                        .map(|e| LbEndpoint {
                            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(
                                Endpoint {
                                    address: Some(socket(&e.address, e.port)),
                                    ..Default::default()
                                },
                            )),
                            health_status: if e.healthy {
                                HealthStatus::Healthy
                            } else {
                                HealthStatus::Unhealthy
                            } as i32,
                            load_balancing_weight: Some(UInt32Value {
                                value: e.weight.max(1),
                            }),
                            metadata: tls_mode_metadata(e),
                        })
                        .collect(),
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    if let Some(policy) = policy {
        let rule = policy
            .load_balancer
            .as_ref()
            .and_then(|lb| lb.locality_lb_setting.as_ref());
        if let Some(setting) = super::locality::setting(ctx.mesh.locality_lb.as_ref(), rule) {
            super::locality::apply(
                &mut cla,
                &labels,
                &scope.locality,
                &scope.labels,
                setting,
                policy.outlier_detection.is_some(),
            );
        }
    }
    Typed::new(cluster, Class::outbound(scope), cla)
}

/// Endpoints of workloads with a proxy (label `security.istio.io/tlsMode: istio`) are marked for
/// the automatic-mTLS transport socket.
fn tls_mode_metadata(
    e: &ModelEndpoint,
) -> Option<envoy_types::pb::envoy::config::core::v3::Metadata> {
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as ValueKind};
    let mode = e.labels.get("security.istio.io/tlsMode")?;
    (mode == "istio").then(|| envoy_types::pb::envoy::config::core::v3::Metadata {
        filter_metadata: [(
            super::cluster::TLS_MODE_MATCH.to_string(),
            Struct {
                fields: [(
                    "tlsMode".to_string(),
                    Value {
                        kind: Some(ValueKind::StringValue(mode.clone())),
                    },
                )]
                .into(),
            },
        )]
        .into(),
        ..Default::default()
    })
}
