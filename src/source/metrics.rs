//! The config sources' metrics, registered by `cmd`.

use crate::metrics::{EventLabels, K8sEventLabels, KindLabels, ReasonLabels, Registry, TypeLabels};
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
        }
    }
}

/// What the Kubernetes watchers count.
pub struct KubeMetrics {
    /// Kubernetes watch events applied, by resource type and event (`pilot_k8s_reg_events`).
    pub k8s_events: Family<K8sEventLabels, Counter>,
    /// Kubernetes watch failures (retried with backoff), by resource type.
    pub k8s_watch_errors: Family<TypeLabels, Counter>,
    /// Istio objects from the API server that failed validation and were not applied, by kind.
    pub k8s_invalid_objects: Family<KindLabels, Counter>,
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
            k8s_watch_errors: registry.register(
                "rudder_k8s_watch_errors",
                "Kubernetes watch failures, retried with backoff",
                Family::<TypeLabels, Counter>::default(),
            ),
            k8s_invalid_objects: registry.register(
                "rudder_k8s_invalid_objects",
                "Istio objects from the API server rejected by validation",
                Family::<KindLabels, Counter>::default(),
            ),
        }
    }
}
