//! Networks, as istiod reads them: each network's gateways (MeshConfig `meshNetworks` and
//! Services labelled `topology.istio.io/network`), and the network of each cluster's endpoints
//! (the system namespace's label in that cluster, then `meshNetworks` `fromRegistry` and
//! `fromCidr`). A pod's own label wins over both (`model::kubernetes`).

use crate::config::mesh::MESH_CONFIGMAP;
use crate::config::{ConfigKey, Kind, Spec};
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// The label that places a pod, a WorkloadEntry, a cluster (on its system namespace) or a
/// gateway Service in a network.
pub const NETWORK_LABEL: &str = "topology.istio.io/network";

/// What the networks of a mesh are made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Networks {
    pub gateways: BTreeMap<String, Vec<NetworkGateway>>,
    pub clusters: ClusterNetworks,
}

/// The network an endpoint is in when its workload names none, by the cluster it was read from:
/// istiod's order is the cluster's system namespace label, then `meshNetworks` endpoints
/// (`fromRegistry` naming the cluster, then the first `fromCidr` holding the address).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworks {
    /// Cluster (empty: the config cluster) → its system namespace's network label.
    pub system_namespace: BTreeMap<String, String>,
    /// `fromRegistry` cluster ID → network.
    pub from_registry: BTreeMap<String, String>,
    /// `fromCidr` ranges, in the order `meshNetworks` lists them.
    #[serde(skip)]
    pub from_cidr: Vec<(ipnet::IpNet, String)>,
    /// The config cluster's ID (`--cluster-id`), which `fromRegistry` names it by.
    pub local_cluster: String,
}

impl ClusterNetworks {
    /// The network of an endpoint at `address` read from `cluster` (empty: the config cluster).
    pub fn network(&self, cluster: &str, address: &str) -> Option<&str> {
        let id = if cluster.is_empty() {
            self.local_cluster.as_str()
        } else {
            cluster
        };
        self.system_namespace
            .get(cluster)
            .or_else(|| self.from_registry.get(id))
            .map(String::as_str)
            .or_else(|| {
                let ip: std::net::IpAddr = address.parse().ok()?;
                self.from_cidr
                    .iter()
                    .find(|(net, _)| net.contains(&ip))
                    .map(|(_, n)| n.as_str())
            })
    }

    /// The config cluster's own network: its system namespace's label, else what `meshNetworks`
    /// `fromRegistry` names it (how files mode, without namespaces, places itself).
    pub fn local(&self) -> &str {
        self.system_namespace
            .get("")
            .or_else(|| self.from_registry.get(&self.local_cluster))
            .map_or("", String::as_str)
    }

    /// Whether no cluster has a network: every endpoint is in the default one.
    pub fn is_empty(&self) -> bool {
        self.system_namespace.is_empty()
            && self.from_registry.is_empty()
            && self.from_cidr.is_empty()
    }
}

/// The hosts whose traffic stays in the proxy's own cluster (istiod's `ClusterLocalHosts`):
/// MeshConfig `serviceSettings` with `clusterLocal`, and istiod's defaults (every Service of
/// `kube-system`, `kubernetes.default.svc`, the control plane's own discovery host) unless a
/// setting with `clusterLocal: false` names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ClusterLocalHosts {
    specific: BTreeMap<String, bool>,
    /// `*.suffix` patterns, stored with the `*`.
    wildcard: BTreeMap<String, bool>,
}

impl ClusterLocalHosts {
    /// `discovery_host` is the host of the mesh's `defaultConfig.discoveryAddress`.
    pub fn new(
        settings: &[crate::config::mesh::ServiceSettings],
        domain_suffix: &str,
        discovery_host: &str,
    ) -> ClusterLocalHosts {
        let discovery = if discovery_host.ends_with(domain_suffix) {
            discovery_host.to_string()
        } else {
            format!("{discovery_host}.{domain_suffix}")
        };
        let mut defaults: Vec<Option<String>> = vec![
            Some(format!("*.kube-system.svc.{domain_suffix}")),
            Some(format!("kubernetes.default.svc.{domain_suffix}")),
            Some(discovery),
        ];
        let mut out = ClusterLocalHosts::default();
        for setting in settings {
            let local = setting.settings.cluster_local;
            for host in &setting.hosts {
                if !local {
                    // An explicit `clusterLocal: false` takes a default back.
                    for default in &mut defaults {
                        let overridden = default.as_deref().is_some_and(|d| {
                            host == d
                                || d.strip_prefix('*').is_some_and(|rest| host.ends_with(rest))
                        });
                        if overridden {
                            *default = None;
                        }
                    }
                }
                let into = if host.starts_with('*') {
                    &mut out.wildcard
                } else {
                    &mut out.specific
                };
                into.insert(host.clone(), local);
            }
        }
        for default in defaults.into_iter().flatten() {
            let into = if default.starts_with('*') {
                &mut out.wildcard
            } else {
                &mut out.specific
            };
            into.insert(default, true);
        }
        out
    }

    /// Whether `host` is cluster-local: its exact setting, else the most specific wildcard
    /// that matches it, else not.
    pub fn is_cluster_local(&self, host: &str) -> bool {
        if let Some(local) = self.specific.get(host) {
            return *local;
        }
        self.wildcard
            .iter()
            .filter(|(pattern, _)| {
                pattern
                    .strip_prefix('*')
                    .is_some_and(|rest| host.ends_with(rest))
            })
            .max_by_key(|(pattern, _)| pattern.len())
            .is_some_and(|(_, local)| *local)
    }
}

/// A network's gateway (MeshConfig `meshNetworks`): where a proxy of another network sends
/// traffic for that network's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct NetworkGateway {
    pub address: String,
    pub port: u32,
    /// The cluster whose Service it was found as (the config cluster's ID for one of the config
    /// cluster); empty for a `meshNetworks` address, as istiod leaves it. An endpoint goes through
    /// a gateway of its own cluster when its network has one.
    pub cluster: String,
}

/// The `meshNetworks` key of the mesh ConfigMap: each network's gateways, by address, or by
/// `registryServiceName` (a Kubernetes Service's load-balancer or external addresses). A
/// malformed value is reported and reads as no networks.
pub fn networks_from_snapshot(
    snapshot: &Snapshot,
    root_namespace: &str,
    domain_suffix: &str,
    cluster_id: &str,
) -> Result<Networks, String> {
    let mut networks = Networks {
        gateways: labelled_gateways(snapshot, cluster_id),
        clusters: ClusterNetworks {
            system_namespace: snapshot
                .get_all_clusters(Kind::Namespace, "", root_namespace)
                .filter_map(|e| {
                    let network = e.config.metadata.labels.get(NETWORK_LABEL)?;
                    (!network.is_empty())
                        .then(|| (e.config.metadata.cluster.clone(), network.clone()))
                })
                .collect(),
            local_cluster: cluster_id.to_string(),
            ..ClusterNetworks::default()
        },
    };
    let key = ConfigKey::new(Kind::ConfigMap, root_namespace, MESH_CONFIGMAP);
    let Some(Spec::ConfigMap(cm)) = snapshot.get(&key).map(|e| &e.config.spec) else {
        return Ok(networks);
    };
    let Some(text) = cm.data.as_ref().and_then(|d| d.get("meshNetworks")) else {
        return Ok(networks);
    };
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct MeshNetworks {
        #[serde(default)]
        networks: BTreeMap<String, Network>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Network {
        #[serde(default)]
        gateways: Vec<Gateway>,
        #[serde(default)]
        endpoints: Vec<NetworkEndpoints>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct NetworkEndpoints {
        #[serde(default)]
        from_registry: String,
        #[serde(default)]
        from_cidr: String,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Gateway {
        #[serde(default)]
        address: String,
        #[serde(default)]
        registry_service_name: String,
        #[serde(default)]
        port: u32,
        /// Read so that istiod's full gateway shape parses; Envoy gets no per-gateway locality
        /// or weight from istiod either. Warned: `config::mesh::unhonoured_mesh_networks_fields`.
        #[serde(default, rename = "locality")]
        _locality: String,
        #[serde(default, rename = "weight")]
        _weight: u32,
    }
    if text.trim().is_empty() {
        return Ok(networks);
    }
    let parsed: MeshNetworks =
        serde_saphyr::from_str(text).map_err(|e| format!("meshNetworks: {e}"))?;
    // A gateway named by its Service is looked up in the clusters the network's endpoints come
    // from first (the config cluster is empty), then in any cluster.
    let by_name = |fqdn: &str, registries: &[&str]| -> Vec<(String, String)> {
        let Some((name, rest)) = fqdn.split_once('.') else {
            return Vec::new();
        };
        let ns = rest
            .strip_suffix(&format!(".svc.{domain_suffix}"))
            .or_else(|| rest.strip_suffix(".svc"))
            .unwrap_or(rest);
        let mut found: Vec<&crate::store::Entry> =
            snapshot.get_all_clusters(Kind::Service, ns, name).collect();
        let in_registry = |cluster: &str| {
            let id = if cluster.is_empty() {
                cluster_id
            } else {
                cluster
            };
            registries.contains(&id)
        };
        found.sort_by_key(|e| !in_registry(&e.config.metadata.cluster));
        found
            .into_iter()
            .filter_map(|e| match &e.config.spec {
                Spec::Service(svc) => {
                    let cluster = resolved(&e.config.metadata.cluster, cluster_id);
                    let addresses: Vec<(String, String)> = service_addresses(svc)
                        .into_iter()
                        .map(|a| (a, cluster.to_string()))
                        .collect();
                    Some(addresses)
                }
                _ => None,
            })
            .find(|a| !a.is_empty())
            .unwrap_or_default()
    };
    for (name, network) in parsed.networks {
        let mut registries = Vec::new();
        for endpoints in &network.endpoints {
            if !endpoints.from_registry.is_empty() {
                registries.push(endpoints.from_registry.as_str());
                networks
                    .clusters
                    .from_registry
                    .entry(endpoints.from_registry.clone())
                    .or_insert_with(|| name.clone());
            }
            if !endpoints.from_cidr.is_empty() {
                match endpoints.from_cidr.parse::<ipnet::IpNet>() {
                    Ok(net) => networks.clusters.from_cidr.push((net, name.clone())),
                    // istiod skips a range it cannot read, and so does Rudder, saying so.
                    Err(e) => tracing::warn!(network = %name, cidr = %endpoints.from_cidr,
                        error = %e, "meshNetworks: a fromCidr that is not a CIDR is skipped"),
                }
            }
        }
        let gateways = networks.gateways.entry(name).or_default();
        for g in network.gateways {
            let addresses = if g.address.is_empty() {
                by_name(&g.registry_service_name, &registries)
            } else {
                vec![(g.address, String::new())]
            };
            for (address, cluster) in addresses {
                let gw = NetworkGateway {
                    address,
                    port: g.port,
                    cluster,
                };
                if !gateways.contains(&gw) {
                    gateways.push(gw);
                }
            }
        }
    }
    Ok(networks)
}

/// A cluster's ID: the config cluster's for the empty name the store gives it.
pub fn resolved<'a>(cluster: &'a str, cluster_id: &'a str) -> &'a str {
    if cluster.is_empty() {
        cluster_id
    } else {
        cluster
    }
}

/// A Service's addresses outside the cluster: its load balancer's, then its external IPs.
fn service_addresses(svc: &k8s_openapi::api::core::v1::Service) -> Vec<String> {
    let lb = svc
        .status
        .iter()
        .flat_map(|s| s.load_balancer.iter())
        .flat_map(|l| l.ingress.iter().flatten())
        .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()));
    let external = svc
        .spec
        .iter()
        .flat_map(|s| s.external_ips.iter().flatten())
        .cloned();
    lb.chain(external).collect()
}

/// Network gateways found as istiod finds them without `meshNetworks`: Services labelled
/// `topology.istio.io/network`, on the port `networking.istio.io/gatewayPort` names (15443 by
/// default) when the Service has that port, at the Service's outside addresses.
fn labelled_gateways(
    snapshot: &Snapshot,
    cluster_id: &str,
) -> BTreeMap<String, Vec<NetworkGateway>> {
    let mut out: BTreeMap<String, Vec<NetworkGateway>> = BTreeMap::new();
    for entry in snapshot.list(Kind::Service) {
        let Spec::Service(svc) = &entry.config.spec else {
            continue;
        };
        let labels = &entry.config.metadata.labels;
        let Some(network) = labels.get(NETWORK_LABEL).filter(|n| !n.is_empty()) else {
            continue;
        };
        let port = labels
            .get("networking.istio.io/gatewayPort")
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(15443);
        let listens = svc
            .spec
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .any(|p| p.port as u32 == port);
        if !listens {
            tracing::warn!(service = %entry.config.key(), port,
                "a Service labelled as a network gateway does not listen on its gateway port");
            continue;
        }
        for address in service_addresses(svc) {
            let gw = NetworkGateway {
                address,
                port,
                cluster: resolved(&entry.config.metadata.cluster, cluster_id).to_string(),
            };
            let gateways = out.entry(network.clone()).or_default();
            if !gateways.contains(&gw) {
                gateways.push(gw);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mesh::MeshSettings;

    /// A gateway's locality and weight parse (istiod's shape) but are warned about where the
    /// mesh ConfigMap is checked (`rudder validate`, the webhook, the source's metric).
    #[test]
    fn a_network_gateways_locality_and_weight_are_warned_about() {
        let yaml = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  meshNetworks: |
    networks:
      east: {gateways: [{address: 192.0.2.1, port: 15443, locality: us-east/a, weight: 3}, {address: 192.0.2.2, port: 15443}]}
"#;
        let store = crate::testing::store(yaml);
        let snapshot = store.snapshot();
        let entry = snapshot
            .get(&ConfigKey::new(Kind::ConfigMap, "istio-system", "istio"))
            .expect("the mesh ConfigMap");
        let warned: Vec<String> = crate::validation::check(&entry.config)
            .warnings
            .iter()
            .map(|w| w.to_string())
            .collect();
        assert_eq!(warned.len(), 2, "{warned:?}");
        assert!(warned[0].contains("meshNetworks.networks.east.gateways[0].locality"));
        assert!(warned[1].contains("meshNetworks.networks.east.gateways[0].weight"));
        let networks =
            networks_from_snapshot(&snapshot, "istio-system", "cluster.local", "Kubernetes")
                .unwrap();
        assert_eq!(networks.gateways["east"].len(), 2, "still served");
    }

    /// Gateways from `meshNetworks` (by address, or a registry Service's load balancer) and from
    /// Services labelled with their network (on the gateway port, when the Service has it).
    #[test]
    fn network_gateways_come_from_mesh_networks_and_labelled_services() {
        let yaml = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  meshNetworks: |
    networks:
      east: {gateways: [{address: 192.0.2.1, port: 15443}]}
      north: {gateways: [{registryServiceName: gw-north.istio-system.svc.cluster.local, port: 15443}]}
---
apiVersion: v1
kind: Service
metadata: {name: gw-north, namespace: istio-system}
spec: {ports: [{port: 15443, name: tls}]}
status: {loadBalancer: {ingress: [{ip: 198.51.100.7}]}}
---
apiVersion: v1
kind: Service
metadata: {name: eastwest, namespace: istio-system, labels: {topology.istio.io/network: west}}
spec: {ports: [{port: 15443, name: tls}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.9}]}}
---
apiVersion: v1
kind: Service
metadata: {name: elsewhere, namespace: istio-system, labels: {topology.istio.io/network: south, networking.istio.io/gatewayPort: "16443"}}
spec: {ports: [{port: 15443, name: tls}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.77}]}}
"#;
        let snapshot = crate::testing::store(yaml).snapshot();
        let networks =
            networks_from_snapshot(&snapshot, "istio-system", "cluster.local", "Kubernetes")
                .unwrap()
                .gateways;
        // An address has no cluster, as istiod leaves it; a Service is of its cluster.
        let gw = |a: &str, cluster: &str| NetworkGateway {
            address: a.into(),
            port: 15443,
            cluster: cluster.into(),
        };
        assert_eq!(networks["east"], [gw("192.0.2.1", "")]);
        assert_eq!(networks["north"], [gw("198.51.100.7", "Kubernetes")]);
        assert_eq!(networks["west"], [gw("192.0.2.9", "Kubernetes")]);
        assert!(
            !networks.contains_key("south"),
            "no listener on its gateway port"
        );
        // A malformed meshNetworks is reported, so the last good settings stay in force.
        let broken = crate::testing::store(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  meshNetworks: \"networks: [oops\"\n",
        )
        .snapshot();
        assert!(
            MeshSettings::default()
                .with_mesh_config(&broken)
                .1
                .is_some()
        );
    }

    /// A cluster's endpoints are in the network its system namespace names in that cluster,
    /// else the one whose `fromRegistry` names the cluster (the config cluster by its ID), else
    /// the first `fromCidr` holding the address; unknown input in `meshNetworks` is an error.
    #[test]
    fn cluster_networks_in_istiods_order() {
        let mut system_ns: Vec<crate::config::Config> = crate::testing::store(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: istio-system, labels: {topology.istio.io/network: north}}\n",
        )
        .snapshot()
        .list(Kind::Namespace)
        .map(|e| (*e.config).clone())
        .collect();
        system_ns[0].metadata.cluster = "remote-a".into();
        let yaml = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  meshNetworks: |
    networks:
      east: {endpoints: [{fromRegistry: primary}]}
      south: {endpoints: [{fromRegistry: remote-a}, {fromRegistry: remote-b}]}
      west: {endpoints: [{fromCidr: 10.20.0.0/16}]}
"#;
        let store = crate::testing::store(yaml);
        store.apply(
            system_ns
                .into_iter()
                .map(crate::store::Change::Upsert)
                .collect(),
        );
        let networks = networks_from_snapshot(
            &store.snapshot(),
            "istio-system",
            "cluster.local",
            "primary",
        )
        .unwrap()
        .clusters;
        assert_eq!(networks.network("", "10.0.0.1"), Some("east"));
        assert_eq!(networks.network("remote-a", "10.0.0.1"), Some("north"));
        assert_eq!(networks.network("remote-b", "10.0.0.1"), Some("south"));
        assert_eq!(networks.network("remote-c", "10.20.3.4"), Some("west"));
        assert_eq!(networks.network("remote-c", "10.30.3.4"), None);
        let unknown = crate::testing::store(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  meshNetworks: \"networks: {east: {gateway: []}}\"\n",
        );
        assert!(
            networks_from_snapshot(
                &unknown.snapshot(),
                "istio-system",
                "cluster.local",
                "primary"
            )
            .is_err()
        );
    }

    /// istiod's defaults, taken back one by one by `clusterLocal: false`, and a setting's own
    /// hosts, the most specific match deciding.
    #[test]
    fn cluster_local_hosts_as_istiod_decides_them() {
        use crate::config::mesh::{ServiceSettings, ServiceSettingsValues};
        let setting = |local: bool, hosts: &[&str]| ServiceSettings {
            settings: ServiceSettingsValues {
                cluster_local: local,
            },
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        };
        let defaults = ClusterLocalHosts::new(&[], "cluster.local", "istiod.istio-system.svc");
        for local in [
            "kube-dns.kube-system.svc.cluster.local",
            "kubernetes.default.svc.cluster.local",
            "istiod.istio-system.svc.cluster.local",
        ] {
            assert!(defaults.is_cluster_local(local), "{local}");
        }
        assert!(!defaults.is_cluster_local("reviews.shop.svc.cluster.local"));
        let hosts = ClusterLocalHosts::new(
            &[
                setting(true, &["*.shop.svc.cluster.local"]),
                setting(
                    false,
                    &[
                        "reviews.shop.svc.cluster.local",
                        "kube-dns.kube-system.svc.cluster.local",
                    ],
                ),
            ],
            "cluster.local",
            "istiod.istio-system.svc",
        );
        assert!(hosts.is_cluster_local("ratings.shop.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("reviews.shop.svc.cluster.local"));
        assert!(!hosts.is_cluster_local("kube-dns.kube-system.svc.cluster.local"));
        // As istiod: a `false` host under the wildcard default takes the whole default back.
        assert!(!hosts.is_cluster_local("metrics.kube-system.svc.cluster.local"));
    }
}
