//! Process-wide metrics in Prometheus text format. Modules get an `Arc<Metrics>` and bump counters;
//! the monitoring server renders them. Istio's metric names are used wherever Istio has one.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub kind: String,
    pub event: String,
}

pub struct Metrics {
    registry: Registry,
    /// Files that could not be loaded, by reason (syntax, invalid, conflict, io).
    pub config_file_errors: Family<ReasonLabels, Counter>,
    /// Files currently rejected (their last good objects are still served).
    pub config_files_invalid: Gauge,
    /// Objects in the store per kind.
    pub config_objects: Family<KindLabels, Gauge>,
    /// Store changes per kind and event type.
    pub config_events: Family<EventLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let config_file_errors = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "rudder_config_file_errors",
            "Config files rejected by the file source, by reason",
            config_file_errors.clone(),
        );
        let config_files_invalid = Gauge::default();
        registry.register(
            "rudder_config_files_invalid",
            "Config files currently rejected; their last good objects are still served",
            config_files_invalid.clone(),
        );
        let config_objects = Family::<KindLabels, Gauge>::default();
        registry.register(
            "rudder_config_objects",
            "Config objects in the store, by kind",
            config_objects.clone(),
        );
        let config_events = Family::<EventLabels, Counter>::default();
        registry.register(
            "rudder_config_events",
            "Changes applied to the config store, by kind and event",
            config_events.clone(),
        );
        Metrics {
            registry,
            config_file_errors,
            config_files_invalid,
            config_objects,
            config_events,
        }
    }

    pub fn file_error(&self, reason: &str) {
        self.config_file_errors
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
