//! The xDS server's metrics, registered by `cmd` (names and labels are istiod's).

use crate::metrics::{
    ReasonLabels, Registry, TypeLabels, istiod_convergence_histogram, istiod_push_histogram,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A NACK's proxy and error code, as istiod labels its per-type reject gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct NodeErrLabels {
    pub node: String,
    pub err: String,
}

/// A proxy's Istio version (its `ISTIO_VERSION` metadata), as istiod labels `pilot_xds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct VersionLabels {
    pub version: String,
}

/// Distinct versions `pilot_xds` keeps; clients claiming further versions count under "other".
pub const MAX_VERSION_SERIES: usize = 100;

/// Distinct (proxy, code) series the per-type reject gauges keep; NACKs from further proxies are
/// counted under `node="other"`, so a NACK storm from many proxies cannot grow `/metrics` without
/// bound.
pub const MAX_REJECT_SERIES: usize = 1_000;

/// What the xDS server and its push pipeline count: istiod's `pilot_*` series.
pub struct XdsMetrics {
    /// Connected xDS clients, by the proxy's Istio version (`pilot_xds{version}`).
    pub xds_connections: Family<VersionLabels, Gauge>,
    connection_versions: AtomicUsize,
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
    /// Size of each response sent, by type (`pilot_xds_config_size_bytes`).
    pub config_size: Family<TypeLabels, Histogram>,
    /// Seconds a generated response took to be handed to its stream (`pilot_xds_send_time`).
    pub send_time: Histogram,
    /// Responses dropped because the proxy did not read in time (`pilot_xds_write_timeout`).
    pub write_timeouts: Counter,
    /// New streams that waited for pushes in flight before their first response
    /// (`rudder_xds_new_stream_waits_total`; `XdsLimits::new_stream_wait`).
    pub new_stream_waits: Counter,
    /// Secrets a proxy asked for and did not get (`pilot_sds_certificate_errors_total`).
    pub sds_errors: Counter,
    /// Responses that failed to build (`pilot_total_xds_internal_errors`). Rudder's generators
    /// cannot fail, so it stays 0; istiod's dashboards chart it.
    pub internal_errors: Counter,
    /// Requests answering a response other than the latest sent (`pilot_xds_expired_nonce`).
    pub expired_nonces: Counter,
    /// The largest request received so far, in bytes, to watch against the gRPC receive limit
    /// (`pilot_xds_recv_max`).
    pub recv_max: Gauge,
    /// NACKs by proxy and error code, one family per type, as istiod keeps them for older
    /// dashboards (`pilot_xds_cds_reject`, `_eds_`, `_lds_`, `_rds_`; istiod makes them gauges).
    pub cds_rejects: Family<NodeErrLabels, Gauge>,
    pub eds_rejects: Family<NodeErrLabels, Gauge>,
    pub lds_rejects: Family<NodeErrLabels, Gauge>,
    pub rds_rejects: Family<NodeErrLabels, Gauge>,
    reject_series: AtomicUsize,
    /// Reads of the built-resource cache, by outcome (`rudder_xds_cache_reads_total{type}`:
    /// `hit`, built earlier in the push; `kept`, from the push before, whose change did not
    /// touch it; `miss`, built). istiod's `xds_cache_reads` is off by default; this is ours.
    pub cache_reads: Family<TypeLabels, Counter>,
    /// The push pipeline: what it received, judged and built.
    pub push: PushPipelineMetrics,
    /// What the current push context holds and found wrong.
    pub mesh: MeshGauges,
}

/// Whether `labels` may have a series of its own in `family`: it has one already, or fewer than
/// `max` series were given out (`given` counts them). Families labelled with what clients send
/// (versions, proxy ids) stay bounded; the caller counts the rest under "other".
fn series_allowed<S, M>(family: &Family<S, M>, labels: &S, given: &AtomicUsize, max: usize) -> bool
where
    S: Clone + std::hash::Hash + Eq,
{
    if family.get(labels).is_some() || given.fetch_add(1, Ordering::Relaxed) < max {
        return true;
    }
    given.fetch_sub(1, Ordering::Relaxed);
    false
}

impl XdsMetrics {
    /// The `pilot_xds` series a proxy of `version` counts in (bounded: see `MAX_VERSION_SERIES`).
    pub fn connection_labels(&self, version: &str) -> VersionLabels {
        let labels = VersionLabels {
            version: version.to_string(),
        };
        if series_allowed(
            &self.xds_connections,
            &labels,
            &self.connection_versions,
            MAX_VERSION_SERIES,
        ) {
            return labels;
        }
        VersionLabels {
            version: "other".into(),
        }
    }

    /// Raises `pilot_xds_recv_max` to `bytes` when larger.
    pub fn record_request_size(&self, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let mut seen = self.recv_max.get();
        while bytes > seen {
            match self.recv_max.inner().compare_exchange_weak(
                seen,
                bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => seen = now,
            }
        }
    }

    /// Counts a NACK of `short` type (`cds`...) in istiod's per-type reject gauge.
    pub fn record_typed_reject(&self, short: &str, node: &str, code: i32) {
        let family = match short {
            "cds" => &self.cds_rejects,
            "eds" => &self.eds_rejects,
            "lds" => &self.lds_rejects,
            "rds" => &self.rds_rejects,
            _ => return,
        };
        let mut labels = NodeErrLabels {
            node: node.to_string(),
            err: code.to_string(),
        };
        if !series_allowed(family, &labels, &self.reject_series, MAX_REJECT_SERIES) {
            labels.node = "other".into();
        }
        family.get_or_create(&labels).inc();
    }
}

impl XdsMetrics {
    pub fn register(registry: &mut Registry) -> XdsMetrics {
        XdsMetrics {
            xds_connections: registry.register(
                "pilot_xds",
                "xDS streams currently connected, by the proxy's Istio version",
                Family::default(),
            ),
            connection_versions: AtomicUsize::new(0),
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
            cache_reads: registry.register(
                "rudder_xds_cache_reads",
                "Reads of the built-resource cache: hit (built earlier in this push), kept (from the push before, which the change did not touch), miss (built)",
                Family::<TypeLabels, Counter>::default(),
            ),
            new_stream_waits: registry.register(
                "rudder_xds_new_stream_waits",
                "New xDS streams that waited for pushes to connected proxies before their first response",
                Counter::default(),
            ),
            sds_errors: registry.register(
                "pilot_sds_certificate_errors_total",
                "Secrets a proxy asked for and did not get",
                Counter::default(),
            ),
            internal_errors: registry.register(
                "pilot_total_xds_internal_errors",
                "xDS responses that failed to build (Rudder's generators cannot fail)",
                Counter::default(),
            ),
            expired_nonces: registry.register(
                "pilot_xds_expired_nonce",
                "xDS requests answering a response other than the latest sent",
                Counter::default(),
            ),
            recv_max: registry.register(
                "pilot_xds_recv_max",
                "Largest xDS request received so far, in bytes",
                Gauge::default(),
            ),
            cds_rejects: registry.register(
                "pilot_xds_cds_reject",
                "CDS responses a proxy rejected, by proxy and error code",
                Family::default(),
            ),
            eds_rejects: registry.register(
                "pilot_xds_eds_reject",
                "EDS responses a proxy rejected, by proxy and error code",
                Family::default(),
            ),
            lds_rejects: registry.register(
                "pilot_xds_lds_reject",
                "LDS responses a proxy rejected, by proxy and error code",
                Family::default(),
            ),
            rds_rejects: registry.register(
                "pilot_xds_rds_reject",
                "RDS responses a proxy rejected, by proxy and error code",
                Family::default(),
            ),
            reject_series: AtomicUsize::new(0),
            push: PushPipelineMetrics::register(registry),
            mesh: MeshGauges::register(registry),
        }
    }
}

/// What the push pipeline counts: the changes it received and judged, its debounce and triggers,
/// the push contexts it built.
pub struct PushPipelineMetrics {
    /// Mesh configs (ConfigMap `istio`, or the `--mesh-config` file) that could not be read: the
    /// settings in force were kept.
    pub mesh_config_errors: Counter,
    /// From the first change of a debounce window to the push starting (`pilot_debounce_time`).
    pub debounce_time: Histogram,
    /// Pushes started, by trigger (`pilot_push_triggers{type}`).
    pub push_triggers: Family<TypeLabels, Counter>,
    /// The store revision of the last change the push loop judged, pushed or not
    /// (`rudder_push_judged_revision`; equal to `rudder_config_revision` when nothing waits).
    pub judged_revision: Gauge,
    /// Changes received, by what changed: Istio config, endpoints, a service, a service removed
    /// (`pilot_inbound_updates{type=config|eds|svc|svcdelete}`).
    pub inbound_updates: Family<TypeLabels, Counter>,
    /// Seconds to build a push context (`pilot_pushcontext_init_seconds`).
    pub push_context_init: Histogram,
}

impl PushPipelineMetrics {
    fn register(registry: &mut Registry) -> PushPipelineMetrics {
        PushPipelineMetrics {
            mesh_config_errors: registry.register(
                "rudder_mesh_config_errors",
                "Mesh configs that could not be read (the settings in force were kept)",
                Counter::default(),
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
            judged_revision: registry.register(
                "rudder_push_judged_revision",
                "The config store revision of the last change the push loop judged, pushed or not",
                Gauge::default(),
            ),
            inbound_updates: registry.register(
                "pilot_inbound_updates",
                "Changes received by the push pipeline, by type (config, eds, svc, svcdelete)",
                Family::<TypeLabels, Counter>::default(),
            ),
            push_context_init: registry.register(
                "pilot_pushcontext_init_seconds",
                "Seconds to build a push context",
                Histogram::new([0.01, 0.1, 0.5, 1.0, 3.0, 5.0]),
            ),
        }
    }
}

/// What the current push context holds and found wrong, as istiod's gauges of it.
pub struct MeshGauges {
    /// Services known (`pilot_services`).
    pub services: Gauge,
    /// VirtualServices in the mesh (`pilot_virt_services`).
    pub virtual_services: Gauge,
    /// Service ports without any endpoint (`pilot_eds_no_instances`).
    pub no_instances: Gauge,
    /// Proxies whose pod port two services of different protocols select, in the current push
    /// (`pilot_conflict_inbound_listener`).
    pub inbound_conflicts: Gauge,
    /// Outbound listeners where a TCP service lost its connections to another, in the current
    /// push (`pilot_conflict_outbound_listener_tcp_over_current_tcp`).
    pub outbound_tcp_conflicts: Gauge,
    /// ServiceEntry hosts dropped because another service has the hostname
    /// (`pilot_duplicate_envoy_clusters`).
    pub duplicate_clusters: Gauge,
    /// Hosts claimed by more than one mesh VirtualService (`pilot_vservice_dup_domain`).
    pub duplicate_domains: Gauge,
    /// Subset names repeated among one host's DestinationRules (`pilot_destrule_subsets`).
    pub duplicate_subsets: Gauge,
    /// EnvoyFilter patches of the current push that are not applied
    /// (`rudder_envoy_filter_patches_not_applied`; `/debug/envoy_filters` says why).
    pub envoy_filter_patches_not_applied: Gauge,
}

impl MeshGauges {
    fn register(registry: &mut Registry) -> MeshGauges {
        MeshGauges {
            services: registry.register(
                "pilot_services",
                "Services in the registry",
                Gauge::default(),
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
            inbound_conflicts: registry.register(
                "pilot_conflict_inbound_listener",
                "Proxies whose pod port two services of different protocols select",
                Gauge::default(),
            ),
            outbound_tcp_conflicts: registry.register(
                "pilot_conflict_outbound_listener_tcp_over_current_tcp",
                "Outbound listeners where a TCP service lost its connections to another",
                Gauge::default(),
            ),
            duplicate_clusters: registry.register(
                "pilot_duplicate_envoy_clusters",
                "ServiceEntry hosts dropped because another service has the hostname",
                Gauge::default(),
            ),
            duplicate_domains: registry.register(
                "pilot_vservice_dup_domain",
                "Hosts claimed by more than one VirtualService (the oldest wins)",
                Gauge::default(),
            ),
            duplicate_subsets: registry.register(
                "pilot_destrule_subsets",
                "Subset names repeated among the DestinationRules of one host",
                Gauge::default(),
            ),
            envoy_filter_patches_not_applied: registry.register(
                "rudder_envoy_filter_patches_not_applied",
                "EnvoyFilter patches of the current push that are not applied (see /debug/envoy_filters)",
                Gauge::default(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past `MAX_REJECT_SERIES` proxies, NACKs still count, under `node="other"`.
    #[test]
    fn reject_series_are_bounded() {
        let mut registry = Registry::default();
        let m = XdsMetrics::register(&mut registry);
        for i in 0..MAX_REJECT_SERIES + 10 {
            m.record_typed_reject("cds", &format!("proxy-{i}"), 3);
        }
        m.record_typed_reject("cds", "proxy-0", 3);
        m.record_typed_reject("sds", "proxy-0", 3);
        let labels = |node: &str| NodeErrLabels {
            node: node.into(),
            err: "3".into(),
        };
        assert_eq!(m.cds_rejects.get(&labels("proxy-0")).unwrap().get(), 2);
        assert_eq!(m.cds_rejects.get(&labels("other")).unwrap().get(), 10);
        assert!(
            m.cds_rejects
                .get(&labels(&format!("proxy-{MAX_REJECT_SERIES}")))
                .is_none()
        );
    }
}
