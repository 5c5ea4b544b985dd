//! Remote clusters, as istiod's multicluster secret controller reads them: every Secret of the
//! system namespace labelled `istio/multiCluster=true` holds one kubeconfig per key, the key being
//! the cluster's ID (what `istioctl create-remote-secret` writes). Each cluster gets its own
//! watchers of Services, EndpointSlices, Pods, Nodes and Namespaces, whose objects enter the store
//! marked with the cluster (`ObjectMeta::cluster`); Istio config is read from the config cluster
//! only. A changed kubeconfig restarts the cluster's watchers (what they had stays served until
//! the new ones relist); a key or Secret that goes away stops them and removes exactly that
//! cluster's objects. A cluster that becomes unreachable keeps its last objects while its watchers
//! retry with backoff, as istiod keeps its last endpoints. With `PILOT_MULTICLUSTER_KUBECONFIG_PATH`
//! the kubeconfigs come from files instead (`kubeconfig_dir`), one cluster per file.

use super::controller::{Ctx, Readiness, WatchSpec, run_watch, spawn_watch, typed};
use super::convert::IntoConfig;
use crate::config::mesh::ROOT_CERT_CONFIGMAP;
use crate::config::{Config, ConfigKey, Kind, Spec};
use crate::metrics::{ClusterStatusLabels, ClusterTypeLabels, SourceEventLabels, TypeLabels};
use crate::source::metrics::KubeMetrics;
use crate::store::{Change, StoreWriter};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, error, info, info_span, warn};

/// The label that makes a Secret of the system namespace a remote-cluster secret.
pub const MULTICLUSTER_SECRET_LABEL: &str = "istio/multiCluster";

/// The kinds a remote cluster's watchers read (istiod's per-cluster service registry).
pub const REMOTE_KINDS: [Kind; 6] = [
    Kind::Service,
    Kind::EndpointSlice,
    Kind::Pod,
    Kind::Node,
    Kind::Namespace,
    Kind::ConfigMap,
];

/// One cluster as `/debug/clusterz` lists it, in istiod's shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    pub id: String,
    /// `namespace/name` of the Secret that named the cluster (empty for the config cluster).
    pub secret_name: String,
    /// `syncing`, `synced`, `timeout` (not synced within `PILOT_REMOTE_CLUSTER_TIMEOUT`; still
    /// retried), or `failed` (the kubeconfig cannot be used: `error` says why).
    pub sync_status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// The remote clusters known now, shared with the admin server (their state) and the CA (their
/// clients, to review their pods' tokens).
#[derive(Clone)]
pub struct RemoteClusters {
    info: Arc<Mutex<BTreeMap<String, ClusterInfo>>>,
    /// Each watched cluster's client with its generation (a new kubeconfig is a new one).
    clients: Arc<Mutex<BTreeMap<String, (u64, kube::Client)>>>,
    /// Bumped whenever a client is added, replaced or removed.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for RemoteClusters {
    fn default() -> Self {
        RemoteClusters {
            info: Arc::default(),
            clients: Arc::default(),
            changed: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }
}

impl RemoteClusters {
    pub fn list(&self) -> Vec<ClusterInfo> {
        self.info
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The client of a remote cluster being watched.
    pub fn client(&self, id: &str) -> Option<kube::Client> {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .map(|(_, c)| c.clone())
    }

    /// Every watched cluster's client, with its generation.
    pub fn clients(&self) -> BTreeMap<String, (u64, kube::Client)> {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Changes whenever a cluster's client is added, replaced or removed.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The IDs of the remote clusters being watched.
    pub fn ids(&self) -> Vec<String> {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    fn set(&self, info: ClusterInfo) {
        self.info
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(info.id.clone(), info);
    }

    fn set_client(&self, id: &str, client: kube::Client) {
        // Only the controller's task writes: the next generation is the current one plus one.
        // The client is in place before anyone is told.
        let generation = *self.changed.borrow() + 1;
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), (generation, client));
        self.changed.send_replace(generation);
    }

    fn remove(&self, id: &str) {
        self.info
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        let removed = self
            .clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if removed.is_some() {
            self.changed.send_modify(|g| *g += 1);
        }
    }
}

/// How the remote clusters are found and used.
#[derive(Debug, Clone)]
pub struct MultiClusterConfig {
    pub system_namespace: String,
    /// The config cluster's ID (`--cluster-id`): a secret naming it is ignored, as in istiod.
    pub local_cluster_id: String,
    /// `PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS`: kubeconfig credentials istiod refuses
    /// unless listed (`exec`, `clientKey`, `clientCertificate`, `tokenFile`, auth providers
    /// other than `oidc`).
    pub insecure_options: BTreeSet<String>,
    /// `PILOT_REMOTE_CLUSTER_TIMEOUT`: how long the start waits for the remote clusters known
    /// then, and when a cluster still syncing is reported as `timeout`.
    pub sync_timeout: Duration,
    /// `PILOT_MULTICLUSTER_KUBECONFIG_PATH`: remote clusters come from the kubeconfig files of
    /// this directory instead of remote secrets (`kubeconfig_dir`), followed as it changes.
    pub kubeconfig_dir: Option<std::path::PathBuf>,
    /// Ambient multi-network: each remote's Gateway API Gateways are read too, for the
    /// east-west gateways of its network (`xds::generate::ztunnel::multi_network`).
    pub watch_gateways: bool,
}

/// Why a kubeconfig from a remote secret cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("not a kubeconfig: {0}")]
    Parse(String),
    #[error("{0} is not allowed (PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS)")]
    NotAllowed(String),
    #[error("cannot build a client: {0}")]
    Client(String),
}

/// Refuses the kubeconfig credentials istiod refuses: ones that read local files or run
/// programs, which a Secret writer could use to make the control plane leak its own secrets.
pub fn check_kubeconfig(
    kubeconfig: &kube::config::Kubeconfig,
    allowed: &BTreeSet<String>,
) -> Result<(), KubeconfigError> {
    let refuse = |what: &str| -> Result<(), KubeconfigError> {
        if allowed.contains(what) {
            Ok(())
        } else {
            Err(KubeconfigError::NotAllowed(what.to_string()))
        }
    };
    for named in &kubeconfig.auth_infos {
        let Some(auth) = &named.auth_info else {
            continue;
        };
        if let Some(provider) = &auth.auth_provider
            && provider.name != "oidc"
            && !allowed.contains(&provider.name)
        {
            return Err(KubeconfigError::NotAllowed(format!(
                "auth provider {}",
                provider.name
            )));
        }
        if auth.client_key.is_some() {
            refuse("clientKey")?;
        }
        if auth.client_certificate.is_some() {
            refuse("clientCertificate")?;
        }
        if auth.token_file.is_some() {
            refuse("tokenFile")?;
        }
        if auth.exec.is_some() {
            refuse("exec")?;
        }
    }
    Ok(())
}

/// A client for a remote cluster from its kubeconfig, once checked.
pub async fn remote_client(
    bytes: &[u8],
    allowed: &BTreeSet<String>,
) -> Result<kube::Client, KubeconfigError> {
    let text = std::str::from_utf8(bytes).map_err(|e| KubeconfigError::Parse(e.to_string()))?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(text)
        .map_err(|e| KubeconfigError::Parse(e.to_string()))?;
    check_kubeconfig(&kubeconfig, allowed)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| KubeconfigError::Client(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| KubeconfigError::Client(e.to_string()))
}

/// The kubeconfigs of a remote secret, by cluster ID; `None` when the object is not one.
fn remote_kubeconfigs(config: &Config) -> Option<BTreeMap<String, Vec<u8>>> {
    if config
        .metadata
        .labels
        .get(MULTICLUSTER_SECRET_LABEL)
        .map(String::as_str)
        != Some("true")
    {
        return None;
    }
    let Spec::Secret(secret) = &config.spec else {
        return None;
    };
    let mut out: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    Some(out)
}

/// A remote cluster being watched.
struct Running {
    secret: String,
    kubeconfig: Vec<u8>,
    cancel: CancellationToken,
    readiness: Arc<Readiness>,
    started: tokio::time::Instant,
    /// Counted in `remote_cluster_sync_timeouts_total` once it missed PILOT_REMOTE_CLUSTER_TIMEOUT.
    timed_out: bool,
}

/// The remote-cluster controller: started by `cmd` in Kubernetes mode, after the config
/// cluster's watchers (the Secrets come through them, so it reads them from the store).
pub struct MultiCluster {
    store: StoreWriter,
    metrics: Arc<KubeMetrics>,
    config: MultiClusterConfig,
    clusters: RemoteClusters,
    running: BTreeMap<String, Running>,
    /// Directory mode: what was last said about each file or cluster, so a problem that
    /// persists is logged and counted once, not at every look.
    reported: BTreeMap<String, String>,
    /// Directory mode: kubeconfigs refused, by cluster, not tried again until they change.
    refused: BTreeMap<String, Vec<u8>>,
    tasks: TaskTracker,
    cancel: CancellationToken,
}

/// How often a kubeconfig directory is read again.
const KUBECONFIG_DIR_INTERVAL: Duration = Duration::from_secs(1);

impl MultiCluster {
    pub fn new(
        store: StoreWriter,
        metrics: Arc<KubeMetrics>,
        config: MultiClusterConfig,
        clusters: RemoteClusters,
        tasks: TaskTracker,
        cancel: CancellationToken,
    ) -> MultiCluster {
        metrics
            .managed_clusters
            .get_or_create(&ClusterTypeLabels {
                cluster_type: "local".into(),
            })
            .set(1);
        MultiCluster {
            store,
            metrics,
            config,
            clusters,
            running: BTreeMap::new(),
            reported: BTreeMap::new(),
            refused: BTreeMap::new(),
            tasks,
            cancel,
        }
    }

    /// Starts the clusters the store's secrets name now, waits (at most the sync timeout) for
    /// them to sync, then keeps following the secrets on a task of its own until cancelled.
    pub async fn start(mut self) {
        let mut events = self.store.subscribe();
        let dir = self.config.kubeconfig_dir.clone();
        match &dir {
            Some(dir) => self.reconcile_dir(dir).await,
            None => self.reconcile_all().await,
        }
        let deadline = tokio::time::Instant::now() + self.config.sync_timeout;
        while self.running.values().any(|r| !r.readiness.is_ready())
            && tokio::time::Instant::now() < deadline
        {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        for (id, running) in &self.running {
            if !running.readiness.is_ready() {
                warn!(cluster = %id, pending = ?running.readiness.pending(),
                    "remote cluster not synced within PILOT_REMOTE_CLUSTER_TIMEOUT; starting without it (still syncing)");
            }
        }
        self.report_status();
        let tasks = self.tasks.clone();
        tasks.spawn(
            async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                let mut look = tokio::time::interval(KUBECONFIG_DIR_INTERVAL);
                loop {
                    tokio::select! {
                        _ = self.cancel.cancelled() => break,
                        _ = tick.tick() => self.report_status(),
                        _ = look.tick(), if dir.is_some() => {
                            if let Some(dir) = &dir {
                                self.reconcile_dir(dir).await;
                            }
                        }
                        event = events.recv(), if dir.is_none() => match event {
                            Ok(e) if self.is_candidate(&e.key) => {
                                let name = e.key.name.clone();
                                self.reconcile_secret(&name).await;
                            }
                            Ok(_) => {}
                            Err(RecvError::Lagged(_)) => self.reconcile_all().await,
                            Err(RecvError::Closed) => break,
                        },
                    }
                }
                for (_, running) in std::mem::take(&mut self.running) {
                    running.cancel.cancel();
                }
            }
            .instrument(info_span!("multicluster")),
        );
    }

    fn is_candidate(&self, key: &ConfigKey) -> bool {
        key.kind == Kind::Secret
            && key.cluster.is_empty()
            && key.namespace == self.config.system_namespace
    }

    async fn reconcile_all(&mut self) {
        let snapshot = self.store.snapshot();
        let mut names: BTreeSet<String> = snapshot
            .list_namespace(Kind::Secret, &self.config.system_namespace)
            .filter(|e| e.config.metadata.cluster.is_empty())
            .filter(|e| remote_kubeconfigs(&e.config).is_some())
            .map(|e| e.config.metadata.name.clone())
            .collect();
        let prefix = format!("{}/", self.config.system_namespace);
        names.extend(
            self.running
                .values()
                .filter_map(|r| r.secret.strip_prefix(&prefix))
                .map(str::to_string),
        );
        for name in names {
            self.reconcile_secret(&name).await;
        }
    }

    /// Directory mode: brings the clusters in line with the kubeconfig files there now. A
    /// cluster two files name keeps what it had (istiod's conflict rule); a refused kubeconfig is
    /// not tried again until its file changes.
    async fn reconcile_dir(&mut self, dir: &std::path::Path) {
        let read = super::kubeconfig_dir::read(dir);
        let mut said = BTreeMap::new();
        for (path, why) in &read.errors {
            said.insert(path.display().to_string(), why.clone());
        }
        let gone: Vec<String> = self
            .running
            .keys()
            .chain(self.refused.keys())
            .filter(|id| !read.by_cluster.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.refused.remove(&id);
            self.remove_cluster(&id);
            self.clusters.remove(&id);
        }
        for (id, files) in read.by_cluster {
            if id == self.config.local_cluster_id {
                said.insert(id, "names the config cluster; ignored".into());
                continue;
            }
            if files.len() > 1 {
                let paths: Vec<String> =
                    files.iter().map(|(p, _)| p.display().to_string()).collect();
                said.insert(
                    id,
                    format!(
                        "named by several kubeconfig files {paths:?}; the cluster keeps what it had"
                    ),
                );
                continue;
            }
            let Some((path, kubeconfig)) = files.into_iter().next() else {
                continue;
            };
            let unchanged = self
                .running
                .get(&id)
                .is_some_and(|r| r.kubeconfig == kubeconfig)
                || self.refused.get(&id) == Some(&kubeconfig);
            if unchanged {
                continue;
            }
            let source = path.display().to_string();
            self.start_cluster(&id, &source, kubeconfig.clone()).await;
            if self
                .running
                .get(&id)
                .is_some_and(|r| r.kubeconfig == kubeconfig)
            {
                self.refused.remove(&id);
            } else {
                self.refused.insert(id, kubeconfig);
            }
        }
        for (what, why) in &said {
            if self.reported.get(what) != Some(why) {
                error!(dir = %dir.display(), %what, error = %why,
                    "PILOT_MULTICLUSTER_KUBECONFIG_PATH: not used");
                self.metrics
                    .remote_cluster_errors
                    .get_or_create(&TypeLabels {
                        r#type: what.clone(),
                    })
                    .inc();
            }
        }
        self.reported = said;
        self.report_status();
    }

    /// Brings the clusters of secret `name` in line with what it holds now.
    async fn reconcile_secret(&mut self, name: &str) {
        let secret = format!("{}/{name}", self.config.system_namespace);
        let snapshot = self.store.snapshot();
        let wanted = snapshot
            .get_named(Kind::Secret, &self.config.system_namespace, name)
            .and_then(|e| remote_kubeconfigs(&e.config));
        // Its clusters: those running, and those whose kubeconfig was refused (listed as failed).
        let mut had: Vec<String> = self
            .running
            .iter()
            .filter(|(_, r)| r.secret == secret)
            .map(|(id, _)| id.clone())
            .collect();
        had.extend(
            self.clusters
                .list()
                .into_iter()
                .filter(|c| c.secret_name == secret && !self.running.contains_key(&c.id))
                .map(|c| c.id),
        );
        if wanted.is_none() && had.is_empty() {
            // Not a remote secret, and never was one: nothing to do (most Secrets).
            return;
        }
        let event = match (&wanted, had.is_empty()) {
            (None, _) => "delete",
            (Some(_), true) => "add",
            (Some(_), false) => "update",
        };
        self.metrics
            .remote_cluster_secret_events
            .get_or_create(&SourceEventLabels {
                event: event.into(),
            })
            .inc();
        let wanted = wanted.unwrap_or_default();
        for id in had.iter().filter(|id| !wanted.contains_key(*id)) {
            self.remove_cluster(id);
        }
        for (id, kubeconfig) in wanted {
            if id == self.config.local_cluster_id {
                info!(cluster = %id, secret = %secret,
                    "ignoring a remote secret's cluster: it would replace the config cluster");
                continue;
            }
            if let Some(running) = self.running.get(&id) {
                if running.secret != secret {
                    warn!(cluster = %id, secret = %secret, registered_by = %running.secret,
                        "cluster already registered by another secret; ignoring this one");
                    continue;
                }
                if running.kubeconfig == kubeconfig {
                    continue;
                }
            }
            self.start_cluster(&id, &secret, kubeconfig).await;
        }
        self.report_status();
    }

    async fn start_cluster(&mut self, id: &str, secret: &str, kubeconfig: Vec<u8>) {
        let client = match remote_client(&kubeconfig, &self.config.insecure_options).await {
            Ok(client) => client,
            Err(e) => {
                error!(cluster = %id, secret = %secret, error = %e,
                    "remote cluster kubeconfig refused; the cluster is not watched");
                self.metrics
                    .remote_cluster_errors
                    .get_or_create(&TypeLabels { r#type: id.into() })
                    .inc();
                // A cluster already running keeps its previous, working kubeconfig.
                if !self.running.contains_key(id) {
                    self.clusters.set(ClusterInfo {
                        id: id.to_string(),
                        secret_name: secret.to_string(),
                        sync_status: "failed".into(),
                        error: e.to_string(),
                    });
                }
                return;
            }
        };
        let action = if self.running.contains_key(id) {
            "update"
        } else {
            "add"
        };
        if let Some(previous) = self.running.remove(id) {
            // Its objects stay in the store until the new watchers' relist replaces them.
            previous.cancel.cancel();
        }
        info!(cluster = %id, secret = %secret, action, "remote cluster");
        let cancel = self.cancel.child_token();
        let readiness = Arc::new(Readiness::default());
        let ctx = Ctx {
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            readiness: readiness.clone(),
        };
        spawn_remote_watchers(&ctx, &client, id, &self.tasks, &cancel);
        if self.config.watch_gateways {
            spawn_remote_gateway_watch(&ctx, &client, id, &self.tasks, &cancel);
        }
        self.clusters.set_client(id, client);
        self.running.insert(
            id.to_string(),
            Running {
                secret: secret.to_string(),
                kubeconfig,
                cancel,
                readiness,
                started: tokio::time::Instant::now(),
                timed_out: false,
            },
        );
    }

    /// Stops a cluster's watchers and removes exactly its objects; a cluster whose kubeconfig was
    /// refused (never running) leaves `/debug/clusterz` too.
    fn remove_cluster(&mut self, id: &str) {
        let Some(running) = self.running.remove(id) else {
            self.clusters.remove(id);
            return;
        };
        info!(cluster = %id, secret = %running.secret, "remote cluster removed");
        running.cancel.cancel();
        let snapshot = self.store.snapshot();
        let gone: Vec<Change> = REMOTE_KINDS
            .iter()
            .chain([&Kind::KubernetesGateway])
            .flat_map(|kind| snapshot.list(*kind))
            .filter(|e| e.config.metadata.cluster == id)
            .map(|e| Change::Delete(e.config.key()))
            .collect();
        self.store.apply(gone);
        self.clusters.remove(id);
        for status in ["syncing", "synced", "timeout"] {
            self.metrics
                .remote_cluster_sync_status
                .remove(&ClusterStatusLabels {
                    cluster: id.into(),
                    status: status.into(),
                });
        }
    }

    /// Each running cluster's sync state, into `/debug/clusterz` and the metrics; a cluster that
    /// misses the sync timeout, at start or added later, is counted once.
    fn report_status(&mut self) {
        for (id, running) in &mut self.running {
            let status = if running.readiness.is_ready() {
                "synced"
            } else if running.started.elapsed() >= self.config.sync_timeout {
                "timeout"
            } else {
                "syncing"
            };
            if status == "timeout" && !running.timed_out {
                running.timed_out = true;
                self.metrics.remote_cluster_sync_timeouts.inc();
            }
            self.clusters.set(ClusterInfo {
                id: id.clone(),
                secret_name: running.secret.clone(),
                sync_status: status.into(),
                error: String::new(),
            });
            for s in ["syncing", "synced", "timeout"] {
                self.metrics
                    .remote_cluster_sync_status
                    .get_or_create(&ClusterStatusLabels {
                        cluster: id.clone(),
                        status: s.into(),
                    })
                    .set(i64::from(s == status));
            }
        }
        self.metrics
            .managed_clusters
            .get_or_create(&ClusterTypeLabels {
                cluster_type: "remote".into(),
            })
            .set(self.running.len() as i64);
    }
}

/// A watched object of cluster `id`: its store object marked with the cluster.
fn in_cluster<K: IntoConfig + 'static>(id: &str) -> super::controller::Convert<K> {
    let id = id.to_string();
    let convert = typed::<K>();
    Arc::new(move |k: K| {
        convert(k).map(|c| {
            c.map(|mut c| {
                c.metadata.cluster.clone_from(&id);
                c
            })
        })
    })
}

/// A remote cluster's Gateway API Gateways, with the addresses their status reports (how an
/// east-west gateway is reached). Not part of the cluster's sync: a cluster without the Gateway
/// API has no east-west gateway, and its other objects are served all the same.
fn spawn_remote_gateway_watch(
    ctx: &Ctx,
    client: &kube::Client,
    id: &str,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) {
    use kube::api::{ApiResource, DynamicObject};
    let kind = Kind::KubernetesGateway;
    let ar = ApiResource {
        group: kind.group().into(),
        version: "v1".into(),
        api_version: format!("{}/v1", kind.group()),
        kind: kind.qualified_name(),
        plural: kind.plural(),
    };
    let cluster = id.to_string();
    let convert: super::controller::Convert<DynamicObject> = Arc::new(move |obj: DynamicObject| {
        let key = ConfigKey {
            kind,
            namespace: obj.metadata.namespace.clone().unwrap_or_default(),
            name: obj.metadata.name.clone().unwrap_or_default(),
            cluster: cluster.clone(),
        };
        let value = super::controller::config_value(&obj, true).map_err(|e| (key.clone(), e))?;
        let mut config = Config::from_json(value, "default")
            .map_err(|e| (key.clone(), e.to_string()))?
            .ok_or_else(|| (key.clone(), "empty object".to_string()))?;
        config.metadata.cluster.clone_from(&cluster);
        Ok(Some(config))
    });
    let owner = id.to_string();
    let spec = WatchSpec {
        kind,
        part: format!("cluster/{id}/watch/Gateway.{}", kind.group()),
        convert,
        owns: Arc::new(move |k: &ConfigKey| k.cluster == owner),
        revision: None,
    };
    let fut = run_watch::<DynamicObject>(
        ctx.clone(),
        Api::all_with(client.clone(), &ar),
        watcher::Config::default(),
        spec,
        cancel.clone(),
    );
    tasks.spawn(fut.instrument(info_span!("k8s-watch", cluster = %id, kind = "Gateway")));
}

/// The watchers of one remote cluster, each owning exactly that cluster's objects of its kind.
fn spawn_remote_watchers(
    ctx: &Ctx,
    client: &kube::Client,
    id: &str,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
) {
    remote_watch::<Service>(ctx, client, id, tasks, cancel, Kind::Service);
    remote_watch::<EndpointSlice>(ctx, client, id, tasks, cancel, Kind::EndpointSlice);
    remote_watch::<Pod>(ctx, client, id, tasks, cancel, Kind::Pod);
    remote_watch::<Node>(ctx, client, id, tasks, cancel, Kind::Node);
    remote_watch::<Namespace>(ctx, client, id, tasks, cancel, Kind::Namespace);
    // The root cert ConfigMaps, for a remote cluster this control plane leads (`ca::rootcert`
    // repairs them from what the store shows).
    let owner = id.to_string();
    let spec = WatchSpec {
        kind: Kind::ConfigMap,
        part: format!("cluster/{id}/watch/ConfigMap/{ROOT_CERT_CONFIGMAP}"),
        convert: in_cluster::<k8s_openapi::api::core::v1::ConfigMap>(id),
        owns: Arc::new(move |k: &ConfigKey| k.cluster == owner && k.name == ROOT_CERT_CONFIGMAP),
        revision: None,
    };
    spawn_watch(
        ctx,
        tasks,
        cancel,
        Api::all(client.clone()),
        watcher::Config::default().fields(&format!("metadata.name={ROOT_CERT_CONFIGMAP}")),
        spec,
        info_span!("k8s-watch", cluster = %id, kind = "ConfigMap"),
    );
}

/// A Kubernetes kind of a remote cluster in every namespace, owning exactly that cluster's
/// objects of the kind.
fn remote_watch<K>(
    ctx: &Ctx,
    client: &kube::Client,
    id: &str,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
    kind: Kind,
) where
    K: kube::Resource<DynamicType = ()>
        + IntoConfig
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let owner = id.to_string();
    let spec = WatchSpec {
        kind,
        part: format!("cluster/{id}/watch/{}", kind.name()),
        convert: in_cluster::<K>(id),
        owns: Arc::new(move |k: &ConfigKey| k.cluster == owner),
        revision: None,
    };
    spawn_watch(
        ctx,
        tasks,
        cancel,
        Api::all(client.clone()),
        watcher::Config::default(),
        spec,
        info_span!("k8s-watch", cluster = %id, kind = kind.name()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str) -> kube::config::Kubeconfig {
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"https://192.0.2.1\"}}}}]\nusers: [{{name: u, user: {user}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n"
        );
        kube::config::Kubeconfig::from_yaml(&yaml).unwrap()
    }

    /// As istiod: tokens, inline certificates and OIDC pass; credentials that read local files
    /// or run programs are refused unless PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS lists
    /// them, and so are the other auth providers.
    #[test]
    fn kubeconfigs_that_read_files_or_run_programs_are_refused() {
        let none = BTreeSet::new();
        for ok in [
            "{token: abc}",
            "{client-certificate-data: Zm9v, client-key-data: YmFy}",
            "{auth-provider: {name: oidc, config: {}}}",
        ] {
            assert!(check_kubeconfig(&kubeconfig(ok), &none).is_ok(), "{ok}");
        }
        for (refused, option) in [
            (
                "{exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}}",
                "exec",
            ),
            (
                "{client-key: /etc/key, client-certificate-data: Zm9v}",
                "clientKey",
            ),
            ("{client-certificate: /etc/cert}", "clientCertificate"),
            ("{tokenFile: /var/run/secrets/token}", "tokenFile"),
            ("{auth-provider: {name: gcp, config: {}}}", "gcp"),
        ] {
            let e = check_kubeconfig(&kubeconfig(refused), &none).unwrap_err();
            assert!(e.to_string().contains(option), "{refused}: {e}");
            let allowed = BTreeSet::from([option.to_string()]);
            assert!(
                check_kubeconfig(&kubeconfig(refused), &allowed).is_ok(),
                "{refused} with {option} allowed"
            );
        }
    }

    /// A remote secret's value that is no kubeconfig (not UTF-8, not YAML, not a Config, a
    /// context naming nothing) is an error to report, never a panic.
    #[tokio::test]
    async fn garbage_kubeconfigs_are_errors() {
        let none = BTreeSet::new();
        for bytes in [
            &[0xff, 0xfe, 0x00][..],
            b"{not yaml",
            b"apiVersion: v1\nkind: Config\n",
            b"apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n",
            b"- a\n- b\n",
        ] {
            assert!(remote_client(bytes, &none).await.is_err(), "{bytes:?}");
        }
    }

    #[test]
    fn remote_secrets_are_read_by_label_and_key() {
        let secret = |labelled: bool| -> Config {
            let labels = if labelled {
                serde_json::json!({MULTICLUSTER_SECRET_LABEL: "true"})
            } else {
                serde_json::json!({})
            };
            let s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "istio-remote-secret-west", "namespace": "istio-system",
                    "labels": labels},
                "data": {"west": "YXBpVmVyc2lvbjogdjE="},
            }))
            .unwrap();
            s.into_config()
        };
        let found = remote_kubeconfigs(&secret(true)).unwrap();
        assert_eq!(found["west"], b"apiVersion: v1");
        assert!(remote_kubeconfigs(&secret(false)).is_none());
    }
}
