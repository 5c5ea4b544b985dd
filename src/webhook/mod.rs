//! The admission webhooks istiod serves on 15017 (HTTPS): `/validate` for Istio config and `/inject`
//! for pods, both AdmissionReview v1, plus `/ready`. The caBundle controller in `cabundle` keeps the
//! webhook configurations trusting our CA.

pub mod cabundle;
pub mod inject;
pub mod metrics;
pub mod validate;

use crate::metrics::StatusLabels;
use crate::store::Store;
use crate::webhook::metrics::WebhookMetrics;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span, warn};

/// Largest AdmissionReview accepted. The API server caps a request at 3 MiB; a review carries the
/// object twice (object and oldObject) plus envelope.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// A TLS handshake that takes longer than this is dropped, so idle sockets cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct WebhookState {
    pub store: Arc<Store>,
    pub metrics: Arc<WebhookMetrics>,
    pub injector: Arc<inject::Injector>,
    pub ready: Arc<AtomicBool>,
}

pub fn router(state: WebhookState) -> Router {
    Router::new()
        .route("/validate", post(validate::handle))
        .route("/validate/", post(validate::handle))
        // istiod also answers `/inject/cluster/<id>/net/<network>` (multicluster templates).
        .route("/inject", post(inject::handle))
        .route("/inject/", post(inject::handle))
        .route("/inject/{*rest}", post(inject::handle))
        .route("/ready", get(ready))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}

async fn ready(State(s): State<WebhookState>) -> Response {
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

/// Reads an AdmissionReview body: JSON only, bounded in size, and a request inside. A body that is not
/// a review is answered with a review that denies it and says why (the API server shows the message).
pub(crate) async fn read_review(
    metrics: &WebhookMetrics,
    headers: &HeaderMap,
    body: Body,
) -> Result<AdmissionRequest<DynamicObject>, Response> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/json") {
        return Err(http_error(
            metrics,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("invalid Content-Type {content_type:?}, want `application/json`"),
        ));
    }
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return Err(http_error(
                metrics,
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("could not read body (limit {MAX_BODY_BYTES} bytes): {e}"),
            ));
        }
    };
    if bytes.is_empty() {
        return Err(http_error(
            metrics,
            StatusCode::BAD_REQUEST,
            "no body found".into(),
        ));
    }
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            return Err(review_response(AdmissionResponse::invalid(format!(
                "could not decode body: {e}"
            ))));
        }
    };
    review.try_into().map_err(|_| {
        review_response(AdmissionResponse::invalid(
            "could not decode body: the AdmissionReview has no request",
        ))
    })
}

pub(crate) fn review_response(response: AdmissionResponse) -> Response {
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

/// TLS for the webhook port: our serving certificate, HTTP/2 and HTTP/1.1 (the API server speaks both).
pub fn tls_config(
    chain_pem: &[String],
    key_pem: &str,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let mut certs = Vec::new();
    for pem in chain_pem {
        for cert in rustls_pemfile::certs(&mut pem.as_bytes()) {
            certs.push(cert?);
        }
    }
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())?
        .ok_or_else(|| anyhow::anyhow!("serving key PEM holds no private key"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` over TLS until `cancel` fires, then lets open requests finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    cancel: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "webhook accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(
            async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        debug!("TLS handshake timed out");
                        return;
                    }
                };
                let builder = auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection_with_upgrades(
                    TokioIo::new(tls),
                    TowerToHyperService::new(app),
                );
                if let Err(e) = watcher.watch(conn.into_owned()).await {
                    debug!(error = %e, "webhook connection ended with an error");
                }
            }
            .instrument(info_span!("webhook-conn", %peer)),
        );
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        warn!("webhook connections still open after 5s; closing");
    }
}
