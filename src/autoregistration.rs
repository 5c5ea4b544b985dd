//! WorkloadEntry auto-registration, as istiod's `pilot/pkg/autoregistration` (Kubernetes mode,
//! `PILOT_ENABLE_WORKLOAD_ENTRY_AUTOREGISTRATION`, on by default): a proxy whose node names a
//! WorkloadGroup (`ISTIO_META_AUTO_REGISTER_GROUP`) gets a WorkloadEntry made from the group's
//! template — `<group>-<ip>[-<network>]`, its address, labels and network, the group's labels
//! and annotations, owned by the group — and marked connected to this instance. When its last
//! stream here ends, the entry is marked disconnected and, still disconnected after the grace
//! period (`PILOT_WORKLOAD_ENTRY_GRACE_PERIOD`, 10s), deleted. A proxy may only register in its
//! verified namespace and, where the template names one, as its service account; without its
//! WorkloadGroup the stream is refused, as istiod refuses it.

use crate::config::networking::WorkloadEntry;
use crate::config::{Kind, Spec};
use crate::model::identity::BoxFuture;
use crate::store::Store;
use crate::xds::proxy::Proxy;
use crate::xds::server::observer::ConnectionObserver;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch};
use kube::api::{PatchParams, PostParams};
use prometheus_client::metrics::counter::Counter;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};

/// The node metadata naming the proxy's WorkloadGroup.
pub const GROUP_METADATA: &str = "AUTO_REGISTER_GROUP";
/// On an auto-registered entry: its WorkloadGroup.
pub const GROUP_ANNOTATION: &str = "istio.io/autoRegistrationGroup";
/// On an entry: the control plane instance its proxy is connected to.
pub const CONTROLLER_ANNOTATION: &str = "istio.io/workloadController";
pub const CONNECTED_AT: &str = "istio.io/connectedAt";
pub const DISCONNECTED_AT: &str = "istio.io/disconnectedAt";

/// istiod's `auto_registration_*` counters.
#[derive(Clone, Default)]
pub struct RegistrationMetrics {
    pub success: Counter,
    pub updates: Counter,
    pub unregister: Counter,
    pub deletes: Counter,
    pub errors: Counter,
}

impl RegistrationMetrics {
    pub fn register(registry: &mut crate::metrics::Registry) -> RegistrationMetrics {
        let m = RegistrationMetrics::default();
        for (name, help, counter) in [
            (
                "auto_registration_success",
                "Total number of successful auto registrations.",
                &m.success,
            ),
            (
                "auto_registration_updates",
                "Total number of auto registration updates.",
                &m.updates,
            ),
            (
                "auto_registration_unregister",
                "Total number of unregistrations.",
                &m.unregister,
            ),
            (
                "auto_registration_deletes",
                "Total number of auto registration cleaned up by periodic timer.",
                &m.deletes,
            ),
            (
                "auto_registration_errors",
                "Total number of auto registration errors.",
                &m.errors,
            ),
        ] {
            registry.register(name, help, counter.clone());
        }
        m
    }
}

pub struct Registrar {
    pub client: kube::Client,
    pub store: Arc<Store>,
    /// This control plane instance (its pod name), written as the entry's controller.
    pub instance: String,
    pub grace: Duration,
    pub metrics: RegistrationMetrics,
    /// Live streams here per entry (`namespace/name`), with the latest one's connection time:
    /// an entry is marked disconnected only when the last of them ends.
    live: Mutex<HashMap<String, (usize, String)>>,
}

impl Registrar {
    pub fn new(
        client: kube::Client,
        store: Arc<Store>,
        instance: String,
        grace: Duration,
        metrics: RegistrationMetrics,
    ) -> Registrar {
        Registrar {
            client,
            store,
            instance,
            grace,
            metrics,
            live: Mutex::default(),
        }
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("networking.istio.io", "v1", "WorkloadEntry");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "workloadentries");
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }

    async fn register(&self, proxy: &Proxy, group: &str) -> Result<(), String> {
        let name = entry_name(proxy, group)?;
        let ns = proxy.namespace.clone();
        let now = now_rfc3339_nanos();
        let snapshot = self.store.snapshot();
        let existing = snapshot.get_named(Kind::WorkloadEntry, &ns, &name);
        if let Some(existing) = existing {
            if let Spec::WorkloadEntry(we) = &existing.config.spec {
                may_control(proxy, &existing.config.metadata.namespace, we)?;
            }
            self.mark_connected(&ns, &name, &now).await?;
            self.metrics.updates.inc();
            info!(namespace = %ns, name, "auto-registered WorkloadEntry marked connected");
        } else {
            let group_entry = snapshot
                .get_named(Kind::WorkloadGroup, &ns, group)
                .ok_or_else(|| {
                    format!(
                        "auto-registration WorkloadEntry of {} failed: cannot find WorkloadGroup {ns}/{group}",
                        proxy.id
                    )
                })?;
            let Spec::WorkloadGroup(wg) = &group_entry.config.spec else {
                return Err(format!("{ns}/{group} is not a WorkloadGroup"));
            };
            let entry = entry_from_group(proxy, wg);
            may_control(proxy, &ns, &entry)?;
            let mut annotations: std::collections::BTreeMap<String, String> = wg
                .metadata
                .as_ref()
                .map(|m| m.annotations.clone())
                .unwrap_or_default();
            annotations.insert(GROUP_ANNOTATION.into(), group.into());
            annotations.insert(CONTROLLER_ANNOTATION.into(), self.instance.clone());
            annotations.insert(CONNECTED_AT.into(), now.clone());
            let object = json!({
                "apiVersion": "networking.istio.io/v1",
                "kind": "WorkloadEntry",
                "metadata": {
                    "name": name, "namespace": ns,
                    "labels": entry.labels, "annotations": annotations,
                    "ownerReferences": [{
                        "apiVersion": "networking.istio.io/v1", "kind": "WorkloadGroup",
                        "name": group, "uid": group_entry.config.metadata.uid, "controller": true,
                    }],
                },
                "spec": entry,
            });
            let object: DynamicObject =
                serde_json::from_value(object).map_err(|e| e.to_string())?;
            match self.api(&ns).create(&PostParams::default(), &object).await {
                Ok(_) => {}
                // Created meanwhile (another stream of the proxy, another instance): take it.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    self.mark_connected(&ns, &name, &now).await?;
                }
                Err(e) => {
                    return Err(format!(
                        "auto-registration WorkloadEntry of {} failed: error creating WorkloadEntry: {e}",
                        proxy.id
                    ));
                }
            }
            self.metrics.success.inc();
            info!(namespace = %ns, name, "auto-registered WorkloadEntry");
        }
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let slot = live.entry(format!("{ns}/{name}")).or_default();
        slot.0 += 1;
        slot.1 = now;
        Ok(())
    }

    async fn mark_connected(&self, ns: &str, name: &str, now: &str) -> Result<(), String> {
        let patch = json!({"metadata": {"annotations": {
            CONTROLLER_ANNOTATION: self.instance, CONNECTED_AT: now, DISCONNECTED_AT: null}}});
        self.api(ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| format!("marking WorkloadEntry {ns}/{name} connected: {e}"))
    }

    /// Marks the entry disconnected (when this instance still controls it, from the connection
    /// that ended), then deletes it if it is still disconnected after the grace period.
    async fn unregister(self: Arc<Self>, ns: String, name: String, connected_at: String) {
        let api = self.api(&ns);
        let controlled = |snapshot: &crate::store::Snapshot| {
            snapshot
                .get_named(Kind::WorkloadEntry, &ns, &name)
                .map(|e| e.config.metadata.annotations.clone())
        };
        let Some(annotations) = controlled(&self.store.snapshot()) else {
            return;
        };
        if annotations.get(CONTROLLER_ANNOTATION) != Some(&self.instance)
            || annotations.get(CONNECTED_AT) != Some(&connected_at)
        {
            return;
        }
        let patch = json!({"metadata": {"annotations": {
            CONNECTED_AT: null, DISCONNECTED_AT: now_rfc3339_nanos()}}});
        if let Err(e) = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            self.metrics.errors.inc();
            warn!(namespace = %ns, name, error = %e, "could not mark the WorkloadEntry disconnected");
            return;
        }
        self.metrics.unregister.inc();
        tokio::time::sleep(self.grace).await;
        let Some(annotations) = controlled(&self.store.snapshot()) else {
            return;
        };
        let still_gone = annotations.contains_key(DISCONNECTED_AT)
            && !annotations.contains_key(CONNECTED_AT)
            && annotations.contains_key(GROUP_ANNOTATION);
        if !still_gone {
            return;
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                self.metrics.deletes.inc();
                info!(namespace = %ns, name, "deleted the disconnected auto-registered WorkloadEntry");
            }
            Err(e) => {
                self.metrics.errors.inc();
                warn!(namespace = %ns, name, error = %e, "could not delete the disconnected WorkloadEntry");
            }
        }
    }
}

/// An `Arc` so a disconnection's clean-up can outlive the call.
pub struct Observer(pub Arc<Registrar>);

impl ConnectionObserver for Observer {
    fn connected<'a>(&'a self, proxy: &'a Proxy) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Some(group) = proxy.metadata.get(GROUP_METADATA).filter(|g| !g.is_empty()) else {
                return Ok(());
            };
            self.0.register(proxy, group).await.inspect_err(|_| {
                self.0.metrics.errors.inc();
            })
        })
    }

    fn disconnected(&self, proxy: Arc<Proxy>) {
        let Some(group) = proxy.metadata.get(GROUP_METADATA) else {
            return;
        };
        let Ok(name) = entry_name(&proxy, group) else {
            return;
        };
        let key = format!("{}/{name}", proxy.namespace);
        let connected_at = {
            let mut live = self.0.live.lock().unwrap_or_else(|p| p.into_inner());
            let Some(slot) = live.get_mut(&key) else {
                return;
            };
            slot.0 -= 1;
            if slot.0 > 0 {
                return;
            }
            let at = slot.1.clone();
            live.remove(&key);
            at
        };
        let registrar = self.0.clone();
        tokio::spawn(registrar.unregister(proxy.namespace.clone(), name, connected_at));
    }
}

/// istiod's `autoregisteredWorkloadEntryName`: `<group>-<first ip>[-<network>]`, colons of an
/// IPv6 address as dashes, at most 253 characters (the end kept).
pub fn entry_name(proxy: &Proxy, group: &str) -> Result<String, String> {
    if proxy.ip.is_empty() {
        return Err(format!(
            "auto-registration of {} failed: missing IP addresses",
            proxy.id
        ));
    }
    if proxy.namespace.is_empty() {
        return Err(format!(
            "auto-registration of {} failed: missing namespace",
            proxy.id
        ));
    }
    let mut name = format!("{group}-{}", proxy.ip.replace(':', "-"));
    if let Some(network) = proxy.metadata.get("NETWORK").filter(|n| !n.is_empty()) {
        name = format!("{name}-{network}");
    }
    if name.len() > 253 {
        name = name[name.len() - 253..].to_string();
    }
    Ok(name)
}

/// istiod's `workloadEntryFromGroup`: the template with the proxy's address, its labels over
/// the group's over the template's (the locality label left out: the entry's locality says
/// it), its network and locality.
pub fn entry_from_group(
    proxy: &Proxy,
    group: &crate::config::networking::WorkloadGroup,
) -> WorkloadEntry {
    let mut entry = group.template.clone().unwrap_or_default();
    entry.address = proxy.ip.clone();
    if let Some(meta) = &group.metadata {
        entry.labels.extend(meta.labels.clone());
    }
    entry.labels.extend(
        proxy
            .labels
            .iter()
            .filter(|(k, _)| *k != "istio-locality")
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    if let Some(network) = proxy.metadata.get("NETWORK").filter(|n| !n.is_empty()) {
        entry.network = network.clone();
    }
    if !proxy.locality.is_empty() {
        entry.locality = proxy.locality.clone();
    }
    entry
}

/// istiod's `ensureProxyCanControlEntry`: a verified proxy of the entry's namespace, with the
/// entry's service account when it names one.
fn may_control(proxy: &Proxy, entry_ns: &str, entry: &WorkloadEntry) -> Result<(), String> {
    let identity = proxy
        .identity
        .as_ref()
        .ok_or("registration of WorkloadEntry requires a verified identity")?;
    if identity.namespace != entry_ns {
        return Err(format!(
            "registration of WorkloadEntry namespace mismatch: {:?} vs {entry_ns:?}",
            identity.namespace
        ));
    }
    if !entry.service_account.is_empty() && identity.service_account != entry.service_account {
        return Err(format!(
            "registration of WorkloadEntry service account mismatch: {:?} vs {:?}",
            identity.service_account, entry.service_account
        ));
    }
    Ok(())
}

/// Now in RFC 3339 with nanoseconds, as istiod writes connection times.
fn now_rfc3339_nanos() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(metadata: &[(&str, &str)], labels: &[(&str, &str)]) -> Proxy {
        crate::testing::proxy(
            "sidecar~10.1.2.3~vm-1.vms~vms.svc.cluster.local",
            metadata,
            labels,
        )
    }

    /// The entry istiod makes: named for the group, address and network; the template's labels
    /// under the group's under the proxy's; the proxy's network and locality.
    #[test]
    fn an_entry_is_made_from_the_group_as_istiod_makes_it() {
        let group: crate::config::networking::WorkloadGroup = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "ratings", "tier": "group"}},
            "template": {"serviceAccount": "ratings", "labels": {"tier": "template", "team": "t"},
                         "ports": {"http": 8080}}
        }))
        .unwrap();
        let mut p = vm(
            &[(GROUP_METADATA, "ratings"), ("NETWORK", "vm-net")],
            &[("tier", "proxy"), ("istio-locality", "r.z")],
        );
        p.locality = "r/z".into();
        assert_eq!(
            entry_name(&p, "ratings").unwrap(),
            "ratings-10.1.2.3-vm-net"
        );
        let e = entry_from_group(&p, &group);
        assert_eq!(e.address, "10.1.2.3");
        assert_eq!(e.labels["tier"], "proxy");
        assert_eq!(e.labels["app"], "ratings");
        assert_eq!(e.labels["team"], "t");
        assert!(!e.labels.contains_key("istio-locality"));
        assert_eq!(e.network, "vm-net");
        assert_eq!(e.locality, "r/z");
        assert_eq!(e.ports["http"], 8080);
        // Only a verified proxy of the namespace, with the template's service account.
        assert!(may_control(&p, "vms", &e).is_err());
        p.identity = Some(crate::model::identity::Identity {
            trust_domain: "cluster.local".into(),
            namespace: "vms".into(),
            service_account: "other".into(),
        });
        assert!(
            may_control(&p, "vms", &e)
                .unwrap_err()
                .contains("service account")
        );
        p.identity.as_mut().unwrap().service_account = "ratings".into();
        assert!(may_control(&p, "vms", &e).is_ok());
        assert!(
            may_control(&p, "web", &e)
                .unwrap_err()
                .contains("namespace")
        );
        let v6 = crate::testing::proxy("sidecar~fd00::1~vm-1.vms~vms.svc.cluster.local", &[], &[]);
        assert_eq!(entry_name(&v6, "g").unwrap(), "g-fd00--1");
    }
}
