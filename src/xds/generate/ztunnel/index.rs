//! The ambient view of one push, indexed: workloads, services and authorizations as ztunnel is
//! sent them, by name and by address.

use super::fields::*;
use super::pb::security::Authorization;
use super::pb::workload::{Address, Service, TunnelProtocol, Workload, address};
use super::{authorization, multi_network, pb};
use crate::config::{Kind, Spec};
use crate::store::Snapshot;
use crate::xds::generate::finish::{Class, IstioResource, Typed};
use crate::xds::resource::Resource;
use crate::xds::types::TypeUrl;
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

impl IstioResource for Address {
    fn type_url(&self) -> TypeUrl {
        TypeUrl::Address
    }
    fn encoded(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

impl IstioResource for Authorization {
    fn type_url(&self) -> TypeUrl {
        TypeUrl::Authorization
    }
    fn encoded(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

/// The ambient view of one push: protos for the debug dump, resources for xDS, and the indexes
/// for on-demand lookups by address.
#[derive(Default)]
pub struct AmbientIndex {
    /// By uid.
    pub workloads: BTreeMap<String, Workload>,
    /// By `namespace/hostname`.
    pub services: BTreeMap<String, Service>,
    /// By `namespace/name`.
    pub policies: BTreeMap<String, Authorization>,
    pub(super) address_resources: BTreeMap<String, Arc<Resource>>,
    pub(super) policy_resources: BTreeMap<String, Arc<Resource>>,
    /// `network/ip` → the resources answering for that address (workloads, or a service by VIP).
    pub(super) by_address: HashMap<String, Vec<String>>,
    /// Service resource name → uids of the workloads behind it.
    pub(super) service_workloads: HashMap<String, Vec<String>>,
    /// Workload-selector policies' objects by `namespace/name`: which workloads they attach to
    /// is `model::policy::attaches`'s to say (the resource does not carry the selector).
    pub(super) selector_policies: HashMap<String, Arc<crate::config::Config>>,
    /// Under ambient multi-network, the global services served, by `namespace/hostname`, with
    /// their waypoint (what an east-west gateway forwards to, and whose tunnels it takes).
    pub global_services: BTreeMap<String, Option<crate::model::waypoint::WaypointRef>>,
    /// Under ambient multi-network, each network's east-west gateways (HBONE), first preferred.
    pub network_gateways: BTreeMap<String, Vec<multi_network::AmbientNetworkGateway>>,
}

impl AmbientIndex {
    pub(super) fn add_policies(&mut self, snapshot: &Snapshot, root_namespace: &str) {
        for e in snapshot.list(Kind::AuthorizationPolicy) {
            let Spec::AuthorizationPolicy(policy) = &e.config.spec else {
                continue;
            };
            let meta = &e.config.metadata;
            let converted = authorization::convert_stored(root_namespace, meta, policy);
            if !converted.ignored_http.is_empty() {
                tracing::debug!(
                    policy = %format!("{}/{}", meta.namespace, meta.name),
                    ignored = ?converted.ignored_http,
                    "ztunnel does not enforce HTTP attributes; a waypoint is needed for them"
                );
            }
            if let Some(a) = converted.authorization {
                if policy.selector.is_some() {
                    self.selector_policies.insert(
                        format!("{}/{}", meta.namespace, meta.name),
                        e.config.clone(),
                    );
                }
                self.add_policy(a);
            }
        }
        self.add_policy(authorization::static_strict(root_namespace));
    }

    pub(super) fn add_policy(&mut self, a: Authorization) {
        let name = format!("{}/{}", a.namespace, a.name);
        let resource = Typed::istio(name.clone(), Class::Ztunnel, a.clone()).encode();
        self.policy_resources.insert(name.clone(), resource);
        self.policies.insert(name, a);
    }

    /// Workload-selector policies (its namespace's and the root namespace's) whose selector matches
    /// these labels, then the PeerAuthentication-derived ones (`peer_auth::workload_keys`).
    pub(super) fn selected_policies(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        root_namespace: &str,
        peer_auth: Vec<String>,
    ) -> Vec<String> {
        let workload = crate::model::policy::Workload {
            namespace,
            labels,
            waypoint: false,
            service: None,
        };
        // A present selector, even an empty one, makes a workload-selector policy (istiod's
        // scope); an empty one attaches to every workload it may reach (`attaches` says how).
        let mut out: Vec<String> = self
            .policies
            .iter()
            .filter(|(_, a)| {
                a.scope == pb::security::Scope::WorkloadSelector as i32
                    && a.name != STATIC_STRICT_POLICY
            })
            .filter(|(key, _)| {
                self.selector_policies.get(*key).is_some_and(|c| {
                    crate::model::policy::attachable(&c.spec).is_some_and(|p| {
                        crate::model::policy::attaches(
                            &c.metadata.namespace,
                            p,
                            root_namespace,
                            &workload,
                        )
                        .is_some()
                    })
                })
            })
            .map(|(key, _)| key.clone())
            .collect();
        out.extend(peer_auth);
        out
    }

    /// Indexes one Address resource under `name`, and under each `network/ip` it answers for.
    pub(super) fn add_address(
        &mut self,
        name: &str,
        addresses: &[(&str, &[u8])],
        address: address::Type,
    ) {
        for (network, bytes) in addresses {
            if let Some(ip) = ip_from_bytes(bytes) {
                self.by_address
                    .entry(format!("{network}/{ip}"))
                    .or_default()
                    .push(name.to_string());
            }
        }
        let address = Address {
            r#type: Some(address),
        };
        let resource = Typed::istio(name, Class::Ztunnel, address).encode();
        self.address_resources.insert(name.to_string(), resource);
    }

    /// Adds a workload ztunnel is served, unless it is another network's (`MultiNetwork::place`).
    pub(super) fn admit(
        &mut self,
        multi: &mut Option<multi_network::MultiNetwork>,
        w: Workload,
        remote: bool,
    ) {
        match multi {
            Some(m) => {
                if let Some(w) = m.place(w, remote) {
                    self.add_workload(w);
                }
            }
            None => self.add_workload(w),
        }
    }

    pub(super) fn add_workload(&mut self, w: Workload) {
        let addresses: Vec<(&str, &[u8])> = w
            .addresses
            .iter()
            .map(|a| (w.network.as_str(), a.as_slice()))
            .collect();
        self.add_address(&w.uid, &addresses, address::Type::Workload(w.clone()));
        self.workloads.insert(w.uid.clone(), w);
    }

    pub(super) fn add_service(&mut self, s: Service) {
        let name = format!("{}/{}", s.namespace, s.hostname);
        let addresses: Vec<(&str, &[u8])> = s
            .addresses
            .iter()
            .map(|a| (a.network.as_str(), a.address.as_slice()))
            .collect();
        self.add_address(&name, &addresses, address::Type::Service(s.clone()));
        self.services.insert(name, s);
    }

    /// Every workload and service (a wildcard subscription).
    pub fn addresses(&self) -> Vec<Arc<Resource>> {
        self.address_resources.values().cloned().collect()
    }

    /// What answers for one subscribed name: a workload uid or `namespace/hostname` itself; a
    /// `network/ip` as the workload or service at that address, aliased to the name asked for, and
    /// for a service VIP the workloads behind it too (the client will connect to them next).
    pub fn lookup_address(&self, name: &str) -> Vec<Arc<Resource>> {
        if let Some(r) = self.address_resources.get(name) {
            return vec![r.clone()];
        }
        let mut out = Vec::new();
        for target in self.by_address.get(name).into_iter().flatten() {
            let Some(r) = self.address_resources.get(target) else {
                continue;
            };
            out.push(r.with_aliases(vec![name.to_string()]));
            for uid in self.service_workloads.get(target).into_iter().flatten() {
                if let Some(w) = self.address_resources.get(uid) {
                    out.push(w.clone());
                }
            }
        }
        out
    }

    /// Whether a workload at `ip` in `network` takes HBONE (it is in the ambient mesh): istiod's
    /// `SupportsTunnel`, which decides whether a waypoint tunnels to an endpoint or connects to
    /// it directly.
    pub fn supports_tunnel(&self, network: &str, ip: &str) -> bool {
        self.by_address
            .get(&format!("{network}/{ip}"))
            .into_iter()
            .flatten()
            .filter_map(|uid| self.workloads.get(uid))
            .any(|w| w.tunnel_protocol == TunnelProtocol::Hbone as i32)
    }

    /// The workloads scheduled on `node` (what an on-demand ztunnel of that node is sent
    /// without asking).
    pub fn node_local(&self, node: &str) -> Vec<Arc<Resource>> {
        self.workloads
            .iter()
            .filter(|(_, w)| w.node == node)
            .filter_map(|(uid, _)| self.address_resources.get(uid).cloned())
            .collect()
    }

    pub fn authorizations(&self) -> Vec<Arc<Resource>> {
        self.policy_resources.values().cloned().collect()
    }

    pub fn authorization(&self, name: &str) -> Option<Arc<Resource>> {
        self.policy_resources.get(name).cloned()
    }
}
