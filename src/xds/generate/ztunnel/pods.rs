//! Pods as ztunnel's workloads.

use super::fields::{
    NETWORK_LABEL, NamespaceInfo, captured, ip_bytes, native_tunnel, non_empty, tunnel,
    workload_waypoint,
};
use super::pb::workload::{NetworkMode, Workload, WorkloadStatus, WorkloadType};
use crate::config::Config;
use crate::model::Registry;
use crate::model::mesh::MeshSettings;
use k8s_openapi::api::core::v1::Pod;
use std::net::IpAddr;

fn pod_ips(pod: &Pod) -> Vec<IpAddr> {
    let status = pod.status.as_ref();
    let mut ips: Vec<IpAddr> = status
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| p.ip.parse().ok())
        .collect();
    if ips.is_empty()
        && let Some(ip) = status
            .and_then(|s| s.pod_ip.as_ref())
            .and_then(|ip| ip.parse().ok())
    {
        ips.push(ip);
    }
    ips
}

/// A pod as ztunnel sees it; `None` for pods that have no address yet or have finished.
pub(super) fn pod_workload(
    config: &Config,
    pod: &Pod,
    ns: &NamespaceInfo,
    registry: &Registry,
    mesh: &MeshSettings,
) -> Option<Workload> {
    let meta = &config.metadata;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        return None;
    }
    let ips = pod_ips(pod);
    if ips.is_empty() {
        return None;
    }
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let owner = crate::model::workload::of_pod(pod);
    let (canonical_name, canonical_revision) =
        crate::model::workload::canonical(&meta.labels, &owner.name);
    let workload_type = match owner.kind.as_str() {
        "Deployment" => WorkloadType::Deployment,
        "CronJob" => WorkloadType::Cronjob,
        "Job" => WorkloadType::Job,
        _ => WorkloadType::Pod,
    };
    // The pod's label, its namespace's, then its cluster's network (system namespace label,
    // `meshNetworks`).
    let network = meta
        .labels
        .get(NETWORK_LABEL)
        .map(String::as_str)
        .or_else(|| ns.label(NETWORK_LABEL))
        .or_else(|| {
            mesh.cluster_networks
                .network(&meta.cluster, &ips[0].to_string())
        })
        .unwrap_or_default()
        .to_string();
    // A remote cluster's pod carries that cluster's ID, in its uid too.
    let cluster_id = if meta.cluster.is_empty() {
        mesh.cluster_id.clone()
    } else {
        meta.cluster.clone()
    };
    Some(Workload {
        uid: format!("{cluster_id}//Pod/{}/{}", meta.namespace, meta.name),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        addresses: ips.iter().map(|ip| ip_bytes(*ip)).collect(),
        network,
        tunnel_protocol: tunnel(
            captured(&meta.labels, Some(&meta.annotations), host_network, ns)
                || native_tunnel(&meta.labels),
        ) as i32,
        native_tunnel: native_tunnel(&meta.labels),
        trust_domain: mesh.trust_domain.clone(),
        service_account: non_empty(
            spec.and_then(|s| s.service_account_name.as_deref())
                .unwrap_or_default(),
            "default",
        ),
        waypoint: workload_waypoint(&meta.labels, &meta.namespace, registry, mesh),
        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        canonical_name,
        canonical_revision,
        workload_type: workload_type as i32,
        workload_name: owner.name,
        status: if ready {
            WorkloadStatus::Healthy
        } else {
            WorkloadStatus::Unhealthy
        } as i32,
        cluster_id,
        network_mode: if host_network {
            NetworkMode::HostNetwork
        } else {
            NetworkMode::Standard
        } as i32,
        ..Default::default()
    })
}
