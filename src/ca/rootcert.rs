//! Writes ConfigMap `istio-ca-root-cert` (key `root-cert.pem`) into every namespace, and repairs it
//! when it is edited or deleted. Only the leader writes; every replica watches, so a new leader picks
//! up where the old one stopped. Driven by store events (Namespace and ConfigMap changes). One run
//! per cluster: the config cluster's, and each remote cluster this control plane leads (`cluster`
//! names it; its client, lease and objects are that cluster's).

use crate::ca::metrics::CaMetrics;
use crate::config::{ConfigKey, Kind, Spec};
use crate::metrics::ReasonLabels;
use crate::store::Store;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

pub use crate::config::mesh::ROOT_CERT_CONFIGMAP as NAME;
pub const KEY: &str = "root-cert.pem";

#[allow(clippy::too_many_arguments)]
pub async fn run(
    client: kube::Client,
    cluster: String,
    store: Arc<Store>,
    mut roots: watch::Receiver<Arc<str>>,
    mut leading: watch::Receiver<bool>,
    metrics: Arc<CaMetrics>,
    cancel: CancellationToken,
) {
    let mut events = store.subscribe();
    let mut resync = tokio::time::interval(Duration::from_secs(60));
    loop {
        if *leading.borrow_and_update() {
            let root_pem = roots.borrow_and_update().clone();
            reconcile(&client, &cluster, &store, &root_pem, &metrics).await;
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = leading.changed() => if changed.is_err() { return },
            // A root rotation: every namespace's ConfigMap gets the new bundle.
            changed = roots.changed() => if changed.is_err() { return },
            _ = resync.tick() => {}
            ev = events.recv() => {
                let relevant = match &ev {
                    Ok(e) => e.key.cluster == cluster && (e.key.kind == Kind::Namespace || (e.key.kind == Kind::ConfigMap && e.key.name == NAME)),
                    Err(_) => true,
                };
                if !relevant {
                    continue;
                }
                // Let a burst (a new namespace and its ConfigMap) settle.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A namespace being deleted: its ConfigMap goes with it and must not be written again (the API
/// server would refuse, and the namespace would be kept alive by a new object).
fn terminating(spec: &Spec) -> bool {
    match spec {
        Spec::Namespace(ns) => {
            ns.metadata.deletion_timestamp.is_some()
                || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
        }
        _ => false,
    }
}

async fn reconcile(
    client: &kube::Client,
    cluster: &str,
    store: &Store,
    root_pem: &str,
    metrics: &CaMetrics,
) {
    let snapshot = store.snapshot();
    for ns in snapshot
        .list(Kind::Namespace)
        .filter(|e| e.config.metadata.cluster == cluster)
        .filter(|e| !terminating(&e.config.spec))
        .map(|e| e.config.metadata.name.clone())
    {
        let key = ConfigKey {
            kind: Kind::ConfigMap,
            namespace: ns.clone(),
            name: NAME.into(),
            cluster: cluster.to_string(),
        };
        let existing = snapshot.get(&key);
        let current = existing.and_then(|e| match &e.config.spec {
            Spec::ConfigMap(cm) => cm.data.as_ref().and_then(|d| d.get(KEY)).cloned(),
            _ => None,
        });
        if current.as_deref() == Some(root_pem) {
            continue;
        }
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let mut cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(NAME.into()),
                namespace: Some(ns.clone()),
                labels: Some([("istio.io/config".to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            data: Some([(KEY.to_string(), root_pem.to_string())].into()),
            ..Default::default()
        };
        let result = match existing {
            None => api
                .create(&PostParams::default(), &cm)
                .await
                .map(|_| "created"),
            Some(e) => {
                cm.metadata.resource_version = Some(e.config.metadata.resource_version.clone());
                api.replace(NAME, &PostParams::default(), &cm)
                    .await
                    .map(|_| "repaired")
            }
        };
        let result = match result {
            // Created a moment ago (by us, or by another replica), and not yet seen by our watch:
            // the watch brings it, and its content is checked then.
            Err(kube::Error::Api(e)) if existing.is_none() && e.code == 409 => {
                debug!(namespace = %ns, "root cert ConfigMap already exists");
                continue;
            }
            // The namespace is being deleted, and our watch of Namespaces has not said so yet
            // (its ConfigMap's deletion can arrive first: watches of two kinds keep no order
            // between them). Nothing to write; the Namespace event follows.
            Err(kube::Error::Api(e))
                if existing.is_none()
                    && ((e.code == 403 && e.message.contains("being terminated"))
                        || e.code == 404) =>
            {
                debug!(namespace = %ns, "namespace is going away; root cert ConfigMap not written");
                continue;
            }
            other => other,
        };
        match result {
            Ok(outcome) => {
                debug!(namespace = %ns, outcome, "root cert ConfigMap written");
                metrics
                    .root_cert_writes
                    .get_or_create(&ReasonLabels {
                        reason: outcome.into(),
                    })
                    .inc();
            }
            Err(e) => {
                // A conflict means our view is stale; the watch will bring the new version and we retry.
                warn!(namespace = %ns, error = %e, "root cert ConfigMap write failed; will retry");
                metrics
                    .root_cert_writes
                    .get_or_create(&ReasonLabels {
                        reason: "error".into(),
                    })
                    .inc();
            }
        }
    }
}
