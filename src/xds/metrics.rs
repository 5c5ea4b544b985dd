//! The xDS server's metrics, registered by `cmd` (names and labels are istiod's).

use crate::metrics::{
    ReasonLabels, Registry, TypeLabels, istiod_convergence_histogram, istiod_push_histogram,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

/// What the xDS server and its push pipeline count: istiod's `pilot_*` series.
pub struct XdsMetrics {
    /// Connected xDS clients (Istio: `pilot_xds`).
    pub xds_connections: Gauge,
    /// Responses pushed, by xDS type (`pilot_xds_pushes{type}`).
    pub xds_pushes: Family<TypeLabels, Counter>,
    /// NACKs received, by type (`pilot_total_xds_rejects{type}`).
    pub xds_rejects: Family<TypeLabels, Counter>,
    /// Requests that could not be served (bad node, unknown type...), by reason.
    pub xds_errors: Family<ReasonLabels, Counter>,
    /// Time to generate and send one response, by type (`pilot_xds_push_time{type}`).
    pub xds_push_time: Family<TypeLabels, Histogram>,
    /// From the first config change to a proxy receiving the push (`pilot_proxy_convergence_time`).
    pub proxy_convergence_time: Histogram,
    /// Time a push waited in a proxy's mailbox before its stream took it (`pilot_proxy_queue_time`).
    pub proxy_queue_time: Histogram,
    /// From the first change of a debounce window to the push starting (`pilot_debounce_time`).
    pub debounce_time: Histogram,
    /// Pushes started, by trigger (`pilot_push_triggers{type}`).
    pub push_triggers: Family<TypeLabels, Counter>,
    /// Services known (`pilot_services`).
    pub services: Gauge,
    /// Size of each response sent, by type (`pilot_xds_config_size_bytes`).
    pub config_size: Family<TypeLabels, Histogram>,
    /// Seconds a generated response took to be handed to its stream (`pilot_xds_send_time`).
    pub send_time: Histogram,
    /// Responses dropped because the proxy did not read in time (`pilot_xds_write_timeout`).
    pub write_timeouts: Counter,
    /// VirtualServices in the mesh (`pilot_virt_services`).
    pub virtual_services: Gauge,
    /// Service ports without any endpoint (`pilot_eds_no_instances`).
    pub no_instances: Gauge,
}

impl XdsMetrics {
    pub fn register(registry: &mut Registry) -> XdsMetrics {
        XdsMetrics {
            xds_connections: registry.register(
                "pilot_xds",
                "xDS streams currently connected",
                Gauge::default(),
            ),
            xds_pushes: registry.register(
                "pilot_xds_pushes",
                "xDS responses sent, by type",
                Family::<TypeLabels, Counter>::default(),
            ),
            xds_rejects: registry.register(
                "pilot_total_xds_rejects",
                "xDS responses a proxy rejected (NACK), by type",
                Family::<TypeLabels, Counter>::default(),
            ),
            xds_errors: registry.register(
                "rudder_xds_errors",
                "xDS requests refused, by reason",
                Family::<ReasonLabels, Counter>::default(),
            ),
            xds_push_time: registry.register(
                "pilot_xds_push_time",
                "Seconds to generate and send one xDS response, by type",
                Family::<TypeLabels, Histogram>::new_with_constructor(
                    istiod_push_histogram as fn() -> Histogram,
                ),
            ),
            proxy_convergence_time: registry.register(
                "pilot_proxy_convergence_time",
                "Seconds from the first config change to a proxy having received the push",
                istiod_convergence_histogram(),
            ),
            proxy_queue_time: registry.register(
                "pilot_proxy_queue_time",
                "Seconds a push waited for its proxy's stream to take it",
                istiod_convergence_histogram(),
            ),
            debounce_time: registry.register(
                "pilot_debounce_time",
                "Seconds a change spent in the debouncer before its push started",
                istiod_push_histogram(),
            ),
            push_triggers: registry.register(
                "pilot_push_triggers",
                "Pushes started, by what triggered them",
                Family::<TypeLabels, Counter>::default(),
            ),
            services: registry.register(
                "pilot_services",
                "Services in the registry",
                Gauge::default(),
            ),
            config_size: registry.register(
                "pilot_xds_config_size_bytes",
                "Size of the xDS responses sent, by type",
                Family::<TypeLabels, Histogram>::new_with_constructor(
                    crate::metrics::istiod_config_size_histogram as fn() -> Histogram,
                ),
            ),
            send_time: registry.register(
                "pilot_xds_send_time",
                "Seconds a generated response took to be handed to its stream",
                istiod_push_histogram(),
            ),
            write_timeouts: registry.register(
                "pilot_xds_write_timeout",
                "xDS responses dropped because the proxy did not read in time",
                Counter::default(),
            ),
            virtual_services: registry.register(
                "pilot_virt_services",
                "VirtualServices in the mesh",
                Gauge::default(),
            ),
            no_instances: registry.register(
                "pilot_eds_no_instances",
                "Service ports without any endpoint",
                Gauge::default(),
            ),
        }
    }
}
