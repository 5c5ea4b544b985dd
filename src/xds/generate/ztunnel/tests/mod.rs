use super::pb::workload::{Address, WorkloadStatus, WorkloadType, address};
use super::pb::workload::{
    AppProtocol, GatewayAddress, NamespacedHostname, NetworkAddress, TunnelProtocol,
    gateway_address,
};
use super::*;
use crate::config::Kind;
use crate::config::{Config, ConfigKey};
use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::source::kube::convert::IntoConfig;
use crate::store::{Store, StoreWriter};
use crate::xds::resource::Resource;
use k8s_openapi::api::core::v1::Pod;
use prost::Message;
use serde_json::json;
use std::sync::Arc;

pub(super) fn k8s<T: serde::de::DeserializeOwned + IntoConfig>(v: serde_json::Value) -> Config {
    serde_json::from_value::<T>(v)
        .expect("k8s object")
        .into_config()
}

fn pod(ns: &str, name: &str, ip: &str, labels: serde_json::Value) -> Config {
    k8s::<Pod>(json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c7", "uid": "1", "controller": true}]},
        "spec": {"serviceAccountName": "web-sa", "nodeName": "node-a", "containers": [{"name": "app"}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
}

fn namespace(name: &str, labels: serde_json::Value) -> Config {
    k8s::<k8s_openapi::api::core::v1::Namespace>(
        json!({"metadata": {"name": name, "labels": labels}}),
    )
}

/// A mesh: namespace `amb` in ambient mode with pods web-0 and web-1 behind service `web`, and
/// namespace `plain` with one pod that is not captured.
pub(super) fn store() -> StoreWriter {
    let store = StoreWriter::new(64);
    for c in [
        namespace("amb", json!({"istio.io/dataplane-mode": "ambient"})),
        namespace("plain", json!({})),
        pod(
            "amb",
            "web-0",
            "10.1.0.5",
            json!({"app": "web", "pod-template-hash": "5d9c7"}),
        ),
        pod(
            "amb",
            "web-1",
            "10.1.0.6",
            json!({"app": "web", "pod-template-hash": "5d9c7", "istio.io/dataplane-mode": "none"}),
        ),
        pod("plain", "db-0", "10.2.0.9", json!({"app": "db"})),
        k8s::<k8s_openapi::api::core::v1::Service>(json!({
            "metadata": {"name": "web", "namespace": "amb", "labels": {"istio.io/use-waypoint": "wp"}},
            "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})),
        k8s::<k8s_openapi::api::discovery::v1::EndpointSlice>(json!({
        "metadata": {"name": "web-x", "namespace": "amb", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
        "endpoints": [
            {"addresses": ["10.1.0.5"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "amb"}},
            {"addresses": ["10.1.0.6"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "amb"}}
        ]})),
    ] {
        store.upsert(c);
    }
    store.apply_yaml(
        r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-client, namespace: amb}
spec:
  selector: {matchLabels: {app: web}}
  rules:
  - from: [{source: {principals: ["cluster.local/ns/amb/sa/client"]}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: other, namespace: amb}
spec:
  selector: {matchLabels: {app: nothing}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: plain, namespace: plain}
spec: {mtls: {mode: PERMISSIVE}}
"#,
    );
    store
}

fn index(store: &Store) -> AmbientIndex {
    let snapshot = store.snapshot();
    let registry = Registry::build(&snapshot, "cluster.local");
    AmbientIndex::build(&snapshot, &registry, &MeshSettings::default())
}

fn decode(r: &Resource) -> Address {
    Address::decode(r.any.value.as_slice()).expect("address")
}

#[test]
fn pods_become_workloads_with_istiod_fields() {
    let idx = index(&store());
    let w = &idx.workloads["Kubernetes//Pod/amb/web-0"];
    assert_eq!(w.name, "web-0");
    assert_eq!(w.addresses, vec![vec![10, 1, 0, 5]]);
    assert_eq!(w.tunnel_protocol, TunnelProtocol::Hbone as i32);
    assert_eq!(w.service_account, "web-sa");
    assert_eq!(w.trust_domain, "cluster.local");
    assert_eq!(w.workload_type, WorkloadType::Deployment as i32);
    assert_eq!(w.workload_name, "web");
    assert_eq!(
        (w.canonical_name.as_str(), w.canonical_revision.as_str()),
        ("web", "latest")
    );
    assert_eq!(w.node, "node-a");
    assert_eq!(w.cluster_id, "Kubernetes");
    assert_eq!(w.status, WorkloadStatus::Healthy as i32);
    let ports = &w.services["amb/web.amb.svc.cluster.local"].ports;
    assert_eq!((ports[0].service_port, ports[0].target_port), (80, 8080));
    assert_eq!(
        w.authorization_policies,
        [
            "amb/allow-client".to_string(),
            format!("istio-system/{STATIC_STRICT_POLICY}")
        ],
        "the selector policy that matches, and STRICT from the mesh-wide PeerAuthentication"
    );

    let opted_out = &idx.workloads["Kubernetes//Pod/amb/web-1"];
    assert_eq!(opted_out.tunnel_protocol, TunnelProtocol::None as i32);
    let plain = &idx.workloads["Kubernetes//Pod/plain/db-0"];
    assert_eq!(plain.tunnel_protocol, TunnelProtocol::None as i32);
    assert!(
        plain.authorization_policies.is_empty(),
        "PERMISSIVE in its namespace overrides the mesh"
    );
}

/// Which workload-selector policies a workload lists is the one attachment rule's: a selector
/// from its own namespace, or from the root namespace for every namespace; an empty selector
/// (still a selector policy, as istiod scopes it) for every workload it reaches; never one of
/// another namespace.
#[test]
fn selector_policies_attach_by_the_one_rule() {
    let store = store();
    store.apply_yaml(
        r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: every-web, namespace: istio-system}
spec:
  selector: {matchLabels: {app: web}}
  action: DENY
  rules: [{to: [{operation: {ports: ["9999"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: everyone-here, namespace: amb}
spec:
  selector: {}
  action: DENY
  rules: [{to: [{operation: {ports: ["9998"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: elsewhere, namespace: plain}
spec:
  selector: {matchLabels: {app: web}}
  action: DENY
  rules: [{to: [{operation: {ports: ["9997"]}}]}]
"#,
    );
    let idx = index(&store);
    let listed = |uid: &str| idx.workloads[uid].authorization_policies.clone();
    let web = listed("Kubernetes//Pod/amb/web-0");
    for policy in [
        "amb/allow-client",
        "amb/everyone-here",
        "istio-system/every-web",
    ] {
        assert!(web.contains(&policy.to_string()), "{policy} in {web:?}");
    }
    assert!(!web.contains(&"plain/elsewhere".to_string()), "{web:?}");
    assert!(!web.contains(&"amb/other".to_string()), "{web:?}");
    assert!(
        listed("Kubernetes//Pod/plain/db-0").is_empty(),
        "no selector of its namespace or the root's matches db"
    );
}

#[test]
fn services_carry_vips_ports_and_waypoint() {
    let idx = index(&store());
    let s = &idx.services["amb/web.amb.svc.cluster.local"];
    assert_eq!(s.name, "web");
    assert_eq!(s.addresses[0].address, vec![10, 96, 0, 10]);
    assert_eq!(
        (s.ports[0].service_port, s.ports[0].target_port),
        (80, 8080)
    );
    assert_eq!(s.ports[0].app_protocol, AppProtocol::Http11 as i32);
    let wp = s.waypoint.as_ref().expect("waypoint");
    assert_eq!(wp.hbone_mtls_port, 15008);
    assert_eq!(
        wp.destination,
        Some(gateway_address::Destination::Hostname(NamespacedHostname {
            namespace: "amb".into(),
            hostname: "wp.amb.svc.cluster.local".into()
        })),
        "no waypoint service with a VIP: named by hostname"
    );
}

#[test]
fn lookups_by_ip_answer_with_an_alias_and_a_vip_brings_its_workloads() {
    let idx = index(&store());
    let by_pod_ip = idx.lookup_address("/10.1.0.5");
    assert_eq!(by_pod_ip.len(), 1);
    assert_eq!(&*by_pod_ip[0].name, "Kubernetes//Pod/amb/web-0");
    assert_eq!(by_pod_ip[0].aliases, ["/10.1.0.5"]);

    let by_vip = idx.lookup_address("/10.96.0.10");
    let names: Vec<&str> = by_vip.iter().map(|r| &*r.name).collect();
    assert_eq!(
        names,
        [
            "amb/web.amb.svc.cluster.local",
            "Kubernetes//Pod/amb/web-0",
            "Kubernetes//Pod/amb/web-1"
        ]
    );
    assert!(matches!(
        decode(&by_vip[0]).r#type,
        Some(address::Type::Service(_))
    ));
    assert!(idx.lookup_address("/10.9.9.9").is_empty());
    assert_eq!(idx.lookup_address("Kubernetes//Pod/plain/db-0").len(), 1);
}

#[test]
fn policies_include_the_static_strict_policy() {
    let idx = index(&store());
    let names: Vec<&String> = idx.policies.keys().collect();
    assert_eq!(
        names,
        [
            "amb/allow-client",
            "amb/other",
            &format!("istio-system/{STATIC_STRICT_POLICY}")
        ]
    );
    assert_eq!(idx.authorizations().len(), 3);
}

#[test]
fn pods_without_an_ip_or_finished_are_left_out() {
    let store = store();
    store.upsert(k8s::<Pod>(json!({
        "metadata": {"name": "pending", "namespace": "amb"},
        "spec": {"containers": [{"name": "app"}]}, "status": {"phase": "Pending"}})));
    store.upsert(k8s::<Pod>(json!({
        "metadata": {"name": "done", "namespace": "amb"},
        "spec": {"containers": [{"name": "app"}]}, "status": {"phase": "Succeeded", "podIP": "10.1.0.99"}})));
    let idx = index(&store);
    assert!(!idx.workloads.contains_key("Kubernetes//Pod/amb/pending"));
    assert!(!idx.workloads.contains_key("Kubernetes//Pod/amb/done"));
}

/// A sidecar pod labelled `networking.istio.io/tunnel: http` (its proxy takes HBONE) is sent to
/// ztunnel as taking HBONE natively, as istiod's `setTunnelProtocol`; it is not captured.
#[test]
fn a_sidecar_that_takes_hbone_is_a_native_tunnel_workload() {
    let store = store();
    store.upsert(pod(
        "plain",
        "side-0",
        "10.2.0.10",
        json!({"app": "side", "security.istio.io/tlsMode": "istio", "networking.istio.io/tunnel": "http"}),
    ));
    let idx = index(&store);
    let w = &idx.workloads["Kubernetes//Pod/plain/side-0"];
    assert_eq!(w.tunnel_protocol, TunnelProtocol::Hbone as i32);
    assert!(w.native_tunnel);
    let plain = &idx.workloads["Kubernetes//Pod/plain/db-0"];
    assert!(!plain.native_tunnel);
}

#[test]
fn config_dump_has_ztunnel_shape() {
    let idx = index(&store());
    let dump = dump::config_dump(&idx);
    let w = dump["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["name"] == "web-0")
        .expect("web-0");
    assert_eq!(w["workloadIps"], json!(["10.1.0.5"]));
    assert_eq!(w["protocol"], "HBONE");
    assert_eq!(w["uid"], "Kubernetes//Pod/amb/web-0");
    assert_eq!(w["workloadType"], "deployment");
    assert_eq!(w["status"], "Healthy");
    assert_eq!(w["services"], json!(["amb/web.amb.svc.cluster.local"]));
    let s = &dump["services"][0];
    assert_eq!(s["vips"], json!(["/10.96.0.10"]));
    assert_eq!(s["ports"], json!({"80": 8080}));
    assert_eq!(
        s["endpoints"]["Kubernetes//Pod/amb/web-0"]["port"],
        json!({"80": 8080})
    );
    assert_eq!(
        s["waypoint"],
        json!({"destination": "amb/wp.amb.svc.cluster.local", "hboneMtlsPort": 15008})
    );
    let p = &dump["policies"][0];
    assert_eq!(p["scope"], "WorkloadSelector");
    assert_eq!(p["action"], "Allow");
    assert_eq!(
        p["rules"],
        json!([[[{"principals": [{"Exact": "cluster.local/ns/amb/sa/client"}]}]]])
    );
}

#[test]
fn waypoint_conditions_follow_the_object_then_its_namespace_and_none_opts_out() {
    let store = StoreWriter::new(64);
    let service = |ns: &str, name: &str, labels: serde_json::Value| {
        k8s::<k8s_openapi::api::core::v1::Service>(json!({
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"clusterIP": "10.96.0.11", "ports": [{"name": "http", "port": 80}]}}))
    };
    for c in [
        namespace("team", json!({"istio.io/use-waypoint": "wp"})),
        namespace("infra", json!({})),
        service("infra", "shared-wp", json!({})),
        service("team", "wp", json!({})),
        service("team", "inherits", json!({})),
        service("team", "opts-out", json!({"istio.io/use-waypoint": "none"})),
        service(
            "team",
            "elsewhere",
            json!({"istio.io/use-waypoint": "shared-wp", "istio.io/use-waypoint-namespace": "infra"}),
        ),
        service(
            "infra",
            "unbound",
            json!({"istio.io/use-waypoint": "shared-wp", "istio.io/use-waypoint-namespace": "team"}),
        ),
    ] {
        store.upsert(c);
    }
    let snapshot = store.snapshot();
    let registry = Registry::build(&snapshot, "cluster.local");
    let all =
        crate::status::ambient::conditions(&snapshot, &registry, "cluster.local", "istio-system");
    let bound = |ns: &str, name: &str| {
        let key = ConfigKey {
            kind: Kind::Service,
            namespace: ns.into(),
            name: name.into(),
            cluster: String::new(),
        };
        all[&key][crate::status::ambient::WAYPOINT_BOUND]
            .as_ref()
            .map(|c| (c.status, c.reason.clone()))
    };
    let accepted = Some((true, "WaypointAccepted".to_string()));
    assert_eq!(
        bound("team", "inherits"),
        accepted,
        "the namespace's waypoint"
    );
    assert_eq!(bound("team", "elsewhere"), accepted, "another namespace's");
    assert_eq!(bound("team", "opts-out"), None);
    assert_eq!(bound("infra", "shared-wp"), None, "no label anywhere");
    assert_eq!(
        bound("infra", "unbound"),
        Some((false, "WaypointIsNotReady".to_string())),
        "team/shared-wp does not exist"
    );
}

/// A policy attached by targetRefs tells, on its status as istiod's `WaypointAccepted` does,
/// which waypoint enforces it, or why none does: per target, flattened over several.
#[test]
fn policies_attached_to_waypoint_targets_say_which_waypoint_enforces_them() {
    let store = crate::store::StoreWriter::from_yaml(
        "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: shop, labels: {istio.io/use-waypoint: wp}}
spec: {hosts: [web.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: loose, namespace: shop}
spec: {hosts: [loose.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: wp, namespace: shop}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-loose, namespace: shop}
spec: {targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: loose}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-waypoint, namespace: shop}
spec: {targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: wp}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-se, namespace: shop}
spec: {targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-missing, namespace: shop}
spec: {targetRef: {kind: ServiceEntry, group: networking.istio.io, name: gone}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-class, namespace: shop}
spec: {targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-both, namespace: shop}
spec: {targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: web}, {kind: Gateway, group: gateway.networking.k8s.io, name: ingress}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: by-selector, namespace: shop}
spec: {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: dry, namespace: shop, annotations: {istio.io/dry-run: \"true\"}}
spec: {action: DENY, rules: [{}]}
",
    );
    let snapshot = store.snapshot();
    let registry = Registry::build(&snapshot, "cluster.local");
    let all =
        crate::status::ambient::conditions(&snapshot, &registry, "cluster.local", "istio-system");
    let of = |name: &str, condition: &str| {
        let key = ConfigKey {
            kind: Kind::AuthorizationPolicy,
            namespace: "shop".into(),
            name: name.into(),
            cluster: String::new(),
        };
        all[&key][condition]
            .as_ref()
            .map(|c| (c.status, c.reason.clone(), c.message.clone()))
    };
    let accepted = |name: &str| of(name, crate::status::ambient::WAYPOINT_ACCEPTED).unwrap();
    assert_eq!(
        accepted("to-se"),
        (true, "Accepted".into(), "bound to shop/wp".into())
    );
    assert_eq!(
        accepted("to-waypoint"),
        (true, "Accepted".into(), "bound to shop/wp".into())
    );
    assert_eq!(
        accepted("to-loose"),
        (
            false,
            "AncestorNotBound".into(),
            "ServiceEntry shop/loose is not bound to a waypoint".into()
        )
    );
    assert_eq!(
        of("to-missing", crate::status::ambient::WAYPOINT_ACCEPTED).map(|c| c.1),
        Some("TargetNotFound".into())
    );
    assert_eq!(
        of("to-class", crate::status::ambient::WAYPOINT_ACCEPTED).map(|c| c.1),
        Some("Invalid".into()),
        "a GatewayClass outside the root namespace"
    );
    assert_eq!(
        accepted("to-both"),
        (
            true,
            "PartiallyInvalid".into(),
            "Invalid targetRefs: Gateway.gateway.networking.k8s.io:shop/ingress".into()
        ),
        "one target binds, the other is no waypoint"
    );
    assert_eq!(of("to-se", crate::status::ambient::ZTUNNEL_ACCEPTED), None);
    assert_eq!(
        of("by-selector", crate::status::ambient::WAYPOINT_ACCEPTED),
        None
    );
    assert!(of("by-selector", crate::status::ambient::ZTUNNEL_ACCEPTED).is_some());
    // A dry run is not sent to ztunnel, and the status says so, as istiod without
    // AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY.
    assert_eq!(
        of("dry", crate::status::ambient::ZTUNNEL_ACCEPTED).map(|c| (c.0, c.1)),
        Some((false, "UnsupportedValue".into()))
    );
    let dry = snapshot
        .get(&ConfigKey::new(Kind::AuthorizationPolicy, "shop", "dry"))
        .expect("stored");
    let crate::config::Spec::AuthorizationPolicy(policy) = &dry.config.spec else {
        unreachable!()
    };
    assert!(
        super::authorization::convert_stored("istio-system", &dry.config.metadata, policy)
            .authorization
            .is_none()
    );
}

/// `istio.io/ingress-use-waypoint` on a Service, or on its namespace, reaches ztunnel.
#[test]
fn ingress_use_waypoint_is_read_from_the_service_then_its_namespace() {
    let snapshot = crate::testing::store(
        "
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {istio.io/ingress-use-waypoint: 'true'}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {clusterIP: 10.96.0.30, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop, labels: {istio.io/ingress-use-waypoint: 'false'}}
spec: {clusterIP: 10.96.0.31, ports: [{name: http, port: 80}]}
",
    )
    .snapshot();
    let mesh = MeshSettings::default();
    let registry = Registry::build(&snapshot, &mesh.domain_suffix);
    let index = AmbientIndex::build(&snapshot, &registry, &mesh);
    assert!(index.services["shop/web.shop.svc.cluster.local"].ingress_use_waypoint);
    assert!(!index.services["shop/api.shop.svc.cluster.local"].ingress_use_waypoint);
}

/// An on-demand ztunnel (explicit names) also gets the workloads of its own node, unasked, as
/// istiod's `AdditionalPodSubscriptions`; a ztunnel of another node gets only what it asked.
#[test]
fn an_on_demand_ztunnel_gets_its_nodes_workloads() {
    let store = store();
    let snapshot = store.snapshot();
    let mesh = MeshSettings::default();
    let registry = Arc::new(Registry::build(&snapshot, &mesh.domain_suffix));
    let ctx = PushContext::new(1, snapshot, registry, mesh);
    let names_for = |node: &str| -> Vec<String> {
        let p = crate::testing::proxy(
            "ztunnel~10.0.0.1~ztunnel-x.istio-system~istio-system.svc.cluster.local",
            &[("NODE_NAME", node)],
            &[],
        );
        let scope = ctx.scope(&p);
        let asked: std::collections::BTreeSet<String> =
            ["Kubernetes//Pod/plain/db-0".to_string()].into();
        let mut names: Vec<String> = crate::xds::generate::generate(
            &ctx,
            &p,
            &scope,
            crate::xds::types::TypeUrl::Address,
            Some(&asked),
        )
        .iter()
        .map(|r| r.name.to_string())
        .collect();
        names.sort();
        names
    };
    assert_eq!(
        names_for("node-a"),
        [
            "Kubernetes//Pod/amb/web-0",
            "Kubernetes//Pod/amb/web-1",
            "Kubernetes//Pod/plain/db-0"
        ]
    );
    assert_eq!(names_for("node-b"), ["Kubernetes//Pod/plain/db-0"]);
}

mod multi_network;
