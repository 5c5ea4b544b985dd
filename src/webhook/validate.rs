//! `/validate`: the ValidatingAdmissionWebhook for Istio config, with istiod's rules, messages and
//! metric reasons (`galley_validation_failed{reason}`).

use crate::config::{Config, ConfigError, Kind};
use crate::metrics::{ResourceLabels, ValidationFailLabels};
use crate::webhook::metrics::WebhookMetrics;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use tracing::{info, warn};

/// istiod's reason labels for `galley_validation_failed`.
pub mod reason {
    pub const UNSUPPORTED_OPERATION: &str = "unsupported_operation";
    pub const YAML_DECODE_ERROR: &str = "yaml_decode_error";
    pub const UNKNOWN_TYPE: &str = "unknown_type";
    pub const CRD_CONVERSION_ERROR: &str = "crd_conversion_error";
    pub const INVALID_CONFIG: &str = "invalid_resource";
}

/// The verdict on one request. Not Create/Update (a delete, a connect) is allowed unexamined.
pub fn admit(
    metrics: &WebhookMetrics,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let allow = AdmissionResponse::from(request);
    let fail = |reason: &str, message: String| {
        metrics
            .validation_failed
            .get_or_create(&ValidationFailLabels {
                group: request.resource.group.clone(),
                version: request.resource.version.clone(),
                resource: request.resource.resource.clone(),
                reason: reason.into(),
            })
            .inc();
        info!(
            reason,
            kind = %request.kind.kind,
            name = %request.name,
            namespace = request.namespace.as_deref().unwrap_or(""),
            error = %message,
            "validation webhook denied a request"
        );
        AdmissionResponse::from(request).deny(message)
    };
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        warn!(operation = ?request.operation, "unsupported webhook operation");
        // istiod counts these as failures but lets them through.
        let _ = fail(
            reason::UNSUPPORTED_OPERATION,
            format!("unsupported operation {:?}", request.operation),
        );
        return allow;
    }
    let kind = match istio_kind(&request.kind.group, &request.kind.kind) {
        Some(k) => k,
        None => {
            return fail(
                reason::UNKNOWN_TYPE,
                format!(
                    "unrecognized type {}",
                    gvk_string(
                        &request.kind.group,
                        &request.kind.version,
                        &request.kind.kind
                    )
                ),
            );
        }
    };
    let Some(object) = &request.object else {
        return fail(
            reason::YAML_DECODE_ERROR,
            "cannot decode configuration: the request carries no object".into(),
        );
    };
    let mut value = match serde_json::to_value(object) {
        Ok(v) => v,
        Err(e) => {
            return fail(
                reason::YAML_DECODE_ERROR,
                format!("cannot decode configuration: {e}"),
            );
        }
    };
    // The API server may leave apiVersion/kind out of the embedded object; the request names them.
    if let Some(obj) = value.as_object_mut() {
        obj.entry("apiVersion")
            .or_insert_with(|| format!("{}/{}", request.kind.group, request.kind.version).into());
        obj.entry("kind")
            .or_insert_with(|| request.kind.kind.clone().into());
    }
    let namespace = request.namespace.as_deref().unwrap_or("default");
    let config = match Config::from_json(value, namespace) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return fail(
                reason::UNKNOWN_TYPE,
                format!("unrecognized type {}", request.kind.kind),
            );
        }
        Err(e @ ConfigError::Invalid { .. }) => {
            return fail(
                reason::CRD_CONVERSION_ERROR,
                format!("error decoding configuration: {e}"),
            );
        }
        Err(e) => {
            return fail(
                reason::YAML_DECODE_ERROR,
                format!("cannot decode configuration: {e}"),
            );
        }
    };
    debug_assert_eq!(config.kind, kind);
    let verdict = crate::validation::check(&config);
    if !verdict.errors.is_empty() {
        let text: Vec<String> = verdict.errors.iter().map(ToString::to_string).collect();
        return fail(
            reason::INVALID_CONFIG,
            format!("configuration is invalid: {}", text.join("; ")),
        );
    }
    metrics
        .validation_passed
        .get_or_create(&ResourceLabels {
            group: request.resource.group.clone(),
            version: request.resource.version.clone(),
            resource: request.resource.resource.clone(),
        })
        .inc();
    let mut allow = allow;
    if !verdict.warnings.is_empty() {
        // kubectl prints each as `Warning: …`, as it does for istiod's.
        allow.warnings = Some(verdict.warnings.iter().map(ToString::to_string).collect());
    }
    allow
}

fn istio_kind(group: &str, kind: &str) -> Option<Kind> {
    Kind::from_name(kind).filter(|k| k.is_istio() && k.group() == group)
}

fn gvk_string(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        format!("{version}, Kind={kind}")
    } else {
        format!("{group}/{version}, Kind={kind}")
    }
}
