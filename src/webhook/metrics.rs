//! The admission webhooks' metrics, registered by `cmd`.

use crate::metrics::{
    ReasonLabels, Registry, ResourceLabels, StatusLabels, TypeLabels, ValidationFailLabels,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

/// A webhook configuration's name (istiod's `webhook_patch_*` label).
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct ConfigNameLabels {
    pub name: String,
}

/// A webhook configuration and why patching it failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct ConfigFailureLabels {
    pub name: String,
    pub reason: String,
}

/// What the admission webhooks count: istiod's `galley_validation_*` and `sidecar_injection_*` series.
pub struct WebhookMetrics {
    /// Admission requests the validation webhook allowed (`galley_validation_passed`).
    pub validation_passed: Family<ResourceLabels, Counter>,
    /// Admission requests the validation webhook denied or could not judge (`galley_validation_failed`).
    pub validation_failed: Family<ValidationFailLabels, Counter>,
    /// Webhook HTTP requests refused before any review (`galley_validation_http_error{status}`).
    pub webhook_http_errors: Family<StatusLabels, Counter>,
    /// Pod admission requests the injector received (`sidecar_injection_requests`).
    pub injection_requests: Counter,
    /// Pods injected (`sidecar_injection_success`).
    pub injection_success: Counter,
    /// Pods the policy left alone (`sidecar_injection_skip`).
    pub injection_skipped: Counter,
    /// Injections that failed, by type (`sidecar_injection_failure{type}`).
    pub injection_failures: Family<TypeLabels, Counter>,
    /// Seconds to judge and render one injection (`sidecar_injection_time_seconds`).
    pub injection_time: Histogram,
    /// caBundle writes into webhook configurations, by outcome.
    pub webhook_ca_patches: Family<ReasonLabels, Counter>,
    /// caBundle writes tried, by configuration (istiod's `webhook_patch_attempts_total{name}`).
    pub patch_attempts: Family<ConfigNameLabels, Counter>,
    /// caBundle writes retried after a conflict or error (`webhook_patch_retries_total{name}`).
    pub patch_retries: Family<ConfigNameLabels, Counter>,
    /// caBundle writes given up (`webhook_patch_failures_total{name,reason}`).
    pub patch_failures: Family<ConfigFailureLabels, Counter>,
    /// Requests refused by a limit of the webhook port, by which (`webhook::limits`).
    pub webhook_refused: Family<ReasonLabels, Counter>,
}

impl WebhookMetrics {
    pub fn register(registry: &mut Registry) -> WebhookMetrics {
        WebhookMetrics {
            validation_passed: registry.register(
                "galley_validation_passed",
                "Resources the validation webhook allowed",
                Family::<ResourceLabels, Counter>::default(),
            ),
            validation_failed: registry.register(
                "galley_validation_failed",
                "Resources the validation webhook denied, by reason",
                Family::<ValidationFailLabels, Counter>::default(),
            ),
            webhook_http_errors: registry.register(
                "galley_validation_http_error",
                "Webhook requests refused before review, by HTTP status",
                Family::<StatusLabels, Counter>::default(),
            ),
            injection_requests: registry.register(
                "sidecar_injection_requests",
                "Pod admission requests received by the injector",
                Counter::default(),
            ),
            injection_success: registry.register(
                "sidecar_injection_success",
                "Pods the sidecar was injected into",
                Counter::default(),
            ),
            injection_skipped: registry.register(
                "sidecar_injection_skip",
                "Pods the injection policy left alone",
                Counter::default(),
            ),
            injection_failures: registry.register(
                "sidecar_injection_failure",
                "Injections that failed, by type",
                Family::<TypeLabels, Counter>::default(),
            ),
            injection_time: registry.register(
                "sidecar_injection_time_seconds",
                "Seconds to judge and render one sidecar injection",
                Histogram::new([0.1, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0]),
            ),
            patch_attempts: registry.register(
                "webhook_patch_attempts",
                "caBundle writes into webhook configurations tried, by configuration",
                Family::default(),
            ),
            patch_retries: registry.register(
                "webhook_patch_retries",
                "caBundle writes into webhook configurations retried, by configuration",
                Family::default(),
            ),
            patch_failures: registry.register(
                "webhook_patch_failures",
                "caBundle writes into webhook configurations given up, by configuration and reason",
                Family::default(),
            ),
            webhook_ca_patches: registry.register(
                "rudder_webhook_ca_bundle_patches",
                "caBundle writes into webhook configurations, by outcome",
                Family::<ReasonLabels, Counter>::default(),
            ),
            webhook_refused: registry.register(
                "rudder_webhook_refused",
                "Webhook requests refused by a limit (bytes in flight, busy, body timeout, JSON values), by reason",
                Family::<ReasonLabels, Counter>::default(),
            ),
        }
    }
}
