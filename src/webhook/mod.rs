//! The admission webhooks istiod serves on 15017 (HTTPS): `/validate` for Istio config and `/inject`
//! for pods, both AdmissionReview v1, plus `/ready`. The caBundle controller in `cabundle` keeps the
//! webhook configurations trusting our CA.

pub mod cabundle;
mod http;
pub mod inject;
pub mod limits;
pub mod metrics;
pub mod tags;
pub mod validate;

use axum::Router;
use axum::routing::{get, post};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use http::WebhookState;
pub use limits::{MAX_BODY_BYTES, WebhookLimits};

pub fn router(state: WebhookState) -> Router {
    Router::new()
        .route("/validate", post(http::validate))
        .route("/validate/", post(http::validate))
        // istiod also answers `/inject/cluster/<id>/net/<network>` (multicluster templates).
        .route("/inject", post(http::inject))
        .route("/inject/", post(http::inject))
        .route("/inject/{*rest}", post(http::inject))
        .route("/ready", get(http::ready))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
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

/// Serves `app` over TLS until `cancel` fires, then lets open requests finish. A connection idle
/// for `idle_timeout` (no request in flight) is closed (`activity::http`).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    idle_timeout: Duration,
    on_close: crate::activity::http::OnClose,
    cancel: CancellationToken,
) {
    crate::activity::http::serve(
        "webhook",
        listener,
        app,
        Some(crate::activity::http::acceptor(tls)),
        idle_timeout,
        on_close,
        cancel,
    )
    .await
}
