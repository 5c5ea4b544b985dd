//! The monitoring/debug HTTP server (istiod's 15014 and 8080): metrics, readiness, version, and the
//! debug views of the config store.

use crate::metrics::Metrics;
use crate::source::file::FileStatus;
use crate::store::Store;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct AdminState {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    pub sources: Arc<Mutex<Vec<FileStatus>>>,
    /// Set once every source finished its initial sync.
    pub ready: Arc<AtomicBool>,
}

pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/ready", get(ready))
        .route("/version", get(version))
        .route("/debug/configz", get(configz))
        .route("/debug/sources", get(sources))
        .with_state(state)
}

async fn metrics(State(s): State<AdminState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
        .into_response()
}

async fn ready(State(s): State<AdminState>) -> Response {
    if s.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "initial config sync not finished\n",
        )
            .into_response()
    }
}

async fn version() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "name": env!("CARGO_PKG_NAME"),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// Every config object, as `kubectl get -o json` would show it, plus the store's resource version.
async fn configz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let snap = s.store.snapshot();
    let items: Vec<serde_json::Value> = crate::config::Kind::ALL
        .into_iter()
        .flat_map(|k| snap.list(k))
        .map(|e| {
            let mut v = serde_json::to_value(&*e.config).unwrap_or_default();
            v["metadata"]["resourceVersion"] = e.version.to_string().into();
            v
        })
        .collect();
    Json(serde_json::json!({ "revision": snap.revision(), "items": items }))
}

async fn sources(State(s): State<AdminState>) -> Json<Vec<FileStatus>> {
    Json(s.sources.lock().unwrap_or_else(|p| p.into_inner()).clone())
}
