//! Every module's metrics, registered in one registry: what `/metrics` renders.

use crate::metrics::{Metrics, Registry};
use crate::store::Store;
use crate::xds::server::status::XdsStatus;
use std::sync::{Arc, OnceLock};

/// Every module's metrics, registered in one registry (what `/metrics` renders).
pub struct DaemonMetrics {
    pub registry: Arc<Metrics>,
    pub file: Arc<crate::source::metrics::FileMetrics>,
    pub kube: Arc<crate::source::metrics::KubeMetrics>,
    pub leader: Arc<crate::k8s::metrics::LeaderMetrics>,
    pub xds: Arc<crate::xds::metrics::XdsMetrics>,
    pub ca: Arc<crate::ca::metrics::CaMetrics>,
    pub webhook: Arc<crate::webhook::metrics::WebhookMetrics>,
    pub status: Arc<crate::status::writer::StatusMetrics>,
    pub registration: crate::autoregistration::RegistrationMetrics,
    /// Connections the HTTP ports closed themselves, by server and reason.
    pub http_closed: prometheus_client::metrics::family::Family<
        crate::metrics::ServerReasonLabels,
        prometheus_client::metrics::counter::Counter,
    >,
}

impl DaemonMetrics {
    /// What an HTTP port calls when it closes a connection itself (a deadline passed).
    pub fn http_closed(&self, server: &'static str) -> crate::activity::http::OnClose {
        let family = self.http_closed.clone();
        Arc::new(move |reason| {
            family
                .get_or_create(&crate::metrics::ServerReasonLabels {
                    server: server.into(),
                    reason: reason.into(),
                })
                .inc();
        })
    }

    /// `xds` is set once the xDS server has started: the per-proxy gauges read it.
    pub fn register(store: Arc<Store>, xds: Arc<OnceLock<XdsStatus>>) -> DaemonMetrics {
        let mut r = Registry::new();
        crate::source::metrics::StoreRevision::register(&mut r, store.clone());
        crate::source::metrics::UnhonouredFields::register(&mut r, store);
        r.register_collector(
            &["pilot_no_ip", "pilot_endpoint_not_ready"],
            Box::new(crate::xds::server::status::ProxyEndpointGauges { status: xds }),
        );
        let file = Arc::new(crate::source::metrics::FileMetrics::register(&mut r));
        let kube = Arc::new(crate::source::metrics::KubeMetrics::register(&mut r));
        let leader = Arc::new(crate::k8s::metrics::LeaderMetrics::register(&mut r));
        let xds = Arc::new(crate::xds::metrics::XdsMetrics::register(&mut r));
        let ca = Arc::new(crate::ca::metrics::CaMetrics::register(&mut r));
        let webhook = Arc::new(crate::webhook::metrics::WebhookMetrics::register(&mut r));
        let status = Arc::new(crate::status::writer::StatusMetrics::register(&mut r));
        let registration = crate::autoregistration::RegistrationMetrics::register(&mut r);
        let http_closed = r.register(
            "rudder_http_connections_closed",
            "Connections the HTTP ports (monitoring, http, webhook) closed because a deadline passed (idle: no request in flight, a trickled request's headers included; handshake_timeout)",
            prometheus_client::metrics::family::Family::default(),
        );
        // istiod's build info: dashboards track rollouts by it.
        let build = r.register(
            "istio_build",
            "Build info of the control plane (component, tag)",
            prometheus_client::metrics::family::Family::<
                crate::metrics::BuildLabels,
                prometheus_client::metrics::gauge::Gauge,
            >::default(),
        );
        build
            .get_or_create(&crate::metrics::BuildLabels {
                component: "pilot".into(),
                tag: crate::metrics::ISTIO_VERSION.into(),
            })
            .set(1);
        r.register(
            "rudder_build_info",
            "Rudder's own version (istio_build and pilot_info carry the Istio release it implements)",
            prometheus_client::metrics::family::Family::<
                crate::xds::metrics::VersionLabels,
                prometheus_client::metrics::gauge::Gauge,
            >::default(),
        )
        .get_or_create(&crate::xds::metrics::VersionLabels {
            version: env!("CARGO_PKG_VERSION").into(),
        })
        .set(1);
        r.register(
            "pilot_info",
            "Control-plane version",
            prometheus_client::metrics::family::Family::<
                crate::xds::metrics::VersionLabels,
                prometheus_client::metrics::gauge::Gauge,
            >::default(),
        )
        .get_or_create(&crate::xds::metrics::VersionLabels {
            version: crate::metrics::ISTIO_VERSION.into(),
        })
        .set(1);
        DaemonMetrics {
            registry: Arc::new(r.finish()),
            registration,
            file,
            kube,
            leader,
            xds,
            ca,
            webhook,
            status,
            http_closed,
        }
    }
}

/// docs/metrics.md lists istiod's series; each marked "yes" must be exported with istiod's name,
/// type and label names.
#[cfg(test)]
mod tests {
    use super::DaemonMetrics;
    use crate::metrics::{
        K8sEventLabels, ReasonLabels, ResourceLabels, StatusLabels, TypeLabels,
        ValidationFailLabels,
    };
    use crate::store::Store;
    use crate::webhook::metrics::{ConfigFailureLabels, ConfigNameLabels};
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    /// Gives every labelled family one sample, so that it is rendered.
    fn touch_every_family(m: &DaemonMetrics) {
        let t = |s: &str| TypeLabels { r#type: s.into() };
        let xds = &m.xds;
        xds.xds_connections
            .get_or_create(&xds.connection_labels("1.30.0"))
            .inc();
        xds.xds_pushes.get_or_create(&t("cds")).inc();
        xds.xds_rejects.get_or_create(&t("cds")).inc();
        for short in ["cds", "eds", "lds", "rds"] {
            xds.record_typed_reject(short, "sidecar~10.0.0.1~a.b~b.svc.cluster.local", 3);
        }
        xds.xds_push_time.get_or_create(&t("cds")).observe(0.1);
        xds.config_size.get_or_create(&t("cds")).observe(10.0);
        xds.push.push_triggers.get_or_create(&t("config")).inc();
        xds.push.inbound_updates.get_or_create(&t("config")).inc();
        m.ca.root_cert_expiry.set(4_000_000_000);
        m.ca.cert_chain_expiry.set(4_000_000_000);
        let event = K8sEventLabels {
            r#type: "Services".into(),
            event: "add".into(),
        };
        m.kube.k8s_events.get_or_create(&event).inc();
        m.kube.k8s_cfg_events.get_or_create(&event).inc();
        m.kube
            .managed_clusters
            .get_or_create(&crate::metrics::ClusterTypeLabels {
                cluster_type: "remote".into(),
            })
            .set(1);
        m.kube
            .remote_cluster_sync_status
            .get_or_create(&crate::metrics::ClusterStatusLabels {
                cluster: "west".into(),
                status: "synced".into(),
            })
            .set(1);
        m.kube
            .remote_cluster_secret_events
            .get_or_create(&crate::metrics::SourceEventLabels {
                event: "add".into(),
            })
            .inc();
        m.kube.remote_cluster_sync_timeouts.inc();
        let resource = ResourceLabels {
            group: "networking.istio.io".into(),
            version: "v1".into(),
            resource: "virtualservices".into(),
        };
        let w = &m.webhook;
        w.validation_passed.get_or_create(&resource).inc();
        w.validation_failed
            .get_or_create(&ValidationFailLabels {
                group: resource.group.clone(),
                version: resource.version.clone(),
                resource: resource.resource.clone(),
                reason: "invalid_resource".into(),
            })
            .inc();
        w.webhook_http_errors
            .get_or_create(&StatusLabels {
                status: "400".into(),
            })
            .inc();
        w.injection_failures.get_or_create(&t("pod")).inc();
        let name = ConfigNameLabels {
            name: "istio-sidecar-injector".into(),
        };
        w.patch_attempts.get_or_create(&name).inc();
        w.patch_retries.get_or_create(&name).inc();
        w.patch_failures
            .get_or_create(&ConfigFailureLabels {
                name: name.name.clone(),
                reason: "webhook_update_failure".into(),
            })
            .inc();
        m.ca.csr_errors
            .get_or_create(&ReasonLabels {
                reason: "csr".into(),
            })
            .inc();
    }

    /// Family name -> (type, label names), from Prometheus text.
    fn families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
        let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
                out.insert(name.into(), (kind.into(), BTreeSet::new()));
            }
        }
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let sample = &line[..name_end];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| sample.strip_suffix(s).filter(|f| out.contains_key(*f)))
                .unwrap_or(sample);
            let Some((_, labels)) = out.get_mut(family) else {
                continue;
            };
            if let Some(set) = line[name_end..]
                .strip_prefix('{')
                .and_then(|r| r.split_once('}'))
            {
                for pair in set.0.split(',') {
                    if let Some((k, _)) = pair.split_once('=')
                        && k != "le"
                    {
                        labels.insert(k.to_string());
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_istiod_series_in_docs_metrics_md_is_exported() {
        let m = DaemonMetrics::register(Arc::new(Store::default()), Arc::default());
        touch_every_family(&m);
        let exported = families(&m.registry.render());
        let table = include_str!("../../../docs/metrics.md");
        let mut checked = 0;
        for row in table.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            if !cells[4].starts_with("yes") {
                continue;
            }
            let name = cells[1].trim_matches('`');
            let want_labels: BTreeSet<String> = cells[3]
                .split(',')
                .map(|l| l.trim().trim_matches('`').to_string())
                .filter(|l| !l.is_empty())
                .collect();
            let Some((kind, labels)) = exported.get(name) else {
                panic!("{name} is not exported; have {:?}", exported.keys());
            };
            assert_eq!(kind, cells[2], "{name}: type");
            assert_eq!(labels, &want_labels, "{name}: labels");
            checked += 1;
        }
        assert!(checked >= 40, "only {checked} rows checked");
    }
}
