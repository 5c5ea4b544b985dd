//! The registry built whole and updated change by change agree; what each source contributes.
use super::*;
use crate::source::kube::convert::IntoConfig;
use crate::store::{Change, StoreWriter};
use serde_json::{Value, json};

const SUFFIX: &str = "cluster.local";

fn kube<T: serde::de::DeserializeOwned + IntoConfig>(v: Value) -> Config {
    serde_json::from_value::<T>(v)
        .expect("a valid Kubernetes object")
        .into_config()
}

fn istio(yaml: &str) -> Config {
    let parsed = crate::config::parse_yaml(yaml, "default");
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    parsed.configs.into_iter().next().expect("one object")
}

/// Small deterministic pseudo-random numbers, so a failing sequence can be replayed.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// One version of object `slot` (0..12), or `None` to delete it. The objects fight over the
/// same hostnames, select the same workloads and point at the same pods and nodes, so every
/// path from a changed object to a hostname is exercised.
fn variant(slot: usize, dice: &mut Dice) -> Result<Config, crate::config::ConfigKey> {
    let app = ["reviews", "ratings"][dice.roll(2)];
    let host = ["reviews", "db.shop.svc.cluster.local", "ext.example.com"][dice.roll(3)];
    let ip = format!("10.0.{}.{}", slot, dice.roll(3) + 1);
    let ready = dice.roll(2) == 0;
    let node = ["n1", "n2"][dice.roll(2)];
    let pod = ["p1", "p2"][dice.roll(2)];
    let pick = [["db", "web"], ["z1", "z2"], ["on", "off"]][slot % 3][dice.roll(2)];
    let (kind, ns, name) = match slot {
        0 | 1 => (Kind::ServiceEntry, "shop", ["se-a", "se-b"][slot]),
        2 => (Kind::ServiceEntry, "edge", "se-c"),
        3 | 4 => (Kind::WorkloadEntry, "shop", ["we1", "we2"][slot - 3]),
        5 | 6 => (Kind::Pod, "shop", ["p1", "p2"][slot - 5]),
        7 => (Kind::Service, "shop", "db"),
        8 | 9 => (Kind::EndpointSlice, "shop", ["db-x", "db-y"][slot - 8]),
        10 => (Kind::Node, "", node),
        _ => (Kind::Namespace, "", "shop"),
    };
    // Kubernetes objects come from the config cluster or a remote one, where the same names
    // mean other objects (istiod's per-cluster registries, merged by hostname).
    let cluster = match kind {
        Kind::Pod | Kind::Service | Kind::EndpointSlice | Kind::Node | Kind::Namespace => {
            ["", "west"][dice.roll(2)]
        }
        _ => "",
    };
    if dice.roll(5) == 0 {
        return Err(crate::config::ConfigKey {
            kind,
            namespace: ns.into(),
            name: name.into(),
            cluster: cluster.into(),
        });
    }
    let mut config = match kind {
        Kind::ServiceEntry => {
            let workloads = if dice.roll(2) == 0 {
                format!("workloadSelector: {{labels: {{app: {app}}}}}")
            } else {
                format!("endpoints: [{{address: {ip}}}]")
            };
            istio(&format!(
                "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  hosts: [{host}, other-{slot}.example.com]\n  ports: [{{number: {}, name: http, protocol: HTTP}}]\n  resolution: STATIC\n  {workloads}\n",
                80 + dice.roll(2)
            ))
        }
        Kind::WorkloadEntry => istio(&format!(
            "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{address: {ip}, labels: {{app: {app}}}}}\n"
        )),
        Kind::Pod => kube::<k8s_openapi::api::core::v1::Pod>(json!({
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
            "spec": {"nodeName": node, "serviceAccountName": app, "containers": []},
            "status": {"phase": "Running", "podIP": ip,
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        })),
        Kind::Service => {
            // With a selector, the Service also selects the namespace's WorkloadEntries.
            let selector = if dice.roll(2) == 0 {
                json!({"app": app})
            } else {
                json!(null)
            };
            kube::<k8s_openapi::api::core::v1::Service>(json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"clusterIP": "10.96.0.9", "selector": selector,
                    "ports": [{"name": "tcp", "port": 5432 + dice.roll(2)}]},
            }))
        }
        Kind::EndpointSlice => kube::<k8s_openapi::api::discovery::v1::EndpointSlice>(json!({
            "metadata": {"name": name, "namespace": ns,
                "labels": {"kubernetes.io/service-name": pick}},
            "addressType": "IPv4",
            "ports": [{"name": "tcp", "port": 5432}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": ready},
                "targetRef": {"kind": "Pod", "name": pod, "namespace": ns}}],
        })),
        Kind::Node => kube::<k8s_openapi::api::core::v1::Node>(json!({
            "metadata": {"name": name,
                "labels": {"topology.kubernetes.io/zone": pick}},
        })),
        _ => kube::<k8s_openapi::api::core::v1::Namespace>(json!({
            "metadata": {"name": name, "labels": {"mesh": pick}},
        })),
    };
    config.metadata.cluster = cluster.into();
    Ok(config)
}

fn assert_same(incremental: &Registry, whole: &Registry, step: usize) {
    assert!(
        incremental.services.iter().eq(whole.services.iter()),
        "services differ at step {step}: {:#?}\nagainst {:#?}",
        incremental.services,
        whole.services
    );
    assert!(
        incremental.endpoints.iter().eq(whole.endpoints.iter()),
        "endpoints differ at step {step}: {:#?}\nagainst {:#?}",
        incremental.endpoints,
        whole.endpoints
    );
    assert!(
        incremental.by_address.iter().eq(whole.by_address.iter()),
        "addresses differ at step {step}: {:#?}\nagainst {:#?}",
        incremental.by_address,
        whole.by_address
    );
    assert_eq!(
        incremental.duplicate_hosts, whole.duplicate_hosts,
        "step {step}"
    );
    assert_eq!(
        incremental.ports_without_endpoints(),
        whole.ports_without_endpoints(),
        "step {step}"
    );
}

/// Thousands of random changes, one or a few at a time: after each, the registry updated from
/// the changed objects equals the one built whole from the store, and so does what it reports
/// as changed. With and without discovery selectors.
#[test]
fn updates_agree_with_whole_rebuilds() {
    let only_on: LabelSelector =
        serde_json::from_value(json!({"matchLabels": {"mesh": "on"}})).expect("a label selector");
    for selectors in [Vec::new(), vec![only_on]] {
        let mut dice = Dice(7);
        let store = StoreWriter::default();
        let mut snapshot = store.snapshot();
        // The remote cluster's endpoints are in a network of their own.
        let networks = ClusterNetworks {
            from_registry: BTreeMap::from([("west".to_string(), "west-net".to_string())]),
            local_cluster: "east".into(),
            ..ClusterNetworks::default()
        };
        let mut registry = Registry::build_with(&snapshot, SUFFIX, &selectors, &networks);
        let mut clusters_seen: BTreeSet<String> = BTreeSet::new();
        for step in 0..3000 {
            let changes: Vec<Change> = (0..1 + dice.roll(3))
                .map(|_| {
                    let slot = dice.roll(12);
                    match variant(slot, &mut dice) {
                        Ok(config) => Change::Upsert(config),
                        Err(key) => Change::Delete(key),
                    }
                })
                .collect();
            if std::env::var("REGISTRY_TRACE").is_ok() {
                for c in &changes {
                    match c {
                        Change::Upsert(c) => eprintln!("{step} upsert {:?}", c),
                        Change::Delete(k) => eprintln!("{step} delete {k}"),
                    }
                }
            }
            store.apply(changes);
            let next = store.snapshot();
            let (updated, delta) = registry.update(&snapshot, &next, SUFFIX, &selectors, &networks);
            let whole = Registry::build_with(&next, SUFFIX, &selectors, &networks);
            assert_same(&updated, &whole, step);
            clusters_seen.extend(
                whole
                    .endpoints
                    .values()
                    .flat_map(|eps| eps.iter())
                    .map(|e| e.cluster.clone()),
            );
            assert_eq!(delta, registry.delta(&whole), "step {step}");
            registry = updated;
            snapshot = next;
        }
        assert!(!registry.services.is_empty());
        assert_eq!(
            clusters_seen,
            BTreeSet::from([String::new(), "west".to_string()]),
            "both clusters' endpoints seen"
        );
    }
}

/// An update that changes nothing the registry reads keeps it as it was, and reports nothing.
#[test]
fn unrelated_changes_leave_the_registry_alone() {
    let store = StoreWriter::default();
    store.apply(vec![Change::Upsert(istio(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: shop}\nspec: {hosts: [a.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC, endpoints: [{address: 10.0.0.1}]}\n",
    ))]);
    let before = store.snapshot();
    let registry = Registry::build(&before, SUFFIX);
    store.apply(vec![Change::Upsert(istio(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a, namespace: shop}\nspec: {hosts: [a.example.com], http: [{route: [{destination: {host: a.example.com}}]}]}\n",
    ))]);
    let (updated, delta) =
        registry.update(&before, &store.snapshot(), SUFFIX, &[], &Default::default());
    assert_eq!(delta, RegistryDelta::default());
    assert!(updated.services.ptr_eq(&registry.services));
    assert!(updated.endpoints.ptr_eq(&registry.endpoints));
}

/// A Kubernetes Service's selector also selects WorkloadEntries (VMs behind a Service), as
/// istiod: each on the port its `ports` map names, else the target port.
#[test]
fn kubernetes_services_select_workload_entries() {
    let store = StoreWriter::default();
    store.apply(vec![
        Change::Upsert(kube::<k8s_openapi::api::core::v1::Service>(json!({
            "metadata": {"name": "api", "namespace": "shop"},
            "spec": {"clusterIP": "10.96.0.20", "selector": {"app": "api"},
                "ports": [{"name": "http", "port": 80, "targetPort": 9090},
                          {"name": "grpc", "port": 90, "targetPort": 9091}]},
        }))),
        Change::Upsert(istio(
            "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: vm-1, namespace: shop}\nspec: {address: 10.9.0.1, labels: {app: api}, ports: {http: 8080}}\n",
        )),
        Change::Upsert(istio(
            "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: other, namespace: shop}\nspec: {address: 10.9.0.2, labels: {app: web}}\n",
        )),
    ]);
    let registry = Registry::build(&store.snapshot(), SUFFIX);
    let at = |port: u32| -> Vec<(String, u32)> {
        registry
            .endpoints
            .get(&("api.shop.svc.cluster.local".to_string(), port))
            .map(|eps| eps.iter().map(|e| (e.address.clone(), e.port)).collect())
            .unwrap_or_default()
    };
    assert_eq!(at(80), [("10.9.0.1".to_string(), 8080)]);
    assert_eq!(at(90), [("10.9.0.1".to_string(), 9091)]);
}
