//! Ambient mode end to end: a ztunnel-like Delta client on the TLS port (with the token and cluster
//! id headers ztunnel sends) receives workloads, services and L4 policies built from Kubernetes
//! objects, then incremental updates and removals; lookups by address; the config dump's shape.
//! Runs against the fake API server, and a real one too when KUBECONFIG is set.

use crate::common::ads::Delta;
use crate::common::ca::channel;
use crate::common::cluster::{Cluster, istio_crd};
use crate::common::{Daemon, eventually, http_get};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use prost::Message;
use rudder::xds::generate::ztunnel::pb::security::Authorization;
use rudder::xds::generate::ztunnel::pb::workload::{Address, TunnelProtocol, Workload, address};
use serde_json::{Value, json};

const ADDRESS: &str = "type.googleapis.com/istio.workload.Address";
const AUTHZ: &str = "type.googleapis.com/istio.security.Authorization";
const DOMAIN: &str = "istiod.istio-system.svc";

fn pod(ns: &str, name: &str, ip: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"serviceAccountName": "default", "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                   "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn policy(ns: &str) -> Value {
    json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "allow-client", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "rules": [{"from": [{"source": {"principals": [format!("cluster.local/ns/{ns}/sa/client")]}}],
                            "to": [{"operation": {"ports": ["8080"]}}]}]}})
}

/// The pod's IP as the API server reports it (a real cluster assigns it when the pod starts).
fn pod_ip(c: &Cluster, ns: &str, name: &str) -> String {
    let mut ip = String::new();
    eventually(120, "pod has an IP", || {
        ip = c
            .get_json(pod(ns, name, "", json!({})))
            .and_then(|p| p["status"]["podIP"].as_str().map(str::to_string))
            .unwrap_or_default();
        !ip.is_empty()
    });
    ip
}

fn ztunnel_node(ns: &str) -> Option<Node> {
    Some(Node {
        id: format!("ztunnel~10.0.0.99~ztunnel-abcde.{ns}~{ns}.svc.cluster.local"),
        ..Default::default()
    })
}

fn workload(r: &envoy_types::pb::envoy::service::discovery::v3::Resource) -> Option<Workload> {
    let any = r.resource.as_ref()?;
    assert_eq!(any.type_url, ADDRESS);
    match Address::decode(any.value.as_slice()).ok()?.r#type? {
        address::Type::Workload(w) => Some(w),
        address::Type::Service(_) => None,
    }
}

/// Receives (and ACKs) until a response of `type_url` satisfies `done`.
async fn until(
    d: &mut Delta,
    type_url: &str,
    mut done: impl FnMut(&DeltaDiscoveryResponse) -> bool,
) -> DeltaDiscoveryResponse {
    for _ in 0..30 {
        let resp = d.recv().await;
        d.ack(&resp).await;
        if resp.type_url == type_url && done(&resp) {
            return resp;
        }
    }
    panic!("no {type_url} response as expected");
}

fn subscribe(ns: &str, type_url: &str, names: &[&str]) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node: ztunnel_node(ns),
        type_url: type_url.into(),
        resource_names_subscribe: names.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn ztunnel_gets_workloads_and_policies_then_updates_and_removals() {
    for c in Cluster::all("ambient") {
        let ns = c.ns.clone();
        if c.is_fake() {
            for (plural, kind) in [
                ("authorizationpolicies", "AuthorizationPolicy"),
                ("peerauthentications", "PeerAuthentication"),
            ] {
                c.apply(istio_crd("security.istio.io", plural, kind));
            }
        }
        c.apply(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"istio.io/dataplane-mode": "ambient"}}}));
        c.apply(pod(&ns, "web-0", "10.1.0.5", json!({"app": "web"})));
        c.apply(pod(&ns, "web-1", "10.1.0.6", json!({"app": "web"})));
        c.apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
            "spec": {"selector": {"app": "web"}, "clusterIP": if c.is_fake() { json!("10.96.0.20") } else { Value::Null },
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}));
        let (ip0, ip1) = (pod_ip(&c, &ns, "web-0"), pod_ip(&c, &ns, "web-1"));
        if c.is_fake() {
            // A real cluster's endpoint controller writes this from the selector.
            c.apply(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "web-x", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": [{"addresses": [ip0], "conditions": {"ready": true}},
                              {"addresses": [ip1], "conditions": {"ready": true}}]}));
        }
        c.apply(policy(&ns));
        let daemon = c.rudder(&[]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let root = c.ca_root();
        let uid = |name: &str| format!("Kubernetes//Pod/{ns}/{name}");
        let token = c.token("ztunnel");
        let policy_name = format!("{ns}/allow-client");

        c.rt.block_on(async {
            let tls = channel(daemon.addr("grpc-xds-tls"), &root, DOMAIN, None)
                .await
                .expect("TLS to 15012");
            let bearer = format!("Bearer {token}");
            let headers = [
                ("authorization", bearer.as_str()),
                ("clusterid", "Kubernetes"),
            ];
            let mut z = Delta::open_on(tls.clone(), subscribe(&ns, AUTHZ, &[]), &headers)
                .await
                .expect("stream accepted with ztunnel's headers");
            let policies = until(&mut z, AUTHZ, |_| true).await;
            let names: Vec<&str> = policies.resources.iter().map(|r| r.name.as_str()).collect();
            assert!(names.contains(&policy_name.as_str()), "{names:?}");
            let converted = policies
                .resources
                .iter()
                .find(|r| r.name == policy_name)
                .and_then(|r| r.resource.as_ref())
                .map(|a| Authorization::decode(a.value.as_slice()).expect("authorization"))
                .expect("policy");
            assert_eq!(converted.rules[0].clauses.len(), 2, "to and from");
            assert_eq!(
                converted.rules[0].clauses[0].matches[0].destination_ports,
                [8080]
            );

            z.send(subscribe(&ns, ADDRESS, &[])).await;
            let all = until(&mut z, ADDRESS, |_| true).await;
            let web0 = all
                .resources
                .iter()
                .find(|r| r.name == uid("web-0"))
                .and_then(workload)
                .expect("web-0 workload");
            assert_eq!(web0.tunnel_protocol, TunnelProtocol::Hbone as i32);
            assert_eq!(
                web0.authorization_policies,
                std::slice::from_ref(&policy_name)
            );
            assert!(
                web0.services
                    .contains_key(&format!("{ns}/web.{ns}.svc.cluster.local")),
                "{:?}",
                web0.services
            );
            assert!(
                all.resources
                    .iter()
                    .any(|r| r.name == format!("{ns}/web.{ns}.svc.cluster.local")),
                "the service is an address too"
            );

            // A pod opts out: exactly that workload is resent, now without HBONE.
            let mut opted_out = pod(
                &ns,
                "web-1",
                &ip1,
                json!({"app": "web", "istio.io/dataplane-mode": "none"}),
            );
            if !c.is_fake() {
                opted_out.as_object_mut().unwrap().remove("status");
            }
            c.put(opted_out).await;
            let update = until(&mut z, ADDRESS, |r| {
                r.resources.iter().any(|x| x.name == uid("web-1"))
            })
            .await;
            assert_eq!(update.resources.len(), 1, "only what changed is sent");
            let web1 = workload(&update.resources[0]).expect("web-1");
            assert_eq!(web1.tunnel_protocol, TunnelProtocol::None as i32);

            // A pod goes away: removed by name.
            c.remove(pod(&ns, "web-1", "", json!({}))).await;
            until(&mut z, ADDRESS, |r| {
                r.removed_resources.contains(&uid("web-1"))
            })
            .await;

            // The policy goes away: removed, and web-0 no longer references it.
            c.remove(policy(&ns)).await;
            until(&mut z, AUTHZ, |r| {
                r.removed_resources.contains(&policy_name)
            })
            .await;
            let web0 = until(&mut z, ADDRESS, |r| {
                r.resources.iter().any(|x| x.name == uid("web-0"))
            })
            .await;
            assert!(
                workload(&web0.resources[0])
                    .expect("web-0")
                    .authorization_policies
                    .is_empty()
            );

            // On demand: a lookup by IP answers with the workload, aliased to the address asked for;
            // an unknown address is reported removed so the client stops waiting.
            let by_ip = format!("/{ip0}");
            let mut lookup = Delta::open_on(
                tls,
                subscribe(&ns, ADDRESS, &[&by_ip, "/10.255.255.1"]),
                &headers,
            )
            .await
            .unwrap();
            let found = lookup.recv().await;
            assert_eq!(found.resources.len(), 1, "{:?}", found.resources);
            assert_eq!(found.resources[0].name, uid("web-0"));
            assert_eq!(found.resources[0].aliases, std::slice::from_ref(&by_ip));
            assert_eq!(found.removed_resources, ["/10.255.255.1"]);

            // While it is connected, istiod's config dump of it lists its addresses...
            let (code, body) = http_get(
                daemon.addr("monitoring"),
                "/debug/config_dump?proxyID=ztunnel",
            );
            assert_eq!(code, 200, "{body}");
            let dump: Value = serde_json::from_str(&body).unwrap();
            let configs = dump["configs"]
                .as_array()
                .unwrap_or_else(|| panic!("{dump}"));
            assert!(
                configs.iter().any(
                    |c| c["@type"] == "type.googleapis.com/istio.workload.Address"
                        && c["workload"]["uid"] == uid("web-0").as_str()
                ),
                "{dump}"
            );
            // ...and Rudder's view of it has ztunnel's own config_dump shape.
            let (code, body) = http_get(
                daemon.addr("monitoring"),
                "/debug/resourcez?proxyID=ztunnel",
            );
            assert_eq!(code, 200, "{body}");
            let dump: Value = serde_json::from_str(&body).unwrap();
            let w = dump["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["uid"] == uid("web-0").as_str())
                .unwrap_or_else(|| panic!("{dump}"));
            assert_eq!(w["protocol"], "HBONE");
            assert_eq!(w["workloadIps"], json!([ip0]));
            assert_eq!(w["namespace"], ns.as_str());
            assert!(dump["services"].is_array() && dump["policies"].is_array());
        });

        drop(daemon);
    }
}

#[test]
fn ambient_view_is_empty_but_valid_without_pods() {
    let c = Cluster::fake("ambient-empty");
    let daemon: Daemon = c.rudder(&[]);
    eventually(60, "rudder ready", || {
        http_get(daemon.addr("http"), "/ready").0 == 200
    });
    let (code, body) = http_get(daemon.addr("monitoring"), "/debug/ambientz");
    assert_eq!(code, 200);
    let dump: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(dump["workloads"], json!([]));
    assert_eq!(
        dump["policies"][0]["name"], "istio_converted_static_strict",
        "the static STRICT policy is always there for workloads to reference"
    );
}
