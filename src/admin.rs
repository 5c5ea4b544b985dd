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
    /// Set once the xDS server runs (after the initial sync).
    pub xds: Arc<Mutex<Option<Arc<crate::xds::server::XdsShared>>>>,
}

pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/ready", get(ready))
        .route("/version", get(version))
        .route("/debug/configz", get(configz))
        .route("/debug/sources", get(sources))
        .route("/debug/adsz", get(adsz))
        .route("/debug/syncz", get(syncz))
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
    let items: Vec<serde_json::Value> = crate::config::Kind::ISTIO
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

/// Connected proxies with their per-type subscription and sync state.
async fn adsz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let conns = xds_connections(&s);
    Json(serde_json::json!({ "totalClients": conns.len(), "clients": conns }))
}

/// Per proxy and type: sent, acked or rejected (what `istioctl proxy-status` shows).
async fn syncz(State(s): State<AdminState>) -> Json<Vec<serde_json::Value>> {
    let conns = xds_connections(&s);
    Json(
        conns
            .into_iter()
            .map(|c| {
                let types: serde_json::Map<String, serde_json::Value> = c
                    .types
                    .iter()
                    .map(|(t, st)| {
                        let state = if st.last_nack.is_some() {
                            "NACKED"
                        } else if st.nonce_sent.is_empty() {
                            "NOT SENT"
                        } else if st.version_acked == st.version_sent {
                            "SYNCED"
                        } else {
                            "STALE"
                        };
                        (crate::xds::generate::short_type(t).to_string(), serde_json::json!({ "state": state, "sent": st.version_sent, "acked": st.version_acked, "error": st.last_nack }))
                    })
                    .collect();
                serde_json::json!({ "proxy": c.proxy.id, "connection": c.id, "delta": c.delta, "types": types })
            })
            .collect(),
    )
}

fn xds_connections(s: &AdminState) -> Vec<crate::xds::server::ConnectionStatus> {
    let xds = s.xds.lock().unwrap_or_else(|p| p.into_inner()).clone();
    xds.map(|x| x.connections()).unwrap_or_default()
}
