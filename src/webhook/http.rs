//! The webhook's HTTP side: what every handler shares (`WebhookState`), one AdmissionReview read
//! within its budgets and judged off the runtime (`judge_review`), and the two handlers, which
//! hand the request to the validator and the injector.

use super::{inject, limits, validate};
use crate::metrics::StatusLabels;
use crate::store::Store;
use crate::webhook::metrics::WebhookMetrics;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::warn;

#[derive(Clone)]
pub struct WebhookState {
    pub store: Arc<Store>,
    pub metrics: Arc<WebhookMetrics>,
    pub injector: Arc<inject::Injector>,
    pub ready: Arc<AtomicBool>,
    pub budget: Arc<limits::Budget>,
}

pub(super) async fn ready(State(s): State<WebhookState>) -> Response {
    if s.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

/// Why an HTTP request never became a review: answered with a status and counted, as istiod does.
fn http_error(metrics: &WebhookMetrics, status: StatusCode, message: String) -> Response {
    metrics
        .webhook_http_errors
        .get_or_create(&StatusLabels {
            status: status.as_u16().to_string(),
        })
        .inc();
    warn!(status = status.as_u16(), error = %message, "webhook request refused");
    (status, message).into_response()
}

/// Answers one AdmissionReview with `judge`: the body is read within the budgets of `limits`
/// (JSON only, bounded in bytes, time and values), then decoded and judged on a blocking thread
/// while a review slot is held, so heavy reviews never stall the runtime (nor the timers that
/// bound the others). A body that is not a review is answered with a review that denies it and
/// says why (the API server shows the message).
async fn judge_review<F>(
    state: &WebhookState,
    headers: &HeaderMap,
    body: Body,
    judge: F,
) -> Response
where
    F: FnOnce(&WebhookState, &AdmissionRequest<DynamicObject>) -> AdmissionResponse
        + Send
        + 'static,
{
    let metrics = &state.metrics;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/json") {
        return http_error(
            metrics,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("invalid Content-Type {content_type:?}, want `application/json`"),
        );
    }
    let (bytes, held): (Bytes, limits::Held) = match state.budget.read(body).await {
        Ok(b) => b,
        Err(refusal) => {
            metrics.refused(refusal.reason);
            return http_error(metrics, refusal.status, refusal.message);
        }
    };
    if bytes.is_empty() {
        return http_error(metrics, StatusCode::BAD_REQUEST, "no body found".into());
    }
    let state = state.clone();
    let judged = tokio::task::spawn_blocking(move || {
        let _held = held;
        review_response(match decode_review(&bytes) {
            Ok(request) => judge(&state, &request),
            Err(why) => AdmissionResponse::invalid(why),
        })
    })
    .await;
    judged.unwrap_or_else(|e| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("review failed: {e}"),
        )
            .into_response()
    })
}

/// The request of an AdmissionReview body, or why the body is not one.
fn decode_review(bytes: &[u8]) -> Result<AdmissionRequest<DynamicObject>, String> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(bytes).map_err(|e| format!("could not decode body: {e}"))?;
    review
        .try_into()
        .map_err(|_| "could not decode body: the AdmissionReview has no request".to_string())
}

fn review_response(response: AdmissionResponse) -> Response {
    let patch = response.patch.clone();
    let mut review = match serde_json::to_value(response.into_review()) {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("could not encode response: {e}"),
            )
                .into_response();
        }
    };
    // `patch` is bytes: base64 in JSON, as the API server's Go types write it.
    if let Some(bytes) = patch {
        use base64::Engine;
        review["response"]["patch"] = base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .into();
    }
    match serde_json::to_vec(&review) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not encode response: {e}"),
        )
            .into_response(),
    }
}

/// `/validate`: Istio config judged by the validator.
pub(super) async fn validate(
    State(s): State<WebhookState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    judge_review(&s, &headers, body, |s, request| {
        validate::admit(&s.metrics, request)
    })
    .await
}

/// `/inject` (and istiod's `/inject/cluster/<id>/net/<network>`): pods given to the injector.
pub(super) async fn inject(
    State(s): State<WebhookState>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let envs = inject::url_envs::parse(uri.path());
    judge_review(&s, &headers, body, move |s, request| {
        let started = std::time::Instant::now();
        let response = inject::admit(&s.injector, &s.metrics, request, &envs);
        s.metrics
            .injection_time
            .observe(started.elapsed().as_secs_f64());
        response
    })
    .await
}
