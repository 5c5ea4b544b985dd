use super::*;
use crate::model::judged::Judged;
use crate::store::Store;

fn status_of(yaml: &str, key: (Kind, &str, &str)) -> Value {
    let judged = Judged::build(
        Store::from_yaml(yaml).snapshot(),
        crate::model::mesh::MeshSettings::default(),
    );
    statuses(&Input::of(&judged), &judged.gateway_api)
        .remove(&ConfigKey {
            kind: key.0,
            namespace: key.1.into(),
            name: key.2.into(),
            cluster: String::new(),
        })
        .expect("a status")
}

const SCENE: &str = "
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge, generation: 3}
spec:
  gatewayClassName: istio
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - name: https
    port: 443
    protocol: HTTPS
    tls: {certificateRefs: [{name: missing-cert}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: edge, generation: 2}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules: [{backendRefs: [{name: nowhere, port: 80}]}]
";

#[test]
fn gateway_status_names_what_is_missing() {
    let s = status_of(SCENE, (Kind::KubernetesGateway, "edge", "gw"));
    let cond = |list: &Value, t: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .cloned()
            .unwrap()
    };
    assert_eq!(cond(&s["conditions"], "Accepted")["status"], "True");
    let programmed = cond(&s["conditions"], "Programmed");
    assert_eq!(programmed["status"], "False");
    assert_eq!(programmed["reason"], "AddressNotUsable");
    assert!(
        programmed["message"]
            .as_str()
            .unwrap()
            .contains("gw-istio.edge.svc.cluster.local")
    );
    assert_eq!(programmed["observedGeneration"], 3);
    let listeners = s["listeners"].as_array().unwrap();
    assert_eq!(listeners[0]["attachedRoutes"], 1);
    assert_eq!(listeners[1]["attachedRoutes"], 0);
    let refs = cond(&listeners[1]["conditions"], "ResolvedRefs");
    assert_eq!(refs["reason"], "InvalidCertificateRef");
    assert_eq!(
        listeners[0]["supportedKinds"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"},
               {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"}])
    );

    let r = status_of(SCENE, (Kind::HTTPRoute, "edge", "r"));
    let parent = &r["parents"][0];
    assert_eq!(parent["controllerName"], CONTROLLER);
    assert_eq!(
        parent["parentRef"],
        json!({"name": "gw", "sectionName": "http"})
    );
    assert_eq!(cond(&parent["conditions"], "Accepted")["status"], "True");
    let resolved = cond(&parent["conditions"], "ResolvedRefs");
    assert_eq!(resolved["reason"], "BackendNotFound");
    assert_eq!(
        resolved["message"],
        "backend(nowhere.edge.svc.cluster.local) not found"
    );
}

#[test]
fn merging_keeps_other_controllers_parents_and_unchanged_transition_times() {
    let current = json!({"parents": [
        {"controllerName": "example.com/other", "parentRef": {"name": "theirs"}, "conditions": []},
        {"controllerName": CONTROLLER, "parentRef": {"name": "gw"}, "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Route was valid",
             "lastTransitionTime": "2020-01-01T00:00:00Z"}]}]});
    let wanted = json!({"parents": [
        {"controllerName": CONTROLLER, "parentRef": {"name": "gw"}, "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Route was valid"},
            {"type": "ResolvedRefs", "status": "False", "reason": "BackendNotFound", "message": "x"}]}]});
    let merged = merge(Kind::HTTPRoute, &current, &wanted, "2026-01-01T00:00:00Z");
    let parents = merged["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 2);
    assert_eq!(parents[0]["controllerName"], "example.com/other");
    let ours = &parents[1]["conditions"];
    assert_eq!(ours[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
    assert_eq!(ours[1]["lastTransitionTime"], "2026-01-01T00:00:00Z");
    // Merging what is already there changes nothing: no write.
    assert_eq!(
        merge(Kind::HTTPRoute, &merged, &wanted, "2027-01-01T00:00:00Z"),
        merged
    );
}

/// BackendTLSPolicy status: an ancestor per target, Accepted and ResolvedRefs with the spec's
/// reasons; a policy for a target an older one holds is Conflicted.
#[test]
fn backend_tls_policy_status_per_target() {
    let yaml = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: ca, namespace: shop}
data:
  ca.crt: "-----BEGIN CERTIFICATE-----\nQQ==\n-----END CERTIFICATE-----\n"
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: shop}
spec: {hosts: [api.example.com], ports: [{number: 443, name: https, protocol: HTTP}], resolution: DNS}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: good, namespace: shop, generation: 4, creationTimestamp: '2024-01-01T00:00:00Z'}
spec:
  targetRefs: [{group: networking.istio.io, kind: ServiceEntry, name: api}, {group: "", kind: Service, name: missing}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}], hostname: api.example.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-api, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: edge}]
  rules: [{backendRefs: [{group: networking.istio.io, kind: Hostname, name: api.example.com, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: late, namespace: shop, creationTimestamp: '2025-01-01T00:00:00Z'}
spec:
  targetRefs: [{group: networking.istio.io, kind: ServiceEntry, name: api}]
  validation: {caCertificateRefs: [{group: "", kind: ConfigMap, name: nope}], hostname: api.example.com}
"#;
    let good = status_of(yaml, (Kind::BackendTLSPolicy, "shop", "good"));
    let a = &good["ancestors"];
    assert_eq!(a[0]["ancestorRef"]["kind"], "ServiceEntry");
    assert_eq!(a[0]["conditions"][0]["status"], "True", "{good}");
    assert_eq!(a[0]["conditions"][0]["observedGeneration"], 4);
    assert_eq!(a[0]["conditions"][1]["reason"], "ResolvedRefs");
    assert_eq!(a[1]["conditions"][0]["reason"], "TargetNotFound");
    // The Gateway whose route sends to the target is an ancestor too (what the conformance
    // tests look the conditions up by).
    assert_eq!(a[2]["ancestorRef"]["kind"], "Gateway", "{good}");
    assert_eq!(a[2]["ancestorRef"]["namespace"], "edge");
    assert_eq!(a[2]["conditions"][0]["status"], "True");
    let late = status_of(yaml, (Kind::BackendTLSPolicy, "shop", "late"));
    let c = &late["ancestors"][0]["conditions"];
    assert_eq!(c[0]["reason"], "Conflicted", "{late}");
    assert_eq!(c[1]["reason"], "InvalidCACertificateRef");
}

/// A ListenerSet's status: Accepted and Programmed with its listeners' attached routes, or
/// NotAllowed; its Gateway counts the attached ones.
#[test]
fn listener_set_status_and_the_gateways_count() {
    let yaml = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge}
spec:
  gatewayClassName: istio
  addresses: [{type: Hostname, value: ingress}]
  allowedListeners: {namespaces: {from: Same}}
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: more, namespace: edge, generation: 2}
spec:
  parentRef: {name: gw}
  listeners: [{name: admin, port: 8081, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: foreign, namespace: other}
spec:
  parentRef: {name: gw, namespace: edge}
  listeners: [{name: x, port: 8082, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: edge}
spec:
  parentRefs: [{kind: ListenerSet, name: more}]
  rules: [{backendRefs: [{name: a, port: 80}]}]
"#;
    let more = status_of(yaml, (Kind::ListenerSet, "edge", "more"));
    assert_eq!(more["conditions"][0]["type"], "Accepted");
    assert_eq!(more["conditions"][0]["status"], "True", "{more}");
    assert_eq!(more["conditions"][0]["observedGeneration"], 2);
    assert_eq!(more["listeners"][0]["attachedRoutes"], 1);
    assert!(more.get("addresses").is_none());
    let foreign = status_of(yaml, (Kind::ListenerSet, "other", "foreign"));
    assert_eq!(
        foreign["conditions"][0]["reason"], "NotAllowed",
        "{foreign}"
    );
    let gw = status_of(yaml, (Kind::KubernetesGateway, "edge", "gw"));
    assert_eq!(gw["attachedListenerSets"], 1, "{gw}");
}

/// A route's backend in a namespace outside discoverySelectors is not found: proxies are given
/// no cluster for it, and the status reads the registry the push built, so it says so too.
#[test]
fn a_backend_the_push_does_not_discover_is_not_found() {
    let yaml = "
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    discoverySelectors: [{matchLabels: {mesh: 'on'}}]
---
apiVersion: v1
kind: Namespace
metadata: {name: edge, labels: {mesh: 'on'}}
---
apiVersion: v1
kind: Namespace
metadata: {name: hidden}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: edge}
spec: {clusterIP: 10.96.0.8, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: hidden}
spec: {clusterIP: 10.96.0.9, ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: edge}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: seen, namespace: edge}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: unseen, namespace: edge}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: api, namespace: hidden, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-edge, namespace: hidden}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: edge}]
  to: [{group: '', kind: Service}]
";
    let snapshot = crate::testing::store(yaml).snapshot();
    let (mesh, error) = crate::model::mesh::MeshSettings::default().with_mesh_config(&snapshot);
    assert!(error.is_none(), "{error:?}");
    let judged = Judged::build(snapshot, mesh);
    let statuses = statuses(&Input::of(&judged), &judged.gateway_api);
    let resolved = |name: &str| {
        let key = ConfigKey {
            kind: Kind::HTTPRoute,
            namespace: "edge".into(),
            name: name.into(),
            cluster: String::new(),
        };
        statuses[&key]["parents"][0]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "ResolvedRefs")
            .cloned()
            .unwrap()
    };
    assert_eq!(resolved("seen")["status"], "True");
    let unseen = resolved("unseen");
    assert_eq!(unseen["reason"], "BackendNotFound");
    assert_eq!(
        unseen["message"],
        "backend(api.hidden.svc.cluster.local) not found"
    );
}
