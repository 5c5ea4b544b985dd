//! What the control plane does in the remote clusters it leads, as istiod with EXTERNAL_ISTIOD
//! (a primary–remote install): a remote whose system namespace is annotated
//! `topology.istio.io/controlPlaneClusters` with this cluster's ID (or `*`) gets the root
//! certificate ConfigMap in each of its namespaces (written by the holder of a lease in that
//! cluster, as istiod's namespace controller) and our root in its webhook configurations of this
//! revision (by every replica, as istiod patches them).

use super::args::ServeArgs;
use super::daemon::{Daemon, identity};
use crate::config::Kind;
use crate::k8s::leader::LeaderElection;
use crate::source::kube::multicluster::RemoteClusters;
use crate::webhook::cabundle::CaBundlePatcher;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span};

/// The annotation on a remote's system namespace naming the control planes that lead it.
const CONTROL_PLANE_CLUSTERS: &str = "topology.istio.io/controlPlaneClusters";

/// istiod's lease for the namespace controller.
const NAMESPACE_CONTROLLER_LEASE: &str = "istio-namespace-controller-election";

/// Follows the remote clusters, starting each one's duties when this control plane leads it.
pub(super) fn start(
    args: &ServeArgs,
    daemon: &Daemon,
    roots: tokio::sync::watch::Receiver<Arc<str>>,
    clusters: RemoteClusters,
) {
    if !args.external_istiod {
        return;
    }
    let duties = Duties {
        system_namespace: args.system_namespace.clone(),
        local_cluster: args.cluster_id.clone(),
        revision: args.revision.clone(),
        lease: (args.lease_duration, args.lease_renew),
        wait: args.remote_cluster_timeout,
        store: daemon.store.clone(),
        metrics: DutyMetrics {
            leader: daemon.metrics.leader.clone(),
            ca: daemon.metrics.ca.clone(),
            webhook: daemon.metrics.webhook.clone(),
        },
        roots,
    };
    let cancel = daemon.cancel.clone();
    let tasks = daemon.tasks.clone();
    daemon.tasks.spawn(
        async move {
            let mut changes = clusters.subscribe();
            let mut running: BTreeMap<String, (u64, CancellationToken)> = BTreeMap::new();
            loop {
                let now = clusters.clients();
                running.retain(|id, (generation, stop)| {
                    let keep = now.get(id).is_some_and(|(g, _)| g == generation);
                    if !keep {
                        stop.cancel();
                    }
                    keep
                });
                for (id, (generation, client)) in now {
                    if running.contains_key(&id) {
                        continue;
                    }
                    let stop = cancel.child_token();
                    running.insert(id.clone(), (generation, stop.clone()));
                    let span = info_span!("remote-duties", cluster = %id);
                    tasks.spawn(duties.clone().run(id, client, stop).instrument(span));
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
            }
        }
        .instrument(info_span!("remote-duties")),
    );
}

#[derive(Clone)]
struct DutyMetrics {
    leader: Arc<crate::k8s::metrics::LeaderMetrics>,
    ca: Arc<crate::ca::metrics::CaMetrics>,
    webhook: Arc<crate::webhook::metrics::WebhookMetrics>,
}

#[derive(Clone)]
struct Duties {
    system_namespace: String,
    local_cluster: String,
    revision: String,
    lease: (Duration, Duration),
    wait: Duration,
    store: Arc<crate::store::Store>,
    metrics: DutyMetrics,
    roots: tokio::sync::watch::Receiver<Arc<str>>,
}

impl Duties {
    async fn run(self, cluster: String, client: kube::Client, stop: CancellationToken) {
        if !self.leads(&cluster, &stop).await {
            info!(
                "this control plane does not lead the cluster: its system namespace does not name it in {CONTROL_PLANE_CLUSTERS}"
            );
            return;
        }
        info!("leading the remote cluster: root certificates and webhook CA bundles");
        let election = LeaderElection {
            namespace: self.system_namespace.clone(),
            name: NAMESPACE_CONTROLLER_LEASE.into(),
            identity: identity(),
            lease_duration: self.lease.0,
            renew_every: self.lease.1,
        };
        let (leading, _election) =
            election.spawn(client.clone(), self.metrics.leader.clone(), stop.clone());
        let rootcert = crate::ca::rootcert::run(
            client.clone(),
            cluster,
            self.store.clone(),
            self.roots.clone(),
            leading,
            self.metrics.ca.clone(),
            stop.clone(),
        );
        let patcher = CaBundlePatcher {
            client,
            label_selector: format!("istio.io/rev={}", self.revision),
            roots: self.roots.clone(),
            metrics: self.metrics.webhook.clone(),
        };
        let (_always, every_replica) = tokio::sync::watch::channel(true);
        tokio::join!(rootcert, patcher.run(every_replica, stop));
    }

    /// Whether the remote's system namespace names this cluster (or `*`) as its control plane;
    /// read once its watchers have brought the namespace, waiting at most the sync timeout.
    async fn leads(&self, cluster: &str, stop: &CancellationToken) -> bool {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let snapshot = self.store.snapshot();
            if let Some(ns) = snapshot.get_in(Kind::Namespace, cluster, "", &self.system_namespace)
            {
                return ns
                    .config
                    .metadata
                    .annotations
                    .get(CONTROL_PLANE_CLUSTERS)
                    .is_some_and(|v| {
                        v.split(',')
                            .map(str::trim)
                            .any(|c| c == "*" || c == self.local_cluster)
                    });
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
    }
}
