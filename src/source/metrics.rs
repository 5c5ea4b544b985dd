//! The config sources' metrics, registered by `cmd`.

use crate::metrics::{
    ClusterStatusLabels, ClusterTypeLabels, EventLabels, K8sEventLabels, KindLabels, ReasonLabels,
    Registry, SourceEventLabels, TriggerLabels, TypeLabels,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// What the file source counts.
pub struct FileMetrics {
    /// Files that could not be loaded, by reason (syntax, invalid, conflict, io).
    pub config_file_errors: Family<ReasonLabels, Counter>,
    /// Files currently rejected (their last good objects are still served).
    pub config_files_invalid: Gauge,
    /// Objects in the store per kind.
    pub config_objects: Family<KindLabels, Gauge>,
    /// Store changes per kind and event type.
    pub config_events: Family<EventLabels, Counter>,
    /// Rescans of the config directory, by what started them (`start`, `watch`, `resync`).
    pub config_dir_scans: Family<TriggerLabels, Counter>,
}

impl FileMetrics {
    pub fn register(registry: &mut Registry) -> FileMetrics {
        FileMetrics {
            config_file_errors: registry.register(
                "rudder_config_file_errors",
                "Config files rejected by the file source, by reason",
                Family::<ReasonLabels, Counter>::default(),
            ),
            config_files_invalid: registry.register(
                "rudder_config_files_invalid",
                "Config files currently rejected; their last good objects are still served",
                Gauge::default(),
            ),
            config_objects: registry.register(
                "rudder_config_objects",
                "Config objects in the store, by kind",
                Family::<KindLabels, Gauge>::default(),
            ),
            config_events: registry.register(
                "rudder_config_events",
                "Changes applied to the config store, by kind and event",
                Family::<EventLabels, Counter>::default(),
            ),
            config_dir_scans: registry.register(
                "rudder_config_dir_scans",
                "Rescans of the config directory, by trigger (start, watch, resync)",
                Family::<TriggerLabels, Counter>::default(),
            ),
        }
    }
}

/// What the Kubernetes watchers count.
pub struct KubeMetrics {
    /// Kubernetes watch events applied, by resource type and event (`pilot_k8s_reg_events`).
    pub k8s_events: Family<K8sEventLabels, Counter>,
    /// Istio config watch events applied, by kind and event (`pilot_k8s_cfg_events`), kept apart
    /// from the registry's as istiod keeps them.
    pub k8s_cfg_events: Family<K8sEventLabels, Counter>,
    /// Kubernetes watch failures (retried with backoff), by resource type.
    pub k8s_watch_errors: Family<TypeLabels, Counter>,
    /// Istio objects from the API server that failed validation and were not applied, by kind.
    pub k8s_invalid_objects: Family<KindLabels, Counter>,
    /// Every watch event the source has judged, by kind: applied, unchanged (a status write) or
    /// refused. A test waits on it to know an event that changes nothing has been seen.
    pub k8s_events_judged: Family<KindLabels, Counter>,
    /// Installed CRDs of APIs Rudder does not serve yet (the Kubernetes Gateway API).
    pub unserved_crds: Gauge,
    /// Clusters whose services Rudder reads, local (1) and remote (`istiod_managed_clusters`).
    pub managed_clusters: Family<ClusterTypeLabels, Gauge>,
    /// 1 for each remote cluster's current state (`istiod_remote_cluster_sync_status`).
    pub remote_cluster_sync_status: Family<ClusterStatusLabels, Gauge>,
    /// Remote clusters not synced within PILOT_REMOTE_CLUSTER_TIMEOUT at the start
    /// (`remote_cluster_sync_timeouts_total`).
    pub remote_cluster_sync_timeouts: Counter,
    /// Remote-cluster secret events (`remote_cluster_secret_events_total`).
    pub remote_cluster_secret_events: Family<SourceEventLabels, Counter>,
    /// Remote-cluster kubeconfigs refused (malformed, or naming credentials istiod does not
    /// allow), by cluster.
    pub remote_cluster_errors: Family<TypeLabels, Counter>,
}

impl FileMetrics {
    /// Counts a rejected file (`rudder_config_file_errors_total{reason}`).
    pub fn file_error(&self, reason: &str) {
        self.config_file_errors
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }
}

impl KubeMetrics {
    pub fn register(registry: &mut Registry) -> KubeMetrics {
        KubeMetrics {
            k8s_events: registry.register(
                "pilot_k8s_reg_events",
                "Kubernetes watch events applied to the registry, by type and event",
                Family::<K8sEventLabels, Counter>::default(),
            ),
            k8s_cfg_events: registry.register(
                "pilot_k8s_cfg_events",
                "Istio config watch events applied, by kind and event",
                Family::<K8sEventLabels, Counter>::default(),
            ),
            k8s_watch_errors: registry.register(
                "rudder_k8s_watch_errors",
                "Kubernetes watch failures, retried with backoff",
                Family::<TypeLabels, Counter>::default(),
            ),
            unserved_crds: registry.register(
                "rudder_k8s_unserved_crds",
                "Installed CRDs of APIs Rudder does not serve yet (the Kubernetes Gateway API): their objects are not watched",
                Gauge::default(),
            ),
            k8s_events_judged: registry.register(
                "rudder_k8s_watch_events_judged",
                "Kubernetes watch events the source has judged (applied, unchanged or refused), by kind",
                Family::<KindLabels, Counter>::default(),
            ),
            k8s_invalid_objects: registry.register(
                "rudder_k8s_invalid_objects",
                "Istio objects from the API server rejected by validation",
                Family::<KindLabels, Counter>::default(),
            ),
            managed_clusters: registry.register(
                "istiod_managed_clusters",
                "Number of clusters managed by the control plane, by cluster_type (local, remote)",
                Family::<ClusterTypeLabels, Gauge>::default(),
            ),
            remote_cluster_sync_status: registry.register(
                "istiod_remote_cluster_sync_status",
                "Synchronization state of each remote cluster: 1 for the state it is in",
                Family::<ClusterStatusLabels, Gauge>::default(),
            ),
            remote_cluster_sync_timeouts: registry.register(
                "remote_cluster_sync_timeouts",
                "Remote clusters that took too long to sync at the start (which went on without them)",
                Counter::default(),
            ),
            remote_cluster_secret_events: registry.register(
                "remote_cluster_secret_events",
                "Remote cluster secret events, by event",
                Family::<SourceEventLabels, Counter>::default(),
            ),
            remote_cluster_errors: registry.register(
                "rudder_remote_cluster_errors",
                "Remote cluster kubeconfigs that could not be used, by type (the cluster ID)",
                Family::<TypeLabels, Counter>::default(),
            ),
        }
    }
}

/// `rudder_config_unhonoured_fields{kind,field}`: how many objects in the store set each field
/// Rudder accepts but does not honour yet (`validation::unhonoured`; `field` is the list's path,
/// empty for a kind that is not acted on at all). Computed on scrape, once per store revision.
pub struct UnhonouredFields {
    store: std::sync::Arc<crate::store::Store>,
    counted: std::sync::Mutex<(u64, Vec<(UnhonouredLabels, i64)>)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct UnhonouredLabels {
    pub kind: String,
    pub field: String,
}

impl std::fmt::Debug for UnhonouredFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnhonouredFields")
    }
}

impl UnhonouredFields {
    pub fn register(registry: &mut Registry, store: std::sync::Arc<crate::store::Store>) {
        registry.register_collector(
            &["rudder_config_unhonoured_fields"],
            Box::new(UnhonouredFields {
                store,
                counted: std::sync::Mutex::new((u64::MAX, Vec::new())),
            }),
        );
    }

    fn count(&self) -> Vec<(UnhonouredLabels, i64)> {
        let snapshot = self.store.snapshot();
        let mut counted = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        if counted.0 != snapshot.revision() {
            let mut by_field: std::collections::BTreeMap<(String, String), i64> =
                std::collections::BTreeMap::new();
            for kind in crate::config::Kind::config_kinds() {
                for entry in snapshot.list(kind) {
                    let mut seen = std::collections::BTreeSet::new();
                    for (_, u) in crate::validation::unhonoured::entries(&entry.config) {
                        if seen.insert(u.path) {
                            *by_field
                                .entry((kind.qualified_name(), u.path.to_string()))
                                .or_default() += 1;
                        }
                    }
                }
            }
            // The mesh ConfigMap's MeshConfig fields Rudder does not act on.
            for entry in snapshot.list(crate::config::Kind::ConfigMap) {
                for (field, _) in crate::validation::unhonoured::fields(&entry.config) {
                    *by_field.entry(("ConfigMap".into(), field)).or_default() += 1;
                }
            }
            *counted = (
                snapshot.revision(),
                by_field
                    .into_iter()
                    .map(|((kind, field), n)| (UnhonouredLabels { kind, field }, n))
                    .collect(),
            );
        }
        counted.1.clone()
    }
}

impl prometheus_client::collector::Collector for UnhonouredFields {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        let family = Family::<UnhonouredLabels, Gauge>::default();
        for (labels, n) in self.count() {
            family.get_or_create(&labels).set(n);
        }
        let metric = encoder.encode_descriptor(
            "rudder_config_unhonoured_fields",
            "Config objects that set a field Rudder accepts but does not honour yet, by kind and field",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}

/// The store's current revision, read when scraped (`rudder_config_revision`): with
/// `rudder_push_judged_revision`, what tells that the push loop has judged every change.
pub struct StoreRevision {
    store: std::sync::Arc<crate::store::Store>,
}

impl std::fmt::Debug for StoreRevision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreRevision")
    }
}

impl StoreRevision {
    pub fn register(registry: &mut Registry, store: std::sync::Arc<crate::store::Store>) {
        registry.register_collector(
            &["rudder_config_revision"],
            Box::new(StoreRevision { store }),
        );
    }
}

impl prometheus_client::collector::Collector for StoreRevision {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        let gauge = Gauge::<i64>::default();
        gauge.set(self.store.snapshot().revision() as i64);
        let metric = encoder.encode_descriptor(
            "rudder_config_revision",
            "The config store's revision: every change to Istio config or the service registry's sources moves it",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}
