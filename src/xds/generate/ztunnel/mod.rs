//! Ambient mode: what ztunnel needs to know (WDS): every workload and service as an `Address`, and
//! the L4 `Authorization` policies. Built from the store and the service registry, once per push
//! context and only when a client asks, so meshes without ztunnel pay nothing.

pub mod authorization;
mod build;
pub mod dump;
mod fields;
mod index;
pub mod multi_network;
pub mod peer_auth;
mod pods;
mod waypoint_policy;

/// ztunnel's xDS types, compiled from `proto/istio/{workload,security}`.
#[allow(clippy::large_enum_variant)]
pub mod pb {
    pub mod workload {
        tonic::include_proto!("istio.workload");
    }
    pub mod security {
        tonic::include_proto!("istio.security");
    }
}

use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use crate::store::Snapshot;
use crate::xds::context::PushContext;
use pb::workload::PortList;
use std::collections::HashMap;
use std::sync::Arc;

pub use crate::model::waypoint::INGRESS_USE_WAYPOINT;
pub use fields::{DATAPLANE_MODE, STATIC_STRICT_POLICY, TUNNEL_LABEL, ip_bytes};
pub use index::AmbientIndex;

/// The ambient view of `ctx`, built on first use and shared for the life of the push.
pub fn index(ctx: &PushContext) -> Arc<AmbientIndex> {
    ctx.derived(|ctx| AmbientIndex::build(&ctx.snapshot, &ctx.registry, &ctx.mesh))
}

impl AmbientIndex {
    /// Policies first (workloads list the selector policies that apply to them), then the
    /// workloads of pods, WorkloadEntries and ServiceEntries, then the services
    /// (`build::Builder`), then, across networks, the far workloads and gateways.
    pub fn build(snapshot: &Snapshot, registry: &Registry, mesh: &MeshSettings) -> AmbientIndex {
        let mut index = AmbientIndex::default();
        let mut multi = multi_network::MultiNetwork::new(snapshot, registry, mesh);
        index.add_policies(snapshot, &mesh.root_namespace);
        let builder = build::Builder::new(snapshot, registry, mesh);
        for converted in peer_auth::converted_policies(&builder.peer_auth, &mesh.root_namespace) {
            index.add_policy(converted);
        }
        builder.pod_workloads(&mut index, &mut multi);
        builder.workload_entry_workloads(&mut index, &mut multi);
        builder.service_entry_workloads(&mut index, &mut multi);
        builder.services(&mut index, multi.as_ref());
        if let Some(m) = &multi {
            for w in m
                .split_horizon_workloads(&index.services)
                .into_iter()
                .chain(m.gateway_workloads())
            {
                index.add_workload(w);
            }
            index.network_gateways = m.gateways().clone();
        }
        let mut behind: HashMap<String, Vec<String>> = HashMap::new();
        for (uid, w) in &index.workloads {
            for svc in w.services.keys() {
                behind.entry(svc.clone()).or_default().push(uid.clone());
            }
        }
        index.service_workloads = behind;
        index
    }
}

#[cfg(test)]
mod tests;
