//! WorkloadEntry auto-registration through a real Envoy on the TLS port, as a VM's istio-agent
//! connects: the proxy names its WorkloadGroup (`ISTIO_META_AUTO_REGISTER_GROUP`), Rudder creates
//! the WorkloadEntry from the group's template (address, labels, owner, connection annotations),
//! a sidecar then reaches the VM through the ServiceEntry selecting it, and once the VM's proxy
//! leaves the entry is marked disconnected and deleted after the grace period. A proxy naming a
//! group that does not exist is refused. On the fake API server, and a real one with KUBECONFIG
//! and Istio's CRDs.

use crate::common::cluster::{Cluster, istio_crd};
use crate::common::peers::{Backend, Bootstrap, Envoy, free_port, peer, request};
use crate::common::{eventually, http_get, metric};
use serde_json::json;

#[test]
fn a_vm_proxy_registers_its_workload_entry_while_connected() {
    let Some(envoy_bin) = peer("venv/bin/envoy") else {
        return;
    };
    for c in Cluster::all("autoregistration") {
        let ns = c.ns.clone();
        if c.is_fake() {
            for (plural, kind) in [
                ("workloadgroups", "WorkloadGroup"),
                ("workloadentries", "WorkloadEntry"),
                ("serviceentries", "ServiceEntry"),
            ] {
                c.apply(istio_crd("networking.istio.io", plural, kind));
            }
            c.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        }
        let vm_app = Backend::start("vm-app");
        let port = free_port();
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "WorkloadGroup",
            "metadata": {"name": "ratings", "namespace": ns},
            "spec": {"metadata": {"labels": {"app": "ratings"}, "annotations": {"team": "vm"}},
                     "template": {"serviceAccount": "ratings-vm", "ports": {"http": vm_app.port}}}}));
        c.apply(json!({"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": {"name": "ratings", "namespace": ns},
            "spec": {"hosts": ["ratings.vm.internal"], "location": "MESH_INTERNAL", "resolution": "STATIC",
                     "ports": [{"number": port, "name": "http", "protocol": "HTTP", "targetPort": vm_app.port}],
                     "workloadSelector": {"labels": {"app": "ratings"}}}}));
        let daemon = c.rudder(&["--workload-entry-grace-period", "1s"]);
        eventually(60, "rudder ready", || {
            http_get(daemon.addr("http"), "/ready").0 == 200
        });
        let root_dir = tempfile::tempdir().unwrap();
        let root = root_dir.path().join("root.pem");
        std::fs::write(&root, c.ca_root()).unwrap();
        let vm_token = c.token("ratings-vm");
        let vm = |group: &str| {
            Envoy::boot(
                &envoy_bin,
                daemon.addr("grpc-xds-tls"),
                &Bootstrap {
                    pod: "ratings-vm",
                    namespace: &ns,
                    labels: "version: v1",
                    metadata: &format!("AUTO_REGISTER_GROUP: {group}, "),
                    ip: "127.0.0.1",
                    tls: Some((&root, "istiod.istio-system.svc")),
                    token: Some(&vm_token),
                    ..Bootstrap::default()
                },
            )
        };
        let entry = || {
            c.get_json(
                json!({"apiVersion": "networking.istio.io/v1", "kind": "WorkloadEntry",
                "metadata": {"name": "ratings-127.0.0.1", "namespace": ns}}),
            )
        };
        let vm_proxy = vm("ratings");
        eventually(60, "the WorkloadEntry created", || entry().is_some());
        let e = entry().unwrap();
        assert_eq!(e["spec"]["address"], "127.0.0.1");
        assert_eq!(e["spec"]["serviceAccount"], "ratings-vm");
        assert_eq!(e["metadata"]["labels"]["app"], "ratings");
        assert_eq!(e["metadata"]["labels"]["version"], "v1");
        let annotations = &e["metadata"]["annotations"];
        assert_eq!(annotations["istio.io/autoRegistrationGroup"], "ratings");
        assert_eq!(annotations["team"], "vm");
        assert!(annotations["istio.io/connectedAt"].is_string(), "{e}");
        assert_eq!(e["metadata"]["ownerReferences"][0]["kind"], "WorkloadGroup");
        // A sidecar reaches the VM through the ServiceEntry that selects its entry.
        let client_token = c.token("client");
        let _client = Envoy::boot(
            &envoy_bin,
            daemon.addr("grpc-xds-tls"),
            &Bootstrap {
                namespace: &ns,
                tls: Some((&root, "istiod.istio-system.svc")),
                token: Some(&client_token),
                ..Bootstrap::default()
            },
        );
        eventually(60, "the client reaches the VM", || {
            request(port, "ratings.vm.internal", "/r", &[]) == (200, "vm-app /r".into())
        });
        // The VM leaves: its entry is marked disconnected, then deleted after the grace period.
        drop(vm_proxy);
        eventually(60, "the entry deleted after the grace period", || {
            entry().is_none()
        });
        assert!(metric(&daemon, "auto_registration_success_total") >= 1.0);
        assert!(metric(&daemon, "auto_registration_deletes_total") >= 1.0);
        // A group that does not exist: the stream is refused, nothing is created.
        let _stray = vm("nonexistent");
        eventually(60, "the stream refused", || {
            metric(&daemon, "auto_registration_errors_total") >= 1.0
        });
        assert!(
            c.get_json(
                json!({"apiVersion": "networking.istio.io/v1", "kind": "WorkloadEntry",
                "metadata": {"name": "nonexistent-127.0.0.1", "namespace": ns}})
            )
            .is_none()
        );
        drop(daemon);
    }
}
