//! The CA's metrics, registered by `cmd`.

use crate::metrics::{ReasonLabels, Registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// What the CA counts: istiod's `citadel_server_*` series, and root ConfigMap writes.
pub struct CaMetrics {
    /// CSRs received (`citadel_server_csr_count`).
    pub csr_count: Counter,
    /// Certificates issued (`citadel_server_success_cert_issuance_count`).
    pub cert_issued: Counter,
    /// CSR requests refused, by reason (authentication, identity, csr, signing).
    pub csr_errors: Family<ReasonLabels, Counter>,
    /// istiod's per-cause refusal counters, which its alerts use: callers not authenticated
    /// (or not allowed to impersonate), CSRs that do not parse, CSRs asking for another identity,
    /// and signing failures.
    pub authentication_failures: Counter,
    pub csr_parsing_errors: Counter,
    pub id_extraction_errors: Counter,
    pub csr_sign_errors: Counter,
    /// Root ConfigMap writes by the leader, by outcome.
    pub root_cert_writes: Family<ReasonLabels, Counter>,
    /// When the root and the signing certificate expire, in Unix seconds: what operators alert on
    /// (`citadel_server_root_cert_expiry_timestamp`, `citadel_server_cert_chain_expiry_timestamp`).
    pub root_cert_expiry: Gauge,
    pub cert_chain_expiry: Gauge,
    /// Self-signed roots renewed by this replica before they expired.
    pub root_rotations: Counter,
}

impl CaMetrics {
    pub fn register(registry: &mut Registry) -> CaMetrics {
        let metrics = CaMetrics {
            csr_count: registry.register(
                "citadel_server_csr_count",
                "Certificate signing requests received",
                Counter::default(),
            ),
            cert_issued: registry.register(
                "citadel_server_success_cert_issuance_count",
                "Certificates issued",
                Counter::default(),
            ),
            csr_errors: registry.register(
                "citadel_server_csr_errors",
                "Certificate signing requests refused, by reason",
                Family::<ReasonLabels, Counter>::default(),
            ),
            authentication_failures: registry.register(
                "citadel_server_authentication_failure_count",
                "Certificate requests whose caller was not authenticated or not allowed",
                Counter::default(),
            ),
            csr_parsing_errors: registry.register(
                "citadel_server_csr_parsing_err_count",
                "Certificate requests whose CSR did not parse",
                Counter::default(),
            ),
            id_extraction_errors: registry.register(
                "citadel_server_id_extraction_err_count",
                "Certificate requests whose CSR asked for an identity the caller does not have",
                Counter::default(),
            ),
            csr_sign_errors: registry.register(
                "citadel_server_csr_sign_err_count",
                "Certificate requests that failed to be signed",
                Counter::default(),
            ),
            root_cert_writes: registry.register(
                "rudder_root_cert_configmap_writes",
                "istio-ca-root-cert ConfigMap writes, by outcome",
                Family::<ReasonLabels, Counter>::default(),
            ),
            root_cert_expiry: registry.register(
                "citadel_server_root_cert_expiry_timestamp",
                "Unix time at which the CA's root certificate expires",
                Gauge::default(),
            ),
            cert_chain_expiry: registry.register(
                "citadel_server_cert_chain_expiry_timestamp",
                "Unix time at which the CA's signing certificate expires",
                Gauge::default(),
            ),
            root_rotations: registry.register(
                "rudder_ca_root_rotations",
                "Self-signed roots renewed (same key, new validity) before they expired",
                Counter::default(),
            ),
        };
        registry.register_collector(
            &["citadel_server_root_cert_expiry_seconds"],
            Box::new(ExpiresIn {
                name: "citadel_server_root_cert_expiry_seconds",
                help: "Seconds until the CA's root certificate expires (negative once it has)",
                at: metrics.root_cert_expiry.clone(),
            }),
        );
        registry.register_collector(
            &["citadel_server_cert_chain_expiry_seconds"],
            Box::new(ExpiresIn {
                name: "citadel_server_cert_chain_expiry_seconds",
                help: "Seconds until the CA's signing certificate expires (negative once it has)",
                at: metrics.cert_chain_expiry.clone(),
            }),
        );
        metrics
    }
}

/// istiod's derived gauge: the time left before an expiry timestamp, computed when scraped (none
/// before the timestamp is known).
#[derive(Debug)]
struct ExpiresIn {
    name: &'static str,
    help: &'static str,
    at: Gauge,
}

impl prometheus_client::collector::Collector for ExpiresIn {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        let at = self.at.get();
        if at == 0 {
            return Ok(());
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let left = Gauge::<i64>::default();
        left.set(at - now);
        let metric = encoder.encode_descriptor(self.name, self.help, None, left.metric_type())?;
        left.encode(metric)
    }
}
