//! ztunnel's view across networks (ambient multi-network): which workloads and services of
//! other networks it is sent, and through which east-west gateways.

use super::*;

/// Ambient across networks: the config cluster and `east` in network `net1`, `west` in `net2`
/// behind an east-west gateway. `web` is global (labelled `istio.io/global`), `only-west` is not.
fn multi_network_store() -> StoreWriter {
    let store = store();
    let in_cluster = |mut c: Config, cluster: &str| {
        c.metadata.cluster = cluster.to_string();
        c
    };
    let service = |name: &str, vip: &str, global: bool| {
        k8s::<k8s_openapi::api::core::v1::Service>(json!({
            "metadata": {"name": name, "namespace": "amb",
                "labels": if global { json!({"istio.io/global": "true"}) } else { json!({}) }},
            "spec": {"clusterIP": vip, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
    };
    let slice = |service: &str, pods: &[(&str, &str)]| {
        let endpoints: Vec<serde_json::Value> = pods
            .iter()
            .map(|(name, ip)| {
                json!({"addresses": [ip], "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "name": name, "namespace": "amb"}})
            })
            .collect();
        k8s::<k8s_openapi::api::discovery::v1::EndpointSlice>(json!({
            "metadata": {"name": format!("{service}-x"), "namespace": "amb",
                "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
            "endpoints": endpoints}))
    };
    // The config cluster's `web` is global too (its definition decides).
    store.upsert(service("web", "10.96.0.10", true));
    let ambient = json!({"istio.io/dataplane-mode": "ambient"});
    for c in [
        in_cluster(namespace("amb", ambient.clone()), "east"),
        in_cluster(
            pod("amb", "web-e", "10.3.0.5", json!({"app": "web"})),
            "east",
        ),
        in_cluster(service("web", "10.97.0.10", true), "east"),
        in_cluster(slice("web", &[("web-e", "10.3.0.5")]), "east"),
        in_cluster(namespace("amb", ambient), "west"),
        // The same IPs as the config cluster's pods: another network may reuse them.
        in_cluster(
            pod("amb", "web-w0", "10.1.0.5", json!({"app": "web"})),
            "west",
        ),
        in_cluster(
            pod("amb", "web-w1", "10.1.0.6", json!({"app": "web"})),
            "west",
        ),
        in_cluster(
            pod("amb", "solo-0", "10.1.0.9", json!({"app": "solo"})),
            "west",
        ),
        in_cluster(service("web", "10.96.0.10", true), "west"),
        in_cluster(service("only-west", "10.96.0.99", false), "west"),
        in_cluster(
            slice("web", &[("web-w0", "10.1.0.5"), ("web-w1", "10.1.0.6")]),
            "west",
        ),
        in_cluster(slice("only-west", &[("solo-0", "10.1.0.9")]), "west"),
    ] {
        store.upsert(c);
    }
    let gateway = Config::from_json(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "eastwest", "namespace": "istio-system",
                "labels": {"topology.istio.io/network": "net2"}},
            "spec": {"gatewayClassName": "istio-east-west", "listeners": [
                {"name": "mesh", "port": 15008, "protocol": "HBONE", "tls": {"mode": "Terminate"}}]},
            "status": {"addresses": [{"type": "IPAddress", "value": "203.0.113.7"}]}}),
        "default",
    )
    .expect("gateway")
    .expect("object");
    store.upsert(in_cluster(gateway, "west"));
    store
}

fn multi_network_mesh(on: bool) -> MeshSettings {
    let mut mesh = MeshSettings {
        ambient_multi_network: on,
        ..Default::default()
    };
    mesh.service_scope = serde_json::from_value(json!([{
        "servicesSelector": {"matchLabels": {"istio.io/global": "true"}}, "scope": "GLOBAL"}]))
    .expect("scopes");
    for (cluster, network) in [("", "net1"), ("east", "net1"), ("west", "net2")] {
        mesh.cluster_networks
            .system_namespace
            .insert(cluster.into(), network.into());
    }
    mesh
}

fn multi_network_index(store: &Store, on: bool) -> AmbientIndex {
    let snapshot = store.snapshot();
    let registry = Registry::build(&snapshot, "cluster.local");
    AmbientIndex::build(&snapshot, &registry, &multi_network_mesh(on))
}

const WEB: &str = "amb/web.amb.svc.cluster.local";
const WEST_WEB: &str =
    "net2/SplitHorizonWorkload/istio-system/eastwest/203.0.113.7/amb/web.amb.svc.cluster.local";

#[test]
fn across_networks_ztunnel_gets_its_networks_workloads_and_one_per_other_network() {
    let idx = multi_network_index(&multi_network_store(), true);
    let local = &idx.workloads["Kubernetes//Pod/amb/web-0"];
    assert_eq!(
        local.network, "net1",
        "the cluster's network, from its system namespace"
    );
    let east = &idx.workloads["east//Pod/amb/web-e"];
    assert_eq!(
        (east.cluster_id.as_str(), east.network.as_str()),
        ("east", "net1")
    );
    assert!(east.services.contains_key(WEB));
    assert!(
        !idx.workloads.keys().any(|uid| uid.starts_with("west//")),
        "another network's pods are not sent one by one: {:?}",
        idx.workloads.keys().collect::<Vec<_>>()
    );
    let w = &idx.workloads[WEST_WEB];
    assert_eq!(w.name, WEST_WEB);
    assert_eq!((w.namespace.as_str(), w.network.as_str()), ("amb", "net2"));
    assert_eq!(w.capacity, Some(2), "two of west's pods serve web");
    assert_eq!(w.cluster_id, "west");
    assert_eq!(w.tunnel_protocol, TunnelProtocol::Hbone as i32);
    assert_eq!(
        w.network_gateway,
        Some(GatewayAddress {
            destination: Some(gateway_address::Destination::Address(NetworkAddress {
                network: "net2".into(),
                address: vec![203, 0, 113, 7],
                length: None,
            })),
            hbone_mtls_port: 15008,
        })
    );
    assert_eq!(w.services[WEB].ports[0].service_port, 80);
    let svc = &idx.services[WEB];
    let vips: Vec<(String, Vec<u8>)> = svc
        .addresses
        .iter()
        .map(|a| (a.network.clone(), a.address.clone()))
        .collect();
    assert_eq!(
        vips,
        [
            ("net1".to_string(), vec![10, 96, 0, 10]),
            ("net1".to_string(), vec![10, 97, 0, 10]),
            ("net2".to_string(), vec![10, 96, 0, 10]),
        ],
        "a global service's VIPs in every cluster, each in its network"
    );
    assert_eq!(
        svc.subject_alt_names,
        ["spiffe://cluster.local/ns/amb/sa/web-sa"],
        "the identities behind the far network's gateway"
    );
    assert!(
        !idx.services
            .contains_key("amb/only-west.amb.svc.cluster.local"),
        "a remote cluster's local service is not shared"
    );
    assert!(idx.lookup_address("net1/10.1.0.5").len() == 1);
    // The gateway itself, as ztunnel finds it by the address the split-horizon workload names
    // and checks its identity at the outer tunnel.
    let gw = &idx.workloads["NetworkGateway/net2/203.0.113.7/0"];
    assert_eq!(
        (
            gw.namespace.as_str(),
            gw.service_account.as_str(),
            gw.network.as_str()
        ),
        ("istio-system", "eastwest", "net2")
    );
    assert_eq!(idx.lookup_address("net2/203.0.113.7").len(), 1);
}

/// A WorkloadEntry that names no network is in its cluster's, as a pod is: ztunnel gets it.
#[test]
fn a_workload_entry_without_a_network_is_in_the_clusters() {
    let store = multi_network_store();
    store.apply_yaml(
        r#"
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm, namespace: amb, labels: {app: web}}
spec: {address: 10.5.0.9, serviceAccount: vm}
"#,
    );
    let idx = multi_network_index(&store, true);
    let vm = &idx.workloads["Kubernetes/networking.istio.io/WorkloadEntry/amb/vm"];
    assert_eq!(vm.network, "net1");
}

/// A global ServiceEntry keeps its VIPs, in the cluster's network (found missing by a real
/// ztunnel, which then passed the traffic through unmeshed).
#[test]
fn a_global_service_entry_keeps_its_vips_in_the_clusters_network() {
    let store = multi_network_store();
    store.apply_yaml(
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: amb, labels: {istio.io/global: "true"}}
spec:
  hosts: [api.amb.svc.cluster.local]
  addresses: [10.97.9.9]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.8.0.1}]
"#,
    );
    let idx = multi_network_index(&store, true);
    let vips: Vec<(String, Vec<u8>)> = idx.services["amb/api.amb.svc.cluster.local"]
        .addresses
        .iter()
        .map(|a| (a.network.clone(), a.address.clone()))
        .collect();
    assert_eq!(vips, [("net1".to_string(), vec![10, 97, 9, 9])]);
}

#[test]
fn without_multi_network_ztunnel_gets_the_config_clusters_view() {
    let idx = multi_network_index(&multi_network_store(), false);
    assert!(
        idx.workloads
            .keys()
            .all(|uid| uid.starts_with("Kubernetes/")),
        "{:?}",
        idx.workloads.keys().collect::<Vec<_>>()
    );
    assert!(
        !idx.services
            .contains_key("amb/only-west.amb.svc.cluster.local")
    );
    assert!(idx.services[WEB].subject_alt_names.is_empty());
}

#[test]
fn a_network_without_an_east_west_gateway_is_left_out() {
    let store = multi_network_store();
    store.apply(vec![crate::store::Change::Delete(ConfigKey {
        kind: Kind::KubernetesGateway,
        namespace: "istio-system".into(),
        name: "eastwest".into(),
        cluster: "west".into(),
    })]);
    let idx = multi_network_index(&store, true);
    assert!(!idx.workloads.keys().any(|uid| uid.contains("SplitHorizon")));
    // A Gateway of class istio-remote in the config cluster stands for the network's gateway.
    store.apply_yaml(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: west-gw, namespace: istio-system, labels: {topology.istio.io/network: net2}}
spec:
  gatewayClassName: istio-remote
  addresses: [{type: Hostname, value: eastwest.west.example.com}]
  listeners: [{name: cross-network, port: 15009, protocol: HBONE}]
"#,
    );
    let idx = multi_network_index(&store, true);
    let uid = "net2/SplitHorizonWorkload/istio-system/west-gw/eastwest.west.example.com/amb/web.amb.svc.cluster.local";
    let gw = idx.workloads[uid].network_gateway.clone().expect("gateway");
    assert_eq!(gw.hbone_mtls_port, 15009);
    let stand_in = &idx.workloads["NetworkGateway/net2/eastwest.west.example.com/15009"];
    assert_eq!(
        stand_in.service_account, "west-gw-istio-remote",
        "istiod's GatewaySA"
    );
    assert_eq!(stand_in.hostname, "eastwest.west.example.com");
    assert_eq!(
        gw.destination,
        Some(gateway_address::Destination::Hostname(NamespacedHostname {
            namespace: "istio-system".into(),
            hostname: "eastwest.west.example.com".into(),
        }))
    );
}

/// A waypoint named by its VIP is in the cluster's network, where ztunnel looks its address up
/// (found by a real ztunnel, which could not find a waypoint addressed in no network).
#[test]
fn a_waypoint_vip_is_in_the_clusters_network() {
    let store = store();
    store.upsert(k8s::<k8s_openapi::api::core::v1::Service>(json!({
        "metadata": {"name": "wp", "namespace": "amb", "labels": {"gateway.istio.io/managed": "istio.io-mesh-controller"}},
        "spec": {"clusterIP": "10.96.5.5", "ports": [{"name": "mesh", "port": 15008}]}})));
    let idx = multi_network_index(&store, false);
    let wp = idx.services["amb/web.amb.svc.cluster.local"]
        .waypoint
        .clone()
        .expect("waypoint");
    assert_eq!(
        wp.destination,
        Some(gateway_address::Destination::Address(NetworkAddress {
            network: "net1".into(),
            address: vec![10, 96, 5, 5],
            length: None,
        }))
    );
}
